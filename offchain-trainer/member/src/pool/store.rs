//! Checkpoints under the trainer's base path, addressed by their blake3
//! (`<base>/checkpoints/<hex>.safetensors`), and their retrieval from peers: hedged asks under
//! one deadline ([`first_delivery`]; [`first_deliveries`] for several objects at once, as the
//! payloads of a split round's agreed set).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use synod_checkpoint::CheckpointHash;
use synod_p2p::{Client, PeerId};

/// How long a checkpoint fetch waits for the peers already asked before it asks one more.
pub const HEDGE: Duration = Duration::from_secs(5);
/// Pause before asking again once every peer asked has failed.
pub const RETRY: Duration = Duration::from_millis(500);
/// Most checkpoint asks in flight at once.
pub const MAX_ASKS: usize = 2;
/// A fetch gets one more ask slot each `timeout / STALL_SHARE` of its time (at least a hedge):
/// at most `MAX_ASKS + STALL_SHARE − 1` asks in flight ([`first_delivery`]).
pub const STALL_SHARE: u32 = 4;

/// A content-addressed checkpoint directory (clones name the same directory).
#[derive(Clone)]
pub struct Store {
    dir: PathBuf,
    /// Largest checkpoint fetched from a peer, in bytes (the pool's model's own bound).
    max_bytes: u64,
}

impl Store {
    /// Opens (creating) `dir`; checkpoints of more than `max_bytes` bytes (the model's
    /// [`synod_diloco::max_checkpoint_bytes`]) are never fetched.
    ///
    /// # Errors
    /// If the directory cannot be created.
    pub fn open(dir: &Path, max_bytes: u64) -> Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            max_bytes,
        })
    }

    /// The file of `hash`.
    pub fn path(&self, hash: &CheckpointHash) -> PathBuf {
        self.dir
            .join(format!("{}.safetensors", synod_checkpoint::hex(hash)))
    }

    /// Stores `bytes` (written to a temporary file, then renamed) and returns their blake3.
    ///
    /// # Errors
    /// File errors.
    pub fn put(&self, bytes: &[u8]) -> Result<CheckpointHash> {
        let h = synod_checkpoint::hash(bytes);
        let path = self.path(&h);
        if !path.exists() {
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, bytes)?;
            std::fs::rename(&tmp, &path)?;
        }
        Ok(h)
    }

    /// The bytes of `hash` if stored and intact (a corrupt file is removed).
    pub fn get(&self, hash: &CheckpointHash) -> Option<Vec<u8>> {
        let path = self.path(hash);
        let bytes = std::fs::read(&path).ok()?;
        if synod_checkpoint::hash(&bytes) == *hash {
            Some(bytes)
        } else {
            tracing::warn!("{} does not hash to its name; removing it", path.display());
            let _ = std::fs::remove_file(&path);
            None
        }
    }

    /// Removes the file of `hash` (a checkpoint that lost the vote).
    pub fn remove(&self, hash: &CheckpointHash) {
        let _ = std::fs::remove_file(self.path(hash));
    }

    /// The checkpoint `hash` from this store or, failing that, from `peers` over
    /// `/synod/checkpoint/2` (verified against `hash`, then stored and served), asked in
    /// turn with one more peer after [`HEDGE`] without a delivery, at most [`MAX_ASKS`] at a
    /// time plus one each quarter of `timeout` ([`first_delivery`]), all under one deadline
    /// `timeout`: a slow or silent peer delays catch-up by one hedge, not by its whole transfer
    /// limit. The turn starts at a place in `peers` that the checkpoint and our own peer id
    /// pick, so requesters do not all ask the same peers first.
    ///
    /// # Errors
    /// If no peer delivered it in time.
    pub async fn get_or_fetch(
        &self,
        client: &Client,
        peers: &[PeerId],
        hash: CheckpointHash,
        timeout: Duration,
    ) -> Result<Vec<u8>> {
        if let Some(b) = self.get(&hash) {
            return Ok(b);
        }
        let max = self.max_bytes;
        let ask = |peer: PeerId| {
            let client = client.clone();
            async move { client.fetch_checkpoint(peer, hash, max).await }
        };
        // Each requester of a checkpoint starts at a place the checkpoint and its own peer id
        // pick, not at the lowest member index (which the first members to join hold).
        let mut order = peers.to_vec();
        if !order.is_empty() {
            let mut seed = blake3::Hasher::new();
            seed.update(&hash);
            seed.update(&client.peer_id.to_bytes());
            let at = u64::from_le_bytes(
                seed.finalize().as_bytes()[..8]
                    .try_into()
                    .unwrap_or_default(),
            );
            let n = order.len() as u64;
            order.rotate_left((at % n) as usize);
        }
        let (peer, bytes) = first_delivery(&order, HEDGE, timeout, ask)
            .await
            .map_err(|last| {
                anyhow!(
                    "checkpoint {} not found at any peer within {} s: {last}",
                    synod_checkpoint::hex(&hash),
                    timeout.as_secs()
                )
            })?;
        self.put(&bytes)?;
        let _ = client.serve_checkpoint(Arc::new(bytes.clone())).await;
        tracing::info!(%peer, hash = %synod_checkpoint::hex(&hash), bytes = bytes.len(), "fetched checkpoint");
        Ok(bytes)
    }
}

