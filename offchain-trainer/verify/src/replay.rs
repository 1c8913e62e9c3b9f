//! Replaying a member's inner phase (Proof-of-Learning re-execution, Jia et al. 2021, §4):
//! whole ([`Replayer::check`]), a sample of its trace's segments
//! ([`Replayer::check_segments`], what verifiers run first), or the one part of the trace a
//! challenge disputes ([`Replayer::check_dispute`], what jurors run). A juror's vote on a replay is
//! [`super::vote`]. The dishonest members the checks are tested against are the trainer's
//! forger (`offchain-trainer/bench/src/forger.rs`). What a replay needs of the pool's
//! recipe comes through [`ReplayRecipe`].

use std::time::Instant;

use anyhow::{bail, Context, Result};
use synod_checkpoint::ParamSet;
use synod_codec::EncodeOptions;
use synod_diloco::residual::{carried_distance, residual_from_bytes, NO_RESIDUAL};
use synod_diloco::verify::{replay_distance, within_tolerance};
use synod_diloco::{DilocoError, ErrorFeedback, OuterState, PseudoGradient, SegmentReplay};
pub use synod_protocol::Dispute;

/// What a replay needs of a pool's recipe (the recipe every member trains with, whose hash the
/// pool spec commits to): the trainer implements it over its loaded recipe and command-line
/// recipe flags (`ReplayView` in `offchain-trainer/member/src/pool/recipe.rs`), with the tch
/// replica as its [`ReplayRecipe::Trainer`].
pub trait ReplayRecipe {
    /// The inner trainer a replay runs the recipe's inner phases and segments on.
    type Trainer: SegmentReplay;

    /// Whether the recipe keeps the inner AdamW moments across rounds (`--keep-inner-state`):
    /// then an inner phase cannot be replayed from θ alone.
    fn keeps_inner_state(&self) -> bool;

    /// The outer state after `round` from `checkpoint` (canonical bytes of θ with its outer
    /// momentum, or θ₀ without), with the recipe's outer learning rate and momentum.
    ///
    /// # Errors
    /// A checkpoint that does not parse, or whose momentum does not fit θ.
    fn restore(&self, checkpoint: &[u8], round: u32) -> Result<OuterState>;

    /// A model replica for `worker` (fresh weights from the pool seed, the recipe's corpus and
    /// device) for phases of `inner_steps` steps out of `total_steps` in all (the inner
    /// learning-rate schedule).
    ///
    /// # Errors
    /// An unknown model preset, or the inner trainer's errors.
    fn replica(&self, worker: u32, inner_steps: u32, total_steps: u32) -> Result<Self::Trainer>;

    /// The encoder options of the recipe's codec (and its sparse settings).
    fn encode_options(&self) -> EncodeOptions;

    /// A member's empty error-feedback memory with the recipe's decay (used by the sparse
    /// codec only).
    fn feedback(&self) -> ErrorFeedback;

    /// Whether the recipe's codec is the sparse one (its payloads carry error-feedback
    /// residuals).
    fn sparse(&self) -> bool;

    /// The recipe's error-feedback decay β.
    fn ef_decay(&self) -> f32;

    /// Segment boundaries of the recipe's Proof-of-Learning trace for a phase of
    /// `inner_steps` ([`synod_diloco::verify::segment_boundaries`] with the recipe's segment
    /// count).
    fn segment_boundaries(&self, inner_steps: u32) -> Vec<u32>;
}

/// The result of one replay.
#[derive(Clone, Copy, Debug)]
pub struct Replay {
    /// Relative L2 distance between the claimed and the replayed pseudo-gradient
    /// ([`replay_distance`]); `f64::INFINITY` for a claimed payload that does not decode.
    pub distance: f64,
    /// Whether the distance is within the protocol's tolerance.
    pub honest: bool,
    /// Wall-clock seconds of the replay.
    pub secs: f64,
    /// Segments of the accused's trace replayed; 0 for a whole inner phase.
    pub segments: u32,
    /// Why the whole inner phase was replayed; `None` when the trace's segments decided.
    pub whole: Option<WholeReplay>,
    /// The part of the trace a check found wrong (what a challenge names, so that its jurors
    /// check that part only); `None` when no trace check failed.
    pub failed: Option<Dispute>,
}

