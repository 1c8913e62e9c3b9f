//! The `synod-trainer bench` benchmarks and the attack fixtures ([`forger`]: dishonest
//! Proof-of-Learning traces that the replay tests and `bench verify` play). Each benchmark prints one JSON object per line: figures and ratios against a baseline
//! measured in the same run, never pass/fail assertions.

mod allreduce;
mod byzantine;
mod codec;
mod diloco;
pub mod forger;
mod memory;
#[cfg(test)]
mod replay_tests;
mod sanity;
mod throughput;
mod verify;

use anyhow::Result;
use clap::Subcommand;

/// `synod-trainer bench ...`
#[derive(Subcommand)]
pub enum BenchCmd {
    /// DiLoCo (int8, or `--codec sparse`) against the data-parallel baseline at equal tokens
    /// and compute.
    Diloco(synod_member::args::TrainArgs),
    /// One worker, nanoGPT's CPU baby-GPT recipe: validation loss after 2000 iterations.
    Sanity(sanity::SanityArgs),
    /// Tokens/s of our inner step against the same model in plain PyTorch.
    Throughput(throughput::ThroughputArgs),
    /// Codec encode/decode speed against memcpy, error and compression.
    Codec(codec::CodecArgs),
    /// The libp2p all-gather of one round against raw loopback TCP.
    Allreduce(allreduce::AllreduceArgs),
    /// One Byzantine worker per attack (sign flip, ×100, zeros, noise, ALIE, copy): final
    /// validation loss against the clean run under the pool's aggregation rule.
    Byzantine(byzantine::ByzantineArgs),
    /// Peak memory of aggregating N payloads: decoded all at once against tensor by tensor.
    Memory(memory::MemoryArgs),
    /// Verification: Proof-of-Learning segment checks against whole replays (seconds, share
    /// of training compute) and how often a member skipping steps is caught.
    Verify(verify::VerifyArgs),
}

/// Runs one benchmark.
pub fn run(cmd: BenchCmd, threads: usize) -> Result<()> {
    match cmd {
        BenchCmd::Diloco(a) => diloco::run(&a),
        BenchCmd::Sanity(a) => sanity::run(&a),
        BenchCmd::Throughput(a) => throughput::run(&a, threads),
        BenchCmd::Codec(a) => codec::run(&a, threads),
        BenchCmd::Allreduce(a) => allreduce::run(&a),
        BenchCmd::Byzantine(a) => byzantine::run(&a),
        BenchCmd::Memory(a) => memory::run(&a),
        BenchCmd::Verify(a) => verify::run(&a),
    }
}
