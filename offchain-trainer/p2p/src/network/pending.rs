//! Admission of inbound connections while their handshake runs, before the remote's peer id is
//! known: the only thing to go by is the remote's IP address.
//!
//! A node accepts at most `max` handshakes at once (`NetConfig::max_connections`), at most
//! [`PER_ADDRESS_HANDSHAKES`] from one IP address. Addresses that no member of the pool has
//! connected from or been dialled at lately ("outsider" addresses) hold at most `outsider_max` of
//! them, so half-open handshakes from any number of outsider addresses, each held until the
//! transport's handshake timeout, cannot keep members from connecting in: a member's known
//! addresses always find `max − outsider_max` handshakes free. A QUIC handshake counts as an
//! outsider's whatever its address (its first packet's source address is not verified, so it can
//! be forged). A member's first connection from a new address counts as an outsider's until it
//! is established (the node then knows the address), and the node dials every member it is not
//! connected to on each heartbeat anyway.

use std::collections::{HashMap, HashSet, VecDeque};
use std::convert::Infallible;
use std::net::IpAddr;
use std::task::{Context, Poll};

use libp2p::core::transport::PortUse;
use libp2p::core::Endpoint;
use libp2p::multiaddr::Protocol;
use libp2p::swarm::{
    dummy, ConnectionClosed, ConnectionDenied, ConnectionId, FromSwarm, ListenFailure,
    NetworkBehaviour, THandler, THandlerInEvent, THandlerOutEvent, ToSwarm,
};
use libp2p::{Multiaddr, PeerId};

/// Addresses remembered per peer: the latest ones it connected from or was dialled at.
pub(super) const ADDRESSES_PER_PEER: usize = 4;

/// Most handshakes pending from one IP address, a member's included: an address learned as a
/// member's (one that forwards a member's connection, say) holds no more than this.
pub(super) const PER_ADDRESS_HANDSHAKES: usize = 8;

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

/// A pending inbound handshake: the remote's IP address (none over QUIC) and whether it counts
/// as a member's.
#[derive(Clone, Copy)]
struct Pending {
    ip: Option<IpAddr>,
    member: bool,
}

/// The behaviour: counts pending inbound handshakes by address and learns the addresses of the
/// peers it is connected to (members' kept while they are members).
pub struct PendingInbound {
    max: usize,
    outsider_max: usize,
    pending: HashMap<ConnectionId, Pending>,
    members: HashSet<PeerId>,
    /// Peers with an open connection.
    connected: HashSet<PeerId>,
    /// The latest addresses (≤ [`ADDRESSES_PER_PEER`], newest last) of every connected peer and
    /// every member.
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

/// Whether a connection on `addr` runs over QUIC.
fn is_quic(addr: &Multiaddr) -> bool {
    addr.iter()
        .any(|p| matches!(p, Protocol::QuicV1 | Protocol::Quic))
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
            connected: HashSet::new(),
            addresses: HashMap::new(),
        }
    }

    /// Replaces the pool's members: the addresses of a new member connected now count as a
    /// member's at once; those of a former member are forgotten once it is not connected.
    pub(super) fn set_members(&mut self, members: impl IntoIterator<Item = PeerId>) {
        self.members = members.into_iter().collect();
        let (members, connected) = (&self.members, &self.connected);
        self.addresses
            .retain(|p, _| members.contains(p) || connected.contains(p));
    }

    /// Whether a member connected from, or was dialled at, `ip` lately.
    pub(super) fn is_member_address(&self, ip: &IpAddr) -> bool {
        self.members
            .iter()
            .filter_map(|m| self.addresses.get(m))
            .any(|a| a.contains(ip))
    }

    fn learn(&mut self, peer: PeerId, addr: &Multiaddr) {
        self.connected.insert(peer);
        let Some(ip) = ip_of(addr) else { return };
        let known = self.addresses.entry(peer).or_default();
        known.retain(|a| *a != ip);
        known.push_back(ip);
        while known.len() > ADDRESSES_PER_PEER {
            known.pop_front();
        }
    }

    fn closed(&mut self, peer: PeerId, remaining: usize) {
        if remaining == 0 {
            self.connected.remove(&peer);
            if !self.members.contains(&peer) {
                self.addresses.remove(&peer);
            }
        }
    }

    fn admit(&self, local: &Multiaddr, remote: &Multiaddr) -> Result<Pending, HandshakesFull> {
        // A QUIC handshake's source address may be forged: it neither counts as a member's
        // nor against the address it names (a forger would use up a member's per-address share).
        let ip = ip_of(remote).filter(|_| !is_quic(local));
        let member = ip.is_some_and(|ip| self.is_member_address(&ip));
        let full = |pending, what| Err(HandshakesFull { pending, what });
        let total = self.pending.len();
        if total >= self.max {
            return full(total, "all addresses");
        }
        if let Some(ip) = ip {
            let same = self.pending.values().filter(|p| p.ip == Some(ip)).count();
            if same >= PER_ADDRESS_HANDSHAKES {
                return full(same, "one address");
            }
        }
        if !member {
            let outsiders = self.pending.values().filter(|p| !p.member).count();
            if outsiders >= self.outsider_max {
                return full(outsiders, "addresses of no member");
            }
        }
        Ok(Pending { ip, member })
    }
}

