//! Attesting a final round that aggregated our payload when no commit of ours is recorded for
//! it: our commit failed (the round loop does not retry a commit whose round became final with
//! our own checkpoint), or we skipped the round after a restart while serving the payload we had
//! announced for it. The chain leaks a silent included member when the round is settled
//! (`docs/architecture.md`, step 8), so we record the final checkpoint, unpaid, once the
//! late-commit window has closed: before it, the round loop's own commit may still land.
//! `--fault late`, which commits nothing on purpose, attests nothing either.

use anyhow::Result;
use synod_chain::calls;
use synod_chain::types::FinalCheckpoint;

use super::DutyWorker;
use crate::chain_args::Fault;

/// What becomes of one final round at a pass ([`attestation`]).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Attest {
    /// Nothing to do, ever: our payload is not in its included set, we are a contributor, we
    /// have a commit recorded, or the round is settled.
    Done,
    /// Its late-commit window is still open: asked again at a later pass.
    NotYet,
    /// Record its final checkpoint.
    Commit,
}

/// Whether we attest final round `f` at finalized block `now`: we (member index `me`) are in
/// its included set and no contributor (`contributor`), the late-commit window (`window`
/// blocks after finality) has closed, and the round is not settled (`settled`) and has no
/// commit of ours (`committed`; only read when it matters, hence lazily).
pub(super) fn attestation(
    f: &FinalCheckpoint,
    me: u32,
    contributor: bool,
    window: u32,
    now: u64,
    settled: bool,
    committed: impl FnOnce() -> Result<bool>,
) -> Result<Attest> {
    if !f.included.contains(&me) || contributor || settled {
        return Ok(Attest::Done);
    }
    if now <= u64::from(f.finalized_at) + u64::from(window) {
        return Ok(Attest::NotYet);
    }
    Ok(if committed()? {
        Attest::Done
    } else {
        Attest::Commit
    })
}

impl DutyWorker {
    /// Attests the pool's final rounds from [`super::Duties::attest_from`] on, in order, up to
    /// the first whose late-commit window is still open; rounds done are not read again. A
    /// commit refused by the chain (settled meanwhile, or committed by the round loop) is done;
    /// a failed submission is tried again at the next pass.
    pub(super) fn attest_included_rounds(&mut self) -> Result<()> {
        if self.ctx.a.fault == Some(Fault::Late) {
            return Ok(());
        }
        let chain = &self.ctx.chain;
        let (pool, me) = (self.ctx.pool, self.ctx.me);
        let now = self.ctx.block_on(chain.finalized_number())?;
        let (last, _) = self.ctx.last_final()?;
        let mut round = self.duties.attest_from.max(1);
        while round <= last {
            // A voided round has no final checkpoint: nothing to attest.
            if let Some(f) = self.ctx.block_on(chain.final_checkpoint(pool, round))? {
                let contributor = f.contributors.contains(&self.ctx.account);
                let settled = || -> Result<bool> {
                    Ok(self
                        .ctx
                        .block_on(chain.round_snapshot(pool, round))?
                        .is_none())
                };
                let settled = f.included.contains(&me) && !contributor && settled()?;
                let committed = || {
                    Ok(self
                        .ctx
                        .block_on(chain.committed(pool, round, &self.ctx.account))?)
                };
                match attestation(
                    &f,
                    me,
                    contributor,
                    self.ctx.challenge_window,
                    now,
                    settled,
                    committed,
                )? {
                    Attest::NotYet => break,
                    Attest::Done => {}
                    Attest::Commit => {
                        let call = calls::commit_checkpoint(pool, round, f.hash, f.included);
                        match self.ctx.block_on(chain.submit(&call, &self.ctx.signer)) {
                            Ok(_) => tracing::info!(
                                round,
                                "recorded the final checkpoint of a round that aggregated our \
                                 payload without a commit of ours (unpaid; not leaked)"
                            ),
                            Err(e @ synod_chain::ChainError::Module { .. }) => {
                                tracing::debug!(round, "final checkpoint not recorded: {e}")
                            }
                            Err(e) => {
                                tracing::warn!(round, "recording the final checkpoint: {e}");
                                break;
                            }
                        }
                    }
                }
            }
            round += 1;
            self.duties.attest_from = round;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{attestation, Attest};
    use synod_chain::types::FinalCheckpoint;

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
        let no = || Ok(false);
        assert_eq!(
            attestation(&f, 1, false, 5, 105, false, no).unwrap(),
            Attest::NotYet
        );
        assert_eq!(
            attestation(&f, 1, false, 5, 106, false, no).unwrap(),
            Attest::Commit
        );
        // A commit of ours is recorded (the round loop's, late): nothing more.
        let yes = || Ok(true);
        assert_eq!(
            attestation(&f, 1, false, 5, 106, false, yes).unwrap(),
            Attest::Done
        );
        // Not in the included set, a contributor, or settled: nothing, ever.
        assert_eq!(
            attestation(&f, 3, false, 5, 106, false, no).unwrap(),
            Attest::Done
        );
        assert_eq!(
            attestation(&f, 1, true, 5, 106, false, no).unwrap(),
            Attest::Done
        );
        assert_eq!(
            attestation(&f, 1, false, 5, 106, true, no).unwrap(),
            Attest::Done
        );
        // The commit is read only when it decides.
        let unread = || -> anyhow::Result<bool> { panic!("read the commit needlessly") };
        assert_eq!(
            attestation(&f, 1, false, 5, 105, false, unread).unwrap(),
            Attest::NotYet
        );
    }
}
