//! Command-line arguments shared by `train`, `init` and the benchmarks.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};
use synod_codec::EncodeOptions;
use synod_diloco::AggregationRule;
use synod_model::{GptConfig, InnerConfig};

/// Model and inner-optimizer options.
#[derive(Args, Clone, Debug)]
pub struct ModelArgs {
    /// Model preset: tiny (2×32), baby (nanoGPT CPU: 4 layers, 4 heads, width 128, context 64), small (6×384, context 256).
    #[arg(long, default_value = "baby")]
    pub model: String,
    /// Sequences per batch, per worker.
    #[arg(long, default_value_t = 12)]
    pub batch: usize,
    /// Tokens per sequence (default: the model's context).
    #[arg(long)]
    pub seq_len: Option<usize>,
    /// Peak inner learning rate (AdamW).
    #[arg(long, default_value_t = 1e-3)]
    pub lr: f64,
    /// Final inner learning rate of the cosine decay.
    #[arg(long, default_value_t = 1e-4)]
    pub min_lr: f64,
    /// Linear warm-up in inner steps.
    #[arg(long, default_value_t = 100)]
    pub warmup: u32,
    /// Linear lr ramp over the first N inner steps of every outer round.
    #[arg(long, default_value_t = 0)]
    pub round_warmup: u32,
    /// Keep each worker's AdamW moments across outer rounds (not replayable by verifiers).
    #[arg(long)]
    pub keep_inner_state: bool,
    /// Pool seed: initial weights and every batch derive from it.
    #[arg(long, default_value_t = 1337)]
    pub seed: u64,
    /// cpu, cuda, cuda:N or auto.
    #[arg(long, default_value = "auto")]
    pub device: String,
    /// Validation batches per evaluation.
    #[arg(long, default_value_t = 20)]
    pub eval_batches: u32,
}

impl ModelArgs {
    /// The model configuration.
    pub fn gpt(&self) -> Result<GptConfig> {
        Ok(GptConfig::preset(&self.model)?)
    }

    /// Sequence length (defaults to the context).
    pub fn seq_len(&self) -> Result<usize> {
        Ok(self.seq_len.unwrap_or(self.gpt()?.ctx as usize))
    }

    /// Inner optimizer settings for `inner_steps` per round and `total_steps` inner steps in all.
    pub fn inner(&self, inner_steps: u32, total_steps: u32) -> InnerConfig {
        InnerConfig {
            lr: self.lr,
            min_lr: self.min_lr,
            warmup_steps: self.warmup,
            round_warmup_steps: self.round_warmup,
            keep_state: self.keep_inner_state,
            ..InnerConfig::nanogpt(self.batch, inner_steps, total_steps)
        }
    }
}

/// Training method.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// DiLoCo: H inner steps per worker, then an outer Nesterov step on the mean pseudo-gradient.
    Diloco,
    /// Data-parallel baseline: N workers average gradients every step.
    Ddp,
}

/// Pseudo-gradient encoding on the wire.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    /// Per-chunk absmax int8 + zstd.
    Int8,
    /// f32 + zstd (baseline).
    Fp32,
    /// Per-chunk top-k, 4-level values and Golomb-coded positions + zstd, with error feedback (`--sparse-chunk`,
    /// `--sparse-topk`). In a pool, each payload commits to the residual it was encoded
    /// with and the one it leaves, which its member serves to verifiers
    /// (`synod_diloco::residual`); not with `--overlap`.
    Sparse,
}

impl Codec {
    /// The name in the recipe JSON.
    pub fn name(self) -> &'static str {
        match self {
            Codec::Int8 => "int8",
            Codec::Fp32 => "fp32",
            Codec::Sparse => "sparse",
        }
    }
}

