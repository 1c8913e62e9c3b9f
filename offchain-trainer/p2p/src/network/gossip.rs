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
/// Messages of one author dropped over its rate after which it is banned: an honest member
/// never gets there.
const BAN_AFTER_DROPPED: u32 = 64;

/// A token bucket of one gossip author (Turner 1986's leaky bucket as a meter): each verified
/// message takes a token; tokens come back at [`GOSSIP_PER_INTERVAL`] per heartbeat interval up
/// to [`GOSSIP_BURST`].
#[derive(Clone, Copy, Debug)]
pub(super) struct Bucket {
    tokens: f64,
    at: Instant,
    dropped: u32,
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
        Self {
            tokens: GOSSIP_BURST,
            at: now,
            dropped: 0,
        }
    }

    /// Meters one message at `now` for a heartbeat interval of `interval`.
    pub(super) fn take(&mut self, now: Instant, interval: Duration) -> Metered {
        let refill = now.saturating_duration_since(self.at).as_secs_f64()
            / interval.as_secs_f64().max(1e-3)
            * GOSSIP_PER_INTERVAL;
        self.tokens = (self.tokens + refill).min(GOSSIP_BURST);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Metered::Pass;
        }
        self.dropped = self.dropped.saturating_add(1);
        if self.dropped >= BAN_AFTER_DROPPED {
            Metered::Ban
        } else {
            Metered::Drop
        }
    }
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

    /// A heartbeat (with the next `seq`) about `round`, announcing `payload` if any.
    pub(super) fn publish_heartbeat(&mut self, round: u32, payload: Option<PayloadRef>) {
        self.seq += 1;
        let seq = self.seq;
        self.publish(round, Body::Alive { seq, payload });
    }

    /// One heartbeat per round we still serve a payload for (the current and the previous one),
    /// so a peer still finishing the previous round learns our announcement even though we
    /// have moved on; a bare heartbeat if we have no payload for the current round yet.
    pub(super) fn publish_alive(&mut self) {
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
        // Meter the author (gossipsub checked its ed25519 signature) before our ML-DSA check:
        // one bucket per registered peer id, so the map stays as small as the member set.
        if let Some(author) = source.filter(|a| self.members.iter().any(|m| m.peer_id == *a)) {
            let now = Instant::now();
            let metered = self
                .rates
                .entry(author)
                .or_insert_with(|| Bucket::new(now))
                .take(now, self.heartbeat);
            if metered != Metered::Pass {
                if metered == Metered::Ban {
                    self.ban(
                        author,
                        format!("sent gossip over the rate ({BAN_AFTER_DROPPED} messages dropped)"),
                    );
                }
                let verdict = if metered == Metered::Ban {
                    Reject
                } else {
                    Ignore
                };
                let _ = self
                    .swarm
                    .behaviour_mut()
                    .gossipsub
                    .report_message_validation_result(&id, &propagation, verdict);
                return;
            }
        }
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_passes_a_burst_then_the_rate_and_bans_a_sustained_flood() {
        let t0 = Instant::now();
        let tick = Duration::from_secs(1);
        let mut b = Bucket::new(t0);
        for _ in 0..GOSSIP_BURST as usize {
            assert_eq!(b.take(t0, tick), Metered::Pass);
        }
        assert_eq!(b.take(t0, tick), Metered::Drop);
        // One interval later: GOSSIP_PER_INTERVAL more.
        let t1 = t0 + tick;
        for _ in 0..GOSSIP_PER_INTERVAL as usize {
            assert_eq!(b.take(t1, tick), Metered::Pass);
        }
        assert_eq!(b.take(t1, tick), Metered::Drop);
        // An honest member's two messages per interval never run dry.
        let mut honest = Bucket::new(t0);
        for i in 1..1000u32 {
            let t = t0 + tick * i;
            assert_eq!(honest.take(t, tick), Metered::Pass);
            assert_eq!(honest.take(t, tick), Metered::Pass);
        }
        // A flood is dropped, then banned after BAN_AFTER_DROPPED drops.
        let mut flood = Bucket::new(t0);
        let verdicts: Vec<Metered> = (0..GOSSIP_BURST as u32 + BAN_AFTER_DROPPED)
            .map(|_| flood.take(t0, tick))
            .collect();
        assert_eq!(verdicts.iter().filter(|v| **v == Metered::Pass).count(), 16);
        assert_eq!(verdicts.last(), Some(&Metered::Ban));
        assert_eq!(
            verdicts.iter().filter(|v| **v == Metered::Drop).count(),
            BAN_AFTER_DROPPED as usize - 1
        );
    }
}
