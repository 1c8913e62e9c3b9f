//! Errors of the chain client.

/// What can go wrong talking to the chain.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// The node could not be reached (after retrying for the given number of seconds).
    #[error("cannot reach the node at {url}: {reason}")]
    Connect {
        /// RPC address.
        url: String,
        /// Last error.
        reason: String,
    },
    /// An RPC request or subscription failed (connection lost, node error).
    #[error("rpc: {0}")]
    Rpc(String),
    /// A storage value or event did not decode into the expected shape (runtime mismatch).
    #[error("cannot decode {what}: {reason}")]
    Decode {
        /// Which item.
        what: String,
        /// Decoder message.
        reason: String,
    },
    /// The extrinsic was included and failed with a pallet error, e.g.
    /// `Checkpoints::RoundNotOpen` (the pallet's doc string in `docs`), or it is a commit or a
    /// vote that the transaction pool refused because it would fail with that error (the
    /// runtime's `CheckDutyCall`).
    #[error("{pallet}::{error}: {docs}")]
    Module {
        /// Pallet name.
        pallet: String,
        /// Error variant name.
        error: String,
        /// The error's documentation.
        docs: String,
    },
    /// The extrinsic was included and failed with a non-pallet dispatch error.
    #[error("dispatch failed: {0}")]
    Dispatch(String),
    /// The transaction pool rejected the extrinsic (bad nonce, cannot pay fees, …).
    #[error("transaction rejected: {0}")]
    Rejected(String),
    /// Bad input from the caller (e.g. a peer id longer than the chain allows).
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// A wait for a chain condition ran out of time.
    #[error("timed out after {secs} s waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// Seconds waited.
        secs: u64,
    },
}

impl ChainError {
    /// Whether the transaction pool refused the extrinsic because it already holds one that
    /// provides the same tag at a priority at least as high (substrate's `TooLowPriority`:
    /// "Priority is too low"). For a duty that the runtime's `CheckDutyCall` tags by what it
    /// does (e.g. the void of one pool), another account's call of the same duty is queued.
    pub fn is_same_tag_queued(&self) -> bool {
        matches!(self, ChainError::Rejected(m) if too_low_priority(m))
    }

    /// Whether this is pallet error `pallet::error`.
    pub fn is_module(&self, pallet: &str, error: &str) -> bool {
        matches!(self, ChainError::Module { pallet: p, error: e, .. } if p == pallet && e == error)
    }

    pub(crate) fn rpc(e: impl std::fmt::Display) -> Self {
        ChainError::Rpc(e.to_string())
    }

    pub(crate) fn decode(what: &str, e: impl std::fmt::Display) -> Self {
        ChainError::Decode {
            what: what.to_string(),
            reason: e.to_string(),
        }
    }
}

/// Whether a transaction pool's refusal `msg` is substrate's `TooLowPriority` (error code
/// 1014, "Priority is too low: (old vs new)"): the pool holds a transaction providing one of
/// the same tags (an earlier extrinsic under the same nonce, or another account's duty of the
/// same tag) at a priority at least as high.
pub(crate) fn too_low_priority(msg: &str) -> bool {
    let m = msg.to_ascii_lowercase();
    m.contains("priority") && m.contains("too low")
}
