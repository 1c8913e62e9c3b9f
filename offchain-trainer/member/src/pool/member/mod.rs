//! `synod-trainer run`: one member of an on-chain pool, following `docs/architecture.md` round by round.
//! [`run`] joins the pool, follows the chain and starts the network whatever the pool's kind,
//! then hands the member to its kind's [`PoolProgram`] ([`program`]); the one kind is DiLoCo
//! ([`diloco`]), whose member does the following.
//!
//! * **Join**: bond if needed, `join_pool` with the libp2p peer id and ML-DSA-65 key derived
//!   from `<base>/identity.key` and the peer-id key's proof (`synod_protocol::peer`); an
//!   existing registration with the same peer id is resumed.
//! * **Catch up** (passive on the network until it knows its round, so nobody waits for it):
//!   the first round to train is the chain's current round, or for a restarted member whose
//!   peers already announced that round, the round after; its parent θ is the last final
//!   checkpoint, read from `<base>/checkpoints/` or fetched from peers and checked against the
//!   on-chain blake3. Final rounds are never recomputed.
//! * **Round r** (one driver, [`rounds`]): exchange round r's payload, aggregate, outer step,
//!   store and serve θ_r and commit its hash; round r+1's inner phase then runs on its own
//!   thread while round r settles on-chain — from our θ_r (optimistic: it may not be final
//!   yet) or, with overlapped rounds, from θ_{r−1}. If our θ_r lost the vote or the round was
//!   voided, the optimistic phase is discarded and redone from the final checkpoint, so a
//!   wrong payload is never announced. If the members' included
//!   sets split (a member withheld its payload from some, or announced it late) and the chain
//!   fixes another set than ours, fetch what we lack, aggregate that set and commit once more
//!   ([`agreed`]).
//! * **Trace** (during the inner phase): our full state at each of ≤ 16 segment boundaries
//!   is kept with the round's evidence and served by its blake3; the hashes go in front of
//!   our payload (Proof-of-Learning segments, `synod_diloco::trace`).
//! * **Verify** (on the duty worker's thread, beside the rounds, [`duty`]): keep the included
//!   set's payloads and signed announcements (`<base>/evidence/pool-<id>/`); as soon as a
//!   round is final, check a sample of the other members of its included set by their traces (start, end and
//!   drawn segments, states fetched from the accused), challenge at once any whose start or
//!   end fails (its payload is not its trace's end), replay whole any other that fails or
//!   serves nothing, and challenge on-chain at once any whose whole replay is outside the
//!   tolerance;
//!   as a juror (unless `MemberConfig::juror` is off), replay disputed contributions whole and vote.
//! * **End**: when the pool completes, keep verifying and judging until the last round can no
//!   longer be challenged, write `<base>/loss.png` and keep serving until live peers have our
//!   last payload.

mod agreed;
mod appeal;
mod catch_up;
mod commit;
mod ctx;
mod diloco;
mod duty;
mod exchange_set;
mod fault;
mod follow;
mod join;
mod program;
mod rounds;
mod settle;
mod watch;

use ctx::Ctx;
use follow::{follow_chain, PoolRounds};
use join::{identity_seed, register};
use program::{Joined, PoolProgram};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use synod_chain::submit::account_of;
use synod_chain::types::{MemberInfo, PoolKind, PoolStatus, UnsupportedKind};
use synod_checkpoint::CheckpointHash;
use synod_diloco::{OuterState, Stakes};
use synod_model::{eval_loss, load_params, TchInnerTrainer};
use synod_p2p::libp2p_identity::Keypair;
use synod_p2p::{spawn, Member, MemberKey, MemberSet, NetConfig, PeerId, PublicKey};
use tokio::runtime::Runtime;

use super::store::Store;
use super::{connect, runtime, terms};
use crate::config::MemberConfig;
use crate::event::TrainerEvent;
use crate::metrics::Metrics;
use crate::prometheus::Exporter;
use crate::train::RoundRecord;

/// Where a member of `pool` keeps its evidence: `<base>/evidence/pool-<pool>/`.
pub(crate) fn evidence_dir(base: &std::path::Path, pool: u32) -> std::path::PathBuf {
    base.join("evidence").join(format!("pool-{pool}"))
}

/// Everything a running member's training thread holds.
struct Trainer {
    ctx: Ctx,
    /// Our inner trainer; `None` while an overlapped round's inner phase holds it.
    worker: Option<TchInnerTrainer>,
    members: Vec<MemberInfo>,
    metrics: Metrics,
    /// The duty worker: verification, challenges, jury duty and equivocation reports, on
    /// their own thread beside the rounds ([`duty`]).
    duties: duty::DutyHandle,
    tokens: u64,
    /// (tokens, validation loss) of every round this process evaluated, for `loss.png`.
    curve: Vec<(f64, f64)>,
    /// Where the next round's wall clock starts: the end of the previous round's record.
    round_clock: std::time::Instant,
    /// The runtime `ctx.rt` is a handle of: dropped last (after the duty worker was told to
    /// stop, or, at the pool's end, has stopped).
    _rt: Runtime,
}

