//! The event loop: one task owning the swarm, driven by [`Command`]s from the [`Client`], swarm
//! events and the heartbeat tick.
//!
//! [`Client`]: super::Client

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use libp2p::swarm::dial_opts::{DialOpts, PeerCondition};
use libp2p::swarm::SwarmEvent;
use libp2p::{gossipsub, identify, PeerId, Swarm};
use tokio::sync::mpsc;

use super::client::Command;
use super::gossip::EQUIVOCATION_ROUNDS;
use super::serve::Served;
use super::{lock, pending, Behaviour, BehaviourEvent, Snapshot};
use crate::message::Body;
use crate::{MemberKey, MemberSet};

/// The state the event loop owns.
pub(super) struct EventLoop {
    pub(super) swarm: Swarm<Behaviour>,
    pub(super) rx: mpsc::Receiver<Command>,
    pub(super) shared: Arc<Mutex<Snapshot>>,
    pub(super) topic: gossipsub::IdentTopic,
    pub(super) members: Arc<MemberSet>,
    pub(super) key: Arc<MemberKey>,
    pub(super) me: u32,
    pub(super) round: u32,
    pub(super) seq: u64,
    /// What we serve (our payloads are announced in heartbeats).
    pub(super) served: Arc<Mutex<Served>>,
    pub(super) heartbeat: Duration,
    /// No heartbeats while set (see [`Client::set_passive`]).
    pub(super) passive: bool,
    /// Gossip meters of members' messages, per relay ([`super::gossip::Meters`]).
    pub(super) meters: super::gossip::Meters,
    /// Peers outside the pool blocked for a bad message.
    pub(super) blocked_outsiders: BlockedOutsiders,
    /// The bootnodes, dialled again on the heartbeat while we are not connected to them.
    pub(super) bootnodes: super::bootnodes::Bootnodes,
    /// Dropped with the loop: tells the serving tasks to stop.
    pub(super) _stop: tokio::sync::watch::Sender<()>,
}

/// Most peers outside the pool kept blocked at once ([`EventLoop::ban`]).
pub(super) const MAX_BLOCKED_OUTSIDERS: usize = 1024;

/// The peers outside the pool that are blocked, oldest first: at most
/// [`MAX_BLOCKED_OUTSIDERS`], so that an attacker making a new identity per bad message makes
/// us unblock its oldest rather than grow without bound.
#[derive(Default)]
pub(super) struct BlockedOutsiders(std::collections::VecDeque<PeerId>);

impl BlockedOutsiders {
    /// Whether `peer` is blocked.
    pub(super) fn contains(&self, peer: &PeerId) -> bool {
        self.0.contains(peer)
    }

    /// Takes `peer` off the list (it is a member now: its ban is kept for good).
    pub(super) fn forget(&mut self, peer: &PeerId) {
        self.0.retain(|p| p != peer);
    }

    /// Adds `peer`; returns the peer to unblock if that put us over the bound.
    pub(super) fn block(&mut self, peer: PeerId) -> Option<PeerId> {
        if !self.0.contains(&peer) {
            self.0.push_back(peer);
        }
        (self.0.len() > MAX_BLOCKED_OUTSIDERS)
            .then(|| self.0.pop_front())
            .flatten()
    }
}

impl EventLoop {
    /// Runs until a [`Command::Shutdown`] or every [`super::Client`] is dropped.
    pub(super) async fn run(mut self) {
        let mut tick = tokio::time::interval(self.heartbeat);
        // After a stall, one heartbeat rather than every missed one at once (peers meter us).
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut ticks = 0u64;
        loop {
            tokio::select! {
                ev = self.swarm.select_next_some() => self.on_swarm(ev),
                cmd = self.rx.recv() => match cmd {
                    None | Some(Command::Shutdown) => break,
                    Some(c) => self.on_command(c),
                },
                _ = tick.tick() => {
                    self.publish_alive();
                    self.dial_missing_peers();
                    ticks += 1;
                    if ticks % 10 < 2 {
                        let _ = self.swarm.behaviour_mut().kad.bootstrap();
                    }
                }
            }
        }
    }

