//! The chain as the member's one finalized-block subscription (`Chain::follow`, read by
//! [`super::follow::follow_chain`]) last saw it: the latest finalized block, and the latest
//! one that was news for a round of our pool (opened, final, voided, an included set fixed, the
//! pool completed, or a milestone of the protocol's round state machine). The round driver's
//! waits for the chain (the pool's start, a round's close, the pool's end) read storage when
//! such news arrives, not at every block, not at every member's commit, and not on a
//! subscription of their own.

use std::future::Future;
use std::time::{Duration, Instant};

use synod_chain::ChainError;
use tokio::sync::watch;

/// What the subscription last saw (block numbers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Tick {
    /// The latest finalized block.
    pub finalized: u64,
    /// The latest finalized block that was news for a round of our pool (0: none yet).
    pub news_at: u64,
}

/// Finalized blocks without news of our pool's rounds after which a wait reads storage anyway:
/// the subscription skips the blocks finalized while it reconnects, and what a wait looks for
/// may come without an event of its own (a deadline passing).
pub(super) const FALLBACK_BLOCKS: u64 = 4;

/// How long a wait goes without any tick before it reads storage anyway (the subscription may
/// have ended; the chain is then polled at this pace), in seconds.
const IDLE: Duration = Duration::from_secs(12);

/// Whether the tick `now`, after a check made at tick `checked`, calls for another check: news
/// of our pool's rounds since, or [`FALLBACK_BLOCKS`] blocks.
fn worth_a_look(checked: Tick, now: Tick) -> bool {
    now.news_at > checked.news_at
        || now.finalized >= checked.finalized.saturating_add(FALLBACK_BLOCKS)
}

/// The driver's side of the subscription (cheap to clone).
#[derive(Clone)]
pub(super) struct ChainWatch {
    rx: watch::Receiver<Tick>,
}

impl ChainWatch {
    /// A watch and the sender the subscription updates.
    pub fn new() -> (watch::Sender<Tick>, Self) {
        let (tx, rx) = watch::channel(Tick::default());
        (tx, Self { rx })
    }

    /// Runs `check` now and again whenever the subscription sees something that may have
    /// changed what it reads ([`worth_a_look`]; after [`IDLE`] without a tick, or every 500 ms
    /// once the subscription has ended), until it returns `Some`
    /// ([`synod_chain::wait::wait_until`]).
    ///
    /// # Errors
    /// [`ChainError::Timeout`] after `timeout`; errors of `check`.
    pub async fn wait_for<T, F, Fut>(
        &self,
        what: &str,
        timeout: Duration,
        check: F,
    ) -> Result<T, ChainError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Option<T>, ChainError>>,
    {
        let mut rx = self.rx.clone();
        let checked = *rx.borrow_and_update();
        let mut ticks = Ticks { rx, checked };
        synod_chain::wait::wait_until(what, timeout, check, &mut ticks).await
    }
}

/// Wakes a wait when the subscription's ticks call for a look ([`worth_a_look`]).
struct Ticks {
    rx: watch::Receiver<Tick>,
    /// What the subscription had seen when the wait last read the chain.
    checked: Tick,
}

impl synod_chain::wait::Wake for Ticks {
    async fn wake(&mut self, left: Duration) {
        let deadline = Instant::now() + left;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left.min(IDLE), self.rx.changed()).await {
                Ok(Ok(())) => {
                    if worth_a_look(self.checked, *self.rx.borrow_and_update()) {
                        break;
                    }
                }
                Ok(Err(_)) => {
                    // The subscription has ended: poll.
                    tokio::time::sleep(left.min(Duration::from_millis(500))).await;
                    break;
                }
                Err(_) => break,
            }
        }
        // The wait reads the chain next.
        self.checked = *self.rx.borrow_and_update();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    /// A wait reads the chain when news of our pool's rounds arrives, and every
    /// [`FALLBACK_BLOCKS`] blocks without one, not at every finalized block.
    #[test]
    fn a_wait_reads_the_chain_at_news_of_our_pools_rounds_not_at_every_block() {
        let t = |finalized, news_at| Tick { finalized, news_at };
        assert!(!worth_a_look(t(100, 90), t(101, 90)));
        assert!(!worth_a_look(t(100, 90), t(103, 90)));
        assert!(worth_a_look(t(100, 90), t(101, 101)));
        assert!(worth_a_look(t(100, 90), t(104, 90)));

        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let (tx, watch) = ChainWatch::new();
        let reads = Arc::new(AtomicU32::new(0));
        let counted = reads.clone();
        let waiting = rt.spawn(async move {
            watch
                .wait_for("the round to close", Duration::from_secs(30), || {
                    let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
                    // The third read finds what it waits for.
                    async move { Ok((n == 3).then_some(n)) }
                })
                .await
        });
        rt.block_on(async {
            let settle = || tokio::time::sleep(Duration::from_millis(20));
            settle().await;
            assert_eq!(reads.load(Ordering::SeqCst), 1, "read once at the start");
            for n in 1..=3 {
                tx.send_modify(|t| t.finalized = n);
                settle().await;
            }
            assert_eq!(reads.load(Ordering::SeqCst), 1, "plain blocks read nothing");
            tx.send_modify(|t| {
                t.finalized = 4;
                t.news_at = 4;
            });
            settle().await;
            assert_eq!(reads.load(Ordering::SeqCst), 2, "news of our pool is read");
            tx.send_modify(|t| t.finalized = 8);
            settle().await;
            assert_eq!(
                reads.load(Ordering::SeqCst),
                3,
                "and the fallback after 4 blocks"
            );
        });
        assert_eq!(rt.block_on(waiting).unwrap().unwrap(), 3);
    }
}
