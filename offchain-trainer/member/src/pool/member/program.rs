//! The seam between what every member of a pool does and what its kind trains
//! (`docs/architecture.md`, "Kinds of pool"): [`super::run`] joins the pool, follows the chain
//! and starts the network whatever the kind, and hands the member over to the kind's
//! [`PoolProgram`] ([`super::diloco::Diloco`] for DiLoCo pools, the one kind).

use anyhow::Result;
use synod_chain::types::{PoolInfo, PoolSpec};
use synod_chain::{Chain, Signer};
use synod_p2p::Client;
use synod_protocol::Timeline;
use tokio::runtime::Runtime;

use super::appeal::{Appealer, OnChain};
use super::duty::DutyMsg;
use super::watch::ChainWatch;
use crate::config::MemberConfig;
use crate::metrics::Metrics;
use crate::pool::store::Store;

/// What `synod-trainer run` does for one kind of pool: its checks before anything is bonded,
/// its initial checkpoint, and its rounds and duties once the member has joined and the pool
/// trains. A new kind implements this in one module and adds its arm to [`super::run`].
pub(super) trait PoolProgram: Sized {
    /// Reads the kind's job from `spec`, checks it against this member's configuration `a`
    /// and checks that this machine can keep the pool's terms, before anything is bonded or
    /// submitted (a member that already joined resumes with a warning instead).
    ///
    /// # Errors
    /// A pool of another kind, a job the configuration does not match, terms this machine
    /// cannot keep, chain RPC failures.
    fn prepare(
        rt: &Runtime,
        chain: &Chain,
        signer: &Signer,
        a: &MemberConfig,
        spec: &PoolSpec,
    ) -> Result<Self>;

    /// The largest checkpoint this kind's rounds produce, in bytes (the checkpoint store's
    /// and the network's bound on a fetched checkpoint).
    fn max_checkpoint_bytes(&self) -> u64;

    /// Round 0's checkpoint (θ₀ for DiLoCo), kept and served to members that join.
    fn initial_checkpoint(&self) -> &[u8];

    /// Trains as the member `joined.me` from round `joined.from_round` until the pool ends,
    /// then keeps the member's duties until nothing of its rounds can be disputed.
    ///
    /// # Errors
    /// What ends the member: the chain or the network lost, a local store that fails.
    fn run(self, a: &MemberConfig, joined: Joined) -> Result<()>;
}

/// A member that has joined its pool and whose pool trains: the handles every kind's program
/// runs on.
pub(super) struct Joined {
    /// The chain client.
    pub chain: Chain,
    /// The member's account key.
    pub signer: Signer,
    /// The network, serving round 0's checkpoint.
    pub client: Client,
    /// The local checkpoints, round 0's among them.
    pub store: Store,
    /// Our member index.
    pub me: u32,
    /// The first round we may train.
    pub from_round: u32,
    /// Whether we resumed an existing registration.
    pub resumed: bool,
    /// The pool as it started training.
    pub started: PoolInfo,
    /// The pool's rounds on the chain's timeline.
    pub timeline: Timeline,
    /// Appeals of rulings against us, fed by the chain subscription.
    pub appealer: Appealer<OnChain>,
    /// News of our pool's rounds from the chain subscription.
    pub watch: ChainWatch,
    /// Where events go (metrics.jsonl, Prometheus).
    pub metrics: Metrics,
    /// Finalized blocks, for the duty worker: the sender the subscription also holds, and its
    /// receiver.
    pub duties: (
        std::sync::mpsc::Sender<DutyMsg>,
        std::sync::mpsc::Receiver<DutyMsg>,
    ),
    /// The async runtime the handles run on (the last field: dropped after them).
    pub rt: Runtime,
}
