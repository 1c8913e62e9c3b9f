//! What a node serves (its payloads, relayed payloads, checkpoints, trace files) and the tasks
//! that answer `/synod/pseudograd/2` and `/synod/checkpoint/2` streams, with admission: only
//! registered members take a serving slot: a few reserved to each member, the rest shared
//! within a bound in all and per member.
//!
//! Evidence goes first. A transfer of a served file (a Proof-of-Learning trace state or a
//! sparse payload's residual: what verifiers and jurors fetch to judge us) is *evidence*;
//! every other transfer (checkpoints, payloads, relays) is *bulk*. A member holds at most
//! [`EVIDENCE_PER_MEMBER`] evidence transfers at once; while the node serves evidence, and
//! for [`EVIDENCE_HOLD`] after the last evidence transfer ends (longer than a verifier's or a
//! juror's wait before it asks again), a member starts a bulk transfer only while it holds
//! fewer than [`CONTENDED_PER_MEMBER`]. Members downloading our checkpoint or payload again and
//! again therefore cannot share our link out so finely that a juror's residual is cut below
//! [`Limits::slowest_kept_rate`]: once the bulk transfers running when evidence was first asked
//! for end (or are cut), at most `(EVIDENCE_PER_MEMBER + CONTENDED_PER_MEMBER) × (members − 1)`
//! transfers share it, so a node whose upload is at least that many times the slowest kept
//! rate answers every evidence request it receives again, whatever the other members do.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use libp2p::PeerId;
use tokio::sync::mpsc;

use super::client::Command;
use super::lock;
use super::uplink::{Throttled, Uplink};
use crate::message::PayloadRef;
use crate::protocol::{self, Answer, FetchRequest, Limits};
use crate::MemberSet;

/// A relayed payload: its blake3 and bytes.
type Relayed = ([u8; 32], Arc<Vec<u8>>);

/// Most checkpoints a node serves at once, the pinned ones included (θ of the last four
/// rounds, say): serving one more drops the one served longest ago — never a pinned one
/// ([`super::Client::pin_checkpoint`]: the last final checkpoint, which a (re)joining trainer
/// needs, and the one before it, where an overlapped round starts) — so a trainer's memory
/// does not grow with the rounds.
pub const MAX_SERVED_CHECKPOINTS: usize = 4;

/// How many of the served checkpoints stay pinned ([`super::Client::pin_checkpoint`]).
pub const PINNED_CHECKPOINTS: usize = 2;

/// Serving slots that every registered member holds for itself: a member with fewer than
/// this many transfers open is always admitted, whatever the others hold, so colluding members
/// that open streams and never send a request cannot make a node unavailable to anyone else
/// (its exchange fetch, a verifier's trace states, a juror's residuals and a catch-up
/// checkpoint each fit in one). At most `RESERVED_PER_MEMBER × (members − 1)` slots.
pub const RESERVED_PER_MEMBER: usize = 4;
/// Slots shared by all members beyond their reserved ones, first come first served: a
/// member's transfers past [`RESERVED_PER_MEMBER`] take one, up to [`MAX_SERVED_PER_PEER`] in
/// all. A node therefore serves at most `MAX_SERVED_STREAMS + RESERVED_PER_MEMBER × (members −
/// 1)` transfers at once, each for at most its [`Limits::body_time`] (a stream that sends no
/// request is dropped after [`Limits::stall`]).
pub const MAX_SERVED_STREAMS: usize = 64;
/// Most transfers a node serves one member at once, reserved and shared slots together.
pub const MAX_SERVED_PER_PEER: usize = 8;
/// Most evidence transfers (served files: trace states, residuals) a node serves one member at
/// once. A verifier or juror asks one author for one state after the other; the second allows
/// for a transfer the requester gave up on that the node has not yet seen end.
pub const EVIDENCE_PER_MEMBER: usize = 2;
/// Most bulk transfers (checkpoints, payloads, relays) a member holds when it starts another
/// while the node serves evidence, or did less than [`EVIDENCE_HOLD`] ago (see the module's
/// docs); otherwise [`MAX_SERVED_PER_PEER`] bounds them.
pub const CONTENDED_PER_MEMBER: usize = 2;
/// How long bulk transfers stay bounded by [`CONTENDED_PER_MEMBER`] after the last evidence
/// transfer ended: 5 minutes, longer than a verifier waits before asking again (a few blocks)
/// and than a juror's pass of its duties unless whole replays make it longer, so colluders
/// cannot refill the link in between. In a pool that verifies every round this is about
/// always: its members hold two downloads from each other at a time.
pub const EVIDENCE_HOLD: Duration = Duration::from_secs(300);

