//! Errors of the outer round.

use synod_checkpoint::CheckpointError;
use synod_codec::{DecodeError, EncodeError};

/// Why an outer-round phase failed.
#[derive(Debug, thiserror::Error)]
pub enum DilocoError {
    /// The inner phase failed (tensor library error, out of memory, ...).
    #[error("inner phase failed: {0}")]
    Inner(String),
    /// The inner phase was cancelled through its [`crate::CancelToken`] before inner step
    /// `step` (0-based) of outer round `round`; what it had computed is dropped.
    #[error("round {round}: inner phase cancelled before inner step {step}")]
    Cancelled {
        /// The outer round whose inner phase was running.
        round: u32,
        /// The inner step that was not run.
        step: u32,
    },
    /// Encoding the local pseudo-gradient failed (e.g. a NaN after divergence).
    #[error("encoding the pseudo-gradient: {0}")]
    Encode(#[from] EncodeError),
    /// A peer's payload failed to decode.
    #[error("member {member}: payload rejected: {source}")]
    Decode {
        /// Member index of the sender.
        member: u32,
        /// Decoder error.
        source: DecodeError,
    },
    /// A decoded payload's shapes do not match the model's parameters.
    #[error("member {member}: payload has the wrong tensor layout")]
    Layout {
        /// Member index of the sender.
        member: u32,
    },
    /// Two tensor sets that must share a layout do not.
    #[error("parameter layouts differ")]
    LayoutMismatch,
    /// No contribution reached the aggregation (the round cannot advance).
    #[error("round {0}: no contribution to aggregate")]
    Empty(u32),
    /// The outer step would leave a parameter or its momentum non-finite (an outer gradient
    /// too large for f32); nothing was changed.
    #[error("the outer step would leave non-finite parameters")]
    NonFinite,
    /// A payload's Proof-of-Learning trace prefix is malformed.
    #[error("member {member}: payload rejected: {source}")]
    Trace {
        /// Member index of the sender.
        member: u32,
        /// What is wrong with it.
        source: crate::trace::TraceError,
    },
    /// A sparse payload's error-feedback commitments are malformed.
    #[error("member {member}: payload rejected: {source}")]
    Residual {
        /// Member index of the sender.
        member: u32,
        /// What is wrong with them.
        source: crate::residual::ResidualError,
    },
    /// Writing or hashing the checkpoint failed.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
}
