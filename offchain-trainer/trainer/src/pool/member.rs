//! `synod-trainer run`: one member of an on-chain pool, following ARCHITECTURE.md round by round.
//!
//! * **Join**: bond if needed, `join_pool` with the libp2p peer id and ML-DSA-65 key derived
//!   from `<base>/identity.key` (an existing registration with the same peer id is resumed).
//! * **Catch up** (passive on the network until it knows its round, so nobody waits for it):
//!   the first round to train is the chain's current round, or for a restarted member whose
//!   peers already announced that round, the round after; its parent θ is the last final
//!   checkpoint, read from `<base>/checkpoints/` or fetched from peers and checked against the
//!   on-chain blake3. Final rounds are never recomputed.
//! * **Round r**: inner phase from θ_{r−1} (optimistic: θ_{r−1} may not be final yet), then
//!   wait until round r−1 is closed on-chain — if our θ_{r−1} lost the vote or the round was
//!   voided, re-sync from the final checkpoint and redo the inner phase, so a wrong payload is
//!   never announced — then exchange, aggregate, outer step, store and serve θ_r, and commit
//!   its hash in the background while round r+1's inner phase runs.
//! * **End**: when the pool completes, write `<base>/loss.png` and keep serving until live
//!   peers have our last payload.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use synod_chain::submit::account_of;
use synod_chain::types::{MemberInfo, PoolInfo, PoolStatus};
use synod_chain::{calls, Chain, ChainError, FinalizedBlock, Signer};
use synod_checkpoint::CheckpointHash;
use synod_diloco::{Mean, OuterState};
use synod_model::{eval_loss, load_params, TchInnerTrainer};
use synod_p2p::libp2p_identity::Keypair;
use synod_p2p::{all_gather, spawn, Client, ExchangeConfig, Member, MemberKey, MemberSet, Multiaddr, NetConfig, PeerId, PublicKey};
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

use super::recipe::Recipe;
use super::store::Store;
use super::{connect, ensure_bonded, planck, runtime};
use crate::chain_args::RunArgs;
use crate::metrics::Metrics;
use crate::plot::{loss_vs_tokens, Curve};
use crate::train::{identity_seed, RoundRecord};

/// How a round ended on-chain.
#[derive(Debug, PartialEq, Eq)]
enum Closed {
    Final(CheckpointHash),
    Voided,
}

/// Our checkpoint of a round whose commit is in flight.
struct Pending {
    round: u32,
    hash: CheckpointHash,
    commit: JoinHandle<Result<(), String>>,
}

/// Everything a running member holds.
struct Trainer<'a> {
    a: &'a RunArgs,
    rt: Runtime,
    chain: Chain,
    signer: Signer,
    client: Client,
    store: Store,
    recipe: Recipe,
    pool: u32,
    spec_rounds: u32,
    inner_steps: u32,
    me: u32,
    worker: TchInnerTrainer,
    members: Vec<MemberInfo>,
    metrics: Metrics,
    tokens: u64,
    /// (tokens, validation loss) of every round this process evaluated, for `loss.png`.
    curve: Vec<(f64, f64)>,
}

