//! Catching up: the first round to train and its parent checkpoint (passive until known).

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
            let target = match resumed
                .then(|| self.announced_max(c))
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

    /// The highest round ≥ `c` another member has announced a payload for, after listening
    /// for one heartbeat period.
    fn announced_max(&self, c: u32) -> Result<Option<u32>> {
        self.ctx.block_on(async {
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
                    .filter(|(r, m)| *r >= c && *m != self.ctx.me)
                    .map(|(r, _)| *r)
                    .max(),
            )
        })
    }

    /// Waits until the chain's current round is past `round` (or the pool is over).
    fn wait_round_past(&self, round: u32) -> Result<()> {
        let (chain, pool) = (&self.ctx.chain, self.ctx.pool);
        self.ctx.block_on(chain.wait_for(
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

/// Whether the last final round `last_final` (0: none, θ₀) can be the parent of open round
/// `round`: it must precede it. A later one means `round` closed after it was read.
fn parent_precedes(last_final: u32, round: u32) -> bool {
    last_final < round
}

#[cfg(test)]
mod tests {
    use super::parent_precedes;

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
