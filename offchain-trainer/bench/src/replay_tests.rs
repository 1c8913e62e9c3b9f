//! Replays on the tiny model of contributions with Proof-of-Learning traces: the pool's
//! replay ([`synod_verify::Replayer`]) against honest members and the dishonest ones of
//! [`crate::forger`], with the trainer's recipe ([`Recipe::load`] of a [`PoolRecipe`] on this
//! machine) and the corpus. The replay's unit tests are in
//! `offchain-trainer/verify/src/replay/tests.rs`.

use std::sync::Arc;

use synod_checkpoint::ParamSet;
use synod_diloco::byzantine::{Adversary, Attack};
use synod_diloco::payload::Payload;
use synod_diloco::recipe::{
    PoolRecipe, RecipeCodec, SparseRecipe, DENSE_OUTER_LR, DENSE_OUTER_MOMENTUM, SPARSE_EF_DECAY,
    SPARSE_OUTER_LR,
};
use synod_diloco::verify::{DEFAULT_SEGMENTS, SEGMENT_CONVICTION, SEGMENT_TOLERANCE};
use synod_diloco::{AggregationRule, Contribution, ErrorFeedback, PseudoGradient};
use synod_model::FIRST_MOMENT_PREFIX;
use synod_verify::replay::{
    Dispute, Replay, ReplayInput, Replayer, Residuals, TraceStates, WholeReplay,
};

use crate::forger::{bending, edited, forged_contribution, skipping};
use synod_member::config::RecipeConfig;
use synod_member::pool::Recipe;

const H: u32 = 8;

type States = TraceStates;

/// A loaded recipe and its θ₀.
type Fixture = (Recipe, ParamSet);

/// The tiny model's recipe: the trainer's default recipe (dense int8 codec, its outer step
/// and aggregation rule) with the tiny preset, batch 4 and a warm-up of 2 steps.
fn tiny() -> PoolRecipe {
    PoolRecipe {
        model: "tiny".into(),
        batch: 4,
        seq_len: synod_model::GptConfig::preset("tiny").unwrap().ctx as usize,
        lr: 1e-3,
        min_lr: 1e-4,
        warmup: 2,
        round_warmup: 0,
        keep_inner_state: false,
        seed: 1337,
        outer_lr: DENSE_OUTER_LR,
        outer_momentum: DENSE_OUTER_MOMENTUM,
        codec: RecipeCodec::Int8,
        sparse: None,
        aggregation: AggregationRule::ClippedTrimmedMean,
        overlap: false,
        trace_segments: DEFAULT_SEGMENTS,
    }
}

/// [`tiny`] with the sparse codec and its defaults: 128 of every 4096 elements, the sparse
/// outer step (no momentum), error feedback and the clipped mean.
fn tiny_sparse() -> PoolRecipe {
    PoolRecipe {
        outer_lr: SPARSE_OUTER_LR,
        outer_momentum: 0.0,
        codec: RecipeCodec::Sparse,
        sparse: Some(SparseRecipe {
            chunk: 4096,
            topk: 128,
            ef_decay: SPARSE_EF_DECAY,
        }),
        aggregation: AggregationRule::ClippedMean,
        ..tiny()
    }
}

fn setup() -> Fixture {
    setup_with(tiny())
}

/// `recipe` loaded on the CPU with the corpus (`$SYNOD_DATA`, else the shared one).
fn setup_with(recipe: PoolRecipe) -> Fixture {
    let data = std::env::var("SYNOD_DATA").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/data/tinyshakespeare.txt"
        )
        .into()
    });
    let config = RecipeConfig {
        recipe,
        data: data.into(),
        device: "cpu".into(),
        eval_batches: 20,
    };
    let recipe = Recipe::load(&config).unwrap();
    let theta0 = synod_checkpoint::from_bytes(&recipe.theta0_bytes).unwrap();
    (recipe, theta0)
}

