//! What the member library runs with: typed configuration, built once by the `synod-trainer`
//! binary from its command line (the library parses no arguments). A pool's recipe is
//! [`synod_diloco::recipe::PoolRecipe`]; everything else here is how this machine runs it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use synod_diloco::byzantine::Attack;
use synod_diloco::recipe::PoolRecipe;

/// Where the chain is and who signs.
#[derive(Clone, Debug)]
pub struct ChainConfig {
    /// The node's JSON-RPC addresses: the first, then the others in turn after a lost
    /// connection (with backoff, for up to 300 s before a command fails).
    pub rpc: Vec<String>,
    /// Secret URI of the signing sr25519 account (`//Alice`, a mnemonic, a `0x…` seed, with
    /// derivations).
    pub suri: String,
    /// How long to keep retrying while the node starts.
    pub connect_timeout: Duration,
}

/// A pool's recipe with what this machine needs to run it: the corpus file, the device and
/// the evaluation size. Only `recipe` enters the pool's `model_config_hash`.
#[derive(Clone, Debug)]
pub struct RecipeConfig {
    /// The recipe (model, batch, inner and outer optimizer, codec, aggregation, trace).
    pub recipe: PoolRecipe,
    /// Text corpus (byte-level tokens); a pool's `dataset_hash` is its blake3.
    pub data: PathBuf,
    /// `cpu`, `cuda`, `cuda:N` or `auto` ([`synod_model::parse_device`]).
    pub device: String,
    /// Validation batches per evaluation.
    pub eval_batches: u32,
}

/// Training method of `synod-trainer train`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// DiLoCo: H inner steps per worker, then an outer Nesterov step on the aggregated
    /// pseudo-gradient (Douillard et al. 2023, Algorithm 1).
    Diloco,
    /// Data-parallel baseline: N workers average gradients every step.
    Ddp,
}

/// `synod-trainer train`: N workers in one process on a local corpus, no chain, no network.
#[derive(Clone, Debug)]
pub struct TrainConfig {
    /// The recipe and this machine's settings for it (the recipe's trace is not used).
    pub recipe: RecipeConfig,
    /// Workers (DiLoCo replicas, or data-parallel ranks).
    pub workers: u32,
    /// Inner steps per outer round (H).
    pub inner_steps: u32,
    /// Outer rounds (the data-parallel baseline runs rounds × H steps).
    pub rounds: u32,
    /// DiLoCo or the data-parallel baseline.
    pub method: Method,
    /// Initial weights (a canonical checkpoint; its outer state is ignored); `None`: fresh
    /// weights from the recipe's seed.
    pub init: Option<PathBuf>,
    /// Output directory: round checkpoints, `metrics.jsonl`, `loss.png`.
    pub out: PathBuf,
    /// Hide progress bars.
    pub quiet: bool,
}

/// Segments of a sampled contribution a member replays unless told otherwise;
/// `pool create` prices its challenge window with it.
pub const DEFAULT_VERIFY_SEGMENTS: u32 = 2;

/// `synod-trainer run`: a member of pool `pool` until the pool completes.
#[derive(Clone, Debug)]
pub struct MemberConfig {
    /// The chain and the member's account.
    pub chain: ChainConfig,
    /// The pool's recipe (checked against the pool's hashes before anything is bonded).
    pub recipe: RecipeConfig,
    /// Pool id.
    pub pool: u32,
    /// Stake to commit to the pool, in SYN; bonded first if the account's active stake is short.
    pub stake: u64,
    /// Identity key, checkpoints of final rounds, evidence, metrics: the same base path
    /// resumes as the same member.
    pub base_path: PathBuf,
    /// libp2p listen address.
    pub listen: synod_p2p::Multiaddr,
    /// Addresses at which other members reach this trainer that it does not listen on itself
    /// (a NAT's public address): announced with the listen address.
    pub public_addr: Vec<synod_p2p::Multiaddr>,
    /// Peers to dial at start, and again while not connected to them; others are found through
    /// Kademlia and the on-chain registrations.
    pub bootnode: Vec<synod_p2p::Multiaddr>,
    /// How long a round's exchange waits at most.
    pub round_deadline: Duration,
    /// Longest wait for any single read or write of a transfer to make progress
    /// ([`synod_p2p::Limits::stall`]).
    pub transfer_stall: Duration,
    /// Slowest transfer kept, in bytes per second after the first `transfer_stall`
    /// ([`synod_p2p::Limits::min_rate`]).
    pub min_transfer_rate: u64,
    /// Download and upload rate assumed for this member, in bytes per second: prices the
    /// exchange and the trace states a verifier fetches against the pool's terms.
    pub link_bytes_per_sec: f64,
    /// Most upload rate this member's serving may take, in Mbit/s, all transfers together
    /// ([`synod_p2p::NetConfig::max_upload`]); `None`: as fast as the link goes.
    pub max_upload_mbit: Option<f64>,
    /// Hide the inner-step progress bar.
    pub quiet: bool,
    /// Fault injection for tests (refused unless the chain is a development or local one).
    pub fault: Option<Fault>,
    /// Share of the other members of each final round's included set whose inner phase this
    /// member replays (0..=1; 0 switches verification off); `None`: the smallest rate at which
    /// a contribution escapes every honest contributor with probability ≤ 1 %
    /// ([`synod_diloco::verify::honest_verifiers_at_least`]).
    pub verify_rate: Option<f64>,
    /// Segments of each sampled contribution's trace this member replays (at least 1).
    pub verify_segments: u32,
    /// Whether this member serves on juries (it opts in at start and out when it stops).
    pub juror: bool,
    /// Where the Prometheus exporter serves `/metrics`; `None`: no exporter.
    pub prometheus: Option<SocketAddr>,
}

