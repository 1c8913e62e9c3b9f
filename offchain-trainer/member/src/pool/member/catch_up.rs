//! Catching up: the first round to train and its parent checkpoint (passive until known).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use synod_chain::types::PoolStatus;
use synod_checkpoint::CheckpointHash;
use synod_diloco::OuterState;

use super::Trainer;

impl Trainer {
    /// The state to train the next round from and its checkpoint's blake3, or `None` if the
    /// pool is over. Leaves the network node active, with its heartbeats naming the round we
    /// will contribute to.
    pub(super) fn catch_up(
        &mut self,
        from_round: u32,
        resumed: bool,
    ) -> Result<Option<(OuterState, CheckpointHash)>> {
        loop {
            let p = self.ctx.pool_info()?;
            if matches!(p.status, PoolStatus::Completed | PoolStatus::Cancelled) {
                return Ok(None);
            }
            let c = p.current_round;
            if c < from_round {
                self.wait_round_past(from_round.saturating_sub(1))?;
                continue;
            }
            self.refresh_members(c)?;
            // A resumed member whose peers already announced round c (or c + 1) joins the round
            // after the last one announced. Its heartbeats name that round, so peers still
            // gathering an earlier round do not wait for it, and peers in that round do.
            // One member announcing a round ahead is not enough: it would make us skip two
            // rounds, and be leaked as silent in both.
            let target = match resumed
                .then(|| self.exchanged_round(c))
                .transpose()?
                .flatten()
            {
                Some(a) => a.max(c) + 1,
                None => c,
            };
            if resumed && !self.serve_kept_payload(c)? {
                continue; // round c closed meanwhile
            }
            if target > self.ctx.spec_rounds {
                self.wait_round_past(self.ctx.spec_rounds)?;
                return Ok(None);
            }
            self.ctx.block_on(async {
                self.ctx.client.set_round(target).await?;
                self.ctx.client.set_passive(false).await
            })?;
            if target > c {
                tracing::info!(
                    round = target,
                    "peers are already exchanging round {}; joining round {target}",
                    target - 1
                );
                self.wait_round_past(target - 1)?;
            }
            // Round `target` may have closed since `pool_info` (a slow restart, a short
            // round): its final checkpoint is then no parent of it. Training round `target`
            // from it would sign a second payload for a round we may have announced before
            // the restart (an equivocation, slashed). Start over from the chain's new round.
            let (f, hash) = self.ctx.last_final()?;
            if !parent_precedes(f, target) {
                continue;
            }
            return Ok(Some((self.load(hash, target - 1)?, hash)));
        }
    }

    /// Serves again the payload we announced for open round `c` before a restart (kept by
    /// the round loop before announcing): the same bytes, hence the same signed digest, so
    /// peers still gathering `c` fetch it instead of waiting out their deadline, and nobody
    /// sees two payloads from us. `false` if round `c` has closed since it was read (its own
    /// final checkpoint is no key of its payload).
    fn serve_kept_payload(&self, c: u32) -> Result<bool> {
        let (f, parent) = self.ctx.last_final()?;
        if !parent_precedes(f, c) {
            return Ok(false);
        }
        let start = self.ctx.inner_start(c, parent)?;
        let Some(bytes) = self.ctx.retained.own(c, self.ctx.me, &start) else {
            return Ok(true);
        };
        self.ctx.serve_trace(c, &bytes);
        let digest = self
            .ctx
            .block_on(self.ctx.client.set_payload(c, Arc::new(bytes)))?;
        tracing::info!(
            round = c,
            digest = %synod_checkpoint::hex(&digest),
            "serving the payload we announced before the restart"
        );
        Ok(true)
    }

    /// The round already being exchanged by others when the chain's round is `c`
    /// ([`exchanged_round`] over round `c`'s snapshot stakes), after listening for one
    /// heartbeat period.
    fn exchanged_round(&self, c: u32) -> Result<Option<u32>> {
        let announced = self.ctx.block_on(async {
            self.ctx.client.set_round(c).await?;
            let start = Instant::now();
            while self.ctx.client.snapshot().connected.is_empty()
                && start.elapsed() < Duration::from_secs(10)
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            // Heartbeats come every 2 s and repeat the current and previous round's announcement.
            tokio::time::sleep(Duration::from_secs(3)).await;
            Ok::<_, anyhow::Error>(
                self.ctx
                    .client
                    .snapshot()
                    .announced
                    .keys()
                    .copied()
                    .collect::<Vec<_>>(),
            )
        })?;
        let stakes: BTreeMap<u32, u128> = match self.ctx.block_on(self.ctx.snapshot_stakes(c))? {
            Some(s) => s,
            None => self
                .members
                .iter()
                .map(|m| (m.record.index, m.record.stake))
                .collect(),
        };
        Ok(exchanged_round(&announced, &stakes, c, self.ctx.me))
    }

