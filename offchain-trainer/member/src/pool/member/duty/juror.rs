//! Jury duty: as a juror (every member unless `MemberConfig::juror` is off), checks the disputed contributions
//! of the challenges it is drawn for and votes: the part of the accused's trace a narrowed
//! challenge names (its states fetched from the accused), or the whole inner phase.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

use anyhow::{anyhow, Result};
use synod_chain::calls;
use synod_chain::types::{AccountId, AppealInfo, ChallengeInfo};

use super::{Check, DutyWorker, FetchedStates, StateCheck};
use crate::event::{dispute_name, TrainerEvent};
use crate::pool::verify::carried::expected_carried_in;
use crate::pool::verify::replay::{Dispute, WholeReplay};
use crate::pool::verify::vote::juror_vote;
use crate::pool::verify::Checker;

/// A committee seat this juror has not voted on yet, with what judging it needs.
#[derive(Debug)]
pub(super) struct Pending {
    /// The challenge.
    id: u32,
    /// Its state on chain.
    c: ChallengeInfo,
    /// Whether the challenge is handled once judged (no appeal can follow).
    handled: bool,
    /// The accused's member index in the round's snapshot; `None` outside our pool or the
    /// snapshot.
    member: Option<u32>,
    /// The part of the accused's trace its challenger disputes.
    dispute: Dispute,
}

/// The evidence the disputes among `pending` need (one [`StateCheck`] per disputed
/// contribution, with the segments its narrowed disputes name, none for whole-phase disputes
/// alone: fetched side by side with the others' whatever their round; a sparse payload's
/// residuals for every one), and, when there is anything to fetch, what bounds the wait:
/// the earliest end of a vote this juror replays for (narrowed or whole-phase: every check
/// waits for the fetch) and how many replays follow it. Challenges outside our pool or the
/// round's snapshot, and challenges of our own contribution (`me` knows what it sent) need
/// no evidence; only the latter two need no replay, and neither do the seats `replayed`
/// already (the disputed part of the disputed payload of the accused, member index given,
/// answered by a replay this worker ran).
fn state_checks(
    pending: &[Pending],
    me: &AccountId,
    replayed: impl Fn(&Pending, u32) -> bool,
) -> (Vec<StateCheck>, Option<(u64, usize)>) {
    // One check per contribution, with the segments of every dispute of it: two fetches of
    // one author's states side by side would race on the same files.
    let mut by_contribution: BTreeMap<(u32, u32), StateCheck> = BTreeMap::new();
    let (mut earliest, mut replays) = (u64::MAX, 0usize);
    for s in pending {
        let Some(member) = s.member.filter(|_| s.c.accused != *me) else {
            continue;
        };
        if replayed(s, member) {
            continue;
        }
        earliest = earliest.min(u64::from(s.c.expires_at));
        replays += 1;
        // A whole-phase dispute needs no trace state, but its residuals (no segments).
        let check = by_contribution
            .entry((s.c.round, member))
            .or_insert_with(|| (s.c.round, s.c.accused, member, Vec::new()));
        check.3.extend(s.dispute.segments());
        check.3.sort_unstable();
        check.3.dedup();
    }
    let checks: Vec<StateCheck> = by_contribution.into_values().collect();
    let bound = (!checks.is_empty()).then_some((earliest, replays));
    (checks, bound)
}

/// A juror's judgement of a contribution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Judged {
    /// Its vote.
    pub(super) guilty: bool,
    /// The relative L2 distance its check found (∞ for a payload that is not the disputed
    /// one).
    pub(super) distance: f64,
    /// Why it replayed the whole inner phase; `None` when the disputed part decided.
    pub(super) whole: Option<WholeReplay>,
    /// Whether the replay ran earlier (for our verification, or another challenge of the
    /// same part of the same payload).
    pub(super) reused: bool,
}

impl DutyWorker {
    /// Jury duty before a check of a verification pass whose verdicts are due by block
    /// `due_by` (the close of the round's challenge window): as a juror, reads the challenges
    /// again if a block was finalized since the last read ([`jury_due`]; a committee drawn
    /// while a pass replays one member after another votes after the replay under way, not
    /// after the whole pass); then judges the seats whose vote ends by `due_by` (the others
    /// after the checks). Returns the finalized block read after judging (`None` if that read
    /// failed).
    pub(super) fn jury_between_checks(&mut self, due_by: u64) -> Option<u64> {
        let read = |t: &Self| match t.ctx.block_on(t.ctx.chain.finalized_number()) {
            Ok(now) => Some(now),
            Err(e) => {
                tracing::warn!("jury duty between checks: {e}");
                None
            }
        };
        let now = read(self);
        if self.ctx.a.juror && now.is_some_and(|n| jury_due(self.duties.jury_read_at, n)) {
            if let Err(e) = self.read_jury() {
                tracing::warn!("jury duty between checks: {e:#}");
            }
        }
        match self.judge_seats(Some(due_by)) {
            true => read(self),
            false => now,
        }
    }

