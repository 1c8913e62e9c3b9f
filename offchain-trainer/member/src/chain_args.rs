//! Command-line arguments of the chain-backed subcommands: `stake`, `pool`, `run`, `claim`.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use synod_diloco::byzantine::Attack;

use crate::args::{ModelArgs, OuterArgs};

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
    /// Segment boundaries of this recipe's Proof-of-Learning trace for a phase of
    /// `inner_steps` ([`synod_diloco::verify::segment_boundaries`] with `--trace-segments`).
    pub fn segment_boundaries(&self, inner_steps: u32) -> Vec<u32> {
        synod_diloco::verify::segment_boundaries(inner_steps, self.trace_segments)
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

/// Segments of a sampled contribution a member replays unless told otherwise
/// (`run --verify-segments`); `pool create` prices its window with it.
pub const DEFAULT_VERIFY_SEGMENTS: u32 = 2;

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
fn positive(s: &str) -> Result<f64, String> {
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

/// `synod-trainer run`: be a member of a pool until it completes.
#[derive(Args, Clone, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub chain: ChainArgs,
    #[command(flatten)]
    pub recipe: RecipeArgs,
    /// Pool id.
    #[arg(long, default_value_t = 0)]
    pub pool: u32,
    /// Stake to commit to the pool, in SYN; bonded first if the account's active stake is short.
    #[arg(long, default_value_t = 100)]
    pub stake: u64,
    /// The trainer's base path: identity key, checkpoints of final rounds, metrics. Restarting
    /// with the same base path resumes as the same member.
    #[arg(long, default_value = "out/trainer")]
    pub base_path: PathBuf,
    /// libp2p listen address.
    #[arg(long, default_value = "/ip4/0.0.0.0/tcp/0")]
    pub listen: String,
    /// Addresses at which other members reach this trainer that it does not listen on itself
    /// (multiaddrs, repeatable: a NAT's public address with its port forward): announced with
    /// the listen address, and the proof that a member connecting to one reached this trainer.
    #[arg(long)]
    pub public_addr: Vec<synod_p2p::Multiaddr>,
    /// Peers to dial at start (multiaddrs); others are found through Kademlia and the
    /// on-chain registrations (peer ids).
    #[arg(long)]
    pub bootnode: Vec<synod_p2p::Multiaddr>,
    /// Seconds after which a round's exchange stops waiting.
    #[arg(long, default_value_t = 300)]
    pub round_deadline: u64,
    /// Longest wait, in seconds, for any single read or write of a payload, checkpoint or
    /// trace-state transfer to make progress, both when fetching and when serving
    /// (`synod_p2p::Limits::stall`).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub transfer_stall: u64,
    /// Slowest transfer kept, in bytes per second after the first `--transfer-stall` seconds,
    /// both ways (`synod_p2p::Limits::min_rate`): a peer that falls behind is cut (a drip), and
    /// the next source is asked. Lower it on a link shared by many transfers at once (a node
    /// serves up to 64 shared streams plus 4 per member).
    #[arg(long, default_value_t = 250_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub min_transfer_rate: u64,
    #[command(flatten)]
    pub link: LinkArgs,
    /// Most upload rate this member's serving may take, in Mbit/s, all transfers together
    /// (`synod_p2p::NetConfig::max_upload`; evidence, the trace states and residuals that
    /// verifiers and jurors fetch, goes first); unset: as fast as the link goes.
    #[arg(long, value_parser = positive)]
    pub max_upload_mbit: Option<f64>,
    /// Hide the inner-step progress bar (drawn on stderr only when it is a terminal).
    #[arg(long)]
    pub quiet: bool,
    /// Fault injection for tests: announce a Byzantine pseudo-gradient instead of the honest
    /// one every round, copy another member's, or withhold ours from most peers. Refused
    /// unless the node's chain type is Development or Local.
    #[arg(long, value_enum, hide = true)]
    pub fault: Option<Fault>,
    /// Share of the other members of each final round's included set whose inner phase this
    /// trainer replays (0..=1; 0 switches verification off). Default: the smallest rate at
    /// which a contribution escapes every honest contributor with probability ≤ 1 %, counting
    /// only as many honest contributors as the round's stakes guarantee against an adversary
    /// with a third of its stake, however many seats it holds
    /// (`synod_diloco::verify::honest_verifiers_at_least`). A contribution outside the replay
    /// tolerance is challenged on-chain with its signed announcement as evidence.
    #[arg(long)]
    pub verify_rate: Option<f64>,
    /// Segments of each sampled contribution's Proof-of-Learning trace this trainer replays
    /// (of the recipe's `--trace-segments` S per inner phase, each ⌈H/S⌉ inner steps), after
    /// checking the trace's start and end against θ_{r−1} and the payload. A contribution
    /// without a trace, whose states its author does not serve, or that fails a check is
    /// replayed whole before any challenge. A phase has ⌈H / ⌈H/S⌉⌉ ≤ min(S, H) segments;
    /// that many or more: every segment (the cost of a whole replay). At least 1.
    #[arg(long, default_value_t = DEFAULT_VERIFY_SEGMENTS, value_parser = clap::value_parser!(u32).range(1..))]
    pub verify_segments: u32,
    /// Opt out of juries (`Challenges.unregister_juror`). By default every member is a juror:
    /// it opts back in at start (`Challenges.register_juror`, if it had opted out) and votes automatically when drawn: it replays the disputed contribution and
    /// votes guilty iff it is outside the replay tolerance (innocent on its own). Committees
    /// are drawn from the challenged round's contributors that did not opt out and were in
    /// the previous round's contributors; a seated juror that lacks what a replay needs
    /// abstains, and the runtime slashes a seated juror that does not vote. The trainer opts
    /// out when it stops, after its last duties.
    #[arg(long = "no-jury", action = clap::ArgAction::SetFalse)]
    pub juror: bool,
    /// Port of the Prometheus exporter (`/metrics`: `synod_trainer_*` rounds, losses, seconds,
    /// bytes, replays, challenges, votes). A port in use only disables it, with a warning.
    #[arg(long, default_value_t = crate::prometheus::DEFAULT_PORT)]
    pub prometheus_port: u16,
    /// Serve Prometheus metrics on all interfaces (default: 127.0.0.1 only).
    #[arg(long)]
    pub prometheus_external: bool,
    /// Do not serve Prometheus metrics.
    #[arg(long)]
    pub no_prometheus: bool,
}

/// `synod-trainer verify`: replays one member's contribution to a final round from what a
/// member of that pool kept (`<base>/checkpoints`, `<base>/evidence`).
#[derive(Args, Clone, Debug)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub chain: ChainArgs,
    #[command(flatten)]
    pub recipe: RecipeArgs,
    /// Pool id.
    #[arg(long, default_value_t = 0)]
    pub pool: u32,
    /// Final round.
    #[arg(long)]
    pub round: u32,
    /// Member index of the contributor to replay.
    #[arg(long)]
    pub member: u32,
    /// Base path of a trainer of the pool (holds θ_{round−1} and the member's payload).
    #[arg(long, default_value = "out/trainer")]
    pub base_path: PathBuf,
    /// Open a challenge (signed with `--suri`) if the contribution is outside the tolerance.
    #[arg(long)]
    pub challenge: bool,
}

