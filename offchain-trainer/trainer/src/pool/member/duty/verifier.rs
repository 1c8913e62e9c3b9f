//! The verifier: replays a sample of the other members of every final round's included set
//! (every aggregated payload, its author committed or not), by their
//! Proof-of-Learning trace segments first and whole when a segment fails, and records the
//! contributions outside the tolerance for the challenger.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Result};
use synod_chain::types::{AccountId, FinalCheckpoint, PoolStatus};
use synod_diloco::residual::{commitments_of, NO_RESIDUAL};
use synod_diloco::trace::split_trace;
use synod_diloco::verify::{
    honest_verifiers_at_least, sample_rate, sampled, sampled_segments, REPLAY_TOLERANCE,
};

use super::DutyWorker;
use super::*;
use crate::event::TrainerEvent;
use crate::pool::verify::carried::expected_carried_in;
use crate::pool::verify::prefetch::{prefetch_states, wanted_states};
use crate::pool::verify::replay::{needed_states, Replay, Residuals, WholeReplay};

impl DutyWorker {
    /// Verifies every kept round that has closed; forgets the evidence of settled rounds.
    pub(super) fn verify_closed_rounds(&mut self) -> Result<()> {
        let (pool, rounds) = (self.ctx.pool, self.duties.to_verify.clone());
        let now = if rounds.is_empty() {
            0
        } else {
            self.ctx.block_on(self.ctx.chain.finalized_number())?
        };
        for round in rounds {
            if self.duties.verify_not_before.waits(&round, now) {
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
            } else if self.ctx.block_on(self.ctx.chain.voided(pool, round))? {
                self.duties.to_verify.remove(&round);
            }
        }
        // A round not opened yet has no snapshot either: our trace of an overlapped round
        // computed ahead is not to be forgotten — unless the pool is over (completed or
        // cancelled), when that round will never open.
        let info = self.ctx.pool_info()?;
        let over = matches!(info.status, PoolStatus::Completed | PoolStatus::Cancelled);
        let sparse = self.ctx.a.recipe.outer.wire.sparse();
        let rounds = self.ctx.retained.rounds();
        // Rounds whose evidence nothing needs any more, by round.
        let mut done = BTreeMap::new();
        for &round in &rounds {
            if self.duties.to_verify.contains(&round) || (round > info.current_round && !over) {
                done.insert(round, false);
                continue;
            }
            // A voided round's snapshot is kept for equivocation reports, but nothing of ours
            // (verification, jury) concerns it any more.
            let closed = self
                .ctx
                .block_on(self.ctx.chain.round_snapshot(pool, round))?
                .is_none()
                || self.ctx.block_on(self.ctx.chain.voided(pool, round))?;
            done.insert(round, closed && !self.duties.awaiting.contains(&round));
        }
        for &round in &rounds {
            // A sparse round's payloads name the residuals the next round's payloads must
            // carry in: kept while that round can still be verified or judged.
            let next_open = sparse && done.get(&(round + 1)) == Some(&false);
            if done[&round] && !next_open {
                self.ctx.drop_trace(round);
                self.ctx.retained.forget(round);
                self.duties.replays.retain(|(r, _), _| *r != round);
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
        let state = self.round_state(f);
        let until = state.challenges_until().unwrap_or_default();
        if !state.phase(now).accepts_challenges() {
            self.metrics.emit(&TrainerEvent::VerifySkipped {
                detail: format!("challenge window closed at block {until}"),
                round,
            })?;
            return Ok(true);
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
            .a
            .recipe
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
        // Checks whose states all arrived go first: the whole replays of members that did
        // not serve theirs come last.
        let _ = std::fs::remove_dir_all(self.ctx.retained.fetched_dir(round));
        let unverified = checks
            .iter()
            .filter(|(_, m, _)| !self.duties.verified.contains(&(round, *m)))
            .count();
        let wait = self.state_wait(now, until, unverified);
        let states = self.prefetch_trace_states(round, &checks, wait);
        checks.sort_by_key(|(_, member, segments)| {
            let trace = self
                .ctx
                .retained
                .payload(round, *member)
                .and_then(|p| split_trace(&p).ok().and_then(|(t, _)| t));
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
            let verifying = Some((&segments[..], &states));
            let committed = f.contributors.contains(who);
            let rep = match self.replay(round, member, &f.parent, verifying, until, committed) {
                Ok(Some(rep)) => rep,
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
                self.duties
                    .to_challenge
                    .insert((round, member), (*who, rep.distance));
                // Challenged now, not after the rest of the round's checks: the window runs.
                if let Err(e) = self.open_challenge_of(round, member) {
                    tracing::warn!(round, member, "challenge: {e:#}");
                }
            }
        }
        // Fetched states are no evidence: only what the accused signed is.
        let _ = std::fs::remove_dir_all(self.ctx.retained.fetched_dir(round));
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

    /// `member`'s error-feedback residuals for its sparse payload `claimed` of `round`
    /// ([`Residuals`]; empty for a dense codec): its `carried_in` checked against the rule
    /// ([`expected_carried_in`], from the final included set of round − 1 and the payload of
    /// round − 1 we kept), both residuals taken from `fetched` (a verifier's prefetch,
    /// [`DutyWorker::prefetch_trace_states`]) or else fetched from their author (only it keeps
    /// them), checked against their hashes.
    ///
    /// # Errors
    /// Chain RPC failures.
    pub(super) fn residuals_of(
        &self,
        round: u32,
        member: u32,
        claimed: &[u8],
        fetched: Option<&FetchedStates>,
    ) -> Result<std::result::Result<Residuals, Unusable>> {
        if !self.ctx.a.recipe.outer.wire.sparse() {
            return Ok(Ok(Residuals::default()));
        }
        let Ok(Some(c)) = commitments_of(member, claimed) else {
            return Ok(Err(Unusable::Dishonest));
        };
        let included_prev = self.ctx.final_included(round.saturating_sub(1))?;
        match expected_carried_in(&self.ctx.retained, round, member, &included_prev) {
            Some(h) if h != c.carried_in => {
                tracing::warn!(
                    round,
                    member,
                    "the payload carries in a residual the rule does not name"
                );
                return Ok(Err(Unusable::Dishonest));
            }
            Some(_) => {}
            None => {
                tracing::info!(
                    round,
                    member,
                    "its payload of round {} is not kept: cannot check the residual it carries in",
                    round.saturating_sub(1)
                );
                return Ok(Err(Unusable::Unknown));
            }
        }
        let fetch = |h: [u8; 32]| -> std::result::Result<Option<Vec<u8>>, Unusable> {
            if h == NO_RESIDUAL {
                return Ok(None);
            }
            let bytes = match fetched {
                Some(states) => states.get(&h).and_then(|p| std::fs::read(p).ok()),
                None => self.fetch_state(member, h),
            };
            match bytes {
                Some(b) if synod_checkpoint::hash(&b) == h => Ok(Some(b)),
                _ => Err(Unusable::Unserved),
            }
        };
        Ok((|| {
            Ok(Residuals {
                carried_in: fetch(c.carried_in)?,
                carried_out: fetch(c.carried_out)?,
            })
        })())
    }

    /// Member `member`'s libp2p peer id: from the member list, or, for a member that has left
    /// the pool since (its evidence is still served until its windows close), from the
    /// chain's record of former members.
    pub(super) fn peer_of(&self, member: u32) -> Option<synod_p2p::PeerId> {
        let bytes = match self.members.iter().find(|m| m.record.index == member) {
            Some(m) => m.record.peer_id.clone(),
            None => {
                self.ctx
                    .block_on(self.ctx.chain.former_member(self.ctx.pool, member))
                    .ok()
                    .flatten()?
                    .peer_id
            }
        };
        synod_p2p::PeerId::from_bytes(&bytes).ok()
    }

    /// The residual with blake3 `hash` from `member`, who alone serves it (a juror's fetch;
    /// verifiers prefetch theirs): waits [`STATE_FETCH`] plus its transfer at 10 MB/s; `None`
    /// if it did not come.
    pub(super) fn fetch_state(&self, member: u32, hash: [u8; 32]) -> Option<Vec<u8>> {
        let peer = self.peer_of(member)?;
        let max = self.ctx.recipe.max_residual_bytes;
        let within = STATE_FETCH + Duration::from_secs(max / 10_000_000);
        // The timer is made inside the runtime (tokio's timers need its context).
        let fetched = self.ctx.rt.block_on(async {
            tokio::time::timeout(within, self.ctx.client.fetch_checkpoint(peer, hash, max)).await
        });
        match fetched {
            Ok(Ok(bytes)) => Some(bytes),
            Ok(Err(e)) => {
                tracing::info!(member, "residual {}: {e}", synod_checkpoint::hex(&hash));
                None
            }
            Err(_) => None,
        }
    }

    /// How long the trace states of `checks` checks may be waited for when the finalized
    /// head is block `now` and challenges close at block `until`: what the window leaves,
    /// less [`LAG_BLOCKS`](synod_diloco::budget::LAG_BLOCKS) (the chain's head runs ahead of
    /// `now`, and a challenge is included a block after it is sent), after every check's
    /// segments and whole replay at twice this machine's idle step time (the replays share
    /// its cores with the inner phase); at least [`MIN_STATE_WAIT`]. An author that withholds
    /// its states forces the whole replay; waiting for them longer would let it outlast the
    /// window.
    fn state_wait(&self, now: u64, until: u64, checks: usize) -> Duration {
        let blocks = until
            .saturating_sub(now)
            .saturating_sub(synod_diloco::budget::LAG_BLOCKS);
        let left = blocks as f64 * self.ctx.block_secs;
        let h = self.ctx.inner_steps;
        let load = synod_diloco::budget::VerifyLoad {
            inner_steps: h,
            segment_len: synod_diloco::verify::segment_len(h, self.ctx.a.recipe.trace_segments),
            verify_segments: self.ctx.a.verify_segments,
            contributions: u32::try_from(checks).unwrap_or(u32::MAX),
            trace_segments: self.ctx.a.recipe.trace_segments,
            state_bytes: 0,
            residual_bytes: 0,
        };
        let replays = 2.0 * load.replayed_steps() as f64 * self.ctx.step_secs;
        let secs = left - replays;
        if secs.is_finite() {
            Duration::from_secs_f64(secs.clamp(MIN_STATE_WAIT.as_secs_f64(), 1e6))
        } else {
            MIN_STATE_WAIT
        }
    }

    /// The trace states that the segment checks `checks` ((account, member, drawn segments))
    /// of `round` need, fetched from their authors side by side ([`prefetch_states`]) into
    /// [`Retained::fetched_dir`](crate::pool::verify::Retained::fetched_dir): each state gets
    /// at most [`STATE_FETCH`] plus its transfer at 10 MB/s, the whole round twice that plus
    /// [`CHECK_BUDGET`], however many authors stall, and all of it at most `cap`
    /// ([`DutyWorker::state_wait`]). Contributions already replayed whole, not kept, or
    /// without a trace of this pool's segments need nothing. Returns each received state's
    /// file by blake3.
    pub(super) fn prefetch_trace_states(
        &self,
        round: u32,
        checks: &[(AccountId, u32, Vec<u32>)],
        cap: Duration,
    ) -> FetchedStates {
        let boundaries = self
            .ctx
            .a
            .recipe
            .segment_boundaries(self.ctx.inner_steps)
            .len();
        let mut asked = Vec::new();
        for (_, member, segments) in checks {
            if self.duties.replays.contains_key(&(round, *member))
                || self.duties.verified.contains(&(round, *member))
            {
                continue;
            }
            // Only the accused serves its states (nobody else keeps them).
            let (Some(peer), Some(claimed)) = (
                self.peer_of(*member),
                self.ctx.retained.payload(round, *member),
            ) else {
                continue;
            };
            asked.push((peer, claimed, segments.clone()));
        }
        let sparse = self.ctx.a.recipe.outer.wire.sparse();
        let wanted = wanted_states(asked, boundaries, sparse);
        let fetches: u64 = wanted.iter().map(|(_, h)| h.len() as u64).sum();
        let dir = self.ctx.retained.fetched_dir(round);
        if wanted.is_empty() {
            return FetchedStates::new();
        }
        if let Err(e) = std::fs::create_dir_all(&dir) {
            tracing::warn!(round, "cannot keep fetched trace states: {e}");
            return FetchedStates::new();
        }
        let (client, max) = (self.ctx.client.clone(), self.ctx.recipe.max_state_bytes);
        let per_state = (STATE_FETCH + Duration::from_secs(max / 10_000_000)).min(cap);
        // The authors share our link: the round's wait grows with everything it fetches.
        let within =
            (2 * per_state + CHECK_BUDGET + Duration::from_secs(fetches * max / 10_000_000))
                .min(cap);
        self.ctx.rt.block_on(prefetch_states(
            wanted,
            per_state,
            within,
            move |peer, h| {
                let client = client.clone();
                let path = dir.join(format!("{}.state", synod_checkpoint::hex(&h)));
                async move {
                    let bytes = client
                        .fetch_checkpoint(peer, h, max)
                        .await
                        .map_err(|e| tracing::info!(round, %peer, "trace state: {e}"))
                        .ok()?;
                    // Written whole, then renamed: a fetch cut at its deadline leaves no
                    // partial file under the state's name (one temporary file per author: two
                    // authors may serve the same residual at once).
                    tokio::task::spawn_blocking(move || {
                        let tmp = path.with_extension(format!("{peer}.tmp"));
                        std::fs::write(&tmp, bytes)?;
                        std::fs::rename(&tmp, &path).map(|_| path)
                    })
                    .await
                    .ok()?
                    .map_err(|e| tracing::warn!(round, "cannot keep a trace state: {e}"))
                    .ok()
                }
            },
        ))
    }

    /// `member`'s replay of `round`, or `None` when its payload was not kept (or, sparse, we
    /// cannot tell which residual it must carry in). `deadline`: the block by which a verdict
    /// is due (a sparse payload's unserved residuals are waited for until half the time left
    /// has passed, [`residual_deadline_passed`]; [`ResidualsUnserved`] before). `segments`:
    /// check these segments of its Proof-of-Learning trace first
    /// ([`Replayer::check_segments`](crate::pool::verify::Replayer::check_segments), with the
    /// trace states fetched beforehand, [`DutyWorker::prefetch_trace_states`]); `None`: replay
    /// the whole inner phase, as jurors do. Whole replays are cached (a verifier drawn as juror
    /// replays once). `committed`: whether `member` committed the round's final hash (a
    /// contributor); one that did not and does not serve its residuals by the deadline is
    /// given the benefit of the doubt (it may have stopped after the exchange, and only it
    /// holds them): judged honest, never challenged or convicted on that alone.
    pub(super) fn replay(
        &mut self,
        round: u32,
        member: u32,
        parent: &[u8; 32],
        segments: Option<(&[u32], &FetchedStates)>,
        deadline: u64,
        committed: bool,
    ) -> Result<Option<Replay>> {
        if let Some(r) = self.duties.replays.get(&(round, member)) {
            return Ok(Some(*r));
        }
        let Some(claimed) = self.ctx.retained.payload(round, member) else {
            tracing::info!(
                round,
                member,
                "payload not kept (not in our included set): not replayed"
            );
            return Ok(None);
        };
        let fetched = segments.map(|(_, states)| states);
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
                        return Ok(Some(Replay {
                            distance: f64::NAN,
                            honest: true,
                            ..dishonest(WholeReplay::Unserved)
                        }));
                    }
                    return Ok(Some(dishonest(WholeReplay::Unserved)));
                }
                // Its own signed payload breaks the rule: nothing anyone serves changes that.
                let rep = dishonest(WholeReplay::Mismatch);
                self.duties.replays.insert((round, member), rep);
                return Ok(Some(rep));
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
        let rep = match segments {
            None => self.replayer.check(
                &self.ctx.recipe,
                &self.ctx.a.recipe,
                &parent,
                round,
                member,
                &claimed,
                &residuals,
            )?,
            Some((segments, states)) => self.replayer.check_segments(
                &self.ctx.recipe,
                &self.ctx.a.recipe,
                &parent,
                round,
                member,
                &claimed,
                &residuals,
                segments,
                &mut |h| states.get(h).and_then(|p| std::fs::read(p).ok()),
            )?,
        };
        tracing::info!(
            round,
            member,
            distance = rep.distance,
            honest = rep.honest,
            secs = rep.secs,
            segments = rep.segments,
            whole = rep.whole.map(WholeReplay::as_str),
            "replayed"
        );
        if rep.whole.is_some() {
            self.duties.replays.insert((round, member), rep);
        }
        Ok(Some(rep))
    }
}
