//! The member's one chain subscription (`Chain::follow`) and the pool's rounds as it sees them:
//! one
//! [`synod_protocol::RoundState`] per round, stepped with the facts each finalized block
//! carries (the round's opening, finality or void, from the typed events of `Chain::follow`,
//! and the block itself), on the pool's own [`Timeline`] (`synod_chain::Chain::timeline`).
//! The chain runs the same machine (`pallet-checkpoints`), so the member reaches each phase of
//! a round at the block the chain does, and acts on the [`Action`]s it returns: the duty
//! worker verifies a round when it is told `Verify` and lets a voided round go at `Void`
//! ([`super::duty`]).
//!
//! The subscription skips the blocks finalized while it reconnects: a round that was open
//! before such a gap is forgotten ([`PoolRounds::missed_blocks`]; its finality or void may be
//! in the gap, and its deadline must not void it here), and left to the chain's storage.

use std::collections::BTreeMap;

use synod_chain::{ChainError, FinalizedBlock, SynodEvent};
use synod_protocol::{Action, Fact, RoundState, Timeline};

use super::appeal::{AppealChain, Appealer};
use super::duty::DutyMsg;
use crate::prometheus::Exporter;

/// Follows the chain's finalized blocks (`rx`, from `Chain::follow`) until the subscription
/// ends: steps the pool's rounds with each block (`rounds`, [`PoolRounds::block`]) and tells
/// the duty worker (`duties`) the actions due, then the block; updates what the driver's waits
/// watch (`ticks`) and the exporter's finalized height; logs the pool's events; and hands each
/// `Challenges.Ruled` event to `appealer` on a task of its own (an appeal waits for neither the
/// duty worker nor the next block).
pub(super) async fn follow_chain<C: AppealChain>(
    mut rx: tokio::sync::mpsc::Receiver<Result<FinalizedBlock, ChainError>>,
    mut rounds: PoolRounds,
    ticks: tokio::sync::watch::Sender<super::watch::Tick>,
    exporter: Option<Exporter>,
    duties: std::sync::mpsc::Sender<DutyMsg>,
    appealer: Appealer<C>,
) {
    let pool = rounds.pool;
    let mut last: Option<u64> = None;
    while let Some(b) = rx.recv().await {
        let b = match b {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!("finalized-block subscription ended: {e}");
                break;
            }
        };
        if last.is_some_and(|l| b.number > l.saturating_add(1)) {
            rounds.missed_blocks();
        }
        last = Some(b.number);
        if let Some(x) = &exporter {
            x.set_finalized_height(b.number);
        }
        let ours = b.events.iter().any(|e| e.pool() == Some(pool));
        ticks.send_modify(|t| {
            t.finalized = t.finalized.max(b.number);
            if ours {
                t.pool_event_at = t.pool_event_at.max(b.number);
            }
        });
        for e in &b.events {
            if let SynodEvent::Ruled { challenge, .. } = e {
                let (appealer, challenge, block) = (appealer.clone(), *challenge, b.number);
                tokio::spawn(async move { appealer.on_ruled(challenge, block).await });
            }
            if e.pool() == Some(pool) {
                tracing::info!(block = b.number, "chain: {e:?}");
            }
        }
        // The worker is gone once the member stops: nothing left to tell.
        for (round, action) in rounds.block(b.number, &b.events) {
            tracing::debug!(block = b.number, round, "round: {action:?}");
            let _ = duties.send(DutyMsg::Round(round, action));
        }
        let _ = duties.send(DutyMsg::Finalized);
    }
    // From now on the worker reads the chain for every round.
    let _ = duties.send(DutyMsg::Unfollowed);
}

/// Rounds over (settled or voided) that are still remembered, the latest ones: a late
/// question about one of them is answered without the chain; older ones are forgotten, so the
/// memory does not grow with the pool's rounds.
pub(super) const KEPT_OVER: usize = 64;

/// What the member's subscription knows of its pool's rounds.
pub(super) struct PoolRounds {
    pool: u32,
    timeline: Timeline,
    rounds: BTreeMap<u32, RoundState>,
}

