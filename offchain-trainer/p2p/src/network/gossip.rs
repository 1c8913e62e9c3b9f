//! The pool's gossipsub topic: signed heartbeats and leaves, published by the event loop and
//! verified on arrival (membership, signature, round window); two payloads signed for one round
//! are kept as an [`Equivocation`] and the sender is banned.

use std::sync::Arc;
use std::time::{Duration, Instant};

use libp2p::{gossipsub, identity, PeerId};
use parity_scale_codec::Encode;

use super::event_loop::EventLoop;
use super::{lock, Announced, Equivocation};
use crate::message::{self, Body, Envelope, PayloadRef, Rejection};
use crate::NetError;

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

/// Messages of one author verified in a burst (the bucket's size): an honest member sends at
/// most two per heartbeat interval (its current and previous round), and gossip may deliver a
/// few intervals' worth at once after a reconnection.
const GOSSIP_BURST: f64 = 16.0;
/// Messages of one author verified per heartbeat interval in the long run (twice an honest
/// member's most).
const GOSSIP_PER_INTERVAL: f64 = 4.0;
/// Messages of one author dropped over its rate (less what the refill forgives) after which
/// it is banned. Only what the author sends us itself counts towards a ban ([`Meters`]):
/// copies relayed by others are metered per relay and dropped, never charged to the author.
const BAN_AFTER_DROPPED: u32 = 64;
/// Most (author, relay) meters kept ([`Meters`]); past it, idle ones are forgotten first.
const MAX_METERS: usize = 4096;
/// An author's messages over all relays are metered at this many times one relay's burst and
/// rate ([`Meters`]).
const AUTHOR_SCALE: f64 = 4.0;

/// A token bucket of one gossip author (Turner 1986's leaky bucket as a meter): each verified
/// message takes a token; tokens come back at [`GOSSIP_PER_INTERVAL`] per heartbeat interval up
/// to [`GOSSIP_BURST`].
#[derive(Clone, Copy, Debug)]
pub(super) struct Bucket {
    tokens: f64,
    /// Multiple of [`GOSSIP_BURST`] and [`GOSSIP_PER_INTERVAL`] this bucket holds and refills.
    scale: f64,
    at: Instant,
    /// Messages dropped over the rate, forgotten at the refill rate (an honest member's rare
    /// overrun fades; a flood accumulates).
    dropped: f64,
}

/// What [`Bucket::take`] says about one message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Metered {
    /// Within the rate: verify it.
    Pass,
    /// Over the rate: drop it unverified.
    Drop,
    /// Over the rate [`BAN_AFTER_DROPPED`] times: ban the author.
    Ban,
}

impl Bucket {
    /// A full bucket at `now`.
    pub(super) fn new(now: Instant) -> Self {
        Self::scaled(now, 1.0)
    }

    /// A full bucket at `now` of `scale` times the burst and the rate.
    pub(super) fn scaled(now: Instant, scale: f64) -> Self {
        Self {
            tokens: GOSSIP_BURST * scale,
            scale,
            at: now,
            dropped: 0.0,
        }
    }

    /// Meters one message at `now` for a heartbeat interval of `interval`.
    pub(super) fn take(&mut self, now: Instant, interval: Duration) -> Metered {
        let refill = now.saturating_duration_since(self.at).as_secs_f64()
            / interval.as_secs_f64().max(1e-3)
            * GOSSIP_PER_INTERVAL
            * self.scale;
        self.tokens = (self.tokens + refill).min(GOSSIP_BURST * self.scale);
        self.dropped = (self.dropped - refill).max(0.0);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Metered::Pass;
        }
        self.dropped += 1.0;
        if self.dropped >= f64::from(BAN_AFTER_DROPPED) {
            Metered::Ban
        } else {
            Metered::Drop
        }
    }
}

/// The gossip meters of one node: a [`Bucket`] per (author, relay) pair and one per author
/// over all relays, and the highest heartbeat number verified per (author, round).
///
/// Keyed by relay, a peer that replays an author's fresh heartbeats (kept from the last
/// [`FRESH_MS`], re-sent with the author's own gossipsub signature to a node whose duplicate
/// cache is empty: one that just started) uses up its own meter of that author, not the
/// author's: the replays are dropped, the author's heartbeats through any other path pass,
/// and only an author flooding us itself (`relay == author`) is banned. A heartbeat numbered
/// at most the highest verified one of its author and round, announcing nothing new, is a
/// copy and dropped free; a lower-numbered one announcing another payload is metered and
/// verified (it may prove an equivocation).
#[derive(Default)]
pub(super) struct Meters {
    buckets: std::collections::HashMap<(PeerId, PeerId), Bucket>,
    /// Each author's messages over every relay ([`AUTHOR_SCALE`] times one relay's burst and
    /// rate; over it: dropped, never a ban), so that an author relaying its own flood through
    /// many identities is still bounded.
    authors: std::collections::HashMap<PeerId, Bucket>,
    latest: std::collections::HashMap<(PeerId, u32), (u64, Option<PayloadRef>)>,
}

