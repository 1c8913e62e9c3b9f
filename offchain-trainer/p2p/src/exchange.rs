//! The fault-tolerant all-gather of one outer round (`docs/architecture.md`, step 3).
//!
//! Every member announces its payload in its signed heartbeats and serves it; every member
//! fetches every announced payload from its author (a full all-gather: with N ≤ a few dozen
//! trainers and payloads of tens of MB, each peer uploads (N−1)× and downloads (N−1)× its
//! payload size). A member that got a payload serves it on: if the author dies mid-round, a
//! peer whose fetch failed gets it from one that succeeded (checked against the author's
//! signed digest), so the survivors agree on the included set instead of splitting the vote.
//! The round ends for a member when every other member is included, has said it leaves, has
//! been silent for `dead_after` (10 s), has answered "not found" for the payload it announced
//! and no relay has delivered it within `dead_after` of that answer (a member that heartbeats
//! but never delivers), or failed our ask of it otherwise (refused it, stalled it, reset the
//! stream) and nobody delivered it within `announce_grace` of that failure, has announced nothing within `announce_grace` of our own announcement
//! (a member that heartbeats but never announces), or has moved on to a later round without
//! announcing this one (a member re-joining after a restart), or at the deadline. A payload is asked of its author first,
//! then, while no source asked has answered, of one more member every `hedge_after` (hedged
//! requests): the author and the other members in turn, at most
//! [`MAX_FETCHES_PER_PAYLOAD`] side by side (the oldest silent one dropped for the next);
//! once a source answers, the silent ones are dropped; the first intact delivery wins and the
//! others are aborted.
//! The included set is returned in member order.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use crate::{Client, NetError};

/// Timing of a round's exchange.
#[derive(Clone, Copy, Debug)]
pub struct ExchangeConfig {
    /// Hard limit from the start of the exchange.
    pub deadline: Duration,
    /// A member silent this long is excluded (Prime's ElasticDeviceMesh: 10 s).
    pub dead_after: Duration,
    /// A live member that has announced no payload this long after we announced ours (the
    /// exchange's start) is excluded: a member that heartbeats and never announces would
    /// otherwise hold every exchange, and so every round, until `deadline`. An honest member
    /// whose inner phase ends later than ours by more than this is left out of the round (a
    /// pool member sets it from its inner phase's length: `announce_grace` in
    /// `synod-member`).
    pub announce_grace: Duration,
    /// Largest payload accepted, in bytes.
    pub max_payload_bytes: u64,
    /// While no source asked for a payload has answered (sent its header), one more source
    /// (the next relay) is asked every `hedge_after`, beside the ones still in flight: sources
    /// that take a request and never answer cost this each, not their whole stall time one
    /// after the other. A source that answers and then drips is cut by the transfer's pace
    /// ([`crate::Limits::min_rate`]), and the next is asked.
    pub hedge_after: Duration,
}

impl Default for ExchangeConfig {
    fn default() -> Self {
        Self {
            deadline: Duration::from_secs(120),
            dead_after: Duration::from_secs(10),
            announce_grace: Duration::from_secs(30),
            max_payload_bytes: 1 << 30,
            hedge_after: Duration::from_secs(2),
        }
    }
}

/// One member's payload as the exchange delivered it: checked against the author's signed
/// digest, bytes shared with the serving store (no copy).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gathered {
    /// The author's member index in the pool.
    pub member: u32,
    /// The payload bytes (the trace, commitments and codec body the author signed).
    pub payload: Arc<Vec<u8>>,
}

/// What one member's exchange produced.
#[derive(Clone, Debug)]
pub struct ExchangeOutcome {
    /// Payloads of the included set (own first-hand), ascending member index.
    pub included: Vec<Gathered>,
    /// Members left out, with the reason.
    pub excluded: Vec<(u32, String)>,
    /// The signed announcement of every included payload but our own, by member index
    /// (SCALE `synod_protocol::evidence::Signed`): challenge evidence for that payload.
    pub announcements: BTreeMap<u32, Arc<Vec<u8>>>,
    /// Seconds the exchange took.
    pub secs: f64,
}

/// A finished fetch: the author's member index, the announced digest, whether the author
/// itself answered, the bytes or the error.
type Fetched = (u32, [u8; 32], bool, Result<Vec<u8>, NetError>);

/// Most fetches of one payload in flight at once: a source that has not answered when the
/// next hedge is due with this many in flight is dropped for it, so silent sources cost
/// [`ExchangeConfig::hedge_after`] each in turn, and at most this many bodies of one payload
/// are ever read side by side.
pub const MAX_FETCHES_PER_PAYLOAD: usize = 3;