/// Why a verifier replayed a member's whole inner phase rather than its trace's segments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WholeReplay {
    /// Asked for: a challenge of the whole phase (also when a verifier reuses its juror's
    /// replay), a dispute naming a segment the trace does not have, or no segment drawn.
    Asked,
    /// The payload carries no trace, a malformed one, or one not cut into this pool's
    /// segments.
    NoTrace,
    /// The accused did not serve a state in time (withheld, gone, or the network too slow).
    Unserved,
    /// A served state does not parse, fit the model, or pass
    /// [`SegmentReplay::plausible_state`] (or the verifier's own replay of a segment failed).
    Refused,
    /// The start state, the end state's payload or a drawn segment did not match.
    Mismatch,
    /// Every drawn segment matched, but their drift extrapolated to the whole phase
    /// ([`synod_diloco::verify::segment_drift`]) is past the whole replay's tolerance: a member
    /// bending every segment one way within the segment tolerance.
    Drift,
}

impl WholeReplay {
    /// Its name in metrics events (`snake_case`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Asked => "asked",
            Self::NoTrace => "no_trace",
            Self::Unserved => "unserved",
            Self::Refused => "refused",
            Self::Mismatch => "mismatch",
            Self::Drift => "drift",
        }
    }
}

/// A sparse payload's error-feedback residuals as served by its author
/// ([`synod_diloco::residual`]): canonical bytes whose blake3 the caller checked against the
/// payload's commitments. Both `None` for dense codecs.
#[derive(Clone, Debug, Default)]
pub struct Residuals {
    /// `e_{r−1}`, the residual the payload was encoded with (`None`: zero memory).
    pub carried_in: Option<Vec<u8>>,
    /// `e_r`, the residual it leaves (`None` for a dense payload; a sparse payload claiming
    /// none is dishonest: error feedback always leaves one).
    pub carried_out: Option<Vec<u8>>,
}

impl Residuals {
    /// The residuals `claimed` commits to, read from `dir`'s copies in its evidence of
    /// `round` (an author's own evidence holds them; [`Retained::trace_path`]). Empty for a
    /// dense payload.
    ///
    /// [`Retained::trace_path`]: crate::Retained::trace_path
    ///
    /// # Errors
    /// A malformed payload; a residual that is not there or does not hash to its commitment.
    pub fn from_evidence(
        retained: &crate::Retained,
        round: u32,
        member: u32,
        claimed: &[u8],
    ) -> Result<Self> {
        let Some(c) = synod_diloco::residual::commitments_of(member, claimed)? else {
            return Ok(Self::default());
        };
        let read = |h: [u8; 32]| -> Result<Option<Vec<u8>>> {
            if h == NO_RESIDUAL {
                return Ok(None);
            }
            retained.kept_state(round, &h).map(Some).with_context(|| {
                format!(
                    "residual {} of member {member}'s payload (only its author keeps it)",
                    synod_checkpoint::hex(&h)
                )
            })
        };
        Ok(Self {
            carried_in: read(c.carried_in)?,
            carried_out: read(c.carried_out)?,
        })
    }

    /// The memory a replay encodes with ([`ErrorFeedback::committed`] holding `e_{r−1}` for
    /// the sparse codec, a fresh one otherwise) and the served `e_r` parsed against `like`.
    /// `Err` (a dishonest author) for residual bytes that do not parse or fit the model.
    fn replay_memory<T: SegmentReplay>(
        &self,
        recipe: &dyn ReplayRecipe<Trainer = T>,
        like: &ParamSet,
    ) -> Result<(ErrorFeedback, Option<PseudoGradient>), DilocoError> {
        if !recipe.sparse() {
            return Ok((recipe.feedback(), None));
        }
        let parse = |b: &Option<Vec<u8>>| {
            b.as_deref()
                .map(|b| residual_from_bytes(like, b))
                .transpose()
        };
        let carried_in = parse(&self.carried_in)?;
        Ok((
            ErrorFeedback::committed(recipe.ef_decay(), carried_in),
            parse(&self.carried_out)?,
        ))
    }
}

/// The worse of a replay's payload distance and, for a sparse payload, its residual's
/// ([`carried_distance`] of the served `e_r`, ∞ when none was committed): `feedback` is the
/// replay's memory after encoding `replayed`.
fn with_carried(
    distance: f64,
    like: &ParamSet,
    member: u32,
    feedback: &ErrorFeedback,
    replayed: &[u8],
    claimed: &[u8],
    carried_out: Option<&PseudoGradient>,
) -> f64 {
    let Some(replay_residual) = feedback.residual().filter(|_| feedback.commits()) else {
        return distance;
    };
    let carried = carried_out
        .and_then(|out| {
            carried_distance(like, member, replay_residual, replayed, claimed, out).ok()
        })
        .unwrap_or(f64::INFINITY);
    if carried.is_nan() || distance.is_nan() {
        return f64::NAN;
    }
    distance.max(carried)
}

