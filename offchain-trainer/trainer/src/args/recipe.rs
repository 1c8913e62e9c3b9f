//! The recipe's flags (model, inner and outer optimizer, codec, aggregation, trace), shared by
//! `train`, `init`, `pool create`, `run`, `verify` and the benchmarks, and their conversion
//! into the typed recipe ([`PoolRecipe`]) the libraries run.

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::{Args, ValueEnum};
use synod_codec::EncodeOptions;
use synod_diloco::recipe::{
    PoolRecipe, RecipeCodec, SparseRecipe, DENSE_OUTER_LR, DENSE_OUTER_MOMENTUM, SPARSE_EF_DECAY,
    SPARSE_OUTER_LR,
};
use synod_diloco::AggregationRule;
use synod_member::config::RecipeConfig;

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
    /// The recipe of these flags with every outer flag at its default (what `init` and the
    /// benchmarks without outer flags run).
    ///
    /// # Errors
    /// An unknown model preset (its context is the default sequence length).
    pub fn recipe(&self) -> Result<PoolRecipe> {
        self.recipe_with(
            &OuterArgs::parse_from_defaults(),
            synod_diloco::verify::DEFAULT_SEGMENTS,
        )
    }

    /// [`ModelArgs::recipe`] with this machine's settings for it, on the corpus `data`.
    ///
    /// # Errors
    /// As [`ModelArgs::recipe`].
    pub fn recipe_config(&self, data: &Path) -> Result<RecipeConfig> {
        Ok(self.local(self.recipe()?, data))
    }

    /// The recipe of these flags with the outer flags `outer` and `trace_segments`, with this
    /// machine's settings for it, on the corpus `data`.
    ///
    /// # Errors
    /// An unknown model preset; flags that make no valid recipe ([`PoolRecipe::validate`]).
    pub fn with_outer(
        &self,
        outer: &OuterArgs,
        trace_segments: u32,
        data: &Path,
    ) -> Result<RecipeConfig> {
        Ok(self.local(self.recipe_with(outer, trace_segments)?, data))
    }

    /// `recipe` with this machine's device and evaluation size, on the corpus `data`.
    fn local(&self, recipe: PoolRecipe, data: &Path) -> RecipeConfig {
        RecipeConfig {
            recipe,
            data: data.to_path_buf(),
            device: self.device.clone(),
            eval_batches: self.eval_batches,
        }
    }

    /// The typed recipe of these flags with `outer` and `trace_segments`.
    fn recipe_with(&self, outer: &OuterArgs, trace_segments: u32) -> Result<PoolRecipe> {
        let wire = &outer.wire;
        let seq_len = match self.seq_len {
            Some(n) => n,
            None => synod_model::GptConfig::preset(&self.model)?.ctx as usize,
        };
        let recipe = PoolRecipe {
            model: self.model.clone(),
            batch: self.batch,
            seq_len,
            lr: self.lr,
            min_lr: self.min_lr,
            warmup: self.warmup,
            round_warmup: self.round_warmup,
            keep_inner_state: self.keep_inner_state,
            seed: self.seed,
            outer_lr: outer.outer_lr(),
            outer_momentum: outer.outer_momentum(),
            codec: match wire.codec {
                Codec::Int8 => RecipeCodec::Int8,
                Codec::Fp32 => RecipeCodec::Fp32,
                Codec::Sparse => RecipeCodec::Sparse,
            },
            sparse: wire.sparse().then_some(SparseRecipe {
                chunk: wire.sparse_chunk,
                topk: wire.sparse_topk,
                ef_decay: outer.ef_decay,
            }),
            aggregation: outer.aggregation().rule(),
            overlap: outer.overlap,
            trace_segments,
        };
        recipe.validate()?;
        Ok(recipe)
    }
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

    /// The defaults of every outer flag (a command without outer flags).
    fn parse_from_defaults() -> Self {
        #[derive(clap::Parser)]
        struct Defaults {
            #[command(flatten)]
            outer: OuterArgs,
        }
        <Defaults as clap::Parser>::parse_from(["defaults"]).outer
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

/// The parts of the training recipe that are not in the pool spec; their blake3 is the
/// DiLoCo job's `model_config_hash`, so every member must pass the same values.
#[derive(Args, Clone, Debug)]
pub struct RecipeArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub outer: OuterArgs,
    /// Text corpus (byte-level tokens); its blake3 must equal the pool's `dataset_hash`.
    #[arg(long, default_value = "../shared/data/tinyshakespeare.txt")]
    pub data: PathBuf,
    /// Proof-of-Learning segments per inner phase (Jia et al. 2021, §4.2): members commit
    /// their full state (12 bytes per parameter) at each of the S + 1 boundaries and keep
    /// those states on disk until the round's challenge window closes; verifiers replay
    /// `--verify-segments` segments of ⌈H / S⌉ inner steps each. More, shorter segments
    /// catch a lazy member with the same replayed steps more often (each replayed segment
    /// finds a member that faked a share φ of its steps with probability ≈ φ, whatever S),
    /// at S + 1 states of disk per round. S ≥ H: one-step segments. 1..=4096.
    #[arg(long, default_value_t = synod_diloco::verify::DEFAULT_SEGMENTS,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(synod_diloco::verify::MAX_SEGMENTS)))]
    pub trace_segments: u32,
}

