//! A member's verification duties (ARCHITECTURE.md, step 7), run between rounds and after the
//! last one: replay a sample of the other contributors of every final round and challenge the
//! ones outside the tolerance; as a registered juror, replay disputed contributions and vote.
//!
//! Nothing here ends `run`: a failed read, replay or extrinsic is logged and retried at the
//! next call. The evidence of a round is deleted once the chain has pruned its snapshot
//! (settled: nothing can challenge it any more) or voided the round.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use serde_json::json;
use synod_chain::types::{AccountId, ChallengeInfo, FinalCheckpoint, PoolStatus, Verdict};
use synod_chain::{calls, ChainError};
use synod_diloco::trace::split_trace;
use synod_diloco::verify::{default_sample_rate, sampled, sampled_segments, REPLAY_TOLERANCE};
use synod_p2p::Equivocation;
use synod_protocol::Timeline;

use super::Trainer;
use crate::pool::verify::carried::expected_carried_in;
use crate::pool::verify::prefetch::{prefetch_states, wanted_states};
use crate::pool::verify::replay::{juror_vote, needed_states, Replay, Residuals, WholeReplay};
use synod_diloco::residual::{commitments_of, NO_RESIDUAL};

/// Trace states a verifier fetched for a round's checks: their files, by blake3.
type FetchedStates = std::collections::HashMap<[u8; 32], std::path::PathBuf>;

/// How long a verifier waits for one Proof-of-Learning trace state (plus its transfer at
/// 10 MB/s) before it replays the whole phase instead.
const STATE_FETCH: Duration = Duration::from_secs(20);
/// Added to twice the per-state wait: how long a verifier waits for all the trace states of
/// one round's checks (fetched from every accused side by side, before any segment is
/// replayed).
const CHECK_BUDGET: Duration = Duration::from_secs(5);

/// What a member tracks of its duties.
#[derive(Default)]
pub(super) struct Duties {
    /// Rounds whose evidence is kept and that are not verified yet.
    pub to_verify: BTreeSet<u32>,
    /// Replays done: (round, member) → result (a juror reuses its verifier's replay).
    replays: BTreeMap<(u32, u32), Replay>,
    /// Lowest challenge id not handled yet.
    cursor: u32,
    /// Challenge ids at or above `cursor` already handled (resolved, voted, not ours).
    handled: BTreeSet<u32>,
    /// Rounds with a challenge of our pool that waited for its draw or our vote at the last
    /// jury pass (their evidence is kept; `finish_duties` waits for them).
    awaiting: BTreeSet<u32>,
    /// Contributions found dishonest whose challenge is not open yet: (round, member) →
    /// (account, distance). Retried every pass until opened, convicted or out of the window.
    to_challenge: BTreeMap<(u32, u32), (AccountId, f64)>,
    /// Equivocations seen by the network and not reported yet: (round, member) → (proof,
    /// failed submissions). See [`Trainer::report_equivocations`].
    to_report: BTreeMap<(u32, u32), (Equivocation, u32)>,
    /// The last parent checkpoint replayed from: (blake3, canonical bytes).
    parent: Option<([u8; 32], Arc<Vec<u8>>)>,
    /// Failed verification passes per round (a round is given up after [`MAX_TRIES`]).
    tries: BTreeMap<u32, u32>,
    /// Contributions of rounds still to verify that were checked already (a round retried
    /// for another contribution does not check them again).
    verified: BTreeSet<(u32, u32)>,
    /// Sparse contributions whose residuals were not served: (round, member, verdict
    /// deadline) → the finalized block at which they were first missed
    /// ([`residual_deadline_passed`]); a verifier's and a juror's waits are counted apart.
    unserved: BTreeMap<(u32, u32, u64), u64>,
    /// Challenges against us seen open, and the next challenge id to look at
    /// ([`Trainer::accused_in_open_challenge`]).
    against_us: (BTreeSet<u32>, u32),
}