/// One contribution to replay, as every check of it reads it, on inner trainers `T`.
pub struct ReplayInput<'a, T> {
    /// The pool's recipe (model, data, inner optimizer, codec).
    pub recipe: &'a dyn ReplayRecipe<Trainer = T>,
    /// θ_{round−1} (θ_{round−2} with overlapped rounds): the canonical checkpoint bytes, with
    /// the outer momentum.
    pub parent: &'a [u8],
    /// The round whose inner phase is replayed (≥ 1).
    pub round: u32,
    /// The member whose inner phase is replayed (its index in the pool: it selects its
    /// batches).
    pub member: u32,
    /// The member's signed payload: the envelope's bytes (trace, commitments, codec body).
    pub claimed: &'a [u8],
    /// The residuals a sparse payload carries in and out (empty for dense codecs).
    pub residuals: &'a Residuals,
}

impl<T> Clone for ReplayInput<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for ReplayInput<'_, T> {}

/// Replays inner phases of one pool's recipe on inner trainers `T` (the trainer's tch replica;
/// any [`SegmentReplay`]), keeping one replica between replays.
pub struct Replayer<T> {
    inner_steps: u32,
    total_steps: u32,
    replica: Option<T>,
}

impl<T: SegmentReplay> Replayer<T> {
    /// A replayer for a pool of `inner_steps` H and `rounds` rounds.
    pub fn new(inner_steps: u32, rounds: u32) -> Self {
        Self {
            inner_steps,
            total_steps: rounds.saturating_mul(inner_steps),
            replica: None,
        }
    }

    /// θ_{round−1} from `parent` (checkpoint bytes with the outer momentum) and the replica,
    /// set to replay `member`'s batches.
    fn prepare(&mut self, c: &ReplayInput<'_, T>) -> Result<(OuterState, &mut T)> {
        let ReplayInput {
            recipe,
            parent,
            round,
            member,
            ..
        } = *c;
        if recipe.keeps_inner_state() {
            bail!("the recipe keeps inner optimizer state across rounds: replay is impossible");
        }
        let state = recipe.restore(parent, round.saturating_sub(1))?;
        if self.replica.is_none() {
            self.replica = Some(recipe.replica(member, self.inner_steps, self.total_steps)?);
        }
        let replica = self
            .replica
            .as_mut()
            .ok_or_else(|| anyhow::anyhow!("no replica"))?;
        replica.set_worker(member);
        Ok((state, replica))
    }

    /// Re-runs `c.member`'s inner phase of `c.round` from `c.parent`, encodes it with the
    /// recipe's codec and compares it with `c.claimed` (the member's signed payload). With the
    /// sparse codec the replay encodes `Δ + β·e_{r−1}` from `c.residuals` and the served `e_r`
    /// must be within the same
    /// tolerance of the residual the claimed payload leaves ([`carried_distance`]; the
    /// reported distance is the worse of the two).
    ///
    /// # Errors
    /// A recipe that keeps AdamW moments across rounds (not replayable from θ alone), an
    /// unreadable parent checkpoint, the inner trainer's errors.
    pub fn check(&mut self, c: &ReplayInput<'_, T>) -> Result<Replay> {
        let ReplayInput {
            recipe,
            member,
            claimed,
            residuals,
            ..
        } = *c;
        let t0 = Instant::now();
        let (state, replica) = self.prepare(c)?;
        let distance = match residuals.replay_memory(recipe, &state.params) {
            Ok((mut feedback, out)) => {
                let (replayed, _) =
                    state.contribute(replica, member, &recipe.encode_options(), &mut feedback)?;
                let d = replay_distance(&state.params, member, claimed, &replayed.payload)
                    .unwrap_or(f64::INFINITY);
                with_carried(
                    d,
                    &state.params,
                    member,
                    &feedback,
                    &replayed.payload,
                    claimed,
                    out.as_ref(),
                )
            }
            // Served residuals that are no residuals of this model.
            Err(_) => f64::INFINITY,
        };
        Ok(Replay {
            distance,
            honest: within_tolerance(distance),
            secs: t0.elapsed().as_secs_f64(),
            segments: 0,
            whole: Some(WholeReplay::Asked),
            failed: None,
        })
    }
}

mod trace;
pub use trace::{needed_states, FetchState, TraceStates};

#[cfg(test)]
mod tests;
