//! The swarm: a cloneable [`Client`] handle ([`client`]), a command channel and an
//! [`event_loop`] task (the shape of rust-libp2p's `file-sharing` example). Payloads and
//! checkpoints move on streams of their own ([`crate::protocol`], `libp2p-stream`): the event
//! loop only handles gossip ([`gossip`]), discovery and connections, and the objects served live
//! in a store ([`serve`]) that the serving tasks read directly.
//!
//! Files: `mod.rs` (configuration, the public types, [`spawn`]), `client.rs` (the handle and its
//! commands), `event_loop.rs` (commands, swarm events, dialling), `bootnodes.rs` (dialling the
//! bootnodes until connected), `gossip.rs` (signed heartbeats:
//! publishing, verifying, equivocation), `serve.rs` (what is served, admission, serving tasks),
//! `pending.rs` (admission of inbound handshakes by address).

mod bootnodes;
mod client;
mod event_loop;
mod gossip;
mod pending;
mod serve;
mod uplink;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use libp2p::swarm::NetworkBehaviour;
use libp2p::{
    allow_block_list, connection_limits, gossipsub, identify, identity, kad, noise, tcp, tls,
    yamux, Multiaddr, PeerId,
};
use tokio::sync::mpsc;

use crate::message::PayloadRef;
use crate::protocol::{Limits, CHECKPOINT_PROTOCOL, PSEUDOGRAD_PROTOCOL};
use crate::{MemberKey, MemberSet, NetError};

use event_loop::EventLoop;
use serve::{serve_incoming, Served};

pub use client::Client;
pub use gossip::EQUIVOCATION_ROUNDS;
pub use serve::{
    CONTENDED_PER_MEMBER, EVIDENCE_HOLD, EVIDENCE_PER_MEMBER, MAX_SERVED_CHECKPOINTS,
    MAX_SERVED_PER_PEER, MAX_SERVED_STREAMS, PINNED_CHECKPOINTS, RESERVED_PER_MEMBER,
};

/// Settings of one trainer's network node.
pub struct NetConfig {
    /// libp2p identity (its peer id is what `join_pool` registers).
    pub keypair: identity::Keypair,
    /// ML-DSA-65 key registered on-chain.
    pub member_key: Arc<MemberKey>,
    /// This trainer's member index.
    pub me: u32,
    /// Allowed members (from the chain).
    pub members: MemberSet,
    /// Addresses to listen on (e.g. `/ip4/127.0.0.1/tcp/0`, `/ip4/127.0.0.1/udp/0/quic-v1`).
    pub listen: Vec<Multiaddr>,
    /// Peers to dial at start and again while we are not connected to them, one dial of each
    /// at a time, backing off after failures (Kademlia bootstraps from them). An address ending
    /// in `/p2p/<peer id>` is checked to be that peer's (see `network/bootnodes.rs`).
    pub bootnodes: Vec<Multiaddr>,
    /// Addresses at which others reach this node that it does not listen on itself (a port
    /// forward, a NAT's public address): announced to peers with the listen addresses, and
    /// counted as its own when a peer proves it dialled one (`pending.rs`).
    pub public_addrs: Vec<Multiaddr>,
    /// Heartbeat period (Prime's ElasticDeviceMesh uses 2 s).
    pub heartbeat: Duration,
    /// Most established connections, and most inbound handshakes pending at once; peers that
    /// are not members of the pool hold at most a quarter of the connections, and addresses no
    /// member connected from a quarter of the handshakes (at least 4).
    pub max_connections: u32,
    /// Time bounds of every payload and checkpoint transfer, both directions.
    pub limits: Limits,
    /// The TCP connection encryption this node proposes first when it dials; it accepts both.
    pub security: Security,
    /// File that keeps the relays this node distrusts ([`Client::distrust_relay`]: one base58
    /// peer id per line), read at start and appended to, so that a restarted node does not
    /// ask them again; `None`: kept in memory only.
    pub distrust_file: Option<PathBuf>,
    /// Most bytes per second this node sends when serving, all transfers together (they share
    /// it piece by piece, first come first served: per transfer, where TCP shares a link per
    /// connection, so a peer with many transfers takes more of it than over TCP alone);
    /// `None`: as fast as the link goes.
    pub max_upload: Option<u64>,
}