/// The pseudo-gradient codec and its sparse settings (shared by the recipe and `bench codec`).
#[derive(Args, Clone, Copy, Debug)]
pub struct WireCodec {
    /// Pseudo-gradient codec.
    #[arg(long, value_enum, default_value_t = Codec::Int8)]
    pub codec: Codec,
    /// Sparse codec: elements per top-k selection (positions are Golomb-coded gaps of
    /// ≈ log₂(chunk / topk) + 1.45 bits).
    #[arg(long, default_value_t = 4096)]
    pub sparse_chunk: u32,
    /// Sparse codec: elements kept per chunk (128 of 4096 ≈ 3.1 %, ≈ 110× below fp32 with
    /// the loss of int8; 64, ≈ 190×, 1–3 % above it).
    #[arg(long, default_value_t = 128)]
    pub sparse_topk: u32,
}

impl WireCodec {
    /// The encoder options.
    pub fn options(&self) -> EncodeOptions {
        match self.codec {
            Codec::Int8 => EncodeOptions::default(),
            Codec::Fp32 => EncodeOptions::fp32(),
            Codec::Sparse => EncodeOptions::sparse(self.sparse_chunk, self.sparse_topk),
        }
    }

    /// Whether the sparse codec is chosen.
    pub fn sparse(&self) -> bool {
        self.codec == Codec::Sparse
    }
}

/// The outer optimizer and the wire codec (shared by `train` and the on-chain recipe).
///
/// The outer learning rate, momentum and aggregation rule default per codec
/// ([`OuterArgs::outer_lr`], [`OuterArgs::outer_momentum`], [`OuterArgs::aggregation`]):
/// dense codecs (int8, fp32) use DiLoCo's Nesterov outer step with a trimmed mean; the sparse
/// codec uses SparseLoCo's recipe (error feedback instead of outer momentum, plain mean of the
/// sparse payloads under norm clipping). `docs/benchmarks.md` ("Loss parity with DDP", "Outer recipe") has the sweeps behind both.
#[derive(Args, Clone, Debug)]
pub struct OuterArgs {
    /// Outer learning rate [default: 0.8 with a dense codec (DiLoCo paper: 0.7), 6
    /// with `--codec sparse`] (`docs/benchmarks.md`, "Loss parity with DDP" and "Outer recipe").
    #[arg(long = "outer-lr")]
    pub outer_lr_flag: Option<f32>,
    /// Outer Nesterov momentum [default: 0.85 with a dense codec (DiLoCo paper: 0.9), 0 with
    /// `--codec sparse`, whose error feedback plays momentum's part (SparseLoCo, Sarfi et al. 2025)].
    #[arg(long = "outer-momentum")]
    pub outer_momentum_flag: Option<f32>,
    /// Pseudo-gradient codec.
    #[command(flatten)]
    pub wire: WireCodec,
    /// Sparse codec: error-feedback decay β in 0..=1 (1 = every dropped element is sent later;
    /// SparseLoCo uses 0.95).
    #[arg(long, default_value_t = SPARSE_EF_DECAY, value_parser = unit_interval)]
    pub ef_decay: f32,
    /// Aggregation rule of the included set's pseudo-gradients, weighted by snapshot stake:
    /// clipped-trimmed-mean (norm clipping to the median norm + coordinate-wise trimmed mean,
    /// tolerates Byzantine members holding < ⅓ of the stake), clipped-mean (clipping only:
    /// each member moves the aggregate by at most τ·w/W, W the included stake;
    /// for sparse payloads, which a trim would wipe) or mean (DiLoCo's plain mean, not robust)
    /// [default: clipped-trimmed-mean with a dense codec, clipped-mean with `--codec sparse`].
    #[arg(long = "aggregation", value_enum)]
    pub aggregation_flag: Option<Aggregation>,
    /// Overlapped rounds: round r's inner phases start from θ_{r−2}, one outer step behind
    /// (a one-step-delayed outer update, Streaming DiLoCo), so that they could run while round
    /// r − 1's pseudo-gradients are exchanged (see `synod_diloco::OuterState::overlapped`).
    /// Needs a lower outer momentum than plain rounds. Part of a pool's recipe: its members
    /// train, and its verifiers replay, round r from θ_{r−2}.
    #[arg(long)]
    pub overlap: bool,
}

