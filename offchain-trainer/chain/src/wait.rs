//! Waiting for the chain to reach a state: read it, and read it again each time something says
//! it may have changed, until the read finds what it looks for or time runs out. What wakes a
//! wait ([`Wake`]) is the caller's: [`Chain::wait_for`](crate::Chain::wait_for) wakes at each
//! finalized block, the pool member at blocks that are news for a round of its pool.

use std::future::Future;
use std::time::{Duration, Instant};

use crate::ChainError;

/// What wakes a wait ([`wait_until`]): something that may have changed what its check reads.
pub trait Wake {
    /// Returns once what the wait reads may have changed, and after `left` (never zero) at
    /// the latest.
    fn wake(&mut self, left: Duration) -> impl Future<Output = ()> + Send;
}

/// Runs `check` now, and again each time `wake` returns, until it returns `Some`.
///
/// # Errors
/// [`ChainError::Timeout`] (naming `what`) after `timeout`; errors of `check`.
pub async fn wait_until<T, F, Fut>(
    what: &str,
    timeout: Duration,
    mut check: F,
    wake: &mut impl Wake,
) -> Result<T, ChainError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, ChainError>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await? {
            return Ok(v);
        }
        let left = timeout.saturating_sub(start.elapsed());
        if left.is_zero() {
            return Err(ChainError::Timeout {
                what: what.to_string(),
                secs: timeout.as_secs(),
            });
        }
        wake.wake(left).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts its wakes; returns after 10 ms at most.
    struct Counted(u32);

    impl Wake for Counted {
        fn wake(&mut self, left: Duration) -> impl Future<Output = ()> + Send {
            self.0 += 1;
            tokio::time::sleep(left.min(Duration::from_millis(10)))
        }
    }

    /// A wait reads once per wake until the read finds its value, and gives up with a
    /// timeout naming what it waited for.
    #[tokio::test]
    async fn a_wait_reads_at_each_wake_until_found_or_timed_out() {
        let mut reads = 0;
        let mut wakes = Counted(0);
        let found = wait_until(
            "three reads",
            Duration::from_secs(5),
            || {
                reads += 1;
                let n = reads;
                async move { Ok((n == 3).then_some(n)) }
            },
            &mut wakes,
        )
        .await;
        assert_eq!(found.unwrap(), 3);
        assert_eq!(wakes.0, 2);
        let never = wait_until(
            "nothing",
            Duration::from_millis(50),
            || async { Ok(None::<()>) },
            &mut Counted(0),
        )
        .await;
        assert!(matches!(never, Err(ChainError::Timeout { what, .. }) if what == "nothing"));
    }
}