/// `synod-trainer run`.
pub fn run(a: &RunArgs) -> Result<()> {
    let rt = runtime()?;
    let recipe = Recipe::load(&a.recipe)?;
    let (chain, signer) = rt.block_on(connect(&a.chain))?;
    let info = rt.block_on(chain.pool(a.pool))?.ok_or_else(|| anyhow!("pool {} does not exist", a.pool))?;
    let events = rt.block_on(chain.follow())?;
    rt.spawn(log_chain_events(events, a.pool));
    recipe.check(&info.spec, &a.recipe)?;
    std::fs::create_dir_all(&a.base_path).with_context(|| format!("creating {}", a.base_path.display()))?;
    let store = Store::open(&a.base_path.join("checkpoints"))?;
    store.put(&recipe.theta0_bytes)?;

    let seed = identity_seed(&a.base_path.join("identity.key"))?;
    let keypair = Keypair::ed25519_from_bytes(seed).map_err(|e| anyhow!("identity: {e}"))?;
    let member_key = Arc::new(MemberKey::from_seed(seed));
    let peer_id = keypair.public().to_peer_id();
    let (me, from_round, resumed) = rt.block_on(register(&chain, &signer, a, &peer_id, &member_key))?;

    let own = Member { index: me, peer_id, key: member_key.public() };
    let mut cfg = NetConfig::new(keypair, member_key, me, MemberSet::new(u64::from(a.pool), vec![own]));
    cfg.listen = vec![a.listen.parse().context("--listen")?];
    cfg.bootnodes = a.bootnode.iter().map(|b| b.parse::<Multiaddr>().with_context(|| format!("--bootnode {b}"))).collect::<Result<_>>()?;
    let client = rt.block_on(async { spawn(cfg) })?;
    rt.block_on(async {
        client.set_passive(true).await?;
        client.serve_checkpoint(Arc::new(recipe.theta0_bytes.clone())).await
    })?;
    let addrs = rt.block_on(client.listen_addrs());

    let mut metrics = Metrics::appending(&a.base_path.join("metrics.jsonl"))?;
    metrics.emit(&serde_json::json!({
        "event": "joined", "pool": a.pool, "member": me, "from_round": from_round, "resumed": resumed,
        "account": account_of(&signer).to_string(), "peer_id": peer_id.to_string(),
        "listen": addrs.iter().map(ToString::to_string).collect::<Vec<_>>(),
    }))?;

    let pool = a.pool;
    let started = rt.block_on(chain.wait_for("the pool to start training", Duration::from_secs(3600), || async {
        Ok(chain.pool(pool).await?.filter(|p| p.status != PoolStatus::Open))
    }))?;
    let total_steps = started.spec.rounds.saturating_mul(started.spec.inner_steps);
    let worker = recipe.setup.replica(&a.recipe.model, me, started.spec.inner_steps, total_steps)?;
    let mut t = Trainer {
        a,
        rt,
        chain,
        signer,
        client,
        store,
        recipe,
        pool,
        spec_rounds: started.spec.rounds,
        inner_steps: started.spec.inner_steps,
        me,
        worker,
        members: Vec::new(),
        metrics,
        tokens: 0,
        curve: Vec::new(),
    };
    let last = t.train(from_round, resumed)?;
    t.finish(last)
}

/// Logs the pool's on-chain events as finalized blocks arrive.
async fn log_chain_events(mut rx: tokio::sync::mpsc::Receiver<Result<FinalizedBlock, ChainError>>, pool: u32) {
    while let Some(b) = rx.recv().await {
        match b {
            Ok(b) => {
                for e in b.events.iter().filter(|e| e.pool() == pool) {
                    tracing::info!(block = b.number, "chain: {e:?}");
                }
            }
            Err(e) => {
                tracing::warn!("finalized-block subscription ended: {e}");
                break;
            }
        }
    }
}

/// Registers in the pool (bonding first if needed) or finds our registration; returns
/// (member index, first round, whether we were already a member).
async fn register(chain: &Chain, signer: &Signer, a: &RunArgs, peer_id: &PeerId, key: &MemberKey) -> Result<(u32, u32, bool)> {
    let who = account_of(signer);
    if let Some(rec) = chain.member(a.pool, &who).await? {
        if rec.peer_id != peer_id.to_bytes() {
            bail!("{who} is member {} of pool {} with another peer id; run with the --base-path that holds its identity.key", rec.index, a.pool);
        }
        tracing::info!(member = rec.index, "already a member of pool {}: resuming", a.pool);
        return Ok((rec.index, rec.from_round, true));
    }
    ensure_bonded(chain, signer, planck(a.stake)).await?;
    chain.submit(&calls::join_pool(a.pool, planck(a.stake), peer_id.to_bytes(), &key.public().0)?, signer).await?;
    let rec = chain.member(a.pool, &who).await?.ok_or_else(|| anyhow!("join_pool succeeded but {who} is not a member"))?;
    tracing::info!(member = rec.index, from_round = rec.from_round, "joined pool {}", a.pool);
    Ok((rec.index, rec.from_round, false))
}

