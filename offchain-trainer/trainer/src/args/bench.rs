//! Command-line arguments of `synod-trainer bench …`, their conversion into each benchmark's
//! configuration ([`synod_bench`]) and the dispatch to it.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};
use synod_bench::codec::CodecConfig;
use synod_bench::sanity::SanityConfig;
use synod_bench::throughput::ThroughputConfig;
use synod_bench::verify::VerifyConfig;
use synod_codec::EncodeOptions;

use super::recipe::{Aggregation, ModelArgs, RecipeArgs, WireCodec};
use super::train::TrainArgs;

/// `synod-trainer bench ...`
#[derive(Subcommand)]
pub enum BenchCmd {
    /// DiLoCo (int8, or `--codec sparse`) against the data-parallel baseline at equal tokens
    /// and compute.
    Diloco(TrainArgs),
    /// One worker, nanoGPT's CPU baby-GPT recipe: validation loss after 2000 iterations.
    Sanity(SanityArgs),
    /// Tokens/s of our inner step against the same model in plain PyTorch.
    Throughput(ThroughputArgs),
    /// Codec encode/decode speed against memcpy, error and compression.
    Codec(CodecArgs),
    /// The libp2p all-gather of one round against raw loopback TCP.
    Allreduce(AllreduceArgs),
    /// One Byzantine worker per attack (sign flip, ×100, zeros, noise, ALIE, copy): final
    /// validation loss against the clean run under the pool's aggregation rule.
    Byzantine(ByzantineArgs),
    /// Peak memory of aggregating N payloads: decoded all at once against tensor by tensor.
    Memory(MemoryArgs),
    /// Verification: Proof-of-Learning segment checks against whole replays (seconds, share
    /// of training compute) and how often a member skipping steps is caught.
    Verify(VerifyArgs),
}

/// Runs one benchmark; `threads` is the libtorch and rayon thread count the process was set
/// up with.
///
/// # Errors
/// Flags that make no valid recipe; the benchmark's own errors.
pub fn run(which: BenchCmd, threads: usize) -> Result<()> {
    match which {
        BenchCmd::Diloco(a) => synod_bench::diloco::run(&a.config()?),
        BenchCmd::Sanity(a) => synod_bench::sanity::run(&a.config()?),
        BenchCmd::Throughput(a) => synod_bench::throughput::run(&a.config()?, threads),
        BenchCmd::Codec(a) => synod_bench::codec::run(&a.config(), threads),
        BenchCmd::Allreduce(a) => synod_bench::allreduce::run(a.peers, a.params, a.repeat),
        BenchCmd::Byzantine(a) => {
            synod_bench::byzantine::run(&a.train.config()?, a.attacker, a.compare_mean)
        }
        BenchCmd::Memory(a) => synod_bench::memory::run(a.peers, a.params, a.aggregation.rule()),
        BenchCmd::Verify(a) => synod_bench::verify::run(&a.config()?),
    }
}

/// Arguments of `bench sanity`.
#[derive(Args, Clone, Debug)]
pub struct SanityArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Text corpus.
    #[arg(long, default_value = "../shared/data/tinyshakespeare.txt")]
    pub data: PathBuf,
    /// Training iterations (nanoGPT: 2000).
    #[arg(long, default_value_t = 2000)]
    pub iters: u32,
    /// Validation batches for the final loss.
    #[arg(long, default_value_t = 100)]
    pub final_eval_batches: u32,
}

impl SanityArgs {
    /// The benchmark's configuration.
    ///
    /// # Errors
    /// An unknown model preset; flags that make no valid recipe.
    pub fn config(&self) -> Result<SanityConfig> {
        Ok(SanityConfig {
            recipe: self.model.recipe_config(&self.data)?,
            iters: self.iters,
            final_eval_batches: self.final_eval_batches,
        })
    }
}

