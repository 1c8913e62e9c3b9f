//! The outer round without a tensor library: Nesterov arithmetic, aggregation, determinism,
//! hostile payloads and checkpoint resume.
#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

mod common;
use common::Quadratic;
use std::sync::Arc;

use synod_checkpoint::{NamedTensor, ParamSet};
use synod_codec::EncodeOptions;
use synod_diloco::{
    encode_pseudo_gradient, Aggregator, Contribution, DilocoError, ErrorFeedback, Mean,
    NesterovSgd, OuterState,
};

fn params(a: Vec<f32>, b: Vec<f32>) -> ParamSet {
    ParamSet::new(vec![
        NamedTensor {
            name: "a".into(),
            shape: vec![a.len()],
            data: a,
        },
        NamedTensor {
            name: "b".into(),
            shape: vec![b.len()],
            data: b,
        },
    ])
    .unwrap()
}

#[test]
fn nesterov_matches_hand_computed_values() {
    let mut p = params(vec![1.0, 2.0], vec![0.0]);
    let mut opt = NesterovSgd::new(0.7, 0.9);
    opt.step(&mut p, &vec![vec![0.1, -0.2], vec![0.0]]).unwrap();
    // m = g; θ -= 0.7 (g + 0.9 m) = 0.7 · 1.9 g
    let t = &p.tensors()[0].data;
    assert!(
        (t[0] - 0.867).abs() < 1e-6 && (t[1] - 2.266).abs() < 1e-6,
        "{t:?}"
    );
    opt.step(&mut p, &vec![vec![0.2, 0.0], vec![1.0]]).unwrap();
    // m = 0.9·[0.1,-0.2] + [0.2,0] = [0.29,-0.18]; d = g + 0.9 m = [0.461,-0.162]
    let t = &p.tensors()[0].data;
    assert!(
        (t[0] - (0.867 - 0.7 * 0.461)).abs() < 1e-6 && (t[1] - (2.266 + 0.7 * 0.162)).abs() < 1e-6,
        "{t:?}"
    );
    // b: m = 1, d = 1 + 0.9·1 = 1.9, θ = −0.7·1.9
    assert!((p.tensors()[1].data[0] + 0.7 * 1.9).abs() < 1e-6);
}

#[test]
fn trace_states_are_kept_in_boundary_order_off_the_phase_and_a_failing_keep_ends_it() {
    // The states are serialized, hashed and kept on a writer thread while the phase goes on:
    // the trace must still be in boundary order, each hash that of its bytes.
    let state = OuterState::new(
        params(vec![0.0; 3], vec![0.0; 3]),
        NesterovSgd::new(0.7, 0.9),
    );
    let mut w = Quadratic {
        target: vec![1.0; 3],
        steps: 6,
    };
    let opts = EncodeOptions::default();
    let mut kept = Vec::new();
    let (c, _) = state
        .contribute_traced(
            &mut w,
            0,
            &opts,
            &mut ErrorFeedback::default(),
            &[0, 2, 3, 6],
            &mut |j, bytes, hash| {
                assert_eq!(hash, synod_checkpoint::hash(&bytes));
                let set = synod_checkpoint::from_bytes(&bytes).unwrap();
                kept.push((j, hash, set.tensors()[0].data[0]));
                Ok(())
            },
        )
        .unwrap();
    assert_eq!(kept.iter().map(|k| k.0).collect::<Vec<_>>(), [0, 2, 3, 6]);
    // θ moves towards the target step by step: the states are the phase's, in order.
    assert!(kept.windows(2).all(|k| k[0].2 < k[1].2), "{kept:?}");
    let trace = synod_diloco::payload::Payload::parse(0, &c.payload)
        .unwrap()
        .trace;
    assert_eq!(trace.unwrap(), kept.iter().map(|k| k.1).collect::<Vec<_>>());
    // A keep that fails (a full disk) ends the phase with its own error, never a hang.
    let err = state
        .contribute_traced(
            &mut w,
            0,
            &opts,
            &mut ErrorFeedback::default(),
            &[0, 2, 3, 6],
            &mut |j, _, _| {
                if j == 3 {
                    Err(DilocoError::Inner("no space left on device".into()))
                } else {
                    Ok(())
                }
            },
        )
        .unwrap_err();
    assert!(err.to_string().contains("no space left"), "{err}");
}