    /// Reads our pool's challenges ([`read_open_challenges`]; another pool's are read once and
    /// left to the account's process in that pool): keeps in `seats` every drawn committee
    /// seat of ours in our pool not voted yet, first or appeal (with `MemberConfig::juror` off too: an account seated anyway, because another
    /// process of it opted in, votes rather than be slashed as a no-show), for
    /// [`DutyWorker::judge_seats`]; appeals the rulings we lose as a party that no `Ruled`
    /// event made us appeal already ([`super::super::appeal`]);
    /// records in `awaiting` the rounds of our pool's challenges that still wait for a draw,
    /// or a ruling's execution (an appeal committee may still seat us), and in
    /// `jury_read_at` the finalized block read before the challenges (cleared first: a read
    /// that fails leaves `None`). As a juror, first opts back in if the account is opted out
    /// (another process of the same account opted it out when it stopped).
    pub(super) fn read_jury(&mut self) -> Result<()> {
        self.duties.jury_read_at = None;
        if self.ctx.a.juror
            && self
                .ctx
                .block_on(self.ctx.chain.opted_out_of_juries(&self.ctx.account))?
        {
            tracing::warn!("opted out of juries on-chain (another process of this account stopped): opting back in");
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
        let (ctx, duties) = (&self.ctx, &mut self.duties);
        let open = read_open_challenges(
            duties.cursor..next,
            &mut duties.handled,
            ctx.pool,
            |id| ctx.block_on(ctx.chain.challenge(id)),
            |id| ctx.block_on(ctx.chain.appeal_of(id)),
        )?;
        for (id, c, appeal) in &open {
            if let Some(a) = appeal {
                // Normally appealed already, from the chain's `Ruled` event.
                let appealer = &self.ctx.appealer;
                self.ctx.block_on(appealer.consider(*id, c, a, read_at));
            }
        }
        // The committees we sit on and have not voted in: (challenge id, the challenge,
        // whether it is handled once judged).
        let mut to_judge = Vec::new();
        for (id, c, appeal) in open {
            if c.jury.is_empty() {
                awaiting.insert(c.round);
                continue;
            }
            // Until the appeal committee is drawn, it may seat us (from the jurors frozen at
            // opening, whether or not we opted out since): stay for it.
            if appeal
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
                to_judge.push((id, c, appeal.is_none()));
                continue;
            }
            if appeal.is_none() {
                self.duties.handled.insert(id);
            }
        }
        self.duties.seats = self.pending(to_judge, &mut awaiting);
        self.duties.awaiting = awaiting;
        self.duties.jury_read_at = Some(read_at);
        self.advance_cursor();
        Ok(())
    }

    /// Moves the cursor past the challenges handled, and forgets what it passed.
    fn advance_cursor(&mut self) {
        while self.duties.handled.remove(&self.duties.cursor) {
            self.duties.cursor += 1;
        }
        let cursor = self.duties.cursor;
        self.duties.judged.retain(|(id, _)| *id >= cursor);
        self.ctx.appealer.forget_below(cursor);
    }

