//! The verifier: replays a sample of the other members of every final round's included set
//! (every aggregated payload, its author committed or not), by their
//! Proof-of-Learning trace segments first and whole when a segment fails, and records the
//! contributions outside the tolerance for the challenger.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Result};
use synod_chain::types::{FinalCheckpoint, PoolStatus};
use synod_diloco::payload::Payload;
use synod_diloco::verify::{
    honest_verifiers_at_least, sample_rate, sampled, sampled_segments, REPLAY_TOLERANCE,
};

use super::DutyWorker;
use super::*;
use crate::event::{dispute_name, TrainerEvent};
use crate::pool::verify::replay::{needed_states, Dispute, Replay, ReplayInput, WholeReplay};
use crate::pool::verify::Checker;

/// Whether nothing of ours concerns a round any more, as the latest action the chain
/// subscription told of it says: `Some(true)` voided, `Some(false)` final and not settled (its
/// snapshot is kept, it may still be challenged or judged); `None` when the chain is to be
/// read: nothing told, or told settled (the chain may settle a round some blocks after the
/// timeline's block, when a block's settlements are full, and prunes its snapshot then).
fn closed_as_told(told: Option<&Action>) -> Option<bool> {
    match told? {
        Action::Void => Some(true),
        Action::Finalize { .. }
        | Action::Verify { .. }
        | Action::CloseLateCommits
        | Action::CloseChallenges => Some(false),
        Action::Settle => None,
    }
}

impl DutyWorker {
    /// Verifies every kept round that has closed; forgets the evidence of settled rounds.
    /// What the chain subscription told of a round ([`Duties::told`]) decides when the chain
    /// is read ([`super::told::Told`]): a round told final is read (for its record) and
    /// verified at once, one told voided is done without a read, and, while the subscription
    /// runs, one told nothing yet (open, or its event missed) is read every few blocks; the
    /// evidence of a round told final and not settled is kept without a read, and a round told
    /// nothing is read from the chain at each pass ([`closed_as_told`]).
    pub(super) fn verify_closed_rounds(&mut self) -> Result<()> {
        let (pool, rounds) = (self.ctx.pool, self.duties.to_verify.clone());
        let now = if rounds.is_empty() {
            0
        } else {
            self.ctx.block_on(self.ctx.chain.finalized_number())?
        };
        for round in rounds {
            if self.duties.verify_not_before.waits(&round, now)
                || !self.duties.told.read_due(round, now)
            {
                continue;
            }
            if self.duties.told.latest(round) == Some(Action::Void) {
                self.duties.to_verify.remove(&round);
                self.duties.verify_not_before.clear(&round);
                self.duties.told.done(round);
                continue;
            }
            if let Some(f) = self
                .ctx
                .block_on(self.ctx.chain.final_checkpoint(pool, round))?
            {
                // A failing round (RPC, a block hash not served) is tried again at the next
                // pass: `verify_round` gives it up once its challenge window has closed.
                match self.verify_round(round, &f) {
                    Ok(true) => {}
                    // Residuals still awaited: asked again a few blocks later.
                    Ok(false) => {
                        self.duties
                            .verify_not_before
                            .after(round, now, RESIDUAL_RETRY_BLOCKS);
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(round, "verification failed, trying again: {e:#}");
                        continue;
                    }
                }
                self.duties.to_verify.remove(&round);
                self.duties.verify_not_before.clear(&round);
                self.duties.told.done(round);
            } else if self.ctx.block_on(self.ctx.chain.voided(pool, round))? {
                self.duties.to_verify.remove(&round);
                self.duties.told.done(round);
            } else {
                // Still open: looked at again when the subscription tells its finality, or a
                // few blocks later.
                self.duties.told.found_open(round, now);
            }
        }
        // A round not opened yet has no snapshot either: our trace of an overlapped round
        // computed ahead is not to be forgotten — unless the pool is over (completed or
        // cancelled), when that round will never open.
        let info = self.ctx.pool_info()?;
        let over = matches!(info.status, PoolStatus::Completed | PoolStatus::Cancelled);
        let sparse = self.ctx.recipe.pool.is_sparse();
        let rounds = self.ctx.retained.rounds();
        // Rounds whose evidence nothing needs any more, by round.
        let mut done = BTreeMap::new();
        for &round in &rounds {
            if self.duties.to_verify.contains(&round) || (round > info.current_round && !over) {
                done.insert(round, false);
                continue;
            }
            // A voided round's snapshot is kept for equivocation reports, but nothing of ours
            // (verification, jury) concerns it any more; a settled one's is pruned.
            let closed = match closed_as_told(self.duties.told.latest(round).as_ref()) {
                Some(closed) => closed,
                None => {
                    self.ctx
                        .block_on(self.ctx.chain.round_snapshot(pool, round))?
                        .is_none()
                        || self.ctx.block_on(self.ctx.chain.voided(pool, round))?
                }
            };
            let awaits = self.duties.awaiting.contains(&round) || self.seat_waits(round);
            done.insert(round, closed && !awaits);
        }
        for &round in &rounds {
            // A sparse round's payloads name the residuals the next round's payloads must
            // carry in: kept while that round can still be verified or judged.
            let next_open = sparse && done.get(&(round + 1)) == Some(&false);
            if done[&round] && !next_open {
                self.ctx.drop_trace(round);
                self.ctx.retained.forget(round);
                self.duties.replays.forget(round);
                self.duties.unserved.retain(|(r, _, _), _| *r != round);
                self.duties.verified.retain(|(r, _)| *r != round);
            }
        }
        Ok(())
    }

