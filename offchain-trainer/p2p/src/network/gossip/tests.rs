//! Tests of the gossip of announcements: validation, bans and equivocation proofs.

use super::*;

#[test]
fn heartbeats_are_fresh_within_the_window_either_side() {
    let now = 1_800_000_000_000;
    assert!(fresh(now, now));
    assert!(fresh(now - FRESH_MS, now));
    assert!(fresh(now + FRESH_MS, now));
    assert!(!fresh(now - FRESH_MS - 1, now));
    assert!(!fresh(now + FRESH_MS + 1, now));
    assert!(!fresh(0, now));
    assert!(DUPLICATE_CACHE.as_millis() > u128::from(FRESH_MS));
}

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

/// A peer keeps an honest member's fresh heartbeats (it received them as a member or an
/// outsider on the topic) and re-sends them, with the member's own gossipsub signature,
/// all at once to a node that just started (its duplicate cache empty). Metered per
/// relay, the replays use up the replayer's meter of that member only: the member is never
/// banned for them, and its own heartbeats, sent itself or relayed by anyone else, still
/// pass; a member flooding us itself is still banned.
#[test]
fn fresh_heartbeats_replayed_by_another_peer_neither_ban_nor_silence_their_author() {
    let (author, replayer, relay) = (PeerId::random(), PeerId::random(), PeerId::random());
    let (t0, tick) = (Instant::now(), Duration::from_secs(2));
    let mut m = Meters::default();
    let replayed: Vec<Metered> = (0..2_000)
        .map(|_| m.take(author, replayer, t0, tick))
        .collect();
    assert!(
        !replayed.contains(&Metered::Ban),
        "the author is not banned"
    );
    assert!(replayed.contains(&Metered::Drop), "the replays are dropped");
    assert_eq!(m.take(author, author, t0, tick), Metered::Pass);
    assert_eq!(m.take(author, relay, t0, tick), Metered::Pass);
    let flood: Vec<Metered> = (0..2_000)
        .map(|_| m.take(author, author, t0, tick))
        .collect();
    assert_eq!(flood.last(), Some(&Metered::Ban), "its own flood bans it");
}

/// Once a heartbeat of an author and round is verified, lower-numbered ones announcing the
/// same payload (or none) are copies, dropped free; one announcing another payload is not
/// (it may prove an equivocation), nor is anything about another round or a newer number.
#[test]
fn heartbeats_older_than_a_verified_one_are_free_copies_unless_they_announce_another_payload() {
    let author = PeerId::random();
    let p = |b| {
        Some(PayloadRef {
            digest: [b; 32],
            size: 10,
        })
    };
    let mut m = Meters::default();
    assert!(!m.is_copy(author, 3, 99, p(1)), "nothing verified yet");
    m.verified(author, 3, 100, p(1));
    assert!(m.is_copy(author, 3, 99, p(1)));
    assert!(m.is_copy(author, 3, 100, None));
    assert!(!m.is_copy(author, 3, 101, p(1)), "newer");
    assert!(!m.is_copy(author, 3, 99, p(2)), "another payload");
    assert!(!m.is_copy(author, 4, 50, p(1)), "another round");
    assert!(!m.is_copy(PeerId::random(), 3, 99, p(1)), "another author");
    m.retain(|_| true, 4);
    assert!(!m.is_copy(author, 3, 99, p(1)), "rounds before 4 forgotten");
}

/// A member relays its own flood through many identities (each a fresh relay meter): each
/// relay passes its burst, but the author's meter over all relays bounds what is verified,
/// and no relay's drops ban anyone.
#[test]
fn an_author_flooding_through_many_relays_is_bounded_by_its_own_meter() {
    let author = PeerId::random();
    let (t0, tick) = (Instant::now(), Duration::from_secs(2));
    let mut m = Meters::default();
    let mut passed = 0;
    for _ in 0..100 {
        let relay = PeerId::random();
        for _ in 0..GOSSIP_BURST as usize {
            match m.take(author, relay, t0, tick) {
                Metered::Pass => passed += 1,
                Metered::Drop => {}
                Metered::Ban => panic!("a relayed flood bans nobody"),
            }
        }
    }
    assert_eq!(passed, (GOSSIP_BURST * AUTHOR_SCALE) as usize);
}
