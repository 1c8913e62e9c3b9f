//! The duty worker's waits and its finishing rule.

use std::time::Duration;

use super::waits::STATE_FETCH;
use super::{
    asks_residual_again, duty_wait, fetch_wait, may_stop, residual_batch_wait,
    residual_deadline_passed, schedule_retry_blocks, MIN_DUTY_WAIT, MIN_STATE_WAIT,
};
use crate::pool::verify::prefetch::prefetch_states;

use synod_protocol::{RoundState, Timeline};

/// A pool whose challenge window (1 000 blocks, twice that for challenges) and appeals
/// outlast an hour of 2-second blocks: a member that finished keeps its duties until the
/// last committee that can seat it has voted, not for a fixed hour.
#[test]
fn a_finishing_juror_stays_until_the_last_rounds_committees_end() {
    let t = Timeline::for_pool(1_200, 1_000, 17, 15).with_appeal_period(15);
    let ended = 5_000;
    let over = t.settled_by(ended);
    // The last challenge on a round final at `ended` opens 2 000 blocks later and its
    // appeal committee votes after that.
    assert!(over >= t.challenges_until(ended) + 2 * 1_215);
    let wait = duty_wait(&t, ended, 2.0);
    assert!(wait > MIN_DUTY_WAIT, "{wait:?}");
    assert!(
        wait.as_secs_f64() >= (over - ended) as f64 * 2.0,
        "{wait:?}"
    );
    // A short pool keeps the floor; a nonsense block time falls back to it.
    let short = Timeline::for_pool(20, 5, 17, 15);
    assert_eq!(duty_wait(&short, 100, 2.0), MIN_DUTY_WAIT);
    assert_eq!(duty_wait(&t, ended, f64::NAN), MIN_DUTY_WAIT);
}

#[test]
fn a_challenge_opened_at_the_windows_last_block_keeps_a_finishing_juror_on_duty() {
    // Final at block 100 with a 15-block window.
    let last = RoundState::finalized(Timeline::for_pool(0, 15, 0, 0), 100, [0; 32]);
    let until = last.challenges_until().unwrap();
    assert!(last.phase(until).challenge_window_open());
    assert!(!last.phase(until + 1).challenge_window_open());
    // A pass that began at the window's last block may have missed a challenge opened in
    // it, however late the pass ended: one more pass.
    assert!(!may_stop(Some(&last), until, false));
    // One that began after the window read every challenge on the round.
    assert!(may_stop(Some(&last), until + 1, false));
    assert!(!may_stop(Some(&last), until + 1, true));
    assert!(may_stop(None, 0, false));
}

#[test]
fn verifiers_refused_for_a_full_schedule_retry_in_different_blocks() {
    let waits: std::collections::BTreeSet<u64> = (0..6).map(schedule_retry_blocks).collect();
    assert_eq!(waits, [3, 4, 5].into_iter().collect());
    assert!((0..32).all(|me| (3..=5).contains(&schedule_retry_blocks(me))));
}

#[test]
fn a_residual_asked_under_its_transfer_time_never_counts_as_withheld() {
    // A loaded verifier's prefetch gets the shortest wait: a residual of 100 MB (10 s at
    // 10 MB/s) cannot arrive in it, so the verifier asks for it again with its full
    // transfer time before a miss counts.
    let max = 100_000_000;
    assert_eq!(fetch_wait(max), STATE_FETCH + Duration::from_secs(10));
    assert!(asks_residual_again(MIN_STATE_WAIT, max));
    assert!(asks_residual_again(
        fetch_wait(max) - Duration::from_millis(1),
        max
    ));
    // A prefetch that had the time is the fair ask: no second one.
    assert!(!asks_residual_again(fetch_wait(max), max));
    assert!(!asks_residual_again(Duration::from_secs(600), max));
}

/// Attack: k sparse sybils that withhold their residuals. Asked again one after the other
/// (each with its whole transfer time), they stalled a loaded verifier's or a juror's
/// pass k × 2 residual waits, unbounded by the window. Asked again in one batch side by
/// side, they cost the pass one batch wait, and an honest author among them still gets
/// its residual's whole transfer time.
#[test]
fn withholding_accused_cost_a_pass_one_residual_wait_not_one_each() {
    let max = 100_000_000; // 10 s at 10 MB/s
    for k in [1u8, 4, 16] {
        // k withholders and one honest author, each naming two residuals.
        let missed: Vec<(u8, Vec<[u8; 32]>)> =
            (0..=k).map(|a| (a, vec![[a; 32], [a + 100; 32]])).collect();
        let (per, within) = residual_batch_wait(&missed, max);
        assert_eq!(per, fetch_wait(max), "each residual's whole time");
        let asked = 2 * (u32::from(k) + 1);
        let transfers = Duration::from_secs(10) * asked;
        assert_eq!(within, 2 * per + transfers);
        let one_after_the_other = fetch_wait(max) * asked;
        assert!(within < one_after_the_other, "k = {k}: {within:?}");
        println!(
            "{{\"withholders\":{k},\"batch_wait_s\":{},\"one_after_the_other_s\":{}}}",
            within.as_secs(),
            one_after_the_other.as_secs()
        );
        // The batch as the duty worker fetches it, its waits scaled down 400 times: the
        // withholders never answer, the honest author (the last) serves each residual
        // just within its wait.
        let (per, within) = (per / 400, within / 400);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_time()
            .build()
            .unwrap();
        let t0 = std::time::Instant::now();
        let got = rt.block_on(prefetch_states(
            missed,
            |a| *a,
            per,
            within,
            move |a, h| async move {
                if a < k {
                    std::future::pending::<()>().await;
                }
                tokio::time::sleep(per * 9 / 10).await;
                Some(h)
            },
        ));
        let took = t0.elapsed();
        assert_eq!(got.len(), 2, "the honest author's two residuals");
        assert!(took <= within + Duration::from_millis(200), "{took:?}");
    }
}

#[test]
fn an_unserved_residual_is_waited_for_half_the_time_left_then_counts_as_withheld() {
    // First missed at block 100 with a verdict due at 140: asked again until block 120.
    assert!(!residual_deadline_passed(100, 100, 140));
    assert!(!residual_deadline_passed(100, 119, 140));
    assert!(residual_deadline_passed(100, 120, 140));
    // Missed with no time left (or past the deadline): no wait.
    assert!(residual_deadline_passed(100, 100, 100));
    assert!(residual_deadline_passed(100, 100, 90));
}
