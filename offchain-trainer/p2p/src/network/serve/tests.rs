//! Tests of serving admission: reserved slots per member, evidence first.
use super::*;
use crate::{Member, MemberKey};
use libp2p::identity;

fn peer(i: u8) -> PeerId {
    identity::Keypair::ed25519_from_bytes([i; 32])
        .unwrap()
        .public()
        .to_peer_id()
}

/// A store serving `members` peers 1..=members.
fn served(members: u8) -> Served {
    let set = MemberSet::new(
        7,
        (1..=members)
            .map(|i| Member {
                index: u32::from(i),
                peer_id: peer(i),
                key: MemberKey::from_seed([i; 32]).public(),
            })
            .collect(),
    );
    Served::new(0, Arc::new(set))
}

#[test]
fn non_members_take_no_serving_slot_so_they_cannot_crowd_members_out() {
    let mut s = served(9);
    // Any number of identities that are not registered: no slot, no bookkeeping.
    for i in 100..200 {
        for _ in 0..MAX_SERVED_PER_PEER {
            assert!(!s.admit(peer(i)));
        }
    }
    assert!(s.streams.is_empty() && s.streaming == 0);
    assert!(s.admit(peer(1)), "a member is still served");
}

#[test]
fn served_files_answer_members_by_hash() {
    let mut s = served(2);
    let req = |hash| FetchRequest::Checkpoint { hash };
    let path = |i: usize| std::path::PathBuf::from(format!("/states/{i}"));
    s.add_file([1; 32], path(1));
    assert!(matches!(s.answer(&peer(1), &req([1; 32]), true), Answer::File(p) if p == path(1)));
    assert!(matches!(
        s.answer(&peer(1), &req([2; 32]), true),
        Answer::NotFound
    ));
    assert!(matches!(
        s.answer(&peer(9), &req([1; 32]), true),
        Answer::Refused
    ));
    // Not on the pseudo-gradient protocol.
    assert!(matches!(
        s.answer(&peer(1), &req([1; 32]), false),
        Answer::Refused
    ));
}

/// A sparse pool's residual served at its round, then the trace states of 1 900 more rounds
/// (16 segments each, with a residual: 18 files a round; a one-day challenge window at
/// 45-block rounds keeps that many disputable): the residual is still served until its round is
/// dropped, so the jurors of a late challenge find it (a bound of 8 longest traces, 32 776
/// files, would drop it, and the jurors would count the honest member's evidence unserved).
#[test]
fn own_evidence_stays_served_until_its_round_is_dropped() {
    let mut s = served(2);
    let req = |hash| FetchRequest::Checkpoint { hash };
    let hash = |i: usize| {
        let mut h = [0u8; 32];
        h[..8].copy_from_slice(&(i as u64 + 10).to_le_bytes());
        h
    };
    let path = |i: usize| std::path::PathBuf::from(format!("/states/{i}"));
    let residual = [1; 32];
    s.add_file(residual, path(1));
    let files = 1_900 * 18;
    for i in 0..files {
        s.add_file(hash(i), path(i));
    }
    assert!(
        matches!(s.answer(&peer(1), &req(residual), true), Answer::File(p) if p == path(1)),
        "the residual is still served"
    );
    for i in [0, files / 2, files - 1] {
        assert!(matches!(
            s.answer(&peer(1), &req(hash(i)), true),
            Answer::File(_)
        ));
    }
    // Dropped with its round: not served any more; the others still are.
    s.remove_file(&residual);
    assert!(matches!(
        s.answer(&peer(1), &req(residual), true),
        Answer::NotFound
    ));
    assert!(matches!(
        s.answer(&peer(1), &req(hash(0)), true),
        Answer::File(_)
    ));
}

#[test]
fn members_downloading_again_and_again_are_held_to_a_few_transfers_while_evidence_is_served() {
    let mut s = served(3);
    s.hold = Duration::from_secs(10);
    let t0 = tokio::time::Instant::now();
    let later = |secs| t0 + Duration::from_secs(secs);
    // No evidence served: bulk transfers are bounded by the slots only.
    for _ in 0..MAX_SERVED_PER_PEER {
        assert!(s.start(peer(1), Transfer::Bulk, t0));
    }
    // A juror's evidence transfer starts: member 1's running downloads go on, but it
    // starts no more, and member 3 starts at most CONTENDED_PER_MEMBER.
    assert!(s.start(peer(2), Transfer::Evidence, t0));
    assert!(!s.start(peer(1), Transfer::Bulk, t0));
    for _ in 0..CONTENDED_PER_MEMBER {
        assert!(s.start(peer(3), Transfer::Bulk, t0));
    }
    assert!(!s.start(peer(3), Transfer::Bulk, t0));
    // Evidence too is bounded per member, colluders' included.
    for p in [2, 1] {
        while s.start(peer(p), Transfer::Evidence, t0) {}
        assert_eq!(
            s.transfers[&(peer(p), Transfer::Evidence)],
            EVIDENCE_PER_MEMBER
        );
    }
    // The evidence ends; bulk stays contended for `hold` after the last of it.
    for p in [1, 1, 2, 2] {
        s.end(peer(p), Transfer::Evidence, later(1));
    }
    assert_eq!(s.evidence, 0);
    assert!(!s.start(peer(3), Transfer::Bulk, later(10)));
    assert!(s.start(peer(3), Transfer::Bulk, later(11)));
    // Everything given back.
    for (p, n) in [(1, MAX_SERVED_PER_PEER), (3, CONTENDED_PER_MEMBER + 1)] {
        for _ in 0..n {
            s.end(peer(p), Transfer::Bulk, later(12));
        }
    }
    assert!(s.transfers.is_empty());
}

#[test]
fn serving_slots_are_bounded_per_member_and_in_all_and_given_back() {
    let per_shared = MAX_SERVED_PER_PEER - RESERVED_PER_MEMBER;
    let fillers = MAX_SERVED_STREAMS / per_shared;
    let late = u8::try_from(fillers + 1).unwrap();
    let mut s = served(late + 1);
    for _ in 0..MAX_SERVED_PER_PEER {
        assert!(s.admit(peer(1)));
    }
    assert!(
        !s.admit(peer(1)),
        "one member holds at most MAX_SERVED_PER_PEER"
    );
    // Members 1..=fillers each hold MAX_SERVED_PER_PEER: every shared slot is taken.
    for i in 2..late {
        for _ in 0..MAX_SERVED_PER_PEER {
            assert!(s.admit(peer(i)));
        }
    }
    assert_eq!(s.shared, MAX_SERVED_STREAMS);
    // A member holding nothing still gets its reserved slots, and no more.
    for _ in 0..RESERVED_PER_MEMBER {
        assert!(s.admit(peer(late)), "reserved slots are always free");
    }
    assert!(!s.admit(peer(late)), "no shared slot is free");
    // A slot dropped (as a serving task does, even when it panics) is given back: a
    // shared one here, which the late member takes.
    let shared = Arc::new(Mutex::new(s));
    drop(Slot {
        served: shared.clone(),
        peer: peer(1),
        transfer: None,
    });
    let mut s = lock(&shared);
    assert_eq!(s.shared, MAX_SERVED_STREAMS - 1);
    assert!(s.admit(peer(late)));
    assert_eq!(s.shared, MAX_SERVED_STREAMS);
    for i in 1..=late {
        while s.streams.contains_key(&peer(i)) {
            s.release(peer(i));
        }
    }
    assert!(s.streams.is_empty() && s.streaming == 0 && s.shared == 0);
}
