//! The swarm: a cloneable [`Client`] handle, a [`Command`] channel and an event loop task
//! (the shape of rust-libp2p's `file-sharing` example). Payloads and checkpoints move on
//! streams of their own ([`crate::protocol`], `libp2p-stream`): the event loop only handles
//! gossip, discovery and connections, and the objects served live in a [`Served`] store that the
//! serving tasks read directly.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::StreamExt;
use libp2p::swarm::dial_opts::{DialOpts, PeerCondition};
use libp2p::swarm::{NetworkBehaviour, SwarmEvent};
use libp2p::{
    allow_block_list, connection_limits, gossipsub, identify, identity, kad, noise, tcp, tls,
    yamux, Multiaddr, PeerId, Swarm,
};
use tokio::sync::{mpsc, oneshot};

use crate::message::{self, Body, Envelope, PayloadRef, Rejection};
use crate::protocol::{
    self, Answer, Expect, FetchRequest, Limits, CHECKPOINT_PROTOCOL, PSEUDOGRAD_PROTOCOL,
};
use crate::{MemberKey, MemberSet, NetError};
use parity_scale_codec::Encode;

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
    /// Peers to dial at start (Kademlia bootstraps from them).
    pub bootnodes: Vec<Multiaddr>,
    /// Heartbeat period (Prime's ElasticDeviceMesh uses 2 s).
    pub heartbeat: Duration,
    /// Most established connections.
    pub max_connections: u32,
    /// Time bounds of every payload and checkpoint transfer, both directions.
    pub limits: Limits,
    /// The TCP connection encryption this node proposes first when it dials; it accepts both.
    pub security: Security,
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
            heartbeat: Duration::from_secs(2),
            max_connections: 64,
            limits: Limits::default(),
            security: Security::default(),
        }
    }
}

#[derive(NetworkBehaviour)]
struct Behaviour {
    blocked: allow_block_list::Behaviour<allow_block_list::BlockedPeers>,
    limits: connection_limits::Behaviour,
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
    /// Last verified message time per member.
    pub last_seen: HashMap<u32, Instant>,
    /// Highest round each member's heartbeats have named (the round it is working on).
    pub round_of: HashMap<u32, u32>,
    /// Equivocations seen: (round, member) → the first two conflicting announcements. Taken
    /// by [`Client::take_equivocations`]; otherwise kept for [`EQUIVOCATION_ROUNDS`] rounds.
    pub equivocations: BTreeMap<(u32, u32), Equivocation>,
    /// Members that said they leave.
    pub left: HashSet<u32>,
    /// Peers banned for invalid messages, with the reason.
    pub banned: HashMap<PeerId, String>,
    /// Our listen addresses.
    pub listen_addrs: Vec<Multiaddr>,
    /// Peers with an open connection.
    pub connected: HashSet<PeerId>,
}

enum Command {
    Dial(Multiaddr),
    SetRound(u32),
    SetPayload {
        round: u32,
        payload: PayloadRef,
        bytes: Arc<Vec<u8>>,
    },
    Ban(PeerId, String),
    PublishRaw(Vec<u8>),
    AnnounceOnce(u32, PayloadRef),
    SetMembers {
        set: Arc<MemberSet>,
        applied: oneshot::Sender<()>,
    },
    SetPassive(bool),
    Leave(oneshot::Sender<()>),
    Shutdown,
}

