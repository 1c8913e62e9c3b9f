//! Leak decisions the chain's queue left open: the unmatched commits of a voided round
//! (`Checkpoints.UnmatchedCommits`) are decided when its equivocation reports close, in
//! `on_initialize` if the per-block queue had room; otherwise a member decides them with
//! `decide_unmatched_commits` (free when it decides), so that an attacker filling the queue
//! cannot keep a garbage committer out of the leak.

use anyhow::Result;
use synod_chain::{calls, ChainError};

use super::DutyWorker;

impl DutyWorker {
    /// Tracks the pool's voided rounds with unmatched commits, and decides those still
    /// undecided once the queue's blocks for them have passed: a round whose snapshot is kept
    /// (`KeptSnapshots`) from the block its reports close, and one whose snapshot is gone (its
    /// reports closed) at once ([`pending_decisions`]: read from the chain each pass, so a
    /// restarted member still finds them). A round is done (never tracked again) once nothing
    /// is left to decide, or the chain refused the call (another member decided it first). A
    /// member that finishes its duties waits for the rounds it tracks.
    pub(super) fn decide_unmatched_commits(&mut self) -> Result<()> {
        let chain = &self.ctx.chain;
        let kept = self.ctx.block_on(chain.kept_snapshots(self.ctx.pool))?;
        let unmatched = self.ctx.block_on(chain.unmatched_rounds(self.ctx.pool))?;
        for (round, until) in pending_decisions(&kept, &unmatched) {
            if !self.duties.decided.contains(&round) {
                // A kept snapshot's block replaces the 0 of a round first seen without one
                // (the two reads can straddle the void that kept it).
                let due = self.duties.to_decide.entry(round).or_insert(until);
                *due = (*due).max(until);
            }
        }
        if self.duties.to_decide.is_empty() {
            return Ok(());
        }
        let spill = match self.duties.spill {
            Some(s) => s,
            None => *self
                .duties
                .spill
                .insert(self.ctx.block_on(chain.deadline_spill_blocks())?),
        };
        let now = self.ctx.block_on(chain.finalized_number())?;
        // Members wait different extra blocks, so that few calls race for one decision.
        let slack = u64::from(self.ctx.me % 4);
        for (round, until) in self.duties.to_decide.clone() {
            // Unmatched commits are recorded when the round is voided: a round without them
            // is done at once.
            if !self
                .ctx
                .block_on(chain.unmatched_commits_pending(self.ctx.pool, round))?
            {
                self.duties.to_decide.remove(&round);
                self.duties.decided.insert(round);
                continue;
            }
            if !decision_overdue(until, spill, slack, now) {
                continue;
            }
            let call = calls::decide_unmatched_commits(self.ctx.pool, round);
            match self.ctx.block_on(chain.submit(&call, &self.ctx.signer)) {
                Ok(_) => {
                    tracing::info!(round, "decided the unmatched commits the queue left open");
                    self.duties.to_decide.remove(&round);
                    self.duties.decided.insert(round);
                }
                // Its reports are still open (the round was read between two blocks): later.
                Err(e) if e.is_module("Checkpoints", "EquivocationReportsOpen") => {
                    tracing::debug!(round, "not deciding the unmatched commits yet: {e}");
                }
                Err(e @ ChainError::Module { .. }) => {
                    tracing::debug!(round, "not deciding the unmatched commits: {e}");
                    self.duties.to_decide.remove(&round);
                    self.duties.decided.insert(round);
                }
                Err(e) => tracing::warn!(round, "decide_unmatched_commits: {e}"),
            }
        }
        Ok(())
    }
}

/// The voided rounds to decide, each with the block its equivocation reports close: every
/// round with a kept snapshot (`kept`: round and that block; it may have no unmatched commits,
/// which the caller checks), and every round with unmatched commits (`unmatched`) whose
/// snapshot is no longer kept (its reports closed: block 0).
fn pending_decisions(kept: &[(u32, u32)], unmatched: &[u32]) -> Vec<(u32, u64)> {
    let mut pending: Vec<(u32, u64)> = kept.iter().map(|(r, u)| (*r, u64::from(*u))).collect();
    pending.extend(
        unmatched
            .iter()
            .filter(|r| !kept.iter().any(|(k, _)| k == *r))
            .map(|r| (*r, 0)),
    );
    pending
}

/// Whether the unmatched commits of a voided round whose reports close at block `until` are
/// past the queue's reach at finalized block `now`: the queue decides them at `until` or in
/// the `spill − 1` blocks after it, and a member waits `slack` blocks more.
fn decision_overdue(until: u64, spill: u64, slack: u64, now: u64) -> bool {
    now >= until.saturating_add(spill.max(1)).saturating_add(slack)
}

#[cfg(test)]
mod tests {
    use super::{decision_overdue, pending_decisions};

    #[test]
    fn a_decision_is_taken_over_only_after_every_block_the_queue_could_use() {
        // Reports close at 100; the queue may decide in 100..=107 (8 blocks a list).
        assert!(!decision_overdue(100, 8, 0, 107));
        assert!(decision_overdue(100, 8, 0, 108));
        assert!(!decision_overdue(100, 8, 3, 110));
        assert!(decision_overdue(100, 8, 3, 111));
    }

    /// A member restarted after later voids pushed a round's snapshot out of the kept list
    /// still finds the round's unmatched commits on the chain, due at once.
    #[test]
    fn unmatched_commits_whose_snapshot_is_gone_are_still_decided() {
        let kept = [(7, 300), (9, 340)];
        let pending = pending_decisions(&kept, &[3, 7]);
        assert_eq!(pending, vec![(7, 300), (9, 340), (3, 0)]);
        assert!(decision_overdue(0, 8, 3, 11));
        assert_eq!(pending_decisions(&[], &[]), vec![]);
    }
}