impl NetworkBehaviour for PendingInbound {
    type ConnectionHandler = dummy::ConnectionHandler;
    type ToSwarm = Infallible;

    fn handle_pending_inbound_connection(
        &mut self,
        connection_id: ConnectionId,
        local: &Multiaddr,
        remote: &Multiaddr,
    ) -> Result<(), ConnectionDenied> {
        let pending = self.admit(local, remote).map_err(ConnectionDenied::new)?;
        self.pending.insert(connection_id, pending);
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
            FromSwarm::ConnectionClosed(ConnectionClosed {
                peer_id,
                remaining_established,
                ..
            }) => self.closed(peer_id, remaining_established),
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

    /// Offers `b` an inbound handshake from `remote` on `local` (connection ids from a counter).
    fn offer(
        b: &mut PendingInbound,
        local: &Multiaddr,
        remote: &Multiaddr,
    ) -> Result<(), ConnectionDenied> {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        b.handle_pending_inbound_connection(ConnectionId::new_unchecked(id), local, remote)
    }

    fn pending(b: &mut PendingInbound, ip: &str) -> Result<(), ConnectionDenied> {
        offer(b, &addr("127.0.0.1"), &addr(ip))
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
    fn one_address_holds_at_most_its_share_even_a_members() {
        let member = PeerId::random();
        let mut b = PendingInbound::new(64, 16, [member]);
        b.learn(member, &addr("10.0.0.1"));
        for _ in 0..PER_ADDRESS_HANDSHAKES {
            pending(&mut b, "10.0.0.1").unwrap();
        }
        assert!(pending(&mut b, "10.0.0.1").is_err());
        // Another member address still gets in.
        b.learn(member, &addr("10.0.0.2"));
        pending(&mut b, "10.0.0.2").unwrap();
    }

    #[test]
    fn forged_quic_sources_count_as_outsiders_and_use_up_no_members_address() {
        let member = PeerId::random();
        // The default limits: 64 handshakes, outsiders 16 (more than one address's share).
        let mut b = PendingInbound::new(64, 16, [member]);
        b.learn(member, &addr("10.0.0.1"));
        let local: Multiaddr = "/ip4/127.0.0.1/udp/4001/quic-v1".parse().unwrap();
        let forged: Multiaddr = "/ip4/10.0.0.1/udp/5000/quic-v1".parse().unwrap();
        for _ in 0..16 {
            offer(&mut b, &local, &forged).unwrap();
        }
        assert!(offer(&mut b, &local, &forged).is_err());
        // Over TCP the member's address still finds its whole per-address share.
        for _ in 0..PER_ADDRESS_HANDSHAKES {
            pending(&mut b, "10.0.0.1").unwrap();
        }
    }

    #[test]
    fn a_connected_peer_that_becomes_a_member_is_known_at_once() {
        let peer = PeerId::random();
        let mut b = PendingInbound::new(64, 16, []);
        b.learn(peer, &addr("10.0.0.1"));
        assert!(!b.is_member_address(&"10.0.0.1".parse().unwrap()));
        b.set_members([peer]);
        assert!(b.is_member_address(&"10.0.0.1".parse().unwrap()));
    }

    #[test]
    fn addresses_are_bounded_and_forgotten_with_the_peer() {
        let member = PeerId::random();
        let outsider = PeerId::random();
        let mut b = PendingInbound::new(64, 16, [member]);
        b.learn(outsider, &addr("10.9.9.9"));
        assert!(!b.is_member_address(&"10.9.9.9".parse().unwrap()));
        b.closed(outsider, 0);
        assert!(!b.addresses.contains_key(&outsider));
        for i in 0..10 {
            b.learn(member, &addr(&format!("10.0.0.{i}")));
        }
        assert_eq!(b.addresses[&member].len(), ADDRESSES_PER_PEER);
        assert!(b.is_member_address(&"10.0.0.9".parse().unwrap()));
        assert!(!b.is_member_address(&"10.0.0.0".parse().unwrap()));
        // A member's addresses outlive its connections, not its membership.
        b.closed(member, 0);
        assert!(b.is_member_address(&"10.0.0.9".parse().unwrap()));
        b.set_members([]);
        assert!(!b.is_member_address(&"10.0.0.9".parse().unwrap()));
    }
}
