//! The [`Client`] handle: cheap to clone, every call a [`Command`] to the event loop or a read
//! of the state it shares.

use std::collections::BTreeSet;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use libp2p::{Multiaddr, PeerId};
use tokio::sync::{mpsc, oneshot};

use super::serve::Served;
use super::{lock, Announced, Equivocation, Snapshot};
#[allow(unused_imports)]
use super::{MAX_SERVED_CHECKPOINTS, PINNED_CHECKPOINTS};
use crate::message::PayloadRef;
use crate::protocol::{
    self, Expect, FetchRequest, Limits, CHECKPOINT_PROTOCOL, PSEUDOGRAD_PROTOCOL,
};
use crate::{MemberSet, NetError};

/// What a [`Client`] asks of the event loop.
pub(super) enum Command {
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
    pub(super) tx: mpsc::Sender<Command>,
    pub(super) shared: Arc<Mutex<Snapshot>>,
    /// This node's peer id.
    pub peer_id: PeerId,
    /// This node's member index.
    pub me: u32,
    pub(super) members: Arc<Mutex<Arc<MemberSet>>>,
    pub(super) served: Arc<Mutex<Served>>,
    pub(super) control: libp2p_stream::Control,
    pub(super) limits: Limits,
    /// Where distrusted relays are recorded ([`super::NetConfig::distrust_file`]).
    pub(super) distrust_file: Option<Arc<std::path::PathBuf>>,
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
    /// Served until [`Client::unserve_file`] (no count bound: our evidence stays served for
    /// as long as it can be disputed). The caller wrote `path` with content hashing to `hash`;
    /// the fetcher checks it.
    pub fn serve_file(&self, hash: [u8; 32], path: std::path::PathBuf) {
        lock(&self.served).add_file(hash, path);
    }

    /// Stops serving the file of `hash` ([`Client::serve_file`]).
    pub fn unserve_file(&self, hash: &[u8; 32]) {
        lock(&self.served).remove_file(hash);
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
        Ok(lock(&self.served).pin_checkpoint(hash))
    }

    /// Opens a stream to `peer` and fetches one object (see [`crate::protocol`]).
    async fn fetch(
        &self,
        peer: PeerId,
        protocol: libp2p::StreamProtocol,
        req: FetchRequest,
        expect: Expect,
        answered: Option<&AtomicBool>,
    ) -> Result<Vec<u8>, NetError> {
        let mut stream = tokio::time::timeout(
            self.limits.stall,
            self.control.clone().open_stream(peer, protocol),
        )
        .await
        .map_err(|_| NetError::Request("opening a stream timed out".into()))?
        .map_err(|e| NetError::Request(e.to_string()))?;
        protocol::request_signalled(&mut stream, &req, expect, self.limits, answered).await
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
        self.fetch_payload_signalled(peer, member, round, announced, max_bytes, None)
            .await
    }

    /// Fetches from `peer` (the author or a relay) member `member`'s payload for `round` under
    /// any announcement of it we saw ([`Snapshot::announcements`]: the first, then the one
    /// that conflicted with it if the member equivocated), in that order, and returns the
    /// announcement the bytes match with them. An equivocator's two payloads may have reached
    /// the pool in different orders, and an included set holds the one its aggregators saw
    /// first.
    ///
    /// # Errors
    /// [`NetError::NotAnnounced`] if we saw no announcement; [`NetError::DigestMismatch`] at
    /// once (the peer served wrong bytes); else the last announcement's error, as
    /// [`Client::fetch_payload`].
    pub async fn fetch_announced_from(
        &self,
        peer: PeerId,
        member: u32,
        round: u32,
        max_bytes: u64,
    ) -> Result<(Announced, Vec<u8>), NetError> {
        let seen = self.snapshot();
        let mut last = NetError::NotAnnounced { round, member };
        for a in seen.announcements(round, member) {
            match self
                .fetch_payload_from(peer, member, round, a.payload, max_bytes)
                .await
            {
                Ok(bytes) => return Ok((a.clone(), bytes)),
                Err(e @ NetError::DigestMismatch) => return Err(e),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// As [`Client::fetch_payload_from`], and sets `answered` once `peer` has answered with
    /// the payload's header (see [`crate::protocol::request_signalled`]).
    ///
    /// # Errors
    /// As [`Client::fetch_payload`].
    pub async fn fetch_payload_signalled(
        &self,
        peer: PeerId,
        member: u32,
        round: u32,
        announced: PayloadRef,
        max_bytes: u64,
        answered: Option<&AtomicBool>,
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
        self.fetch(peer, PSEUDOGRAD_PROTOCOL, req, expect, answered)
            .await
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
            None,
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

    /// Fault injection (tests): takes every payload request (ours or relayed) from the members
    /// in `to` and does not answer it: each stream is held for twice our `Limits::stall` (or
    /// until the node stops), so those members' fetches from us stall until their own limits
    /// cut them (a seat that holds its requesters' streams; empty: answer everyone again).
    ///
    /// # Errors
    /// None today; `Result` for symmetry with the other calls.
    pub async fn stall_payloads_to(&self, to: BTreeSet<u32>) -> Result<(), NetError> {
        lock(&self.served).stall_to = to;
        Ok(())
    }

    /// Fault injection (tests): answers every payload request (ours or relayed) of the
    /// members in `to` with the data's header and then sends nothing, holding the stream for
    /// twice our `Limits::stall` (or until the node stops): each of their fetches from us
    /// "answers" and is then cut by its pace (a source that drips; empty: answer everyone
    /// again).
    ///
    /// # Errors
    /// None today; `Result` for symmetry with the other calls.
    pub async fn drip_payloads_to(&self, to: BTreeSet<u32>) -> Result<(), NetError> {
        lock(&self.served).drip_to = to;
        Ok(())
    }

    /// This node's transfer limits (`NetConfig::limits`): what its fetches cut a drip at.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Fault injection (tests): answers the payload requests of the members in `to` for
    /// payloads we relay (not our own) with as many bytes of garbage (each byte of the
    /// relayed payload inverted), at full speed: a relay that makes its requesters download a
    /// body only to fail its digest check at the end (empty: serve everyone the real bytes).
    ///
    /// # Errors
    /// None today; `Result` for symmetry with the other calls.
    pub async fn garble_relays_to(&self, to: BTreeSet<u32>) -> Result<(), NetError> {
        lock(&self.served).garble_to = to;
        Ok(())
    }

    /// Garbage bodies served so far under [`Client::garble_relays_to`].
    pub fn garbled_bodies(&self) -> u64 {
        lock(&self.served)
            .garbled
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Stops asking `peer` to relay payloads ([`Snapshot::distrusted`]): it served a body that
    /// did not hash to the digest asked for, which no honest peer does. Its own payloads are
    /// still fetched from it. Recorded in the node's distrust file, if it has one
    /// ([`super::NetConfig::distrust_file`]), so that the distrust outlives a restart; a
    /// failed write is logged (the distrust then lasts as long as the process).
    pub fn distrust_relay(&self, peer: PeerId) {
        if lock(&self.shared).distrusted.insert(peer) {
            tracing::warn!(%peer, "served a payload body with the wrong digest: not asked to relay again");
            if let Some(path) = &self.distrust_file {
                use std::io::Write;
                let written = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path.as_ref())
                    .and_then(|mut f| writeln!(f, "{peer}"));
                if let Err(e) = written {
                    tracing::warn!(
                        "cannot record the distrust of {peer} in {}: {e}",
                        path.display()
                    );
                }
            }
        }
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