/// Encryption of TCP connections (QUIC always uses TLS 1.3). A dialer proposes its preferred
/// one first and the other second (multistream-select); a listener accepts either, so nodes
/// with different preferences still connect.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Security {
    /// Noise XX with ChaCha20-Poly1305 (libp2p-noise).
    #[default]
    Noise,
    /// TLS 1.3 (libp2p-tls: rustls, AES-GCM where the CPU has AES instructions).
    Tls,
}

impl NetConfig {
    /// Defaults: 2 s heartbeat, 64 connections, TCP on an ephemeral loopback port.
    pub fn new(
        keypair: identity::Keypair,
        member_key: Arc<MemberKey>,
        me: u32,
        members: MemberSet,
    ) -> Self {
        Self {
            keypair,
            member_key,
            me,
            members,
            listen: vec!["/ip4/127.0.0.1/tcp/0"
                .parse()
                .unwrap_or_else(|_| Multiaddr::empty())],
            bootnodes: Vec::new(),
            public_addrs: Vec::new(),
            heartbeat: Duration::from_secs(2),
            max_connections: 64,
            limits: Limits::default(),
            security: Security::default(),
            distrust_file: None,
            max_upload: None,
        }
    }
}

/// The peer ids listed in `path` (one base58 peer id per line; a missing file lists none). A
/// line that is not a peer id is skipped with a warning: a damaged file costs at most the
/// distrust it recorded.
fn read_distrusted(path: &Path) -> HashSet<PeerId> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return HashSet::new(),
        Err(e) => {
            tracing::warn!("cannot read {}: {e}", path.display());
            return HashSet::new();
        }
    };
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .filter_map(|l| match l.parse::<PeerId>() {
            Ok(p) => Some(p),
            Err(e) => {
                tracing::warn!("{}: skipping {l:?}: {e}", path.display());
                None
            }
        })
        .collect()
}

#[derive(NetworkBehaviour)]
pub(super) struct Behaviour {
    blocked: allow_block_list::Behaviour<allow_block_list::BlockedPeers>,
    /// Inbound handshakes: outsider addresses hold at most [`outsider_limit`] of them.
    pending: pending::PendingInbound,
    limits: connection_limits::Behaviour,
    /// A second limit that the pool's members bypass ([`outsider_limit`]): peers that are
    /// not members cannot hold the connections members need.
    outsiders: connection_limits::Behaviour,
    identify: identify::Behaviour,
    kad: kad::Behaviour<kad::store::MemoryStore>,
    gossipsub: gossipsub::Behaviour,
    stream: libp2p_stream::Behaviour,
}

/// A verified announcement of a payload.
#[derive(Clone, Debug)]
pub struct Announced {
    /// The payload announced.
    pub payload: PayloadRef,
    /// The signed gossip message as received (SCALE `synod_protocol::evidence::Signed`,
    /// ≤ `MAX_MESSAGE_BYTES`): the evidence an on-chain challenge of that payload carries.
    pub signed: Arc<Vec<u8>>,
}

/// Two different payloads one member signed for one round, both as received (SCALE
/// `synod_protocol::evidence::Signed`): the proof `Challenges::report_equivocation` takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Equivocation {
    /// The announcement received first (the one this node kept).
    pub first: Arc<Vec<u8>>,
    /// The conflicting one.
    pub second: Arc<Vec<u8>>,
}