/// The author and whether it was asked directly, by fetch task.
type TaskOf = std::collections::HashMap<tokio::task::Id, (u32, bool)>;

/// One fetch of a payload in flight.
struct Flight {
    /// The fetch task.
    handle: tokio::task::AbortHandle,
    /// Set once its source has answered with the payload's header (it is sending the body).
    answered: Arc<AtomicBool>,
}

/// The fetches of one author's payload in flight (never empty while kept), oldest first, and
/// when the last one started.
struct Flights {
    live: Vec<Flight>,
    last: Instant,
}

impl Flights {
    /// Aborts the flight of task `id` (if in flight) and forgets it, here and in `task_of`
    /// (so that its cancellation is not taken for a failed fetch).
    fn drop_flight(&mut self, id: tokio::task::Id, task_of: &mut TaskOf) {
        task_of.remove(&id);
        self.live.retain(|f| {
            let keep = f.handle.id() != id;
            if !keep {
                f.handle.abort();
            }
            keep
        });
    }
}

/// An author's failure clock in one exchange: how long it is still waited for once our own ask
/// of it failed.
#[derive(Clone, Copy, Debug)]
struct FailureClock {
    /// When we first asked the author itself (at most `first`).
    asked: Instant,
    /// When our ask of the author first failed.
    first: Instant,
    /// How long the sources then get (`dead_after` after a "not found", else
    /// `announce_grace`).
    grace: Duration,
    /// How long its payload's body may take at the slowest rate kept
    /// ([`crate::Limits::body_time`] of its announced size, at most twice the largest payload
    /// delivered in the exchange).
    body: Duration,
    /// When a source was last seen sending its body.
    last_sending: Option<Instant>,
}

impl FailureClock {
    /// Whether the author is still waited for at `now` (`sending`: a source is sending its
    /// body now). Never past `asked + grace + body`: a transfer that started within the grace
    /// and keeps the slowest rate kept ends by then, so an author (or a relay) that answers
    /// every ask with a header and then drips, cut each time by the pace and asked again, or
    /// that sends a whole body at the slowest pace and then fails it, cannot hold the
    /// exchange to its deadline. Before that: while a source sends, and `grace` after the
    /// later of the first failure and the last source seen sending (a relay's transfer that
    /// breaks gives the other sources their turn).
    fn waits(&self, now: Instant, sending: bool) -> bool {
        let hard = self.asked + self.grace + self.body;
        if now >= hard {
            return false;
        }
        let from = self.last_sending.map_or(self.first, |s| s.max(self.first));
        sending || now.duration_since(from) < self.grace
    }
}

/// Whether `member` has announced a later round than `round` and nothing for `round`: it will
/// not contribute to `round` (a member that re-joins after a restart starts at a later round).
fn moved_on(snap: &crate::Snapshot, member: u32, round: u32) -> bool {
    snap.round_of.get(&member).is_some_and(|r| *r > round)
        && !snap.announced.contains_key(&(round, member))
}

