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
//! be forged). A member's first connection from a new address counts as an outsider's until the
//! node has learned the address, and the node dials every member it is not connected to on each
//! heartbeat anyway.
//!
//! Only addresses a connection *proves* are learned as a peer's, once the peer has identified
//! itself over that connection (libp2p identify, on the connection its secure channel
//! authenticated) and said what it sees at the other end:
//! * an address the node dialled, if it is global and the peer lists it among its own listen or
//!   external addresses, or if the peer sees the connection come from one of the node's own IP
//!   addresses in the dialled address's scope (nothing in between);
//! * an address a peer connected from, if the address the peer says it dialled (its observed
//!   address of the node) is one of the node's own, in the same scope as the source (a loopback
//!   address proves only a loopback source, a private one only a private source: an address
//!   that other hosts may hold too proves nothing about a source elsewhere), or if the source is
//!   global and the peer lists its IP among its own addresses.
//!
//! A TCP forwarder placed between the node and a member (its address handed to the node, or to
//! the member, as the other's by a third party, e.g. in a Kademlia answer) proves neither: the
//! connection works, but the forwarder's address gets no member's share of the handshakes. A
//! connection whose proof fails is judged again at the peer's next identify.

use std::collections::{HashMap, HashSet, VecDeque};
use std::convert::Infallible;
use std::net::IpAddr;
use std::task::{Context, Poll};

use libp2p::core::transport::PortUse;
use libp2p::core::{ConnectedPoint, Endpoint};
use libp2p::multiaddr::Protocol;
use libp2p::swarm::behaviour::ExternalAddrConfirmed;
use libp2p::swarm::{
    dummy, ConnectionClosed, ConnectionDenied, ConnectionId, ExpiredListenAddr,
    ExternalAddrExpired, FromSwarm, ListenFailure, NetworkBehaviour, NewListenAddr, THandler,
    THandlerInEvent, THandlerOutEvent, ToSwarm,
};
use libp2p::{Multiaddr, PeerId};

/// Addresses remembered per peer: the latest ones it proved it connected from or was dialled at.
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
    /// Where each open connection goes: the address dialled, or the address the peer connected
    /// from, until the peer identifies itself over it.
    unproven: HashMap<ConnectionId, (PeerId, Side)>,
    /// The node's own listen and confirmed external addresses.
    own: HashSet<Multiaddr>,
}

/// The far end of a connection, as the node sees it.
#[derive(Clone, Debug)]
enum Side {
    /// The node dialled this address.
    Dialled(Multiaddr),
    /// The peer connected in from this address.
    From(Multiaddr),
}

/// What a peer says of itself over one connection (libp2p identify).
pub(super) struct Identified<'a> {
    /// The addresses it listens on.
    pub listen_addrs: &'a [Multiaddr],
    /// The node's address as the peer sees it: the address it dialled, on a connection it
    /// opened.
    pub observed_addr: &'a Multiaddr,
}

/// The IP address a multiaddr starts with (TCP and QUIC addresses alike), if any.
fn ip_of(addr: &Multiaddr) -> Option<IpAddr> {
    match addr.iter().next()? {
        Protocol::Ip4(ip) => Some(ip.into()),
        Protocol::Ip6(ip) => Some(ip.into()),
        _ => None,
    }
}

/// `addr` without a trailing `/p2p/…`.
fn without_peer(addr: &Multiaddr) -> Multiaddr {
    let mut addr = addr.clone();
    if matches!(addr.iter().last(), Some(Protocol::P2p(_))) {
        addr.pop();
    }
    addr
}

/// Whether `a` and `b` name the same transport address (a trailing `/p2p/…` ignored).
fn same_address(a: &Multiaddr, b: &Multiaddr) -> bool {
    without_peer(a) == without_peer(b)
}

/// Whether an address `seen` that other hosts may hold too (loopback: every host; private,
/// link-local, shared, unique-local: every network) can vouch for a connection from `src`:
/// only a source in the same scope can have reached it directly.
fn same_scope(seen: &IpAddr, src: &IpAddr) -> bool {
    scope(seen) == scope(src)
}

/// [`scope`] of an address any host can reach.
const GLOBAL: u8 = 2;

