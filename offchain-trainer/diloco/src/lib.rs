//! # synod-diloco
//!
//! The outer round of DiLoCo (Douillard et al. 2023, *DiLoCo: Distributed Low-Communication
//! Training of Language Models*, arXiv 2311.08105, Algorithm 1), written once for every
//! transport and free of any tensor library:
//!
//! ```text
//! inner phase (InnerTrainer, H AdamW steps, e.g. on tch)   -> θ_i
//! pseudo-gradient Δ_i = θ_{r-1} − θ_i                      (pseudograd)
//! encode Δ_i (int8, or top-k + error feedback; zstd)       (pseudograd, feedback, synod-codec)
//! + the inner phase's state hashes (PoL trace)             (trace, verify)
//! + error-feedback residual hashes (sparse, in a pool)       (residual)
//! = the payload a member signs and serves                    (payload)
//! exchange payloads                                         (synod-p2p; local mode: in memory)
//! decode + robust aggregate in member-index order           (aggregate)
//! outer Nesterov step θ_r = θ_{r-1} − η (g + μ m)           (outer)
//! canonical checkpoint + blake3 hash                        (round, synod-checkpoint)
//! ```
//!
//! Aggregation and the outer step run on plain f32 vectors in a fixed order, so every honest
//! survivor that aggregates the same included set computes **bit-identical** θ_r and the same
//! checkpoint hash, whatever device ran its inner phase (`docs/architecture.md`, step 4). Every member
//! (including the sender) aggregates the *decoded* payloads, never its own unquantized Δ.
//! The pool's [`AggregationRule`] (default [`ClippedTrimmedMean`]) bounds what members sending
//! arbitrary pseudo-gradients can do to the aggregate; [`byzantine`] simulates such members.
#![deny(missing_docs)]

mod aggregate;
pub mod budget;
pub mod byzantine;
mod error;
mod feedback;
mod inner;
mod outer;
pub mod payload;
mod pseudograd;
pub mod recipe;
pub mod residual;
mod round;
pub mod trace;
pub mod verify;

pub use aggregate::{l2_norm, AggregationRule, Aggregator, ClippedTrimmedMean, Mean, Stakes};
pub use error::DilocoError;
pub use feedback::ErrorFeedback;
pub use inner::{CancelToken, InnerReport, InnerTrainer, SegmentReplay};
pub use outer::NesterovSgd;
pub use pseudograd::{
    decode_pseudo_gradient, encode_pseudo_gradient, max_payload_bytes, max_payload_bytes_for,
    open_pseudo_gradient, pseudo_gradient, PseudoGradient,
};
pub use round::{
    aggregate_payloads, max_checkpoint_bytes, Aggregated, Contribution, OuterState, RoundOutcome,
    RESIDUAL_INDEX,
};

/// Upper bound, in bytes, of a safetensors file holding `per_param` bytes for every parameter
/// of a model laid out like `like` and up to `per_tensor` bytes of header for each of its
/// tensors, plus 1 MiB: what a peer may offer for such a file before anything is read.
pub(crate) fn file_bound(
    like: &synod_checkpoint::ParamSet,
    per_param: u64,
    per_tensor: u64,
) -> u64 {
    let params = like.numel() as u64;
    let tensors = like.tensors().len() as u64;
    params
        .saturating_mul(per_param)
        .saturating_add(tensors.saturating_mul(per_tensor))
        .saturating_add(1 << 20)
}
