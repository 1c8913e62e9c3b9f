//! What a member's training thread and its duty worker share: the chain and network handles,
//! its identities, the pool's fixed terms, and its kept evidence with the trace states it
//! serves.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Result};
use synod_chain::types::{AccountId, FinalCheckpoint, MemberInfo, PoolInfo};
use synod_chain::{Chain, Signer};
use synod_checkpoint::CheckpointHash;
use synod_p2p::{Client, PeerId};
use synod_protocol::{RoundState, Timeline};
use tokio::runtime::Handle;

use super::appeal::{Appealer, OnChain};
use crate::config::MemberConfig;
use crate::pool::recipe::Recipe;
use crate::pool::store::Store;
use crate::pool::verify::Retained;

/// A snapshot's stakes by member index (planck): the aggregation rule's weights.
pub(super) fn stakes_of(snapshot: &[synod_chain::types::Participant]) -> synod_diloco::Stakes {
    snapshot.iter().map(|p| (p.index, p.stake)).collect()
}

/// Wall-clock time from finalized block `finalized` until `margin` blocks before block
/// `deadline`, with blocks of `block_secs` seconds: zero when that is past or `block_secs` is not
/// a positive number, [`Duration::MAX`] when it does not fit.
pub(super) fn until_margin(
    deadline: u64,
    finalized: u64,
    margin: u64,
    block_secs: f64,
) -> Duration {
    let blocks = deadline.saturating_sub(finalized.saturating_add(margin));
    let secs = blocks as f64 * block_secs;
    if secs.is_nan() || secs <= 0.0 {
        Duration::ZERO
    } else {
        Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
    }
}

/// The hashes of the states our `payload` names, which we store and serve to its verifiers:
/// its trace's and, for a sparse payload, the error-feedback residuals it commits to
/// ([`synod_diloco::residual`]; none for an untraced, dense or malformed payload).
fn trace_of(payload: &[u8]) -> Vec<[u8; 32]> {
    let Ok(parts) = synod_diloco::payload::Payload::parse(0, payload) else {
        return Vec::new();
    };
    let mut hashes = parts.trace.unwrap_or_default();
    if let Some(c) = parts.commitments {
        hashes.extend(
            [c.carried_in, c.carried_out]
                .into_iter()
                .filter(|h| *h != synod_diloco::residual::NO_RESIDUAL),
        );
    }
    hashes
}

/// One member of one pool, as both of its threads see it (cheap to clone: handles, `Arc`s
/// and paths).
#[derive(Clone)]
pub(super) struct Ctx {
    /// `synod-trainer run`'s arguments.
    pub a: Arc<MemberConfig>,
    /// The member's tokio runtime (owned by the training thread, which drops it last).
    pub rt: Handle,
    /// The chain client.
    pub chain: Chain,
    /// Our account's signer.
    pub signer: Signer,
    /// The network node's handle.
    pub client: Client,
    /// Checkpoints under `<base>/checkpoints/`.
    pub store: Store,
    /// The pool's recipe, corpus and θ₀.
    pub recipe: Arc<Recipe>,
    /// The pool's id.
    pub pool: u32,
    /// The pool's number of rounds.
    pub spec_rounds: u32,
    /// The pool's H (inner steps per round).
    pub inner_steps: u32,
    /// Our member index.
    pub me: u32,
    /// Our account (the verifier identity in [`synod_diloco::verify::sampled`]).
    pub account: AccountId,
    /// The pool's timeline, as the runtime builds it (`synod_chain::Chain::timeline`).
    pub timeline: Timeline,
    /// Seconds per block (the runtime's slot duration).
    pub block_secs: f64,
    /// Seconds per inner step on this machine, measured at start (`pool::terms::step_secs`).
    pub step_secs: f64,
    /// The evidence we keep, ours and the included sets' (`<base>/evidence/pool-<id>/`).
    pub retained: Retained,
    /// Appeals the rulings we lose (shared with the finalized-block subscription).
    pub appealer: Appealer<OnChain>,
    /// What the finalized-block subscription last saw: waits for the chain read storage at
    /// news of our pool's rounds ([`super::watch::ChainWatch::wait_for`]).
    pub watch: super::watch::ChainWatch,
}

impl Ctx {
    /// The protocol's state machine of final round `f` (`synod_protocol::round`), on the
    /// pool's timeline: its phase at a block says whether members of its included set may still
    /// commit late (and be paid), whether it can still be challenged, and whether it is settled.
    pub fn final_round(&self, f: &FinalCheckpoint) -> RoundState {
        RoundState::finalized(self.timeline, u64::from(f.finalized_at), f.hash)
    }

    /// Runs `f` to completion on the member's runtime (from a thread outside it).
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// The pool as the finalized head holds it.
    ///
    /// # Errors
    /// RPC errors; the pool no longer exists.
    pub fn pool_info(&self) -> Result<PoolInfo> {
        self.block_on(self.chain.pool(self.pool))?
            .ok_or_else(|| anyhow!("pool {} disappeared", self.pool))
    }

