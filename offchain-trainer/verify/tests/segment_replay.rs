//! The verifier over an inner trainer that is not the tch replica: a toy model whose inner step
//! pulls each weight toward a target drawn from (worker, round, step), with a full state of
//! its weights and step count. The segment checks, the dispute check and the whole replay run
//! on it through [`SegmentReplay`] alone, without libtorch.
#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use anyhow::Result;
use synod_checkpoint::{NamedTensor, ParamSet};
use synod_codec::EncodeOptions;
use synod_diloco::verify::segment_boundaries;
use synod_diloco::{
    DilocoError, ErrorFeedback, InnerReport, InnerTrainer, OuterState, SegmentReplay,
};
use synod_verify::replay::{Dispute, Residuals, TraceStates, WholeReplay};
use synod_verify::{ReplayInput, ReplayRecipe, Replayer};

/// Inner steps per phase.
const H: u32 = 16;
/// Segments of a phase's trace (4 steps each).
const SEGMENTS: u32 = 4;
/// Weights of the toy model.
const N: usize = 8;
/// The name of the step count in a full state (sorts after the weights).
const STEP: &str = "~step";
/// The member whose work is checked.
const MEMBER: u32 = 1;

/// The toy model's inner trainer; `lazy` names a segment whose steps it skips (a member that
/// saves work and still commits a trace of the right shape).
struct Toy {
    worker: u32,
    lazy: Option<u32>,
}

/// The target of weight `i` at inner step `step` of `round` for `worker`, in −0.5..0.5: a pure
/// function of its arguments, as a member's batches are.
fn target(worker: u32, round: u32, step: u32, i: usize) -> f32 {
    let mut h = blake3::Hasher::new();
    for x in [worker, round, step, i as u32] {
        h.update(&x.to_le_bytes());
    }
    f32::from(h.finalize().as_bytes()[0]) / 255.0 - 0.5
}

fn weights(w: Vec<f32>) -> NamedTensor {
    NamedTensor {
        name: "w".into(),
        shape: vec![N],
        data: w,
    }
}

fn theta(w: Vec<f32>) -> ParamSet {
    ParamSet::new(vec![weights(w)]).unwrap()
}

fn full_state(w: Vec<f32>, step: u32) -> ParamSet {
    let count = NamedTensor {
        name: STEP.into(),
        shape: vec![1],
        data: vec![step as f32],
    };
    ParamSet::new(vec![weights(w), count]).unwrap()
}

/// The weights and step count of a full state.
fn split(state: &ParamSet) -> Result<(Vec<f32>, u32), DilocoError> {
    match state.tensors() {
        [w, s] if w.name == "w" && s.name == STEP && w.data.len() == N => {
            Ok((w.data.clone(), s.data[0] as u32))
        }
        _ => Err(DilocoError::Inner(
            "not a full state of the toy model".into(),
        )),
    }
}

impl Toy {
    /// Inner steps `from..to` of `round` on `w`, the lazy segment's skipped.
    fn run(&self, w: &mut [f32], round: u32, from: u32, to: u32) {
        let len = H / SEGMENTS;
        for step in (from..to).filter(|s| self.lazy != Some(s / len)) {
            for (i, x) in w.iter_mut().enumerate() {
                *x += 0.1 * (target(self.worker, round, step, i) - *x);
            }
        }
    }
}

impl InnerTrainer for Toy {
    fn inner_phase(
        &mut self,
        start: &ParamSet,
        round: u32,
    ) -> Result<(ParamSet, InnerReport), DilocoError> {
        self.inner_phase_traced(start, round, &[], &mut |_, _| Ok(()))
    }

    fn inner_phase_traced(
        &mut self,
        start: &ParamSet,
        round: u32,
        boundaries: &[u32],
        state: &mut dyn FnMut(u32, ParamSet) -> Result<(), DilocoError>,
    ) -> Result<(ParamSet, InnerReport), DilocoError> {
        let mut w = start.tensors()[0].data.clone();
        let mut done = 0;
        for &j in boundaries {
            self.run(&mut w, round, done, j);
            done = j;
            state(j, full_state(w.clone(), j))?;
        }
        self.run(&mut w, round, done, H);
        Ok((theta(w), InnerReport::default()))
    }
}

impl SegmentReplay for Toy {
    fn set_worker(&mut self, worker: u32) {
        self.worker = worker;
    }

    fn start_state(&mut self, start: &ParamSet) -> Result<ParamSet, DilocoError> {
        Ok(full_state(start.tensors()[0].data.clone(), 0))
    }

    fn replay_segment(
        &mut self,
        state: &ParamSet,
        round: u32,
        from: u32,
        to: u32,
    ) -> Result<ParamSet, DilocoError> {
        let (mut w, step) = split(state)?;
        if step != from || to > H {
            return Err(DilocoError::Inner(
                "not the state after `from` steps".into(),
            ));
        }
        self.run(&mut w, round, from, to);
        Ok(full_state(w, to))
    }

    fn plausible_state(&self, state: &ParamSet, start: &ParamSet) -> bool {
        state.same_layout(start)
            && split(state).is_ok_and(|(w, step)| step <= H && w.iter().all(|x| x.abs() <= 1.0))
    }

    fn params_of(&self, state: &ParamSet) -> ParamSet {
        let mut p = state.clone();
        let _ = p.take_prefixed(STEP);
        p
    }

