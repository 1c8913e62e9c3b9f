//! Admission of inbound connections while their handshake runs, before the remote's peer id is
//! known: the only thing to go by is the remote's IP address.
//!
//! A node accepts at most `max` handshakes at once (`NetConfig::max_connections`). Addresses
//! that no member of the pool has connected from or been dialled at ("outsider" addresses) hold
//! at most `outsider_max` of them, so half-open handshakes from any number of outsider
//! addresses, each held until the transport's handshake timeout, cannot keep members from
//! connecting in: a member's known addresses always find `max − outsider_max` handshakes free.
//! A member's first connection from a new address counts as an outsider's until it is
//! established (the node then knows the address), and the node dials every member it is not
//! connected to on each heartbeat anyway.

use std::collections::{HashMap, HashSet, VecDeque};
use std::convert::Infallible;
use std::net::IpAddr;
use std::task::{Context, Poll};

use libp2p::core::transport::PortUse;
use libp2p::core::Endpoint;
use libp2p::multiaddr::Protocol;
use libp2p::swarm::{
    dummy, ConnectionDenied, ConnectionId, FromSwarm, ListenFailure, NetworkBehaviour, THandler,
    THandlerInEvent, THandlerOutEvent, ToSwarm,
};
use libp2p::{Multiaddr, PeerId};

/// Addresses remembered per member: the latest ones it connected from or was dialled at.
pub(super) const ADDRESSES_PER_MEMBER: usize = 4;

/// Least handshakes outsider addresses may hold, whatever `max`: a pool starting up on one host
/// (all peers at one address, none known yet) must not be throttled to one handshake at a time.
const MIN_OUTSIDER_HANDSHAKES: usize = 4;

/// Why an inbound connection was refused before its handshake.
#[derive(Debug, thiserror::Error)]
#[error("{pending} inbound handshakes pending from {what}, the most accepted")]
pub(super) struct HandshakesFull {
    pending: usize,
    what: &'static str,
}

/// The behaviour: counts pending inbound handshakes by kind of address and learns members'
/// addresses from their established connections.
pub struct PendingInbound {
    max: usize,
    outsider_max: usize,
    /// Pending inbound handshakes, each with whether it came from a member's address.
    pending: HashMap<ConnectionId, bool>,
    members: HashSet<PeerId>,
    /// Each member's latest addresses (≤ [`ADDRESSES_PER_MEMBER`], newest last).
    addresses: HashMap<PeerId, VecDeque<IpAddr>>,
}

/// The IP address a multiaddr starts with (TCP and QUIC addresses alike), if any.
fn ip_of(addr: &Multiaddr) -> Option<IpAddr> {
    match addr.iter().next()? {
        Protocol::Ip4(ip) => Some(ip.into()),
        Protocol::Ip6(ip) => Some(ip.into()),
        _ => None,
    }
}

impl PendingInbound {
    /// At most `max` pending inbound handshakes, of which outsider addresses hold at most
    /// `outsider_max` (raised to [`MIN_OUTSIDER_HANDSHAKES`], capped at `max`).
    pub(super) fn new(
        max: u32,
        outsider_max: u32,
        members: impl IntoIterator<Item = PeerId>,
    ) -> Self {
        let max = max as usize;
        Self {
            max,
            outsider_max: (outsider_max as usize)
                .max(MIN_OUTSIDER_HANDSHAKES)
                .min(max),
            pending: HashMap::new(),
            members: members.into_iter().collect(),
            addresses: HashMap::new(),
        }
    }

    /// Replaces the pool's members; the addresses of former members are forgotten.
    pub(super) fn set_members(&mut self, members: impl IntoIterator<Item = PeerId>) {
        self.members = members.into_iter().collect();
        let members = &self.members;
        self.addresses.retain(|p, _| members.contains(p));
    }

    /// Whether a member connected from, or was dialled at, `ip` lately.
    pub(super) fn is_member_address(&self, ip: &IpAddr) -> bool {
        self.addresses.values().any(|a| a.contains(ip))
    }

    fn learn(&mut self, peer: PeerId, addr: &Multiaddr) {
        let Some(ip) = ip_of(addr) else { return };
        if !self.members.contains(&peer) {
            return;
        }
        let known = self.addresses.entry(peer).or_default();
        known.retain(|a| *a != ip);
        known.push_back(ip);
        while known.len() > ADDRESSES_PER_MEMBER {
            known.pop_front();
        }
    }
}

impl NetworkBehaviour for PendingInbound {
    type ConnectionHandler = dummy::ConnectionHandler;
    type ToSwarm = Infallible;