#[test]
fn outer_step_without_momentum_and_lr_one_lands_on_the_local_parameters() {
    // θ − 1·(θ − θ_local) = θ_local: DiLoCo with one worker degenerates to plain training.
    let mut p = params(vec![0.3, -0.7], vec![5.0]);
    let local = params(vec![0.25, -0.5], vec![4.5]);
    let delta = synod_diloco::pseudo_gradient(&p, &local).unwrap();
    NesterovSgd::new(1.0, 0.0).step(&mut p, &delta).unwrap();
    assert_eq!(p, local);
}

#[test]
fn mean_is_the_element_wise_average() {
    let a = vec![vec![1.0, 2.0], vec![3.0]];
    let b = vec![vec![3.0, -2.0], vec![0.0]];
    let m = Mean.aggregate(1, &[&a, &b]).unwrap();
    assert_eq!(m, vec![vec![2.0, 0.0], vec![1.5]]);
    assert!(matches!(Mean.aggregate(1, &[]), Err(DilocoError::Empty(1))));
    assert!(matches!(
        Mean.aggregate(1, &[&a, &vec![vec![1.0]]]),
        Err(DilocoError::LayoutMismatch)
    ));
}

#[test]
fn the_mean_of_payloads_near_f32_max_stays_finite() {
    // Summed in f32, two finite values near f32::MAX overflow to ∞ before the division.
    let big = vec![vec![f32::MAX, -f32::MAX, 3.0e38]];
    let m = Mean.aggregate(1, &[&big, &big, &big]).unwrap();
    assert_eq!(m, big, "the mean of equal values is that value");
    assert!(m.iter().flatten().all(|x| x.is_finite()));
}

#[test]
fn an_outer_step_that_would_overflow_is_refused_and_changes_nothing() {
    // A member of a `mean` pool announces a pseudo-gradient near f32::MAX: θ − η·(g + μ·m)
    // leaves f32. The step is refused before θ or the momentum moves, so no member stores,
    // serves or commits a checkpoint with ∞ in it.
    let mut p = params(vec![1.0, 2.0], vec![3.0]);
    let before = p.clone();
    let mut opt = NesterovSgd::new(0.7, 0.9);
    let g = vec![vec![-3.0e38, 0.0], vec![0.0]];
    assert!(matches!(opt.step(&mut p, &g), Err(DilocoError::NonFinite)));
    assert_eq!(p, before);
    assert!(opt.buf.iter().flatten().all(|m| *m == 0.0));
    // Through a round: the state keeps its round number and θ.
    let like = params(vec![0.0; 3], vec![0.0; 2]);
    let mut s = OuterState::new(like.clone(), NesterovSgd::new(0.7, 0.9));
    let huge: Vec<Vec<f32>> = vec![vec![3.0e38; 3], vec![3.0e38; 2]];
    let opts = EncodeOptions {
        mode: synod_codec::Mode::Fp32,
        chunk_size: 0,
        ..EncodeOptions::default()
    };
    let c = Contribution {
        member: 0,
        payload: Arc::new(encode_pseudo_gradient(&like, &huge, &opts).unwrap()),
    };
    assert!(matches!(s.apply(&[c], &Mean), Err(DilocoError::NonFinite)));
    assert_eq!((s.round, &s.params), (0, &like));
}

fn payload(like: &ParamSet, scale: f32) -> Vec<u8> {
    let delta: Vec<Vec<f32>> = like
        .tensors()
        .iter()
        .map(|t| (0..t.numel()).map(|i| scale * (i as f32 + 1.0)).collect())
        .collect();
    encode_pseudo_gradient(like, &delta, &EncodeOptions::default()).unwrap()
}