#[derive(Serialize)]
struct Event<'a> {
    event: &'a str,
    round: u32,
    hash: String,
    detail: String,
}

impl Trainer<'_> {
    fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    fn pool_info(&self) -> Result<PoolInfo> {
        self.block_on(self.chain.pool(self.pool))?.ok_or_else(|| anyhow!("pool {} disappeared", self.pool))
    }

    /// Reads the members and gives the network the set allowed in `round`.
    fn refresh_members(&mut self, round: u32) -> Result<()> {
        self.members = self.block_on(self.chain.members(self.pool))?;
        let mut set = Vec::new();
        for m in self.members.iter().filter(|m| m.record.from_round <= round) {
            match PeerId::from_bytes(&m.record.peer_id) {
                Ok(peer_id) => set.push(Member { index: m.record.index, peer_id, key: PublicKey(m.record.ml_dsa_key.clone()) }),
                Err(e) => tracing::warn!(member = m.record.index, "unusable on-chain peer id: {e}"),
            }
        }
        self.block_on(self.client.set_members(MemberSet::new(u64::from(self.pool), set)))?;
        Ok(())
    }

    fn peers(&self) -> Vec<PeerId> {
        self.members.iter().filter(|m| m.record.index != self.me).filter_map(|m| PeerId::from_bytes(&m.record.peer_id).ok()).collect()
    }

    /// The last final checkpoint (round 0: θ₀).
    fn last_final(&self) -> Result<(u32, CheckpointHash)> {
        Ok(self.block_on(self.chain.last_final(self.pool))?.unwrap_or((0, self.recipe.theta0_hash)))
    }

    /// Outer state from the checkpoint `hash` (local or fetched), numbered as after `round`.
    fn load(&mut self, hash: CheckpointHash, round: u32) -> Result<OuterState> {
        let local = self.store.get(&hash).is_some();
        let peers = self.peers();
        let bytes = self.block_on(self.store.get_or_fetch(&self.client, &peers, hash, Duration::from_secs(300)))?;
        let set = synod_checkpoint::from_bytes(&bytes)?;
        let r = &self.a.recipe;
        self.metrics.emit(&Event { event: "synced", round, hash: synod_checkpoint::hex(&hash), detail: if local { "local file" } else { "fetched from a peer" }.into() })?;
        Ok(OuterState::from_checkpoint(set, r.outer_lr, r.outer_momentum, round)?)
    }

    /// The state to train the next round from, or `None` if the pool is over. Leaves the
    /// network node active, with its heartbeats naming the round we will contribute to.
    fn catch_up(&mut self, from_round: u32, resumed: bool) -> Result<Option<OuterState>> {
        loop {
            let p = self.pool_info()?;
            if matches!(p.status, PoolStatus::Completed | PoolStatus::Cancelled) {
                return Ok(None);
            }
            let c = p.current_round;
            if c < from_round {
                self.wait_round_past(from_round.saturating_sub(1))?;
                continue;
            }
            self.refresh_members(c)?;
            // A resumed member whose peers already announced round c (or c + 1) joins the round
            // after the last one announced. Its heartbeats name that round, so peers still
            // gathering an earlier round do not wait for it, and peers in that round do.
            let target = match resumed.then(|| self.announced_max(c)).transpose()?.flatten() {
                Some(a) => a.max(c) + 1,
                None => c,
            };
            if target > self.spec_rounds {
                self.wait_round_past(self.spec_rounds)?;
                return Ok(None);
            }
            self.block_on(async {
                self.client.set_round(target).await?;
                self.client.set_passive(false).await
            })?;
            if target > c {
                tracing::info!(round = target, "peers are already exchanging round {}; joining round {target}", target - 1);
                self.wait_round_past(target - 1)?;
            }
            let (_, hash) = self.last_final()?;
            return Ok(Some(self.load(hash, target - 1)?));
        }
    }

    /// The highest round ≥ `c` another member has announced a payload for, after listening
    /// for one heartbeat period.
    fn announced_max(&self, c: u32) -> Result<Option<u32>> {
        self.block_on(async {
            self.client.set_round(c).await?;
            let start = Instant::now();
            while self.client.snapshot().connected.is_empty() && start.elapsed() < Duration::from_secs(10) {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            // Heartbeats come every 2 s and repeat the current and previous round's announcement.
            tokio::time::sleep(Duration::from_secs(3)).await;
            Ok::<_, anyhow::Error>(self.client.snapshot().announced.keys().filter(|(r, m)| *r >= c && *m != self.me).map(|(r, _)| *r).max())
        })
    }

    /// Waits until the chain's current round is past `round` (or the pool is over).
    fn wait_round_past(&self, round: u32) -> Result<()> {
        let (chain, pool) = (&self.chain, self.pool);
        self.block_on(chain.wait_for("the round to close", Duration::from_secs(3600), || async {
            let p = chain.pool(pool).await?;
            Ok(p.filter(|p| p.current_round > round || p.status != PoolStatus::Training).map(|_| ()))
        }))?;
        Ok(())
    }

    /// Waits for our commit of `p` to be processed and for the round to close on-chain.
    fn settle(&mut self, p: Pending) -> Result<Closed> {
        match self.block_on(p.commit) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(round = p.round, "commit failed: {e}"),
            Err(e) => tracing::warn!(round = p.round, "commit task failed: {e}"),
        }
        let (chain, pool, round) = (&self.chain, self.pool, p.round);
        let closed = self.block_on(chain.wait_for("the round to close", Duration::from_secs(3600), || async {
            if let Some(f) = chain.final_checkpoint(pool, round).await? {
                return Ok(Some(Closed::Final(f.hash)));
            }
            Ok(chain.voided(pool, round).await?.then_some(Closed::Voided))
        }))?;
        let detail = match &closed {
            Closed::Final(h) if *h == p.hash => "final: our checkpoint".to_string(),
            Closed::Final(h) => format!("final at {} (ours lost the vote)", synod_checkpoint::hex(h)),
            Closed::Voided => "voided".to_string(),
        };
        self.metrics.emit(&Event { event: "closed", round, hash: synod_checkpoint::hex(&p.hash), detail })?;
        if closed != Closed::Final(p.hash) {
            self.store.remove(&p.hash);
        }
        Ok(closed)
    }

    /// Evaluates θ and emits the round's record.
    fn record(&mut self, state: &OuterState, r: RoundRecord) -> Result<()> {
        load_params(&self.worker.vs, &state.params)?;
        let val_loss = eval_loss(&self.worker.model, &self.worker.plan, self.a.recipe.model.eval_batches, self.recipe.setup.device)?;
        self.curve.push((r.tokens as f64, val_loss));
        self.metrics.emit(&RoundRecord { val_loss, ..r })
    }

    fn blank(&self, round: u32) -> RoundRecord {
        RoundRecord {
            event: "round",
            method: "diloco",
            round,
            tokens: self.tokens,
            val_loss: f64::NAN,
            train_loss: f64::NAN,
            bytes_sent_per_worker: 0,
            checkpoint_hash: None,
            included: Vec::new(),
            compute_secs: 0.0,
            outer_secs: 0.0,
            exchange_secs: 0.0,
            excluded: Vec::new(),
        }
    }

    /// Trains until the pool's last round; returns the last round we computed.
    fn train(&mut self, from_round: u32, resumed: bool) -> Result<u32> {
        let Some(mut state) = self.catch_up(from_round, resumed)? else { return Ok(0) };
        if state.round == 0 {
            let r0 = self.blank(0);
            self.record(&state, RoundRecord { checkpoint_hash: Some(synod_checkpoint::hex(&self.recipe.theta0_hash)), ..r0 })?;
        }
        let codec = self.a.recipe.codec.options();
        let xcfg = ExchangeConfig { deadline: Duration::from_secs(self.a.round_deadline), ..ExchangeConfig::default() };
        let batch_tokens = (self.recipe.setup.plan.batch * self.recipe.setup.plan.seq_len) as u64;
        let mut pending: Option<Pending> = None;
        let mut last = 0;
        while state.round < self.spec_rounds {
            let r = state.round + 1;
            self.refresh_members(r)?;
            let (mine, report) = state.contribute(&mut self.worker, self.me, &codec)?;
            if let Some(p) = pending.take() {
                let ours = p.hash;
                match self.settle(p)? {
                    Closed::Final(h) if h == ours => {}
                    _ => {
                        let (_, hash) = self.last_final()?;
                        state = self.load(hash, r - 1)?;
                        continue;
                    }
                }
            }
            let payload_bytes = mine.payload.len() as u64;
            let ex = self.block_on(all_gather(&self.client, r, mine.payload, xcfg))?;
            let t_outer = Instant::now();
            let outcome = state.apply(&ex.included, &Mean)?;
            self.store.put(&outcome.checkpoint)?;
            self.block_on(self.client.serve_checkpoint(Arc::new(outcome.checkpoint)))?;
            let outer_secs = t_outer.elapsed().as_secs_f64();
            self.tokens += outcome.included.len() as u64 * u64::from(self.inner_steps) * batch_tokens;
            let rec = RoundRecord {
                train_loss: report.mean_loss,
                bytes_sent_per_worker: payload_bytes,
                checkpoint_hash: Some(synod_checkpoint::hex(&outcome.hash)),
                included: outcome.included.clone(),
                compute_secs: report.secs,
                outer_secs,
                exchange_secs: ex.secs,
                excluded: ex.excluded,
                ..self.blank(r)
            };
            self.record(&state, rec)?;
            let (chain, signer, pool, hash, included) = (self.chain.clone(), self.signer.clone(), self.pool, outcome.hash, outcome.included);
            let commit = self.rt.spawn(async move {
                match chain.submit(&calls::commit_checkpoint(pool, r, hash, included), &signer).await {
                    Ok(_) => Ok(()),
                    Err(e) if e.is_module("Checkpoints", "AlreadyCommitted") => Ok(()),
                    Err(e) => Err(e.to_string()),
                }
            });
            pending = Some(Pending { round: r, hash: outcome.hash, commit });
            last = r;
        }
        if let Some(p) = pending.take() {
            if let Closed::Final(h) = self.settle(p)? {
                // Keep the final file even if ours lost the vote.
                let peers = self.peers();
                self.block_on(self.store.get_or_fetch(&self.client, &peers, h, Duration::from_secs(300)))?;
            }
        }
        Ok(last)
    }

    /// Waits for the pool to complete, then serves until live peers have our last payload.
    fn finish(self, last: u32) -> Result<()> {
        let (chain, pool) = (&self.chain, self.pool);
        let p = self.block_on(chain.wait_for("the pool to complete", Duration::from_secs(3600), || async {
            Ok(chain.pool(pool).await?.filter(|p| p.status != PoolStatus::Training))
        }))?;
        let (f, h) = self.last_final()?;
        if !self.curve.is_empty() {
            let label = format!("member {} of pool {pool}, H={}", self.me, self.inner_steps);
            let png = self.a.base_path.join("loss.png");
            loss_vs_tokens(&png, "synod-trainer run: validation loss", &[Curve { label: &label, points: &self.curve }])?;
        }
        let mut metrics = self.metrics;
        metrics.emit(&serde_json::json!({
            "event": "done", "pool": pool, "status": format!("{:?}", p.status), "last_round_trained": last,
            "last_final_round": f, "final_checkpoint": synod_checkpoint::hex(&h),
            "final_checkpoint_file": self.store.path(&h),
        }))?;
        let client = self.client;
        self.rt.block_on(async {
            let start = Instant::now();
            let dead_after = ExchangeConfig::default().dead_after;
            while start.elapsed() < Duration::from_secs(30) {
                let snap = client.snapshot();
                let members = client.members();
                let pending = members.iter().any(|m| {
                    m.index != client.me
                        && !snap.announced.contains_key(&(last, m.index))
                        && !snap.left.contains(&m.index)
                        && snap.last_seen.get(&m.index).is_some_and(|t| t.elapsed() < dead_after)
                });
                if !pending {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            tokio::time::sleep(Duration::from_secs(3)).await;
            let _ = client.leave().await;
            tokio::time::sleep(Duration::from_millis(300)).await;
            client.shutdown().await;
        });
        Ok(())
    }
}
