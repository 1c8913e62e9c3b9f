//! Fetching the Proof-of-Learning trace states a verifier's segment checks of one round need,
//! every accused at once, under one deadline for the round.
//!
//! Fetched one contribution at a time, each accused that stalls its states (it answers
//! nothing until the wait runs out) would delay the checks of all the contributions after it:
//! k stallers push an accomplice's check k fetch deadlines later, towards the end of its
//! challenge window. Fetched side by side, the round's fetches wait one deadline at most,
//! whatever the number of stallers (each staller still costs its verifier a whole replay,
//! which the verifier runs after the checks whose states arrived).

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use synod_diloco::payload::Payload;
use synod_diloco::residual::NO_RESIDUAL;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::replay::needed_states;

/// What to ask each author for, in order, from `checks` (author, its signed payload, the
/// segments drawn for it): a sparse payload's residuals first (`sparse`: the pool's codec;
/// without them nothing can be replayed), then the trace states its segment check needs
/// ([`needed_states`], for a trace of `boundaries` states). Authors with nothing to fetch are
/// left out. Every author is asked for every state its payload names, even one another
/// payload names too: a copier's payload names its victim's residuals and states, and asked of
/// the copier alone they would make the honest victim look as if it withheld them.
pub fn wanted_states<K>(
    checks: Vec<(K, Vec<u8>, Vec<u32>)>,
    boundaries: usize,
    sparse: bool,
) -> Vec<(K, Vec<[u8; 32]>)> {
    let mut wanted = Vec::new();
    for (author, claimed, segments) in checks {
        let Ok(parts) = Payload::parse(0, &claimed) else {
            continue;
        };
        let mut hashes = if sparse {
            residuals_named(&parts)
        } else {
            Vec::new()
        };
        if let Some(trace) = parts.trace {
            if trace.len() == boundaries {
                hashes.extend(
                    needed_states(trace.len(), &segments)
                        .into_iter()
                        .map(|j| trace[j]),
                );
            }
        }
        if !hashes.is_empty() {
            wanted.push((author, hashes));
        }
    }
    wanted
}

/// The residuals each author's sparse payload names (`checks`: author and signed payload), the
/// part of [`wanted_states`] asked of every author whatever its check: a juror replaying a
/// whole phase needs no trace state but still needs the residuals, and a verifier whose first
/// ask was too short for them asks again for these alone. Authors whose payload names none
/// (or does not parse) are left out.
pub fn wanted_residuals<K>(checks: Vec<(K, Vec<u8>)>) -> Wanted<K> {
    checks
        .into_iter()
        .filter_map(|(author, claimed)| {
            let parts = Payload::parse(0, &claimed).ok()?;
            let hashes = residuals_named(&parts);
            (!hashes.is_empty()).then_some((author, hashes))
        })
        .collect()
}

/// The residuals a payload carries in and out (blake3), without [`NO_RESIDUAL`].
fn residuals_named(parts: &Payload<'_>) -> Vec<[u8; 32]> {
    parts
        .commitments
        .iter()
        .flat_map(|c| [c.carried_in, c.carried_out])
        .filter(|h| *h != NO_RESIDUAL)
        .collect()
}

/// What to fetch: per check, the blake3 hashes of the trace states it needs, in order.
pub type Wanted<K> = Vec<(K, Vec<[u8; 32]>)>;