#[test]
fn survivors_agree_bit_for_bit_whatever_the_arrival_order_and_garbage_is_dropped() {
    let start = params(vec![0.1; 300], vec![0.2; 7]);
    let good: Vec<Contribution> = (0..3)
        .map(|m| Contribution {
            member: m,
            payload: Arc::new(payload(&start, 0.01 * (m as f32 + 1.0))),
        })
        .collect();
    let mut garbage = payload(&start, 0.5);
    garbage[40] ^= 0xff;
    let wrong_shape = payload(&params(vec![0.0; 299], vec![0.0; 7]), 0.1);
    let mut a = OuterState::new(start.clone(), NesterovSgd::new(0.7, 0.9));
    let mut b = a.clone();
    let mut set_a = good.clone();
    set_a.push(Contribution {
        member: 3,
        payload: Arc::new(garbage),
    });
    set_a.push(Contribution {
        member: 4,
        payload: Arc::new(wrong_shape),
    });
    set_a.push(Contribution {
        member: 1,
        payload: Arc::new(payload(&start, 9.0)),
    }); // a second payload from member 1
    let mut set_b = good.clone();
    set_b.reverse();
    let ra = a.apply(&set_a, &Mean).unwrap();
    let rb = b.apply(&set_b, &Mean).unwrap();
    assert_eq!(ra.included, vec![0, 1, 2]);
    assert_eq!(
        ra.rejected.iter().map(|r| r.0).collect::<Vec<_>>(),
        vec![1, 3, 4]
    );
    assert_eq!(ra.hash, rb.hash);
    assert_eq!(ra.checkpoint, rb.checkpoint);
    assert_eq!(a.round, 1);
    // Nothing usable: a typed error, not a panic.
    let mut c = OuterState::new(start.clone(), NesterovSgd::new(0.7, 0.9));
    assert!(matches!(
        c.apply(
            &[Contribution {
                member: 0,
                payload: Arc::new(vec![1, 2, 3])
            }],
            &Mean
        ),
        Err(DilocoError::Empty(1))
    ));
}

#[test]
fn a_checkpoint_carries_the_outer_momentum_so_resume_is_bit_identical() {
    let start = params(vec![0.1; 50], vec![0.2; 5]);
    let round = |s: &ParamSet, k: f32| {
        vec![Contribution {
            member: 0,
            payload: Arc::new(payload(s, k)),
        }]
    };
    let mut a = OuterState::new(start.clone(), NesterovSgd::new(0.7, 0.9));
    let r1 = a.apply(&round(&start, 0.01), &Mean).unwrap();
    let set = synod_checkpoint::from_bytes(&r1.checkpoint).unwrap();
    let mut b = OuterState::from_checkpoint(set, 0.7, 0.9, 1).unwrap();
    assert_eq!(b.params, a.params);
    let r2a = a.apply(&round(&start, 0.02), &Mean).unwrap();
    let r2b = b.apply(&round(&start, 0.02), &Mean).unwrap();
    assert_eq!(r2a.hash, r2b.hash);
    // Without the momentum the second round would differ.
    let mut fresh = OuterState::new(
        synod_checkpoint::from_bytes(&r1.checkpoint).unwrap(),
        NesterovSgd::new(0.7, 0.9),
    );
    fresh
        .params
        .take_prefixed(synod_checkpoint::OUTER_MOMENTUM_PREFIX);
    fresh.round = 1;
    assert_ne!(
        fresh.apply(&round(&start, 0.02), &Mean).unwrap().hash,
        r2a.hash
    );
}

#[test]
fn local_rounds_converge_to_the_workers_consensus() {
    let start = ParamSet::new(vec![NamedTensor {
        name: "w".into(),
        shape: vec![4],
        data: vec![0.0; 4],
    }])
    .unwrap();
    let mut workers = vec![
        Quadratic {
            target: vec![1.0, 2.0, 3.0, 4.0],
            steps: 10,
        },
        Quadratic {
            target: vec![3.0, 2.0, 1.0, 0.0],
            steps: 10,
        },
    ];
    let mut s = OuterState::new(start, NesterovSgd::new(0.7, 0.9));
    for _ in 0..30 {
        let (out, _, sizes) = s
            .local_round(
                &mut workers,
                &Mean,
                &EncodeOptions::default(),
                &mut Vec::new(),
                None,
            )
            .unwrap();
        assert_eq!(out.included, vec![0, 1]);
        assert!(sizes.iter().all(|b| *b > 0));
    }
    for x in &s.params.tensors()[0].data {
        assert!((x - 2.0).abs() < 0.05, "{:?}", s.params.tensors()[0].data);
    }
}

/// A [`Quadratic`] worker that records where each of its inner phases started.
struct Recording {
    inner: Quadratic,
    starts: Vec<(u32, ParamSet)>,
}

impl synod_diloco::InnerTrainer for Recording {
    fn inner_phase(
        &mut self,
        start: &ParamSet,
        round: u32,
    ) -> Result<(ParamSet, synod_diloco::InnerReport), DilocoError> {
        self.starts.push((round, start.clone()));
        self.inner.inner_phase(start, round)
    }
}

