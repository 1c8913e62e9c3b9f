//! One outer round: contribute, exchange, aggregate, outer step, checkpoint.

use std::sync::Arc;

use rayon::prelude::*;
use synod_checkpoint::{CheckpointHash, ParamSet, OUTER_MOMENTUM_PREFIX};
use synod_codec::EncodeOptions;

use crate::{
    byzantine::Adversary, open_pseudo_gradient, pseudo_gradient, Aggregator, DilocoError,
    ErrorFeedback, InnerReport, InnerTrainer, NesterovSgd, PseudoGradient,
};

/// A member's encoded pseudo-gradient for one round, as it arrived.
#[derive(Clone, Debug)]
pub struct Contribution {
    /// Member index in the pool (the chain's order).
    pub member: u32,
    /// Encoded pseudo-gradient (synod-codec bytes), shared: the exchange serves and relays
    /// the same allocation it hands to aggregation, without copying it.
    pub payload: Arc<Vec<u8>>,
}

/// The result of one outer round.
#[derive(Clone, Debug)]
pub struct RoundOutcome {
    /// Outer round number (from 1).
    pub round: u32,
    /// Members whose pseudo-gradient was aggregated, ascending.
    pub included: Vec<u32>,
    /// Members whose payload was rejected, with the reason.
    pub rejected: Vec<(u32, String)>,
    /// Canonical safetensors bytes of θ_r plus the outer momentum.
    pub checkpoint: Vec<u8>,
    /// blake3 of `checkpoint`: the value committed on-chain.
    pub hash: CheckpointHash,
}

/// The aggregate of one round's payloads ([`aggregate_payloads`]).
#[derive(Clone, Debug)]
pub struct Aggregated {
    /// Members whose payload was aggregated, ascending.
    pub included: Vec<u32>,
    /// Members whose payload was rejected, with the reason.
    pub rejected: Vec<(u32, String)>,
    /// The outer gradient (f32, the model's layout).
    pub gradient: PseudoGradient,
}

