//! The pool member and local training: everything `synod-trainer` runs except argument
//! parsing (the `synod-trainer` binary) and the benchmarks (`synod-bench`).
//!
//! Data flows chain → member → peers → chain:
//! * [`pool`]: the chain-backed subcommands (`stake`, `pool create|show|allow`, `run`,
//!   `verify`, `claim`, `status`); `run` is the pool member (`pool/member/`: join, the round
//!   loop, exchange, commit, settle, and the duty worker that verifies, challenges, votes and
//!   reports equivocations beside training), the recipe and the pool's terms.
//! * [`train`]: local DiLoCo (`train`: N workers in one process, no chain, no network), the
//!   data-parallel baseline and the shared setup (`init`).
//! * [`event`]: the typed [`event::TrainerEvent`]s a trainer prints and writes to
//!   `metrics.jsonl`; [`metrics`] writes them; [`prometheus`] exports them.
//! * [`config`]: the typed configuration every entry point takes (the `synod-trainer` binary
//!   builds it from its command line; the recipe is [`synod_diloco::recipe::PoolRecipe`]).
//!
//! The round protocol both halves implement: `docs/architecture.md`.

pub mod config;
pub mod event;
pub mod metrics;
pub mod plot;
pub mod pool;
pub mod prometheus;
pub mod train;