/// Runs `rounds` local rounds of two recording quadratic workers, overlapped or not, outer
/// Nesterov momentum `momentum` (lr 0.7); returns θ after every round (θ₀ first) and the
/// workers.
fn recorded_rounds(overlap: bool, momentum: f32, rounds: usize) -> (Vec<ParamSet>, Vec<Recording>) {
    let theta0 = params(vec![0.0; 4], vec![1.0; 3]);
    let mut workers: Vec<Recording> = [[1.0, 2.0, 3.0, 4.0], [3.0, 2.0, 1.0, 0.0]]
        .into_iter()
        .map(|t| Recording {
            inner: Quadratic {
                target: t.to_vec(),
                steps: 5,
            },
            starts: Vec::new(),
        })
        .collect();
    let mut s = OuterState::new(theta0.clone(), NesterovSgd::new(0.7, momentum));
    if overlap {
        s = s.overlapped();
    }
    let mut thetas = vec![theta0];
    for _ in 0..rounds {
        s.local_round(
            &mut workers,
            &Mean,
            &EncodeOptions::default(),
            &mut Vec::new(),
            None,
        )
        .unwrap();
        thetas.push(s.params.clone());
    }
    (thetas, workers)
}

#[test]
fn overlapped_rounds_start_each_inner_phase_one_outer_step_behind() {
    let (thetas, workers) = recorded_rounds(true, 0.9, 5);
    for w in &workers {
        assert_eq!(w.starts.len(), 5);
        for (round, start) in &w.starts {
            // Round r starts from θ_{r−2} (θ₀ for rounds 1 and 2).
            let behind = (*round as usize).saturating_sub(2);
            assert_eq!(start, &thetas[behind], "round {round}");
        }
    }
    // Deterministic, and not the plain rounds: from round 2 on θ differs.
    assert_eq!(recorded_rounds(true, 0.9, 5).0, thetas);
    let (plain, plain_workers) = recorded_rounds(false, 0.9, 5);
    assert_eq!(plain[1], thetas[1]);
    assert!(plain[2..].iter().zip(&thetas[2..]).all(|(a, b)| a != b));
    for (round, start) in &plain_workers[0].starts {
        assert_eq!(start, &plain[*round as usize - 1], "plain round {round}");
    }
}

#[test]
fn a_stale_pseudo_gradient_needs_a_lower_outer_momentum() {
    // Each round's workers move 41 % of the way to their targets (consensus 2.0). The plain
    // rounds converge with momentum 0.9; with the gradient one outer step late, momentum 0.9
    // oscillates away and 0.5 converges (the delayed update's known instability).
    let error = |overlap: bool, momentum: f32| {
        let (thetas, _) = recorded_rounds(overlap, momentum, 60);
        thetas.last().unwrap().tensors()[0]
            .data
            .iter()
            .map(|x| (x - 2.0).abs())
            .fold(0f32, f32::max)
    };
    assert!(error(false, 0.9) < 0.05);
    assert!(error(true, 0.9) > 1.0);
    assert!(error(true, 0.5) < 0.05);
}

/// Max |θ − consensus| after `rounds` sparse rounds (top-8 of 64 per payload) of two quadratic
/// workers one plain gradient step each, outer SGD with lr 1 and no momentum (the setting of
/// Stich et al. 2018), error-feedback decay `decay` (0 = plain top-k, no memory).
fn sparse_consensus_error(decay: f32, rounds: usize) -> f32 {
    let n = 64;
    let start = ParamSet::new(vec![NamedTensor {
        name: "w".into(),
        shape: vec![n],
        data: vec![0.0; n],
    }])
    .unwrap();
    let consensus = |i: usize| 1.0 + (i % 3) as f32 / 2.0;
    // Each worker is ±0.1 off the consensus, by coordinate parity.
    let mut workers: Vec<Quadratic> = [0.1f32, -0.1]
        .iter()
        .map(|o| Quadratic {
            target: (0..n)
                .map(|i| consensus(i) + if i % 2 == 0 { *o } else { -o })
                .collect(),
            steps: 1,
        })
        .collect();
    let mut s = OuterState::new(start, NesterovSgd::new(1.0, 0.0));
    let mut feedback = vec![ErrorFeedback::new(decay); 2];
    for _ in 0..rounds {
        let (out, _, sizes) = s
            .local_round(
                &mut workers,
                &Mean,
                &EncodeOptions::sparse(64, 8),
                &mut feedback,
                None,
            )
            .unwrap();
        assert_eq!(out.included, vec![0, 1]);
        assert!(sizes.iter().all(|b| *b < 120), "{sizes:?}");
    }
    s.params.tensors()[0]
        .data
        .iter()
        .enumerate()
        .fold(0f32, |m, (i, x)| m.max((x - consensus(i)).abs()))
}