/// Member `m`'s honest traced contribution to round 1: (payload, states by hash).
fn honest(recipe: &Recipe, m: u32) -> (Vec<u8>, States) {
    let state = recipe.restore(&recipe.theta0_bytes, 0).unwrap();
    let mut w = recipe.setup.replica(&recipe.pool, m, H, 4 * H).unwrap();
    let mut states = States::new();
    let (c, _) = state
        .contribute_traced(
            &mut w,
            m,
            &recipe.pool.encode_options(),
            &mut recipe.pool.feedback(),
            &recipe.pool.segment_boundaries(H),
            &mut |_, bytes, hash| {
                states.insert(hash, bytes);
                Ok(())
            },
        )
        .unwrap();
    (c.payload.to_vec(), states)
}

/// Member 1's forged contribution to round 1 (a `forger::Forger` with `forge`).
fn forged(
    (recipe, theta0): &Fixture,
    forge: &mut dyn FnMut(u32, &ParamSet, u32) -> Option<ParamSet>,
) -> (Vec<u8>, States) {
    let mut w = recipe.setup.replica(&recipe.pool, 1, H, 4 * H).unwrap();
    let bounds = recipe.pool.segment_boundaries(H);
    forged_contribution(
        &mut w,
        theta0,
        1,
        forge,
        &bounds,
        &recipe.pool.encode_options(),
    )
    .unwrap()
}

/// Member 1's round-1 payload checked by `segments`, states served from `states`.
fn check(f: &Fixture, payload: &[u8], segments: &[u32], states: Option<&States>) -> Replay {
    check_at(f, 1, payload, &Residuals::default(), segments, states)
}

/// Member 1's payload of `round` (started from θ₀) with its `residuals`.
fn check_at(
    (recipe, _): &Fixture,
    round: u32,
    payload: &[u8],
    residuals: &Residuals,
    segments: &[u32],
    states: Option<&States>,
) -> Replay {
    let input = ReplayInput {
        recipe: &recipe.replay_view(),
        parent: &recipe.theta0_bytes,
        round,
        member: 1,
        claimed: payload,
        residuals,
    };
    Replayer::new(H, 4)
        .check_segments(&input, segments, &mut |h| {
            states.and_then(|s| s.get(h).cloned())
        })
        .unwrap()
}

#[test]
fn an_honest_trace_passes_by_its_segments_and_withheld_states_mean_a_whole_replay() {
    let f = setup();
    let (payload, states) = honest(&f.0, 1);
    let all: Vec<u32> = (0..H).collect();
    let rep = check(&f, &payload, &all, Some(&states));
    assert!(rep.honest, "{rep:?}");
    assert_eq!(
        rep.segments, H,
        "checked by its segments, not replayed whole"
    );
    assert!(rep.distance <= SEGMENT_TOLERANCE);
    // The author serves nothing: the verifier pays a whole replay, the member is honest.
    let rep = check(&f, &payload, &[3], None);
    assert!(rep.honest && rep.segments == 0, "{rep:?}");
    assert_eq!(rep.whole, Some(WholeReplay::Unserved));
}

#[test]
fn a_recipes_coarser_trace_is_checked_by_its_own_segments() {
    // Two trace segments of 4 steps (the default cuts H = 8 into 8).
    // Member and verifier cut the phase alike; a verifier on the default boundaries
    // would find a trace of the wrong length and replay every contribution whole.
    let f = setup_with(PoolRecipe {
        trace_segments: 2,
        ..tiny()
    });
    assert_eq!(f.0.pool.segment_boundaries(H), [0, 4, 8]);
    let (payload, states) = honest(&f.0, 1);
    let rep = check(&f, &payload, &[0, 1], Some(&states));
    assert!(
        rep.honest && rep.segments == 2 && rep.whole.is_none(),
        "{rep:?}"
    );
    // One step skipped in segment 1 (steps 4..8): found by that segment only.
    let (lazy, states) = forged(&f, &mut skipping(&[1]));
    let caught = check(&f, &lazy, &[1], Some(&states));
    assert!(
        !caught.honest && caught.whole == Some(WholeReplay::Mismatch),
        "{caught:?}"
    );
    let missed = check(&f, &lazy, &[0], Some(&states));
    assert!(missed.honest && missed.whole.is_none(), "{missed:?}");
}

