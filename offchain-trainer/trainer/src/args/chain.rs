//! Command-line arguments of the chain-backed subcommands `stake`, `pool create|show|allow`,
//! `status` and `claim` (`run` and `verify`: [`super::run`]).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::{Args, Subcommand};
use synod_member::config::{ChainConfig, CreateConfig};

use super::recipe::RecipeArgs;

/// Where the chain is and who signs.
#[derive(Args, Clone, Debug)]
pub struct ChainArgs {
    /// The node's JSON-RPC address; repeat the flag (or separate with commas) to give
    /// fallbacks: after a lost connection the client reconnects to the next one in turn, with
    /// backoff, and retries for up to 300 s before a command fails.
    #[arg(long, default_value = "ws://127.0.0.1:9944", value_delimiter = ',')]
    pub rpc: Vec<String>,
    /// Secret URI of the signing sr25519 account: `//Alice`, a mnemonic, `0x…` seed, with derivations.
    #[arg(long, default_value = "//Alice")]
    pub suri: String,
    /// Seconds to keep retrying while the node starts.
    #[arg(long, default_value_t = 120)]
    pub connect_timeout: u64,
}

impl ChainArgs {
    /// The chain client's configuration.
    pub fn config(&self) -> ChainConfig {
        ChainConfig {
            rpc: self.rpc.clone(),
            suri: self.suri.clone(),
            connect_timeout: Duration::from_secs(self.connect_timeout),
        }
    }
}

/// `synod-trainer stake`: bonds stake (`TrainerStaking.bond`).
#[derive(Args, Clone, Debug)]
pub struct StakeArgs {
    #[command(flatten)]
    pub chain: ChainArgs,
    /// Amount to bond, in SYN (1 SYN = 10^12 planck).
    #[arg(long)]
    pub amount: u64,
}

/// `synod-trainer pool …`.
// Parsed once per process; boxing the larger variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Clone, Debug)]
pub enum PoolCmd {
    /// Create a training pool (`TrainingPools.create_pool`) from a recipe and a corpus; prints its id and spec.
    Create(PoolCreateArgs),
    /// Print a pool, its members and its final checkpoints as JSON.
    Show(PoolShowArgs),
    /// Replace the accounts that may join a pool you created
    /// (`TrainingPools.set_allowed_trainers`); members already in it stay.
    Allow(PoolAllowArgs),
}

/// `synod-trainer pool create`.
#[derive(Args, Clone, Debug)]
pub struct PoolCreateArgs {
    #[command(flatten)]
    pub chain: ChainArgs,
    #[command(flatten)]
    pub recipe: RecipeArgs,
    /// Dataset id recorded on-chain (default: the corpus file's stem), at most 64 bytes.
    #[arg(long)]
    pub dataset_id: Option<String>,
    /// Inner steps H per outer round.
    #[arg(long, default_value_t = 50)]
    pub inner_steps: u32,
    /// Outer rounds.
    #[arg(long, default_value_t = 5)]
    pub rounds: u32,
    /// Members needed before training starts.
    #[arg(long, default_value_t = 3)]
    pub min_trainers: u32,
    /// Member cap.
    #[arg(long, default_value_t = 8)]
    pub max_trainers: u32,
    /// Smallest stake a member may commit, in SYN.
    #[arg(long, default_value_t = 10)]
    pub min_stake: u64,
    /// Reward of one final round, in SYN, split over its contributors pro rata to their stake.
    #[arg(long, default_value_t = 30)]
    pub reward_per_round: u64,
    /// Quorum in parts per billion of the round's snapshot stake, threshold rounded up (2 of 3
    /// equal stakes: 666666666; 666666667 would need all three).
    #[arg(long, default_value_t = 666_666_666)]
    pub quorum_ppb: u32,
    /// Blocks after a round opens before it is voided if not final; a jury's voting period is
    /// this plus the runtime's `VoteMargin`, and an appeal's another such period after the
    /// runtime's `AppealPeriod`, so settlement comes twice that much after finality.
    /// Refused below what the recipe's inner phase, exchange and duties take
    /// ([`synod_diloco::budget::min_round_timeout`] at three times the measured step time).
    /// Default: that minimum, and at least 60.
    #[arg(long)]
    pub round_timeout: Option<u32>,
    /// Blocks after finality during which late commits are accepted (challenges: twice that).
    /// Refused below what one verifier's checks of a round take
    /// ([`synod_diloco::budget::min_challenge_window`] at three times the measured step time).
    /// Default: that minimum.
    #[arg(long)]
    pub challenge_window: Option<u32>,
    /// Blocks after a round opens before a commit to it is accepted, so before it can be final:
    /// a party that alone holds the quorum finalizes no faster than that. Refused below the
    /// chain's floor (`⌈inner_steps / SpecLimits::max_inner_steps_per_block⌉`) and above half the
    /// round timeout. Default: the inner phase measured here, run 4× faster
    /// ([`synod_diloco::budget::min_round_length`]).
    #[arg(long)]
    pub min_round_length: Option<u32>,
    /// An account (SS58) allowed to join; repeat for each. Without any, anyone may join.
    #[arg(long = "allow", value_name = "ACCOUNT")]
    pub allowed_trainers: Vec<synod_chain::types::AccountId>,
    /// Seconds per inner step on the members' machines, when they are not like this one
    /// (e.g. a pool for GPUs created from a laptop). Default: measured here on the recipe.
    #[arg(long, value_parser = positive)]
    pub step_secs: Option<f64>,
    #[command(flatten)]
    pub link: LinkArgs,
    /// Do not replay the inner phase at two thread counts to check that honest replays stay
    /// within half the replay tolerance (the probe costs two inner phases).
    #[arg(long)]
    pub skip_noise_probe: bool,
}

