//! How long the duty worker waits for what it fetches, and when it tries again: the trace
//! states and residuals of the contributions it checks, and the challenges the chain refused.

use std::collections::BTreeMap;
use std::time::Duration;

/// How long a verifier waits for one Proof-of-Learning trace state (plus its transfer at
/// 10 MB/s) before it replays the whole phase instead.
pub(super) const STATE_FETCH: Duration = Duration::from_secs(20);
/// Added to twice the per-state wait: how long a verifier waits for all the trace states of
/// one round's checks (fetched from every accused side by side, before any segment is
/// replayed).
pub(super) const CHECK_BUDGET: Duration = Duration::from_secs(5);
/// The shortest wait for a round's trace states, however little of the challenge window the
/// replays leave.
pub(super) const MIN_STATE_WAIT: Duration = Duration::from_secs(2);

/// How long one trace state or residual of at most `max_bytes` bytes is waited for
/// ([`super::DutyWorker::prefetch_trace_states`],
/// [`super::DutyWorker::ask_residuals_again`]): [`STATE_FETCH`] plus its transfer at 10 MB/s.
pub(super) fn fetch_wait(max_bytes: u64) -> Duration {
    STATE_FETCH + Duration::from_secs(max_bytes / 10_000_000)
}

/// The waits of one batch of residual asks `missed` (per author and round, the residuals
/// asked of it), each of at most `max_residual_bytes` bytes: (each residual's,
/// [`fetch_wait`]; the whole batch's, twice that plus the transfer of everything
/// asked at 10 MB/s, since the authors share our link). The batch is fetched side by side, so
/// k authors that withhold cost one batch wait, not k residual waits.
pub(super) fn residual_batch_wait<K>(
    missed: &crate::pool::verify::prefetch::Wanted<K>,
    max_residual_bytes: u64,
) -> (Duration, Duration) {
    let per = fetch_wait(max_residual_bytes);
    let count: u64 = missed.iter().map(|(_, h)| h.len() as u64).sum();
    let transfers = Duration::from_secs(count.saturating_mul(max_residual_bytes) / 10_000_000);
    (per, 2 * per + transfers)
}

/// Whether a verifier whose prefetch waited `cap` ([`super::DutyWorker::state_wait`]) asks for the
/// residuals the prefetch missed again, with [`fetch_wait`] each, before a miss
/// counts: when `cap` was shorter than that. Only an ask that gave the accused the
/// residual's transfer time may start the clock after which it counts as withholding
/// ([`residual_deadline_passed`]); otherwise an attacker that loads the verifier's duty
/// thread (whole replays, sham challenges due first) cuts every ask to [`MIN_STATE_WAIT`] and
/// turns an honest sparse member's residual, too large for two seconds, into a challenge the
/// jurors acquit, at the cost of the verifier's bond.
pub(super) fn asks_residual_again(cap: Duration, max_residual_bytes: u64) -> bool {
    cap < fetch_wait(max_residual_bytes)
}

/// Whether a residual first missed at block `first` is no longer waited for at block `now`
/// when a verdict is due by block `deadline` (a verifier's challenge window, a juror's vote):
/// half the time that was left when it was first missed has passed. Asked again at every pass
/// before; dishonest after (the accused has had time to serve it, and the rest of the window
/// is left for the challenge or the vote).
pub(super) fn residual_deadline_passed(first: u64, now: u64, deadline: u64) -> bool {
    now >= first + deadline.saturating_sub(first) / 2
}

/// Blocks a challenge refused with `ScheduleFull` waits at least before its next try
/// ([`schedule_retry_blocks`]).
pub(super) const SCHEDULE_RETRY_BLOCKS: u64 = 3;

/// Blocks member `me`'s challenge refused with `ScheduleFull` waits before its next try:
/// [`SCHEDULE_RETRY_BLOCKS`] plus `me` mod 3, so that the verifiers of a pool, refused in one
/// block (they read the same finalized block), try again in three different blocks rather
/// than all in one, where the pool's share of the schedule (`MaxExpiriesPerPool`) would
/// refuse most of them again.
pub(super) fn schedule_retry_blocks(me: u32) -> u64 {
    SCHEDULE_RETRY_BLOCKS + u64::from(me % 3)
}

/// Finalized blocks before which keyed work is not tried again (a challenge refused for a
/// full schedule, a round whose residuals were not served).
#[derive(Debug)]
pub(super) struct RetryAt<K>(BTreeMap<K, u64>);

impl<K: Ord> Default for RetryAt<K> {
    fn default() -> Self {
        Self(BTreeMap::new())
    }
}

impl<K: Ord> RetryAt<K> {
    /// Whether `key` waits at finalized block `now`.
    pub(super) fn waits(&self, key: &K, now: u64) -> bool {
        self.0.get(key).is_some_and(|b| now < *b)
    }

    /// Tries `key` again `blocks` after `now`; returns that block.
    pub(super) fn after(&mut self, key: K, now: u64, blocks: u64) -> u64 {
        let at = now + blocks;
        self.0.insert(key, at);
        at
    }

    /// Forgets `key` (done).
    pub(super) fn clear(&mut self, key: &K) {
        self.0.remove(key);
    }
}

/// Blocks a round with unserved sparse residuals waits before it is verified again.
pub(super) const RESIDUAL_RETRY_BLOCKS: u64 = 3;