#[test]
fn a_payload_that_is_not_its_traces_end_is_caught_by_its_end_without_a_whole_replay() {
    let f = setup();
    let (payload, states) = honest(&f.0, 1);
    let other = honest(&f.0, 2).0;
    let set = vec![
        Contribution {
            member: 1,
            payload: Arc::new(payload.clone()),
        },
        Contribution {
            member: 2,
            payload: Arc::new(other),
        },
    ];
    let opts = f.0.pool.encode_options();
    for attack in [Attack::ScaleX100, Attack::Copy, Attack::Zeros] {
        let mut set = set.clone();
        Adversary {
            member: 1,
            attack,
            seed: 3,
        }
        .tamper(&f.1, 1, &mut set, &opts)
        .unwrap();
        let honest = Payload::trace_of(&payload);
        assert!(honest.is_some(), "the honest payload is traced");
        assert_eq!(
            Payload::trace_of(&set[0].payload),
            honest,
            "the attacker keeps its honest trace"
        );
        // Segment 3 is honest work: the end check alone catches it, and decides (a whole
        // replay could not make the payload its trace's end), naming the part a challenge
        // disputes.
        let rep = check(&f, &set[0].payload, &[3], Some(&states));
        assert!(
            !rep.honest && rep.whole.is_none() && rep.failed == Some(Dispute::Encoding),
            "{}: {rep:?}",
            attack.name()
        );
    }
}

#[test]
fn a_member_that_skips_a_step_is_caught_by_the_segment_that_holds_it() {
    let f = setup();
    // Segment 3's step is never computed: only the counter moves on.
    let (payload, states) = forged(&f, &mut skipping(&[3]));

    let caught = check(&f, &payload, &[3], Some(&states));
    assert!(
        !caught.honest && caught.whole == Some(WholeReplay::Mismatch),
        "confirmed by a whole replay: {caught:?}"
    );
    // A verifier that draws another segment sees a consistent trace: why the draw is
    // secret until the trace is committed, and why several verifiers draw.
    let missed = check(&f, &payload, &[5], Some(&states));
    assert!(
        missed.honest && missed.segments == 1 && missed.whole.is_none(),
        "{missed:?}"
    );
}

#[test]
fn bending_every_segment_within_the_tolerance_is_replayed_whole_and_caught() {
    // Each segment's end is moved 0.9 × SEGMENT_TOLERANCE off its honest replay, every
    // time in the same direction: each drawn segment passes on its own, but the drift
    // they extrapolate to over the phase does not, so the verifier replays the phase whole,
    // as jurors do, and the bias the segments added up is caught there.
    let f = setup();
    let recipe = &f.0;
    let bounds = recipe.pool.segment_boundaries(H);
    let mut honest_segments = recipe.setup.replica(&recipe.pool, 1, H, 4 * H).unwrap();
    let share = 0.9 * SEGMENT_TOLERANCE;
    let (payload, states) = forged(&f, &mut bending(&mut honest_segments, &bounds, 1, share));
    let segments = (bounds.len() - 1) as u32;
    let drawn = [1, segments / 2, segments - 1];
    let rep = check(&f, &payload, &drawn, Some(&states));
    let juror = check(&f, &payload, &[], Some(&states));
    eprintln!(
        "{{\"segments\":{segments},\"share\":{share},\"whole_distance\":{}}}",
        juror.distance
    );
    assert_eq!(rep.whole, Some(WholeReplay::Drift), "{rep:?}");
    assert_eq!(
        rep.distance, juror.distance,
        "the verifier judges as jurors do"
    );
    assert!(!rep.honest && !juror.honest, "{rep:?}");
}