/// The first delivery (`T`: the bytes, say) that `ask` gets from any of `peers` within
/// `timeout`, with the peer that sent it: a hedged request (Dean and Barroso, "The Tail at
/// Scale", CACM 2013, "hedged requests") that asks one peer, then one more once `hedge` passes
/// without a delivery (or at once when the ask in flight failed), at most [`MAX_ASKS`] at a
/// time (each may hold a whole checkpoint in memory, and they share the link), plus one more
/// each [`STALL_SHARE`]th of `timeout` (at least a hedge) into the fetch, never two to one
/// peer, cycling over the peers until the deadline: peers first in line that answer and then
/// trickle bytes (or never answer) cannot hold the fetch to its deadline, and no transfer
/// under way is given up. A peer whose ask failed is asked again [`RETRY`] later at the
/// soonest. Asks still in flight when one delivers are dropped (cancelled).
///
/// # Errors
/// The last failure (or "timed out", "no peer to ask") when nothing arrived in time.
pub async fn first_delivery<P, F, Fut, T, E>(
    peers: &[P],
    hedge: Duration,
    timeout: Duration,
    ask: F,
) -> Result<(P, T), String>
where
    P: Copy + Eq + std::hash::Hash + std::fmt::Display + Send + 'static,
    F: Fn(P) -> Fut,
    Fut: std::future::Future<Output = Result<T, E>> + Send + 'static,
    T: Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    use tokio::time::Instant;
    let began = Instant::now();
    let deadline = began + timeout;
    let stall = hedge.max(timeout / STALL_SHARE);
    let mut asks = tokio::task::JoinSet::new();
    // The peer each task asks, by task id (a task that panics still frees its peer).
    let mut asked: std::collections::HashMap<tokio::task::Id, P> = Default::default();
    // When each peer last failed: not asked again before [`RETRY`] has passed (a peer that
    // fails at once, lacking the object or refusing, is not asked in a loop).
    let mut failed_at: std::collections::HashMap<P, Instant> = Default::default();
    let mut next = 0usize;
    let mut last = String::from("no peer to ask");
    let mut hedge_at = Instant::now();
    while Instant::now() < deadline {
        let now = Instant::now();
        // One more slot each `stall` into the fetch: peers holding the first slots cannot hold
        // the fetch to its deadline, and no transfer under way is given up.
        let slots = MAX_ASKS
            + usize::try_from(
                now.saturating_duration_since(began).as_millis() / stall.as_millis().max(1),
            )
            .unwrap_or(usize::MAX);
        if (asked.is_empty() || now >= hedge_at) && asked.len() < slots {
            // The next peer in turn that is not being asked already.
            let busy: HashSet<P> = asked.values().copied().collect();
            let rested = |p: &P| {
                failed_at
                    .get(p)
                    .is_none_or(|t| now.saturating_duration_since(*t) >= RETRY)
            };
            if let Some(i) = (0..peers.len())
                .map(|k| (next + k) % peers.len())
                .find(|i| !busy.contains(&peers[*i]) && rested(&peers[*i]))
            {
                next = (i + 1) % peers.len();
                let peer = peers[i];
                let handle = asks.spawn(ask(peer));
                asked.insert(handle.id(), peer);
                hedge_at = now + hedge;
            }
        }
        // Nothing more to ask before the next hedge (every slot taken, or every peer asked).
        if now >= hedge_at {
            hedge_at = now + hedge;
        }
        if asked.is_empty() {
            // Nobody to ask now (no peers, or all failed): wait before going round again.
            tokio::time::sleep_until((now + RETRY).min(deadline)).await;
            hedge_at = Instant::now();
            continue;
        }
        match tokio::time::timeout_at(hedge_at.min(deadline), asks.join_next_with_id()).await {
            Ok(Some(Ok((id, Ok(bytes))))) => {
                if let Some(peer) = asked.remove(&id) {
                    return Ok((peer, bytes));
                }
            }
            Ok(Some(Ok((id, Err(e))))) => {
                if let Some(peer) = asked.remove(&id) {
                    last = format!("{peer}: {e}");
                    failed_at.insert(peer, Instant::now());
                }
                // The next peer at once (the failed one waits its turn).
                hedge_at = Instant::now();
            }
            Ok(Some(Err(e))) => {
                asked.remove(&e.id());
                last = format!("fetch task: {e}");
            }
            Ok(None) => {}
            Err(_) => {
                if Instant::now() >= deadline {
                    last = String::from("timed out");
                }
            }
        }
    }
    Err(last)
}