    /// The last final checkpoint (round 0: θ₀).
    ///
    /// # Errors
    /// RPC errors.
    pub fn last_final(&self) -> Result<(u32, CheckpointHash)> {
        Ok(self
            .block_on(self.chain.last_final(self.pool))?
            .unwrap_or((0, self.recipe.theta0_hash)))
    }

    /// The included set of final round `round` (empty for round 0, θ₀, or a round not final).
    ///
    /// # Errors
    /// RPC errors.
    pub fn final_included(&self, round: u32) -> Result<Vec<u32>> {
        if round == 0 {
            return Ok(Vec::new());
        }
        Ok(self
            .block_on(self.chain.final_checkpoint(self.pool, round))?
            .map(|f| f.included)
            .unwrap_or_default())
    }

    /// [`crate::pool::inner_start`] of this pool's recipe.
    ///
    /// # Errors
    /// As [`crate::pool::inner_start`].
    pub fn inner_start(&self, round: u32, parent: CheckpointHash) -> Result<CheckpointHash> {
        let overlap = self.recipe.pool.overlap;
        self.block_on(crate::pool::inner_start(
            &self.chain,
            self.pool,
            overlap,
            round,
            parent,
        ))
    }

    /// The stakes of round `round`'s snapshot by member index (planck), the aggregation rule's
    /// weights; `None` while the round is not open (no snapshot written) or after its snapshot
    /// was pruned.
    ///
    /// # Errors
    /// The snapshot cannot be read.
    pub async fn snapshot_stakes(
        &self,
        round: u32,
    ) -> Result<Option<synod_diloco::Stakes>, synod_chain::ChainError> {
        Ok(self
            .chain
            .round_snapshot(self.pool, round)
            .await?
            .map(|s| stakes_of(&s)))
    }

    /// The libp2p peer ids of `members` other than us.
    pub fn peers_in(&self, members: &[MemberInfo]) -> Vec<PeerId> {
        members
            .iter()
            .filter(|m| m.record.index != self.me)
            .filter_map(|m| PeerId::from_bytes(&m.record.peer_id).ok())
            .collect()
    }

    /// Serves the trace states of our `payload` for `round` that are still kept (a payload
    /// kept before a restart: verifiers fetch its states by the hashes it carries).
    pub fn serve_trace(&self, round: u32, payload: &[u8]) {
        for h in trace_of(payload) {
            let path = self.retained.trace_path(round, &h);
            if path.exists() {
                self.client.serve_file(h, path);
            }
        }
    }

    /// Stops serving the trace states of our payload of `round` (its evidence, trace included,
    /// is being forgotten: nobody can challenge it any more).
    pub fn drop_trace(&self, round: u32) {
        if let Some(payload) = self.retained.payload(round, self.me) {
            let hashes = trace_of(&payload);
            for h in &hashes {
                self.client.unserve_file(h);
            }
            self.serve_shared(round, &hashes);
        }
    }

    /// Stops serving and deletes the trace states of our `payload` for `round`, except those
    /// `kept`'s trace also names (a recomputed phase shares its start state with the kept one).
    pub fn forget_trace(&self, round: u32, payload: &[u8], kept: Option<&[u8]>) {
        let keep = kept.map(trace_of).unwrap_or_default();
        let gone: Vec<[u8; 32]> = trace_of(payload)
            .into_iter()
            .filter(|h| !keep.contains(h))
            .collect();
        self.forget_states(round, &gone);
    }

    /// Stops serving and deletes our trace states `hashes` kept with `round`'s evidence (a
    /// phase that did not finish, or the part of a payload's trace no kept payload names),
    /// serving again from another round's copy any that a payload of that round still names.
    pub fn forget_states(&self, round: u32, hashes: &[[u8; 32]]) {
        for h in hashes {
            self.client.unserve_file(h);
            let _ = std::fs::remove_file(self.retained.trace_path(round, h));
        }
        self.serve_shared(round, hashes);
    }

    /// Serves again, from another round's copy, any of `hashes` that a payload of ours for a
    /// round other than `round` still names: a sparse payload's residual `e_r` is round r's
    /// `carried_out` and round r + 1's `carried_in`, kept with both rounds' evidence.
    fn serve_shared(&self, round: u32, hashes: &[[u8; 32]]) {
        for r in self.retained.rounds().into_iter().filter(|r| *r != round) {
            let Some(payload) = self.retained.payload(r, self.me) else {
                continue;
            };
            for h in trace_of(&payload).iter().filter(|h| hashes.contains(h)) {
                let path = self.retained.trace_path(r, h);
                if path.exists() {
                    self.client.serve_file(*h, path);
                }
            }
        }
    }
}
