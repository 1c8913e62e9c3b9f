//! Leak decisions the chain's queue left open: the unmatched commits of a voided round and the
//! silent included members of a settled final round (`Checkpoints.UnmatchedCommits`) are
//! decided when the round's equivocation reports close (a final round's at its settlement), in
//! `on_initialize` if the per-block queue had room; otherwise a member decides them with
//! `decide_unmatched_commits` (free when it decides), so that an attacker filling the queue
//! cannot keep a garbage committer or a silent member out of the leak.

use anyhow::Result;
use synod_chain::{calls, ChainError};

use super::DutyWorker;

impl DutyWorker {
    /// Tracks the pool's rounds with undecided leaks, and decides those still undecided once
    /// the queue's blocks for them have passed: a voided round whose snapshot is kept
    /// (`KeptSnapshots`) from the block its reports close, and any other (a voided round whose
    /// snapshot is gone, a settled final round: its reports closed) from the finalized block
    /// at which it was first seen ([`pending_decisions`]: read from the chain each pass, so a
    /// restarted member still finds them). A round is done (never tracked again) once nothing
    /// is left to decide, or the chain refused the call (another member decided it first). A
    /// member that finishes its duties waits for the rounds it tracks.
    pub(super) fn decide_unmatched_commits(&mut self) -> Result<()> {
        let chain = &self.ctx.chain;
        let now = self.ctx.block_on(chain.finalized_number())?;
        let kept = self.ctx.block_on(chain.kept_snapshots(self.ctx.pool))?;
        let unmatched = self.ctx.block_on(chain.unmatched_rounds(self.ctx.pool))?;
        for (round, until) in pending_decisions(&kept, &unmatched, now) {
            if !self.duties.decided.contains(&round) {
                // A round keeps the block it was first seen at, unless a kept snapshot's block
                // is later (the two reads can straddle the void that kept it).
                let due = self.duties.to_decide.entry(round).or_insert(until);
                if kept.iter().any(|(r, _)| *r == round) {
                    *due = (*due).max(until);
                }
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
        // Members wait different extra blocks, so that few calls race for one decision.
        let slack = u64::from(self.ctx.me % 4);
        for (round, until) in self.duties.to_decide.clone() {
            // Unmatched commits are recorded when the round is voided, silent included members
            // when it is settled: a round without them is done at once.
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

/// The rounds to decide, each with the block from which the chain's queue decides it: every
/// voided round with a kept snapshot (`kept`: round and the block its equivocation reports
/// close; it may have no unmatched commits, which the caller checks), and every other round
/// with an undecided leak (`unmatched`: a voided round whose snapshot is no longer kept, or a
/// settled final round), whose reports are closed and whose queue entry, if any, was made at
/// or before `now` (the finalized block at which it is seen).
fn pending_decisions(kept: &[(u32, u32)], unmatched: &[u32], now: u64) -> Vec<(u32, u64)> {
    let mut pending: Vec<(u32, u64)> = kept.iter().map(|(r, u)| (*r, u64::from(*u))).collect();
    pending.extend(
        unmatched
            .iter()
            .filter(|r| !kept.iter().any(|(k, _)| k == *r))
            .map(|r| (*r, now)),
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
        let pending = pending_decisions(&kept, &[3, 7], 500);
        assert_eq!(pending, vec![(7, 300), (9, 340), (3, 500)]);
        assert!(decision_overdue(500, 8, 3, 511));
        assert_eq!(pending_decisions(&[], &[], 500), vec![]);
    }

    /// A settled final round's silent included members appear in the queue's next block; a
    /// member seeing them leaves the queue every block it may use before it calls, so that it
    /// does not pay for a call the queue makes moot.
    #[test]
    fn a_settled_rounds_silent_members_are_left_to_the_queue_first() {
        let pending = pending_decisions(&[], &[4], 200);
        assert_eq!(pending, vec![(4, 200)]);
        assert!(!decision_overdue(200, 8, 0, 207));
        assert!(decision_overdue(200, 8, 0, 208));
    }
}