    /// Dials every member we are not connected to (by peer id: the addresses Kademlia and
    /// identify learned) and every bootnode we are not connected to ([`super::bootnodes`]).
    fn dial_missing_peers(&mut self) {
        let snap = lock(&self.shared).clone();
        let outsiders = &self.blocked_outsiders;
        let banned = |p: &PeerId| snap.banned.contains_key(p) || outsiders.contains(p);
        if let Err(e) = super::bootnodes::dial_due(
            &mut self.bootnodes,
            &mut self.swarm,
            Instant::now(),
            &snap.connected,
            banned,
        ) {
            tracing::debug!(%e, "a bootnode dial failed");
        }
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

    /// Blocks `peer` and, for a member, records why ([`super::Snapshot::banned`]) and keeps it
    /// blocked for good. A peer outside the pool (free to make: any number of identities) is
    /// blocked among the latest [`MAX_BLOCKED_OUTSIDERS`] only, the oldest unblocked past
    /// that, so that bans never grow without bound.
    pub(super) fn ban(&mut self, peer: PeerId, reason: String) {
        tracing::warn!(%peer, %reason, "banning peer");
        self.swarm.behaviour_mut().blocked.block_peer(peer);
        if self.members.iter().any(|m| m.peer_id == peer) {
            self.blocked_outsiders.forget(&peer);
            lock(&self.shared).banned.insert(peer, reason);
            return;
        }
        if let Some(oldest) = self.blocked_outsiders.block(peer) {
            // (A member banned before we learned it was one stays blocked.)
            if !lock(&self.shared).banned.contains_key(&oldest) {
                self.swarm.behaviour_mut().blocked.unblock_peer(oldest);
            }
        }
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
                s.conflicting.retain(|(k, _), _| *k + 2 > r);
                s.equivocations
                    .retain(|(k, _), _| k.saturating_add(EQUIVOCATION_ROUNDS) > r);
                drop(s);
                let members = self.members.clone();
                self.meters.retain(
                    |peer| members.iter().any(|m| m.peer_id == *peer),
                    r.saturating_sub(1),
                );
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
                self.meters.retain(
                    |peer| set.iter().any(|m| m.peer_id == *peer),
                    self.round.saturating_sub(1),
                );
                let gate = &mut self.swarm.behaviour_mut().outsiders;
                for m in self.members.iter() {
                    gate.remove_peer_id(&m.peer_id);
                }
                for m in set.iter() {
                    gate.bypass_peer_id(&m.peer_id);
                }
                let peers = set.iter().map(|m| m.peer_id);
                self.swarm.behaviour_mut().pending.set_members(peers);
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

    fn on_swarm(&mut self, ev: SwarmEvent<BehaviourEvent>) {
        match ev {
            SwarmEvent::OutgoingConnectionError {
                connection_id,
                peer_id,
                error,
            } => {
                match self
                    .bootnodes
                    .failed(connection_id, peer_id, Instant::now())
                {
                    Some(addr) => tracing::info!(%addr, %error, "bootnode not reached"),
                    None => tracing::debug!(?peer_id, %error, "outgoing connection failed"),
                }
            }
            SwarmEvent::NewListenAddr { address, .. } => {
                lock(&self.shared).listen_addrs.push(address)
            }
            SwarmEvent::ConnectionEstablished {
                peer_id,
                connection_id,
                ..
            } => {
                self.bootnodes.established(connection_id, peer_id);
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
                connection_id,
                peer_id,
                info,
            })) => {
                let what = pending::Identified {
                    listen_addrs: &info.listen_addrs,
                    observed_addr: &info.observed_addr,
                };
                self.swarm
                    .behaviour_mut()
                    .pending
                    .identified(connection_id, peer_id, &what);
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

    /// Each bad message from a new identity outside the pool blocks it, but only the latest
    /// [`MAX_BLOCKED_OUTSIDERS`] stay blocked: a flood of fresh identities unblocks its own
    /// oldest instead of growing the list (and every copy of the snapshot) without bound.
    #[test]
    fn outsiders_with_fresh_identities_cannot_grow_the_ban_list() {
        let mut b = BlockedOutsiders::default();
        let first: Vec<PeerId> = (0..MAX_BLOCKED_OUTSIDERS)
            .map(|_| PeerId::random())
            .collect();
        for p in &first {
            assert_eq!(b.block(*p), None);
        }
        // The same peer again takes no second place.
        assert_eq!(b.block(first[5]), None);
        for (k, fresh) in (0..10_000).map(|_| PeerId::random()).enumerate() {
            let unblocked = b.block(fresh).expect("over the bound, the oldest goes");
            if k < first.len() {
                assert_eq!(unblocked, first[k]);
            }
        }
        assert_eq!(b.0.len(), MAX_BLOCKED_OUTSIDERS);
    }
}
