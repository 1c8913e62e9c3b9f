//! Jury duty: as a juror (every member unless `--no-jury`), checks the disputed contributions
//! of the challenges it is drawn for and votes: the part of the accused's trace a narrowed
//! challenge names (its states fetched from the accused), or the whole inner phase.

use std::collections::BTreeSet;

use anyhow::{anyhow, Result};
use synod_chain::calls;
use synod_chain::types::ChallengeInfo;

use super::{Check, DutyWorker, FetchedStates};
use crate::event::{dispute_name, TrainerEvent};
use crate::pool::verify::carried::expected_carried_in;
use crate::pool::verify::replay::{Dispute, WholeReplay};
use crate::pool::verify::vote::juror_vote;

/// A juror's judgement of a contribution.
struct Judged {
    /// Its vote.
    guilty: bool,
    /// The relative L2 distance its check found (∞ for a payload that is not the disputed
    /// one).
    distance: f64,
    /// Why it replayed the whole inner phase; `None` when the disputed part decided.
    whole: Option<WholeReplay>,
}

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
        self.ctx.appealer.forget_below(cursor);
        self.duties.awaiting = awaiting;
        self.duties.jury_read_at = Some(read_at);
        Ok(())
    }

    /// The vote on `c` (member `member` accused) from a check of its kept payload: of the part
    /// of its trace `dispute` names (those trace states fetched from the accused first), or
    /// of its whole inner phase ([`Replayer::check_dispute`]). Returns `(guilty, relative L2
    /// distance, why the whole phase was replayed)`, or why this trainer cannot judge it
    /// (`Ok(Err(reason))`).
    ///
    /// [`Replayer::check_dispute`]: crate::pool::verify::Replayer::check_dispute
    fn replay_vote(
        &mut self,
        c: &ChallengeInfo,
        member: u32,
        dispute: Dispute,
    ) -> Result<std::result::Result<Judged, String>> {
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
        // The states the disputed part needs, from the accused (a whole-phase dispute needs
        // none).
        let states = if dispute == Dispute::Phase {
            FetchedStates::new()
        } else {
            let now = self.ctx.block_on(self.ctx.chain.finalized_number())?;
            let wait = self.state_wait(now, expires, 1);
            self.prefetch_trace_states(round, &[(c.accused, member, dispute.segments())], wait)
        };
        let mut whole = None;
        let vote = juror_vote(&kept, &digest, |_| {
            let check = Check::Dispute(dispute, &states);
            let rep = self
                .replay(round, member, &parent, check, expires, committed)?
                .ok_or_else(|| anyhow!("payload of member {member} vanished"))?;
            whole = rep.whole;
            Ok(rep)
        });
        // Fetched states are no evidence: only what the accused signed is.
        let _ = std::fs::remove_dir_all(self.ctx.retained.fetched_dir(round));
        let (guilty, distance) = vote?;
        Ok(Ok(Judged {
            guilty,
            distance,
            whole,
        }))
    }

    /// Replays the contribution disputed by challenge `id` and votes.
    pub(super) fn judge(&mut self, id: u32, c: &ChallengeInfo) -> Result<()> {
        let abstain = |t: &mut Self, why: String| -> Result<()> {
            tracing::warn!(challenge = id, "cannot judge, not voting: {why}");
            t.metrics.emit(&TrainerEvent::Vote {
                abstained: Some(why),
                accused: None,
                challenge: id,
                dispute: None,
                distance: None,
                guilty: None,
                member: None,
                round: c.round,
                whole_replay: None,
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
        let dispute = self.ctx.block_on(self.ctx.chain.dispute_of(id))?;
        // A member seated on a challenge of its own contribution knows what it sent: an honest
        // one votes innocent without replaying itself (the replay of a sparse payload would ask
        // its own peer for its residuals).
        let Judged {
            guilty,
            distance,
            whole,
        } = if c.accused == self.ctx.account {
            Judged {
                guilty: false,
                distance: 0.0,
                whole: None,
            }
        } else {
            match self.replay_vote(c, member, dispute)? {
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
            ?dispute,
            "voted"
        );
        self.metrics.emit(&TrainerEvent::Vote {
            abstained: None,
            accused: Some(c.accused.to_string()),
            challenge: id,
            dispute: Some(dispute_name(dispute)),
            distance: Some(distance),
            guilty: Some(guilty),
            member: Some(member),
            round: c.round,
            whole_replay: whole.map(|w| w.as_str().to_string()),
        })
    }
}