/// What a served transfer carries: evidence goes first ([`EVIDENCE_PER_MEMBER`],
/// [`CONTENDED_PER_MEMBER`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) enum Transfer {
    /// A served file: a Proof-of-Learning trace state or a residual.
    Evidence,
    /// A checkpoint, our payload, or a relayed payload.
    Bulk,
}

/// What a node serves, shared by the event loop (heartbeats announce the payloads) and the
/// serving tasks (which answer requests without going through the loop).
pub(super) struct Served {
    pub(super) me: u32,
    pub(super) members: Arc<MemberSet>,
    /// The current outer round (payloads and relays of older rounds than the previous are dropped).
    pub(super) round: u32,
    /// Our payload per round with its announcement (digest computed once).
    pub(super) payloads: HashMap<u32, (PayloadRef, Arc<Vec<u8>>)>,
    /// Checkpoints we serve, oldest first; at most [`MAX_SERVED_CHECKPOINTS`].
    pub(super) checkpoints: VecDeque<([u8; 32], Arc<Vec<u8>>)>,
    /// The served checkpoints never dropped, oldest first; at most [`PINNED_CHECKPOINTS`]
    /// (see [`super::Client::pin_checkpoint`]).
    pub(super) pinned: VecDeque<[u8; 32]>,
    /// Objects served from disk by blake3 on the checkpoint protocol (Proof-of-Learning trace
    /// states and residuals, [`super::Client::serve_file`]), until the caller stops serving
    /// them ([`super::Client::unserve_file`]). Not bounded by count: they are our own
    /// evidence, which must stay served for as long as it can be disputed (a count bound would
    /// drop a round's residual before its challenges close, and its jurors would find it
    /// unserved), and each entry stands for a file on disk many times its size.
    pub(super) files: HashMap<[u8; 32], std::path::PathBuf>,
    /// Other members' payloads we fetched, served on to peers whose fetch from the author
    /// failed: (round, member) → (digest, bytes); current and previous round only.
    pub(super) relayed: HashMap<(u32, u32), Relayed>,
    /// Members our own payloads are served to; `None`: every member (see
    /// [`super::Client::withhold_own_payloads`]).
    pub(super) serve_own_to: Option<BTreeSet<u32>>,
    /// Members whose payload requests we take and never answer (fault injection,
    /// [`super::Client::stall_payloads_to`]).
    pub(super) stall_to: BTreeSet<u32>,
    /// Members whose payload requests we answer with the header of the data and then
    /// nothing, holding the stream (fault injection, [`super::Client::drip_payloads_to`]).
    pub(super) drip_to: BTreeSet<u32>,
    /// Members to whom relayed payloads are served as garbage (fault injection,
    /// [`super::Client::garble_relays_to`]), and how many garbage bodies were served.
    pub(super) garble_to: BTreeSet<u32>,
    pub(super) garbled: std::sync::atomic::AtomicU64,
    /// Transfers being served, per peer (no entry: none).
    pub(super) streams: HashMap<PeerId, usize>,
    /// Sum of `streams`.
    pub(super) streaming: usize,
    /// Transfers in shared slots: the sum over peers of their transfers past
    /// [`RESERVED_PER_MEMBER`]; at most [`MAX_SERVED_STREAMS`].
    pub(super) shared: usize,
    /// Evidence and bulk transfers being served, per peer (no entry: none).
    pub(super) transfers: HashMap<(PeerId, Transfer), usize>,
    /// Evidence transfers being served, all peers.
    pub(super) evidence: usize,
    /// When the last evidence transfer ended: bulk stays contended for `hold` after it.
    pub(super) evidence_ended: Option<tokio::time::Instant>,
    /// How long bulk stays contended after the last evidence transfer ([`EVIDENCE_HOLD`]).
    pub(super) hold: Duration,
}

impl Served {
    pub(super) fn new(me: u32, members: Arc<MemberSet>) -> Self {
        Self {
            me,
            members,
            round: 0,
            payloads: HashMap::new(),
            checkpoints: VecDeque::new(),
            pinned: VecDeque::new(),
            files: HashMap::new(),
            relayed: HashMap::new(),
            serve_own_to: None,
            stall_to: BTreeSet::new(),
            drip_to: BTreeSet::new(),
            garble_to: BTreeSet::new(),
            garbled: std::sync::atomic::AtomicU64::new(0),
            streams: HashMap::new(),
            streaming: 0,
            shared: 0,
            transfers: HashMap::new(),
            evidence: 0,
            evidence_ended: None,
            hold: EVIDENCE_HOLD,
        }
    }

