//! Tests of the follower: the round state machine stepped by the chain's facts, against the chain's own machine.

use super::*;
use synod_protocol::{RoundPhase, RoundStatus};

const POOL: u32 = 3;

fn timeline() -> Timeline {
    // Timeout 10, window 5, jury delay 2, vote margin 20: settled 2·5 + 2 + 30 + 1 = 43
    // blocks after finality.
    Timeline::for_pool(10, 5, 2, 20)
}

/// `RoundOpened` of `round` in block `at`, with the deadline the chain names.
fn opened(round: u32, at: u64) -> SynodEvent {
    SynodEvent::RoundOpened {
        pool: POOL,
        round,
        deadline: timeline().deadline(at) as u32,
    }
}

fn finalized(round: u32) -> SynodEvent {
    SynodEvent::CheckpointFinalized {
        pool: POOL,
        round,
        hash: [round as u8; 32],
    }
}

fn voided(round: u32) -> SynodEvent {
    SynodEvent::RoundVoided { pool: POOL, round }
}

/// Steps every block after the last one seen up to `n` (`events` in block `n`, none
/// before), as a subscription that misses nothing; the actions they made due.
fn at(r: &mut PoolRounds, n: u64, events: &[SynodEvent]) -> Vec<(u32, Action)> {
    let from = r.last.map_or(n, |l| l + 1);
    let mut out = Vec::new();
    for b in from..n {
        out.extend(r.block(b, &[]).actions);
    }
    let last = r.block(n, events);
    assert!(!last.resynced);
    out.extend(last.actions);
    out
}

/// The member reaches each milestone of a round at the block the chain's own machine does:
/// verification at finality, the end of late commits and of challenges, settlement; a
/// voided round is told once and nothing after; other pools' events change nothing.
#[test]
fn the_member_steps_each_round_with_the_chains_facts_and_acts_at_the_chains_blocks() {
    let t = timeline();
    let mut r = PoolRounds::new(POOL, t);
    let other = SynodEvent::CheckpointFinalized {
        pool: POOL + 1,
        round: 1,
        hash: [9; 32],
    };
    assert_eq!(at(&mut r, 100, &[opened(1, 100), other]), []);
    assert_eq!(
        r.get(1).map(RoundState::status),
        Some(RoundStatus::Open {
            opened_at: 100,
            round_stake: 0
        })
    );
    assert_eq!(at(&mut r, 104, &[]), []);
    assert_eq!(
        at(&mut r, 105, &[finalized(1), opened(2, 105)]),
        [(1, Action::Verify { until: 115 })]
    );
    assert_eq!(r.get(1).unwrap().phase(105), RoundPhase::LateCommits);
    assert_eq!(at(&mut r, 110, &[]), []);
    assert_eq!(at(&mut r, 111, &[]), [(1, Action::CloseLateCommits)]);
    // Round 2 is not final by its deadline (opened at 105, timeout 10).
    assert_eq!(at(&mut r, 114, &[]), []);
    assert_eq!(at(&mut r, 115, &[]), [(2, Action::Void)]);
    assert_eq!(at(&mut r, 116, &[]), [(1, Action::CloseChallenges)]);
    // The chain's own void of round 2 comes later: told once only.
    assert_eq!(at(&mut r, 117, &[voided(2)]), []);
    assert!(r.get(2).unwrap().is_over());
    let settle_at = t.settle_at(105);
    assert_eq!(at(&mut r, settle_at - 1, &[]), []);
    assert_eq!(at(&mut r, settle_at, &[]), [(1, Action::Settle)]);
    assert_eq!(at(&mut r, settle_at + 50, &[]), []);
}

/// A round voided at its deadline by the member's machine keeps every block news until the
/// chain's `RoundVoided` comes (members then call `void_expired_round` each after its own
/// slack), for at most [`VOID_WATCH`] blocks.
#[test]
fn blocks_after_an_unconfirmed_void_are_news_until_the_chain_voids() {
    let mut r = PoolRounds::new(POOL, timeline());
    at(&mut r, 100, &[opened(1, 100)]);
    assert_eq!(at(&mut r, 110, &[]), [(1, Action::Void)]);
    assert!(r.awaits_void());
    at(&mut r, 112, &[]);
    assert!(r.awaits_void());
    at(&mut r, 113, &[voided(1)]);
    assert!(!r.awaits_void(), "the chain voided it");
    at(&mut r, 120, &[opened(2, 120)]);
    assert_eq!(at(&mut r, 130, &[]), [(2, Action::Void)]);
    at(&mut r, 130 + VOID_WATCH - 1, &[]);
    assert!(r.awaits_void());
    at(&mut r, 130 + VOID_WATCH, &[]);
    assert!(!r.awaits_void(), "bounded");
}

