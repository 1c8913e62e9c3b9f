//! Replay verification on the real model (`synod_diloco::verify`): honest replays of an inner
//! phase stay within `REPLAY_TOLERANCE` across libtorch thread counts, while a member that
//! skips a tenth of its inner steps, and every simulated Byzantine attack, fall outside it.
//! Prints the measured distances as one JSON line (the tolerance's margin).
#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use std::sync::{Arc, Mutex};

use synod_codec::EncodeOptions;
use synod_diloco::byzantine::{Adversary, Attack};
use synod_diloco::verify::{replay_distance, within_tolerance, REPLAY_TOLERANCE};
use synod_diloco::{Contribution, ErrorFeedback, NesterovSgd, OuterState};
use synod_model::TchInnerTrainer;

mod common;

use common::THREADS;

const H: u32 = 30;
const ROUND: u32 = 3;

fn replica(worker: u32, inner_steps: u32, threads: i32) -> TchInnerTrainer {
    common::replica(common::cfg(inner_steps, 4 * H), worker, threads)
}

/// θ_{ROUND−1}: the seed's weights, numbered as after round ROUND − 1.
fn parent() -> OuterState {
    let theta = replica(0, H, 1).params().unwrap();
    let mut s = OuterState::new(theta, NesterovSgd::new(0.7, 0.9));
    s.round = ROUND - 1;
    s
}

fn contribute(
    state: &OuterState,
    worker: u32,
    inner_steps: u32,
    threads: i32,
) -> std::sync::Arc<Vec<u8>> {
    let mut t = replica(worker, inner_steps, threads);
    state
        .contribute(
            &mut t,
            worker,
            &EncodeOptions::default(),
            &mut ErrorFeedback::default(),
        )
        .unwrap()
        .0
        .payload
}

#[test]
fn honest_replays_across_thread_counts_stay_within_the_tolerance() {
    let _turn = THREADS.lock().unwrap_or_else(|e| e.into_inner());
    let state = parent();
    let original = contribute(&state, 2, H, 1);
    let same = contribute(&state, 2, H, 1);
    let two_threads = contribute(&state, 2, H, 2);
    let d_same = replay_distance(&state.params, 2, &original, &same).unwrap();
    let d_threads = replay_distance(&state.params, 2, &original, &two_threads).unwrap();
    // A member that skips 3 of its 30 inner steps (10 %).
    let lazy = contribute(&state, 2, H - 3, 1);
    let d_lazy = replay_distance(&state.params, 2, &lazy, &original).unwrap();
    println!(
        "{}",
        serde_json::json!({
            "test": "replay_tolerance", "tolerance": REPLAY_TOLERANCE, "same_threads": d_same,
            "threads_1_vs_2": d_threads, "skipped_10pct_of_steps": d_lazy,
            "margin_honest": REPLAY_TOLERANCE / d_threads.max(d_same).max(f64::MIN_POSITIVE),
            "margin_lazy": d_lazy / REPLAY_TOLERANCE,
        })
    );
    assert_eq!(
        d_same, 0.0,
        "a replay with the same threads is bit-identical"
    );
    assert!(within_tolerance(d_threads), "1 vs 2 threads: {d_threads}");
    assert!(!within_tolerance(d_lazy), "10 % of steps skipped: {d_lazy}");
}

#[test]
fn every_byzantine_payload_is_outside_the_replay_tolerance() {
    let _turn = THREADS.lock().unwrap_or_else(|e| e.into_inner());
    let state = parent();
    let honest: Vec<Contribution> = (0..4)
        .map(|w| Contribution {
            member: w,
            payload: contribute(&state, w, H, 1),
        })
        .collect();
    let mut distances = serde_json::Map::new();
    for attack in Attack::ALL {
        let mut set = honest.clone();
        let adversary = Adversary {
            member: 3,
            attack,
            seed: 5,
        };
        adversary
            .tamper(&state.params, ROUND, &mut set, &EncodeOptions::default())
            .unwrap();
        let d = replay_distance(&state.params, 3, &set[3].payload, &honest[3].payload).unwrap();
        distances.insert(attack.name().into(), d.into());
        assert!(
            !within_tolerance(d),
            "{} passes replay at {d}",
            attack.name()
        );
    }
    // A payload that does not decode is no honest contribution either.
    assert!(replay_distance(&state.params, 3, b"garbage", &honest[3].payload).is_err());
    println!(
        "{}",
        serde_json::json!({"test": "replay_attacks", "distance": distances})
    );
}

#[test]
fn a_progress_hook_sees_every_inner_step_and_changes_nothing() {
    let _turn = THREADS.lock().unwrap_or_else(|e| e.into_inner());
    let state = parent();
    let plain = contribute(&state, 1, 5, 1);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let mut hooked = replica(1, 5, 1).with_step_hook(Box::new(move |done, of, loss| {
        log.lock().unwrap().push((done, of, loss.is_finite()));
    }));
    let (c, _) = state
        .contribute(
            &mut hooked,
            1,
            &EncodeOptions::default(),
            &mut ErrorFeedback::default(),
        )
        .unwrap();
    assert_eq!(*c.payload, *plain, "the hook changed the payload");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen, (1..=5).map(|d| (d, 5, true)).collect::<Vec<_>>());
}