/// What the event loop has learned, readable through [`Client::snapshot`].
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Verified announcements: (round, member) → the first one received.
    pub announced: BTreeMap<(u32, u32), Announced>,
    /// The first announcement of (round, member) that conflicted with the one in
    /// [`Snapshot::announced`] (an equivocation): the payload the rest of the pool may have
    /// received first and aggregated, so a member that must aggregate another member's
    /// included set fetches either ([`Snapshot::announcements`]). Kept as long as `announced`.
    pub conflicting: BTreeMap<(u32, u32), Announced>,
    /// Last verified message time per member.
    pub last_seen: HashMap<u32, Instant>,
    /// Highest round each member's heartbeats have named (the round it is working on).
    pub round_of: HashMap<u32, u32>,
    /// Equivocations seen: (round, member) → the first two conflicting announcements. Taken
    /// by [`Client::take_equivocations`]; otherwise kept for [`EQUIVOCATION_ROUNDS`] rounds.
    pub equivocations: BTreeMap<(u32, u32), Equivocation>,
    /// Members that said they leave.
    pub left: HashSet<u32>,
    /// Members' peers banned for invalid messages, with the reason (peers outside the pool are
    /// blocked, not recorded: at most the latest 1 024 of them).
    pub banned: HashMap<PeerId, String>,
    /// Peers that served a payload body which did not hash to the digest we asked for: an
    /// honest peer answers a payload request only with bytes of the requested digest (else
    /// "not found"), so such a peer is never asked to relay a payload again
    /// ([`Client::distrust_relay`]). Its own payloads are still fetched from it.
    pub distrusted: HashSet<PeerId>,
    /// Our listen addresses.
    pub listen_addrs: Vec<Multiaddr>,
    /// Peers with an open connection.
    pub connected: HashSet<PeerId>,
}

impl Snapshot {
    /// The announcements of `member`'s payload for `round` we saw: the first one received,
    /// then, if it equivocated, the first conflicting one (at most two). Both are signed by
    /// the member, so either is its payload; which one an included set holds is known only
    /// to those who aggregated it.
    pub fn announcements(&self, round: u32, member: u32) -> Vec<&Announced> {
        let key = (round, member);
        self.announced
            .get(&key)
            .into_iter()
            .chain(self.conflicting.get(&key))
            .collect()
    }
}

/// Locks `m`, going on with the data of a poisoned lock (a panicked serving task leaves the
/// store consistent: every update is one statement).
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Most established connections of peers that are not members of the pool, of
/// `max_connections` in all: a quarter (at least 1). Members' connections count towards it
/// but are never refused by it, so at least three quarters stay for members.
pub(super) fn outsider_limit(max_connections: u32) -> u32 {
    (max_connections / 4).max(1)
}

fn behaviour(
    key: &identity::Keypair,
    max_connections: u32,
    topic: &gossipsub::IdentTopic,
    members: &MemberSet,
) -> Result<Behaviour, NetError> {
    let peer_id = key.public().to_peer_id();
    let gossipsub = gossip::behaviour(key, topic)?;
    let limits = connection_limits::ConnectionLimits::default()
        .with_max_established(Some(max_connections))
        .with_max_established_per_peer(Some(2));
    let mut outsiders = connection_limits::Behaviour::new(
        connection_limits::ConnectionLimits::default()
            .with_max_established(Some(outsider_limit(max_connections))),
    );
    for m in members.iter() {
        outsiders.bypass_peer_id(&m.peer_id);
    }
    Ok(Behaviour {
        blocked: allow_block_list::Behaviour::default(),
        pending: pending::PendingInbound::new(
            max_connections,
            outsider_limit(max_connections),
            members.iter().map(|m| m.peer_id),
        ),
        limits: connection_limits::Behaviour::new(limits),
        outsiders,
        identify: identify::Behaviour::new(identify::Config::new(
            "/synod/id/1".into(),
            key.public(),
        )),
        kad: kad::Behaviour::new(peer_id, kad::store::MemoryStore::new(peer_id)),
        gossipsub,
        stream: libp2p_stream::Behaviour::new(),
    })
}

/// [`NetError::Config`] naming what failed (`what`) and `e` with its whole source chain:
/// libp2p's `TransportError::Other` (a listen address in use, say) prints nothing itself.
fn config_error(what: &str, e: &dyn std::error::Error) -> NetError {
    let mut msg = what.to_owned();
    let mut next = Some(e);
    while let Some(err) = next {
        let text = err.to_string();
        if !text.is_empty() {
            msg.push_str(": ");
            msg.push_str(&text);
        }
        next = err.source();
    }
    NetError::Config(msg)
}

