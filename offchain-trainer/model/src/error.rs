//! Errors of the tch side.

/// Errors of model construction, parameter transfer and training.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// libtorch reported an error.
    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),
    /// A parameter set does not match the model's variables.
    #[error("parameter {0} is missing or has the wrong shape")]
    Layout(String),
    /// The loss became NaN or infinite.
    #[error("loss diverged (non-finite) at step {0}")]
    Diverged(u32),
    /// The inner phase of outer round `round` was cancelled ([`TchInnerTrainer::set_cancel`])
    /// before inner step `step` (0-based).
    ///
    /// [`TchInnerTrainer::set_cancel`]: crate::TchInnerTrainer::set_cancel
    #[error("round {round}: inner phase cancelled before inner step {step}")]
    Cancelled {
        /// The outer round whose phase was running.
        round: u32,
        /// The inner step that was not run.
        step: u32,
    },
    /// Bad configuration (e.g. width not divisible by heads, unknown device).
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A checkpoint error.
    #[error(transparent)]
    Checkpoint(#[from] synod_checkpoint::CheckpointError),
}

impl From<ModelError> for synod_diloco::DilocoError {
    fn from(e: ModelError) -> Self {
        match e {
            ModelError::Cancelled { round, step } => {
                synod_diloco::DilocoError::Cancelled { round, step }
            }
            e => synod_diloco::DilocoError::Inner(e.to_string()),
        }
    }
}