/// Handle to a running node. Cheap to clone; all methods are async and never block the loop.
#[derive(Clone)]
pub struct Client {
    tx: mpsc::Sender<Command>,
    shared: Arc<Mutex<Snapshot>>,
    /// This node's peer id.
    pub peer_id: PeerId,
    /// This node's member index.
    pub me: u32,
    members: Arc<Mutex<Arc<MemberSet>>>,
    served: Arc<Mutex<Served>>,
    control: libp2p_stream::Control,
    limits: Limits,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Client {
    /// The allowed member set now.
    pub fn members(&self) -> Arc<MemberSet> {
        self.members
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Replaces the allowed member set (the chain client calls this when registrations change).
    /// Returns once the event loop applies it: a request that arrives afterwards is judged
    /// against the new set (before, a new member's first fetch could still be refused).
    ///
    /// # Errors
    /// [`NetError::Stopped`] if the node has shut down.
    pub async fn set_members(&self, set: MemberSet) -> Result<(), NetError> {
        let set = Arc::new(set);
        *self
            .members
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = set.clone();
        lock(&self.served).members = set.clone();
        let (applied, rx) = oneshot::channel();
        self.send(Command::SetMembers { set, applied }).await?;
        rx.await.map_err(|_| NetError::Stopped)
    }

    async fn send(&self, c: Command) -> Result<(), NetError> {
        self.tx.send(c).await.map_err(|_| NetError::Stopped)
    }

    /// Takes the equivocations seen so far (each is returned once), oldest round first.
    pub fn take_equivocations(&self) -> Vec<((u32, u32), Equivocation)> {
        std::mem::take(&mut lock(&self.shared).equivocations)
            .into_iter()
            .collect()
    }

    /// A copy of what the node knows now.
    pub fn snapshot(&self) -> Snapshot {
        lock(&self.shared).clone()
    }

    /// Our listen addresses (after the first `NewListenAddr` events).
    pub async fn listen_addrs(&self) -> Vec<Multiaddr> {
        for _ in 0..100 {
            let a = lock(&self.shared).listen_addrs.clone();
            if !a.is_empty() {
                return a;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Vec::new()
    }

    /// Dials `addr`.
    ///
    /// # Errors
    /// [`NetError::Stopped`] if the node has shut down.
    pub async fn dial(&self, addr: Multiaddr) -> Result<(), NetError> {
        self.send(Command::Dial(addr)).await
    }

    /// Sets the current outer round: messages for rounds outside `[round − 1, round + 1]` are stale.
    ///
    /// # Errors
    /// [`NetError::Stopped`] if the node has shut down.
    pub async fn set_round(&self, round: u32) -> Result<(), NetError> {
        self.send(Command::SetRound(round)).await
    }

    /// Serves `bytes` as our payload for `round` and announces it in every heartbeat; returns its digest.
    ///
    /// # Errors
    /// [`NetError::Stopped`] if the node has shut down.
    pub async fn set_payload(&self, round: u32, bytes: Arc<Vec<u8>>) -> Result<[u8; 32], NetError> {
        let digest = *blake3::hash(&bytes).as_bytes();
        let payload = PayloadRef {
            digest,
            size: bytes.len() as u64,
        };
        self.send(Command::SetPayload {
            round,
            payload,
            bytes,
        })
        .await?;
        Ok(digest)
    }

    /// Serves a checkpoint file over `/synod/checkpoint/2`; returns its blake3 (hashed on a
    /// blocking thread, never on the network event loop). At most [`MAX_SERVED_CHECKPOINTS`]
    /// are kept in memory, the pinned one included: the oldest other is dropped (peers asking
    /// for it get `NotFound`), so memory does not grow with the rounds.
    ///
    /// # Errors
    /// [`NetError::Stopped`] if the hashing thread could not run.
    pub async fn serve_checkpoint(&self, bytes: Arc<Vec<u8>>) -> Result<[u8; 32], NetError> {
        let hashed = Arc::clone(&bytes);
        let hash = tokio::task::spawn_blocking(move || *blake3::hash(&hashed).as_bytes())
            .await
            .map_err(|_| NetError::Stopped)?;
        lock(&self.served).add_checkpoint(hash, bytes);
        Ok(hash)
    }

    /// Serves the file at `path` to members asking for blake3 `hash` on the checkpoint protocol
    /// (read from disk per request, one 1 MiB step at a time on a blocking thread). For
    /// Proof-of-Learning trace states, which verifiers fetch by the hashes in our payload.
    /// At most [`MAX_SERVED_FILES`] are served: the oldest is dropped. The caller wrote `path`
    /// with content hashing to `hash`; the fetcher checks it.
    pub fn serve_file(&self, hash: [u8; 32], path: std::path::PathBuf) {
        lock(&self.served).add_file(hash, path);
    }

    /// Stops serving the file of `hash` ([`Client::serve_file`]).
    pub fn unserve_file(&self, hash: &[u8; 32]) {
        lock(&self.served).files.retain(|(h, _)| h != hash);
    }

    /// Keeps serving the checkpoint `hash` whatever else is served later (the last final
    /// checkpoint, which (re)joining members need): it no longer counts as the oldest. The
    /// [`PINNED_CHECKPOINTS`] last pinned stay pinned (the last final checkpoint and the one
    /// before it, where an overlapped round starts); pinning another unpins the oldest.
    /// Returns `false` (and pins nothing) if `hash` is not served; serve it first.
    ///
    /// # Errors
    /// None today; `Result` for symmetry with the other calls.
    pub async fn pin_checkpoint(&self, hash: [u8; 32]) -> Result<bool, NetError> {
        let mut s = lock(&self.served);
        let served = s.checkpoints.iter().any(|(h, _)| *h == hash);
        if served {
            s.pinned.retain(|h| *h != hash);
            s.pinned.push_back(hash);
            while s.pinned.len() > PINNED_CHECKPOINTS {
                s.pinned.pop_front();
            }
        }
        Ok(served)
    }

    /// Opens a stream to `peer` and fetches one object (see [`crate::protocol`]).
    async fn fetch(
        &self,
        peer: PeerId,
        protocol: libp2p::StreamProtocol,
        req: FetchRequest,
        expect: Expect,
    ) -> Result<Vec<u8>, NetError> {
        let mut stream = tokio::time::timeout(
            self.limits.stall,
            self.control.clone().open_stream(peer, protocol),
        )
        .await
        .map_err(|_| NetError::Request("opening a stream timed out".into()))?
        .map_err(|e| NetError::Request(e.to_string()))?;
        protocol::request(&mut stream, &req, expect, self.limits).await
    }

    /// Fetches member `member`'s payload for `round` from its registered peer, on one stream,
    /// and checks size and blake3 against the signed announcement.
    ///
    /// # Errors
    /// [`NetError::TooLarge`] over `max_bytes`, [`NetError::DigestMismatch`], [`NetError::NotFound`],
    /// [`NetError::Request`] on transport failure or a stalled peer, [`NetError::NotMember`].
    pub async fn fetch_payload(
        &self,
        member: u32,
        round: u32,
        announced: PayloadRef,
        max_bytes: u64,
    ) -> Result<Vec<u8>, NetError> {
        let author = self
            .members()
            .get(member)
            .ok_or(NetError::NotMember(member))?
            .peer_id;
        self.fetch_payload_from(author, member, round, announced, max_bytes)
            .await
    }

    /// As [`Client::fetch_payload`], but asks `peer`, which may be the author or any member
    /// that fetched the payload before (and relays it). The bytes are checked against the
    /// author's signed announcement either way.
    ///
    /// # Errors
    /// As [`Client::fetch_payload`].
    pub async fn fetch_payload_from(
        &self,
        peer: PeerId,
        member: u32,
        round: u32,
        announced: PayloadRef,
        max_bytes: u64,
    ) -> Result<Vec<u8>, NetError> {
        let members = self.members();
        if members.get(member).is_none() {
            return Err(NetError::NotMember(member));
        }
        if announced.size > max_bytes {
            return Err(NetError::TooLarge(announced.size));
        }
        let req = FetchRequest::Pseudograd {
            pool: members.pool,
            round,
            member,
            digest: announced.digest,
        };
        let expect = Expect {
            size: Some(announced.size),
            max: max_bytes,
            digest: announced.digest,
        };
        self.fetch(peer, PSEUDOGRAD_PROTOCOL, req, expect).await
    }

    /// Serves member `member`'s verified payload for `round` to peers that could not get it
    /// from its author (kept for the current and the previous round).
    ///
    /// # Errors
    /// None today; `Result` for symmetry with the other calls.
    pub async fn relay(
        &self,
        round: u32,
        member: u32,
        bytes: Arc<Vec<u8>>,
    ) -> Result<(), NetError> {
        let hashed = Arc::clone(&bytes);
        let digest = tokio::task::spawn_blocking(move || *blake3::hash(&hashed).as_bytes())
            .await
            .map_err(|_| NetError::Stopped)?;
        self.relay_verified(round, member, digest, bytes);
        Ok(())
    }

    /// As [`Client::relay`] for bytes the caller has already checked against `digest` (a
    /// fetch does): no second hash.
    pub fn relay_verified(&self, round: u32, member: u32, digest: [u8; 32], bytes: Arc<Vec<u8>>) {
        let mut s = lock(&self.served);
        if round + 2 > s.round {
            s.relayed.insert((round, member), (digest, bytes));
        }
    }

    /// Fetches the checkpoint whose blake3 is `hash` from `peer` and verifies it (catch-up).
    ///
    /// # Errors
    /// As [`Client::fetch_payload`]; [`NetError::DigestMismatch`] if the bytes do not hash to `hash`.
    pub async fn fetch_checkpoint(
        &self,
        peer: PeerId,
        hash: [u8; 32],
        max_bytes: u64,
    ) -> Result<Vec<u8>, NetError> {
        let expect = Expect {
            size: None,
            max: max_bytes,
            digest: hash,
        };
        self.fetch(
            peer,
            CHECKPOINT_PROTOCOL,
            FetchRequest::Checkpoint { hash },
            expect,
        )
        .await
    }

    /// While passive the node publishes no heartbeats, so peers do not wait for it in their
    /// exchanges, but it still receives announcements and serves and fetches checkpoints. A
    /// (re)joining trainer is passive until it holds the last final checkpoint.
    ///
    /// # Errors
    /// [`NetError::Stopped`] if the node has shut down.
    pub async fn set_passive(&self, passive: bool) -> Result<(), NetError> {
        self.send(Command::SetPassive(passive)).await
    }

    /// Fault injection (tests): serves our own payloads only to the members in `to` (`None`:
    /// to every member again). Announcements go out as usual, so the others see a payload
    /// they cannot fetch from its author; only relays can spread it.
    ///
    /// # Errors
    /// None today; `Result` for symmetry with the other calls.
    pub async fn withhold_own_payloads(&self, to: Option<BTreeSet<u32>>) -> Result<(), NetError> {
        lock(&self.served).serve_own_to = to;
        Ok(())
    }

    /// Fault injection (tests): signs and publishes, once, an announcement of `payload` for
    /// `round` that this node does not serve. Next to our real announcement of that round it is
    /// an equivocation: peers ban us and keep both as proof.
    ///
    /// # Errors
    /// [`NetError::Stopped`] if the node has shut down.
    pub async fn announce_once(&self, round: u32, payload: PayloadRef) -> Result<(), NetError> {
        self.send(Command::AnnounceOnce(round, payload)).await
    }

    /// Publishes bytes on the pool topic without signing or checks (for tools and tests).
    ///
    /// # Errors
    /// [`NetError::Stopped`] if the node has shut down.
    pub async fn publish_raw(&self, bytes: Vec<u8>) -> Result<(), NetError> {
        self.send(Command::PublishRaw(bytes)).await
    }

    /// Says a signed goodbye, so peers stop waiting for us.
    ///
    /// # Errors
    /// [`NetError::Stopped`] if the node has shut down.
    pub async fn leave(&self) -> Result<(), NetError> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::Leave(tx)).await?;
        rx.await.map_err(|_| NetError::Stopped)
    }

    /// Stops the node (connections close; peers see it as gone).
    pub async fn shutdown(&self) {
        let _ = self.send(Command::Shutdown).await;
    }
}

/// Bytes gossipsub may hold of one inbound stream at once (bytes). libp2p-gossipsub 0.50.1
/// checks its `max_transmit_size` against everything buffered from the stream, not against one
/// frame: set to our message bound, two signed messages read together were refused, each
/// refusal reset the stream, and after five resets the connection's gossip was switched off
/// for good (the sender then looked silent). A buffer holds at most one partial frame plus one
/// 8 KiB read, so this leaves room for several frames.
const GOSSIP_BUFFER_BYTES: usize = 64 * 1024;
/// Most message ids in one IHAVE we send (≈ 34 bytes each: 13.6 KB, under gossipsub's 16 KiB
/// control limit per RPC).
const MAX_IHAVE_IDS: usize = 400;
/// What gossipsub adds around our bytes in one published message (bytes): its author's peer
/// id, sequence number, topic and ed25519 signature (≈ 150 bytes), with room to spare.
const GOSSIP_ENVELOPE_BYTES: usize = 1024;

fn behaviour(
    key: &identity::Keypair,
    max_connections: u32,
    topic: &gossipsub::IdentTopic,
) -> Result<Behaviour, NetError> {
    let peer_id = key.public().to_peer_id();
    let gcfg = gossipsub::ConfigBuilder::default()
        .heartbeat_interval(Duration::from_millis(500))
        .validation_mode(gossipsub::ValidationMode::Strict)
        .validate_messages()
        .max_transmit_size(GOSSIP_BUFFER_BYTES)
        // One message of the pool's topic stays bounded by our own limit.
        .max_transmit_size_for_topic(
            crate::message::MAX_MESSAGE_BYTES + GOSSIP_ENVELOPE_BYTES,
            topic.hash(),
        )
        // An IHAVE is one RPC, never split: at ≈ 34 bytes per id, 5 000 ids (the default)
        // would pass the receiver's 16 KiB control limit, reset the stream and, five times
        // over, switch its gossip off; a member flooding heartbeats could cause that.
        .max_control_messages_sent(MAX_IHAVE_IDS)
        .mesh_n_low(1)
        .mesh_n(4)
        .mesh_n_high(8)
        .mesh_outbound_min(1)
        .message_id_fn(|m: &gossipsub::Message| {
            gossipsub::MessageId::from(blake3::hash(&m.data).as_bytes().to_vec())
        })
        .build()
        .map_err(|e| NetError::Config(e.to_string()))?;
    let gossipsub =
        gossipsub::Behaviour::new(gossipsub::MessageAuthenticity::Signed(key.clone()), gcfg)
            .map_err(|e| NetError::Config(e.to_string()))?;
    let limits = connection_limits::ConnectionLimits::default()
        .with_max_established(Some(max_connections))
        .with_max_established_per_peer(Some(2))
        .with_max_pending_incoming(Some(max_connections));
    Ok(Behaviour {
        blocked: allow_block_list::Behaviour::default(),
        limits: connection_limits::Behaviour::new(limits),
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
    let b = behaviour(&cfg.keypair, cfg.max_connections, &topic)?;
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
    for a in &cfg.bootnodes {
        swarm
            .dial(a.clone())
            .map_err(|e| config_error(&format!("dialling {a}"), &e))?;
    }
    let (tx, rx) = mpsc::channel(256);
    let shared = Arc::new(Mutex::new(Snapshot::default()));
    let now = Instant::now();
    lock(&shared).last_seen = cfg.members.iter().map(|m| (m.index, now)).collect();
    let peer_id = *swarm.local_peer_id();
    let members = Arc::new(cfg.members.clone());
    let served = Arc::new(Mutex::new(Served::new(cfg.me, members.clone())));
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
        seq: 0,
        served: served.clone(),
        heartbeat: cfg.heartbeat,
        passive: false,
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
    })
}

/// A relayed payload: its blake3 and bytes.
type Relayed = ([u8; 32], Arc<Vec<u8>>);

/// Most checkpoints a node serves at once, the pinned ones included (θ of the last four
/// rounds, say): serving one more drops the one served longest ago — never a pinned one
/// ([`Client::pin_checkpoint`]: the last final checkpoint, which a (re)joining trainer
/// needs, and the one before it, where an overlapped round starts) — so a trainer's memory
/// does not grow with the rounds.
pub const MAX_SERVED_CHECKPOINTS: usize = 4;

/// How many of the served checkpoints stay pinned ([`Client::pin_checkpoint`]).
pub const PINNED_CHECKPOINTS: usize = 2;

/// Rounds an untaken [`Equivocation`] is kept after its own (bounds memory if nobody takes
/// them; a trainer takes them every round).
pub const EQUIVOCATION_ROUNDS: u32 = 8;

/// Most files served at once ([`Client::serve_file`]): 8 rounds of the longest trace a
/// recipe allows (`--trace-segments` 4096: [`synod_diloco::trace::MAX_TRACE_HASHES`] states),
/// about 1 900 rounds of the default 16 segments. A smaller bound let a recipe with long
/// traces push a round's early states out before its verifiers asked for them (each check
/// then a whole replay).
pub const MAX_SERVED_FILES: usize = 8 * synod_diloco::trace::MAX_TRACE_HASHES;

/// Most transfers a node serves at once, and to one peer: a member that opens streams and never
/// reads holds at most [`MAX_SERVED_PER_PEER`] of them, each for at most its
/// [`Limits::body_time`].
pub const MAX_SERVED_STREAMS: usize = 64;
/// See [`MAX_SERVED_STREAMS`].
pub const MAX_SERVED_PER_PEER: usize = 8;

/// What a node serves, shared by the event loop (heartbeats announce the payloads) and the
/// serving tasks (which answer requests without going through the loop).
struct Served {
    me: u32,
    members: Arc<MemberSet>,
    /// The current outer round (payloads and relays of older rounds than the previous are dropped).
    round: u32,
    /// Our payload per round with its announcement (digest computed once).
    payloads: HashMap<u32, (PayloadRef, Arc<Vec<u8>>)>,
    /// Checkpoints we serve, oldest first; at most [`MAX_SERVED_CHECKPOINTS`].
    checkpoints: VecDeque<([u8; 32], Arc<Vec<u8>>)>,
    /// The served checkpoints never dropped, oldest first; at most [`PINNED_CHECKPOINTS`]
    /// (see [`Client::pin_checkpoint`]).
    pinned: VecDeque<[u8; 32]>,
    /// Objects served from disk by blake3 on the checkpoint protocol (Proof-of-Learning trace
    /// states, [`Client::serve_file`]), oldest first; at most [`MAX_SERVED_FILES`].
    files: VecDeque<([u8; 32], std::path::PathBuf)>,
    /// Other members' payloads we fetched, served on to peers whose fetch from the author
    /// failed: (round, member) → (digest, bytes); current and previous round only.
    relayed: HashMap<(u32, u32), Relayed>,
    /// Members our own payloads are served to; `None`: every member (see
    /// [`Client::withhold_own_payloads`]).
    serve_own_to: Option<BTreeSet<u32>>,
    /// Transfers being served, per peer (no entry: none).
    streams: HashMap<PeerId, usize>,
    /// Sum of `streams`.
    streaming: usize,
}

impl Served {
    fn new(me: u32, members: Arc<MemberSet>) -> Self {
        Self {
            me,
            members,
            round: 0,
            payloads: HashMap::new(),
            checkpoints: VecDeque::new(),
            pinned: VecDeque::new(),
            files: VecDeque::new(),
            relayed: HashMap::new(),
            serve_own_to: None,
            streams: HashMap::new(),
            streaming: 0,
        }
    }

    fn set_round(&mut self, r: u32) {
        self.round = r;
        self.payloads.retain(|k, _| *k + 2 > r);
        self.relayed.retain(|(k, _), _| *k + 2 > r);
    }

    fn add_file(&mut self, hash: [u8; 32], path: std::path::PathBuf) {
        self.files.retain(|(h, _)| *h != hash);
        self.files.push_back((hash, path));
        while self.files.len() > MAX_SERVED_FILES {
            self.files.pop_front();
        }
    }

    fn add_checkpoint(&mut self, hash: [u8; 32], bytes: Arc<Vec<u8>>) {
        self.checkpoints.retain(|(h, _)| *h != hash);
        self.checkpoints.push_back((hash, bytes));
        while self.checkpoints.len() > MAX_SERVED_CHECKPOINTS {
            let pinned = &self.pinned;
            match self
                .checkpoints
                .iter()
                .position(|(h, _)| !pinned.contains(h))
            {
                Some(oldest) => drop(self.checkpoints.remove(oldest)),
                None => break,
            }
        }
    }

    /// Takes a serving slot for `peer` if it is a registered member and under the limits (a
    /// non-member takes none: it cannot crowd members out).
    fn admit(&mut self, peer: PeerId) -> bool {
        let mine = self.streams.get(&peer).copied().unwrap_or(0);
        if self.members.by_peer(&peer).is_none()
            || self.streaming >= MAX_SERVED_STREAMS
            || mine >= MAX_SERVED_PER_PEER
        {
            return false;
        }
        self.streams.insert(peer, mine + 1);
        self.streaming += 1;
        true
    }

    fn release(&mut self, peer: PeerId) {
        if let Some(n) = self.streams.get_mut(&peer) {
            *n -= 1;
            self.streaming -= 1;
            if *n == 0 {
                self.streams.remove(&peer);
            }
        }
    }

    /// The answer to `req` from `peer` on the pseudo-gradient (`checkpoint == false`) or the
    /// checkpoint protocol.
    fn answer(&self, peer: &PeerId, req: &FetchRequest, checkpoint: bool) -> Answer {
        let Some(asker) = self.members.by_peer(peer).map(|m| m.index) else {
            return Answer::Refused;
        };
        match (req, checkpoint) {
            (
                FetchRequest::Pseudograd {
                    pool,
                    round,
                    member,
                    digest,
                },
                false,
            ) => {
                if *pool != self.members.pool {
                    return Answer::NotFound;
                }
                let own = self
                    .payloads
                    .get(round)
                    .filter(|_| *member == self.me)
                    .filter(|_| {
                        self.serve_own_to
                            .as_ref()
                            .is_none_or(|to| to.contains(&asker))
                    })
                    .map(|(p, b)| (p.digest, b));
                match own.or_else(|| self.relayed.get(&(*round, *member)).map(|(d, b)| (*d, b))) {
                    Some((d, bytes)) if d == *digest => Answer::Data(bytes.clone()),
                    _ => Answer::NotFound,
                }
            }
            (FetchRequest::Checkpoint { hash }, true) => {
                match self.checkpoints.iter().find(|(h, _)| h == hash) {
                    Some((_, c)) => Answer::Data(c.clone()),
                    None => match self.files.iter().find(|(h, _)| h == hash) {
                        Some((_, path)) => Answer::File(path.clone()),
                        None => Answer::NotFound,
                    },
                }
            }
            _ => Answer::Refused,
        }
    }
}

/// A serving slot, given back when dropped (also if the serving task panics or is aborted).
struct Slot {
    served: Arc<Mutex<Served>>,
    peer: PeerId,
}

impl Drop for Slot {
    fn drop(&mut self) {
        lock(&self.served).release(self.peer);
    }
}

/// Answers the streams opened to us on one protocol, each in a task of its own, until the event
/// loop stops. A stream from a non-member or over the slots is dropped unanswered; a malformed
/// request bans the peer.
async fn serve_incoming(
    mut incoming: libp2p_stream::IncomingStreams,
    served: Arc<Mutex<Served>>,
    tx: mpsc::WeakSender<Command>,
    mut stopped: tokio::sync::watch::Receiver<()>,
    limits: Limits,
    checkpoint: bool,
) {
    loop {
        let (peer, mut stream) = tokio::select! {
            next = incoming.next() => match next {
                Some(s) => s,
                None => return,
            },
            _ = stopped.changed() => return,
        };
        if !lock(&served).admit(peer) {
            tracing::debug!(%peer, "not a member, or busy: stream dropped");
            continue;
        }
        let slot = Slot {
            served: served.clone(),
            peer,
        };
        let tx = tx.clone();
        tokio::spawn(async move {
            let r = protocol::respond(&mut stream, limits, |req| {
                lock(&slot.served).answer(&peer, req, checkpoint)
            })
            .await;
            drop(slot);
            match r {
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    if let Some(tx) = tx.upgrade() {
                        let _ = tx
                            .send(Command::Ban(peer, format!("malformed request: {e}")))
                            .await;
                    }
                }
                Err(e) => tracing::debug!(%peer, "serving failed: {e}"),
                Ok(()) => {}
            }
        });
    }
}

struct EventLoop {
    swarm: Swarm<Behaviour>,
    rx: mpsc::Receiver<Command>,
    shared: Arc<Mutex<Snapshot>>,
    topic: gossipsub::IdentTopic,
    members: Arc<MemberSet>,
    key: Arc<MemberKey>,
    me: u32,
    round: u32,
    seq: u64,
    /// What we serve (our payloads are announced in heartbeats).
    served: Arc<Mutex<Served>>,
    heartbeat: Duration,
    /// No heartbeats while set (see [`Client::set_passive`]).
    passive: bool,
    /// Dropped with the loop: tells the serving tasks to stop.
    _stop: tokio::sync::watch::Sender<()>,
}

impl EventLoop {
    async fn run(mut self) {
        let mut tick = tokio::time::interval(self.heartbeat);
        loop {
            tokio::select! {
                ev = self.swarm.select_next_some() => self.on_swarm(ev),
                cmd = self.rx.recv() => match cmd {
                    None | Some(Command::Shutdown) => break,
                    Some(c) => self.on_command(c),
                },
                _ = tick.tick() => {
                    self.publish_alive();
                    self.dial_missing_members();
                    if self.seq % 10 < 2 {
                        let _ = self.swarm.behaviour_mut().kad.bootstrap();
                    }
                }
            }
        }
    }