#[test]
fn an_empty_segment_draw_cannot_pass_a_lazy_member() {
    // Start and end checks alone pass any self-consistent forgery (`--verify-segments
    // 0` did): no segment drawn means a whole replay, which catches it.
    let f = setup();
    let all: Vec<u32> = (0..H).collect();
    let (payload, states) = forged(&f, &mut skipping(&all));
    let rep = check(&f, &payload, &[], Some(&states));
    assert!(
        !rep.honest && rep.whole == Some(WholeReplay::Asked),
        "{rep:?}"
    );
}

#[test]
fn a_poisoned_start_state_is_refused_and_its_member_replayed_whole() {
    // The forger claims after segment 0 a state with one huge first moment: replays
    // from it would move that coordinate so far that a 1 % tolerance on the update
    // hid the lazy rest. No AdamW state has |m| > C·√v: refused, replayed whole.
    let f = setup();
    let m = format!("{FIRST_MOMENT_PREFIX}{}", f.1.tensors()[0].name);
    let mut poison =
        |i: u32, s: &ParamSet, end: u32| (i == 0).then(|| edited(s, end, &[(m.as_str(), 0, 1e4)]));
    let (payload, states) = forged(&f, &mut poison);
    let rep = check(&f, &payload, &[1], Some(&states));
    assert!(
        !rep.honest && rep.whole == Some(WholeReplay::Refused),
        "{rep:?}"
    );
}

/// Member 1's sparse pool payload of round 2 (from θ₀ again, numbered 2, with its
/// round-1 residual carried in): (payload, its trace states, e_1 bytes, e_2 bytes).
fn sparse_round_two((recipe, _): &Fixture) -> (Vec<u8>, States, Vec<u8>, Vec<u8>) {
    let mut w = recipe.setup.replica(&recipe.pool, 1, H, 4 * H).unwrap();
    let mut run = |round: u32, e: Option<PseudoGradient>| {
        let state = recipe.restore(&recipe.theta0_bytes, round - 1).unwrap();
        let mut ef = ErrorFeedback::committed(recipe.pool.ef_decay(), e);
        let mut states = States::new();
        let (c, _) = state
            .contribute_traced(
                &mut w,
                1,
                &recipe.pool.encode_options(),
                &mut ef,
                &recipe.pool.segment_boundaries(H),
                &mut |_, bytes, hash| {
                    states.insert(hash, bytes);
                    Ok(())
                },
            )
            .unwrap();
        let c = synod_diloco::residual::commitments_of(1, &c.payload)
            .unwrap()
            .map(|k| (k, c.payload.to_vec()))
            .unwrap();
        (c, ef.residual().cloned(), states)
    };
    let ((c1, _), e1, states1) = run(1, None);
    let ((c2, payload), _, states2) = run(2, e1);
    assert_eq!(c2.carried_in, c1.carried_out);
    let e1 = states1[&c1.carried_out].clone();
    let e2 = states2[&c2.carried_out].clone();
    (payload, states2, e1, e2)
}

#[test]
fn a_sparse_payload_replays_with_its_served_residuals_whole_and_by_segments() {
    let f = setup_with(tiny_sparse());
    let (payload, states, e1, e2) = sparse_round_two(&f);
    let served = Residuals {
        carried_in: Some(e1),
        carried_out: Some(e2),
    };
    let by_segments = check_at(&f, 2, &payload, &served, &[2], Some(&states));
    assert!(
        by_segments.honest && by_segments.whole.is_none(),
        "{by_segments:?}"
    );
    let whole = check_at(&f, 2, &payload, &served, &[], Some(&states));
    assert!(
        whole.honest && whole.whole == Some(WholeReplay::Asked),
        "{whole:?}"
    );
}

