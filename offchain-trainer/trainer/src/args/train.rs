//! Command-line arguments of the local subcommands `train` and `init`, and their conversion
//! into [`TrainConfig`].

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};
use synod_member::config::{Method, TrainConfig};

use super::recipe::{ModelArgs, OuterArgs};

/// Training method.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum MethodArg {
    /// DiLoCo: H inner steps per worker, then an outer Nesterov step on the mean pseudo-gradient.
    Diloco,
    /// Data-parallel baseline: N workers average gradients every step.
    Ddp,
}

/// `synod-trainer train`.
#[derive(Args, Clone, Debug)]
pub struct TrainArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Text corpus (byte-level tokens).
    #[arg(long, default_value = "../shared/data/tinyshakespeare.txt")]
    pub data: PathBuf,
    /// Workers (DiLoCo replicas, or data-parallel ranks).
    #[arg(long, default_value_t = 4)]
    pub workers: u32,
    /// Inner steps per outer round (H).
    #[arg(long, default_value_t = 50)]
    pub inner_steps: u32,
    /// Outer rounds (the data-parallel baseline runs rounds × H steps).
    #[arg(long, default_value_t = 10)]
    pub rounds: u32,
    /// diloco or ddp.
    #[arg(long, value_enum, default_value_t = MethodArg::Diloco)]
    pub method: MethodArg,
    #[command(flatten)]
    pub outer: OuterArgs,
    /// Initial weights (a canonical checkpoint); default: fresh weights from --seed.
    #[arg(long)]
    pub init: Option<PathBuf>,
    /// Output directory: round checkpoints, metrics.jsonl, loss.png.
    #[arg(long, default_value = "out/train")]
    pub out: PathBuf,
    /// Hide progress bars.
    #[arg(long)]
    pub quiet: bool,
}

/// `synod-trainer init`.
#[derive(Args, Clone, Debug)]
pub struct InitArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Where to write the checkpoint.
    #[arg(long, default_value = "out/init.safetensors")]
    pub out: PathBuf,
}

impl TrainArgs {
    /// The local run's configuration.
    ///
    /// # Errors
    /// An unknown model preset; flags that make no valid recipe.
    pub fn config(&self) -> Result<TrainConfig> {
        Ok(TrainConfig {
            recipe: self.model.with_outer(
                &self.outer,
                synod_diloco::verify::DEFAULT_SEGMENTS,
                &self.data,
            )?,
            workers: self.workers,
            inner_steps: self.inner_steps,
            rounds: self.rounds,
            method: match self.method {
                MethodArg::Diloco => Method::Diloco,
                MethodArg::Ddp => Method::Ddp,
            },
            init: self.init.clone(),
            out: self.out.clone(),
            quiet: self.quiet,
        })
    }
}