    /// Signs `body` about `round` as us and publishes it on the pool topic.
    fn publish(&mut self, round: u32, body: Body) {
        let e = Envelope {
            pool: self.members.pool,
            round,
            member: self.me,
            peer_id: self.swarm.local_peer_id().to_bytes(),
            body,
        };
        self.publish_bytes(message::sign(e, &self.key).encode());
    }

    /// Publishes `bytes` on the pool topic, unless they exceed [`message::MAX_MESSAGE_BYTES`]:
    /// gossipsub's own limit for the topic leaves room for its envelope, and every peer bans
    /// the author of a message over ours.
    fn publish_bytes(&mut self, bytes: Vec<u8>) {
        if bytes.len() > message::MAX_MESSAGE_BYTES {
            tracing::warn!(len = bytes.len(), "not publishing an oversized message");
            return;
        }
        let _ = self
            .swarm
            .behaviour_mut()
            .gossipsub
            .publish(self.topic.clone(), bytes);
    }

    /// A heartbeat (with the next `seq`) about `round`, announcing `payload` if any.
    fn publish_heartbeat(&mut self, round: u32, payload: Option<PayloadRef>) {
        self.seq += 1;
        let seq = self.seq;
        self.publish(round, Body::Alive { seq, payload });
    }

    /// One heartbeat per round we still serve a payload for (the current and the previous one),
    /// so a peer still finishing the previous round learns our announcement even though we
    /// have moved on; a bare heartbeat if we have no payload for the current round yet.
    fn publish_alive(&mut self) {
        if self.passive {
            self.seq += 1;
            return;
        }
        let mut rounds: Vec<(u32, Option<PayloadRef>)> = lock(&self.served)
            .payloads
            .iter()
            .map(|(r, (p, _))| (*r, Some(*p)))
            .collect();
        if !rounds.iter().any(|(r, _)| *r == self.round) {
            rounds.push((self.round, None));
        }
        rounds.sort_by_key(|r| r.0);
        for (round, payload) in rounds {
            self.publish_heartbeat(round, payload);
        }
    }

