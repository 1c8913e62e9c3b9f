//! The bootnodes: dialled at start and again, on the heartbeat, while we are not connected to
//! them, one dial of each at a time and backing off after each failure.
//!
//! A node whose first dial of its bootnode failed (the bootnode not up yet, a handshake that
//! timed out on a loaded host) knows no other address: nobody can dial it (no peer has learned
//! its address) and Kademlia has nothing to bootstrap from, so without a new dial it stays
//! alone for good and every round leaves it out. One dial per bootnode at a time, so a slow
//! bootnode is never sent a pile of handshakes (which its pending-handshake limit would
//! refuse), and after each failure the next dial waits twice as long as the last (one
//! heartbeat up to [`MAX_BACKOFF`]), so a dead bootnode, or one that takes the handshake and
//! then refuses the connection, costs every node dialling it a handshake a minute.
//!
//! A bootnode address ending in `/p2p/<peer id>` names its peer: libp2p checks it at the
//! handshake (a different peer at the address fails with `WrongPeerId`), and a connection to
//! that peer from either side counts as reached. Without it, the bootnode is whichever peer
//! answered our dial: anyone holding the address then (on the bootnode's host, or on the path)
//! is taken for it.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use libp2p::multiaddr::Protocol;
use libp2p::swarm::dial_opts::DialOpts;
use libp2p::swarm::ConnectionId;
use libp2p::{Multiaddr, PeerId};

use crate::NetError;

/// The longest wait between two dials of one bootnode.
pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// One bootnode: its address, its peer, and when it may be dialled next.
#[derive(Debug)]
struct Bootnode {
    addr: Multiaddr,
    /// The peer behind the address: named by its `/p2p` suffix, or the one a dial reached.
    peer: Option<PeerId>,
    /// No dial before this.
    next: Instant,
    /// The wait after the next failure.
    backoff: Duration,
    /// The dial of it in flight, if any.
    dialling: Option<ConnectionId>,
}

/// The configured bootnodes.
#[derive(Debug)]
pub(super) struct Bootnodes {
    nodes: Vec<Bootnode>,
    /// Our own peer id (an address of ours among the bootnodes is never dialled again).
    me: PeerId,
    /// The first wait after a failure (the heartbeat).
    first_backoff: Duration,
}

impl Bootnodes {
    /// Bootnodes at `addrs` (`/ip4/…/tcp/…`, best ending in `/p2p/<peer id>`) of the node
    /// `me`, retried at first `heartbeat` after a failed dial.
    pub(super) fn new(
        addrs: Vec<Multiaddr>,
        me: PeerId,
        heartbeat: Duration,
        now: Instant,
    ) -> Self {
        let nodes = addrs
            .into_iter()
            .map(|addr| Bootnode {
                peer: match addr.iter().last() {
                    Some(Protocol::P2p(p)) => Some(p),
                    _ => None,
                },
                addr,
                next: now,
                backoff: heartbeat,
                dialling: None,
            })
            .collect();
        Self {
            nodes,
            me,
            first_backoff: heartbeat,
        }
    }

    /// The dials due at `now`: every bootnode with no dial in flight, past its backoff, whose
    /// peer is unknown or neither in `connected`, nor `banned`, nor us. Each is recorded as in
    /// flight; hand it to the swarm and report a refusal with [`Bootnodes::failed`].
    pub(super) fn due(
        &mut self,
        now: Instant,
        connected: &HashSet<PeerId>,
        banned: impl Fn(&PeerId) -> bool,
    ) -> Vec<(Multiaddr, DialOpts)> {
        let mut dials = Vec::new();
        for b in &mut self.nodes {
            let reached = b
                .peer
                .is_some_and(|p| p == self.me || connected.contains(&p) || banned(&p));
            if reached || now < b.next || b.dialling.is_some() {
                continue;
            }
            let opts = DialOpts::from(b.addr.clone());
            b.dialling = Some(opts.connection_id());
            dials.push((b.addr.clone(), opts));
        }
        dials
    }

    /// Connection `id` is established with `peer`: if it was a bootnode dial, `peer` is that
    /// bootnode (when its address named none) and its backoff starts again.
    pub(super) fn established(&mut self, id: ConnectionId, peer: PeerId) {
        let first = self.first_backoff;
        if let Some(b) = self.dial_ended(id) {
            b.peer.get_or_insert(peer);
            b.backoff = first;
        }
    }

    /// Dial `id` failed at `now` (or the swarm refused it), after reaching `peer` if it got
    /// that far (a connection denied once established: we are connected to `peer` already,
    /// or it is us): its bootnode is due again after its backoff, which doubles. Returns the
    /// bootnode's address if `id` was a bootnode dial.
    pub(super) fn failed(
        &mut self,
        id: ConnectionId,
        peer: Option<PeerId>,
        now: Instant,
    ) -> Option<Multiaddr> {
        let b = self.dial_ended(id)?;
        if let Some(p) = peer {
            b.peer.get_or_insert(p);
        }
        b.next = now + b.backoff;
        b.backoff = (b.backoff * 2).min(MAX_BACKOFF);
        Some(b.addr.clone())
    }

    /// The bootnode whose dial is `id`, that dial no longer in flight.
    fn dial_ended(&mut self, id: ConnectionId) -> Option<&mut Bootnode> {
        let b = self.nodes.iter_mut().find(|b| b.dialling == Some(id))?;
        b.dialling = None;
        Some(b)
    }
}