    pub(super) fn set_round(&mut self, r: u32) {
        self.round = r;
        self.payloads.retain(|k, _| *k + 2 > r);
        self.relayed.retain(|(k, _), _| *k + 2 > r);
    }

    pub(super) fn add_file(&mut self, hash: [u8; 32], path: std::path::PathBuf) {
        self.files.insert(hash, path);
    }

    pub(super) fn add_checkpoint(&mut self, hash: [u8; 32], bytes: Arc<Vec<u8>>) {
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

    /// Takes a serving slot for `peer` if it is a registered member and under the limits: one
    /// of its [`RESERVED_PER_MEMBER`] if it holds fewer, else one of the
    /// [`MAX_SERVED_STREAMS`] shared slots if any is free, never more than
    /// [`MAX_SERVED_PER_PEER`] in all (a non-member takes none: it cannot crowd members out).
    pub(super) fn admit(&mut self, peer: PeerId) -> bool {
        let mine = self.streams.get(&peer).copied().unwrap_or(0);
        let shared = mine >= RESERVED_PER_MEMBER;
        if self.members.by_peer(&peer).is_none()
            || mine >= MAX_SERVED_PER_PEER
            || (shared && self.shared >= MAX_SERVED_STREAMS)
        {
            return false;
        }
        self.streams.insert(peer, mine + 1);
        self.streaming += 1;
        self.shared += usize::from(shared);
        true
    }

    /// Gives back a slot [`Served::admit`] took for `peer` (a shared one while it holds more
    /// than its reserved ones).
    fn release(&mut self, peer: PeerId) {
        if let Some(n) = self.streams.get_mut(&peer) {
            if *n > RESERVED_PER_MEMBER {
                self.shared -= 1;
            }
            *n -= 1;
            self.streaming -= 1;
            if *n == 0 {
                self.streams.remove(&peer);
            }
        }
    }

    /// Whether bulk transfers are contended at `now`: evidence is being served, or was less
    /// than `hold` ago.
    fn contended(&self, now: tokio::time::Instant) -> bool {
        self.evidence > 0 || self.evidence_ended.is_some_and(|t| now < t + self.hold)
    }

    /// Starts a `kind` transfer to `peer` (which holds a slot) if it is under that kind's bound
    /// at `now` ([`EVIDENCE_PER_MEMBER`]; [`CONTENDED_PER_MEMBER`] while contended); `false`:
    /// the request is refused (the requester asks again or elsewhere).
    pub(super) fn start(
        &mut self,
        peer: PeerId,
        kind: Transfer,
        now: tokio::time::Instant,
    ) -> bool {
        let held = self.transfers.get(&(peer, kind)).copied().unwrap_or(0);
        let refused = match kind {
            Transfer::Evidence => held >= EVIDENCE_PER_MEMBER,
            Transfer::Bulk => held >= CONTENDED_PER_MEMBER && self.contended(now),
        };
        if refused {
            return false;
        }
        self.transfers.insert((peer, kind), held + 1);
        if kind == Transfer::Evidence {
            self.evidence += 1;
        }
        true
    }

    /// Ends a transfer [`Served::start`] started, at `now`.
    fn end(&mut self, peer: PeerId, kind: Transfer, now: tokio::time::Instant) {
        if let Some(n) = self.transfers.get_mut(&(peer, kind)) {
            *n -= 1;
            if *n == 0 {
                self.transfers.remove(&(peer, kind));
            }
            if kind == Transfer::Evidence {
                self.evidence -= 1;
                self.evidence_ended = Some(now);
            }
        }
    }

    /// Stops serving the file of `hash`.
    pub(super) fn remove_file(&mut self, hash: &[u8; 32]) {
        self.files.remove(hash);
    }

    /// Pins the served checkpoint `hash` (see [`super::Client::pin_checkpoint`]); `false` if it
    /// is not served.
    pub(super) fn pin_checkpoint(&mut self, hash: [u8; 32]) -> bool {
        let served = self.checkpoints.iter().any(|(h, _)| *h == hash);
        if served {
            self.pinned.retain(|h| *h != hash);
            self.pinned.push_back(hash);
            while self.pinned.len() > PINNED_CHECKPOINTS {
                self.pinned.pop_front();
            }
        }
        served
    }

    /// The answer to `req` from `peer` on the pseudo-gradient (`checkpoint == false`) or the
    /// checkpoint protocol.
    pub(super) fn answer(&self, peer: &PeerId, req: &FetchRequest, checkpoint: bool) -> Answer {
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
                let relayed = || self.relayed.get(&(*round, *member)).map(|(d, b)| (*d, b));
                match own.or_else(relayed) {
                    Some((d, bytes)) if d == *digest => {
                        if *member != self.me && self.garble_to.contains(&asker) {
                            self.garbled
                                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            return Answer::Data(Arc::new(bytes.iter().map(|b| !b).collect()));
                        }
                        Answer::Data(bytes.clone())
                    }
                    _ => Answer::NotFound,
                }
            }
            (FetchRequest::Checkpoint { hash }, true) => {
                match self.checkpoints.iter().find(|(h, _)| h == hash) {
                    Some((_, c)) => Answer::Data(c.clone()),
                    None => match self.files.get(hash) {
                        Some(path) => Answer::File(path.clone()),
                        None => Answer::NotFound,
                    },
                }
            }
            _ => Answer::Refused,
        }
    }
}