/// Dense codecs' outer learning rate: the best of the int8 sweep (`docs/benchmarks.md`, "Loss
/// parity with DDP").
pub const DENSE_OUTER_LR: f32 = 0.8;
/// Dense codecs' outer Nesterov momentum: the best of the int8 sweep.
pub const DENSE_OUTER_MOMENTUM: f32 = 0.85;
/// The sparse codec's outer learning rate (plain SGD on the mean of the sparse payloads): the
/// best of the sparse sweep (`docs/benchmarks.md`, "Outer recipe").
pub const SPARSE_OUTER_LR: f32 = 6.0;
/// The error-feedback decay β (SparseLoCo's; the best of the sparse sweep).
pub const SPARSE_EF_DECAY: f32 = 0.95;

impl OuterArgs {
    /// Outer learning rate η: `--outer-lr`, else the codec's default.
    pub fn outer_lr(&self) -> f32 {
        self.outer_lr_flag.unwrap_or(if self.wire.sparse() {
            SPARSE_OUTER_LR
        } else {
            DENSE_OUTER_LR
        })
    }

    /// Outer momentum μ: `--outer-momentum`, else the codec's default (0 for sparse: the
    /// error-feedback memory carries what momentum would, SparseLoCo, Sarfi et al. 2025).
    pub fn outer_momentum(&self) -> f32 {
        self.outer_momentum_flag.unwrap_or(if self.wire.sparse() {
            0.0
        } else {
            DENSE_OUTER_MOMENTUM
        })
    }

    /// The aggregation rule: `--aggregation`, else the codec's default (clipped-mean for
    /// sparse, whose coordinates one member alone sends and a trim would drop).
    pub fn aggregation(&self) -> Aggregation {
        self.aggregation_flag.unwrap_or(if self.wire.sparse() {
            Aggregation::ClippedMean
        } else {
            Aggregation::ClippedTrimmedMean
        })
    }

    /// The encoder options of `--codec` (and the sparse settings).
    pub fn encode_options(&self) -> EncodeOptions {
        self.wire.options()
    }

    /// A member's empty error-feedback memory (used by the sparse codec only).
    pub fn feedback(&self) -> synod_diloco::ErrorFeedback {
        synod_diloco::ErrorFeedback::new(self.ef_decay)
    }

    /// The outer state after `round` from `checkpoint` (canonical bytes of θ with its outer
    /// momentum, or θ₀ without), with this recipe's outer learning rate and momentum.
    ///
    /// # Errors
    /// A checkpoint that does not parse, or whose momentum does not fit θ.
    pub fn restore(&self, checkpoint: &[u8], round: u32) -> Result<synod_diloco::OuterState> {
        Ok(synod_diloco::OuterState::from_checkpoint(
            synod_checkpoint::from_bytes(checkpoint)?,
            self.outer_lr(),
            self.outer_momentum(),
            round,
        )?)
    }
}

/// Aggregation rule on the command line (see [`synod_diloco::AggregationRule`]).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aggregation {
    /// Norm clipping to the stake-weighted median norm, then a stake-weighted coordinate-wise
    /// trimmed mean.
    ClippedTrimmedMean,
    /// The plain mean (DiLoCo Algorithm 1).
    Mean,
    /// Norm clipping to the stake-weighted median norm, then the stake-weighted mean (no
    /// trim): for sparse payloads.
    ClippedMean,
}

impl Aggregation {
    /// The rule.
    pub fn rule(self) -> AggregationRule {
        match self {
            Aggregation::ClippedTrimmedMean => AggregationRule::ClippedTrimmedMean,
            Aggregation::Mean => AggregationRule::Mean,
            Aggregation::ClippedMean => AggregationRule::ClippedMean,
        }
    }
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
    #[arg(long, value_enum, default_value_t = Method::Diloco)]
    pub method: Method,
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

/// Parses a number in 0..=1.
fn unit_interval(s: &str) -> Result<f32, String> {
    let v: f32 = s.parse().map_err(|e| format!("{e}"))?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{v} is not within 0..=1"))
    }
}
