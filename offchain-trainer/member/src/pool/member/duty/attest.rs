//! Attesting a final round that aggregated our payload when no commit of ours is recorded for
//! it: our commit and the round loop's retries within the late-commit window failed
//! (`settle.rs`, `retry_commit`), or we skipped the round after a restart while serving the
//! payload we had announced for it. The chain leaks a silent included member when the round is settled
//! (`docs/architecture.md`, step 8), so we record the final checkpoint, unpaid, once the
//! late-commit window has closed: before it, the round loop's own commit may still land.
//! [`crate::config::Fault::Late`], which commits nothing on purpose, attests nothing either.

use std::time::{Duration, Instant};

use anyhow::Result;
use synod_chain::types::FinalCheckpoint;
use synod_protocol::RoundPhase;

use super::super::commit::{submit_commit, CommitOutcome, NOT_RECORDED};
use super::DutyWorker;
use crate::config::Fault;
use crate::event::TrainerEvent;

/// What becomes of one unsettled final round at a pass ([`attestation`]).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Attest {
    /// Nothing to do, ever: our payload is not in its included set, we are a contributor, or
    /// we have a commit recorded.
    Done,
    /// Its late-commit window is still open: asked again at a later pass.
    NotYet,
    /// Record its final checkpoint.
    Commit,
}

/// Whether we attest unsettled final round `f`, in phase `phase` at the finalized block: we
/// (member index `me`) are in its included set and no contributor (`contributor`), its
/// late-commit window has closed (the phase is past [`RoundPhase::LateCommits`]), and no
/// commit of ours is recorded (`committed`; read only when it decides).
pub(super) fn attestation(
    f: &FinalCheckpoint,
    me: u32,
    contributor: bool,
    phase: RoundPhase,
    committed: impl FnOnce() -> Result<bool>,
) -> Result<Attest> {
    if !f.included.contains(&me) || contributor {
        return Ok(Attest::Done);
    }
    if phase == RoundPhase::LateCommits {
        return Ok(Attest::NotYet);
    }
    Ok(if committed()? {
        Attest::Done
    } else {
        Attest::Commit
    })
}

impl DutyWorker {
    /// Attests the pool's final rounds that are not settled yet (`Rewards.Unsettled`: only
    /// those can still leak us, so a restarted member reads no older round); a round done is
    /// not read again while it stays unsettled. A commit refused by the chain (settled
    /// meanwhile, or committed by the round loop) is done; a submission that was not
    /// confirmed is tried again at the next pass. Returns whether a round is left to attest
    /// (its window still open, or its submission not confirmed).
    pub(super) fn attest_included_rounds(&mut self) -> Result<bool> {
        if self.ctx.a.fault == Some(Fault::Late) {
            return Ok(false);
        }
        let chain = &self.ctx.chain;
        let (pool, me) = (self.ctx.pool, self.ctx.me);
        let now = self.ctx.block_on(chain.finalized_number())?;
        let unsettled = self.ctx.block_on(chain.unsettled_rounds(pool))?;
        self.duties.attested.retain(|r| unsettled.contains(r));
        let mut left = false;
        for round in unsettled {
            if self.duties.attested.contains(&round) {
                continue;
            }
            let Some(f) = self.ctx.block_on(chain.final_checkpoint(pool, round))? else {
                continue; // reaped meanwhile
            };
            let contributor = f.contributors.contains(&self.ctx.account);
            let committed = || {
                Ok(self
                    .ctx
                    .block_on(chain.committed(pool, round, &self.ctx.account))?)
            };
            let phase = self.ctx.final_round(&f).phase(now);
            match attestation(&f, me, contributor, phase, committed)? {
                Attest::NotYet => {
                    left = true;
                    continue;
                }
                Attest::Done => {}
                Attest::Commit => {
                    let hash = synod_checkpoint::hex(&f.hash);
                    let ctx = &self.ctx;
                    let outcome = ctx.block_on(submit_commit(
                        chain,
                        &ctx.signer,
                        pool,
                        round,
                        f.hash,
                        f.included,
                    ));
                    let error = match outcome {
                        CommitOutcome::Recorded => None,
                        CommitOutcome::NotRecorded => Some(NOT_RECORDED.to_string()),
                        CommitOutcome::AlreadyRecorded(e)
                        | CommitOutcome::NotYet(e)
                        | CommitOutcome::Refused(e) => Some(e.to_string()),
                        CommitOutcome::Failed(e) => {
                            tracing::warn!(round, "recording the final checkpoint: {e}");
                            left = true;
                            continue;
                        }
                    };
                    if error.is_none() {
                        tracing::info!(
                            round,
                            "recorded the final checkpoint of a round that aggregated our \
                             payload without a commit of ours (unpaid; not leaked)"
                        );
                    }
                    self.metrics.emit(&TrainerEvent::Attest {
                        outcome: if error.is_some() { "refused" } else { "ok" }.into(),
                        error,
                        hash,
                        round,
                    })?;
                }
            }
            self.duties.attested.insert(round);
        }
        Ok(left)
    }