/// Arguments of `bench throughput`.
#[derive(Args, Clone, Debug)]
pub struct ThroughputArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Text corpus.
    #[arg(long, default_value = "../shared/data/tinyshakespeare.txt")]
    pub data: PathBuf,
    /// Timed steps per trial.
    #[arg(long, default_value_t = 40)]
    pub steps: u32,
    /// Untimed steps before each trial's timing starts.
    #[arg(long, default_value_t = 5)]
    pub untimed_steps: u32,
    /// Alternating trials of each side; the best of each counts.
    #[arg(long, default_value_t = 2)]
    pub trials: u32,
    /// Python interpreter with torch (default: $SYNOD_PYTHON, else python3).
    #[arg(long)]
    pub python: Option<String>,
    /// Directory holding bench_throughput.py and synod_gpt.py.
    #[arg(long, default_value = synod_bench::throughput::PYTHON_DIR)]
    pub python_dir: PathBuf,
}

impl ThroughputArgs {
    /// The benchmark's configuration.
    ///
    /// # Errors
    /// An unknown model preset; flags that make no valid recipe.
    pub fn config(&self) -> Result<ThroughputConfig> {
        Ok(ThroughputConfig {
            recipe: self.model.recipe_config(&self.data)?,
            steps: self.steps,
            untimed_steps: self.untimed_steps,
            trials: self.trials,
            python: self.python.clone(),
            python_dir: self.python_dir.clone(),
        })
    }
}

/// Arguments of `bench codec`.
#[derive(Args, Clone, Debug)]
pub struct CodecArgs {
    /// Parameters in the synthetic pseudo-gradient.
    #[arg(long, default_value_t = 25_000_000)]
    pub params: usize,
    /// Repetitions; the best time counts.
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    /// zstd level (default: the codec's default).
    #[arg(long, default_value_t = EncodeOptions::default().zstd_level, allow_hyphen_values = true)]
    pub zstd_level: i32,
    /// Fraction of elements replaced by ±20σ outliers (robustness check; 0 = plain Gaussian).
    #[arg(long, default_value_t = 0.0)]
    pub outliers: f64,
    /// The codec measured (against fp32 + zstd).
    #[command(flatten)]
    pub wire: WireCodec,
}

impl CodecArgs {
    /// The benchmark's configuration.
    pub fn config(&self) -> CodecConfig {
        CodecConfig {
            params: self.params,
            reps: self.reps,
            zstd_level: self.zstd_level,
            outliers: self.outliers,
            wire: self.wire.options(),
        }
    }
}

/// Arguments of `bench allreduce`.
#[derive(Args, Clone, Debug)]
pub struct AllreduceArgs {
    /// Peers (in-process swarms on 127.0.0.1).
    #[arg(long, default_value_t = 4)]
    pub peers: u32,
    /// Parameters per pseudo-gradient (int8-encoded: ≈ params bytes on the wire).
    #[arg(long, default_value_t = 25_000_000)]
    pub params: usize,
    /// Measurements of each transport; the median is reported.
    #[arg(long, default_value_t = 3)]
    pub repeat: u32,
}

/// Arguments of `bench byzantine`.
#[derive(Args, Clone, Debug)]
pub struct ByzantineArgs {
    #[command(flatten)]
    pub train: TrainArgs,
    /// Member index of the attacker (default: the last worker).
    #[arg(long)]
    pub attacker: Option<u32>,
    /// Also run every attack under the plain mean, to show what the rule prevents.
    #[arg(long)]
    pub compare_mean: bool,
}

/// Arguments of `bench memory`.
#[derive(Args, Clone, Debug)]
pub struct MemoryArgs {
    /// Payloads aggregated (in-process peers).
    #[arg(long, default_value_t = 4)]
    pub peers: u32,
    /// Parameters of the synthetic model (tensors of 2²⁰ elements and a remainder).
    #[arg(long, default_value_t = 25_000_000)]
    pub params: usize,
    /// Aggregation rule.
    #[arg(long, value_enum, default_value_t = Aggregation::ClippedTrimmedMean)]
    pub aggregation: Aggregation,
}

