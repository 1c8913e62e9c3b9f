//! The challenger: opens the on-chain challenges of the contributions the verifier found
//! dishonest, while their round can still be challenged.

use anyhow::Result;
use synod_chain::calls::{self, Dispute};
use synod_chain::types::Verdict;

use super::{DutyWorker, SCHEDULE_RETRY_BLOCKS};
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
    /// wrong when it found one. Another challenge being open does not stop ours (an
    /// accomplice's sham challenge must not shield the cheater); a contribution already found
    /// guilty, or out of its challenge window, is dropped; one whose challenge by us is
    /// already open is done; one that cannot be opened yet (the challenge schedule full) is
    /// tried again [`SCHEDULE_RETRY_BLOCKS`] later (each failed try costs a fee).
    ///
    /// # Errors
    /// RPC errors (the challenge stays pending).
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
        let (outcome, done) = if verdict == Some(Verdict::Guilty) {
            ("not opened: already convicted".to_string(), true)
        } else if f.is_none_or(|f| !self.round_state(&f).phase(now).accepts_challenges()) {
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
                    // Refused for what would refuse any challenge of it: handled below.
                    Err(e) if !settled_by_chain(&e) => {
                        // A runtime without narrowed disputes, or any other failure of the
                        // narrowed call, must not drop a confirmed cheater's challenge.
                        tracing::warn!(
                            round,
                            member,
                            "narrowed challenge failed ({e}): disputing the whole phase"
                        );
                        dispute = Dispute::Phase;
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
                    let next =
                        self.duties
                            .challenge_not_before
                            .after(key, now, SCHEDULE_RETRY_BLOCKS);
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

/// Whether `e` is a refusal the challenger handles as such whatever the challenge disputes
/// (ours already open, the schedule full, the contribution already convicted).
fn settled_by_chain(e: &synod_chain::ChainError) -> bool {
    ["AlreadyChallenged", "ScheduleFull", "AlreadyConvicted"]
        .iter()
        .any(|name| e.is_module("Challenges", name))
}
