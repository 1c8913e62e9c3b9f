//! # synod-model
//!
//! Everything in Synod that touches libtorch (through `tch`): the model, the inner optimizer,
//! the data-parallel baseline and evaluation. The other crates see only
//! [`synod_checkpoint::ParamSet`]s, so the outer round stays bit-reproducible and tch-free.
//!
//! * [`Gpt`]: a GPT-2-style decoder-only transformer (Radford et al. 2019; layout and names of
//!   Karpathy's nanoGPT `model.py`, so checkpoints load into PyTorch by name), pre-LayerNorm,
//!   causal `scaled_dot_product_attention`, GELU MLP, tied input/output embeddings.
//! * [`TchInnerTrainer`]: the DiLoCo inner phase, H AdamW steps with linear warm-up, cosine
//!   decay and global-norm gradient clipping (DiLoCo §3 inner optimizer; schedule as nanoGPT),
//!   on our own [`AdamW`] whose state can be read and restored.
//! * [`segment`]: Proof-of-Learning segments — the phase's full state at segment boundaries
//!   and the replay of one segment (Jia et al. 2021, §4.2).
//! * [`DataParallel`]: the baseline that averages N workers' gradients every step.
#![deny(missing_docs)]

mod adamw;
mod baseline;
mod config;
mod error;
mod eval;
mod gpt;
mod inner;
mod params;
pub mod segment;

pub use adamw::{AdamW, FIRST_MOMENT_PREFIX, SECOND_MOMENT_PREFIX, STEP_NAME};
pub use baseline::DataParallel;
pub use config::{parse_device, GptConfig, InnerConfig};
pub use error::ModelError;
pub use eval::{batch_tensors, eval_loss};
pub use gpt::Gpt;
pub use inner::{StepHook, TchInnerTrainer};
pub use params::{load_params, param_set};

pub use tch;