impl Meters {
    /// Meters one message of `author` relayed to us by `relay` at `now` (heartbeat interval
    /// `interval`): [`Metered::Ban`] only when the author sent it itself.
    pub(super) fn take(
        &mut self,
        author: PeerId,
        relay: PeerId,
        now: Instant,
        interval: Duration,
    ) -> Metered {
        if self.buckets.len() >= MAX_METERS && !self.buckets.contains_key(&(author, relay)) {
            self.forget_idle(now, interval);
        }
        let metered = self
            .buckets
            .entry((author, relay))
            .or_insert_with(|| Bucket::new(now))
            .take(now, interval);
        let metered = match metered {
            Metered::Ban if relay != author => Metered::Drop,
            m => m,
        };
        if metered != Metered::Pass {
            return metered;
        }
        match self
            .authors
            .entry(author)
            .or_insert_with(|| Bucket::scaled(now, AUTHOR_SCALE))
            .take(now, interval)
        {
            Metered::Pass => Metered::Pass,
            Metered::Drop | Metered::Ban => Metered::Drop,
        }
    }

    /// Whether a heartbeat of `author` about `round` numbered `seq` announcing `payload` is a
    /// copy: numbered at most the highest verified one and announcing what that one did.
    pub(super) fn is_copy(
        &self,
        author: PeerId,
        round: u32,
        seq: u64,
        payload: Option<PayloadRef>,
    ) -> bool {
        self.latest
            .get(&(author, round))
            .is_some_and(|(top, announced)| {
                seq <= *top && (payload.is_none() || payload == *announced)
            })
    }

    /// Records a verified heartbeat of `author` about `round` numbered `seq` announcing
    /// `payload` (the first announcement of the round is kept).
    pub(super) fn verified(
        &mut self,
        author: PeerId,
        round: u32,
        seq: u64,
        payload: Option<PayloadRef>,
    ) {
        let e = self.latest.entry((author, round)).or_insert((seq, payload));
        e.0 = e.0.max(seq);
        if e.1.is_none() {
            e.1 = payload;
        }
    }

    /// Keeps the meters of `author`s for which `keep` holds, and heartbeat numbers of rounds
    /// from `from_round` on.
    pub(super) fn retain(&mut self, keep: impl Fn(&PeerId) -> bool, from_round: u32) {
        self.buckets.retain(|(author, _), _| keep(author));
        self.authors.retain(|author, _| keep(author));
        self.latest
            .retain(|(author, round), _| keep(author) && *round >= from_round);
    }

    /// Forgets the meters idle long enough to be full again (what a new one would be), and, if
    /// that is not enough, those of relays that are not the author.
    fn forget_idle(&mut self, now: Instant, interval: Duration) {
        let refilled =
            interval.mul_f64((GOSSIP_BURST + f64::from(BAN_AFTER_DROPPED)) / GOSSIP_PER_INTERVAL);
        self.buckets
            .retain(|_, b| now.saturating_duration_since(b.at) < refilled);
        if self.buckets.len() >= MAX_METERS {
            self.buckets.retain(|(author, relay), _| author == relay);
        }
    }
}

/// How far a heartbeat's `seq` (its sender's wall clock, milliseconds) may be from ours, in
/// milliseconds: older or further ahead, it is a stale copy and dropped free (neither
/// verified nor charged to its author). Within it, gossipsub's duplicate cache
/// ([`DUPLICATE_CACHE`]) drops copies of what it already saw, so a replay never costs the
/// member that signed it. Members' clocks must agree to within this.
pub const FRESH_MS: u64 = 120_000;
/// How long gossipsub remembers the ids of messages it received: longer than [`FRESH_MS`].
const DUPLICATE_CACHE: Duration = Duration::from_secs(180);

/// Milliseconds since the Unix epoch by this machine's clock (0 if it is set before 1970).
pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Whether a heartbeat numbered `seq` is fresh at `now` (both in milliseconds).
pub(super) fn fresh(seq: u64, now: u64) -> bool {
    seq.abs_diff(now) <= FRESH_MS
}

/// Rounds an untaken [`Equivocation`] is kept after its own (bounds memory if nobody takes
/// them; a trainer takes them every round).
pub const EQUIVOCATION_ROUNDS: u32 = 8;