/// A member that subscribes after a round opened learns of it at its finality, and
/// verifies it from there; a round it never saw open or final stays unknown.
#[test]
fn a_round_first_seen_final_starts_there() {
    let mut r = PoolRounds::new(POOL, timeline());
    assert_eq!(
        at(&mut r, 50, &[finalized(4)]),
        [(4, Action::Verify { until: 60 })]
    );
    assert_eq!(r.get(4).unwrap().phase(50), RoundPhase::LateCommits);
    assert!(r.get(3).is_none());
}

/// A round whose opening names another deadline than the member's timeline (read before a
/// runtime upgrade, say) is not followed: its void would come at the wrong block.
#[test]
fn a_round_whose_deadline_differs_from_the_timeline_is_left_to_storage() {
    let mut r = PoolRounds::new(POOL, timeline());
    let longer = SynodEvent::RoundOpened {
        pool: POOL,
        round: 1,
        deadline: 130,
    };
    assert_eq!(at(&mut r, 100, &[longer]), []);
    assert!(r.get(1).is_none());
    assert_eq!(
        at(&mut r, 125, &[]),
        [],
        "no void at the timeline's deadline (110)"
    );
}

/// Blocks missed while the subscription reconnected may hold a round's finality: its
/// deadline, reached afterwards, must not void it here (its verification and evidence
/// would be dropped). A round open before the gap is forgotten; a final one keeps its
/// milestones; the block after the gap says so.
#[test]
fn a_round_open_before_missed_blocks_is_not_voided_by_its_deadline() {
    let t = timeline();
    let mut r = PoolRounds::new(POOL, t);
    assert_eq!(at(&mut r, 100, &[opened(1, 100)]), []);
    assert_eq!(
        at(&mut r, 101, &[finalized(2)]),
        [(2, Action::Verify { until: 111 })]
    );
    // Blocks 102..=119 missed: round 1's `CheckpointFinalized` may be among them.
    let after_gap = r.block(120, &[]);
    assert!(after_gap.resynced);
    assert!(r.get(1).is_none());
    let mut after = after_gap.actions;
    after.extend(at(&mut r, 130, &[]));
    assert!(!after.contains(&(1, Action::Void)), "{after:?}");
    assert_eq!(
        after,
        [(2, Action::CloseLateCommits), (2, Action::CloseChallenges)]
    );
}

/// The driver's waits are woken by what changes a round (an opening, finality, a void, an
/// included set fixed, the pool's end), not by each member's commit or claim, nor by
/// another pool.
#[test]
fn a_members_commit_is_no_news_for_the_waits() {
    let who = synod_chain::AccountId::from([1; 32]);
    assert!(is_news(&opened(1, 0), POOL));
    assert!(is_news(&finalized(1), POOL));
    assert!(is_news(&voided(1), POOL));
    assert!(is_news(
        &SynodEvent::IncludedSetAgreed {
            pool: POOL,
            round: 1,
            included: vec![0, 2]
        },
        POOL
    ));
    assert!(is_news(&SynodEvent::PoolCompleted { pool: POOL }, POOL));
    assert!(!is_news(&finalized(1), POOL + 1));
    assert!(!is_news(
        &SynodEvent::CheckpointCommitted {
            pool: POOL,
            round: 1,
            who,
            hash: [1; 32]
        },
        POOL
    ));
    assert!(!is_news(
        &SynodEvent::RewardsClaimed {
            pool: POOL,
            who,
            amount: 1
        },
        POOL
    ));
}

/// One round of a simulated chain: opened at `opened`, then final `final_after` blocks
/// after its commits may start (`None`: never, so voided at its deadline, the chain's
/// `RoundVoided` coming `void_late` blocks later when its queue was full).
#[derive(Clone, Debug)]
struct Script {
    gap_before: u64,
    final_after: Option<u64>,
    void_late: u64,
}

/// What the chain (`pallet-checkpoints`, which runs the same machine) and the follower each
/// announce: (round, action, block).
type Told = Vec<(u32, Action, u64)>;