    fn dial_missing_members(&mut self) {
        let snap = lock(&self.shared).clone();
        for m in self.members.iter() {
            if m.index != self.me
                && !snap.connected.contains(&m.peer_id)
                && !snap.banned.contains_key(&m.peer_id)
            {
                let _ = self.swarm.dial(
                    DialOpts::peer_id(m.peer_id)
                        .condition(PeerCondition::DisconnectedAndNotDialing)
                        .build(),
                );
            }
        }
    }

    fn ban(&mut self, peer: PeerId, reason: String) {
        tracing::warn!(%peer, %reason, "banning peer");
        self.swarm.behaviour_mut().blocked.block_peer(peer);
        lock(&self.shared).banned.insert(peer, reason);
    }

    fn on_command(&mut self, c: Command) {
        match c {
            Command::Dial(a) => {
                if let Err(e) = self.swarm.dial(a) {
                    tracing::debug!("dial failed: {e}");
                }
            }
            Command::SetRound(r) => {
                self.round = r;
                lock(&self.served).set_round(r);
                let mut s = lock(&self.shared);
                s.announced.retain(|(k, _), _| *k + 2 > r);
                s.equivocations
                    .retain(|(k, _), _| k.saturating_add(EQUIVOCATION_ROUNDS) > r);
            }
            Command::SetPayload {
                round,
                payload,
                bytes,
            } => {
                lock(&self.served).payloads.insert(round, (payload, bytes));
                self.publish_alive();
            }
            Command::Ban(peer, reason) => self.ban(peer, reason),
            Command::SetMembers { set, applied } => {
                let now = Instant::now();
                let mut s = lock(&self.shared);
                for m in set.iter() {
                    s.last_seen.entry(m.index).or_insert(now);
                }
                drop(s);
                self.members = set;
                let _ = applied.send(());
            }
            Command::PublishRaw(bytes) => self.publish_bytes(bytes),
            Command::AnnounceOnce(round, payload) => self.publish_heartbeat(round, Some(payload)),
            Command::SetPassive(p) => {
                let waking = self.passive && !p;
                self.passive = p;
                if waking {
                    // Tell peers at once which round we are in, not at the next tick.
                    self.publish_alive();
                }
            }
            Command::Leave(reply) => {
                self.publish(self.round, Body::Leave);
                let _ = reply.send(());
            }
            Command::Shutdown => {}
        }
    }

