//! Tests of the pending inbound connections: what proves a peer, and when it is dropped.

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
    b.closed(ConnectionId::new_unchecked(0), outsider, 0);
    assert!(!b.addresses.contains_key(&outsider));
    for i in 0..10 {
        b.learn(member, &addr(&format!("10.0.0.{i}")));
    }
    assert_eq!(b.addresses[&member].len(), ADDRESSES_PER_PEER);
    assert!(b.is_member_address(&"10.0.0.9".parse().unwrap()));
    assert!(!b.is_member_address(&"10.0.0.0".parse().unwrap()));
    // A member's addresses outlive its connections, not its membership.
    b.closed(ConnectionId::new_unchecked(1), member, 0);
    assert!(b.is_member_address(&"10.0.0.9".parse().unwrap()));
    b.set_members([]);
    assert!(!b.is_member_address(&"10.0.0.9".parse().unwrap()));
}

/// `b` has a connection (`id`) to `peer` at `at`, which then identifies itself with
/// `listen` as its listen addresses and `observed` as what it dialled.
fn identified(
    b: &mut PendingInbound,
    id: usize,
    peer: PeerId,
    at: ConnectedPoint,
    listen: &[Multiaddr],
    observed: &Multiaddr,
) {
    let id = ConnectionId::new_unchecked(id);
    b.established(id, peer, &at);
    let what = Identified {
        listen_addrs: listen,
        observed_addr: observed,
    };
    b.identified(id, peer, &what);
}

fn dialled(address: Multiaddr) -> ConnectedPoint {
    ConnectedPoint::Dialer {
        address,
        role_override: Endpoint::Dialer,
        port_use: PortUse::Reuse,
    }
}

fn from(send_back_addr: Multiaddr) -> ConnectedPoint {
    ConnectedPoint::Listener {
        local_addr: addr("127.0.0.1"),
        send_back_addr,
    }
}

fn ma(text: &str) -> Multiaddr {
    text.parse().unwrap()
}

/// The node's own address in these tests (global).
const OURS: &str = "/ip4/198.51.100.9/tcp/30333";

/// A TCP forwarder whose address a third party handed out as a member's (a Kademlia answer)
/// reaches the member, so the node's dial succeeds; but the member does not list the
/// forwarder's address, and sees the connection come from the forwarder, not from the node:
/// the forwarder gets no member's share of the handshakes. A member dialled at an address
/// it lists, or behind a NAT at an address it cannot know but seeing the node's own IP at
/// the other end, is learned.
#[test]
fn a_forwarder_dialled_as_a_member_gets_no_members_share_of_handshakes() {
    let member = PeerId::random();
    let mut b = PendingInbound::new(8, 2, [member]);
    b.own.insert(ma(OURS));
    let listen = [ma("/ip4/203.0.113.7/tcp/4001")];
    let forwarder = ma("/ip4/192.0.2.66/tcp/4001");
    let seen_by_member = ma("/ip4/192.0.2.66/tcp/5555");
    for _ in 0..2 {
        // Judged again at each identify, proving nothing each time.
        identified(
            &mut b,
            1,
            member,
            dialled(forwarder.clone()),
            &listen,
            &seen_by_member,
        );
    }
    assert!(!b.is_member_address(&"192.0.2.66".parse().unwrap()));
    for _ in 0..MIN_OUTSIDER_HANDSHAKES {
        pending(&mut b, "192.0.2.66").unwrap();
    }
    assert!(pending(&mut b, "192.0.2.66").is_err());
    let ours_seen = ma("/ip4/198.51.100.9/tcp/40000");
    identified(
        &mut b,
        2,
        member,
        dialled(listen[0].clone()),
        &listen,
        &ours_seen,
    );
    assert!(b.is_member_address(&"203.0.113.7".parse().unwrap()));
    // Behind a NAT: it listens at a private address, and sees the node's own IP.
    let private = [ma("/ip4/192.168.1.5/tcp/4001")];
    let forwarded_port = ma("/ip4/203.0.113.8/tcp/4001").with(Protocol::P2p(member));
    identified(
        &mut b,
        3,
        member,
        dialled(forwarded_port),
        &private,
        &ours_seen,
    );
    assert!(b.is_member_address(&"203.0.113.8".parse().unwrap()));
}