/// Dials every bootnode [`Bootnodes::due`] at `now` on `swarm`: the first error is returned
/// after the others were tried.
///
/// # Errors
/// [`NetError::Config`] naming the first bootnode address the swarm refused to dial and why.
pub(super) fn dial_due<B: libp2p::swarm::NetworkBehaviour>(
    boot: &mut Bootnodes,
    swarm: &mut libp2p::Swarm<B>,
    now: Instant,
    connected: &HashSet<PeerId>,
    banned: impl Fn(&PeerId) -> bool,
) -> Result<(), NetError> {
    let mut first = Ok(());
    for (addr, opts) in boot.due(now, connected, banned) {
        let id = opts.connection_id();
        if let Err(e) = swarm.dial(opts) {
            boot.failed(id, None, now);
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

    const BEAT: Duration = Duration::from_millis(500);

    fn no_ban(_: &PeerId) -> bool {
        false
    }

    /// A bootnode is dialled again after a failed dial (each wait twice the last, at most
    /// [`MAX_BACKOFF`]) and after its connection closed, never while a dial of it is in flight
    /// or while we are connected to it.
    #[test]
    fn a_bootnode_is_dialled_again_until_connected_one_dial_at_a_time() {
        let t0 = Instant::now();
        let addr: Multiaddr = "/ip4/127.0.0.1/tcp/4001".parse().unwrap();
        let mut boot = Bootnodes::new(vec![addr.clone()], PeerId::random(), BEAT, t0);
        let none = HashSet::new();
        let first = boot.due(t0, &none, no_ban);
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].0, addr);
        assert!(boot.due(t0, &none, no_ban).is_empty(), "one dial in flight");
        // Failures back off: 0.5 s, 1 s, 2 s, … up to a minute.
        let mut at = t0;
        let mut id = first[0].1.connection_id();
        for k in 0..10u32 {
            assert_eq!(boot.failed(id, None, at), Some(addr.clone()));
            let wait = (BEAT * 2u32.pow(k)).min(MAX_BACKOFF);
            assert!(boot
                .due(at + wait - Duration::from_millis(1), &none, no_ban)
                .is_empty());
            at += wait;
            let again = boot.due(at, &none, no_ban);
            assert_eq!(again.len(), 1, "dialled again {wait:?} after failure {k}");
            id = again[0].1.connection_id();
        }
        let peer = PeerId::random();
        boot.established(id, peer);
        let connected: HashSet<_> = [peer].into();
        assert!(boot.due(at, &connected, no_ban).is_empty(), "connected");
        let closed = boot.due(at, &none, no_ban);
        assert_eq!(closed.len(), 1, "closed: dialled again at once");
        // The backoff started again on success.
        boot.failed(closed[0].1.connection_id(), None, at);
        assert_eq!(boot.due(at + BEAT, &none, no_ban).len(), 1);
        // A connection that is not a bootnode dial changes nothing.
        boot.established(ConnectionId::new_unchecked(987_654), PeerId::random());
        assert!(
            boot.due(at + MAX_BACKOFF, &none, no_ban).is_empty(),
            "still in flight"
        );
    }

    /// A dial denied once connected names the peer: a bootnode we are connected to already
    /// (a second connection over the per-peer limit), a banned one or our own address is not
    /// dialled again.
    #[test]
    fn a_bootnode_reached_but_denied_is_not_dialled_again() {
        let t0 = Instant::now();
        let me = PeerId::random();
        let addr: Multiaddr = "/ip4/127.0.0.1/tcp/4001".parse().unwrap();
        let late = t0 + MAX_BACKOFF;
        let none = HashSet::new();
        for (peer, connected, banned) in [
            (PeerId::random(), true, false),
            (PeerId::random(), false, true),
            (me, false, false),
        ] {
            let mut boot = Bootnodes::new(vec![addr.clone()], me, BEAT, t0);
            let d = boot.due(t0, &none, no_ban);
            boot.failed(d[0].1.connection_id(), Some(peer), t0);
            let set: HashSet<_> = if connected {
                [peer].into()
            } else {
                none.clone()
            };
            assert!(boot.due(late, &set, |p| banned && *p == peer).is_empty());
        }
    }

    /// An address ending in `/p2p/<id>` names its peer: a connection with that peer made by
    /// either side counts as reached; the dial itself is checked by libp2p (`WrongPeerId`).
    #[test]
    fn a_bootnode_named_by_its_peer_id_is_reached_by_any_connection_to_it() {
        let t0 = Instant::now();
        let peer = PeerId::random();
        let addr: Multiaddr = format!("/ip4/127.0.0.1/tcp/4001/p2p/{peer}")
            .parse()
            .unwrap();
        let mut boot = Bootnodes::new(vec![addr], PeerId::random(), BEAT, t0);
        let connected: HashSet<_> = [peer].into();
        assert!(boot.due(t0, &connected, no_ban).is_empty());
        let d = boot.due(t0, &HashSet::new(), no_ban);
        assert_eq!(
            d[0].1.get_peer_id(),
            Some(peer),
            "the dial expects the named peer"
        );
        // An impostor answering the dial is not taken for the bootnode.
        boot.failed(d[0].1.connection_id(), Some(PeerId::random()), t0);
        assert_eq!(boot.due(t0 + BEAT, &HashSet::new(), no_ban).len(), 1);
    }
}
