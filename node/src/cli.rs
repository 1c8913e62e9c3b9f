//! Command line: the standard Substrate node CLI (`--dev`, `--chain`, `--validator`,
//! `--base-path`, `--rpc-port`, `--prometheus-port`, …) and its subcommands.

/// Subcommands of `synod-node`.
#[derive(Debug, clap::Subcommand)]
#[allow(clippy::large_enum_variant)]
pub enum Subcommand {
    /// Key management (`key insert`, `key generate`, `key generate-node-key`, …).
    #[command(subcommand)]
    Key(sc_cli::KeySubcommand),

    /// Build a chain specification (deprecated upstream; prefer `export-chain-spec`).
    BuildSpec(sc_cli::BuildSpecCmd),

    /// Export the chain specification of `--chain` as JSON.
    ExportChainSpec(sc_cli::ExportChainSpecCmd),

    /// Validate blocks.
    CheckBlock(sc_cli::CheckBlockCmd),

    /// Export blocks.
    ExportBlocks(sc_cli::ExportBlocksCmd),

    /// Export the state of a given block into a chain spec.
    ExportState(sc_cli::ExportStateCmd),

    /// Import blocks.
    ImportBlocks(sc_cli::ImportBlocksCmd),

    /// Remove the whole chain.
    PurgeChain(sc_cli::PurgeChainCmd),

    /// Revert the chain to a previous state.
    Revert(sc_cli::RevertCmd),

    /// Runtime benchmarks (`benchmark pallet …`); needs `--features runtime-benchmarks`.
    #[cfg(feature = "runtime-benchmarks")]
    #[command(subcommand)]
    Benchmark(frame_benchmarking_cli::BenchmarkCmd),

    /// Db meta columns information.
    ChainInfo(sc_cli::ChainInfoCmd),
}

/// The `synod-node` command line.
#[derive(Debug, clap::Parser)]
pub struct Cli {
    /// Subcommand; none runs the node.
    #[command(subcommand)]
    pub subcommand: Option<Subcommand>,

    /// Node options.
    #[clap(flatten)]
    pub run: sc_cli::RunCmd,
}