/// Runs the rounds of `scripts` one after the other on a chain of timeline `t` (each its
/// own `RoundState`, stepped with every block and finalized by a `Supported` fact at
/// quorum) and feeds the follower the events the chain deposits and every block except
/// `missed` (a reconnecting subscription). Returns what each announced.
fn simulate(t: Timeline, scripts: &[Script], missed: std::ops::Range<u64>) -> (Told, Told) {
    // The chain's blocks: (events, then each round's state stepped).
    let mut events: BTreeMap<u64, Vec<SynodEvent>> = BTreeMap::new();
    let mut chain: Told = Vec::new();
    let mut at = 10;
    for (i, s) in scripts.iter().enumerate() {
        let round = i as u32 + 1;
        at += s.gap_before;
        let opened = at;
        events
            .entry(opened)
            .or_default()
            .push(opened_at(round, t.deadline(opened)));
        let mut state = RoundState::open(t, 666_666_667, opened, 3);
        let last = t.settle_at(t.deadline(opened)) + 5;
        let finality = s.final_after.map(|d| t.commits_from(opened) + d);
        for n in opened..=last {
            let mut due = state.step(Fact::Block(n));
            if finality == Some(n) {
                due.extend(state.step(Fact::Supported {
                    candidate: 0,
                    hash: [round as u8; 32],
                    stake: 3,
                }));
            }
            for a in due {
                match a {
                    Action::Finalize { hash, .. } => {
                        events
                            .entry(n)
                            .or_default()
                            .push(SynodEvent::CheckpointFinalized {
                                pool: POOL,
                                round,
                                hash,
                            })
                    }
                    Action::Void => events
                        .entry(n + s.void_late)
                        .or_default()
                        .push(SynodEvent::RoundVoided { pool: POOL, round }),
                    _ => {}
                }
                if !matches!(a, Action::Finalize { .. }) {
                    chain.push((round, a, n));
                }
            }
        }
        // The next round opens once this one is closed.
        at = match state.status() {
            synod_protocol::RoundStatus::Final { at, .. } => at,
            _ => t.deadline(opened),
        };
    }
    let end = events.keys().max().copied().unwrap_or(0) + t.settle_at(0) + 10;
    let mut follower = PoolRounds::new(POOL, t);
    let mut seen: Told = Vec::new();
    for n in (0..=end).filter(|n| !missed.contains(n)) {
        let evs = events.get(&n).cloned().unwrap_or_default();
        let step = follower.block(n, &evs);
        assert_eq!(
            step.resynced,
            n == missed.end && !missed.is_empty() && missed.start > 0
        );
        seen.extend(step.actions.into_iter().map(|(r, a)| (r, a, n)));
    }
    // By block, then round; a round's actions of one block stay in timeline order.
    chain.sort_by_key(|(r, _, n)| (*n, *r));
    seen.sort_by_key(|(r, _, n)| (*n, *r));
    (chain, seen)
}

fn opened_at(round: u32, deadline: u64) -> SynodEvent {
    SynodEvent::RoundOpened {
        pool: POOL,
        round,
        deadline: deadline as u32,
    }
}

fn script() -> impl proptest::strategy::Strategy<Value = Script> {
    use proptest::prelude::*;
    (0u64..5, proptest::option::weighted(0.7, 0u64..12), 0u64..3).prop_map(
        |(gap_before, final_after, void_late)| Script {
            gap_before,
            final_after,
            void_late,
        },
    )
}

proptest::proptest! {
    /// For any timeline and any sequence of final and voided rounds, the follower
    /// announces exactly what the chain's own machine does, at the same blocks; and when
    /// it misses blocks (reconnecting), it never voids a round the chain made final, and
    /// whatever it announces the chain announced too, no sooner.
    #[test]
    fn the_follower_reaches_each_milestone_at_the_chains_block(
        timeout in 2u64..20,
        window in 1u64..8,
        delay in 2u64..4,
        margin in 0u64..6,
        appeal in proptest::prop_oneof![proptest::strategy::Just(0u64), 3u64..6],
        length_per_mille in 0u64..500,
        scripts in proptest::collection::vec(script(), 1..6),
        missed_from in 0u64..300,
        missed_len in 0u64..30,
    ) {
        let t = Timeline::for_pool(timeout, window, delay, margin)
            .with_min_round_length(timeout * length_per_mille / 1000)
            .with_appeal_period(appeal);
        let (chain, seen) = simulate(t, &scripts, 0..0);
        proptest::prop_assert_eq!(&seen, &chain);
        let (chain, seen) = simulate(t, &scripts, missed_from..missed_from + missed_len);
        for (round, action, at) in &seen {
            let on_chain = chain
                .iter()
                .find(|(r, a, _)| r == round && a == action);
            proptest::prop_assert!(
                on_chain.is_some_and(|(_, _, n)| n <= at),
                "round {} {:?} at {} (chain: {:?})", round, action, at, on_chain
            );
        }
    }
}

/// Memory stays bounded: only the latest [`KEPT_OVER`] rounds that are over are kept.
#[test]
fn rounds_over_are_forgotten_beyond_the_latest_ones() {
    let mut r = PoolRounds::new(POOL, timeline());
    let n = KEPT_OVER as u32 + 10;
    for round in 1..=n {
        at(&mut r, u64::from(round), &[voided(round)]);
    }
    assert!(r.get(10).is_none());
    assert!(r.get(11).is_some());
    assert!(r.get(n).is_some());
    assert_eq!(r.rounds.len(), KEPT_OVER);
}
