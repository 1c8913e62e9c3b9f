//! Proof-of-Learning segments on the real model (`synod_model::segment`, rules in
//! `synod_diloco::verify`): our AdamW is libtorch's, an inner phase's boundary states are
//! deterministic, an honest segment replays within `SEGMENT_TOLERANCE` across libtorch thread
//! counts, and a member that skips a step fails the segment that holds it — and only that one,
//! which is why verifiers sample segments. Prints the measured distances as JSON lines.
#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use synod_checkpoint::{to_bytes, ParamSet};
use synod_diloco::verify::{
    segment_boundaries, segment_escape_probability, DEFAULT_SEGMENTS, SEGMENT_TOLERANCE,
};
use synod_model::segment::{plausible_state, state_distance};
use synod_model::tch::nn::OptimizerConfig;
use synod_model::{
    load_params, tch, TchInnerTrainer, FIRST_MOMENT_PREFIX, SECOND_MOMENT_PREFIX, STEP_NAME,
};

mod common;

use common::THREADS;

const H: u32 = 32;
const ROUND: u32 = 2;

fn replica(threads: i32) -> TchInnerTrainer {
    common::replica(common::cfg(H, 4 * H), 1, threads)
}

/// The honest boundary states of member 1's phase of `ROUND` from the seed's weights.
fn honest_trace(threads: i32) -> (ParamSet, Vec<u32>, Vec<ParamSet>) {
    let mut t = replica(threads);
    let theta = t.params().unwrap();
    let bounds = segment_boundaries(H, DEFAULT_SEGMENTS);
    let mut states = Vec::new();
    t.traced_phase::<synod_model::ModelError>(&theta, ROUND, &bounds, &mut |_, s| {
        states.push(s);
        Ok(())
    })
    .unwrap();
    (theta, bounds, states)
}

#[test]
fn our_adamw_follows_libtorchs_adamw() {
    let _turn = THREADS.lock().unwrap_or_else(|e| e.into_inner());
    let mut ours = replica(1);
    let theta = ours.params().unwrap();
    let cfg = ours.cfg;
    let batches: Vec<_> = (0..10)
        .map(|s| ours.plan.train_batch(1, ROUND, s))
        .collect();
    for (i, b) in batches.iter().enumerate() {
        ours.train_step(std::slice::from_ref(b), i as u64).unwrap();
    }
    // The same steps with libtorch's AdamW (decay group 0 = matrices and embeddings).
    let theirs = replica(1);
    load_params(&theirs.vs, &theta).unwrap();
    let mut opt = tch::nn::adamw(cfg.beta1, cfg.beta2, cfg.weight_decay)
        .build(&theirs.vs, cfg.lr)
        .unwrap();
    opt.set_weight_decay_group(0, cfg.weight_decay);
    opt.set_weight_decay_group(1, 0.0);
    for (i, b) in batches.iter().enumerate() {
        opt.zero_grad();
        let (x, y) = synod_model::batch_tensors(b, tch::Device::Cpu);
        theirs.model.loss(&x, &y).unwrap().backward();
        opt.clip_grad_norm(cfg.grad_clip);
        opt.set_lr(cfg.lr_at(i as u64));
        opt.step();
    }
    let (a, b) = (ours.params().unwrap(), theirs.params().unwrap());
    let (mut diff, mut moved) = (0f64, 0f64);
    for ((x, y), z) in a.tensors().iter().zip(b.tensors()).zip(theta.tensors()) {
        for ((p, q), r) in x.data.iter().zip(&y.data).zip(&z.data) {
            diff += f64::from(p - q).powi(2);
            moved += f64::from(q - r).powi(2);
        }
    }
    let rel = diff.sqrt() / moved.sqrt();
    println!(
        "{}",
        serde_json::json!({"test": "adamw_vs_libtorch", "relative_update_distance": rel})
    );
    assert!(
        moved > 0.0 && rel < 1e-4,
        "our AdamW's 10 steps differ from libtorch's by {rel}"
    );
}