impl PoolRounds {
    /// No round seen yet, in pool `pool` with `timeline`.
    pub fn new(pool: u32, timeline: Timeline) -> Self {
        Self {
            pool,
            timeline,
            rounds: BTreeMap::new(),
        }
    }

    /// Steps the pool's rounds with finalized block `number` and its `events`: first each event
    /// of the pool's rounds (`RoundOpened`, `CheckpointFinalized`, `RoundVoided`, in the
    /// block's order), then the block itself for every round not over. Returns the actions made
    /// due, as `(round, action)` in that order; each action of a round comes once. A round
    /// first seen final (the subscription started after its opening) starts there; events of
    /// other pools change nothing.
    pub fn block(&mut self, number: u64, events: &[SynodEvent]) -> Vec<(u32, Action)> {
        let mut out = Vec::new();
        for e in events {
            let (round, fact) = match *e {
                SynodEvent::RoundOpened { pool, round, .. } if pool == self.pool => (
                    round,
                    // The member never weighs support (the chain decides finality), so the
                    // snapshot's stake is not needed.
                    Fact::Opened {
                        at: number,
                        round_stake: 0,
                    },
                ),
                SynodEvent::CheckpointFinalized { pool, round, hash } if pool == self.pool => {
                    (round, Fact::Finalized { at: number, hash })
                }
                SynodEvent::RoundVoided { pool, round } if pool == self.pool => {
                    (round, Fact::Voided { at: number })
                }
                _ => continue,
            };
            let state = self
                .rounds
                .entry(round)
                .or_insert_with(|| RoundState::new(self.timeline, 0));
            out.extend(state.step(fact).into_iter().map(|a| (round, a)));
        }
        for (round, state) in &mut self.rounds {
            if !state.is_over() {
                out.extend(
                    state
                        .step(Fact::Block(number))
                        .into_iter()
                        .map(|a| (*round, a)),
                );
            }
        }
        self.forget_old();
        out
    }

    /// Forgets every round not final or voided: blocks were missed (the subscription
    /// reconnected), which may have carried its finality or void. Final rounds are kept: their
    /// milestones follow from the block number alone.
    pub fn missed_blocks(&mut self) {
        self.rounds.retain(|_, s| {
            matches!(
                s.status(),
                synod_protocol::RoundStatus::Final { .. }
                    | synod_protocol::RoundStatus::Voided { .. }
            )
        });
    }

    /// The state of `round`, if the subscription saw it open, final or voided (and it is not
    /// one of the forgotten rounds).
    #[cfg(test)]
    pub fn get(&self, round: u32) -> Option<&RoundState> {
        self.rounds.get(&round)
    }