    /// Replays the sampled members of final `round`'s included set and challenges each
    /// dishonest one as soon as its check fails.
    /// Returns `false` while a sampled sparse contribution's residuals are awaited or a replay
    /// failed (the round is verified again a few blocks later, until its window closes; the
    /// contributions checked already are not).
    pub(super) fn verify_round(&mut self, round: u32, f: &FinalCheckpoint) -> Result<bool> {
        let pool = self.ctx.pool;
        let now = self.ctx.block_on(self.ctx.chain.finalized_number())?;
        let state = self.ctx.final_round(f);
        let until = state.challenges_until().unwrap_or_default();
        if !state.phase(now).challenge_window_open() {
            return self.window_closed(round, until);
        }
        let Some(snapshot) = self
            .ctx
            .block_on(self.ctx.chain.round_snapshot(pool, round))?
        else {
            return Ok(true);
        };
        // The draw's seed is the randomness of the block that made the round final (its
        // author's VRF): nobody knows it when announcing, so an accused cannot grind its
        // payload (or announce last) to escape every verifier's sample, and that block's
        // author cannot grind it either (a block hash it could).
        let seed = self
            .ctx
            .block_on(self.ctx.chain.randomness_at(u64::from(f.finalized_at)))?
            .ok_or_else(|| {
                anyhow!(
                    "the randomness of block {} is no longer kept",
                    f.finalized_at
                )
            })?;
        // The verifiers are the round's honest contributors, of which there may be far fewer
        // than contributors (sybil seats): the rate at which a payload escapes the fewest
        // honest contributors the round's stakes allow.
        let rate = self.ctx.a.verify_rate.unwrap_or_else(|| {
            let stakes: Vec<u128> = snapshot
                .iter()
                .filter(|p| f.contributors.contains(&p.who))
                .map(|p| p.stake)
                .collect();
            sample_rate(honest_verifiers_at_least(&stakes, f.round_stake))
        });
        let segment_count = self
            .ctx
            .recipe
            .pool
            .segment_boundaries(self.ctx.inner_steps)
            .len() as u32
            - 1;
        let mut checks = Vec::new();
        // Every aggregated payload is sampled, its author's commit or not: a member that stays
        // silent after the exchange moved the model too (and the chain accepts the challenge).
        for &member in &f.included {
            let Some(who) = snapshot.iter().find(|p| p.index == member).map(|p| &p.who) else {
                continue;
            };
            if *who == self.ctx.account {
                continue;
            }
            if !sampled(&f.hash, &seed, &self.ctx.account.0, round, member, rate) {
                continue;
            }
            let segments = sampled_segments(
                &f.hash,
                &seed,
                &self.ctx.account.0,
                round,
                member,
                segment_count,
                self.ctx.a.verify_segments,
            );
            checks.push((*who, member, segments));
        }
        // The seats whose vote ends by this round's window vote before its checks (and before
        // the states are fetched for them).
        let now = self.jury_between_checks(until).unwrap_or(now);
        if !state.phase(now).challenge_window_open() {
            return self.window_closed(round, until);
        }
        // Checks whose states all arrived go first: the whole replays of members that did
        // not serve theirs come last.
        let _ = std::fs::remove_dir_all(self.ctx.retained.fetched_dir(round, Checker::Verifier));
        let unverified = checks
            .iter()
            .filter(|(_, m, _)| !self.duties.verified.contains(&(round, *m)))
            .count();
        let wait = self.state_wait(now, until, unverified);
        // Contributions replayed whole already, or checked, need no states.
        let replayed_whole = |m: u32| {
            self.ctx.retained.payload(round, m).is_some_and(|p| {
                let digest = *blake3::hash(&p).as_bytes();
                (self.duties.replays)
                    .get(round, m, &digest, Dispute::Phase)
                    .is_some()
            })
        };
        let to_fetch: Vec<_> = checks
            .iter()
            .filter(|(_, m, _)| !self.duties.verified.contains(&(round, *m)) && !replayed_whole(*m))
            .map(|(who, m, segments)| (round, *who, *m, segments.clone()))
            .collect();
        let mut states = self.prefetch_trace_states(&to_fetch, wait, Checker::Verifier);
        if asks_residual_again(wait, self.ctx.recipe.max_residual_bytes) {
            self.ask_residuals_again(&to_fetch, &mut states, Checker::Verifier);
        }
        checks.sort_by_key(|(_, member, segments)| {
            let trace = self
                .ctx
                .retained
                .payload(round, *member)
                .and_then(|p| Payload::trace_of(&p));
            !trace.is_some_and(|t| {
                needed_states(t.len(), segments)
                    .iter()
                    .all(|j| states.contains_key(&t[*j]))
            })
        });
        // Checks to run again a few blocks later: residuals not served yet, replays that failed.
        let mut again = Vec::new();
        for (who, member, segments) in &checks {
            let (who, member) = (who, *member);
            if self.duties.verified.contains(&(round, member)) {
                continue;
            }
            let now = self.jury_between_checks(until);
            if now.is_some_and(|n| !state.phase(n).challenge_window_open()) {
                // Nothing found now could be challenged; the seats left vote at once.
                let _ = std::fs::remove_dir_all(
                    self.ctx.retained.fetched_dir(round, Checker::Verifier),
                );
                return self.window_closed(round, until);
            }
            // Challenges found by earlier checks and held back while the round took late
            // commits: opened as soon as they may be, not after the whole pass.
            if let Err(e) = self.open_pending_challenges() {
                tracing::warn!(round, "challenges: {e:#}");
            }
            let verifying = Check::Segments(&segments[..], &states);
            let committed = f.contributors.contains(who);
            let rep = match self.replay(round, member, &f.parent, verifying, until, committed) {
                Ok(Some((rep, _))) => rep,
                Ok(None) => continue,
                Err(e) if e.is::<ResidualsUnserved>() => {
                    again.push(member);
                    continue;
                }
                Err(e) => {
                    tracing::warn!(round, member, "replay failed, trying again: {e:#}");
                    again.push(member);
                    continue;
                }
            };
            self.metrics.emit(&TrainerEvent::Verified {
                account: who.to_string(),
                distance: rep.distance,
                failed: rep.failed.map(dispute_name),
                honest: rep.honest,
                member,
                replay_secs: rep.secs,
                round,
                segments: rep.segments,
                tolerance: REPLAY_TOLERANCE,
                whole_replay: rep.whole.map(|w| w.as_str().to_string()),
            })?;
            self.duties.verified.insert((round, member));
            if !rep.honest {
                // The challenge names the part of the trace found wrong, if a check found one:
                // its jurors then check that part only.
                let dispute = rep.failed.unwrap_or_default();
                self.duties
                    .to_challenge
                    .insert((round, member), (*who, rep.distance, dispute));
                // Challenged now, not after the rest of the round's checks: the window runs.
                if let Err(e) = self.open_challenge_of(round, member) {
                    tracing::warn!(round, member, "challenge: {e:#}");
                }
            }
        }
        // Fetched states are no evidence: only what the accused signed is.
        let _ = std::fs::remove_dir_all(self.ctx.retained.fetched_dir(round, Checker::Verifier));
        if !again.is_empty() {
            // Checked again a few blocks later (the round stays to verify, until its window
            // closes); the others are not checked again.
            tracing::info!(
                round,
                ?again,
                "checks to run again: residuals not served or a failed replay"
            );
            return Ok(false);
        }
        Ok(true)
    }

