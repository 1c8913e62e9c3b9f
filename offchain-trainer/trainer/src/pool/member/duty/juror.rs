//! Jury duty: as a juror (every member unless `--no-jury`), replays the disputed contributions
//! of the challenges it is drawn for and votes.

use std::collections::BTreeSet;

use anyhow::{anyhow, Result};
use synod_chain::calls;
use synod_chain::types::ChallengeInfo;

use super::DutyWorker;
use crate::event::TrainerEvent;
use crate::pool::verify::carried::expected_carried_in;
use crate::pool::verify::vote::juror_vote;

impl DutyWorker {
    /// Votes on every drawn committee we sit on, first or appeal (with `--no-jury` too: an
    /// account seated anyway, because another process of it opted in, votes rather than be
    /// slashed as a no-show); appeals the rulings we lose as a party that no `Ruled` event made us
    /// appeal already ([`super::super::appeal`]);
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
                        // Normally appealed already, from the chain's `Ruled` event.
                        let appealer = &self.ctx.appealer;
                        self.ctx.block_on(appealer.consider(id, &c, a, read_at));
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
        self.duties.awaiting = awaiting;
        self.duties.jury_read_at = Some(read_at);
        Ok(())
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
