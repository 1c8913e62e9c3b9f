//! Tests of jury duty: the states fetched for narrowed disputes, and the order of votes.

use std::time::{Duration, Instant};

use super::*;
use crate::pool::verify::prefetch::prefetch_states;

fn pending(id: u32, round: u32, accused: u8, member: Option<u32>, dispute: Dispute) -> Pending {
    Pending {
        id,
        c: ChallengeInfo {
            pool_id: 0,
            round,
            accused: AccountId::from([accused; 32]),
            challenger: AccountId::from([0; 32]),
            payload_digest: [0; 32],
            expires_at: 100 + id,
            jury: Vec::new(),
        },
        handled: true,
        member,
        dispute,
    }
}

#[test]
fn jury_duty_runs_between_checks_only_when_a_block_came_since_it_read_the_challenges() {
    // Never read, or the last read failed: due.
    assert!(jury_due(None, 7));
    // Read at block 7: nothing new to read until block 8 is final.
    assert!(!jury_due(Some(7), 7));
    assert!(jury_due(Some(7), 8));
    // A node that fell behind the block read last (another endpoint) has nothing newer.
    assert!(!jury_due(Some(9), 8));
}

#[test]
fn stalling_accused_cost_a_juror_one_wait_not_one_per_challenge() {
    // Narrowed disputes of accused 1 and 2 (who stall their states) and 3 (who serves),
    // over two rounds, beside disputes that need no states.
    let me = AccountId::from([9; 32]);
    let seats = vec![
        pending(0, 4, 1, Some(1), Dispute::Segment(2)),
        pending(1, 5, 2, Some(2), Dispute::Encoding),
        pending(2, 5, 3, Some(3), Dispute::Segment(0)),
        pending(3, 5, 4, Some(4), Dispute::Phase),
        pending(4, 5, 9, Some(5), Dispute::Segment(1)),
        pending(5, 5, 6, None, Dispute::Segment(1)),
        // A second challenger of accused 3's contribution, naming another segment.
        pending(6, 5, 3, Some(3), Dispute::Segment(4)),
    ];
    let mut seats = seats;
    // The whole-phase dispute's vote ends first: every replay waits for the fetch, so it
    // bounds the wait too.
    seats[3].c.expires_at = 95;
    let (checks, bound) = state_checks(&seats, &me, |_, _| false);
    let accused: Vec<(u32, u8, u32)> = checks
        .iter()
        .map(|(round, who, member, _)| (*round, who.0[0], *member))
        .collect();
    assert_eq!(accused, vec![(4, 1, 1), (5, 2, 2), (5, 3, 3), (5, 4, 4)]);
    assert_eq!(checks[0].3, vec![2], "the named segment");
    assert_eq!(
        checks[2].3,
        vec![0, 4],
        "one check of both disputes of a contribution"
    );
    assert!(
        checks[3].3.is_empty(),
        "a whole-phase dispute: its residuals, no trace state"
    );
    assert_eq!(
        bound,
        Some((95, 5)),
        "the earliest end of the five votes replayed for, and the five replays"
    );
    // Fetched as the juror fetches them, all in one batch: the two stallers cost the pass
    // one wait, and the accused that serves is not held behind them.
    let wait = Duration::from_secs(1);
    let wanted = checks
        .iter()
        .map(|(round, who, _, _)| ((who.0[0], *round), vec![[who.0[0]; 32]]))
        .collect();
    let t0 = Instant::now();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let got = rt.block_on(prefetch_states(
        wanted,
        |(accused, _round)| *accused,
        wait,
        wait,
        |(accused, _round), h| async move {
            if accused < 3 {
                std::future::pending::<()>().await;
            }
            Some(h)
        },
    ));
    assert!(
        t0.elapsed() < 2 * wait,
        "the pass waited {:?}",
        t0.elapsed()
    );
    let mut got: Vec<_> = got.keys().copied().collect();
    got.sort_unstable();
    assert_eq!(got, vec![[3; 32], [4; 32]]);
    // A part replayed already (by this juror's verifier, or for another challenge of the
    // same part) needs neither states nor a replay: accused 3's segment 4 and accused 2.
    let (checks, bound) = state_checks(&seats, &me, |s, member| {
        (s.c.round, member, s.dispute) == (5, 3, Dispute::Segment(4)) || member == 2
    });
    let fetched: Vec<_> = checks.iter().map(|c| (c.0, c.2, c.3.clone())).collect();
    assert_eq!(
        fetched,
        vec![(4, 1, vec![2]), (5, 3, vec![0]), (5, 4, vec![])]
    );
    assert_eq!(bound, Some((95, 3)));
}