/// A member that serves another `e_r` than the one its payload leaves (hiding the
/// mass it dropped, or inflating it to send more next round than it trained) is
/// caught by the segment check and by the whole replay jurors run; so is one that
/// serves no `e_r`, or an `e_{r−1}` other than the one it encoded with.
#[test]
fn a_sparse_member_that_forges_its_residual_is_caught() {
    let f = setup_with(tiny_sparse());
    let (payload, states, e1, e2) = sparse_round_two(&f);
    let like = &f.1;
    let parsed = synod_diloco::residual::residual_from_bytes(like, &e2).unwrap();
    let scaled: PseudoGradient = parsed
        .iter()
        .map(|t| t.iter().map(|x| 3.0 * x).collect())
        .collect();
    let zeros: PseudoGradient = parsed.iter().map(|t| vec![0.0; t.len()]).collect();
    let bytes = |e: &PseudoGradient| synod_diloco::residual::residual_bytes(like, e).unwrap().0;
    let forgeries = [
        ("hidden e_r", Some(e1.clone()), Some(bytes(&zeros))),
        ("inflated e_r", Some(e1.clone()), Some(bytes(&scaled))),
        ("no e_r", Some(e1.clone()), None),
        ("no e_{r-1}", None, Some(e2.clone())),
        ("garbage e_r", Some(e1), Some(b"not a residual".to_vec())),
    ];
    for (what, carried_in, carried_out) in forgeries {
        let served = Residuals {
            carried_in,
            carried_out,
        };
        for segments in [&[2u32][..], &[]] {
            let rep = check_at(&f, 2, &payload, &served, segments, Some(&states));
            assert!(!rep.honest, "{what} passed ({segments:?}): {rep:?}");
        }
    }
}

/// Member 1's round-1 payload judged as a juror judges `dispute`, states served from `states`.
fn judge(
    (recipe, _): &Fixture,
    payload: &[u8],
    dispute: Dispute,
    states: Option<&States>,
) -> Replay {
    let input = ReplayInput {
        recipe: &recipe.replay_view(),
        parent: &recipe.theta0_bytes,
        round: 1,
        member: 1,
        claimed: payload,
        residuals: &Residuals::default(),
    };
    Replayer::new(H, 4)
        .check_dispute(&input, dispute, &mut |h| {
            states.and_then(|s| s.get(h).cloned())
        })
        .unwrap()
}

#[test]
fn a_dispute_naming_the_skipped_segment_convicts_without_a_whole_replay() {
    let f = setup();
    let (payload, states) = forged(&f, &mut skipping(&[3]));
    // The verifier's check names the segment that failed (its whole replay confirms it).
    let found = check(&f, &payload, &[3], Some(&states));
    assert_eq!(found.failed, Some(Dispute::Segment(3)), "{found:?}");
    // Jurors check that segment only: guilty, no whole replay.
    let rep = judge(&f, &payload, Dispute::Segment(3), Some(&states));
    assert!(
        !rep.honest && rep.whole.is_none() && rep.segments == 1,
        "{rep:?}"
    );
    assert_eq!(rep.failed, Some(Dispute::Segment(3)));
    // An accomplice's sham dispute naming a segment that replays acquits, on that claim only.
    let sham = judge(&f, &payload, Dispute::Segment(5), Some(&states));
    assert!(sham.honest && sham.whole.is_none(), "{sham:?}");
    // Withheld states: the whole replay judges, and catches it.
    let withheld = judge(&f, &payload, Dispute::Segment(3), None);
    assert!(
        !withheld.honest && withheld.whole == Some(WholeReplay::Unserved),
        "{withheld:?}"
    );
}

#[test]
fn an_encoding_dispute_convicts_a_scaled_payload_without_a_replay() {
    let f = setup();
    let (payload, states) = honest(&f.0, 1);
    let mut set = vec![Contribution {
        member: 1,
        payload: Arc::new(payload.clone()),
    }];
    Adversary {
        member: 1,
        attack: Attack::ScaleX100,
        seed: 3,
    }
    .tamper(&f.1, 1, &mut set, &f.0.pool.encode_options())
    .unwrap();
    let scaled = set[0].payload.to_vec();
    let found = check(&f, &scaled, &[3], Some(&states));
    assert_eq!(found.failed, Some(Dispute::Encoding), "{found:?}");
    let rep = judge(&f, &scaled, Dispute::Encoding, Some(&states));
    assert!(
        !rep.honest && rep.whole.is_none() && rep.segments == 0,
        "{rep:?}"
    );
    assert_eq!(rep.failed, Some(Dispute::Encoding));
}

