//! Networked mode: this process is one member of a pool and exchanges pseudo-gradients with
//! the others over `/synod/pseudograd/2` (synod-p2p).
//!
//! Without a chain, membership comes from a registration directory (`--pool-dir`): every
//! member writes `member-<i>.json` (index, libp2p peer id, ML-DSA-65 public key, listen
//! addresses) and waits for all `--members` registrations, what `join_pool` records on-chain
//! for a pool member (`synod-trainer run`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use synod_checkpoint::ParamSet;
use synod_diloco::{Contribution, DilocoError, Exchange};
use synod_p2p::libp2p_identity::Keypair;
use synod_p2p::{
    all_gather, spawn, Client, ExchangeConfig, Member, MemberKey, MemberSet, Multiaddr, NetConfig,
    PeerId, PublicKey,
};

use crate::args::TrainArgs;

/// A member's registration (the on-chain `join_pool` stand-in).
#[derive(Serialize, Deserialize)]
struct Registration {
    index: u32,
    peer_id: String,
    public_key: String,
    addrs: Vec<String>,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Result<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        bail!("odd-length hex");
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|e| anyhow!("bad hex: {e}")))
        .collect()
}

/// Loads or creates the 32-byte identity seed at `path` (both keys derive from it).
pub fn identity_seed(path: &Path) -> Result<[u8; 32]> {
    if let Ok(s) = std::fs::read_to_string(path) {
        let v = unhex(s.trim())?;
        return v
            .try_into()
            .map_err(|_| anyhow!("{} must hold 32 hex bytes", path.display()));
    }
    // A fresh seed from the OS generator (via ml-dsa key generation).
    let seed = MemberKey::generate().seed();
    std::fs::write(path, hex(&seed))?;
    Ok(seed)
}

/// The networked exchange of one member, usable as a [`synod_diloco::Exchange`].
pub struct NetExchange {
    rt: tokio::runtime::Runtime,
    client: Client,
    cfg: ExchangeConfig,
    /// This member's index.
    pub me: u32,
    /// Bytes of our last payload.
    pub last_payload_bytes: usize,
    /// Seconds of the last exchange.
    pub last_secs: f64,
    /// Members left out of the last exchange, with the reason.
    pub last_excluded: Vec<(u32, String)>,
}

impl Exchange for NetExchange {
    fn exchange(
        &mut self,
        round: u32,
        _me: u32,
        payload: Arc<Vec<u8>>,
    ) -> Result<Vec<Contribution>, DilocoError> {
        self.last_payload_bytes = payload.len();
        let out = self
            .rt
            .block_on(all_gather(&self.client, round, payload, self.cfg))
            .map_err(|e| DilocoError::Exchange(e.to_string()))?;
        self.last_secs = out.secs;
        self.last_excluded = out.excluded;
        Ok(contributions(&out.included))
    }
}

/// The exchange's included payloads as DiLoCo contributions (the bytes are shared, not copied).
pub(crate) fn contributions(included: &[synod_p2p::Gathered]) -> Vec<Contribution> {
    included
        .iter()
        .map(|g| Contribution {
            member: g.member,
            payload: g.payload.clone(),
        })
        .collect()
}

impl NetExchange {
    /// Serves a round's checkpoint to late joiners over `/synod/checkpoint/2`.
    pub fn serve_checkpoint(&self, bytes: Vec<u8>) {
        if let Err(e) = self
            .rt
            .block_on(self.client.serve_checkpoint(Arc::new(bytes)))
        {
            tracing::warn!("cannot serve checkpoint: {e}");
        }
    }

    /// After the last round: keeps serving until every live member has announced its final
    /// payload (so it is fetching ours), lingers 3 s, then says goodbye.
    pub fn finish(&self, last_round: u32) {
        self.rt.block_on(synod_p2p::finish(
            &self.client,
            last_round,
            self.cfg.dead_after,
            Duration::from_secs(60),
        ));
    }
}