/// Starts a node on the current tokio runtime and returns its [`Client`].
///
/// # Errors
/// [`NetError::Config`] for an unusable listen address or transport setup.
pub fn spawn(cfg: NetConfig) -> Result<Client, NetError> {
    let topic = gossipsub::IdentTopic::new(format!("synod/pool/{}", cfg.members.pool));
    let b = behaviour(&cfg.keypair, cfg.max_connections, &topic, &cfg.members)?;
    // The swarm's type does not depend on the security upgrade (the transport is boxed), but
    // the builder's intermediate types do: one chain per preference.
    macro_rules! swarm_with {
        ($security:expr) => {
            libp2p::SwarmBuilder::with_existing_identity(cfg.keypair.clone())
                .with_tokio()
                .with_tcp(
                    tcp::Config::default().nodelay(true),
                    $security,
                    yamux::Config::default,
                )
                .map_err(|e| NetError::Config(e.to_string()))?
                .with_quic()
                .with_behaviour(move |_| b)
                .map_err(|e| NetError::Config(e.to_string()))?
                .with_swarm_config(|c| c.with_idle_connection_timeout(Duration::from_secs(120)))
                .build()
        };
    }
    let mut swarm = match cfg.security {
        Security::Noise => swarm_with!((noise::Config::new, tls::Config::new)),
        Security::Tls => swarm_with!((tls::Config::new, noise::Config::new)),
    };
    // Answer DHT queries on loopback and private networks too (no external-address probing).
    swarm.behaviour_mut().kad.set_mode(Some(kad::Mode::Server));
    swarm
        .behaviour_mut()
        .gossipsub
        .subscribe(&topic)
        .map_err(|e| NetError::Config(e.to_string()))?;
    for a in &cfg.listen {
        swarm
            .listen_on(a.clone())
            .map_err(|e| config_error(&format!("listening on {a}"), &e))?;
    }
    for a in &cfg.public_addrs {
        swarm.add_external_address(a.clone());
    }
    let now = Instant::now();
    let mut bootnodes = bootnodes::Bootnodes::new(
        cfg.bootnodes.clone(),
        *swarm.local_peer_id(),
        cfg.heartbeat,
        now,
    );
    bootnodes::dial_due(&mut bootnodes, &mut swarm, now, &HashSet::new(), |_| false)?;
    let (tx, rx) = mpsc::channel(256);
    let shared = Arc::new(Mutex::new(Snapshot::default()));
    if let Some(path) = &cfg.distrust_file {
        lock(&shared).distrusted = read_distrusted(path);
    }
    let now = Instant::now();
    lock(&shared).last_seen = cfg.members.iter().map(|m| (m.index, now)).collect();
    let peer_id = *swarm.local_peer_id();
    let members = Arc::new(cfg.members.clone());
    let served = Arc::new(Mutex::new(Served::new(cfg.me, members.clone())));
    let uplink = cfg
        .max_upload
        .map(|rate| Arc::new(uplink::Uplink::new(rate)));
    let mut control = swarm.behaviour().stream.new_control();
    // Dropped when the event loop ends: the serving tasks stop with it.
    let (stop, stopped) = tokio::sync::watch::channel(());
    for (protocol, checkpoint) in [(PSEUDOGRAD_PROTOCOL, false), (CHECKPOINT_PROTOCOL, true)] {
        let incoming = control
            .accept(protocol)
            .map_err(|e| NetError::Config(e.to_string()))?;
        tokio::spawn(serve_incoming(
            incoming,
            served.clone(),
            tx.downgrade(),
            stopped.clone(),
            cfg.limits,
            uplink.clone(),
            checkpoint,
        ));
    }
    let ev = EventLoop {
        swarm,
        rx,
        shared: shared.clone(),
        topic,
        members: members.clone(),
        key: cfg.member_key,
        me: cfg.me,
        round: 0,
        // Heartbeat numbers are the wall clock's milliseconds (`gossip::fresh`): a restarted
        // member's heartbeats are new messages, not copies of its old ones.
        seq: gossip::now_ms(),
        served: served.clone(),
        heartbeat: cfg.heartbeat,
        passive: false,
        meters: gossip::Meters::default(),
        blocked_outsiders: event_loop::BlockedOutsiders::default(),
        bootnodes,
        _stop: stop,
    };
    tokio::spawn(ev.run());
    Ok(Client {
        tx,
        shared,
        peer_id,
        me: cfg.me,
        members: Arc::new(Mutex::new(members)),
        served,
        control,
        limits: cfg.limits,
        distrust_file: cfg.distrust_file.map(Arc::new),
    })
}