/// The gossipsub behaviour of the pool's `topic`, signed with `key`.
///
/// # Errors
/// [`NetError::Config`] if gossipsub refuses the configuration.
pub(super) fn behaviour(
    key: &identity::Keypair,
    topic: &gossipsub::IdentTopic,
) -> Result<gossipsub::Behaviour, NetError> {
    let gcfg = gossipsub::ConfigBuilder::default()
        .heartbeat_interval(Duration::from_millis(500))
        .validation_mode(gossipsub::ValidationMode::Strict)
        .validate_messages()
        .max_transmit_size(GOSSIP_BUFFER_BYTES)
        .duplicate_cache_time(DUPLICATE_CACHE)
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
    gossipsub::Behaviour::new(gossipsub::MessageAuthenticity::Signed(key.clone()), gcfg)
        .map_err(|e| NetError::Config(e.to_string()))
}

impl EventLoop {
    /// Signs `body` about `round` as us and publishes it on the pool topic.
    pub(super) fn publish(&mut self, round: u32, body: Body) {
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
    pub(super) fn publish_bytes(&mut self, bytes: Vec<u8>) {
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

    /// The next heartbeat number: the wall clock's milliseconds, and above the last one (so
    /// numbers rise across restarts, and peers can tell a stale copy by its age, [`fresh`]).
    pub(super) fn next_seq(&mut self) -> u64 {
        self.seq = self.seq.saturating_add(1).max(now_ms());
        self.seq
    }

    /// A heartbeat (with the next `seq`) about `round`, announcing `payload` if any.
    pub(super) fn publish_heartbeat(&mut self, round: u32, payload: Option<PayloadRef>) {
        let seq = self.next_seq();
        self.publish(round, Body::Alive { seq, payload });
    }

    /// One heartbeat per round we still serve a payload for (the current and the previous one),
    /// so a peer still finishing the previous round learns our announcement even though we
    /// have moved on; a bare heartbeat if we have no payload for the current round yet.
    pub(super) fn publish_alive(&mut self) {
        if self.passive {
            self.next_seq();
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

    /// Meters the author of a prechecked message relayed by `relay` before its signature is
    /// verified: `None` to go on, or the verdict to report. A heartbeat that is not [`fresh`]
    /// is a stale copy, and one numbered at most the highest verified of its author and round
    /// with nothing new a copy ([`Meters::is_copy`]): both are dropped without charging
    /// anyone. Anything else takes a token of the (author, relay) meter (over the rate: dropped
    /// unverified; the author banned after [`BAN_AFTER_DROPPED`] if it sent them itself).
    fn meter(
        &mut self,
        source: Option<PeerId>,
        relay: PeerId,
        s: &message::Signed,
    ) -> Option<gossipsub::MessageAcceptance> {
        use gossipsub::MessageAcceptance::{Ignore, Reject};
        let author = source?;
        if let Body::Alive { seq, payload } = s.envelope.body {
            if !fresh(seq, now_ms()) || self.meters.is_copy(author, s.envelope.round, seq, payload)
            {
                return Some(Ignore);
            }
        }
        match self
            .meters
            .take(author, relay, Instant::now(), self.heartbeat)
        {
            Metered::Pass => None,
            Metered::Drop => Some(Ignore),
            Metered::Ban => {
                self.ban(
                    author,
                    format!("sent gossip over the rate ({BAN_AFTER_DROPPED} messages dropped)"),
                );
                Some(Reject)
            }
        }
    }

    /// Verifies one gossip message and records what it says: liveness, the round its author is
    /// in, its announced payload (the first per round; a second, different one is an
    /// equivocation: kept as proof, author banned), its leave. Invalid senders are banned.
    pub(super) fn on_gossip(
        &mut self,
        source: Option<PeerId>,
        propagation: PeerId,
        id: gossipsub::MessageId,
        data: &[u8],
    ) {
        use gossipsub::MessageAcceptance::{Accept, Ignore, Reject};
        let prechecked = message::precheck(data, &self.members, self.round.saturating_sub(1))
            .and_then(|s| {
                // The gossipsub author signature must come from the same peer the envelope
                // names: from here on the message is the registered member's own (or a copy).
                if source.map(|s| s.to_bytes()) == Some(s.envelope.peer_id.clone()) {
                    Ok(s)
                } else {
                    Err(Rejection::PeerMismatch)
                }
            });
        let opened = match prechecked {
            Ok(s) => match self.meter(source, propagation, &s) {
                Some(verdict) => {
                    let _ = self
                        .swarm
                        .behaviour_mut()
                        .gossipsub
                        .report_message_validation_result(&id, &propagation, verdict);
                    return;
                }
                None => message::verify(&s, &self.members).map(|()| s.envelope),
            },
            Err(r) => Err(r),
        };
        let verdict = match opened {
            Ok(e) => {
                if let (Body::Alive { seq, payload }, Some(author)) = (&e.body, source) {
                    self.meters.verified(author, e.round, *seq, *payload);
                }
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
                            s.conflicting
                                .entry((e.round, e.member))
                                .or_insert_with(|| Announced {
                                    payload: p,
                                    signed: Arc::new(data.to_vec()),
                                });
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
}

#[cfg(test)]
mod tests;