    /// After the pool's last round, for a member without other duties: attests until the
    /// late-commit window of the last final round has closed and no round is left to attest
    /// (a failed submission is tried again; a round settled meanwhile is no longer asked
    /// for), at most `max_wait`, so that a round whose commit failed near the end is recorded
    /// too. Never fails: problems are logged.
    pub(super) fn attest_until_the_last_window_closes(&mut self, max_wait: Duration) {
        if self.ctx.a.fault == Some(Fault::Late) {
            return;
        }
        let start = Instant::now();
        loop {
            let closed = (|| -> Result<bool> {
                let now = self.ctx.block_on(self.ctx.chain.finalized_number())?;
                let left = self.attest_included_rounds()?;
                let (last, _) = self.ctx.last_final()?;
                let fin = self
                    .ctx
                    .block_on(self.ctx.chain.final_checkpoint(self.ctx.pool, last))?;
                Ok(!left
                    && fin.is_none_or(|f| {
                        self.ctx.final_round(&f).phase(now) != RoundPhase::LateCommits
                    }))
            })();
            match closed {
                Ok(true) => return,
                Ok(false) => {}
                Err(e) => tracing::warn!("attesting final rounds: {e:#}"),
            }
            if start.elapsed() > max_wait {
                tracing::warn!("stopped attesting after {max_wait:?}");
                return;
            }
            std::thread::sleep(Duration::from_secs(2));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{attestation, Attest};
    use synod_chain::types::FinalCheckpoint;
    use synod_protocol::{RoundState, Timeline};

    fn fin(included: Vec<u32>) -> FinalCheckpoint {
        FinalCheckpoint {
            hash: [7; 32],
            parent: [0; 32],
            included,
            contributors: Vec::new(),
            finalized_at: 100,
            committed_stake: 0,
            round_stake: 0,
        }
    }

    /// A member whose payload a final round aggregated and that has no commit recorded for it
    /// (its commit failed, or it skipped the round after a restart) records the final
    /// checkpoint once the late-commit window (5 blocks) closed, so it is not leaked as silent.
    #[test]
    fn an_included_member_without_a_commit_attests_after_the_window() {
        let f = fin(vec![0, 1, 2]);
        let round = RoundState::finalized(Timeline::for_pool(0, 5, 0, 0), 100, f.hash);
        let at = |now| round.phase(now);
        let no = || Ok(false);
        assert_eq!(
            attestation(&f, 1, false, at(105), no).unwrap(),
            Attest::NotYet
        );
        assert_eq!(
            attestation(&f, 1, false, at(106), no).unwrap(),
            Attest::Commit
        );
        // A commit of ours is recorded (the round loop's, late): nothing more.
        let yes = || Ok(true);
        assert_eq!(
            attestation(&f, 1, false, at(106), yes).unwrap(),
            Attest::Done
        );
        // Not in the included set, or a contributor: nothing, ever.
        assert_eq!(
            attestation(&f, 3, false, at(106), no).unwrap(),
            Attest::Done
        );
        assert_eq!(attestation(&f, 1, true, at(106), no).unwrap(), Attest::Done);
        // The commit is read only when it decides.
        let unread = || -> anyhow::Result<bool> { panic!("read the commit needlessly") };
        assert_eq!(
            attestation(&f, 1, false, at(105), unread).unwrap(),
            Attest::NotYet
        );
    }
}