    fn state_distance(&self, start: &ParamSet, claimed: &ParamSet, replayed: &ParamSet) -> f64 {
        let (Ok((s, _)), Ok((c, cs)), Ok((r, rs))) =
            (split(start), split(claimed), split(replayed))
        else {
            return f64::INFINITY;
        };
        if cs != rs {
            return f64::INFINITY;
        }
        let (mut diff, mut norm) = (0f64, 0f64);
        for ((c, r), s) in c.iter().zip(&r).zip(&s) {
            diff += f64::from(c - r).powi(2);
            norm += f64::from(r - s).powi(2);
        }
        diff.sqrt() / norm.sqrt().max(f64::MIN_POSITIVE)
    }
}

/// The toy pool's recipe: fp32 payloads, plain outer SGD, [`SEGMENTS`] trace segments.
struct ToyRecipe;

impl ReplayRecipe for ToyRecipe {
    type Trainer = Toy;

    fn keeps_inner_state(&self) -> bool {
        false
    }

    fn restore(&self, checkpoint: &[u8], round: u32) -> Result<OuterState> {
        let set = synod_checkpoint::from_bytes(checkpoint)?;
        Ok(OuterState::from_checkpoint(set, 0.7, 0.0, round)?)
    }

    fn replica(&self, worker: u32, _: u32, _: u32) -> Result<Toy> {
        Ok(Toy { worker, lazy: None })
    }

    fn encode_options(&self) -> EncodeOptions {
        EncodeOptions::fp32()
    }

    fn feedback(&self) -> ErrorFeedback {
        ErrorFeedback::default()
    }

    fn sparse(&self) -> bool {
        false
    }

    fn ef_decay(&self) -> f32 {
        1.0
    }

    fn segment_boundaries(&self, inner_steps: u32) -> Vec<u32> {
        segment_boundaries(inner_steps, SEGMENTS)
    }
}

/// θ₀'s checkpoint bytes, and [`MEMBER`]'s signed payload of round 1 from it (with its trace)
/// and the trace states it serves, trained by a member that skips segment `lazy`.
fn contribution(lazy: Option<u32>) -> (Vec<u8>, Vec<u8>, TraceStates) {
    let parent = synod_checkpoint::to_bytes(&theta(vec![0.0; N])).unwrap();
    let from = ToyRecipe.restore(&parent, 0).unwrap();
    let mut served = TraceStates::new();
    let (c, _) = from
        .contribute_traced(
            &mut Toy {
                worker: MEMBER,
                lazy,
            },
            MEMBER,
            &EncodeOptions::fp32(),
            &mut ErrorFeedback::default(),
            &ToyRecipe.segment_boundaries(H),
            &mut |_, bytes, hash| {
                served.insert(hash, bytes);
                Ok(())
            },
        )
        .unwrap();
    (parent, c.payload.to_vec(), served)
}

/// [`MEMBER`]'s contribution to round 1 from checkpoint `parent` with signed `payload` (dense:
/// no residuals).
fn input<'a>(parent: &'a [u8], payload: &'a [u8]) -> ReplayInput<'a, Toy> {
    static NONE: std::sync::OnceLock<Residuals> = std::sync::OnceLock::new();
    ReplayInput {
        recipe: &ToyRecipe,
        parent,
        round: 1,
        member: MEMBER,
        claimed: payload,
        residuals: NONE.get_or_init(Residuals::default),
    }
}

#[test]
fn an_honest_trace_passes_every_segment_check_on_a_trainer_other_than_tch() {
    let (parent, payload, served) = contribution(None);
    let input = input(&parent, &payload);
    let mut replayer = Replayer::new(H, 4);
    let all: Vec<u32> = (0..SEGMENTS).collect();
    let rep = replayer
        .check_segments(&input, &all, &mut |h| served.get(h).cloned())
        .unwrap();
    assert!(rep.honest, "{rep:?}");
    assert_eq!((rep.whole, rep.segments), (None, SEGMENTS));
    let whole = replayer.check(&input).unwrap();
    assert!(whole.honest && whole.distance < 1e-6, "{whole:?}");
}

#[test]
fn a_skipped_segment_is_found_named_and_decides_its_dispute_without_a_whole_replay() {
    let (parent, payload, served) = contribution(Some(2));
    let input = input(&parent, &payload);
    let mut replayer = Replayer::new(H, 4);
    let mut fetch = |h: &[u8; 32]| served.get(h).cloned();
    // The verifier that draws the lazy segment finds it, confirms it by the whole replay and
    // names it for the challenge.
    let rep = replayer.check_segments(&input, &[2], &mut fetch).unwrap();
    assert!(!rep.honest, "{rep:?}");
    assert_eq!(rep.whole, Some(WholeReplay::Mismatch));
    assert_eq!(rep.failed, Some(Dispute::Segment(2)));
    // One that draws another segment does not: the trace is honest there.
    let elsewhere = replayer.check_segments(&input, &[1], &mut fetch).unwrap();
    assert!(
        elsewhere.honest && elsewhere.whole.is_none(),
        "{elsewhere:?}"
    );
    // A juror of the challenge replays the named segment only, and that decides.
    let juror = replayer
        .check_dispute(&input, Dispute::Segment(2), &mut fetch)
        .unwrap();
    assert!(!juror.honest && juror.whole.is_none(), "{juror:?}");
    assert!(juror.distance > synod_diloco::verify::SEGMENT_CONVICTION);
    assert_eq!(juror.failed, Some(Dispute::Segment(2)));
}