/// `synod-trainer run`: joins pool `a.pool` and runs the program of its kind
/// ([`PoolProgram`]; [`diloco::Diloco`] for DiLoCo pools, the one kind): join, follow the chain,
/// start the network, then the kind's rounds and duties.
///
/// # Errors
/// The chain cannot be reached; the pool does not exist, or is of a kind this trainer does not
/// run ([`UnsupportedKind`]); a fault injected on a chain that is not a development or local
/// one; what joining or the program returns.
pub fn run(a: &MemberConfig) -> Result<()> {
    let rt = runtime()?;
    let (chain, signer) = rt.block_on(connect(&a.chain))?;
    if let Some(fault) = a.fault {
        let kind = rt.block_on(chain.chain_type())?;
        if kind != "Development" && kind != "Local" {
            bail!("--fault {fault:?} is for tests: refused on a {kind} chain");
        }
        tracing::warn!("fault injection: this trainer announces {fault:?} pseudo-gradients");
    }
    let info = rt
        .block_on(chain.pool(a.pool))?
        .ok_or_else(|| anyhow!("pool {} does not exist", a.pool))?;
    match &info.spec.kind {
        PoolKind::DiLoCo(_) => member::<diloco::Diloco>(a, rt, chain, signer, info),
        PoolKind::Unknown(name) => Err(UnsupportedKind(name.clone()).into()),
    }
}

/// Joins pool `info` (of program `P`'s kind) as a member and hands it to `P` once the pool
/// trains: what every kind does.
fn member<P: PoolProgram>(
    a: &MemberConfig,
    rt: Runtime,
    chain: synod_chain::Chain,
    signer: synod_chain::Signer,
    info: synod_chain::types::PoolInfo,
) -> Result<()> {
    let exporter = match a.prometheus {
        Some(addr) => {
            let e = Exporter::new()?;
            e.serve(&rt, addr);
            Some(e)
        }
        None => None,
    };
    let events = rt.block_on(chain.follow())?;
    // What that one subscription sees drives the waits for the chain (`watch.rs`).
    let (ticks, watch) = watch::ChainWatch::new();
    // Finalized blocks wake the duty worker (started once the pool trains).
    let (duty_tx, duty_rx) = std::sync::mpsc::channel();
    // Rulings against us are appealed from their event (and from the duty worker's passes).
    let account = account_of(&signer);
    let on_chain = appeal::OnChain {
        chain: chain.clone(),
        signer: signer.clone(),
    };
    let appealer = appeal::Appealer::new(on_chain, account, a.pool, a.fault.is_some());
    // The pool's rounds, stepped on the chain's own timeline (`follow.rs`).
    let timeline = rt.block_on(chain.timeline(&info.spec.terms))?;
    rt.spawn(follow_chain(
        events,
        PoolRounds::new(a.pool, timeline),
        ticks,
        exporter.clone(),
        duty_tx.clone(),
        appealer.clone(),
    ));
    let program = P::prepare(&rt, &chain, &signer, a, &info.spec)?;
    std::fs::create_dir_all(&a.base_path)
        .with_context(|| format!("creating {}", a.base_path.display()))?;
    let store = Store::open(
        &a.base_path.join("checkpoints"),
        program.max_checkpoint_bytes(),
    )?;
    store.put(program.initial_checkpoint())?;

    let seed = identity_seed(&a.base_path.join("identity.key"))?;
    let keypair = Keypair::ed25519_from_bytes(seed).map_err(|e| anyhow!("identity: {e}"))?;
    let member_key = Arc::new(MemberKey::from_seed(seed));
    let peer_id = keypair.public().to_peer_id();
    let (me, from_round, resumed, stake) =
        rt.block_on(register(&chain, &signer, a, &keypair, &member_key))?;
    rt.block_on(join::set_jury_duty(&chain, &signer, a.juror))?;
    rt.block_on(join::warn_without_dispute_reserve(&chain, &account));

    let own = Member {
        index: me,
        peer_id,
        key: member_key.public(),
    };
    let mut cfg = NetConfig::new(
        keypair,
        member_key,
        me,
        MemberSet::new(u64::from(a.pool), vec![own]),
    );
    cfg.listen = vec![a.listen.clone()];
    cfg.public_addrs = a.public_addr.clone();
    cfg.limits = synod_p2p::Limits {
        stall: a.transfer_stall,
        min_rate: a.min_transfer_rate,
    };
    cfg.bootnodes = a.bootnode.clone();
    // Relays caught serving garbage stay distrusted across restarts of this base path.
    cfg.distrust_file = Some(a.base_path.join("distrusted-relays"));
    let cap = a.max_upload_mbit.map(|m| m * 1e6 / 8.0);
    cfg.max_upload = cap.map(|bytes_per_sec| bytes_per_sec as u64);
    let upload = cap.map_or(a.link_bytes_per_sec, |c| c.min(a.link_bytes_per_sec));
    let needed = terms::evidence_capacity(info.spec.terms.max_trainers, &cfg.limits);
    if upload < needed {
        tracing::warn!(
            upload_mbit = upload * 8e-6,
            needed_mbit = needed * 8e-6,
            "this member's upload may not answer every juror while other members download \
             from it (raise --bandwidth-mbit, --max-upload-mbit or --transfer-stall, or lower \
             --min-transfer-rate): its evidence could then look withheld"
        );
    }
    let client = rt.block_on(async { spawn(cfg) })?;
    rt.block_on(async {
        client.set_passive(true).await?;
        client
            .serve_checkpoint(Arc::new(program.initial_checkpoint().to_vec()))
            .await
    })?;
    let addrs = rt.block_on(client.listen_addrs());

    let metrics = Metrics::appending(&a.base_path.join("metrics.jsonl"))?.with_exporter(exporter);
    metrics.emit(&TrainerEvent::Joined {
        account: account.to_string(),
        from_round,
        listen: addrs.iter().map(ToString::to_string).collect(),
        member: me,
        peer_id: peer_id.to_string(),
        pool: a.pool,
        prometheus: a.prometheus.map(|addr| format!("http://{addr}/metrics")),
        resumed,
        stake: stake.to_string(),
    })?;

    let pool = a.pool;
    let started = rt.block_on(watch.wait_for(
        "the pool to start training",
        Duration::from_secs(3600),
        || async {
            Ok(chain
                .pool(pool)
                .await?
                .filter(|p| p.status != PoolStatus::Open))
        },
    ))?;
    let joined = Joined {
        rt,
        chain,
        signer,
        client,
        store,
        me,
        from_round,
        resumed,
        started,
        timeline,
        appealer,
        watch,
        metrics,
        duties: (duty_tx, duty_rx),
    };
    program.run(a, joined)
}