/// What a `--fault` trainer sends (see [`synod_diloco::byzantine::Attack`]).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// −Δ.
    SignFlip,
    /// 100 · Δ.
    ScaleX100,
    /// The zero vector.
    Zeros,
    /// Gaussian noise, 10× the RMS of Δ.
    Gaussian,
    /// Free-riding: announce another member's payload of the round (fetched after it is
    /// announced) as our own.
    Copy,
    /// Serve our payload only to the lowest-indexed other member: the rest must get it relayed.
    Withhold,
    /// Equivocate: next to our payload, sign and announce a second one (our payload with its
    /// last byte flipped) for the same round.
    Equivocate,
    /// Announce our (honest) payload [`LATE_SECS`] after our inner phase ends, and commit
    /// nothing: members whose exchange deadline passes before it arrives leave it out, the
    /// others include it, and their checkpoints split (`synod_protocol::agreement`).
    Late,
    /// Heartbeat and never announce a payload (nor commit) until the pool ends: members that
    /// waited for a live member's payload until their exchange deadline would commit after the
    /// round's deadline; they wait two inner phases (`announce_grace`).
    Mute,
}

/// How late `--fault late` announces its payload, in seconds after its inner phase.
pub const LATE_SECS: u64 = 20;

impl Fault {
    /// The simulated attack on our own pseudo-gradient, if this fault is one.
    pub fn attack(self) -> Option<Attack> {
        match self {
            Fault::SignFlip => Some(Attack::SignFlip),
            Fault::ScaleX100 => Some(Attack::ScaleX100),
            Fault::Zeros => Some(Attack::Zeros),
            Fault::Gaussian => Some(Attack::Gaussian),
            Fault::Copy | Fault::Withhold | Fault::Equivocate | Fault::Late | Fault::Mute => None,
        }
    }
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