/// Arguments of `bench verify`.
#[derive(Args, Clone, Debug)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub recipe: RecipeArgs,
    /// Inner steps per round (H).
    #[arg(long, default_value_t = 50)]
    pub inner_steps: u32,
    /// Members of the pool, of equal stake (each verifies the others at a member's rate).
    #[arg(long, default_value_t = 4)]
    pub members: u32,
    /// Segments each verifier replays per sampled contribution (`run --verify-segments`).
    #[arg(long, default_value_t = 2)]
    pub segments: u32,
    /// Share of the other members' contributions each verifier samples (`run
    /// --verify-rate`; default: what a member samples at for `--members` of equal stake).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Share of its inner steps the lazy member skips.
    #[arg(long, default_value_t = 0.1)]
    pub fake_fraction: f64,
    /// Verifiers that check the lazy member (each draws its own segments).
    #[arg(long, default_value_t = 100)]
    pub trials: u32,
    /// Timed inner phases of each kind (plain, traced), alternated; the fastest counts.
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
}

impl VerifyArgs {
    /// The benchmark's configuration.
    ///
    /// # Errors
    /// An unknown model preset; flags that make no valid recipe.
    pub fn config(&self) -> Result<VerifyConfig> {
        Ok(VerifyConfig {
            recipe: self.recipe.config()?,
            inner_steps: self.inner_steps,
            members: self.members,
            segments: self.segments,
            rate: self.rate,
            fake_fraction: self.fake_fraction,
            trials: self.trials,
            reps: self.reps,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use synod_codec::Mode;
    use synod_diloco::recipe::RecipeCodec;
    use synod_diloco::AggregationRule;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        which: BenchCmd,
    }

    fn parse(flags: &[&str]) -> BenchCmd {
        Cli::parse_from(["bench"].iter().chain(flags)).which
    }

    #[test]
    fn the_codec_flags_become_the_encoder_options_measured() {
        let BenchCmd::Codec(a) = parse(&["codec"]) else {
            panic!("not codec")
        };
        let c = a.config();
        assert_eq!((c.params, c.reps, c.outliers), (25_000_000, 3, 0.0));
        assert_eq!(c.zstd_level, EncodeOptions::default().zstd_level);
        assert_eq!(c.wire.mode, Mode::Int8Absmax);
        let BenchCmd::Codec(a) = parse(&[
            "codec",
            "--codec",
            "sparse",
            "--sparse-topk",
            "64",
            "--zstd-level",
            "-3",
        ]) else {
            panic!("not codec")
        };
        let c = a.config();
        assert_eq!(c.wire.mode, Mode::SparseTopK);
        assert_eq!((c.wire.chunk_size, c.wire.topk), (4096, 64));
        assert_eq!(c.zstd_level, -3);
    }

    #[test]
    fn the_recipe_benchmarks_take_the_recipe_of_their_flags() {
        let BenchCmd::Verify(a) = parse(&[
            "verify",
            "--model",
            "tiny",
            "--codec",
            "sparse",
            "--trace-segments",
            "8",
            "--segments",
            "3",
        ]) else {
            panic!("not verify")
        };
        let c = a.config().unwrap();
        let r = &c.recipe.recipe;
        assert_eq!((r.model.as_str(), r.codec), ("tiny", RecipeCodec::Sparse));
        assert_eq!(r.aggregation, AggregationRule::ClippedMean);
        assert_eq!((r.trace_segments, c.segments, c.inner_steps), (8, 3, 50));
        assert!(c.rate.is_none());
        let BenchCmd::Sanity(a) = parse(&["sanity", "--device", "cpu"]) else {
            panic!("not sanity")
        };
        let c = a.config().unwrap();
        assert_eq!(
            (c.recipe.recipe.seq_len, c.recipe.device.as_str()),
            (64, "cpu")
        );
        assert_eq!((c.iters, c.final_eval_batches), (2000, 100));
        let BenchCmd::Memory(a) = parse(&["memory"]) else {
            panic!("not memory")
        };
        assert_eq!(a.aggregation.rule(), AggregationRule::ClippedTrimmedMean);
        // Flags that make no recipe are refused before the benchmark starts.
        let flags = ["byzantine", "--codec", "sparse", "--sparse-topk", "0"];
        let BenchCmd::Byzantine(a) = parse(&flags) else {
            panic!("not byzantine")
        };
        assert!(a.train.config().is_err());
    }
}