/// Fetches `wanted` (per check: the blake3 hashes of the trace states wanted for it, in order;
/// `author` names who serves a check's states) with `fetch`: each check's states one after the
/// other, at most `per_state` each; an author's checks (of several rounds) one after the other
/// too, so that an author is asked for one state at a time (a node serves a member at most
/// `synod_p2p::EVIDENCE_PER_MEMBER` evidence transfers at once); the authors side by side, and
/// nothing after `within` from now. A check stops at its first state not served (`None`) at
/// once: it replays the whole phase; an author's fetch stops at its first state not served
/// after half of `per_state` or more, or not in time (its checks replay the whole phase): one
/// author that stalls in j checks costs one wait, not j. Returns what `fetch` gave for
/// each state received (the bytes, or where it put them), by hash. Must run inside a tokio
/// runtime.
pub async fn prefetch_states<K, A, T, F, Fut>(
    wanted: Wanted<K>,
    author: impl Fn(&K) -> A,
    per_state: Duration,
    within: Duration,
    fetch: F,
) -> HashMap<[u8; 32], T>
where
    K: Copy + Send + 'static,
    A: PartialEq,
    T: Send + 'static,
    F: Fn(K, [u8; 32]) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Option<T>> + Send + 'static,
{
    let deadline = Instant::now() + within;
    let fetch = Arc::new(fetch);
    let mut by_author: Vec<(A, Wanted<K>)> = Vec::new();
    for (check, hashes) in wanted {
        let a = author(&check);
        match by_author.iter_mut().find(|(b, _)| *b == a) {
            Some((_, checks)) => checks.push((check, hashes)),
            None => by_author.push((a, vec![(check, hashes)])),
        }
    }
    let mut tasks = JoinSet::new();
    for (_, checks) in by_author {
        let fetch = fetch.clone();
        tasks.spawn(async move {
            let mut got = Vec::new();
            'author: for (from, hashes) in checks {
                for h in hashes {
                    let left = deadline
                        .saturating_duration_since(Instant::now())
                        .min(per_state);
                    if left.is_zero() {
                        break 'author;
                    }
                    let asked = Instant::now();
                    match tokio::time::timeout(left, fetch(from, h)).await {
                        Ok(Some(bytes)) => got.push((h, bytes)),
                        // Not served at once (not found, a broken stream): this check replays
                        // whole, the author's others are asked.
                        Ok(None) if asked.elapsed() < per_state / 2 => break,
                        // Not served after a wait (a transfer the network layer cut at its
                        // stall limit), or not in time: an author that stalls one state
                        // stalls the rest, and each of its checks would cost another wait.
                        _ => break 'author,
                    }
                }
            }
            got
        });
    }
    let mut out = HashMap::new();
    while let Some(done) = tasks.join_next().await {
        if let Ok(got) = done {
            out.extend(got);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use synod_diloco::payload::Payload;
    use synod_diloco::residual::Commitments;

    /// A sparse payload's bytes with `trace` and `c` in front of an empty body.
    fn framed(trace: Option<Vec<[u8; 32]>>, c: Commitments) -> Vec<u8> {
        Payload {
            trace,
            commitments: Some(c),
            body: b"SYNG",
        }
        .to_bytes()
    }

    #[test]
    fn a_copier_cannot_make_its_victims_residuals_look_withheld() {
        // The copier's payload is its victim's, bytes for bytes: same residuals, same trace.
        let c = Commitments {
            carried_in: [1; 32],
            carried_out: [2; 32],
        };
        let trace: Vec<[u8; 32]> = (3..8u8).map(|b| [b; 32]).collect();
        let payload = framed(Some(trace.clone()), c);
        let checks = vec![
            ("copier", payload.clone(), vec![1]),
            ("victim", payload.clone(), vec![1]),
        ];
        let wanted = wanted_states(checks, trace.len(), true);
        // Each is asked for the residuals first, then the end state and segment 1's bounds.
        let expect = vec![[1; 32], [2; 32], [4; 32], [5; 32], [7; 32]];
        assert_eq!(wanted, vec![("copier", expect.clone()), ("victim", expect)]);
        // A dense pool fetches no residuals; a round-1 payload has no carried_in to fetch.
        let dense = wanted_states(vec![("m", payload.clone(), vec![1])], trace.len(), false);
        assert_eq!(dense[0].1, vec![[4; 32], [5; 32], [7; 32]]);
        let first = Commitments {
            carried_in: NO_RESIDUAL,
            carried_out: [2; 32],
        };
        let round_one = framed(None, first);
        assert_eq!(
            wanted_states(vec![("m", round_one.clone(), vec![])], trace.len(), true),
            vec![("m", vec![[2; 32]])]
        );
        // The residuals alone: both of the copier's and the victim's, none of a round-1
        // payload's carried_in, nothing for a payload that names none.
        let alone = wanted_residuals(vec![
            ("copier", payload.clone()),
            ("victim", payload),
            ("m", round_one),
            ("dense", b"SYNG".to_vec()),
        ]);
        assert_eq!(
            alone,
            vec![
                ("copier", vec![[1; 32], [2; 32]]),
                ("victim", vec![[1; 32], [2; 32]]),
                ("m", vec![[2; 32]])
            ]
        );
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_time()
            .build()
            .unwrap()
    }

    #[test]
    fn stalling_authors_do_not_delay_the_states_of_an_accomplices_check() {
        // Authors 0 and 1 never answer; author 2 (the accomplice, checked last) answers at
        // once. Fetched one author after the other, author 2's states would come after two
        // full deadlines; side by side they come at once and the round waits one deadline.
        let within = Duration::from_secs(2);
        let hashes = |a: u8| vec![[a; 32], [a + 10; 32]];
        let wanted: Vec<(u8, Vec<[u8; 32]>)> = (0..3).map(|a| (a, hashes(a))).collect();
        let t0 = std::time::Instant::now();
        let got = rt().block_on(prefetch_states(
            wanted,
            |a| *a,
            within,
            within,
            |author, h| async move {
                if author < 2 {
                    std::future::pending::<()>().await;
                }
                Some(h.to_vec())
            },
        ));
        let waited = t0.elapsed();
        assert!(waited < 2 * within, "the round waited {waited:?}");
        let mut keys: Vec<[u8; 32]> = got.keys().copied().collect();
        keys.sort_unstable();
        assert_eq!(keys, hashes(2), "the accomplice's states, and only them");
    }

    #[test]
    fn an_author_is_asked_no_more_after_a_state_it_does_not_serve() {
        let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = asked.clone();
        let got = rt().block_on(prefetch_states(
            vec![(0u8, vec![[1; 32], [2; 32], [3; 32]])],
            |a| *a,
            Duration::from_secs(5),
            Duration::from_secs(5),
            move |_, h| {
                log.lock().unwrap().push(h[0]);
                async move { (h[0] != 2).then(|| vec![h[0]]) }
            },
        ));
        assert_eq!(*asked.lock().unwrap(), vec![1, 2]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[&[1; 32]], vec![1]);
        // Nor for another check of its (another round) when the refusal came after a wait (the
        // network layer's stall limit): that wait is paid once.
        let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = asked.clone();
        let t0 = std::time::Instant::now();
        let got = rt().block_on(prefetch_states(
            vec![(0u8, vec![[1; 32], [2; 32]]), (0u8, vec![[3; 32]])],
            |a| *a,
            Duration::from_millis(1_500),
            Duration::from_secs(5),
            move |_, h| {
                log.lock().unwrap().push(h[0]);
                async move {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    None::<Vec<u8>>
                }
            },
        ));
        assert!(got.is_empty());
        assert_eq!(*asked.lock().unwrap(), vec![1]);
        assert!(
            t0.elapsed() < Duration::from_millis(1_800),
            "{:?}",
            t0.elapsed()
        );
        // A quick "not served" (a broken stream, a state not kept yet) ends that check only:
        // the author's other checks are still asked.
        let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = asked.clone();
        let got = rt().block_on(prefetch_states(
            vec![(0u8, vec![[1; 32], [2; 32]]), (0u8, vec![[3; 32]])],
            |a| *a,
            Duration::from_secs(5),
            Duration::from_secs(5),
            move |_, h| {
                log.lock().unwrap().push(h[0]);
                async move { (h[0] != 1).then(|| vec![h[0]]) }
            },
        ));
        assert_eq!(*asked.lock().unwrap(), vec![1, 3]);
        assert_eq!(got.keys().copied().collect::<Vec<_>>(), vec![[3; 32]]);
    }

    #[test]
    fn a_state_that_stalls_past_its_own_wait_ends_its_authors_fetch() {
        // One state gets `per_state`, even with the round's deadline far away; the author's
        // other check (another round) is not asked after it: one wait, not one per check.
        let per_state = Duration::from_secs(2);
        let t0 = std::time::Instant::now();
        let got = rt().block_on(prefetch_states(
            vec![(0u8, vec![[1; 32], [2; 32]]), (0u8, vec![[1; 32], [3; 32]])],
            |a| *a,
            per_state,
            Duration::from_secs(10),
            |_, h| async move {
                if h[0] == 1 {
                    std::future::pending::<()>().await;
                }
                Some(vec![h[0]])
            },
        ));
        assert!(got.is_empty());
        assert!(t0.elapsed() < per_state * 7 / 4, "{:?}", t0.elapsed());
    }

    #[test]
    fn an_author_is_asked_for_one_state_at_a_time_whatever_its_checks() {
        // Author 0 has checks in three rounds, author 1 in one: author 0's states come one
        // after the other (a node refuses a member a third evidence transfer at once), while
        // the two authors are fetched side by side.
        use std::sync::atomic::{AtomicUsize, Ordering};
        let in_flight: Arc<[AtomicUsize; 2]> = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let most: Arc<[AtomicUsize; 3]> = Arc::new([
            AtomicUsize::new(0),
            AtomicUsize::new(0),
            AtomicUsize::new(0),
        ]);
        let wanted: Wanted<(u8, u32)> = vec![
            ((0, 1), vec![[1; 32], [2; 32]]),
            ((0, 2), vec![[3; 32]]),
            ((1, 2), vec![[4; 32], [5; 32]]),
            ((0, 3), vec![[6; 32]]),
        ];
        let (flying, peak) = (in_flight.clone(), most.clone());
        let got = rt().block_on(prefetch_states(
            wanted,
            |(author, _)| *author,
            Duration::from_secs(5),
            Duration::from_secs(5),
            move |(author, _), h| {
                let (flying, peak) = (flying.clone(), peak.clone());
                async move {
                    let a = usize::from(author);
                    let now = flying[a].fetch_add(1, Ordering::SeqCst) + 1;
                    peak[a].fetch_max(now, Ordering::SeqCst);
                    let all = flying[0].load(Ordering::SeqCst) + flying[1].load(Ordering::SeqCst);
                    peak[2].fetch_max(all, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    flying[a].fetch_sub(1, Ordering::SeqCst);
                    Some(h[0])
                }
            },
        ));
        assert_eq!(got.len(), 6, "every state of every check");
        assert_eq!(
            most[0].load(Ordering::SeqCst),
            1,
            "author 0: one state at a time"
        );
        assert_eq!(
            most[2].load(Ordering::SeqCst),
            2,
            "the two authors side by side"
        );
    }
}
