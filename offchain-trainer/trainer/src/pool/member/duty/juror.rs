//! Jury duty: as a juror (every member unless `--no-jury`), replays the disputed contributions
//! of the challenges it is drawn for and votes.

use std::collections::BTreeSet;

use anyhow::{anyhow, Result};
use synod_chain::calls;
use synod_chain::types::{AccountId, AppealInfo, ChallengeInfo, Verdict};

use super::DutyWorker;
use crate::event::TrainerEvent;
use crate::pool::verify::carried::expected_carried_in;
use crate::pool::verify::vote::juror_vote;

impl DutyWorker {
    /// Votes on every drawn committee we sit on, first or appeal (with `--no-jury` too: an
    /// account seated anyway, because another process of it opted in, votes rather than be
    /// slashed as a no-show); appeals the rulings we lose as a party ([`Self::appeal_if_wronged`]);
    /// records in `awaiting` the rounds of our pool's challenges that still wait for a draw,
    /// our vote, or a ruling's execution (an appeal committee may still seat us), and in
    /// `jury_read_at` the finalized block read before the challenges (cleared first: a pass
    /// that fails leaves `None`). As a juror, first opts back in if the chain opted us out (a
    /// vote we missed as a no-show).
    pub(super) fn jury_duty(&mut self) -> Result<()> {
        self.duties.jury_read_at = None;
        if self.ctx.a.juror
            && self
                .ctx
                .block_on(self.ctx.chain.opted_out_of_juries(&self.ctx.account))?
        {
            tracing::warn!("opted out of juries on-chain (a missed vote): opting back in");
            match self.ctx.block_on(
                self.ctx
                    .chain
                    .submit(&calls::register_juror(), &self.ctx.signer),
            ) {
                Ok(_) => {}
                Err(e) if e.is_module("Challenges", "AlreadyJuror") => {}
                Err(e) => tracing::warn!("register_juror: {e}"),
            }
        }
        let read_at = self.ctx.block_on(self.ctx.chain.finalized_number())?;
        let next = self.ctx.block_on(self.ctx.chain.next_challenge_id())?;
        let mut awaiting = BTreeSet::new();
        // Read every open challenge first, so that an appeal (its period is short) never waits
        // behind a replay for another challenge.
        let mut open = Vec::new();
        for id in self.duties.cursor..next {
            if self.duties.handled.contains(&id) {
                continue;
            }
            match self.ctx.block_on(self.ctx.chain.challenge(id))? {
                None => {
                    self.duties.handled.insert(id);
                }
                Some(c) => {
                    // In a pool with appeals a challenge goes on after a ruling: its appeal
                    // committee votes anew (our vote on the first one was deleted).
                    let appeal = self.ctx.block_on(self.ctx.chain.appeal_of(id))?;
                    if let Some(a) = &appeal {
                        self.appeal_if_wronged(id, &c, a, read_at);
                    }
                    open.push((id, c, appeal));
                }
            }
        }
        for (id, c, appeal) in open {
            let ours = c.pool_id == self.ctx.pool;
            if c.jury.is_empty() {
                if ours {
                    awaiting.insert(c.round);
                }
                continue;
            }
            // Until the appeal committee is drawn, it may seat us (from the jurors frozen at
            // opening, whether or not we opted out since): stay for it.
            if ours
                && appeal
                    .as_ref()
                    .is_some_and(|a| a.appellant.is_none() || a.ruling.is_some())
            {
                awaiting.insert(c.round);
            }
            let voting = appeal.as_ref().is_none_or(|a| a.ruling.is_none());
            // One judgement per committee: an abstention is not retried every pass.
            let committee = (id, c.expires_at);
            if voting
                && !self.duties.judged.contains(&committee)
                && c.jury.iter().any(|s| s.who == self.ctx.account)
                && self
                    .ctx
                    .block_on(self.ctx.chain.vote_of(id, &self.ctx.account))?
                    .is_none()
            {
                // A failed vote is retried next pass; it must not hold up the others.
                if let Err(e) = self.judge(id, &c) {
                    tracing::warn!(challenge = id, "judging failed: {e:#}");
                    awaiting.insert(c.round);
                    continue;
                }
                self.duties.judged.insert(committee);
            }
            if appeal.is_none() {
                self.duties.handled.insert(id);
            }
        }
        while self.duties.handled.remove(&self.duties.cursor) {
            self.duties.cursor += 1;
        }
        let cursor = self.duties.cursor;
        self.duties.judged.retain(|(id, _)| *id >= cursor);
        self.duties.appealed.retain(|id| *id >= cursor);
        self.duties.awaiting = awaiting;
        self.duties.jury_read_at = Some(read_at);
        Ok(())
    }

