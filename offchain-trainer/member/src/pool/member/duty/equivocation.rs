//! Equivocation reports: two payloads one member signed for one round, seen by our network,
//! proved on-chain with `report_equivocation`.

use anyhow::Result;
use synod_chain::types::{AccountId, PoolStatus};
use synod_chain::{calls, ChainError};
use synod_p2p::Equivocation;

use super::DutyWorker;
use super::*;
use crate::event::TrainerEvent;

impl DutyWorker {
    /// Reports on-chain every equivocation the network saw (two payloads signed by one member
    /// for one round): `Challenges::report_equivocation` slashes it at once. The accused's
    /// account is read from the round's snapshot (a member that left after it opened is still
    /// in it). A report is submitted once the round's snapshot exists and only if nobody
    /// reported it yet; it is dropped when the chain refuses it (the call failed in a block),
    /// when the snapshot is gone (settled round, or voided and no longer slashable) or was never
    /// opened while the pool trains on, and after [`MAX_REPORT_TRIES`] passes that failed otherwise
    /// (RPC). A voided round stays reportable: the equivocation may be what voided it.
    pub(super) fn report_equivocations(&mut self) -> Result<()> {
        for (key, proof) in self.ctx.client.take_equivocations() {
            self.duties.to_report.entry(key).or_insert((proof, 0));
        }
        for ((round, member), (proof, tries)) in self.duties.to_report.clone() {
            let (outcome, done, who) = match self.report_equivocation(round, member, &proof) {
                // Waiting for the round to open (no accused yet) costs no try.
                Ok(Some((outcome, done, who))) => {
                    let out_of_tries = who.is_some() && tries + 1 >= MAX_REPORT_TRIES;
                    (outcome, done || out_of_tries, who)
                }
                Ok(None) => {
                    self.duties.to_report.remove(&(round, member));
                    continue;
                }
                Err(e) => (
                    format!("failed: {e:#}"),
                    tries + 1 >= MAX_REPORT_TRIES,
                    None,
                ),
            };
            if done {
                self.duties.to_report.remove(&(round, member));
            } else if let Some(entry) = self.duties.to_report.get_mut(&(round, member)) {
                entry.1 += 1;
            }
            tracing::warn!(round, member, "equivocation: {outcome}");
            self.metrics.emit(&TrainerEvent::Equivocation {
                account: who.map(|w| w.to_string()),
                member,
                outcome,
                round,
            })?;
        }
        Ok(())
    }

    /// One pass of [`DutyWorker::report_equivocations`] for member `member`'s equivocation in
    /// `round`: `None` to drop it silently (the round is not kept, or the member is not in it);
    /// else (outcome, whether it is done, the accused).
    #[allow(clippy::type_complexity)]
    pub(super) fn report_equivocation(
        &self,
        round: u32,
        member: u32,
        proof: &Equivocation,
    ) -> Result<Option<(String, bool, Option<AccountId>)>> {
        let (chain, pool) = (&self.ctx.chain, self.ctx.pool);
        let Some(snapshot) = self.ctx.block_on(chain.round_snapshot(pool, round))? else {
            // Not opened yet (a round ahead of the chain): kept while the pool trains on.
            let ahead = self
                .ctx
                .block_on(chain.pool(pool))?
                .filter(|p| p.status == PoolStatus::Training)
                .is_some_and(|p| round > p.current_round);
            return Ok(ahead.then(|| ("waiting for the round to open".to_string(), false, None)));
        };
        let Some(who) = snapshot.iter().find(|p| p.index == member).map(|p| p.who) else {
            return Ok(None);
        };
        // A voided round's snapshot stays in storage after its stake may be withdrawn (until
        // the pool's next voids delete it); the chain refuses reports from then on.
        if self.ctx.block_on(chain.voided(pool, round))? {
            let now = self.ctx.block_on(chain.finalized_number())?;
            let kept = self.ctx.block_on(chain.kept_snapshots(pool))?;
            // The report lands a block or two after the finalized head.
            if !kept
                .iter()
                .any(|&(r, until)| r == round && now + 2 < u64::from(until))
            {
                let outcome = "not reported: the voided round's stake is no longer slashable";
                return Ok(Some((outcome.into(), true, Some(who))));
            }
        }
        let recorded = || -> Result<bool> {
            Ok(self
                .ctx
                .block_on(chain.equivocation(pool, round, &who))?
                .is_some())
        };
        if recorded()? {
            return Ok(Some(("already reported".into(), true, Some(who))));
        }
        let call = calls::report_equivocation(
            pool,
            round,
            who,
            proof.first.to_vec(),
            proof.second.to_vec(),
        )?;
        let (outcome, done) = match self.ctx.block_on(chain.submit(&call, &self.ctx.signer)) {
            // Confirmed by the chain, whoever's report landed.
            Ok(_) if recorded()? => ("reported".to_string(), true),
            Ok(_) => ("submitted, not recorded".to_string(), false),
            Err(e) if e.is_module("Challenges", "AlreadyReported") => {
                ("already reported".to_string(), true)
            }
            Err(e @ (ChainError::Module { .. } | ChainError::Dispatch(_))) => {
                (format!("refused: {e}"), true)
            }
            Err(e) => return Err(e.into()),
        };
        Ok(Some((outcome, done, Some(who))))
    }
}