/// Whether a residual first missed at block `first` is no longer waited for at block `now`
/// when a verdict is due by block `deadline` (a verifier's challenge window, a juror's vote):
/// half the time that was left when it was first missed has passed. Asked again at every pass
/// before; dishonest after (the accused has had time to serve it, and the rest of the window
/// is left for the challenge or the vote).
fn residual_deadline_passed(first: u64, now: u64, deadline: u64) -> bool {
    now >= first + deadline.saturating_sub(first) / 2
}

/// Why a sparse payload's residuals ([`synod_diloco::residual`]) are not there to replay it.
enum Unusable {
    /// The payload breaks the rules (no commitments, or a `carried_in` the rule does not
    /// name): dishonest without a replay.
    Dishonest,
    /// Its author did not serve a residual in time.
    Unserved,
    /// We did not keep its round r − 1 payload, so we cannot tell which residual it must carry
    /// in: not ours to judge (a fabricated `e_{r−1}` would explain any payload).
    Unknown,
}

/// How many of the latest challenge ids [`Trainer::accused_in_open_challenge`] reads the
/// first time (later calls read only the new ones).
const RECENT_CHALLENGES: u32 = 256;

/// Passes a round's verification may fail (RPC, missing parent) before it is given up.
const MAX_TRIES: u32 = 5;

/// A sparse contribution's residuals were not served in this pass (asked again next pass).
#[derive(Debug)]
struct ResidualsUnserved {
    round: u32,
    member: u32,
}

impl std::fmt::Display for ResidualsUnserved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "member {} did not serve the residuals of its round-{} payload (asked again next pass)",
            self.member, self.round
        )
    }
}

impl std::error::Error for ResidualsUnserved {}