impl RecipeArgs {
    /// The typed recipe and this machine's settings for it.
    ///
    /// # Errors
    /// An unknown model preset; flags that make no valid recipe ([`PoolRecipe::validate`]).
    pub fn config(&self) -> Result<RecipeConfig> {
        self.model
            .with_outer(&self.outer, self.trace_segments, &self.data)
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// The recipe's canonical JSON, whose blake3 is the pool's `model_config_hash`.
    fn recipe_json(r: &RecipeArgs) -> Result<String> {
        Ok(r.config()?.recipe.canonical_json()?)
    }

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        recipe: RecipeArgs,
    }

    fn json(extra: &[&str]) -> serde_json::Value {
        let args = Cli::parse_from(["t"].iter().chain(extra)).recipe;
        serde_json::from_str(&recipe_json(&args).unwrap()).unwrap()
    }

    #[test]
    fn a_sparse_recipe_defaults_to_error_feedback_as_momentum_and_dense_recipes_keep_theirs() {
        // A dense recipe written without the outer flags takes the dense defaults: outer
        // learning rate 0.8, momentum 0.85, the clipped trimmed mean.
        let dense = json(&[]);
        assert_eq!(dense["outer_lr"], "0.8");
        assert_eq!(dense["outer_momentum"], "0.85");
        assert_eq!(dense["aggregation"], "clipped_trimmed_mean");
        assert!(dense.get("ef_decay").is_none());
        // `--codec sparse` alone is SparseLoCo's recipe: no outer momentum, the sparse outer
        // learning rate, β = 0.95, and a rule that keeps the coordinates one member sent.
        let sparse = json(&["--codec", "sparse"]);
        assert_eq!(sparse["outer_momentum"], "0");
        assert_eq!(sparse["outer_lr"], SPARSE_OUTER_LR.to_string());
        assert_eq!(sparse["aggregation"], "clipped_mean");
        assert_eq!(sparse["ef_decay"], "0.95");
        // A flag still wins over the codec's default, and enters the hash.
        let tuned = json(&[
            "--codec",
            "sparse",
            "--outer-momentum",
            "0.5",
            "--outer-lr",
            "1",
        ]);
        assert_eq!(tuned["outer_momentum"], "0.5");
        assert_eq!(tuned["outer_lr"], "1");
        assert_ne!(tuned, sparse);
        assert_eq!(
            json(&["--aggregation", "mean"])["aggregation"],
            json(&["--codec", "sparse", "--aggregation", "mean"])["aggregation"]
        );
    }

    #[test]
    fn the_flags_convert_into_the_typed_recipe_that_reads_back_from_its_json() {
        // The default recipe's JSON, byte for byte: its blake3 is the pools' hash.
        let args = Cli::parse_from(["t"]).recipe;
        assert_eq!(
            recipe_json(&args).unwrap(),
            r#"{"aggregation":"clipped_trimmed_mean","batch":12,"codec":"int8","keep_inner_state":false,"lr":0.001,"min_lr":0.0001,"model":"baby","outer_lr":"0.8","outer_momentum":"0.85","round_warmup":0,"seed":1337,"seq_len":64,"version":2,"warmup":100}"#
        );
        for flags in [
            &[][..],
            &[
                "--codec",
                "sparse",
                "--sparse-topk",
                "64",
                "--ef-decay",
                "0.9",
            ],
            &[
                "--overlap",
                "--outer-momentum",
                "0.5",
                "--trace-segments",
                "32",
            ],
            &[
                "--codec",
                "fp32",
                "--aggregation",
                "mean",
                "--model",
                "tiny",
            ],
        ] {
            let args = Cli::parse_from(["t"].iter().chain(flags)).recipe;
            let typed = args.config().unwrap().recipe;
            let json = recipe_json(&args).unwrap();
            assert_eq!(PoolRecipe::parse(&json).unwrap(), typed, "{flags:?}");
            assert_eq!(
                typed.hash().unwrap(),
                *blake3::hash(json.as_bytes()).as_bytes(),
                "{flags:?}"
            );
        }
        // Flags that make no recipe are refused with the reason.
        let args = Cli::parse_from(["t", "--codec", "sparse", "--sparse-topk", "0"]).recipe;
        assert!(args.config().unwrap_err().to_string().contains("top-k"));
    }

    #[test]
    fn the_trace_enters_the_recipe_hash_only_when_it_is_not_the_default() {
        // The default trace leaves the recipe's JSON (and `model_config_hash`) as without it.
        assert!(json(&[]).get("trace_segments").is_none());
        assert_eq!(json(&["--trace-segments", "16"]), json(&[]));
        assert_eq!(json(&["--trace-segments", "64"])["trace_segments"], 64);
        // Out of range: refused by the parser, not clamped into another pool's recipe.
        for bad in ["0", "4097"] {
            assert!(Cli::try_parse_from(["t", "--trace-segments", bad]).is_err());
        }
    }
}