    fn handle_pending_inbound_connection(
        &mut self,
        connection_id: ConnectionId,
        _local: &Multiaddr,
        remote: &Multiaddr,
    ) -> Result<(), ConnectionDenied> {
        let member = ip_of(remote).is_some_and(|ip| self.is_member_address(&ip));
        let total = self.pending.len();
        if total >= self.max {
            return Err(ConnectionDenied::new(HandshakesFull {
                pending: total,
                what: "all addresses",
            }));
        }
        if !member {
            let outsiders = self.pending.values().filter(|m| !**m).count();
            if outsiders >= self.outsider_max {
                return Err(ConnectionDenied::new(HandshakesFull {
                    pending: outsiders,
                    what: "addresses of no member",
                }));
            }
        }
        self.pending.insert(connection_id, member);
        Ok(())
    }

    fn handle_established_inbound_connection(
        &mut self,
        connection_id: ConnectionId,
        _peer: PeerId,
        _local: &Multiaddr,
        _remote: &Multiaddr,
    ) -> Result<THandler<Self>, ConnectionDenied> {
        self.pending.remove(&connection_id);
        Ok(dummy::ConnectionHandler)
    }

    fn handle_established_outbound_connection(
        &mut self,
        _connection_id: ConnectionId,
        _peer: PeerId,
        _addr: &Multiaddr,
        _role_override: Endpoint,
        _port_use: PortUse,
    ) -> Result<THandler<Self>, ConnectionDenied> {
        Ok(dummy::ConnectionHandler)
    }

    fn on_swarm_event(&mut self, event: FromSwarm) {
        match event {
            FromSwarm::ConnectionEstablished(e) => {
                self.learn(e.peer_id, e.endpoint.get_remote_address())
            }
            FromSwarm::ListenFailure(ListenFailure { connection_id, .. }) => {
                self.pending.remove(&connection_id);
            }
            _ => {}
        }
    }

    fn on_connection_handler_event(
        &mut self,
        _peer: PeerId,
        _connection: ConnectionId,
        event: THandlerOutEvent<Self>,
    ) {
        match event {}
    }

    fn poll(&mut self, _: &mut Context<'_>) -> Poll<ToSwarm<Self::ToSwarm, THandlerInEvent<Self>>> {
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(ip: &str) -> Multiaddr {
        format!("/ip4/{ip}/tcp/4001").parse().unwrap()
    }

    /// Offers `b` an inbound handshake from `ip` (connection ids from a counter).
    fn pending(b: &mut PendingInbound, ip: &str) -> Result<(), ConnectionDenied> {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        b.handle_pending_inbound_connection(
            ConnectionId::new_unchecked(id),
            &addr("127.0.0.1"),
            &addr(ip),
        )
    }

    #[test]
    fn outsider_addresses_hold_their_share_and_a_members_address_the_rest() {
        let member = PeerId::random();
        let mut b = PendingInbound::new(8, 2, [member]);
        b.learn(member, &addr("10.0.0.1"));
        // Outsiders (any number of addresses) get MIN_OUTSIDER_HANDSHAKES, not more.
        for i in 0..MIN_OUTSIDER_HANDSHAKES {
            pending(&mut b, &format!("10.1.0.{i}")).unwrap();
        }
        assert!(pending(&mut b, "10.1.1.1").is_err());
        // The member's address takes the rest, up to `max`.
        for _ in MIN_OUTSIDER_HANDSHAKES..8 {
            pending(&mut b, "10.0.0.1").unwrap();
        }
        assert!(pending(&mut b, "10.0.0.1").is_err());
    }

    #[test]
    fn only_members_addresses_are_learned_and_a_few_per_member() {
        let member = PeerId::random();
        let outsider = PeerId::random();
        let mut b = PendingInbound::new(64, 16, [member]);
        b.learn(outsider, &addr("10.9.9.9"));
        assert!(!b.is_member_address(&"10.9.9.9".parse().unwrap()));
        for i in 0..10 {
            b.learn(member, &addr(&format!("10.0.0.{i}")));
        }
        let known: Vec<_> = b.addresses[&member].iter().copied().collect();
        assert_eq!(known.len(), ADDRESSES_PER_MEMBER);
        assert!(b.is_member_address(&"10.0.0.9".parse().unwrap()));
        assert!(!b.is_member_address(&"10.0.0.0".parse().unwrap()));
        b.set_members([]);
        assert!(!b.is_member_address(&"10.0.0.9".parse().unwrap()));
    }
}