impl Trainer {
    /// Reads the members and gives the network the set whose payloads count in `round`:
    /// the chain's frozen snapshot of `round` once it is open, the current members with
    /// `from_round ≤ round` before (see [`exchange_set::exchange_set`]). Returns the set's
    /// stakes in planck by member index (snapshot weights; committed stakes before the round
    /// opens).
    fn refresh_members(&mut self, round: u32) -> Result<Stakes> {
        let (chain, pool) = (&self.ctx.chain, self.ctx.pool);
        let (members, snapshot) = self.ctx.block_on(async {
            Ok::<_, anyhow::Error>((
                chain.members(pool).await?,
                chain.round_snapshot(pool, round).await?,
            ))
        })?;
        let mut former = BTreeMap::new();
        if let Some(snapshot) = &snapshot {
            for index in exchange_set::former_indices(snapshot, &members) {
                if let Some(f) = self.ctx.block_on(chain.former_member(pool, index))? {
                    former.insert(index, f);
                }
            }
        }
        let registered = exchange_set::exchange_set(round, snapshot.as_deref(), &members, &former);
        let stakes: Stakes = match &snapshot {
            Some(s) => ctx::stakes_of(s),
            None => registered.iter().map(|m| (m.index, m.stake)).collect(),
        };
        let mut set = Vec::new();
        for m in registered {
            match PeerId::from_bytes(&m.peer_id) {
                Ok(peer_id) => set.push(Member {
                    index: m.index,
                    peer_id,
                    key: PublicKey(m.key),
                }),
                Err(e) => tracing::warn!(member = m.index, "unusable on-chain peer id: {e}"),
            }
        }
        self.members = members;
        self.ctx.block_on(
            self.ctx
                .client
                .set_members(MemberSet::new(u64::from(self.ctx.pool), set)),
        )?;
        Ok(stakes)
    }

    /// The aggregation weights of round `round`: its snapshot's stakes. A round not open yet
    /// (no snapshot written) is waited for, [`SNAPSHOT_WAIT_BLOCKS`] blocks at most: a commit
    /// counts only in the open round, and the stakes read before it opens (committed stakes,
    /// `before`) differ from the snapshot's whenever a member was slashed, unbonded or joined
    /// since, which changes every weight and so the checkpoint. `before` only when the
    /// snapshot cannot be read in that time.
    fn round_stakes(&self, round: u32, before: Stakes) -> Stakes {
        let wait = Duration::from_secs_f64(
            (self.ctx.block_secs * SNAPSHOT_WAIT_BLOCKS as f64).clamp(5.0, 600.0),
        );
        let read = self.ctx.block_on(self.ctx.watch.wait_for(
            "the round's snapshot",
            wait,
            || async {
                match self.ctx.snapshot_stakes(round).await {
                    Ok(stakes) => Ok(stakes),
                    Err(e) => {
                        // Read again at the next block.
                        tracing::debug!(round, "cannot read the round's snapshot: {e}");
                        Ok(None)
                    }
                }
            },
        ));
        match read {
            Ok(stakes) => stakes,
            Err(e) => {
                tracing::warn!(round, "aggregating with the stakes read before: {e}");
                before
            }
        }
    }

