//! The challenger: opens the on-chain challenges of the contributions the verifier found
//! dishonest, while their round can still be challenged.

use anyhow::Result;
use synod_chain::calls::{self, Dispute};
use synod_chain::types::Verdict;
use synod_chain::ChainError;
use synod_protocol::RoundPhase;

use super::{schedule_retry_blocks, DutyWorker};
use crate::event::TrainerEvent;

impl DutyWorker {
    /// Opens the challenges of dishonest contributions found so far
    /// ([`DutyWorker::open_challenge_of`] each).
    pub(super) fn open_pending_challenges(&mut self) -> Result<()> {
        let pending: Vec<(u32, u32)> = self.duties.to_challenge.keys().copied().collect();
        for (round, member) in pending {
            self.open_challenge_of(round, member)?;
        }
        Ok(())
    }

    /// Opens the challenge of `member`'s contribution to `round` if the verifier found it
    /// dishonest (nothing otherwise), narrowed to the part of its trace the verifier found
    /// wrong when it found one, once the block it would land in is past the round's late
    /// commits (before, the chain refuses it: `ChallengeTooEarly`; the next pass tries again). Another challenge being open does not stop ours (an
    /// accomplice's sham challenge must not shield the cheater); a contribution already found
    /// guilty, or out of its challenge window, is dropped; one whose challenge by us is
    /// already open is done; one that cannot be opened yet (the challenge schedule full) is
    /// tried again [`schedule_retry_blocks`] later (each failed try costs a fee); one whose
    /// submission the chain did not decide (RPC, pool or timeout errors) is tried again at
    /// the next pass. A narrowed challenge the runtime refuses for its narrowing disputes the
    /// whole phase instead.
    ///
    /// # Errors
    /// RPC errors reading the chain (the challenge stays pending).
    pub(super) fn open_challenge_of(&mut self, round: u32, member: u32) -> Result<()> {
        let key = (round, member);
        let Some(&(who, distance, mut dispute)) = self.duties.to_challenge.get(&key) else {
            return Ok(());
        };
        let pool = self.ctx.pool;
        let now = self.ctx.block_on(self.ctx.chain.finalized_number())?;
        if self.duties.challenge_not_before.waits(&key, now) {
            return Ok(());
        }
        let verdict = self
            .ctx
            .block_on(self.ctx.chain.verdict(pool, round, &who))?;
        let f = self
            .ctx
            .block_on(self.ctx.chain.final_checkpoint(pool, round))?;
        let state = f.map(|f| self.ctx.final_round(&f));
        // Challenges open once the round's late commits close (its committee is drawn from
        // its contributors, which late commits still add to). Ours lands about LAG_BLOCKS − 1
        // blocks past the finalized head we read: submitted once that block opens challenges,
        // else the next pass tries.
        let lands_at = now.saturating_add(synod_diloco::budget::LAG_BLOCKS - 1);
        if verdict != Some(Verdict::Guilty)
            && state.is_some_and(|s| s.phase(lands_at) == RoundPhase::LateCommits)
        {
            return Ok(());
        }
        let (outcome, done) = if verdict == Some(Verdict::Guilty) {
            ("not opened: already convicted".to_string(), true)
        } else if !state.is_some_and(|s| s.phase(now).challenge_window_open()) {
            ("not opened: challenge window closed".to_string(), true)
        } else if let Some(evidence) = self.ctx.retained.announcement(round, member) {
            let whole_phase = |evidence| -> Result<_> {
                let call = calls::open_challenge(pool, round, who, evidence)?;
                Ok(self
                    .ctx
                    .block_on(self.ctx.chain.submit(&call, &self.ctx.signer)))
            };
            let submitted = if dispute == Dispute::Phase {
                whole_phase(evidence)?
            } else {
                let call =
                    calls::open_narrowed_challenge(pool, round, who, evidence.clone(), dispute)?;
                let narrowed = self
                    .ctx
                    .block_on(self.ctx.chain.submit(&call, &self.ctx.signer));
                match narrowed {
                    // A runtime without narrowed disputes (the call does not fit its
                    // metadata), or one that refuses the part: a confirmed cheater's challenge
                    // is not dropped for that, it disputes the whole phase (from now on).
                    Err(e) if refuses_the_narrowing(&e) => {
                        tracing::warn!(
                            round,
                            member,
                            "narrowed challenge refused ({e}): disputing the whole phase"
                        );
                        dispute = Dispute::Phase;
                        if let Some(pending) = self.duties.to_challenge.get_mut(&key) {
                            pending.2 = Dispute::Phase;
                        }
                        whole_phase(evidence)?
                    }
                    other => other,
                }
            };
            match submitted {
                Ok(_) => ("opened".to_string(), true),
                Err(e) if e.is_module("Challenges", "AlreadyChallenged") => {
                    ("not opened: ours is already open".to_string(), true)
                }
                Err(e) if e.is_module("Challenges", "ScheduleFull") => {
                    let next = self.duties.challenge_not_before.after(
                        key,
                        now,
                        schedule_retry_blocks(self.ctx.me),
                    );
                    (
                        format!(
                            "retrying at block {next}: no block left to schedule its jury draw in"
                        ),
                        false,
                    )
                }
                Err(e) if e.is_module("Challenges", "AlreadyConvicted") => {
                    ("not opened: already convicted".to_string(), true)
                }
                // Landed while late commits were still accepted: the next pass tries again.
                Err(e) if e.is_module("Challenges", "ChallengeTooEarly") => (
                    "retrying: the round still takes late commits".to_string(),
                    false,
                ),
                // Not decided by the chain (the node unreachable, the pool full, no answer in
                // time): tried again at the next pass, while the window is open.
                Err(
                    e @ (ChainError::Rpc(_)
                    | ChainError::Connect { .. }
                    | ChainError::Rejected(_)
                    | ChainError::Timeout { .. }),
                ) => (format!("retrying: {e}"), false),
                Err(e) => (format!("failed: {e}"), true),
            }
        } else {
            ("not opened: no signed announcement kept".to_string(), true)
        };
        if done {
            self.duties.to_challenge.remove(&key);
            self.duties.challenge_not_before.clear(&key);
        }
        tracing::warn!(round, member, distance, "challenge: {outcome}");
        self.metrics.emit(&TrainerEvent::Challenge {
            account: who.to_string(),
            dispute: crate::event::dispute_name(dispute),
            distance,
            member,
            outcome,
            round,
        })
    }
}

/// Whether `e` refuses a narrowed challenge for its narrowing alone, so that the whole phase
/// can still be disputed: the call does not fit the runtime's metadata (a runtime without
/// narrowed disputes), or the runtime refuses the part named.
fn refuses_the_narrowing(e: &ChainError) -> bool {
    matches!(e, ChainError::Invalid(_)) || e.is_module("Challenges", "DisputeOutOfRange")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_refused_narrowing_falls_back_to_the_whole_phase() {
        let module = |error: &str| ChainError::Module {
            pallet: "Challenges".into(),
            error: error.into(),
            docs: String::new(),
        };
        // A runtime without the call, or one refusing the part: dispute the whole phase.
        assert!(refuses_the_narrowing(&ChainError::Invalid(
            "no such call".into()
        )));
        assert!(refuses_the_narrowing(&module("DisputeOutOfRange")));
        // Refusals any challenge of it would get, and failures the chain did not decide: not
        // a reason to give up the narrowing.
        for e in [
            module("AlreadyChallenged"),
            module("ChallengeWindowClosed"),
            ChainError::Rpc("connection reset".into()),
            ChainError::Rejected("priority too low".into()),
        ] {
            assert!(!refuses_the_narrowing(&e), "{e}");
        }
    }
}