/// Publishes `payload` as our contribution to `round` and gathers the others'.
///
/// # Errors
/// [`NetError::Stopped`] if the node has shut down.
pub async fn all_gather(
    client: &Client,
    round: u32,
    payload: Arc<Vec<u8>>,
    cfg: ExchangeConfig,
) -> Result<ExchangeOutcome, NetError> {
    let start = Instant::now();
    client.set_round(round).await?;
    client.set_payload(round, payload.clone()).await?;
    // Payloads are shared, never copied: the one fetched is relayed and aggregated as is.
    let mut got: BTreeMap<u32, Arc<Vec<u8>>> = BTreeMap::new();
    got.insert(client.me, payload);
    let mut failed: BTreeMap<u32, String> = BTreeMap::new();
    let mut inflight: JoinSet<Fetched> = JoinSet::new();
    // Fetches in flight per author, and when the last of them started.
    let mut started: BTreeMap<u32, Flights> = BTreeMap::new();
    // The author and whether it was asked directly, by fetch task.
    let mut task_of = TaskOf::new();
    // After every fetch of an author's payload failed, wait this long before asking again.
    let mut retry_at: BTreeMap<u32, Instant> = BTreeMap::new();
    // Fetch attempts per author: 0 asks the author, later ones go round the relays.
    let mut attempts: BTreeMap<u32, usize> = BTreeMap::new();
    // When each author's own answer to our ask first failed, and how long relays then get to
    // deliver its payload before it is left out unless a source is sending the body: a "not
    // found" (which an honest author never answers: its payload is stored before it is
    // announced, and kept across restarts) gets `dead_after`; any other failure of the author
    // (a refusal, a stall, a reset stream: these befall honest authors too, rarely) gets the
    // longer `announce_grace`, so that an author that answers no request cannot hold the
    // exchange to the deadline. Relays without the payload do not start the clock. Nothing
    // stops it once started: an author's later answers (a header, then a drip) hold the
    // exchange at most `FailureClock::waits`'s bound, not until the deadline.
    let mut failing_since: BTreeMap<u32, (Instant, Duration)> = BTreeMap::new();
    // When a source was last seen sending each member's body: the failure clock counts from
    // the later of its start and this (a relay's transfer that breaks gives the rest their
    // turn before the author is left out).
    let mut last_sending: BTreeMap<u32, Instant> = BTreeMap::new();
    // When we last asked each author itself, and when we first did.
    let mut author_asked: BTreeMap<u32, Instant> = BTreeMap::new();
    let mut first_asked: BTreeMap<u32, Instant> = BTreeMap::new();
    let members = client.members();
    let limits = client.limits();
    loop {
        let snap = client.snapshot();
        let now = Instant::now();
        for m in members.iter() {
            if got.contains_key(&m.index) || retry_at.get(&m.index).is_some_and(|t| now < *t) {
                continue;
            }
            let Some(p) = snap.announced.get(&(round, m.index)).map(|a| a.payload) else {
                continue;
            };
            // The author, then the other members (relays, their order rotated by author and
            // requester so that hedges spread over them) and the author again, in turn: one
            // failed or stalled fetch does not stop us asking the one peer sure to hold it,
            // nor the others that may.
            // A peer that served a body with the wrong digest is not asked to relay again.
            let mut relays: Vec<_> = members
                .iter()
                .filter(|o| o.index != m.index && o.index != client.me)
                .filter(|o| !snap.distrusted.contains(&o.peer_id))
                .map(|o| o.peer_id)
                .collect();
            rotate_relays(&mut relays, m.index, client.me);
            let sources: Vec<_> = std::iter::once(m.peer_id).chain(relays).collect();
            if let Some(f) = started.get_mut(&m.index) {
                if f.live.iter().any(|x| x.answered.load(Ordering::Relaxed)) {
                    // A source is sending the body: the silent ones are not needed.
                    let silent: Vec<_> = f
                        .live
                        .iter()
                        .filter(|x| !x.answered.load(Ordering::Relaxed))
                        .map(|x| x.handle.id())
                        .collect();
                    for id in silent {
                        f.drop_flight(id, &mut task_of);
                    }
                    continue;
                }
                if now.duration_since(f.last) < cfg.hedge_after || f.live.len() >= sources.len() {
                    continue;
                }
                if f.live.len() >= MAX_FETCHES_PER_PAYLOAD {
                    // The oldest source has had its turn without answering.
                    let id = f.live[0].handle.id();
                    f.drop_flight(id, &mut task_of);
                }
            }
            // A failing author is asked again at least every `dead_after`, whatever the relays'
            // turn (many silent relays would otherwise let its grace pass unasked).
            let author_busy = started.get(&m.index).is_some_and(|f| {
                f.live
                    .iter()
                    .any(|x| task_of.get(&x.handle.id()).is_some_and(|(_, d)| *d))
            });
            let author_due = failing_since.contains_key(&m.index)
                && !author_busy
                && author_asked
                    .get(&m.index)
                    .is_none_or(|t| now.duration_since(*t) >= cfg.dead_after);
            let peer = if author_due {
                m.peer_id
            } else {
                let n = attempts.entry(m.index).or_insert(0usize);
                let peer = sources[*n % sources.len()];
                *n += 1;
                peer
            };
            if peer == m.peer_id {
                author_asked.insert(m.index, now);
                first_asked.entry(m.index).or_insert(now);
            }
            let c = client.clone();
            let (idx, max) = (m.index, cfg.max_payload_bytes);
            let direct = peer == m.peer_id;
            let answered = Arc::new(AtomicBool::new(false));
            let flag = answered.clone();
            let handle = inflight.spawn(async move {
                let r = c
                    .fetch_payload_signalled(peer, idx, round, p, max, Some(&answered))
                    .await;
                if r.is_err() {
                    // A source that answered and then failed (cut as a drip, a wrong
                    // digest) no longer holds more sources back.
                    answered.store(false, Ordering::Relaxed);
                }
                if !direct && matches!(r, Err(NetError::DigestMismatch)) {
                    c.distrust_relay(peer);
                }
                (idx, p.digest, direct, r)
            });
            task_of.insert(handle.id(), (idx, direct));
            let f = started.entry(idx).or_insert_with(|| Flights {
                live: Vec::new(),
                last: now,
            });
            f.last = now;
            f.live.push(Flight {
                handle,
                answered: flag,
            });
        }
        while let Some(done) = inflight.try_join_next_with_id() {
            let (id, (idx, digest, direct, r)) = match done {
                Ok((id, fetched)) => (id, fetched),
                Err(e) => {
                    // Aborted by us (forgotten then), or panicked: a failed fetch.
                    let Some(&(idx, direct)) = task_of.get(&e.id()) else {
                        continue;
                    };
                    let err = NetError::Request(format!("fetch task failed: {e}"));
                    (e.id(), (idx, [0; 32], direct, Err(err)))
                }
            };
            if task_of.remove(&id).is_none() || got.contains_key(&idx) {
                continue; // dropped for another source, or already delivered
            }
            match r {
                Ok(bytes) => {
                    // Relay it: a peer whose fetch from the author failed can get it from us.
                    let bytes = Arc::new(bytes);
                    client.relay_verified(round, idx, digest, bytes.clone());
                    got.insert(idx, bytes);
                    failed.remove(&idx);
                    if let Some(f) = started.remove(&idx) {
                        for x in f.live {
                            x.handle.abort();
                            task_of.remove(&x.handle.id());
                        }
                    }
                }
                Err(e) => {
                    if direct {
                        let grace = if matches!(e, NetError::NotFound) {
                            cfg.dead_after
                        } else {
                            cfg.announce_grace.max(cfg.dead_after)
                        };
                        // The earliest end counts: a "not found" after a transient failure (a
                        // dial not yet through) still leaves the author out `dead_after` later.
                        let now = Instant::now();
                        let clock = failing_since.entry(idx).or_insert((now, grace));
                        if now + grace < clock.0 + clock.1 {
                            *clock = (now, grace);
                        }
                    }
                    failed.insert(idx, e.to_string());
                    if let Some(f) = started.get_mut(&idx) {
                        f.live.retain(|x| x.handle.id() != id);
                        if f.live.is_empty() {
                            // Retry on a later pass (the author may still be starting to serve).
                            started.remove(&idx);
                            retry_at.insert(idx, Instant::now() + Duration::from_millis(250));
                        }
                    }
                }
            }
        }
        let waiting: Vec<u32> = members
            .iter()
            .map(|m| m.index)
            .filter(|i| !got.contains_key(i))
            .filter(|i| !snap.left.contains(i))
            .filter(|i| {
                members
                    .get(*i)
                    .is_some_and(|m| !snap.banned.contains_key(&m.peer_id))
            })
            .filter(|i| {
                snap.last_seen
                    .get(i)
                    .is_some_and(|t| now.duration_since(*t) < cfg.dead_after)
                    || started.contains_key(i)
            })
            .filter(|i| !moved_on(&snap, *i, round))
            .filter(|i| {
                start.elapsed() < cfg.announce_grace || snap.announced.contains_key(&(round, *i))
            })
            .filter(|i| {
                let sending = started
                    .get(i)
                    .is_some_and(|f| f.live.iter().any(|x| x.answered.load(Ordering::Relaxed)));
                if sending {
                    last_sending.insert(*i, now);
                }
                let Some((t, grace)) = failing_since.get(i) else {
                    return true;
                };
                // The announced size, but no more than twice the largest payload delivered in
                // this exchange (ours included): an author does not buy time by announcing the
                // largest size the pool allows.
                let announced = snap
                    .announced
                    .get(&(round, *i))
                    .map_or(0, |a| a.payload.size);
                let largest = got.values().map(|b| b.len() as u64).max().unwrap_or(0);
                let clock = FailureClock {
                    asked: first_asked.get(i).map_or(*t, |a| (*a).min(*t)),
                    first: *t,
                    grace: *grace,
                    body: limits.body_time(announced.min(largest.saturating_mul(2))),
                    last_sending: last_sending.get(i).copied(),
                };
                clock.waits(now, sending)
            })
            .collect();
        if waiting.is_empty() || start.elapsed() >= cfg.deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    inflight.abort_all();
    let announce_grace_passed = start.elapsed() >= cfg.announce_grace;
    let snap = client.snapshot();
    let excluded = members
        .iter()
        .filter(|m| !got.contains_key(&m.index))
        .map(|m| {
            let why = if snap.left.contains(&m.index) {
                "left".to_string()
            } else if failing_since.contains_key(&m.index) {
                let last = failed.get(&m.index).map_or("", String::as_str);
                format!("announced but not delivered (the author failed our ask; last: {last})")
            } else if let Some(e) = failed.get(&m.index) {
                format!("fetch failed: {e}")
            } else if moved_on(&snap, m.index, round) {
                "moved past the round without contributing (it is catching up)".to_string()
            } else if snap.announced.contains_key(&(round, m.index)) {
                "payload not fetched by the deadline".to_string()
            } else if announce_grace_passed
                && snap
                    .last_seen
                    .get(&m.index)
                    .is_some_and(|t| t.elapsed() < cfg.dead_after)
            {
                format!(
                    "live but announced nothing within {:.0} s of our announcement",
                    cfg.announce_grace.as_secs_f64()
                )
            } else {
                "silent (no announcement)".to_string()
            };
            (m.index, why)
        })
        .collect();
    let announcements = got
        .keys()
        .filter_map(|m| Some((*m, snap.announced.get(&(round, *m))?.signed.clone())))
        .collect();
    let included = got
        .into_iter()
        .map(|(member, payload)| Gathered { member, payload })
        .collect();
    Ok(ExchangeOutcome {
        included,
        excluded,
        announcements,
        secs: start.elapsed().as_secs_f64(),
    })
}

/// After a member's last round: keeps serving until every live member has announced its
/// payload for `last_round` (so it is fetching ours) or `max_wait` has passed, lingers 3 s for
/// fetches in flight, then says goodbye and stops the node.
pub async fn finish(client: &Client, last_round: u32, dead_after: Duration, max_wait: Duration) {
    let start = Instant::now();
    let members = client.members();
    while start.elapsed() < max_wait {
        let snap = client.snapshot();
        let pending = members.iter().any(|m| {
            m.index != client.me
                && !snap.announced.contains_key(&(last_round, m.index))
                && !snap.left.contains(&m.index)
                && snap
                    .last_seen
                    .get(&m.index)
                    .is_some_and(|t| t.elapsed() < dead_after)
        });
        if !pending {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let _ = client.leave().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    client.shutdown().await;
}

/// Rotates the relays of `author`'s payload, as asked by member `me`, by `author + me` places:
/// each requester asks each author's relays in another order, so that the hedged asks of a
/// round spread over the members instead of all falling first on the lowest index, and no
/// one seat is every requester's first relay for every payload.
pub fn rotate_relays<T>(relays: &mut [T], author: u32, me: u32) {
    if !relays.is_empty() {
        let k = (author as usize + me as usize) % relays.len();
        relays.rotate_left(k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_author_is_waited_for_no_longer_than_its_grace_and_body_time() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let clock = FailureClock {
            asked: t0,
            first: t0,
            grace: s(10),
            body: s(12),
            last_sending: None,
        };
        // Silent: the grace from the first failure.
        assert!(clock.waits(t0 + s(9), false));
        assert!(!clock.waits(t0 + s(10), false));
        // A source sending: waited for, but never past grace + body.
        assert!(clock.waits(t0 + s(21), true));
        assert!(!clock.waits(t0 + s(22), true));
        // A relay's transfer that broke at 15 s gives the others their grace from then, still
        // within the bound.
        let broke = FailureClock {
            last_sending: Some(t0 + s(15)),
            ..clock
        };
        assert!(broke.waits(t0 + s(20), false));
        assert!(!broke.waits(t0 + s(22), false));
        // Drips that start again and again (the author's header at every ask) end at the
        // bound all the same.
        for k in 0..10u64 {
            let at = t0 + s(2 * k);
            let dripping = FailureClock {
                last_sending: Some(at),
                ..clock
            };
            assert_eq!(dripping.waits(at, true), at < t0 + s(22));
        }
        // A whole body at the slowest pace, failed at its end (20 s after the first ask): the
        // bound still counts from the first ask.
        let late = FailureClock {
            first: t0 + s(20),
            ..clock
        };
        assert!(late.waits(t0 + s(21), true));
        assert!(!late.waits(t0 + s(22), true));
        assert!(
            !late.waits(t0 + s(25), false),
            "past the bound, the grace is over too"
        );
    }
}