    /// Gives up verifying `round`, whose challenge window closed at block `until`: nothing
    /// found now could be challenged. Returns `Ok(true)` (the round is done with).
    fn window_closed(&mut self, round: u32, until: u64) -> Result<bool> {
        self.metrics.emit(&TrainerEvent::VerifySkipped {
            detail: format!("challenge window closed at block {until}"),
            round,
        })?;
        Ok(true)
    }

    /// `member`'s replay of `round`, or `None` when its payload was not kept (or, sparse, we
    /// cannot tell which residual it must carry in). `deadline`: the block by which a verdict
    /// is due (a sparse payload's unserved residuals are waited for until half the time left
    /// has passed, [`residual_deadline_passed`]; [`ResidualsUnserved`] before). `segments`:
    /// check these segments of its Proof-of-Learning trace first
    /// ([`Replayer::check_segments`](crate::pool::verify::Replayer::check_segments), with the
    /// trace states fetched beforehand, [`DutyWorker::prefetch_trace_states`]), the part a
    /// challenge disputes, or the whole inner phase ([`Check`]). Replays are kept by the part
    /// of the trace they decided ([`replays::Replays`](super::replays::Replays)): a verifier
    /// drawn as juror, or a juror seated on several challenges of one part, replays once (the
    /// `bool`: whether that memory answered, so that no replay ran). `committed`: whether `member` committed the round's final hash (a
    /// contributor); one that did not and does not serve its residuals by the deadline is
    /// given the benefit of the doubt (it may have stopped after the exchange, and only it
    /// holds them): judged honest, never challenged or convicted on that alone.
    pub(super) fn replay(
        &mut self,
        round: u32,
        member: u32,
        parent: &[u8; 32],
        check: Check<'_>,
        deadline: u64,
        committed: bool,
    ) -> Result<Option<(Replay, bool)>> {
        // The part of the trace this check decides: a verifier's sampled segments are answered
        // by a whole replay only.
        let asked = match check {
            Check::Segments(..) => None,
            Check::Dispute(d, _) => Some(d),
        };
        let Some(claimed) = self.ctx.retained.payload(round, member) else {
            tracing::info!(
                round,
                member,
                "payload not kept (not in our included set): not replayed"
            );
            return Ok(None);
        };
        let digest = *blake3::hash(&claimed).as_bytes();
        if let Some(r) =
            (self.duties.replays).get(round, member, &digest, asked.unwrap_or(Dispute::Phase))
        {
            return Ok(Some((r, true)));
        }
        let fetched = match check {
            Check::Segments(_, states) | Check::Dispute(_, states) => states,
        };
        let residuals = match self.residuals_of(round, member, &claimed, fetched)? {
            Ok(r) => r,
            Err(Unusable::Unknown) => return Ok(None),
            Err(why) => {
                let dishonest = |whole| Replay {
                    distance: f64::INFINITY,
                    honest: false,
                    secs: 0.0,
                    segments: 0,
                    whole: Some(whole),
                    failed: None,
                };
                if let Unusable::Unserved = why {
                    // Asked again at every pass until half the time left has passed; not
                    // cached: a juror asks again, under its own deadline.
                    let now = self.ctx.block_on(self.ctx.chain.finalized_number())?;
                    let key = (round, member, deadline);
                    let first = *self.duties.unserved.entry(key).or_insert(now);
                    if !residual_deadline_passed(first, now, deadline) {
                        return Err(ResidualsUnserved { round, member }.into());
                    }
                    if !committed {
                        tracing::info!(
                            round,
                            member,
                            "not judged on its unserved residuals: it did not commit the round \
                             (it may have stopped)"
                        );
                        return Ok(Some((
                            Replay {
                                distance: f64::NAN,
                                honest: true,
                                ..dishonest(WholeReplay::Unserved)
                            },
                            false,
                        )));
                    }
                    return Ok(Some((dishonest(WholeReplay::Unserved), false)));
                }
                // Its own signed payload breaks the rule: nothing anyone serves changes that.
                let rep = dishonest(WholeReplay::Mismatch);
                self.duties
                    .replays
                    .record(round, member, &digest, asked, rep);
                return Ok(Some((rep, false)));
            }
        };
        // The θ the round started from (θ_{r−1}, or θ_{r−2} with overlapped rounds) is read
        // (and its blake3 checked) once for all the replays of a round.
        let parent = &self.ctx.inner_start(round, *parent)?;
        let parent = match &self.duties.parent {
            Some((h, bytes)) if h == parent => bytes.clone(),
            _ => {
                let peers = self.peers();
                let bytes = Arc::new(self.ctx.block_on(self.ctx.store.get_or_fetch(
                    &self.ctx.client,
                    &peers,
                    *parent,
                    Duration::from_secs(120),
                ))?);
                self.duties.parent = Some((*parent, bytes.clone()));
                bytes
            }
        };
        let view = self.ctx.recipe.replay_view();
        let read = |states: &FetchedStates, h: &[u8; 32]| {
            states.get(h).and_then(|p| std::fs::read(p).ok())
        };
        let input = ReplayInput {
            recipe: &view,
            parent: &parent,
            round,
            member,
            claimed: &claimed,
            residuals: &residuals,
        };
        let rep = match check {
            Check::Segments(segments, states) => {
                self.replayer
                    .check_segments(&input, segments, &mut |h| read(states, h))?
            }
            Check::Dispute(dispute, states) => {
                self.replayer
                    .check_dispute(&input, dispute, &mut |h| read(states, h))?
            }
        };
        tracing::info!(
            round,
            member,
            distance = rep.distance,
            honest = rep.honest,
            secs = rep.secs,
            segments = rep.segments,
            whole = rep.whole.map(WholeReplay::as_str),
            failed = ?rep.failed,
            "replayed"
        );
        self.duties
            .replays
            .record(round, member, &digest, asked, rep);
        Ok(Some((rep, false)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::member::follow::PoolRounds;
    use synod_chain::SynodEvent;
    use synod_protocol::Timeline;

    /// The evidence of a round is let go once the subscription has told it voided, kept
    /// without a read while it is final and not settled, and left to the chain's storage once
    /// told settled (the chain may settle it later) or when nothing was told.
    #[test]
    fn a_rounds_evidence_is_kept_while_final_and_let_go_when_voided() {
        let t = Timeline::for_pool(10, 5, 2, 20);
        let mut rounds = PoolRounds::new(1, t);
        let mut told = BTreeMap::new();
        // Every block up to `n` (`events` in block `n`), as a subscription that misses none.
        let mut next = 0;
        let mut step = |told: &mut BTreeMap<u32, Action>, n: u64, events: &[SynodEvent]| {
            for b in next..=n {
                let evs = if b == n { events } else { &[] };
                for (round, action) in rounds.block(b, evs).actions {
                    told.insert(round, action);
                }
            }
            next = n + 1;
        };
        step(
            &mut told,
            100,
            &[SynodEvent::RoundOpened {
                pool: 1,
                round: 1,
                deadline: 110,
            }],
        );
        assert_eq!(closed_as_told(told.get(&1)), None, "open: nothing told yet");
        step(
            &mut told,
            104,
            &[SynodEvent::CheckpointFinalized {
                pool: 1,
                round: 1,
                hash: [1; 32],
            }],
        );
        assert_eq!(closed_as_told(told.get(&1)), Some(false));
        for n in 105..t.settle_at(104) {
            step(&mut told, n, &[]);
            assert_eq!(closed_as_told(told.get(&1)), Some(false), "block {n}");
        }
        step(&mut told, t.settle_at(104), &[]);
        assert_eq!(told.get(&1), Some(&Action::Settle));
        assert_eq!(
            closed_as_told(told.get(&1)),
            None,
            "settled: the chain says when"
        );
        step(
            &mut told,
            200,
            &[SynodEvent::RoundOpened {
                pool: 1,
                round: 2,
                deadline: 210,
            }],
        );
        step(&mut told, 210, &[]);
        assert_eq!(told.get(&2), Some(&Action::Void));
        assert_eq!(closed_as_told(told.get(&2)), Some(true));
    }
}