impl Trainer<'_> {
    /// Whether this member verifies or judges at all.
    fn verifies(&self) -> bool {
        self.a.verify_rate != Some(0.0) || self.a.juror
    }

    /// One pass of every duty; never fails (problems are logged and retried next time).
    pub(super) fn duties(&mut self) {
        let t = Instant::now();
        self.duty_pass();
        self.duty_secs += t.elapsed().as_secs_f64();
    }

    /// One pass of [`Trainer::duties`].
    fn duty_pass(&mut self) {
        if let Err(e) = self.report_equivocations() {
            tracing::warn!("equivocation reports: {e:#}");
        }
        if let Err(e) = self.jury_duty() {
            tracing::warn!("jury duty: {e:#}");
        }
        if let Err(e) = self.verify_closed_rounds() {
            tracing::warn!("verification: {e:#}");
        }
        if let Err(e) = self.open_pending_challenges() {
            tracing::warn!("challenges: {e:#}");
        }
    }

    /// After the pool's last round: keeps doing the duties until the last final round can no
    /// longer be challenged and no challenge of this pool waits for a draw or our vote (at
    /// most `max_wait`); then, as a juror, unregisters (a juror that has stopped would be
    /// drawn and, for rounds it contributed to, slashed as a no-show). Never fails: problems are logged.
    pub(super) fn finish_duties(&mut self, max_wait: Duration) {
        // A sparse pool's members serve their residuals until nobody can challenge them.
        if !self.verifies() && !self.a.recipe.outer.wire.sparse() {
            if let Err(e) = self.report_equivocations() {
                tracing::warn!("equivocation reports: {e:#}");
            }
            return;
        }
        let start = Instant::now();
        loop {
            self.duties();
            match self.duties_left() {
                Ok(false) => break,
                Ok(true) => {}
                Err(e) => tracing::warn!("duties: {e:#}"),
            }
            if start.elapsed() > max_wait {
                tracing::warn!("stopping duties after {max_wait:?} with work left");
                break;
            }
            std::thread::sleep(Duration::from_secs(2));
        }
        if self.a.juror {
            match self.block_on(self.chain.submit(&calls::unregister_juror(), &self.signer)) {
                Ok(_) => tracing::info!("unregistered as a juror"),
                Err(e) if e.is_module("Challenges", "NotAJuror") => {}
                Err(e) => tracing::warn!("unregister_juror: {e}"),
            }
        }
    }

    /// Whether the last final round can still be challenged, a round is still to verify, a
    /// challenge is still to open, or a challenge of this pool waits for a draw or our vote.
    fn duties_left(&mut self) -> Result<bool> {
        let now = self.block_on(self.chain.finalized_number())?;
        let (last, _) = self.last_final()?;
        let until = match self.block_on(self.chain.final_checkpoint(self.pool, last))? {
            Some(f) => self.challenges_until(&f),
            None => 0,
        };
        Ok(now <= until
            || self.accused_in_open_challenge()?
            || !self.duties.to_verify.is_empty()
            || !self.duties.to_challenge.is_empty()
            || !self.duties.to_report.is_empty()
            || !self.duties.awaiting.is_empty())
    }

    /// Whether a challenge against us in this pool is open (among the last
    /// [`RECENT_CHALLENGES`] ids): we keep serving our evidence (a sparse payload's
    /// residuals, which only we hold) until it is decided.
    fn accused_in_open_challenge(&mut self) -> Result<bool> {
        let next = self.block_on(self.chain.next_challenge_id())?;
        let (mut open, from) = std::mem::take(&mut self.duties.against_us);
        // New ids once (at most the last RECENT_CHALLENGES), then only those against us.
        for id in from.max(next.saturating_sub(RECENT_CHALLENGES))..next {
            if let Some(c) = self.block_on(self.chain.challenge(id))? {
                if c.pool_id == self.pool && c.accused == self.account {
                    open.insert(id);
                }
            }
        }
        let mut still = BTreeSet::new();
        for id in open {
            if self.block_on(self.chain.challenge(id))?.is_some() {
                still.insert(id);
            }
        }
        let any = !still.is_empty();
        self.duties.against_us = (still, next);
        Ok(any)
    }

    /// Last block in which a challenge of final round `f` can be opened (the protocol's
    /// timeline; only the pool's challenge window matters for it).
    fn challenges_until(&self, f: &FinalCheckpoint) -> u64 {
        Timeline::for_pool(0, u64::from(self.challenge_window), 0, 0)
            .challenges_until(u64::from(f.finalized_at))
    }

    /// Verifies every kept round that has closed; forgets the evidence of settled rounds.
    fn verify_closed_rounds(&mut self) -> Result<()> {
        let (pool, rounds) = (self.pool, self.duties.to_verify.clone());
        for round in rounds {
            if let Some(f) = self.block_on(self.chain.final_checkpoint(pool, round))? {
                // A failing round (no parent checkpoint, RPC) is retried a few passes, then
                // given up: it must not hold the evidence of later rounds forever.
                match self.verify_round(round, &f) {
                    Ok(true) => {}
                    // Residuals still awaited: asked again next pass (no failed try).
                    Ok(false) => continue,
                    Err(e) => {
                        let n = self.duties.tries.entry(round).or_insert(0);
                        *n += 1;
                        tracing::warn!(round, tries = *n, "verification failed: {e:#}");
                        if *n < MAX_TRIES {
                            continue;
                        }
                    }
                }
                self.duties.to_verify.remove(&round);
                self.duties.tries.remove(&round);
                self.duties.verified.retain(|(r, _)| *r != round);
            } else if self.block_on(self.chain.voided(pool, round))? {
                self.duties.to_verify.remove(&round);
            }
        }
        // A round not opened yet has no snapshot either: our trace of an overlapped round
        // computed ahead is not to be forgotten — unless the pool is over (completed or
        // cancelled), when that round will never open.
        let info = self.pool_info()?;
        let over = matches!(info.status, PoolStatus::Completed | PoolStatus::Cancelled);
        let sparse = self.a.recipe.outer.wire.sparse();
        let rounds = self.retained.rounds();
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
                .block_on(self.chain.round_snapshot(pool, round))?
                .is_none()
                || self.block_on(self.chain.voided(pool, round))?;
            done.insert(round, closed && !self.duties.awaiting.contains(&round));
        }
        for &round in &rounds {
            // A sparse round's payloads name the residuals the next round's payloads must
            // carry in: kept while that round can still be verified or judged.
            let next_open = sparse && done.get(&(round + 1)) == Some(&false);
            if done[&round] && !next_open {
                self.drop_trace(round);
                self.retained.forget(round);
                self.duties.replays.retain(|(r, _), _| *r != round);
                self.duties.unserved.retain(|(r, _, _), _| *r != round);
            }
        }
        Ok(())
    }

    /// Replays the sampled contributors of final `round` and challenges the dishonest ones.
    /// Returns `false` while a sampled sparse contribution's residuals are awaited (the round
    /// is verified again next pass, the contributions checked already are not).
    fn verify_round(&mut self, round: u32, f: &FinalCheckpoint) -> Result<bool> {
        let pool = self.pool;
        let now = self.block_on(self.chain.finalized_number())?;
        let until = self.challenges_until(f);
        if now > until {
            self.metrics.emit(&json!({
                "event": "verify_skipped", "round": round,
                "detail": format!("challenge window closed at block {until}"),
            }))?;
            return Ok(true);
        }
        let Some(snapshot) = self.block_on(self.chain.round_snapshot(pool, round))? else {
            return Ok(true);
        };
        // The draw's seed includes the hash of the block that made the round final: nobody
        // knows it when announcing, so an accused cannot grind its payload (or announce last)
        // to escape every verifier's sample.
        let seed = self
            .block_on(self.chain.block_hash(u64::from(f.finalized_at)))?
            .ok_or_else(|| anyhow!("block {} is unknown", f.finalized_at))?;
        let rate = self
            .a
            .verify_rate
            .unwrap_or_else(|| default_sample_rate(f.contributors.len()));
        let segment_count = self.a.recipe.segment_boundaries(self.inner_steps).len() as u32 - 1;
        let mut checks = Vec::new();
        for who in &f.contributors {
            if *who == self.account {
                continue;
            }
            let Some(member) = snapshot.iter().find(|p| p.who == *who).map(|p| p.index) else {
                continue;
            };
            if !sampled(&f.hash, &seed, &self.account.0, round, member, rate) {
                continue;
            }
            let segments = sampled_segments(
                &f.hash,
                &seed,
                &self.account.0,
                round,
                member,
                segment_count,
                self.a.verify_segments,
            );
            checks.push((*who, member, segments));
        }
        // Checks whose states all arrived go first: the whole replays of members that did
        // not serve theirs come last.
        let _ = std::fs::remove_dir_all(self.retained.fetched_dir(round));
        let states = self.prefetch_trace_states(round, &checks);
        checks.sort_by_key(|(_, member, segments)| {
            let trace = self
                .retained
                .payload(round, *member)
                .and_then(|p| split_trace(&p).ok().and_then(|(t, _)| t));
            !trace.is_some_and(|t| {
                needed_states(t.len(), segments)
                    .iter()
                    .all(|j| states.contains_key(&t[*j]))
            })
        });
        let mut unserved = Vec::new();
        for (who, member, segments) in &checks {
            let (who, member) = (who, *member);
            if self.duties.verified.contains(&(round, member)) {
                continue;
            }
            let verifying = Some((&segments[..], &states));
            let rep = match self.replay(round, member, &f.parent, verifying, until) {
                Ok(Some(rep)) => rep,
                Ok(None) => continue,
                Err(e) if e.is::<ResidualsUnserved>() => {
                    unserved.push(member);
                    continue;
                }
                Err(e) => {
                    tracing::warn!(round, member, "replay failed: {e:#}");
                    continue;
                }
            };
            self.metrics.emit(&json!({
                "event": "verified", "round": round, "member": member, "account": who.to_string(),
                "distance": rep.distance, "tolerance": REPLAY_TOLERANCE, "honest": rep.honest,
                "replay_secs": rep.secs, "segments": rep.segments,
                "whole_replay": rep.whole.map(WholeReplay::as_str),
            }))?;
            if !rep.honest {
                self.duties
                    .to_challenge
                    .insert((round, member), (*who, rep.distance));
            }
            self.duties.verified.insert((round, member));
        }
        // Fetched states are no evidence: only what the accused signed is.
        let _ = std::fs::remove_dir_all(self.retained.fetched_dir(round));
        if !unserved.is_empty() {
            // Asked again next pass (the round stays to verify); the others are not checked
            // again.
            tracing::info!(round, ?unserved, "residuals not served yet: asking again");
            return Ok(false);
        }
        Ok(true)
    }

    /// `member`'s error-feedback residuals for its sparse payload `claimed` of `round`
    /// ([`Residuals`]; empty for a dense codec): its `carried_in` checked against the rule
    /// ([`expected_carried_in`], from the final included set of round − 1 and the payload of
    /// round − 1 we kept), both residuals taken from `fetched` (a verifier's prefetch,
    /// [`Trainer::prefetch_trace_states`]) or else fetched from their author (only it keeps
    /// them), checked against their hashes.
    ///
    /// # Errors
    /// Chain RPC failures.
    fn residuals_of(
        &self,
        round: u32,
        member: u32,
        claimed: &[u8],
        fetched: Option<&FetchedStates>,
    ) -> Result<std::result::Result<Residuals, Unusable>> {
        if !self.a.recipe.outer.wire.sparse() {
            return Ok(Ok(Residuals::default()));
        }
        let Ok(Some(c)) = commitments_of(member, claimed) else {
            return Ok(Err(Unusable::Dishonest));
        };
        let included_prev = self.final_included(round.saturating_sub(1))?;
        match expected_carried_in(&self.retained, round, member, &included_prev) {
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
    fn peer_of(&self, member: u32) -> Option<synod_p2p::PeerId> {
        let bytes = match self.members.iter().find(|m| m.record.index == member) {
            Some(m) => m.record.peer_id.clone(),
            None => {
                self.block_on(self.chain.former_member(self.pool, member))
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
    fn fetch_state(&self, member: u32, hash: [u8; 32]) -> Option<Vec<u8>> {
        let peer = self.peer_of(member)?;
        let max = self.recipe.max_residual_bytes;
        let within = STATE_FETCH + Duration::from_secs(max / 10_000_000);
        // The timer is made inside the runtime (tokio's timers need its context).
        let fetched = self.rt.block_on(async {
            tokio::time::timeout(within, self.client.fetch_checkpoint(peer, hash, max)).await
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

    /// The trace states that the segment checks `checks` ((account, member, drawn segments))
    /// of `round` need, fetched from their authors side by side ([`prefetch_states`]) into
    /// [`Retained::fetched_dir`](crate::pool::verify::Retained::fetched_dir): each state gets
    /// at most [`STATE_FETCH`] plus its transfer at 10 MB/s, the whole round twice that plus
    /// [`CHECK_BUDGET`], however many authors stall. Contributions already replayed whole, not
    /// kept, or without a trace of this pool's segments need nothing. Returns each received
    /// state's file by blake3.
    fn prefetch_trace_states(
        &self,
        round: u32,
        checks: &[(AccountId, u32, Vec<u32>)],
    ) -> FetchedStates {
        let boundaries = self.a.recipe.segment_boundaries(self.inner_steps).len();
        let mut asked = Vec::new();
        for (_, member, segments) in checks {
            if self.duties.replays.contains_key(&(round, *member))
                || self.duties.verified.contains(&(round, *member))
            {
                continue;
            }
            // Only the accused serves its states (nobody else keeps them).
            let (Some(peer), Some(claimed)) =
                (self.peer_of(*member), self.retained.payload(round, *member))
            else {
                continue;
            };
            asked.push((peer, claimed, segments.clone()));
        }
        let sparse = self.a.recipe.outer.wire.sparse();
        let wanted = wanted_states(asked, boundaries, sparse);
        let fetches: u64 = wanted.iter().map(|(_, h)| h.len() as u64).sum();
        let dir = self.retained.fetched_dir(round);
        if wanted.is_empty() {
            return FetchedStates::new();
        }
        if let Err(e) = std::fs::create_dir_all(&dir) {
            tracing::warn!(round, "cannot keep fetched trace states: {e}");
            return FetchedStates::new();
        }
        let (client, max) = (self.client.clone(), self.recipe.max_state_bytes);
        let per_state = STATE_FETCH + Duration::from_secs(max / 10_000_000);
        // The authors share our link: the round's wait grows with everything it fetches.
        let within = 2 * per_state + CHECK_BUDGET + Duration::from_secs(fetches * max / 10_000_000);
        self.rt.block_on(prefetch_states(
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
    /// trace states fetched beforehand, [`Trainer::prefetch_trace_states`]); `None`: replay
    /// the whole inner phase, as jurors do. Whole replays are cached (a verifier drawn as juror
    /// replays once).
    fn replay(
        &mut self,
        round: u32,
        member: u32,
        parent: &[u8; 32],
        segments: Option<(&[u32], &FetchedStates)>,
        deadline: u64,
    ) -> Result<Option<Replay>> {
        if let Some(r) = self.duties.replays.get(&(round, member)) {
            return Ok(Some(*r));
        }
        let Some(claimed) = self.retained.payload(round, member) else {
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
                    let now = self.block_on(self.chain.finalized_number())?;
                    let key = (round, member, deadline);
                    let first = *self.duties.unserved.entry(key).or_insert(now);
                    if !residual_deadline_passed(first, now, deadline) {
                        return Err(ResidualsUnserved { round, member }.into());
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
        let parent = &self.inner_start(round, *parent)?;
        let parent = match &self.duties.parent {
            Some((h, bytes)) if h == parent => bytes.clone(),
            _ => {
                let peers = self.peers();
                let bytes = Arc::new(self.block_on(self.store.get_or_fetch(
                    &self.client,
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
                &self.recipe,
                &self.a.recipe,
                &parent,
                round,
                member,
                &claimed,
                &residuals,
            )?,
            Some((segments, states)) => self.replayer.check_segments(
                &self.recipe,
                &self.a.recipe,
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

    /// Opens the challenges of dishonest contributions found so far. Another challenge being
    /// open does not stop ours (an accomplice's sham challenge must not shield the cheater);
    /// a contribution already found guilty, or out of its challenge window, is dropped; one
    /// that cannot be opened yet (`MaxChallengesPerContribution` open) is retried next pass.
    fn open_pending_challenges(&mut self) -> Result<()> {
        let pool = self.pool;
        for ((round, member), (who, distance)) in self.duties.to_challenge.clone() {
            let verdict = self.block_on(self.chain.verdict(pool, round, &who))?;
            let f = self.block_on(self.chain.final_checkpoint(pool, round))?;
            let now = self.block_on(self.chain.finalized_number())?;
            let (outcome, done) = if verdict == Some(Verdict::Guilty) {
                ("not opened: already convicted".to_string(), true)
            } else if f.is_none_or(|f| now > self.challenges_until(&f)) {
                ("not opened: challenge window closed".to_string(), true)
            } else if let Some(evidence) = self.retained.announcement(round, member) {
                let call = calls::open_challenge(pool, round, who, evidence)?;
                match self.block_on(self.chain.submit(&call, &self.signer)) {
                    Ok(_) => ("opened".to_string(), true),
                    Err(e) if e.is_module("Challenges", "AlreadyChallenged") => (
                        "retrying: the contribution's challenge slots are full".into(),
                        false,
                    ),
                    Err(e) if e.is_module("Challenges", "AlreadyConvicted") => {
                        ("not opened: already convicted".to_string(), true)
                    }
                    Err(e) => (format!("failed: {e}"), true),
                }
            } else {
                ("not opened: no signed announcement kept".to_string(), true)
            };
            if done {
                self.duties.to_challenge.remove(&(round, member));
            }
            tracing::warn!(round, member, distance, "challenge: {outcome}");
            self.metrics.emit(&json!({
                "event": "challenge", "round": round, "member": member, "account": who.to_string(),
                "distance": distance, "outcome": outcome,
            }))?;
        }
        Ok(())
    }

    /// Reports on-chain every equivocation the network saw (two payloads signed by one member
    /// for one round): `Challenges::report_equivocation` slashes it at once. The accused's
    /// account is read from the round's snapshot (a member that left after it opened is still
    /// in it). A report is submitted once the round's snapshot exists and only if nobody
    /// reported it yet; it is dropped when the chain refuses it (the call failed in a block),
    /// when the snapshot is gone (settled round, or voided and no longer slashable) or was never
    /// opened while the pool trains on, and after [`MAX_TRIES`] passes that failed otherwise
    /// (RPC). A voided round stays reportable: the equivocation may be what voided it.
    fn report_equivocations(&mut self) -> Result<()> {
        for (key, proof) in self.client.take_equivocations() {
            self.duties.to_report.entry(key).or_insert((proof, 0));
        }
        for ((round, member), (proof, tries)) in self.duties.to_report.clone() {
            let (outcome, done, who) = match self.report_equivocation(round, member, &proof) {
                // Waiting for the round to open (no accused yet) costs no try.
                Ok(Some((outcome, done, who))) => {
                    let out_of_tries = who.is_some() && tries + 1 >= MAX_TRIES;
                    (outcome, done || out_of_tries, who)
                }
                Ok(None) => {
                    self.duties.to_report.remove(&(round, member));
                    continue;
                }
                Err(e) => (format!("failed: {e:#}"), tries + 1 >= MAX_TRIES, None),
            };
            if done {
                self.duties.to_report.remove(&(round, member));
            } else if let Some(entry) = self.duties.to_report.get_mut(&(round, member)) {
                entry.1 += 1;
            }
            tracing::warn!(round, member, "equivocation: {outcome}");
            self.metrics.emit(&json!({
                "event": "equivocation", "round": round, "member": member,
                "account": who.map(|w| w.to_string()), "outcome": outcome,
            }))?;
        }
        Ok(())
    }

    /// One pass of [`Trainer::report_equivocations`] for member `member`'s equivocation in
    /// `round`: `None` to drop it silently (the round is not kept, or the member is not in it);
    /// else (outcome, whether it is done, the accused).
    #[allow(clippy::type_complexity)]
    fn report_equivocation(
        &self,
        round: u32,
        member: u32,
        proof: &Equivocation,
    ) -> Result<Option<(String, bool, Option<AccountId>)>> {
        let (chain, pool) = (&self.chain, self.pool);
        let Some(snapshot) = self.block_on(chain.round_snapshot(pool, round))? else {
            // Not opened yet (a round ahead of the chain): kept while the pool trains on.
            let ahead = self
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
        if self.block_on(chain.voided(pool, round))? {
            let now = self.block_on(chain.finalized_number())?;
            let kept = self.block_on(chain.kept_snapshots(pool))?;
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
        let (outcome, done) = match self.block_on(chain.submit(&call, &self.signer)) {
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

    /// Votes on every drawn jury we sit on; records in `awaiting` the rounds of our pool's
    /// challenges that still wait for a draw or our vote.
    fn jury_duty(&mut self) -> Result<()> {
        if !self.a.juror {
            return Ok(());
        }
        let next = self.block_on(self.chain.next_challenge_id())?;
        let mut awaiting = BTreeSet::new();
        for id in self.duties.cursor..next {
            if self.duties.handled.contains(&id) {
                continue;
            }
            match self.block_on(self.chain.challenge(id))? {
                None => {
                    self.duties.handled.insert(id);
                }
                Some(c) if c.jury.is_empty() => {
                    if c.pool_id == self.pool {
                        awaiting.insert(c.round);
                    }
                }
                Some(c) => {
                    if c.jury.iter().any(|(j, _)| *j == self.account)
                        && self
                            .block_on(self.chain.vote_of(id, &self.account))?
                            .is_none()
                    {
                        // A failed vote is retried next pass; it must not hold up the others.
                        if let Err(e) = self.judge(id, &c) {
                            tracing::warn!(challenge = id, "judging failed: {e:#}");
                            awaiting.insert(c.round);
                            continue;
                        }
                    }
                    self.duties.handled.insert(id);
                }
            }
        }
        while self.duties.handled.remove(&self.duties.cursor) {
            self.duties.cursor += 1;
        }
        self.duties.awaiting = awaiting;
        Ok(())
    }

    /// Replays the contribution disputed by challenge `id` and votes.
    fn judge(&mut self, id: u32, c: &ChallengeInfo) -> Result<()> {
        let abstain = |t: &mut Self, why: String| -> Result<()> {
            tracing::warn!(challenge = id, "cannot judge, not voting: {why}");
            t.metrics.emit(
                &json!({"event": "vote", "challenge": id, "round": c.round, "abstained": why}),
            )
        };
        if c.pool_id != self.pool {
            return abstain(
                self,
                format!("pool {} is not the pool this trainer replays", c.pool_id),
            );
        }
        // The accused's index from the round's snapshot (kept until settlement, hence while a
        // challenge can exist), then its own kept payload: a copier shares its victim's digest.
        let snapshot = self.block_on(self.chain.round_snapshot(self.pool, c.round))?;
        let Some(member) =
            snapshot.and_then(|s| s.iter().find(|p| p.who == c.accused).map(|p| p.index))
        else {
            return abstain(self, "the accused is not in the round's snapshot".into());
        };
        let Some(kept) = self.retained.payload(c.round, member) else {
            return abstain(self, "no payload of the accused was kept".into());
        };
        // Two digests under the accused's key for one round convict without a replay (an
        // accomplice's sham challenge with a never-gossiped announcement looks like that).
        let parent = match self.block_on(self.chain.final_checkpoint(self.pool, c.round))? {
            Some(f) => f.parent,
            None => return Err(anyhow!("round {} is not final", c.round)),
        };
        let (round, digest, expires) = (c.round, c.payload_digest, u64::from(c.expires_at));
        if self.a.recipe.outer.wire.sparse() {
            let included_prev = self.final_included(round.saturating_sub(1))?;
            if expected_carried_in(&self.retained, round, member, &included_prev).is_none() {
                return abstain(
                    self,
                    "the accused's payload of the previous round was not kept: the residual it \
                     must carry in is unknown"
                        .into(),
                );
            }
        }
        let (guilty, distance) = juror_vote(&kept, &digest, |_| {
            self.replay(round, member, &parent, None, expires)?
                .ok_or_else(|| anyhow!("payload of member {member} vanished"))
        })?;
        match self.block_on(self.chain.submit(&calls::vote(id, guilty), &self.signer)) {
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
        self.metrics.emit(&json!({
            "event": "vote", "challenge": id, "round": c.round, "member": member,
            "accused": c.accused.to_string(), "distance": distance, "guilty": guilty,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::residual_deadline_passed;

    #[test]
    fn an_unserved_residual_is_waited_for_half_the_time_left_then_counts_as_withheld() {
        // First missed at block 100 with a verdict due at 140: asked again until block 120.
        assert!(!residual_deadline_passed(100, 100, 140));
        assert!(!residual_deadline_passed(100, 119, 140));
        assert!(residual_deadline_passed(100, 120, 140));
        // Missed with no time left (or past the deadline): no wait.
        assert!(residual_deadline_passed(100, 100, 100));
        assert!(residual_deadline_passed(100, 100, 90));
    }
}
