//! The inner phase, as the round sees it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use synod_checkpoint::ParamSet;

use crate::DilocoError;

/// What one inner phase did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct InnerReport {
    /// Mean training loss over the inner steps (nats per token).
    pub mean_loss: f64,
    /// Training loss of the last inner step (nats per token).
    pub last_loss: f64,
    /// Tokens consumed (batch · seq_len · steps).
    pub tokens: u64,
    /// Wall-clock seconds of the phase.
    pub secs: f64,
}

/// A worker's local optimizer: runs `H` inner steps from given parameters.
///
/// Implementations must draw their batches as a pure function of `(pool seed, worker, round)`
/// (see `synod-data`) so that the phase can be replayed by a verifier.
pub trait InnerTrainer {
    /// Loads `start` (θ_{r-1}), runs the inner steps of outer round `round` and returns θ_i.
    ///
    /// # Errors
    /// [`DilocoError::Inner`] if the tensor library fails or the loss diverges.
    fn inner_phase(
        &mut self,
        start: &ParamSet,
        round: u32,
    ) -> Result<(ParamSet, InnerReport), DilocoError>;

    /// The inner phase of [`InnerTrainer::inner_phase`], also handing `state(j, s)` the
    /// phase's full state `s` (θ and the inner optimizer's state, as named tensors) after `j`
    /// steps for every `j` of `boundaries` (ascending, ≤ H): the Proof-of-Learning trace. The
    /// default records none: it runs the plain phase when `boundaries` is empty and refuses
    /// otherwise.
    ///
    /// # Errors
    /// As [`InnerTrainer::inner_phase`]; whatever `state` returns; [`DilocoError::Inner`] from
    /// the default for a trainer that cannot expose its state.
    fn inner_phase_traced(
        &mut self,
        start: &ParamSet,
        round: u32,
        boundaries: &[u32],
        state: &mut dyn FnMut(u32, ParamSet) -> Result<(), DilocoError>,
    ) -> Result<(ParamSet, InnerReport), DilocoError> {
        let _ = state;
        if boundaries.is_empty() {
            self.inner_phase(start, round)
        } else {
            Err(DilocoError::Inner(
                "this inner trainer records no Proof-of-Learning trace".into(),
            ))
        }
    }
}

/// An inner trainer whose phases can be checked by their Proof-of-Learning trace (Jia et al.
/// 2021, "Proof-of-Learning", §4.2; [`crate::trace`]): it exposes a phase's *full state* (θ
/// together with the inner optimizer's state and step count, as one [`ParamSet`]) and replays
/// any segment of a phase from its start state. A verifier (`synod-verify`'s `Replayer`) is
/// generic over it; what the full state holds and how close two of them are is the
/// implementation's, the sampling and tolerances are [`crate::verify`]'s.
pub trait SegmentReplay: InnerTrainer {
    /// Selects whose batches the following phases and segment replays run on: member
    /// `worker`'s (batches are a pure function of pool seed, worker, round and step).
    fn set_worker(&mut self, worker: u32);

    /// The full state at the start of an inner phase from θ `start`: θ with a fresh inner
    /// optimizer, what boundary 0 of an honest trace holds (bit for bit).
    ///
    /// # Errors
    /// [`DilocoError::Inner`] if `start` is not this model's θ or the tensor library fails.
    fn start_state(&mut self, start: &ParamSet) -> Result<ParamSet, DilocoError>;

    /// Replays inner steps `from..to` of outer round `round` from `state`, the full state after
    /// `from` steps, and returns the full state after `to` steps.
    ///
    /// # Errors
    /// [`DilocoError::Inner`] if `state` is not a full state of this model after `from`
    /// steps, `to` is outside the phase, or the tensor library fails.
    fn replay_segment(
        &mut self,
        state: &ParamSet,
        round: u32,
        from: u32,
        to: u32,
    ) -> Result<ParamSet, DilocoError>;

    /// Whether `state` can be a full state of an honest phase that started at full state
    /// `start` (bounds on what any number of honest steps can reach): a verifier replays only
    /// from plausible states, so an arbitrary served start state cannot make its own replay
    /// move so far that a lazy member's missing work hides inside the tolerance.
    fn plausible_state(&self, state: &ParamSet, start: &ParamSet) -> bool;

    /// θ of the full state `state` (its optimizer's tensors removed).
    fn params_of(&self, state: &ParamSet) -> ParamSet;

    /// How far the `claimed` full state after a segment lies from the `replayed` one, relative
    /// to how far the segment moved from its start state `start` (dimensionless; infinite for
    /// states of different layouts or step counts). Compared with
    /// [`crate::verify::SEGMENT_TOLERANCE`].
    fn state_distance(&self, start: &ParamSet, claimed: &ParamSet, replayed: &ParamSet) -> f64;
}

/// Stops an inner phase that runs on another thread: the phase checks it before each inner
/// step and ends with [`DilocoError::Cancelled`] once it is set. A member cancels a phase it
/// trained ahead from a checkpoint that did not become final (`docs/architecture.md`, step 6):
/// that phase's work is dead, and the phase from the final checkpoint starts as soon as the
/// current inner step ends instead of after the whole doomed phase. Clones share one flag.
#[derive(Clone, Debug, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// A token not cancelled yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels every phase holding a clone of this token (idempotent).
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether [`CancelToken::cancel`] was called on this token or a clone.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}