    /// Appeals the ruling of challenge `c` (`id`, its appeal side `a`, read at finalized block
    /// `read_at`) when [`appeal_decision`] says so; too late or refused: logged, not retried.
    fn appeal_if_wronged(&mut self, id: u32, c: &ChallengeInfo, a: &AppealInfo, read_at: u64) {
        if self.duties.appealed.contains(&id) {
            return;
        }
        let plays_fault = self.ctx.a.fault.is_some();
        let verdict = match appeal_decision(c, a, &self.ctx.account, plays_fault, read_at) {
            AppealDecision::NotOurs => return,
            AppealDecision::TooLate(verdict) => {
                tracing::warn!(
                    challenge = id,
                    ?verdict,
                    "ruling against us seen too late to appeal"
                );
                self.duties.appealed.insert(id);
                return;
            }
            AppealDecision::Appeal(verdict) => verdict,
        };
        match self
            .ctx
            .block_on(self.ctx.chain.submit(&calls::appeal(id), &self.ctx.signer))
        {
            Ok(_) => {
                tracing::info!(challenge = id, ?verdict, "appealed the ruling");
                self.duties.appealed.insert(id);
            }
            Err(e)
                if e.is_module("Challenges", "NoRuling")
                    || e.is_module("Challenges", "AppealClosed")
                    || e.is_module("Challenges", "InsufficientAppealBond") =>
            {
                // Not retried: the ruling was appealed or executed, or the bond is missing
                // (an operator's matter, logged once).
                tracing::warn!(challenge = id, "cannot appeal: {e}");
                self.duties.appealed.insert(id);
            }
            Err(e) => tracing::warn!(challenge = id, "appeal: {e}"),
        }
    }

    /// The vote on `c` (member `member` accused) from a replay of its kept payload: `(guilty,
    /// relative L2 distance)`, or why this trainer cannot judge it (`Ok(Err(reason))`).
    fn replay_vote(
        &mut self,
        c: &ChallengeInfo,
        member: u32,
    ) -> Result<std::result::Result<(bool, f64), String>> {
        let Some(kept) = self.ctx.retained.payload(c.round, member) else {
            return Ok(Err("no payload of the accused was kept".into()));
        };
        // Two digests under the accused's key for one round convict without a replay (an
        // accomplice's sham challenge with a never-gossiped announcement looks like that).
        let (parent, committed) = match self
            .ctx
            .block_on(self.ctx.chain.final_checkpoint(self.ctx.pool, c.round))?
        {
            Some(f) => (f.parent, f.contributors.contains(&c.accused)),
            None => return Err(anyhow!("round {} is not final", c.round)),
        };
        let (round, digest, expires) = (c.round, c.payload_digest, u64::from(c.expires_at));
        if self.ctx.a.recipe.outer.wire.sparse() {
            let included_prev = self.ctx.final_included(round.saturating_sub(1))?;
            if expected_carried_in(&self.ctx.retained, round, member, &included_prev).is_none() {
                return Ok(Err(
                    "the accused's payload of the previous round was not kept: the residual it \
                     must carry in is unknown"
                        .into(),
                ));
            }
        }
        let vote = juror_vote(&kept, &digest, |_| {
            self.replay(round, member, &parent, None, expires, committed)?
                .ok_or_else(|| anyhow!("payload of member {member} vanished"))
        })?;
        Ok(Ok(vote))
    }

    /// Replays the contribution disputed by challenge `id` and votes.
    pub(super) fn judge(&mut self, id: u32, c: &ChallengeInfo) -> Result<()> {
        let abstain = |t: &mut Self, why: String| -> Result<()> {
            tracing::warn!(challenge = id, "cannot judge, not voting: {why}");
            t.metrics.emit(&TrainerEvent::Vote {
                abstained: Some(why),
                accused: None,
                challenge: id,
                distance: None,
                guilty: None,
                member: None,
                round: c.round,
            })
        };
        if c.pool_id != self.ctx.pool {
            return abstain(
                self,
                format!("pool {} is not the pool this trainer replays", c.pool_id),
            );
        }
        // The accused's index from the round's snapshot (kept until settlement, hence while a
        // challenge can exist), then its own kept payload: a copier shares its victim's digest.
        let snapshot = self
            .ctx
            .block_on(self.ctx.chain.round_snapshot(self.ctx.pool, c.round))?;
        let Some(member) =
            snapshot.and_then(|s| s.iter().find(|p| p.who == c.accused).map(|p| p.index))
        else {
            return abstain(self, "the accused is not in the round's snapshot".into());
        };
        // A member seated on a challenge of its own contribution knows what it sent: an honest
        // one votes innocent without replaying itself (the replay of a sparse payload would ask
        // its own peer for its residuals).
        let (guilty, distance) = if c.accused == self.ctx.account {
            (false, 0.0)
        } else {
            match self.replay_vote(c, member)? {
                Ok(vote) => vote,
                Err(why) => return abstain(self, why),
            }
        };
        match self.ctx.block_on(
            self.ctx
                .chain
                .submit(&calls::vote(id, guilty), &self.ctx.signer),
        ) {
            Ok(_) => {}
            Err(e)
                if e.is_module("Challenges", "AlreadyVoted")
                    || e.is_module("Challenges", "VotingClosed")
                    || e.is_module("Challenges", "ChallengeNotFound") =>
            {
                tracing::info!(challenge = id, "vote not needed: {e}");
            }
            Err(e) => return Err(e.into()),
        }
        tracing::info!(
            challenge = id,
            round = c.round,
            member,
            distance,
            guilty,
            "voted"
        );
        self.metrics.emit(&TrainerEvent::Vote {
            abstained: None,
            accused: Some(c.accused.to_string()),
            challenge: id,
            distance: Some(distance),
            guilty: Some(guilty),
            member: Some(member),
            round: c.round,
        })
    }
}