impl PoolCreateArgs {
    /// The pool's terms and recipe as `pool create` measures and submits them.
    ///
    /// # Errors
    /// Recipe flags that make no recipe ([`RecipeArgs::config`]).
    pub fn config(&self) -> Result<CreateConfig> {
        Ok(CreateConfig {
            chain: self.chain.config(),
            recipe: self.recipe.config()?,
            dataset_id: self.dataset_id.clone(),
            inner_steps: self.inner_steps,
            rounds: self.rounds,
            min_trainers: self.min_trainers,
            max_trainers: self.max_trainers,
            min_stake: self.min_stake,
            reward_per_round: self.reward_per_round,
            quorum_ppb: self.quorum_ppb,
            round_timeout: self.round_timeout,
            challenge_window: self.challenge_window,
            min_round_length: self.min_round_length,
            allowed_trainers: self.allowed_trainers.clone(),
            step_secs: self.step_secs,
            link_bytes_per_sec: self.link.bytes_per_sec(),
            skip_noise_probe: self.skip_noise_probe,
        })
    }
}

/// The network a pool's terms are checked against.
#[derive(Args, Clone, Debug)]
pub struct LinkArgs {
    /// Download and upload rate assumed for a member, in Mbit/s: prices the exchange and the
    /// trace states a verifier fetches against the round timeout and the challenge window.
    #[arg(long, default_value_t = 100.0, value_parser = positive)]
    pub bandwidth_mbit: f64,
}

impl LinkArgs {
    /// The assumed rate in bytes per second.
    pub fn bytes_per_sec(&self) -> f64 {
        self.bandwidth_mbit * 1e6 / 8.0
    }
}

/// A finite number > 0 (seconds, Mbit/s).
pub(super) fn positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("{s:?} is not a number above 0")),
    }
}

/// `synod-trainer pool show`.
#[derive(Args, Clone, Debug)]
pub struct PoolShowArgs {
    #[command(flatten)]
    pub chain: ChainArgs,
    /// Pool id.
    #[arg(long, default_value_t = 0)]
    pub pool: u32,
}

/// `synod-trainer pool allow`.
#[derive(Args, Clone, Debug)]
pub struct PoolAllowArgs {
    #[command(flatten)]
    pub chain: ChainArgs,
    /// Pool id.
    #[arg(long)]
    pub pool: u32,
    /// An account (SS58) allowed to join; repeat for each (at least `min_trainers` of them).
    /// Without any, anyone may join.
    #[arg(long = "allow", value_name = "ACCOUNT")]
    pub allowed_trainers: Vec<synod_chain::types::AccountId>,
}

/// `synod-trainer status`: a pool's members, stakes and rounds as tables.
#[derive(Args, Clone, Debug)]
pub struct StatusArgs {
    #[command(flatten)]
    pub chain: ChainArgs,
    /// Pool id.
    #[arg(long, default_value_t = 0)]
    pub pool: u32,
    /// A member's base path: adds each round's validation loss from its `metrics.jsonl`.
    #[arg(long)]
    pub base_path: Option<PathBuf>,
}

/// `synod-trainer claim`: waits until every final round is settled, then claims.
#[derive(Args, Clone, Debug)]
pub struct ClaimArgs {
    #[command(flatten)]
    pub chain: ChainArgs,
    /// Pool id.
    #[arg(long, default_value_t = 0)]
    pub pool: u32,
    /// Seconds to wait for the pool to complete and its rounds to settle (0: claim what is settled now).
    #[arg(long, default_value_t = 600)]
    pub wait: u64,
}