    fn on_gossip(
        &mut self,
        source: Option<PeerId>,
        propagation: PeerId,
        id: gossipsub::MessageId,
        data: &[u8],
    ) {
        use gossipsub::MessageAcceptance::{Accept, Ignore, Reject};
        let opened =
            message::open(data, &self.members, self.round.saturating_sub(1)).and_then(|e| {
                // The gossipsub author signature must come from the same peer the envelope names.
                if source.map(|s| s.to_bytes()) == Some(e.peer_id.clone()) {
                    Ok(e)
                } else {
                    Err(Rejection::PeerMismatch)
                }
            });
        let verdict = match opened {
            Ok(e) => {
                let mut s = lock(&self.shared);
                s.last_seen.insert(e.member, Instant::now());
                if matches!(e.body, Body::Alive { .. }) {
                    let r = s.round_of.entry(e.member).or_insert(e.round);
                    *r = (*r).max(e.round);
                }
                match e.body {
                    Body::Alive {
                        payload: Some(p), ..
                    } => {
                        let prev =
                            s.announced
                                .entry((e.round, e.member))
                                .or_insert_with(|| Announced {
                                    payload: p,
                                    signed: Arc::new(data.to_vec()),
                                });
                        // Two different payloads signed for one round: keep the first
                        // conflicting pair as the on-chain proof.
                        let conflict = (prev.payload != p).then(|| prev.signed.clone());
                        if let Some(first) = conflict.clone() {
                            s.equivocations
                                .entry((e.round, e.member))
                                .or_insert_with(|| Equivocation {
                                    first,
                                    second: Arc::new(data.to_vec()),
                                });
                        }
                        drop(s);
                        if conflict.is_some() {
                            // Two different payloads signed for one round: equivocation.
                            self.ban(
                                source.unwrap_or(propagation),
                                format!(
                                    "member {} announced two payloads for round {}",
                                    e.member, e.round
                                ),
                            );
                            Reject
                        } else {
                            Accept
                        }
                    }
                    Body::Alive { payload: None, .. } => Accept,
                    Body::Leave => {
                        s.left.insert(e.member);
                        Accept
                    }
                }
            }
            Err(r) if !r.penalized() => Ignore,
            Err(r) => {
                self.ban(source.unwrap_or(propagation), r.to_string());
                Reject
            }
        };
        let _ = self
            .swarm
            .behaviour_mut()
            .gossipsub
            .report_message_validation_result(&id, &propagation, verdict);
    }