/// What a member does about a challenge's ruling.
#[derive(Debug, PartialEq, Eq)]
enum AppealDecision {
    /// Nothing: no ruling waits, it was appealed, we did not lose it, or we play a fault.
    NotOurs,
    /// We lost this ruling but the appeal committee's draw would no longer come from a block
    /// after our appeal's.
    TooLate(Verdict),
    /// Appeal it.
    Appeal(Verdict),
}

/// Whether `me` appeals the ruling `a` of challenge `c`, read at finalized block `read_at`. An
/// honest member appeals a ruling it lost: a guilty one against its own payload (it knows it
/// was honest), an innocent one on a challenge it opened (only on a failed replay). A member
/// playing a fault (`plays_fault`) never appeals. An appeal must land at least
/// `MIN_JURY_DELAY` blocks before the ruling executes.
fn appeal_decision(
    c: &ChallengeInfo,
    a: &AppealInfo,
    me: &AccountId,
    plays_fault: bool,
    read_at: u64,
) -> AppealDecision {
    let Some((verdict, executes_at)) = a.ruling.filter(|_| a.appellant.is_none()) else {
        return AppealDecision::NotOurs;
    };
    let lost = match verdict {
        Verdict::Guilty => c.accused == *me,
        Verdict::Innocent => c.challenger == *me,
        _ => false,
    };
    if !lost || plays_fault {
        AppealDecision::NotOurs
    } else if read_at + synod_protocol::timeline::MIN_JURY_DELAY > u64::from(executes_at) {
        AppealDecision::TooLate(verdict)
    } else {
        AppealDecision::Appeal(verdict)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account(b: u8) -> AccountId {
        AccountId::from([b; 32])
    }

    fn challenge() -> ChallengeInfo {
        ChallengeInfo {
            pool_id: 0,
            round: 1,
            accused: account(1),
            challenger: account(2),
            payload_digest: [0; 32],
            expires_at: 100,
            jury: Vec::new(),
        }
    }

    fn ruled(verdict: Verdict, executes_at: u32) -> AppealInfo {
        AppealInfo {
            ruling: Some((verdict, executes_at)),
            appellant: None,
        }
    }

    #[test]
    fn an_honest_member_appeals_exactly_the_rulings_it_lost_while_it_may() {
        let c = challenge();
        let (accused, challenger, juror) = (account(1), account(2), account(3));
        let guilty = ruled(Verdict::Guilty, 120);
        let innocent = ruled(Verdict::Innocent, 120);
        use AppealDecision::*;
        assert_eq!(
            appeal_decision(&c, &guilty, &accused, false, 100),
            Appeal(Verdict::Guilty)
        );
        assert_eq!(
            appeal_decision(&c, &innocent, &challenger, false, 100),
            Appeal(Verdict::Innocent)
        );
        // Won rulings, a juror's, and a member playing a fault: no appeal.
        assert_eq!(
            appeal_decision(&c, &guilty, &challenger, false, 100),
            NotOurs
        );
        assert_eq!(
            appeal_decision(&c, &innocent, &accused, false, 100),
            NotOurs
        );
        assert_eq!(appeal_decision(&c, &guilty, &juror, false, 100), NotOurs);
        assert_eq!(appeal_decision(&c, &guilty, &accused, true, 100), NotOurs);
        // No ruling yet, or appealed already.
        let voting = AppealInfo {
            ruling: None,
            appellant: None,
        };
        assert_eq!(appeal_decision(&c, &voting, &accused, false, 100), NotOurs);
        let appealed = AppealInfo {
            appellant: Some((accused, 1)),
            ..guilty.clone()
        };
        assert_eq!(
            appeal_decision(&c, &appealed, &accused, false, 100),
            NotOurs
        );
        // The last block that leaves the draw a later seed is `executes_at − 2`.
        assert_eq!(
            appeal_decision(&c, &guilty, &accused, false, 118),
            Appeal(Verdict::Guilty)
        );
        assert_eq!(
            appeal_decision(&c, &guilty, &accused, false, 119),
            TooLate(Verdict::Guilty)
        );
    }
}