#[test]
fn sparse_rounds_with_error_feedback_reach_the_consensus_that_top_k_alone_is_slow_to() {
    // Top-8 of 64 sends an eighth of Δ; without memory the rest is dropped every round.
    let with = sparse_consensus_error(1.0, 30);
    let without = sparse_consensus_error(0.0, 30);
    assert!(with < 0.1, "error feedback: max error {with}");
    assert!(without > 5.0 * with, "with {with}, without {without}");
}

/// `payload` behind the largest trace (every hash a trace may hold) and error-feedback
/// commitments: the largest payload a member can send for it.
fn with_largest_prefixes(payload: &[u8]) -> Vec<u8> {
    synod_diloco::payload::Payload {
        trace: Some(vec![[9u8; 32]; synod_diloco::trace::MAX_TRACE_HASHES]),
        commitments: Some(synod_diloco::residual::Commitments {
            carried_in: [1; 32],
            carried_out: [2; 32],
        }),
        body: payload,
    }
    .to_bytes()
}

/// A generator of `n` incompressible values in [−0.5, 0.5) (xorshift64).
fn incompressible() -> impl FnMut(usize) -> Vec<f32> {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    move |n| {
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x as u32 as f32 / u32::MAX as f32) - 0.5
            })
            .collect()
    }
}

#[test]
fn fetch_limits_hold_real_checkpoints_and_payloads_and_refuse_far_larger_ones() {
    // Incompressible values (fp32 mode, random bits): the largest a payload of this model gets.
    let mut noise = incompressible();
    let p = params(noise(3000), noise(700));
    let mut state = OuterState::new(p.clone(), NesterovSgd::new(0.7, 0.9));
    let delta = vec![noise(3000), noise(700)];
    state.opt.step(&mut state.params, &delta).unwrap();
    let ckpt = synod_checkpoint::to_bytes(&state.checkpoint_set().unwrap()).unwrap();
    let max_ckpt = synod_diloco::max_checkpoint_bytes(&p);
    assert!(ckpt.len() as u64 <= max_ckpt, "{} > {max_ckpt}", ckpt.len());
    assert!(
        max_ckpt <= 8 * 3700 + (1 << 20) + (4 << 10),
        "tied to the model: {max_ckpt}"
    );
    let payload = encode_pseudo_gradient(&p, &delta, &EncodeOptions::fp32()).unwrap();
    let max_payload = synod_diloco::max_payload_bytes(&p);
    assert!(
        payload.len() as u64 <= max_payload,
        "{} > {max_payload}",
        payload.len()
    );
    assert!(
        max_payload
            <= 5 * 3700
                + (1 << 20)
                + (synod_diloco::trace::MAX_TRACE_BYTES + synod_diloco::residual::COMMITMENT_BYTES)
                    as u64,
        "tied to the model: {max_payload}"
    );
    // The largest trace and error-feedback commitments in front still fit.
    let traced = with_largest_prefixes(&payload);
    assert!(traced.len() as u64 <= max_payload);
    assert_eq!(
        synod_diloco::decode_pseudo_gradient(&p, 0, &traced).unwrap(),
        delta
    );
    // A trace state (θ, two moments, the step count) fits its own limit, tied to the model.
    let mut with_state = p.clone().with_prefixed("adamw.m.", &p).unwrap();
    with_state = with_state.with_prefixed("adamw.v.", &p).unwrap();
    let mut tensors = with_state.tensors().to_vec();
    tensors.push(synod_checkpoint::NamedTensor {
        name: "adamw.step".into(),
        shape: vec![1],
        data: vec![3.0],
    });
    let state_bytes = synod_checkpoint::to_bytes(&ParamSet::new(tensors).unwrap()).unwrap();
    let max_state = synod_diloco::trace::max_state_bytes(&p);
    assert!(
        state_bytes.len() as u64 <= max_state,
        "{} > {max_state}",
        state_bytes.len()
    );
    assert!(
        max_state <= 12 * 3700 + (1 << 20) + (12 << 10),
        "tied to the model: {max_state}"
    );
    // A payload just over the limit does not decode either: the two limits are one rule.
    let mut big = payload.clone();
    big.resize(max_payload as usize + 1, 0);
    assert!(synod_diloco::decode_pseudo_gradient(&p, 0, &big).is_err());
}