    /// The peer ids of the members other than us (as last read by
    /// [`Trainer::refresh_members`]).
    fn peers(&self) -> Vec<PeerId> {
        self.ctx.peers_in(&self.members)
    }

    /// Keeps the last final checkpoint `hash` served to members (re)joining the pool, whatever
    /// else we serve later (p2p serves a bounded number: `MAX_SERVED_CHECKPOINTS`); `bytes`, or
    /// the stored file, if it is not served yet.
    fn keep_serving_final(&self, hash: CheckpointHash, bytes: Option<&[u8]>) -> Result<()> {
        if self.ctx.block_on(self.ctx.client.pin_checkpoint(hash))? {
            return Ok(());
        }
        let Some(bytes) = bytes
            .map(<[u8]>::to_vec)
            .or_else(|| self.ctx.store.get(&hash))
        else {
            return Ok(());
        };
        self.ctx.block_on(async {
            self.ctx.client.serve_checkpoint(Arc::new(bytes)).await?;
            self.ctx.client.pin_checkpoint(hash).await
        })?;
        Ok(())
    }

    /// Outer state from the checkpoint `hash` (local or fetched), numbered as after `round`.
    fn load(&mut self, hash: CheckpointHash, round: u32) -> Result<OuterState> {
        let local = self.ctx.store.get(&hash).is_some();
        let peers = self.peers();
        let sp = (!local).then(|| {
            spinner(
                self.ctx.a.quiet,
                format!(
                    "catching up: fetching the checkpoint of round {round} ({}…)",
                    &synod_checkpoint::hex(&hash)[..12]
                ),
            )
        });
        let bytes = self.ctx.block_on(self.ctx.store.get_or_fetch(
            &self.ctx.client,
            &peers,
            hash,
            Duration::from_secs(300),
        ));
        if let Some(sp) = sp {
            sp.finish_and_clear();
        }
        let bytes = bytes?;
        self.keep_serving_final(hash, Some(&bytes))?;
        let state = self.ctx.recipe.restore(&bytes, round)?;
        self.metrics.emit(&TrainerEvent::Synced {
            round,
            hash: synod_checkpoint::hex(&hash),
            detail: if local {
                "local file"
            } else {
                "fetched from a peer"
            }
            .into(),
        })?;
        Ok(state)
    }

    /// Evaluates θ and emits the round's record. With `busy` (the inner-phase seconds that
    /// ran within the round), its wall clock is everything since the previous record
    /// (`round_clock`): the chain waits and this evaluation included. Restarts the
    /// clock for the next round.
    fn record(&mut self, state: &OuterState, r: RoundRecord, busy: Option<f64>) -> Result<()> {
        let t_eval = std::time::Instant::now();
        let worker = self
            .worker
            .as_ref()
            .ok_or_else(|| anyhow!("no inner trainer"))?;
        load_params(&worker.vs, &state.params)?;
        let val_loss = eval_loss(
            &worker.model,
            &worker.plan,
            self.ctx.a.recipe.eval_batches,
            self.ctx.recipe.setup.device,
        )?;
        self.curve.push((r.tokens as f64, val_loss));
        let mut r = RoundRecord {
            val_loss,
            eval_secs: t_eval.elapsed().as_secs_f64(),
            ..r
        };
        if let Some(busy) = busy {
            r = RoundRecord {
                duty_secs: self.duties.take_busy_secs(),
                ..r
            }
            .with_busy_wall(busy, self.round_clock.elapsed().as_secs_f64());
        }
        self.round_clock = std::time::Instant::now();
        self.metrics.emit(&r.event())
    }

    fn blank(&self, round: u32) -> RoundRecord {
        RoundRecord::diloco(round, self.tokens)
    }
}

/// A spinner with `what` on stderr until finished: drawn only when stderr is a terminal and
/// not `quiet`.
pub(super) fn spinner(quiet: bool, what: String) -> indicatif::ProgressBar {
    if quiet {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::new_spinner();
    pb.set_message(what);
    pb.enable_steady_tick(Duration::from_millis(120));
    pb
}

/// How many blocks [`Trainer::round_stakes`] waits for a round's snapshot.
const SNAPSHOT_WAIT_BLOCKS: u32 = 10;
