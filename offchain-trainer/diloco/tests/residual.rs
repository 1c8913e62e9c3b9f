//! Sparse payloads in a pool: error-feedback commitments, and what a verifier's replay tells
//! an honest member from one that lies about its residual (`synod_diloco::residual`).
#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

mod common;
use common::Quadratic;

use synod_checkpoint::{NamedTensor, ParamSet};
use synod_codec::EncodeOptions;
use synod_diloco::residual::{
    carried_distance, commitments_of, residual_bytes, residual_from_bytes, NO_RESIDUAL,
};
use synod_diloco::verify::{replay_distance, within_tolerance};
use synod_diloco::{ErrorFeedback, NesterovSgd, OuterState, PseudoGradient, RESIDUAL_INDEX};

const N: usize = 256;

fn state() -> OuterState {
    let set = ParamSet::new(vec![NamedTensor {
        name: "w".into(),
        shape: vec![N],
        data: (0..N)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.01)
            .collect(),
    }])
    .unwrap();
    OuterState::new(set, NesterovSgd::new(0.7, 0.9))
}

fn worker() -> Quadratic {
    Quadratic {
        target: (0..N)
            .map(|i| ((i * 13 % 29) as f32 - 14.0) * 0.02)
            .collect(),
        steps: 5,
    }
}

fn opts() -> EncodeOptions {
    EncodeOptions::sparse(64, 4)
}

/// What `keep` received: (index, bytes, blake3).
type Kept = Vec<(u32, Vec<u8>, [u8; 32])>;

/// Member 0's payload from `from` with `residual` as e_{r−1}: the payload, the residual it
/// leaves (as the memory holds it) and what `keep` received for it.
fn contribute(
    from: &OuterState,
    residual: Option<PseudoGradient>,
) -> (Vec<u8>, PseudoGradient, Kept) {
    let mut ef = ErrorFeedback::committed(1.0, residual);
    let mut kept = Vec::new();
    let (c, _) = from
        .contribute_traced(&mut worker(), 0, &opts(), &mut ef, &[], &mut |j, b, h| {
            kept.push((j, b, h));
            Ok(())
        })
        .unwrap();
    (c.payload.to_vec(), ef.residual().unwrap().clone(), kept)
}

#[test]
fn a_pool_payload_commits_to_the_residual_it_used_and_the_one_it_leaves() {
    let s = state();
    let (p1, e1, kept) = contribute(&s, None);
    let c1 = commitments_of(0, &p1).unwrap().unwrap();
    assert_eq!(
        c1.carried_in, NO_RESIDUAL,
        "round 1 starts from zero memory"
    );
    assert_eq!(kept.len(), 1);
    let (j, bytes, hash) = &kept[0];
    assert_eq!((*j, *hash), (RESIDUAL_INDEX, c1.carried_out));
    assert_eq!(&residual_from_bytes(&s.params, bytes).unwrap(), &e1);
    // Round 2 carries e_1 in: its commitment is round 1's carried_out.
    let (p2, _, _) = contribute(&s, Some(e1));
    assert_eq!(
        commitments_of(0, &p2).unwrap().unwrap().carried_in,
        c1.carried_out
    );
    // A memory outside a pool (benches, local training) commits to nothing.
    let (local, _) = s
        .contribute(&mut worker(), 0, &opts(), &mut ErrorFeedback::new(1.0))
        .unwrap();
    assert_eq!(commitments_of(0, &local.payload).unwrap(), None);
    // Dense codecs carry no commitments either, in a pool too.
    let (dense, _) = s
        .contribute(
            &mut worker(),
            0,
            &EncodeOptions::default(),
            &mut ErrorFeedback::committed(1.0, None),
        )
        .unwrap();
    assert_eq!(commitments_of(0, &dense.payload).unwrap(), None);
}

/// The verifier's side: replaying with the committed e_{r−1} reproduces the payload and the
/// served e_r; a residual that is not what the payload leaves is outside the tolerance.
#[test]
fn a_forged_carried_out_residual_is_caught_by_the_replay() {
    let s = state();
    let (_, e1, _) = contribute(&s, None);
    let (claimed, e2, _) = contribute(&s, Some(e1.clone()));
    // The verifier's replay, with e_1 as served.
    let mut ef = ErrorFeedback::committed(1.0, Some(e1));
    let (replayed, _) = s.contribute(&mut worker(), 0, &opts(), &mut ef).unwrap();
    let d = replay_distance(&s.params, 0, &claimed, &replayed.payload).unwrap();
    assert!(within_tolerance(d), "payload distance {d}");
    let honest = carried_distance(
        &s.params,
        0,
        ef.residual().unwrap(),
        &replayed.payload,
        &claimed,
        &e2,
    )
    .unwrap();
    assert!(within_tolerance(honest), "honest residual at {honest}");
    // Hiding mass (a zero residual: what was dropped is never sent) or inflating it (to send
    // more than it trained next round) is far outside.
    for forged in [
        vec![vec![0.0; N]],
        vec![e2[0].iter().map(|x| x * 3.0).collect()],
    ] {
        let d = carried_distance(
            &s.params,
            0,
            ef.residual().unwrap(),
            &replayed.payload,
            &claimed,
            &forged,
        )
        .unwrap();
        assert!(!within_tolerance(d), "forged residual at {d}");
    }
    // A residual of another layout is an error, not a pass.
    assert!(carried_distance(
        &s.params,
        0,
        ef.residual().unwrap(),
        &replayed.payload,
        &claimed,
        &vec![vec![0.0; N - 1]],
    )
    .is_err());
}

/// A member that encodes round 2 with a fabricated e_1 (to push a direction of its choosing)
/// and commits to it honestly is caught twice: its carried_in is not round 1's carried_out
/// (the linkage every verifier checks), and replayed with the e_1 the rule names, its payload
/// is outside the tolerance.
#[test]
fn a_payload_encoded_with_a_fabricated_residual_fails_its_replay() {
    let s = state();
    let (p1, e1, _) = contribute(&s, None);
    let out1 = commitments_of(0, &p1).unwrap().unwrap().carried_out;
    let fabricated = vec![e1[0].iter().map(|x| -10.0 * x - 0.05).collect::<Vec<f32>>()];
    let (claimed, _, _) = contribute(&s, Some(fabricated.clone()));
    let c = commitments_of(0, &claimed).unwrap().unwrap();
    assert_eq!(
        c.carried_in,
        residual_bytes(&s.params, &fabricated).unwrap().1
    );
    assert_ne!(c.carried_in, out1, "the linkage check sees the fabrication");
    let mut ef = ErrorFeedback::committed(1.0, Some(e1));
    let (replayed, _) = s.contribute(&mut worker(), 0, &opts(), &mut ef).unwrap();
    let d = replay_distance(&s.params, 0, &claimed, &replayed.payload).unwrap();
    assert!(!within_tolerance(d), "fabricated residual's payload at {d}");
}
