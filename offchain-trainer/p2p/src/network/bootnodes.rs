//! The bootnodes: dialled at start and again, on the heartbeat, whenever we are not connected
//! to them and no dial of them is in flight.
//!
//! A node whose first dial of its bootnode failed (the bootnode not up yet, a handshake that
//! timed out on a loaded host) knows no other address: nobody can dial it (no peer has learned
//! its address) and Kademlia has nothing to bootstrap from, so without a new dial it stays
//! alone for good and every round leaves it out. One dial per bootnode at a time, so a slow
//! bootnode is never sent a pile of handshakes (which its pending-handshake limit would refuse).

use std::collections::{HashMap, HashSet};

use libp2p::swarm::dial_opts::DialOpts;
use libp2p::swarm::ConnectionId;
use libp2p::{Multiaddr, PeerId};

use crate::NetError;

/// The configured bootnode addresses, the peer each turned out to be, and the dials in flight.
#[derive(Debug, Default)]
pub(super) struct Bootnodes {
    addrs: Vec<Multiaddr>,
    /// The peer behind each address, once a dial of it connected.
    peers: Vec<Option<PeerId>>,
    /// Dials in flight: the connection and the index of its address.
    in_flight: HashMap<ConnectionId, usize>,
}

impl Bootnodes {
    /// Bootnodes at `addrs` (`/ip4/…/tcp/…`, optionally ending in `/p2p/<peer id>`).
    pub(super) fn new(addrs: Vec<Multiaddr>) -> Self {
        let peers = vec![None; addrs.len()];
        Self {
            addrs,
            peers,
            in_flight: HashMap::new(),
        }
    }

    /// The dials due now: every bootnode with no dial in flight whose peer is unknown or not in
    /// `connected`, and not in `banned`. Each is recorded as in flight; hand it to the swarm
    /// and report a refusal with [`Bootnodes::failed`].
    pub(super) fn due(
        &mut self,
        connected: &HashSet<PeerId>,
        banned: impl Fn(&PeerId) -> bool,
    ) -> Vec<(Multiaddr, DialOpts)> {
        let mut dials = Vec::new();
        for (i, addr) in self.addrs.iter().enumerate() {
            let reached = self.peers[i].is_some_and(|p| connected.contains(&p) || banned(&p));
            if reached || self.in_flight.values().any(|j| *j == i) {
                continue;
            }
            let opts = DialOpts::from(addr.clone());
            self.in_flight.insert(opts.connection_id(), i);
            dials.push((addr.clone(), opts));
        }
        dials
    }

    /// Connection `id` is established with `peer`: if it was a bootnode dial, `peer` is that
    /// bootnode.
    pub(super) fn established(&mut self, id: ConnectionId, peer: PeerId) {
        if let Some(i) = self.in_flight.remove(&id) {
            self.peers[i] = Some(peer);
        }
    }

    /// Connection `id` failed (or the swarm refused to dial it): its bootnode is due again.
    pub(super) fn failed(&mut self, id: ConnectionId) {
        self.in_flight.remove(&id);
    }
}

/// Dials every bootnode [`Bootnodes::due`] on `swarm`: the first error (an address the
/// transports cannot dial) is returned after the others were tried.
///
/// # Errors
/// [`NetError::Config`] naming the first bootnode address the swarm refused to dial and why.
pub(super) fn dial_due<B: libp2p::swarm::NetworkBehaviour>(
    boot: &mut Bootnodes,
    swarm: &mut libp2p::Swarm<B>,
    connected: &HashSet<PeerId>,
    banned: impl Fn(&PeerId) -> bool,
) -> Result<(), NetError> {
    let mut first = Ok(());
    for (addr, opts) in boot.due(connected, banned) {
        let id = opts.connection_id();
        if let Err(e) = swarm.dial(opts) {
            boot.failed(id);
            if first.is_ok() {
                first = Err(super::config_error(&format!("dialling {addr}"), &e));
            }
        }
    }
    first
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bootnode is dialled again after a failed dial and after its connection closed, never
    /// while a dial of it is in flight or while we are connected to it.
    #[test]
    fn a_bootnode_is_dialled_again_until_connected_one_dial_at_a_time() {
        let addr: Multiaddr = "/ip4/127.0.0.1/tcp/4001".parse().unwrap();
        let mut boot = Bootnodes::new(vec![addr.clone()]);
        let none = HashSet::new();
        let no_ban = |_: &PeerId| false;
        let first = boot.due(&none, no_ban);
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].0, addr);
        assert!(boot.due(&none, no_ban).is_empty(), "one dial in flight");
        boot.failed(first[0].1.connection_id());
        let second = boot.due(&none, no_ban);
        assert_eq!(second.len(), 1, "dialled again after a failure");
        let peer = PeerId::random();
        boot.established(second[0].1.connection_id(), peer);
        let connected: HashSet<_> = [peer].into();
        assert!(boot.due(&connected, no_ban).is_empty(), "connected");
        assert_eq!(boot.due(&none, no_ban).len(), 1, "closed: dialled again");
        let mut banned = Bootnodes::new(vec![addr]);
        let d = banned.due(&none, no_ban);
        banned.established(d[0].1.connection_id(), peer);
        assert!(
            banned.due(&none, |p| *p == peer).is_empty(),
            "a banned bootnode"
        );
        // A connection that is not a bootnode dial changes nothing.
        boot.established(ConnectionId::new_unchecked(987_654), PeerId::random());
        assert!(boot.due(&none, no_ban).is_empty(), "still in flight");
    }
}