    /// Waits until the chain's current round is past `round` (or the pool is over).
    fn wait_round_past(&self, round: u32) -> Result<()> {
        let (chain, pool) = (&self.ctx.chain, self.ctx.pool);
        self.ctx.block_on(self.ctx.watch.wait_for(
            "the round to close",
            Duration::from_secs(3600),
            || async {
                let p = chain.pool(pool).await?;
                Ok(
                    p.filter(|p| p.current_round > round || p.status != PoolStatus::Training)
                        .map(|_| ()),
                )
            },
        ))?;
        Ok(())
    }
}

/// The round a resuming member should treat as already being exchanged, from `announced`
/// ((round, member) pairs heard in heartbeats) while the chain's round is `c`: the latest
/// round above `c` whose announcers, other than `me`, hold more than a third of `stakes`
/// (planck by member index; announcers outside it count for nothing) — under the protocol's
/// assumption that the adversary holds less than a third of the stake, at least one honest
/// member is exchanging it — else `c` itself if any other member announced it (joining `c`
/// late would only hold its exchange up; skipping it is what the member would do anyway),
/// else `None`.
fn exchanged_round(
    announced: &[(u32, u32)],
    stakes: &BTreeMap<u32, u128>,
    c: u32,
    me: u32,
) -> Option<u32> {
    let total = stakes.values().fold(0u128, |a, s| a.saturating_add(*s));
    let mut by_round: BTreeMap<u32, u128> = BTreeMap::new();
    for (r, m) in announced {
        if *r > c && *m != me {
            if let Some(s) = stakes.get(m) {
                let e = by_round.entry(*r).or_default();
                *e = e.saturating_add(*s);
            }
        }
    }
    let ahead = by_round
        .into_iter()
        .rev()
        .find(|(_, s)| s.saturating_mul(3) > total)
        .map(|(r, _)| r);
    ahead.or_else(|| {
        announced
            .iter()
            .any(|(r, m)| *r == c && *m != me && stakes.contains_key(m))
            .then_some(c)
    })
}

/// Whether the last final round `last_final` (0: none, θ₀) can be the parent of open round
/// `round`: it must precede it. A later one means `round` closed after it was read.
fn parent_precedes(last_final: u32, round: u32) -> bool {
    last_final < round
}

#[cfg(test)]
mod tests {
    use super::{exchanged_round, parent_precedes};
    use std::collections::BTreeMap;

    #[test]
    fn one_member_announcing_ahead_cannot_make_a_resumed_member_skip_rounds() {
        // Five members of 100 each; we are member 0, the chain's round is 7.
        let stakes: BTreeMap<u32, u128> = (0..5).map(|m| (m, 100)).collect();
        // Member 4 alone announces round 8: not enough to skip rounds 7 and 8 (a member
        // that did would be silent in both).
        assert_eq!(exchanged_round(&[(8, 4)], &stakes, 7, 0), None);
        // Any other member exchanging round 7 already: join round 8 (7 is under way).
        assert_eq!(exchanged_round(&[(7, 1), (8, 4)], &stakes, 7, 0), Some(7));
        // Two members (200 of 500, over a third) in round 8: join round 9.
        assert_eq!(
            exchanged_round(&[(7, 1), (8, 2), (8, 3)], &stakes, 7, 0),
            Some(8)
        );
        // Our own announcement, outsiders and older rounds count for nothing.
        assert_eq!(
            exchanged_round(&[(7, 0), (7, 9), (6, 1), (6, 2)], &stakes, 7, 0),
            None
        );
        // A whale is a third by itself only with more than a third of the stake.
        let whale: BTreeMap<u32, u128> = [(0, 100), (1, 100), (2, 101)].into();
        assert_eq!(exchanged_round(&[(8, 2)], &whale, 7, 0), Some(8));
        assert_eq!(exchanged_round(&[(8, 1)], &whale, 7, 0), None);
    }

    #[test]
    fn a_round_that_closed_while_catching_up_is_not_trained_from_its_own_checkpoint() {
        // Read: current round 5; meanwhile round 5 becomes final. Its checkpoint is round
        // 6's parent, not round 5's: catching up must read the chain again.
        assert!(!parent_precedes(5, 5));
        assert!(!parent_precedes(6, 5));
        // Round 4 final (or voided rounds before 5 carry an older parent forward).
        assert!(parent_precedes(4, 5));
        assert!(parent_precedes(0, 1));
    }
}