fn read_registrations(dir: &Path, n: u32) -> Result<Option<Vec<Registration>>> {
    let mut regs = Vec::new();
    for i in 0..n {
        let p = dir.join(format!("member-{i}.json"));
        match std::fs::read(&p) {
            Ok(b) => regs.push(
                serde_json::from_slice::<Registration>(&b)
                    .with_context(|| format!("parsing {}", p.display()))?,
            ),
            Err(_) => return Ok(None),
        }
    }
    Ok(Some(regs))
}

/// Starts the node, registers in the pool directory, waits for all members and connects.
pub fn join(a: &TrainArgs, theta0: &ParamSet) -> Result<NetExchange> {
    let me = a
        .net
        .member
        .ok_or_else(|| anyhow!("--member is required in networked mode"))?;
    let dir: PathBuf = a
        .net
        .pool_dir
        .clone()
        .ok_or_else(|| anyhow!("--pool-dir is required with --member"))?;
    if me >= a.net.members {
        bail!("--member {me} is not below --members {}", a.net.members);
    }
    std::fs::create_dir_all(&dir)?;
    std::fs::create_dir_all(&a.out)?;
    let seed = identity_seed(&a.out.join("identity.key"))?;
    let keypair = Keypair::ed25519_from_bytes(seed).map_err(|e| anyhow!("identity: {e}"))?;
    let member_key = Arc::new(MemberKey::from_seed(seed));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let theta_hash = synod_checkpoint::hex(&synod_checkpoint::hash(&synod_checkpoint::to_bytes(
        theta0,
    )?));
    tracing::info!(member = me, theta0 = %theta_hash, "joining pool");

    let placeholder = MemberSet::new(
        0,
        vec![Member {
            index: me,
            peer_id: keypair.public().to_peer_id(),
            key: member_key.public(),
        }],
    );
    let mut cfg = NetConfig::new(keypair.clone(), member_key.clone(), me, placeholder);
    cfg.listen = vec![a.net.listen.parse().context("--listen")?];
    let client = rt.block_on(async { spawn(cfg) })?;
    let addrs = rt.block_on(client.listen_addrs());
    let reg = Registration {
        index: me,
        peer_id: client.peer_id.to_string(),
        public_key: hex(&member_key.public().0),
        addrs: addrs.iter().map(ToString::to_string).collect(),
    };
    let tmp = dir.join(format!(".member-{me}.json.tmp"));
    std::fs::write(&tmp, serde_json::to_vec(&reg)?)?;
    std::fs::rename(&tmp, dir.join(format!("member-{me}.json")))?;

    let start = Instant::now();
    let regs = loop {
        if let Some(r) = read_registrations(&dir, a.net.members)? {
            break r;
        }
        if start.elapsed() > Duration::from_secs(300) {
            bail!(
                "timed out waiting for {} members in {}",
                a.net.members,
                dir.display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut members = Vec::new();
    for r in &regs {
        members.push(Member {
            index: r.index,
            peer_id: r.peer_id.parse::<PeerId>()?,
            key: PublicKey(unhex(&r.public_key)?),
        });
    }
    // The pool topic is per pool id; the registration directory is one pool.
    let set = MemberSet::new(0, members);
    rt.block_on(async {
        client.set_members(set).await?;
        for r in regs.iter().filter(|r| r.index != me) {
            for addr in &r.addrs {
                if let Ok(m) = addr.parse::<Multiaddr>() {
                    client.dial(m).await?;
                }
            }
        }
        Ok::<_, synod_p2p::NetError>(())
    })?;
    // No chain fixes an agreed set here: a member left out by some and not by others would
    // split θ for good, so a live member's announcement is awaited until the deadline.
    let deadline = Duration::from_secs(a.net.round_deadline);
    let cfg = ExchangeConfig {
        deadline,
        announce_grace: deadline,
        ..ExchangeConfig::default()
    };
    Ok(NetExchange {
        rt,
        client,
        cfg,
        me,
        last_payload_bytes: 0,
        last_secs: 0.0,
        last_excluded: Vec::new(),
    })
}