    /// Judges the seats read by [`DutyWorker::read_jury`] whose vote ends by block `due_by`
    /// (every seat when `None`), earliest end first ([`due_seats`]); the others wait for a
    /// later call. A verifier's check of a round whose challenge window closes at block `w`
    /// runs after the seats due by `w` and before the others: a cheater's challenges, each
    /// seating most jurors, cannot hold the next round's checks past that round's window.
    /// Returns whether any seat was due.
    pub(super) fn judge_seats(&mut self, due_by: Option<u64>) -> bool {
        let due = due_seats(&mut self.duties.seats, due_by);
        if due.is_empty() {
            return false;
        }
        // Every narrowed dispute's states at once, before any check: k accused that stall
        // theirs cost this pass one wait, not k one after the other.
        let replays = &self.duties.replays;
        let (checks, bound) = state_checks(&due, &self.ctx.account, |s, member| {
            (replays)
                .get(s.c.round, member, &s.c.payload_digest, s.dispute)
                .is_some()
        });
        let mut states = match bound {
            Some((until, replays)) => {
                let now = self
                    .ctx
                    .block_on(self.ctx.chain.finalized_number())
                    .unwrap_or(self.duties.jury_read_at.unwrap_or_default());
                let wait = self.state_wait(now, until, replays);
                let narrowed: Vec<StateCheck> =
                    checks.iter().filter(|c| !c.3.is_empty()).cloned().collect();
                self.prefetch_trace_states(&narrowed, wait, Checker::Juror)
            }
            None => FetchedStates::new(),
        };
        // The residuals the prefetch missed (it shares a voting period's wait with the trace
        // states) and those of whole-phase disputes, each with its whole transfer time, all
        // at once: a missed residual counts against its accused no sooner than after that.
        self.ask_residuals_again(&checks, &mut states, Checker::Juror);
        for seat in &due {
            // A failed vote is retried after the next read; it must not hold up the others.
            if let Err(e) = self.judge(seat, &states) {
                tracing::warn!(challenge = seat.id, "judging failed: {e:#}");
                self.duties.awaiting.insert(seat.c.round);
                continue;
            }
            self.duties.judged.insert((seat.id, seat.c.expires_at));
            if seat.handled {
                self.duties.handled.insert(seat.id);
            }
        }
        // Fetched states are no evidence: only what the accused signed is.
        for round in checks
            .iter()
            .map(|(round, ..)| *round)
            .collect::<BTreeSet<_>>()
        {
            let _ = std::fs::remove_dir_all(self.ctx.retained.fetched_dir(round, Checker::Juror));
        }
        self.advance_cursor();
        true
    }

    /// Whether a seat of our pool's `round` waits to be judged (its evidence is kept).
    pub(super) fn seat_waits(&self, round: u32) -> bool {
        self.duties
            .seats
            .iter()
            .any(|s| s.c.pool_id == self.ctx.pool && s.c.round == round)
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
        states: &FetchedStates,
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
        if self.ctx.recipe.pool.is_sparse() {
            let included_prev = self.ctx.final_included(round.saturating_sub(1))?;
            if expected_carried_in(&self.ctx.retained, round, member, &included_prev).is_none() {
                return Ok(Err(
                    "the accused's payload of the previous round was not kept: the residual it \
                     must carry in is unknown"
                        .into(),
                ));
            }
        }
        // The disputed part's states were fetched from the accused before the pass's checks
        // (a whole-phase dispute needs none, nor a part replayed already: `replay` answers
        // another challenge of the same part from its replays).
        let mut whole = None;
        // Whether the replay memory answered (a kept payload that is not the disputed one is
        // judged without any replay).
        let mut reused = false;
        let vote = juror_vote(&kept, &digest, |_| {
            let check = Check::Dispute(dispute, states);
            let (rep, answered) = self
                .replay(round, member, &parent, check, expires, committed)?
                .ok_or_else(|| anyhow!("payload of member {member} vanished"))?;
            (whole, reused) = (rep.whole, answered);
            Ok(rep)
        });
        let (guilty, distance) = vote?;
        Ok(Ok(Judged {
            guilty,
            distance,
            whole,
            reused,
        }))
    }

    /// What each of `to_judge` ((challenge id, challenge, handled once judged)) needs to be
    /// judged: for our pool's challenges, the accused's member index (from the round's
    /// snapshot, kept until settlement, hence while a challenge can exist; read once per
    /// round) and the part its challenger disputes. A challenge whose reads fail is left out,
    /// its round added to `awaiting` (retried next pass).
    fn pending(
        &self,
        to_judge: Vec<(u32, ChallengeInfo, bool)>,
        awaiting: &mut BTreeSet<u32>,
    ) -> Vec<Pending> {
        let mut snapshots = BTreeMap::new();
        let mut pending = Vec::with_capacity(to_judge.len());
        for (id, c, handled) in to_judge {
            let (mut member, mut dispute) = (None, Dispute::Phase);
            if c.pool_id == self.ctx.pool {
                // A failed read is retried next pass; it must not hold up the others.
                let mut read = || -> Result<(Option<u32>, Dispute)> {
                    if let Entry::Vacant(e) = snapshots.entry(c.round) {
                        let s = self
                            .ctx
                            .block_on(self.ctx.chain.round_snapshot(self.ctx.pool, c.round))?;
                        e.insert(s.unwrap_or_default());
                    }
                    let Some(member) = snapshots[&c.round].iter().find(|p| p.who == c.accused)
                    else {
                        return Ok((None, Dispute::Phase));
                    };
                    let index = member.index;
                    let dispute = self.ctx.block_on(self.ctx.chain.dispute_of(id))?;
                    Ok((Some(index), dispute))
                };
                match read() {
                    Ok(r) => (member, dispute) = r,
                    Err(e) => {
                        tracing::warn!(challenge = id, "judging failed: {e:#}");
                        awaiting.insert(c.round);
                        continue;
                    }
                }
            }
            pending.push(Pending {
                id,
                c,
                handled,
                member,
                dispute,
            });
        }
        pending
    }