/// `synod-trainer pool create`: a pool's terms and recipe, measured and checked here before
/// `TrainingPools.create_pool`.
#[derive(Clone, Debug)]
pub struct CreateConfig {
    /// The chain and the creator's account.
    pub chain: ChainConfig,
    /// The recipe, measured on this machine unless `step_secs` is given.
    pub recipe: RecipeConfig,
    /// Dataset id recorded on-chain (at most 64 bytes); `None`: the corpus file's stem.
    pub dataset_id: Option<String>,
    /// Inner steps H per outer round.
    pub inner_steps: u32,
    /// Outer rounds.
    pub rounds: u32,
    /// Members needed before training starts.
    pub min_trainers: u32,
    /// Member cap.
    pub max_trainers: u32,
    /// Smallest stake a member may commit, in SYN.
    pub min_stake: u64,
    /// Reward of one final round, in SYN, split over its contributors pro rata to stake.
    pub reward_per_round: u64,
    /// Quorum in parts per billion of the round's snapshot stake, threshold rounded up.
    pub quorum_ppb: u32,
    /// Blocks after a round opens before it is voided if not final; `None`: the recipe's
    /// minimum ([`synod_diloco::budget::min_round_timeout`]), at least 60.
    pub round_timeout: Option<u32>,
    /// Blocks after finality during which late commits are accepted; `None`: the recipe's
    /// minimum ([`synod_diloco::budget::min_challenge_window`]).
    pub challenge_window: Option<u32>,
    /// Blocks after a round opens before a commit to it is accepted; `None`: the inner phase
    /// measured here, run 4× faster ([`synod_diloco::budget::min_round_length`]).
    pub min_round_length: Option<u32>,
    /// Accounts allowed to join; empty: anyone.
    pub allowed_trainers: Vec<synod_chain::types::AccountId>,
    /// Seconds per inner step on the members' machines; `None`: measured here.
    pub step_secs: Option<f64>,
    /// Download and upload rate assumed for a member, in bytes per second.
    pub link_bytes_per_sec: f64,
    /// Skip replaying the inner phase at two thread counts (the honest-noise probe, two inner
    /// phases).
    pub skip_noise_probe: bool,
}

/// `synod-trainer verify`: one member's contribution to a final round, replayed from what a
/// member of the pool kept.
#[derive(Clone, Debug)]
pub struct VerifyConfig {
    /// The chain and the account that challenges.
    pub chain: ChainConfig,
    /// The pool's recipe.
    pub recipe: RecipeConfig,
    /// Pool id.
    pub pool: u32,
    /// Final round.
    pub round: u32,
    /// Member index of the contributor to replay.
    pub member: u32,
    /// Base path of a trainer of the pool (holds θ_{round−1} and the member's payload).
    pub base_path: PathBuf,
    /// Open a challenge if the contribution is outside the tolerance.
    pub challenge: bool,
}

/// What a faulty trainer does, for tests (see [`synod_diloco::byzantine::Attack`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Announce −Δ.
    SignFlip,
    /// Announce 100 · Δ.
    ScaleX100,
    /// Announce the zero vector.
    Zeros,
    /// Announce Gaussian noise, 10× the RMS of Δ.
    Gaussian,
    /// Free-riding: announce another member's payload of the round as our own (our own
    /// payload when no other member's arrives in time).
    Copy,
    /// Serve our payload only to the lowest-indexed other member: the rest must get it
    /// relayed.
    Withhold,
    /// Equivocate: next to our payload, sign and announce a second one (our payload with its
    /// last byte flipped) for the same round.
    Equivocate,
    /// Announce our (honest) payload [`LATE_SECS`] after our inner phase ends, and commit
    /// nothing: members whose exchange deadline passes before it arrives leave it out, the
    /// others include it, and their checkpoints split (`synod_protocol::agreement`).
    Late,
    /// Heartbeat and never announce a payload (nor commit) until the pool ends; the run then
    /// ends with an error (a muted member has nothing to finish).
    Mute,
}

/// How late [`Fault::Late`] announces its payload, in seconds after its inner phase.
pub const LATE_SECS: u64 = 20;

impl Fault {
    /// Every fault.
    pub const ALL: [Fault; 9] = [
        Fault::SignFlip,
        Fault::ScaleX100,
        Fault::Zeros,
        Fault::Gaussian,
        Fault::Copy,
        Fault::Withhold,
        Fault::Equivocate,
        Fault::Late,
        Fault::Mute,
    ];

    /// The fault's name on the command line (`--fault sign-flip`).
    pub fn name(self) -> &'static str {
        match self {
            Fault::SignFlip => "sign-flip",
            Fault::ScaleX100 => "scale-x100",
            Fault::Zeros => "zeros",
            Fault::Gaussian => "gaussian",
            Fault::Copy => "copy",
            Fault::Withhold => "withhold",
            Fault::Equivocate => "equivocate",
            Fault::Late => "late",
            Fault::Mute => "mute",
        }
    }

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
