//! `synod-trainer`: the off-chain half of Synod.
//!
//! * `train` — DiLoCo with N workers in this process (or the data-parallel baseline) on a
//!   local text file; writes per-round canonical checkpoints, JSON-lines metrics and a loss plot.
//! * `init` — writes a pool's initial weights as a canonical checkpoint and prints its blake3.
//! * `bench diloco|sanity|throughput|codec|allreduce|byzantine` — the benchmarks; each prints one JSON object per line.
//! * `stake`, `pool create|show`, `run`, `claim` — the chain-backed main job: bond, create a
//!   training pool, be one of its members until it completes (verifying the others and serving
//!   as a juror), claim the rewards.
//! * `verify` — replay one member's contribution to a final round (a one-off verification).
//! * `status` — a pool's members, stakes and rounds as tables.
//! * `dashboard` — a web page of the chain's pools, rounds, stakes, challenges and losses.

mod args;

use synod_member::{event, pool, train};

use anyhow::Result;
use args::chain::PoolCmd;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "synod-trainer",
    version,
    about = "Synod off-chain trainer: DiLoCo on libtorch",
    args_override_self = true
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    /// libtorch intra-op threads and codec threads (0 = all cores).
    #[arg(long, global = true, default_value_t = 0)]
    threads: usize,
}

#[derive(Subcommand)]
enum Cmd {
    /// Train on a text file: DiLoCo with N local workers, or the data-parallel baseline.
    Train(args::train::TrainArgs),
    /// Write the initial weights of a model as a canonical checkpoint and print its hash.
    Init(args::train::InitArgs),
    /// Bond stake on-chain (TrainerStaking.bond).
    Stake(args::chain::StakeArgs),
    /// Create or inspect a training pool on-chain.
    Pool {
        #[command(subcommand)]
        cmd: PoolCmd,
    },
    /// Be a member of an on-chain pool: join, train every round over libp2p, commit checkpoints.
    Run(args::run::RunArgs),
    /// Replay one member's contribution to a final round and compare it with its signed payload.
    Verify(args::run::VerifyArgs),
    /// Claim settled rewards of a pool (waits for the pool to end and settle).
    Claim(args::chain::ClaimArgs),
    /// A pool's members, stakes and rounds as tables (`pool show` prints the same as JSON).
    Status(args::chain::StatusArgs),
    /// Serve the web dashboard: pools, rounds, stakes, challenges and a live loss chart.
    Dashboard(args::dashboard::DashboardArgs),
    /// Run a benchmark (prints JSON lines).
    Bench {
        #[command(subcommand)]
        which: args::bench::BenchCmd,
    },
}

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let threads = if cli.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        cli.threads
    };
    synod_model::tch::set_num_threads(threads as i32);
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()?;
    match cli.cmd {
        Cmd::Train(a) => train::run(&a.config()?),
        Cmd::Init(a) => train::init(&a.model.recipe()?, &a.model.device, &a.out),
        Cmd::Stake(a) => pool::stake(&a.chain.config(), a.amount),
        Cmd::Pool {
            cmd: PoolCmd::Create(a),
        } => pool::create(&a.config()?),
        Cmd::Pool {
            cmd: PoolCmd::Show(a),
        } => pool::show(&a.chain.config(), a.pool),
        Cmd::Pool {
            cmd: PoolCmd::Allow(a),
        } => pool::allow(&a.chain.config(), a.pool, &a.allowed_trainers),
        Cmd::Run(a) => pool::run(&a.config()?),
        Cmd::Claim(a) => pool::claim(&a.chain.config(), a.pool, a.wait),
        Cmd::Status(a) => pool::status(&a.chain.config(), a.pool, a.base_path.as_deref()),
        Cmd::Verify(a) => pool::verify(&a.config()?),
        Cmd::Dashboard(a) => synod_dashboard::run(&a.config(), |url| {
            // The line scripts wait for: the URL to open.
            println!("{}", event::TrainerEvent::Dashboard { url }.to_line()?);
            Ok(())
        }),
        Cmd::Bench { which } => args::bench::run(which, threads),
    }
}