/// Decodes `contributions` (ascending member order; malformed payloads, repeated members and
/// members of weight 0 in `agg` ([`Aggregator::weight`]: not in the round's snapshot) are
/// dropped and reported, never fatal) against the layout of `like` and aggregates them.
///
/// Streams: a first pass checks every payload and takes its norm
/// ([`open_pseudo_gradient`]), a second combines the payloads one tensor at a time
/// ([`Aggregator::combine`]). Beyond the payloads themselves it holds the aggregate (4 bytes
/// per parameter) and N copies of one tensor, not N decoded models (`bench memory` prints
/// the peak against decoding everything first); the result is bit-identical to
/// [`Aggregator::aggregate`] of the decoded set.
///
/// # Errors
/// [`DilocoError::Empty`] (for `round`) if no payload survives decoding.
pub fn aggregate_payloads(
    like: &ParamSet,
    round: u32,
    contributions: &[Contribution],
    agg: &dyn Aggregator,
) -> Result<Aggregated, DilocoError> {
    let mut order: Vec<&Contribution> = contributions.iter().collect();
    order.sort_by_key(|c| c.member);
    // The first contribution of each member is opened (in parallel; each norm is a serial
    // fold, so the result does not depend on the thread count); later ones are duplicates.
    let first: Vec<bool> = order
        .iter()
        .enumerate()
        .map(|(i, c)| i == 0 || order[i - 1].member != c.member)
        .collect();
    let opened: Vec<Option<Result<_, DilocoError>>> = order
        .par_iter()
        .zip(&first)
        .map(|(c, first)| first.then(|| open_pseudo_gradient(like, c.member, &c.payload)))
        .collect();
    let (mut included, mut rejected, mut open, mut norms, mut weights) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (c, o) in order.iter().zip(opened) {
        let weight = agg.weight(c.member);
        match o {
            None => rejected.push((c.member, "duplicate contribution".to_string())),
            Some(Ok(_)) if weight == 0 => {
                rejected.push((c.member, "no stake in the round's snapshot".to_string()))
            }
            Some(Ok((d, norm))) => {
                included.push(c.member);
                open.push((c.member, d));
                norms.push(norm);
                weights.push(weight);
            }
            Some(Err(e)) => rejected.push((c.member, e.to_string())),
        }
    }
    if open.is_empty() {
        return Err(DilocoError::Empty(round));
    }
    let factors = agg.factors(&norms, &weights);
    let mut gradient: PseudoGradient = Vec::with_capacity(like.tensors().len());
    for (t, tensor) in like.tensors().iter().enumerate() {
        // Every frame decoded in the first pass: a failure here is the same failure.
        let column = open
            .par_iter()
            .map(|(member, d)| {
                d.tensor(t).map_err(|source| DilocoError::Decode {
                    member: *member,
                    source,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let refs: Vec<&[f32]> = column.iter().map(Vec::as_slice).collect();
        let mut out = vec![0f32; tensor.data.len()];
        agg.combine(&refs, &factors, &weights, &mut out);
        gradient.push(out);
    }
    Ok(Aggregated {
        included,
        rejected,
        gradient,
    })
}

/// The global state every member holds between rounds: θ and the outer optimizer.
#[derive(Clone, Debug)]
pub struct OuterState {
    /// Global parameters θ (after the last completed round).
    pub params: ParamSet,
    /// Outer optimizer with its momentum.
    pub opt: NesterovSgd,
    /// Last completed outer round (0 before the first).
    pub round: u32,
    /// Overlapped rounds ([`OuterState::overlapped`]): θ before the last outer step, where the
    /// next round's inner phases start; `None` otherwise, or before the first outer step.
    delayed_start: Option<ParamSet>,
    /// Whether rounds overlap ([`OuterState::overlapped`]).
    overlap: bool,
}

/// Largest checkpoint ([`OuterState::checkpoint_set`] as safetensors: θ and the outer
/// momentum, f32) of a model laid out like `like`, in bytes: 8 bytes per parameter, plus 2 KiB
/// of header per tensor (both halves) and 1 MiB. A peer offering a larger "checkpoint" is
/// refused before a byte is transferred.
pub fn max_checkpoint_bytes(like: &ParamSet) -> u64 {
    crate::file_bound(like, 8, 2 << 10)
}

/// Trace states ([`OuterState::contribute_traced`]) that may wait in the channel to the writer
/// thread while the inner phase goes on. With the state being handed over and the one being
/// written (plus its serialized bytes), a traced phase holds at most 4 states' worth of extra
/// memory, 12 bytes per parameter each (48 bytes per parameter; 24 when it wrote in line).
pub const QUEUED_TRACE_STATES: usize = 1;

/// The index [`OuterState::contribute_traced`] hands `keep` with a sparse payload's residual
/// `e_r` (error-feedback commitments, [`crate::residual`]), after the trace's states.
pub const RESIDUAL_INDEX: u32 = u32::MAX;

impl OuterState {
    /// State at round 0 from the initial parameters.
    pub fn new(params: ParamSet, opt: NesterovSgd) -> Self {
        Self {
            params,
            opt,
            round: 0,
            delayed_start: None,
            overlap: false,
        }
    }

    /// This state with overlapped rounds: a one-step-delayed outer update (Streaming DiLoCo,
    /// Douillard et al. 2025, §2.3; the delayed Nesterov step of Liu et al. 2024,
    /// "Asynchronous Local-SGD Training for Language Modeling"). Round r's inner phases start
    /// from θ_{r−2} (θ₀ for rounds 1 and 2): the parameters that are final when round r − 1's
    /// exchange begins, so they can run while round r − 1's pseudo-gradients are in flight and
    /// its outer step is made. Their pseudo-gradients Δ_r = θ_{r−2} − θ_local are aggregated
    /// and applied to θ_{r−1} as usual. Deterministic: a replay of round r starts from θ_{r−2}.
    pub fn overlapped(mut self) -> Self {
        self.overlap = true;
        self
    }

    /// Where the next round's inner phases start: θ, or with overlapped rounds θ before the
    /// last outer step ([`OuterState::overlapped`]).
    pub fn inner_start(&self) -> &ParamSet {
        self.delayed_start.as_ref().unwrap_or(&self.params)
    }

    /// The tensors a checkpoint holds: θ plus `outer_momentum.*`.
    ///
    /// # Errors
    /// [`DilocoError::Checkpoint`] if a momentum name collides with a parameter name.
    pub fn checkpoint_set(&self) -> Result<ParamSet, DilocoError> {
        Ok(self
            .params
            .clone()
            .with_prefixed(OUTER_MOMENTUM_PREFIX, &self.opt.state(&self.params))?)
    }

    /// Restores the state from a checkpoint's tensors (the output of [`OuterState::checkpoint_set`]).
    ///
    /// # Errors
    /// [`DilocoError::LayoutMismatch`] if the momentum does not match the parameters.
    pub fn from_checkpoint(
        mut set: ParamSet,
        lr: f32,
        momentum: f32,
        round: u32,
    ) -> Result<Self, DilocoError> {
        let state = set.take_prefixed(OUTER_MOMENTUM_PREFIX);
        let mut opt = NesterovSgd::new(lr, momentum);
        opt.restore(&set, &state)?;
        Ok(Self {
            params: set,
            opt,
            round,
            delayed_start: None,
            overlap: false,
        })
    }

    /// Runs `trainer`'s inner phase for the next round from [`OuterState::inner_start`] (θ
    /// unless rounds overlap) and returns member `me`'s encoded
    /// pseudo-gradient with the phase's report. `feedback` is the member's error-feedback
    /// memory (used by the sparse codec only; pass a fresh one for int8 and fp32).
    ///
    /// # Errors
    /// As [`InnerTrainer::inner_phase`] and [`ErrorFeedback::encode`].
    pub fn contribute(
        &self,
        trainer: &mut dyn InnerTrainer,
        me: u32,
        opts: &EncodeOptions,
        feedback: &mut ErrorFeedback,
    ) -> Result<(Contribution, InnerReport), DilocoError> {
        self.contribute_traced(trainer, me, opts, feedback, &[], &mut |_, _, _| Ok(()))
    }

    /// [`OuterState::contribute`] with a Proof-of-Learning trace: the phase's full state at
    /// every step of `boundaries` (normally [`crate::verify::segment_boundaries`] of H and the
    /// recipe's segment count) is
    /// serialized (`synod_checkpoint::to_bytes`, 12 bytes per parameter) and hashed, handed to
    /// `keep(j, bytes, blake3)` (the member stores and serves them to verifiers), and the
    /// hashes go in front of the payload ([`crate::trace`]). No boundaries: no trace, the
    /// payload of [`OuterState::contribute`]. With a committing `feedback`
    /// ([`ErrorFeedback::committed`]) and the sparse codec, the residual left for the next
    /// round goes to `keep` too (index [`RESIDUAL_INDEX`], canonical bytes and blake3) and the
    /// payload carries its commitments ([`crate::residual`]).
    ///
    /// Serializing, hashing and `keep` run on a second thread while the inner steps go on
    /// (in boundary order; at most [`QUEUED_TRACE_STATES`] states wait, so the extra memory
    /// is bounded): the trace costs the phase the copy of each state out of the model, not
    /// its write. The report's `secs` leave out the time the phase waited for the writer (a
    /// disk slower than the steps): that is no inner compute.
    ///
    /// # Errors
    /// As [`OuterState::contribute`] and [`InnerTrainer::inner_phase_traced`]; whatever `keep`
    /// returns; [`DilocoError::Inner`] if the trainer skipped a boundary.
    pub fn contribute_traced(
        &self,
        trainer: &mut dyn InnerTrainer,
        me: u32,
        opts: &EncodeOptions,
        feedback: &mut ErrorFeedback,
        boundaries: &[u32],
        keep: &mut (dyn FnMut(u32, Vec<u8>, [u8; 32]) -> Result<(), DilocoError> + Send),
    ) -> Result<(Contribution, InnerReport), DilocoError> {
        let round = self.round + 1;
        let start = self.inner_start();
        let (local, report, trace) = if boundaries.is_empty() {
            let (local, report) = trainer.inner_phase(start, round)?;
            (local, report, Vec::new())
        } else {
            let (tx, rx) = std::sync::mpsc::sync_channel::<(u32, ParamSet)>(QUEUED_TRACE_STATES);
            // Seconds the phase waited for the writer to take a state.
            let mut blocked = 0.0;
            // Reborrowed for the writer: the residual goes to `keep` after the phase.
            let keep_state = &mut *keep;
            let (phase, written) = std::thread::scope(|s| {
                let writer = s.spawn(move || -> Result<Vec<[u8; 32]>, DilocoError> {
                    let mut trace = Vec::with_capacity(boundaries.len());
                    for (j, state) in rx {
                        let bytes = synod_checkpoint::to_bytes(&state)?;
                        drop(state);
                        let hash = synod_checkpoint::hash(&bytes);
                        trace.push(hash);
                        keep_state(j, bytes, hash)?;
                    }
                    Ok(trace)
                });
                let phase =
                    trainer.inner_phase_traced(start, round, boundaries, &mut |j, state| {
                        let t = std::time::Instant::now();
                        let sent = tx
                            .send((j, state))
                            .map_err(|_| DilocoError::Inner("the trace writer stopped".into()));
                        blocked += t.elapsed().as_secs_f64();
                        sent
                    });
                drop(tx);
                (phase, writer.join())
            });
            // The writer's own error explains a phase that could not hand it a state.
            let trace =
                written.map_err(|_| DilocoError::Inner("the trace writer panicked".into()))??;
            let (local, mut report) = phase?;
            report.secs = (report.secs - blocked).max(0.0);
            (local, report, trace)
        };
        if trace.len() != boundaries.len() {
            return Err(DilocoError::Inner(format!(
                "the inner phase recorded {} of {} trace states",
                trace.len(),
                boundaries.len()
            )));
        }
        let delta = pseudo_gradient(start, &local)?;
        let commit = feedback.commits() && opts.mode == synod_codec::Mode::SparseTopK;
        let carried_in = match feedback.residual().filter(|_| commit) {
            Some(e) => crate::residual::residual_bytes(start, e)?.1,
            None => crate::residual::NO_RESIDUAL,
        };
        let body = feedback.encode(start, delta, opts)?;
        let mut commitments = None;
        if commit {
            // e_r is kept (stored and served, like a trace state) before its hash is signed.
            let carried_out = match feedback.residual() {
                Some(e) => {
                    let (bytes, hash) = crate::residual::residual_bytes(start, e)?;
                    keep(RESIDUAL_INDEX, bytes, hash)?;
                    hash
                }
                None => crate::residual::NO_RESIDUAL,
            };
            commitments = Some(crate::residual::Commitments {
                carried_in,
                carried_out,
            });
        }
        let payload = crate::payload::Payload {
            trace: Some(trace),
            commitments,
            body: &body,
        }
        .to_bytes();
        Ok((
            Contribution {
                member: me,
                payload: Arc::new(payload),
            },
            report,
        ))
    }

    /// Decodes the included set (in ascending member order; malformed payloads and repeated
    /// members are dropped and reported, never fatal), aggregates ([`aggregate_payloads`],
    /// tensor by tensor), applies the outer step and writes the checkpoint. Advances
    /// `self.round`; on an error, changes nothing.
    ///
    /// # Errors
    /// [`DilocoError::Empty`] if no payload survives decoding; [`DilocoError::NonFinite`] if
    /// the aggregate would leave θ non-finite (no checkpoint with ∞ or NaN is ever written);
    /// otherwise as the aggregator and outer step.
    pub fn apply(
        &mut self,
        contributions: &[Contribution],
        agg: &dyn Aggregator,
    ) -> Result<RoundOutcome, DilocoError> {
        let round = self.round + 1;
        let Aggregated {
            included,
            rejected,
            gradient: g,
        } = aggregate_payloads(&self.params, round, contributions, agg)?;
        // Kept only once the step is taken: a refused step changes nothing.
        let start = self.overlap.then(|| self.params.clone());
        self.opt.step(&mut self.params, &g)?;
        if start.is_some() {
            self.delayed_start = start;
        }
        self.round = round;
        let checkpoint = synod_checkpoint::to_bytes(&self.checkpoint_set()?)?;
        let hash = synod_checkpoint::hash(&checkpoint);
        Ok(RoundOutcome {
            round,
            included,
            rejected,
            checkpoint,
            hash,
        })
    }

    /// One round of N workers in this process (local mode): every trainer contributes as member
    /// `index` (with its own error-feedback memory, `feedback[index]`, grown to N on first use),
    /// `adversary` (if any) replaces its member's payload by its attack, then all payloads are
    /// applied once. Returns the outcome, each worker's report and each worker's payload size
    /// in bytes.
    ///
    /// # Errors
    /// As [`OuterState::contribute`], [`Adversary::tamper`] and [`OuterState::apply`].
    pub fn local_round<T: InnerTrainer>(
        &mut self,
        trainers: &mut [T],
        agg: &dyn Aggregator,
        opts: &EncodeOptions,
        feedback: &mut Vec<ErrorFeedback>,
        adversary: Option<&Adversary>,
    ) -> Result<(RoundOutcome, Vec<InnerReport>, Vec<usize>), DilocoError> {
        if feedback.len() < trainers.len() {
            let decay = feedback.first().map_or(1.0, |f| f.decay);
            feedback.resize(trainers.len(), ErrorFeedback::new(decay));
        }
        let mut contributions = Vec::with_capacity(trainers.len());
        let mut reports = Vec::with_capacity(trainers.len());
        for ((i, t), f) in trainers.iter_mut().enumerate().zip(feedback.iter_mut()) {
            let (c, r) = self.contribute(t, u32::try_from(i).unwrap_or(u32::MAX), opts, f)?;
            contributions.push(c);
            reports.push(r);
        }
        let sizes = contributions.iter().map(|c| c.payload.len()).collect();
        if let Some(adv) = adversary {
            adv.tamper(&self.params, self.round + 1, &mut contributions, opts)?;
        }
        Ok((self.apply(&contributions, agg)?, reports, sizes))
    }
}