/// [`first_delivery`] of several objects at once, all under one deadline `timeout`: for each
/// `(key, peers)` of `wanted`, the first bytes `ask(key, peer)` gets from one of its `peers`
/// (hedged as there, at most [`MAX_ASKS`] asks of each object at a time plus one each
/// [`STALL_SHARE`]th of `timeout`). One object's slow or silent sources delay no other object.
///
/// Returns each key with its delivery (the peer and the bytes) or its last failure, in the
/// order of `wanted`.
pub async fn first_deliveries<K, P, F, Fut, T, E>(
    wanted: &[(K, Vec<P>)],
    hedge: Duration,
    timeout: Duration,
    ask: F,
) -> Vec<(K, Result<(P, T), String>)>
where
    K: Copy,
    P: Copy + Eq + std::hash::Hash + std::fmt::Display + Send + 'static,
    F: Fn(K, P) -> Fut,
    Fut: std::future::Future<Output = Result<T, E>> + Send + 'static,
    T: Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    let ask = &ask;
    futures::future::join_all(wanted.iter().map(|(key, peers)| async move {
        let got = first_delivery(peers, hedge, timeout, |peer| ask(*key, peer)).await;
        (*key, got)
    }))
    .await
}

#[cfg(test)]
mod tests {
    use super::{first_deliveries, first_delivery};
    use std::time::Duration;

    /// Asks of peer `p`: 0 never answers, 1 fails at once, 2 delivers after 50 ms.
    async fn ask(p: u32) -> Result<Vec<u8>, String> {
        match p {
            0 => std::future::pending().await,
            1 => Err("not found".into()),
            _ => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok(vec![p as u8])
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_silent_peer_first_in_line_does_not_hold_the_fetch() {
        // Serial asks would wait out peer 0's whole limit (here: the deadline) and fail.
        let got = first_delivery(
            &[0u32, 1, 2],
            Duration::from_millis(100),
            Duration::from_secs(30),
            ask,
        )
        .await;
        assert_eq!(got, Ok((2, vec![2])));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn nothing_delivered_reports_the_last_failure_at_the_deadline() {
        let got = first_delivery(
            &[0u32, 1],
            Duration::from_millis(20),
            Duration::from_millis(300),
            ask,
        )
        .await;
        assert!(
            matches!(&got, Err(e) if e.contains("not found") || e.contains("timed out")),
            "{got:?}"
        );
        let none = first_delivery::<u32, _, _, Vec<u8>, String>(
            &[],
            Duration::from_millis(20),
            Duration::from_millis(50),
            ask,
        )
        .await;
        assert_eq!(none, Err("no peer to ask".to_string()));
    }

    /// The recovery of a split round's agreed set, attacked: the authors of the four payloads
    /// we lack answer and then drip (their transfers never end within the deadline), and one
    /// honest member relays each payload. Fetched one payload after another, each waits a
    /// hedge for its author before the relay is asked: 4 × (hedge + transfer) ≈ 2.1 s, past
    /// the 1.5 s deadline. Fetched at once, they all arrive after one hedge.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dripping_authors_cannot_hold_the_recovery_of_an_agreed_set() {
        const RELAY: u32 = 1;
        // Payload k's sources: its author (peer 10 + k), then the relay.
        let wanted: Vec<(u32, Vec<u32>)> = (0..4).map(|k| (k, vec![10 + k, RELAY])).collect();
        let got = first_deliveries(
            &wanted,
            Duration::from_millis(500),
            Duration::from_millis(1_500),
            |k: u32, peer: u32| async move {
                if peer == RELAY {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    Ok(vec![k as u8])
                } else {
                    std::future::pending::<Result<Vec<u8>, String>>().await
                }
            },
        )
        .await;
        let want: Vec<_> = (0..4).map(|k| (k, Ok((RELAY, vec![k as u8])))).collect();
        assert_eq!(got, want);
    }

    /// Two colluders first in line answer every checkpoint request and never finish (or trickle
    /// bytes just above the transfer's least rate): both ask slots stay taken. Before, no third
    /// peer was ever asked (and the loop spun until the deadline); now a third slot opens a
    /// quarter of the way into the fetch, and the honest peer delivers.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_colluders_first_in_line_cannot_hold_a_checkpoint_fetch() {
        let started = std::time::Instant::now();
        let got = first_delivery(
            &[0u32, 3, 2],
            Duration::from_millis(50),
            Duration::from_secs(4),
            |p: u32| async move {
                match p {
                    0 | 3 => std::future::pending().await,
                    _ => ask(p).await,
                }
            },
        )
        .await;
        assert_eq!(got, Ok((2, vec![2])));
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
    }

    /// A peer that fails every ask at once (it lacks the object, or refuses) was asked again
    /// at once, over and over until the deadline (one request per round trip); it is asked
    /// again only [`super::RETRY`] after its failure.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_peer_that_fails_at_once_is_not_asked_in_a_loop() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let asks = Arc::new(AtomicUsize::new(0));
        let counted = asks.clone();
        let got = first_delivery(
            &[1u32],
            Duration::from_millis(50),
            Duration::from_millis(1_200),
            move |p: u32| {
                counted.fetch_add(1, Ordering::Relaxed);
                ask(p)
            },
        )
        .await;
        assert!(got.is_err());
        let n = asks.load(Ordering::Relaxed);
        assert!((2..=4).contains(&n), "asked {n} times in 1.2 s");
    }
}