/// Attack: a cheater whose earlier contributions drew several challenges (each seating
/// most of the pool's jurors, votes ending some blocks later) kept the verifiers judging
/// them while the next round's challenge window ran out (seen in the Byzantine demo: a
/// round paid to the cheater). Before a check due by block `w`, a juror judges only the
/// seats whose vote ends by `w`, earliest first; the others wait for the check.
#[test]
fn a_cheaters_challenges_do_not_hold_the_next_rounds_checks_past_their_window() {
    let mut seats: Vec<Pending> = (0..5)
        .map(|id| pending(id, 1, 1, Some(1), Dispute::Phase))
        .collect();
    // Votes ending at blocks 100..=104, listed out of order.
    seats.swap(0, 4);
    // The check of the next round is due by block 102: seats 0, 1, 2 first, in order.
    let due = due_seats(&mut seats, Some(102));
    assert_eq!(due.iter().map(|s| s.id).collect::<Vec<_>>(), vec![0, 1, 2]);
    let mut left: Vec<_> = seats.iter().map(|s| s.id).collect();
    left.sort_unstable();
    assert_eq!(left, vec![3, 4], "judged after the check");
    assert!(due_seats(&mut seats, Some(99)).is_empty());
    let rest = due_seats(&mut seats, None);
    assert_eq!(rest.iter().map(|s| s.id).collect::<Vec<_>>(), vec![3, 4]);
    assert!(seats.is_empty());
}

#[test]
fn another_pools_open_challenges_cost_one_read() {
    // Challenges 0..6: even ids in our pool 0, odd ids in an attacker's pool 1, all open and
    // under appeal (a ruling awaits its execution), none of them done.
    let challenge = |id: u32| ChallengeInfo {
        pool_id: id % 2,
        ..pending(id, 1, 1, Some(1), Dispute::Phase).c
    };
    let appeal = AppealInfo {
        ruling: Some((synod_chain::types::Verdict::Guilty, 50)),
        appellant: None,
    };
    let mut handled = BTreeSet::new();
    let mut reads: BTreeMap<u32, u32> = BTreeMap::new();
    for _pass in 0..3 {
        let open = read_open_challenges(
            0..6,
            &mut handled,
            0,
            |id| {
                *reads.entry(id).or_default() += 1;
                Ok::<_, ()>(Some(challenge(id)))
            },
            |_| Ok(Some(appeal.clone())),
        )
        .unwrap();
        // Our pool's challenges are read again at every pass: their appeal committees may
        // still seat us.
        assert_eq!(
            open.iter().map(|(id, _, _)| *id).collect::<Vec<_>>(),
            vec![0, 2, 4]
        );
    }
    assert_eq!(
        reads,
        BTreeMap::from([(0, 3), (1, 1), (2, 3), (3, 1), (4, 3), (5, 1)])
    );
    assert_eq!(handled, BTreeSet::from([1, 3, 5]));
    // A challenge that is gone is handled too.
    let mut handled = BTreeSet::new();
    let open =
        read_open_challenges(0..2, &mut handled, 0, |_| Ok::<_, ()>(None), |_| Ok(None)).unwrap();
    assert!(open.is_empty());
    assert_eq!(handled, BTreeSet::from([0, 1]));
}