/// An IP address's reach: 0 loopback, 1 private, link-local or shared (RFC 1918, 3927, 6598;
/// IPv6 unique- and link-local), [`GLOBAL`].
fn scope(ip: &IpAddr) -> u8 {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            if v4.is_loopback() {
                0
            } else if v4.is_private() || v4.is_link_local() || (a == 100 && (64..128).contains(&b))
            {
                1
            } else {
                GLOBAL
            }
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            if v6.is_loopback() {
                0
            } else if (first & 0xfe00) == 0xfc00 || (first & 0xffc0) == 0xfe80 {
                1
            } else {
                GLOBAL
            }
        }
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
            unproven: HashMap::new(),
            own: HashSet::new(),
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

    /// Learns the far address of `connection` as `peer`'s if `what` it says of itself over it
    /// proves it ([module docs](self)); a connection that proved nothing stays to be judged
    /// at the peer's next identify.
    pub(super) fn identified(
        &mut self,
        connection: ConnectionId,
        peer: PeerId,
        what: &Identified<'_>,
    ) {
        let Some((owner, side)) = self.unproven.get(&connection) else {
            return;
        };
        if *owner != peer {
            return;
        }
        // What the peer lists vouches for a global address only: a loopback or private one
        // may be another host's where the node is.
        let global = |addr: &Multiaddr| ip_of(addr).is_some_and(|ip| scope(&ip) == GLOBAL);
        let lists = |matches: &dyn Fn(&Multiaddr) -> bool| what.listen_addrs.iter().any(matches);
        // The IP the peer saw at its end of the connection, if it is in `addr`'s scope.
        let seen_in_scope = |addr: &Multiaddr| {
            let (seen, ip) = (ip_of(what.observed_addr)?, ip_of(addr)?);
            same_scope(&seen, &ip).then_some(seen)
        };
        let proven = match side {
            Side::Dialled(addr) => {
                (global(addr) && lists(&|a| same_address(a, addr)))
                    || seen_in_scope(addr).is_some_and(|seen| self.is_own_ip(&seen))
            }
            Side::From(src) => {
                (global(src) && lists(&|a| ip_of(a) == ip_of(src)))
                    || (seen_in_scope(src).is_some() && self.is_own(what.observed_addr))
            }
        };
        if proven {
            let (Side::Dialled(addr) | Side::From(addr)) = side.clone();
            self.unproven.remove(&connection);
            self.learn(peer, &addr);
        }
    }

    /// Whether `ip` is the IP of one of the node's listen or external addresses.
    fn is_own_ip(&self, ip: &IpAddr) -> bool {
        self.own.iter().any(|a| ip_of(a).as_ref() == Some(ip))
    }

    /// Whether `addr` is one of the node's listen or external addresses (transport and port
    /// compared, a trailing `/p2p/…` ignored).
    fn is_own(&self, addr: &Multiaddr) -> bool {
        self.own.iter().any(|a| same_address(a, addr))
    }

    /// Whether a member proved lately that it connected from, or was dialled at, `ip`.
    pub(super) fn is_member_address(&self, ip: &IpAddr) -> bool {
        self.members
            .iter()
            .filter_map(|m| self.addresses.get(m))
            .any(|a| a.contains(ip))
    }

    fn learn(&mut self, peer: PeerId, addr: &Multiaddr) {
        let Some(ip) = ip_of(addr) else { return };
        let known = self.addresses.entry(peer).or_default();
        known.retain(|a| *a != ip);
        known.push_back(ip);
        while known.len() > ADDRESSES_PER_PEER {
            known.pop_front();
        }
    }

    fn established(&mut self, connection: ConnectionId, peer: PeerId, at: &ConnectedPoint) {
        self.connected.insert(peer);
        let side = match at {
            ConnectedPoint::Dialer { address, .. } => Side::Dialled(address.clone()),
            ConnectedPoint::Listener { send_back_addr, .. } => Side::From(send_back_addr.clone()),
        };
        self.unproven.insert(connection, (peer, side));
    }

    fn closed(&mut self, connection: ConnectionId, peer: PeerId, remaining: usize) {
        self.unproven.remove(&connection);
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
                self.established(e.connection_id, e.peer_id, e.endpoint)
            }
            FromSwarm::ConnectionClosed(ConnectionClosed {
                connection_id,
                peer_id,
                remaining_established,
                ..
            }) => self.closed(connection_id, peer_id, remaining_established),
            FromSwarm::NewListenAddr(NewListenAddr { addr, .. })
            | FromSwarm::ExternalAddrConfirmed(ExternalAddrConfirmed { addr }) => {
                self.own.insert(addr.clone());
            }
            FromSwarm::ExpiredListenAddr(ExpiredListenAddr { addr, .. })
            | FromSwarm::ExternalAddrExpired(ExternalAddrExpired { addr }) => {
                self.own.remove(addr);
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
mod tests;
