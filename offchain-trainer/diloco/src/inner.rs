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