/// A serving slot and the transfer it carries, given back when dropped (also if the serving
/// task panics or is aborted).
struct Slot {
    served: Arc<Mutex<Served>>,
    peer: PeerId,
    transfer: Option<Transfer>,
}

impl Slot {
    /// The answer to `req` on the pseudo-gradient (`checkpoint == false`) or the checkpoint
    /// protocol, with its transfer started ([`Served::start`]); `Refused` over the bound.
    fn answer(&mut self, req: &FetchRequest, checkpoint: bool) -> Answer {
        let mut s = lock(&self.served);
        let answer = s.answer(&self.peer, req, checkpoint);
        let kind = match answer {
            Answer::File(_) => Transfer::Evidence,
            Answer::Data(_) => Transfer::Bulk,
            Answer::NotFound | Answer::Refused => return answer,
        };
        if !s.start(self.peer, kind, tokio::time::Instant::now()) {
            tracing::debug!(peer = %self.peer, ?kind, "transfer refused: evidence goes first");
            return Answer::Refused;
        }
        self.transfer = Some(kind);
        answer
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut s = lock(&self.served);
        if let Some(kind) = self.transfer {
            s.end(self.peer, kind, tokio::time::Instant::now());
        }
        s.release(self.peer);
    }
}

/// Answers the streams opened to us on one protocol, each in a task of its own, until the event
/// loop stops, sending at the pace of `uplink` if there is one. A stream from a non-member or
/// over the slots is dropped unanswered; a malformed request bans the peer.
pub(super) async fn serve_incoming(
    mut incoming: libp2p_stream::IncomingStreams,
    served: Arc<Mutex<Served>>,
    tx: mpsc::WeakSender<Command>,
    mut stopped: tokio::sync::watch::Receiver<()>,
    limits: Limits,
    uplink: Option<Arc<Uplink>>,
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
        let (stall, drip) = {
            let mut s = lock(&served);
            if !s.admit(peer) {
                tracing::debug!(%peer, "not a member, or busy: stream dropped");
                continue;
            }
            let asker = s.members.by_peer(&peer).map(|m| m.index);
            let faulty = |to: &BTreeSet<u32>| !checkpoint && asker.is_some_and(|m| to.contains(&m));
            (faulty(&s.stall_to), faulty(&s.drip_to))
        };
        let mut slot = Slot {
            served: served.clone(),
            peer,
            transfer: None,
        };
        let tx = tx.clone();
        let uplink = uplink.clone();
        let mut until_stopped = stopped.clone();
        tokio::spawn(async move {
            if stall {
                // Hold the stream unanswered past the requester's patience, or until we stop.
                tokio::select! {
                    _ = until_stopped.changed() => {}
                    _ = tokio::time::sleep(limits.stall.saturating_mul(2)) => {}
                }
                drop((stream, slot));
                return;
            }
            let answer = |req: &FetchRequest| slot.answer(req, checkpoint);
            if drip {
                // The header, then nothing until the requester's pace cuts us, or we stop.
                tokio::select! {
                    _ = until_stopped.changed() => {}
                    _ = protocol::respond_header_only(&mut stream, limits, answer) => {}
                }
                drop(slot);
                return;
            }
            let r = match &uplink {
                Some(u) => {
                    protocol::respond(&mut Throttled::new(&mut stream, u), limits, answer).await
                }
                None => protocol::respond(&mut stream, limits, answer).await,
            };
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

#[cfg(test)]
mod tests;