    /// Forgets the oldest rounds that are over beyond the latest [`KEPT_OVER`].
    fn forget_old(&mut self) {
        let over: Vec<u32> = self
            .rounds
            .iter()
            .filter(|(_, s)| s.is_over())
            .map(|(r, _)| *r)
            .collect();
        for r in over.iter().take(over.len().saturating_sub(KEPT_OVER)) {
            self.rounds.remove(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use synod_protocol::{RoundPhase, RoundStatus};

    const POOL: u32 = 3;

    fn timeline() -> Timeline {
        // Timeout 10, window 5, jury delay 2, vote margin 20: settled 2·5 + 2 + 30 + 1 = 43
        // blocks after finality.
        Timeline::for_pool(10, 5, 2, 20)
    }

    fn opened(round: u32) -> SynodEvent {
        SynodEvent::RoundOpened {
            pool: POOL,
            round,
            deadline: 0,
        }
    }

    fn finalized(round: u32) -> SynodEvent {
        SynodEvent::CheckpointFinalized {
            pool: POOL,
            round,
            hash: [round as u8; 32],
        }
    }

    /// Every block from `from` to `to` without events, the actions they made due.
    fn blocks(r: &mut PoolRounds, from: u64, to: u64) -> Vec<(u32, Action)> {
        (from..=to).flat_map(|n| r.block(n, &[])).collect()
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
        assert_eq!(r.block(100, &[opened(1), other]), []);
        assert_eq!(
            r.get(1).map(RoundState::status),
            Some(RoundStatus::Open {
                opened_at: 100,
                round_stake: 0
            })
        );
        assert_eq!(blocks(&mut r, 101, 104), []);
        assert_eq!(
            r.block(105, &[finalized(1), opened(2)]),
            [(1, Action::Verify { until: 115 })]
        );
        assert_eq!(r.get(1).unwrap().phase(105), RoundPhase::LateCommits);
        assert_eq!(blocks(&mut r, 106, 110), []);
        assert_eq!(r.block(111, &[]), [(1, Action::CloseLateCommits)]);
        // Round 2 is not final by its deadline (opened at 105, timeout 10).
        assert_eq!(blocks(&mut r, 112, 114), []);
        assert_eq!(r.block(115, &[]), [(2, Action::Void)]);
        assert_eq!(r.block(116, &[]), [(1, Action::CloseChallenges)]);
        // The chain's own void of round 2 comes later: told once only.
        assert_eq!(
            r.block(
                117,
                &[SynodEvent::RoundVoided {
                    pool: POOL,
                    round: 2
                }]
            ),
            []
        );
        assert!(r.get(2).unwrap().is_over());
        let settle_at = t.settle_at(105);
        assert_eq!(blocks(&mut r, 118, settle_at - 1), []);
        assert_eq!(r.block(settle_at, &[]), [(1, Action::Settle)]);
        assert_eq!(blocks(&mut r, settle_at + 1, settle_at + 50), []);
    }

    /// A member that subscribes after a round opened learns of it at its finality, and
    /// verifies it from there; a round it never saw open or final stays unknown.
    #[test]
    fn a_round_first_seen_final_starts_there() {
        let mut r = PoolRounds::new(POOL, timeline());
        assert_eq!(
            r.block(50, &[finalized(4)]),
            [(4, Action::Verify { until: 60 })]
        );
        assert_eq!(r.get(4).unwrap().phase(50), RoundPhase::LateCommits);
        assert!(r.get(3).is_none());
    }

    /// Blocks missed while the subscription reconnected may hold a round's finality: its
    /// deadline, reached afterwards, must not void it here (its verification and evidence
    /// would be dropped). A round open before the gap is forgotten; a final one keeps its
    /// milestones.
    #[test]
    fn a_round_open_before_missed_blocks_is_not_voided_by_its_deadline() {
        let t = timeline();
        let mut r = PoolRounds::new(POOL, t);
        assert_eq!(r.block(100, &[opened(1)]), []);
        assert_eq!(
            r.block(101, &[finalized(2)]),
            [(2, Action::Verify { until: 111 })]
        );
        // Blocks 102..=119 missed: round 1's `CheckpointFinalized` may be among them.
        r.missed_blocks();
        assert!(r.get(1).is_none());
        let after: Vec<(u32, Action)> = (120..=130).flat_map(|n| r.block(n, &[])).collect();
        assert!(!after.contains(&(1, Action::Void)), "{after:?}");
        assert_eq!(
            after,
            [(2, Action::CloseLateCommits), (2, Action::CloseChallenges)]
        );
    }

    /// Memory stays bounded: only the latest [`KEPT_OVER`] rounds that are over are kept.
    #[test]
    fn rounds_over_are_forgotten_beyond_the_latest_ones() {
        let mut r = PoolRounds::new(POOL, timeline());
        let n = KEPT_OVER as u32 + 10;
        for round in 1..=n {
            r.block(
                u64::from(round),
                &[SynodEvent::RoundVoided { pool: POOL, round }],
            );
        }
        assert!(r.get(10).is_none());
        assert!(r.get(11).is_some());
        assert!(r.get(n).is_some());
        assert_eq!(r.rounds.len(), KEPT_OVER);
    }
}