/// A sparse pool's fetch limit follows its codec: an honest sparse payload with the largest
/// trace and commitments fits it, and it is a small fraction of the any-codec limit (5 bytes
/// per parameter), so a member cannot make every other one fetch and keep a dense-sized
/// payload in a sparse pool. Dense codecs keep their own, tighter bound too.
#[test]
fn a_pools_payload_limit_follows_its_codec() {
    let n = 1 << 20;
    let p = params(vec![0.0; n], vec![0.0; 700]);
    let mut noise = incompressible();
    let delta = vec![noise(n), noise(700)];
    let any = synod_diloco::max_payload_bytes(&p);
    for (opts, share) in [
        (EncodeOptions::sparse(4096, 64), 0.05),
        (EncodeOptions::default(), 0.25),
        (EncodeOptions::fp32(), 0.85),
    ] {
        let limit = synod_diloco::max_payload_bytes_for(&p, &opts);
        assert!(
            (limit as f64) < share * any as f64,
            "{opts:?}: {limit} against {any}"
        );
        let payload = encode_pseudo_gradient(&p, &delta, &opts).unwrap();
        let traced = with_largest_prefixes(&payload);
        assert!(
            traced.len() as u64 <= limit,
            "{opts:?}: {} > {limit}",
            traced.len()
        );
    }
}

/// Five members, two tensors, int8 payloads of varied scale (member 4's ×50, so the clip
/// acts), member 2's payload corrupted.
fn fixed_round() -> (ParamSet, Vec<Contribution>) {
    let start = params(vec![0.5; 300], vec![-0.25; 70]);
    let mut x = 0x9e37_79b9u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    let deltas: Vec<Vec<Vec<f32>>> = (0..5)
        .map(|m| {
            let s = if m == 4 { 50.0 } else { 0.01 * (m + 1) as f32 };
            vec![
                (0..300).map(|_| next() * s).collect(),
                (0..70).map(|_| next() * s).collect(),
            ]
        })
        .collect();
    let mut contributions: Vec<Contribution> = deltas
        .iter()
        .enumerate()
        .map(|(m, d)| Contribution {
            member: m as u32,
            payload: Arc::new(
                encode_pseudo_gradient(&start, d, &EncodeOptions::default()).unwrap(),
            ),
        })
        .collect();
    Arc::make_mut(&mut contributions[2].payload)[40] ^= 1;
    (start, contributions)
}

#[test]
fn the_checkpoint_of_a_fixed_round_is_pinned_across_versions() {
    // Every member of a pool must hash the same checkpoint whatever version it runs: a change
    // of rounding anywhere in decode, aggregate or the outer step shows here.
    let (start, contributions) = fixed_round();
    let rule = synod_diloco::AggregationRule::ClippedTrimmedMean.aggregator(None);
    let mut s = OuterState::new(start, NesterovSgd::new(0.7, 0.9));
    let out = s.apply(&contributions, rule.as_ref()).unwrap();
    assert_eq!(
        synod_checkpoint::hex(&out.hash),
        "295e40cc7ae4d5fa0284e742bf68697ea00c00fafa3a47a21418944c00dbae7a"
    );
}

#[test]
fn streaming_apply_is_bit_identical_to_aggregating_the_decoded_set() {
    // Apply (tensor by tensor) must equal decode-all + aggregate, for every rule.
    let (start, contributions) = fixed_round();
    for rule in [
        synod_diloco::AggregationRule::Mean,
        synod_diloco::AggregationRule::ClippedTrimmedMean,
        synod_diloco::AggregationRule::ClippedMean,
    ] {
        let agg = rule.aggregator(None);
        let mut streamed = OuterState::new(start.clone(), NesterovSgd::new(0.7, 0.9));
        let out = streamed.apply(&contributions, agg.as_ref()).unwrap();
        assert_eq!(out.included, vec![0, 1, 3, 4]);
        let decoded: Vec<_> = [0usize, 1, 3, 4]
            .iter()
            .map(|m| {
                synod_diloco::decode_pseudo_gradient(&start, *m as u32, &contributions[*m].payload)
                    .unwrap()
            })
            .collect();
        let refs: Vec<_> = decoded.iter().collect();
        let g = agg.aggregate(1, &refs).unwrap();
        let mut whole = start.clone();
        NesterovSgd::new(0.7, 0.9).step(&mut whole, &g).unwrap();
        for (a, b) in streamed.params.tensors().iter().zip(whole.tensors()) {
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&a.data), bits(&b.data), "{}", rule.name());
        }
    }
}