    fn on_swarm(&mut self, ev: SwarmEvent<BehaviourEvent>) {
        match ev {
            SwarmEvent::OutgoingConnectionError { peer_id, error, .. } => {
                tracing::debug!(?peer_id, %error, "outgoing connection failed");
            }
            SwarmEvent::NewListenAddr { address, .. } => {
                lock(&self.shared).listen_addrs.push(address)
            }
            SwarmEvent::ConnectionEstablished { peer_id, .. } => {
                lock(&self.shared).connected.insert(peer_id);
            }
            SwarmEvent::ConnectionClosed {
                peer_id,
                num_established: 0,
                ..
            } => {
                lock(&self.shared).connected.remove(&peer_id);
            }
            SwarmEvent::Behaviour(BehaviourEvent::Identify(identify::Event::Received {
                peer_id,
                info,
                ..
            })) => {
                for a in info.listen_addrs {
                    self.swarm.behaviour_mut().kad.add_address(&peer_id, a);
                }
            }
            SwarmEvent::Behaviour(BehaviourEvent::Gossipsub(gossipsub::Event::Message {
                propagation_source,
                message_id,
                message,
            })) => {
                self.on_gossip(
                    message.source,
                    propagation_source,
                    message_id,
                    &message.data,
                );
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Member;

    fn peer(i: u8) -> PeerId {
        identity::Keypair::ed25519_from_bytes([i; 32])
            .unwrap()
            .public()
            .to_peer_id()
    }

    /// A store serving `members` peers 1..=members.
    fn served(members: u8) -> Served {
        let set = MemberSet::new(
            7,
            (1..=members)
                .map(|i| Member {
                    index: u32::from(i),
                    peer_id: peer(i),
                    key: MemberKey::from_seed([i; 32]).public(),
                })
                .collect(),
        );
        Served::new(0, Arc::new(set))
    }

    #[test]
    fn non_members_take_no_serving_slot_so_they_cannot_crowd_members_out() {
        let mut s = served(9);
        // Any number of identities that are not registered: no slot, no bookkeeping.
        for i in 100..200 {
            for _ in 0..MAX_SERVED_PER_PEER {
                assert!(!s.admit(peer(i)));
            }
        }
        assert!(s.streams.is_empty() && s.streaming == 0);
        assert!(s.admit(peer(1)), "a member is still served");
    }

    #[test]
    fn a_recipe_with_the_longest_traces_cannot_push_a_rounds_first_states_out() {
        // A pool creator choosing `--trace-segments 4096`: two live traces (overlapped
        // rounds) of 4097 states each. With a cap sized for 16-segment traces (64 × 17), the
        // first states were dropped before verifiers asked: every check a whole replay.
        let mut s = served(2);
        let req = |hash| FetchRequest::Checkpoint { hash };
        let hash = |i: usize| {
            let mut h = [0u8; 32];
            h[..8].copy_from_slice(&(i as u64).to_le_bytes());
            h
        };
        let traces = 2 * synod_diloco::trace::MAX_TRACE_HASHES;
        for i in 0..traces {
            s.add_file(hash(i), std::path::PathBuf::from(format!("/states/{i}")));
        }
        for i in [0, traces / 2, traces - 1] {
            assert!(
                matches!(s.answer(&peer(1), &req(hash(i)), true), Answer::File(_)),
                "state {i} of {traces} still served"
            );
        }
    }

    #[test]
    fn served_files_answer_members_by_hash_within_a_bound() {
        let mut s = served(2);
        let req = |hash| FetchRequest::Checkpoint { hash };
        let path = |i: usize| std::path::PathBuf::from(format!("/states/{i}"));
        s.add_file([1; 32], path(1));
        assert!(matches!(s.answer(&peer(1), &req([1; 32]), true), Answer::File(p) if p == path(1)));
        assert!(matches!(
            s.answer(&peer(1), &req([2; 32]), true),
            Answer::NotFound
        ));
        assert!(matches!(
            s.answer(&peer(9), &req([1; 32]), true),
            Answer::Refused
        ));
        // Not on the pseudo-gradient protocol.
        assert!(matches!(
            s.answer(&peer(1), &req([1; 32]), false),
            Answer::Refused
        ));
        for i in 0..MAX_SERVED_FILES {
            let mut h = [0u8; 32];
            h[..8].copy_from_slice(&(i as u64 + 10).to_le_bytes());
            s.add_file(h, path(i));
        }
        assert_eq!(s.files.len(), MAX_SERVED_FILES);
        assert!(
            matches!(s.answer(&peer(1), &req([1; 32]), true), Answer::NotFound),
            "oldest dropped"
        );
    }

    #[test]
    fn serving_slots_are_bounded_per_member_and_in_all_and_given_back() {
        let mut s = served(9);
        for _ in 0..MAX_SERVED_PER_PEER {
            assert!(s.admit(peer(1)));
        }
        assert!(
            !s.admit(peer(1)),
            "one member holds at most MAX_SERVED_PER_PEER"
        );
        // 8 members × 8 = 64 = MAX_SERVED_STREAMS: the ninth member waits.
        for i in 2..=8 {
            for _ in 0..MAX_SERVED_PER_PEER {
                assert!(s.admit(peer(i)));
            }
        }
        assert_eq!(s.streaming, MAX_SERVED_STREAMS);
        assert!(!s.admit(peer(9)));
        // A slot dropped (as a serving task does, even when it panics) is given back.
        let shared = Arc::new(Mutex::new(s));
        drop(Slot {
            served: shared.clone(),
            peer: peer(1),
        });
        let mut s = lock(&shared);
        assert_eq!(s.streaming, MAX_SERVED_STREAMS - 1);
        assert!(s.admit(peer(9)));
        for i in 1..=9 {
            while s.streams.contains_key(&peer(i)) {
                s.release(peer(i));
            }
        }
        assert!(s.streams.is_empty() && s.streaming == 0);
    }
}