#[test]
fn an_honest_member_is_acquitted_on_every_part_a_challenger_may_name() {
    let f = setup();
    let (payload, states) = honest(&f.0, 1);
    for dispute in [
        Dispute::Encoding,
        Dispute::Segment(0),
        Dispute::Segment(H - 1),
    ] {
        let rep = judge(&f, &payload, dispute, Some(&states));
        assert!(
            rep.honest && rep.whole.is_none() && rep.failed.is_none(),
            "{dispute:?}: {rep:?}"
        );
    }
    // A segment its trace does not have, or the whole phase: a whole replay judges.
    for dispute in [Dispute::Segment(H), Dispute::Phase] {
        let rep = judge(&f, &payload, dispute, Some(&states));
        assert!(
            rep.honest && rep.whole == Some(WholeReplay::Asked),
            "{dispute:?}: {rep:?}"
        );
    }
    // Withholding its own states costs an honest member nothing but its juror's time.
    let rep = judge(&f, &payload, Dispute::Segment(2), None);
    assert!(
        rep.honest && rep.whole == Some(WholeReplay::Unserved),
        "{rep:?}"
    );
}

#[test]
fn a_segment_failing_by_little_is_judged_by_a_whole_replay() {
    // Every segment bent 2 × SEGMENT_TOLERANCE one way: past the segment tolerance, but within
    // what a larger model's or another device's honest drift might reach, so the named
    // segment alone does not convict; the whole replay does (the bends add up).
    let f = setup();
    let recipe = &f.0;
    let bounds = recipe.pool.segment_boundaries(H);
    let mut honest_segments = recipe.setup.replica(&recipe.pool, 1, H, 4 * H).unwrap();
    let share = 2.0 * SEGMENT_TOLERANCE;
    let (payload, states) = forged(&f, &mut bending(&mut honest_segments, &bounds, 1, share));
    let rep = judge(&f, &payload, Dispute::Segment(2), Some(&states));
    assert!(
        !rep.honest && rep.whole == Some(WholeReplay::Mismatch),
        "{rep:?}"
    );
    assert_eq!(rep.failed, Some(Dispute::Segment(2)));
    // A verifier whose check fails that segment by so little does not name it: its challenge
    // disputes the whole phase, which its whole replay found dishonest.
    let found = check(&f, &payload, &[2], Some(&states));
    assert!(!found.honest && found.failed.is_none(), "{found:?}");
    // A skipped step is far past the conviction bound: the segment alone convicts.
    let (lazy, lazy_states) = forged(&f, &mut skipping(&[2]));
    let rep = judge(&f, &lazy, Dispute::Segment(2), Some(&lazy_states));
    assert!(
        rep.distance > SEGMENT_CONVICTION && rep.whole.is_none(),
        "{rep:?}"
    );
}

#[test]
fn the_noise_probe_measures_an_honest_segment_across_thread_counts() {
    // `pool create`'s probe on a CPU-only machine: the tiny recipe's honest segment drift
    // between this device and the reference device (the CPU) at two libtorch thread counts is
    // finite and far inside half the segment tolerance, so it is accepted.
    let (recipe, _) = setup();
    let n = synod_member::pool::terms::honest_noise(&recipe, H, 4).unwrap();
    eprintln!(
        "{{\"distance\":{},\"segment_distance\":{},\"runs\":[\"{}\",\"{}\"]}}",
        n.distance, n.segment_distance, n.runs.0, n.runs.1
    );
    assert_eq!(n.runs.1.device, synod_member::pool::terms::REFERENCE_DEVICE);
    assert_ne!(n.runs.0.threads, n.runs.1.threads, "{n:?}");
    assert!(
        n.segment_distance.is_finite() && n.segment_distance < SEGMENT_TOLERANCE / 2.0,
        "{n:?}"
    );
    synod_member::pool::terms::check_noise(&n).unwrap();
}