#[test]
fn honest_segments_replay_within_the_tolerance_at_one_and_two_threads() {
    let _turn = THREADS.lock().unwrap_or_else(|e| e.into_inner());
    let (theta, bounds, states) = honest_trace(1);
    assert_eq!(states.len(), bounds.len());
    // The start state is θ_{r−1} with a fresh optimizer: a verifier rebuilds it bit for bit.
    let mut fresh = replica(1);
    load_params(&fresh.vs, &theta).unwrap();
    fresh.reset_optimizer();
    assert_eq!(
        to_bytes(&fresh.phase_state().unwrap()).unwrap(),
        to_bytes(&states[0]).unwrap()
    );
    // The trace is deterministic, and the last state holds the phase's θ.
    let (_, _, again) = honest_trace(1);
    assert!(states
        .iter()
        .zip(&again)
        .all(|(a, b)| to_bytes(a).unwrap() == to_bytes(b).unwrap()));

    // Every honest state is plausible; a huge first moment, a huge second moment (with a
    // first moment within C·√v), a parameter far from θ_{r−1}, a NaN, a step counter past the
    // phase (whose bound would cost a verifier t iterations: minutes at 2³²) are not.
    let cfg = replica(1).cfg;
    assert!(states.iter().all(|s| plausible_state(s, &states[0], &cfg)));
    let edit = |pick: &dyn Fn(&str) -> bool, value: f32| {
        let mut t = states[3].tensors().to_vec();
        let x = t.iter_mut().find(|t| pick(&t.name)).unwrap();
        x.data[0] = value;
        ParamSet::new(t).unwrap()
    };
    let first = |n: &str| n.starts_with(FIRST_MOMENT_PREFIX);
    let second = |n: &str| n.starts_with(SECOND_MOMENT_PREFIX);
    let param = |n: &str| !n.starts_with("adamw.");
    for (what, forged) in [
        ("huge m", edit(&first, 1e4)),
        ("huge v", edit(&second, 1e4)),
        ("far parameter", edit(&param, 1e3)),
        ("NaN", edit(&param, f32::NAN)),
        (
            "step counter past the phase",
            edit(&|n: &str| n == STEP_NAME, 16_777_216.0),
        ),
        ("step counter 1e30", edit(&|n: &str| n == STEP_NAME, 1e30)),
    ] {
        assert!(!plausible_state(&forged, &states[0], &cfg), "{what} passes");
    }
    let no_clip = synod_model::InnerConfig {
        grad_clip: 0.0,
        ..cfg
    };
    assert!(
        !plausible_state(&states[3], &states[0], &no_clip),
        "no clip, no bounds"
    );

    let (mut same_max, mut threads_max) = (0f64, 0f64);
    let mut one = replica(1);
    let mut two = replica(2);
    for (i, w) in bounds.windows(2).enumerate() {
        tch::set_num_threads(1);
        let r1 = one.replay_segment(&states[i], ROUND, w[0], w[1]).unwrap();
        tch::set_num_threads(2);
        let r2 = two.replay_segment(&states[i], ROUND, w[0], w[1]).unwrap();
        assert_eq!(
            to_bytes(&r1).unwrap(),
            to_bytes(&states[i + 1]).unwrap(),
            "segment {i}: same threads must be bit-identical"
        );
        same_max = same_max.max(state_distance(&states[i], &states[i + 1], &r1));
        threads_max = threads_max.max(state_distance(&states[i], &states[i + 1], &r2));
    }
    println!(
        "{}",
        serde_json::json!({"test": "segment_tolerance", "segments": bounds.len() - 1,
            "segment_len": bounds[1], "tolerance": SEGMENT_TOLERANCE, "same_threads_max": same_max,
            "threads_1_vs_2_max": threads_max,
            "margin_honest": SEGMENT_TOLERANCE / threads_max.max(f64::MIN_POSITIVE)})
    );
    assert!(
        threads_max <= SEGMENT_TOLERANCE,
        "1 vs 2 threads: {threads_max}"
    );
}

#[test]
fn a_member_that_skips_a_step_fails_the_segment_that_holds_it() {
    let _turn = THREADS.lock().unwrap_or_else(|e| e.into_inner());
    let (_, bounds, honest) = honest_trace(1);
    let mut t = replica(1);
    // The cheater runs segment 5 one step short and forges the step counter; everything
    // after it is honest work from the forged state.
    let (from, to) = (bounds[5], bounds[6]);
    let mut forged = t.replay_segment(&honest[5], ROUND, from, to - 1).unwrap();
    let step = forged
        .tensors()
        .iter()
        .position(|x| x.name == STEP_NAME)
        .unwrap();
    let mut tensors = forged.tensors().to_vec();
    tensors[step].data = vec![to as f32];
    forged = ParamSet::new(tensors).unwrap();
    let next = t.replay_segment(&forged, ROUND, to, bounds[7]).unwrap();

    let replayed = t.replay_segment(&honest[5], ROUND, from, to).unwrap();
    let d_bad = state_distance(&honest[5], &forged, &replayed);
    let replayed_next = t.replay_segment(&forged, ROUND, to, bounds[7]).unwrap();
    let d_after = state_distance(&forged, &next, &replayed_next);
    // A counter left at the true count is refused outright.
    let short = t.replay_segment(&honest[5], ROUND, from, to - 1).unwrap();
    assert!(t.replay_segment(&short, ROUND, to, bounds[7]).is_err());

    let segments = (bounds.len() - 1) as u32;
    println!(
        "{}",
        serde_json::json!({"test": "segment_skipped_step", "distance": d_bad,
            "margin": d_bad / SEGMENT_TOLERANCE, "next_segment_distance": d_after,
            "escape_one_verifier_3_samples": segment_escape_probability(segments, 1, 3)})
    );
    assert!(
        d_bad > SEGMENT_TOLERANCE,
        "a skipped step passes at {d_bad}"
    );
    assert_eq!(d_after, 0.0, "only the segment with the skipped step fails");
}