    /// Replays the contribution disputed on `seat` and votes; the trace states its dispute
    /// names are among `states` if the accused served them.
    fn judge(&mut self, seat: &Pending, states: &FetchedStates) -> Result<()> {
        let Pending {
            id,
            ref c,
            member,
            dispute,
            ..
        } = *seat;
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
                reused: false,
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
        // The accused's own kept payload is found by its index: a copier shares its victim's
        // digest.
        let Some(member) = member else {
            return abstain(self, "the accused is not in the round's snapshot".into());
        };
        // A member seated on a challenge of its own contribution knows what it sent: an honest
        // one votes innocent without replaying itself (the replay of a sparse payload would ask
        // its own peer for its residuals).
        let Judged {
            guilty,
            distance,
            whole,
            reused,
        } = if c.accused == self.ctx.account {
            Judged {
                guilty: false,
                distance: 0.0,
                whole: None,
                reused: false,
            }
        } else {
            match self.replay_vote(c, member, dispute, states)? {
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
            // Too late: the committee's vote closed before ours landed (a no-show, unless its
            // verdict was reached without us).
            Err(e) if e.is_module("Challenges", "VotingClosed") => {
                tracing::warn!(challenge = id, "vote too late: {e}");
            }
            Err(e)
                if e.is_module("Challenges", "AlreadyVoted")
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
            reused,
            round: c.round,
            whole_replay: whole.map(|w| w.as_str().to_string()),
        })
    }
}

/// Takes from `seats` those whose vote ends by block `due_by` (all when `None`), earliest end
/// first (earliest deadline first over the juror's votes and, with the verifier's checks
/// judged between them, its checks: [`DutyWorker::judge_seats`]).
fn due_seats(seats: &mut Vec<Pending>, due_by: Option<u64>) -> Vec<Pending> {
    let (mut due, rest): (Vec<_>, Vec<_>) = std::mem::take(seats)
        .into_iter()
        .partition(|s| due_by.is_none_or(|b| u64::from(s.c.expires_at) <= b));
    *seats = rest;
    due.sort_by_key(|s| s.c.expires_at);
    due
}

/// Whether jury duty has challenges to read that it has not: a block finalized after the one
/// it last read them at (`read_at`; `None` when it has not read them, or that read failed).
fn jury_due(read_at: Option<u64>, finalized: u64) -> bool {
    read_at.is_none_or(|at| finalized > at)
}

/// The open challenges of our pool among `ids` not yet `handled`, with their appeals
/// (`read`: `Challenges.Challenges`, `appeal_of`: `Challenges.Appeals`). A challenge that is
/// gone, or that belongs to another pool, is marked handled at its first read: this process
/// neither replays nor appeals another pool's contributions, and an attacker keeping many
/// challenges open in a pool of its own (a bond each, returned at expiry) must not cost every
/// trainer two reads per challenge at every pass.
///
/// # Errors
/// The first failed read.
pub(super) fn read_open_challenges<E>(
    ids: std::ops::Range<u32>,
    handled: &mut BTreeSet<u32>,
    pool: u32,
    mut read: impl FnMut(u32) -> std::result::Result<Option<ChallengeInfo>, E>,
    mut appeal_of: impl FnMut(u32) -> std::result::Result<Option<AppealInfo>, E>,
) -> std::result::Result<Vec<(u32, ChallengeInfo, Option<AppealInfo>)>, E> {
    let mut open = Vec::new();
    for id in ids {
        if handled.contains(&id) {
            continue;
        }
        match read(id)? {
            Some(c) if c.pool_id == pool => {
                // In a pool with appeals a challenge goes on after a ruling: its appeal
                // committee votes anew (our vote on the first one was deleted).
                let appeal = appeal_of(id)?;
                open.push((id, c, appeal));
            }
            _ => {
                handled.insert(id);
            }
        }
    }
    Ok(open)
}

#[cfg(test)]
mod tests;
