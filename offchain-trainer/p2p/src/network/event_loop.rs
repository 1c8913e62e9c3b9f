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
use super::{lock, Behaviour, BehaviourEvent, Snapshot};
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
    /// Gossip rate of each member's peer id ([`super::gossip::Bucket`]).
    pub(super) rates: std::collections::HashMap<PeerId, super::gossip::Bucket>,
    /// Dropped with the loop: tells the serving tasks to stop.
    pub(super) _stop: tokio::sync::watch::Sender<()>,
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
                    self.dial_missing_members();
                    ticks += 1;
                    if ticks % 10 < 2 {
                        let _ = self.swarm.behaviour_mut().kad.bootstrap();
                    }
                }
            }
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

    /// Blocks `peer` for good and records why.
    pub(super) fn ban(&mut self, peer: PeerId, reason: String) {
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
                s.conflicting.retain(|(k, _), _| *k + 2 > r);
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
                self.rates
                    .retain(|peer, _| set.iter().any(|m| m.peer_id == *peer));
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