/// The other direction: a member that was handed the forwarder's address as the node's
/// connects in through it. The member's identify says what it dialled, which is not an
/// address of the node: the forwarder's address is not learned. Neither is a source that
/// dialled one of the node's loopback addresses from elsewhere (a forwarder on the
/// member's host, listening where the node listens on its own). A member that dialled one
/// of the node's addresses is learned where it connected from (behind a NAT: its public
/// address, which it may not know itself), and so is a source the member lists.
#[test]
fn a_member_connecting_through_a_forwarder_gives_it_no_members_share() {
    let member = PeerId::random();
    let mut b = PendingInbound::new(8, 2, [member]);
    b.own.insert(ma(OURS));
    b.own.insert(ma("/ip4/127.0.0.1/tcp/30333"));
    let forwarder = ma("/ip4/192.0.2.66/tcp/30333");
    let listen = [ma("/ip4/192.168.1.5/tcp/4001")];
    identified(
        &mut b,
        1,
        member,
        from(addr("192.0.2.66")),
        &listen,
        &forwarder,
    );
    assert!(!b.is_member_address(&"192.0.2.66".parse().unwrap()));
    let loopback = ma("/ip4/127.0.0.1/tcp/30333");
    identified(
        &mut b,
        2,
        member,
        from(addr("192.0.2.77")),
        &listen,
        &loopback,
    );
    assert!(!b.is_member_address(&"192.0.2.77".parse().unwrap()));
    let dialled_us = ma(OURS).with(Protocol::P2p(PeerId::random()));
    identified(
        &mut b,
        3,
        member,
        from(addr("203.0.113.7")),
        &listen,
        &dialled_us,
    );
    assert!(b.is_member_address(&"203.0.113.7".parse().unwrap()));
    identified(
        &mut b,
        4,
        member,
        from(addr("127.0.0.1")),
        &listen,
        &loopback,
    );
    assert!(b.is_member_address(&"127.0.0.1".parse().unwrap()));
    let announced = [ma("/ip4/203.0.113.9/tcp/4001")];
    identified(
        &mut b,
        5,
        member,
        from(addr("203.0.113.9")),
        &announced,
        &forwarder,
    );
    assert!(b.is_member_address(&"203.0.113.9".parse().unwrap()));
}

/// Only the peer a connection authenticated speaks for it; a proof that failed (the node
/// did not know its own address yet) is judged again at the peer's next identify.
#[test]
fn a_connections_address_is_proven_by_its_own_peer_at_any_identify() {
    let member = PeerId::random();
    let other = PeerId::random();
    let mut b = PendingInbound::new(8, 2, [member, other]);
    let listen = [ma("/ip4/192.168.1.5/tcp/4001")];
    let dialled_us = ma(OURS);
    identified(
        &mut b,
        1,
        member,
        from(addr("203.0.113.7")),
        &listen,
        &dialled_us,
    );
    assert!(!b.is_member_address(&"203.0.113.7".parse().unwrap()));
    let id = ConnectionId::new_unchecked(1);
    b.own.insert(ma(OURS));
    let what = Identified {
        listen_addrs: &listen,
        observed_addr: &dialled_us,
    };
    b.identified(id, other, &what);
    assert!(!b.is_member_address(&"203.0.113.7".parse().unwrap()));
    b.identified(id, member, &what);
    assert!(b.is_member_address(&"203.0.113.7".parse().unwrap()));
    assert!(b.unproven.is_empty());
}

/// A loopback or private address means another host where the node is: a member listing
/// one vouches for nothing (a forwarder in the node's network holding the member's
/// private address), and neither does the node's own loopback IP seen at the far end of a
/// connection dialled at a global address.
#[test]
fn listed_or_seen_addresses_of_another_scope_prove_nothing() {
    let member = PeerId::random();
    let mut b = PendingInbound::new(8, 2, [member]);
    b.own.insert(ma(OURS));
    b.own.insert(ma("/ip4/127.0.0.1/tcp/30333"));
    let lan = ma("/ip4/192.168.1.5/tcp/4001");
    let elsewhere = ma("/ip4/192.0.2.66/tcp/5555");
    identified(
        &mut b,
        1,
        member,
        dialled(lan.clone()),
        std::slice::from_ref(&lan),
        &elsewhere,
    );
    identified(
        &mut b,
        2,
        member,
        from(addr("192.168.1.5")),
        std::slice::from_ref(&lan),
        &elsewhere,
    );
    assert!(!b.is_member_address(&"192.168.1.5".parse().unwrap()));
    let global = ma("/ip4/203.0.113.7/tcp/4001");
    let loopback_seen = ma("/ip4/127.0.0.1/tcp/40000");
    identified(&mut b, 3, member, dialled(global), &[lan], &loopback_seen);
    assert!(!b.is_member_address(&"203.0.113.7".parse().unwrap()));
}

/// The node's own addresses follow the swarm: a confirmed external address (a NAT's
/// public address, `--public-addr`) proves a member that dialled it, until it expires.
#[test]
fn a_confirmed_external_address_proves_members_that_dial_it_until_it_expires() {
    let member = PeerId::random();
    let mut b = PendingInbound::new(8, 2, [member]);
    let public = ma("/ip4/198.51.100.20/tcp/30333");
    let listen = [ma("/ip4/192.168.1.5/tcp/4001")];
    identified(
        &mut b,
        1,
        member,
        from(addr("203.0.113.7")),
        &listen,
        &public,
    );
    assert!(!b.is_member_address(&"203.0.113.7".parse().unwrap()));
    b.on_swarm_event(FromSwarm::ExternalAddrConfirmed(ExternalAddrConfirmed {
        addr: &public,
    }));
    b.identified(
        ConnectionId::new_unchecked(1),
        member,
        &Identified {
            listen_addrs: &listen,
            observed_addr: &public,
        },
    );
    assert!(b.is_member_address(&"203.0.113.7".parse().unwrap()));
    b.on_swarm_event(FromSwarm::ExternalAddrExpired(ExternalAddrExpired {
        addr: &public,
    }));
    identified(
        &mut b,
        2,
        member,
        from(addr("203.0.113.8")),
        &listen,
        &public,
    );
    assert!(!b.is_member_address(&"203.0.113.8".parse().unwrap()));
}
