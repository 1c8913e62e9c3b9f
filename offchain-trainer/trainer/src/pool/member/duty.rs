//! A member's verification duties (ARCHITECTURE.md, step 7), run between rounds and after the
//! last one: replay a sample of the other contributors of every final round and challenge the
//! ones outside the tolerance; as a registered juror, replay disputed contributions and vote.
//!
//! Nothing here ends `run`: a failed read, replay or extrinsic is logged and retried at the
//! next call. The evidence of a round is deleted once the chain has pruned its snapshot
//! (settled: nothing can challenge it any more) or voided it.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use serde_json::json;
use synod_chain::calls;
use synod_chain::types::{AccountId, ChallengeInfo, FinalCheckpoint, Verdict};
use synod_diloco::verify::{default_sample_rate, sampled, REPLAY_TOLERANCE};
use synod_protocol::Timeline;

use super::Trainer;
use crate::pool::verify::replay::Replay;

/// What a member tracks of its duties.
#[derive(Default)]
pub(super) struct Duties {
    /// Rounds whose evidence is kept and that are not verified yet.
    pub to_verify: BTreeSet<u32>,
    /// Replays done: (round, member) → result (a juror reuses its verifier's replay).
    replays: std::collections::BTreeMap<(u32, u32), Replay>,
    /// Lowest challenge id not handled yet.
    cursor: u32,
    /// Challenge ids at or above `cursor` already handled (resolved, voted, not ours).
    handled: BTreeSet<u32>,
}

impl Trainer<'_> {
    /// Whether this member verifies or judges at all.
    fn verifies(&self) -> bool {
        self.a.verify_rate != Some(0.0) || self.a.juror
    }

    /// One pass of every duty; never fails (problems are logged and retried next time).
    pub(super) fn duties(&mut self) {
        if let Err(e) = self.verify_closed_rounds() {
            tracing::warn!("verification: {e:#}");
        }
        if let Err(e) = self.jury_duty() {
            tracing::warn!("jury duty: {e:#}");
        }
    }

    /// After the pool's last round: keeps doing the duties until the last final round can no
    /// longer be challenged and no challenge of this pool waits for a draw or our vote (at
    /// most `max_wait`).
    pub(super) fn finish_duties(&mut self, max_wait: Duration) -> Result<()> {
        if !self.verifies() {
            return Ok(());
        }
        let start = Instant::now();
        loop {
            self.duties();
            let now = self.block_on(self.chain.finalized_number())?;
            let (last, _) = self.last_final()?;
            let until = match self.block_on(self.chain.final_checkpoint(self.pool, last))? {
                // Only the challenge window matters here; the jury timings are the runtime's.
                Some(f) => self.challenges_until(&f),
                None => 0,
            };
            let pending = self.jury_pending()?;
            if now > until && self.duties.to_verify.is_empty() && !pending {
                return Ok(());
            }
            if start.elapsed() > max_wait {
                tracing::warn!("stopping duties after {max_wait:?} with work left");
                return Ok(());
            }
            std::thread::sleep(Duration::from_secs(2));
        }
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
                self.verify_round(round, &f)?;
                self.duties.to_verify.remove(&round);
            } else if self.block_on(self.chain.voided(pool, round))? {
                self.duties.to_verify.remove(&round);
            }
        }
        for round in self.retained.rounds() {
            if self.duties.to_verify.contains(&round) {
                continue;
            }
            let closed = self
                .block_on(self.chain.round_snapshot(pool, round))?
                .is_none();
            if closed && !self.jury_needs(round)? {
                self.retained.forget(round);
                self.duties.replays.retain(|(r, _), _| *r != round);
            }
        }
        Ok(())
    }

    /// Replays the sampled contributors of final `round` and challenges the dishonest ones.
    fn verify_round(&mut self, round: u32, f: &FinalCheckpoint) -> Result<()> {
        let pool = self.pool;
        let now = self.block_on(self.chain.finalized_number())?;
        let until = self.challenges_until(f);
        if now > until {
            return self.metrics.emit(&json!({
                "event": "verify_skipped", "round": round,
                "detail": format!("challenge window closed at block {until}"),
            }));
        }
        let Some(snapshot) = self.block_on(self.chain.round_snapshot(pool, round))? else {
            return Ok(());
        };
        let rate = self
            .a
            .verify_rate
            .unwrap_or_else(|| default_sample_rate(f.contributors.len()));
        for who in &f.contributors {
            if *who == self.account {
                continue;
            }
            let Some(member) = snapshot.iter().find(|p| p.who == *who).map(|p| p.index) else {
                continue;
            };
            if !sampled(&f.hash, &self.account.0, round, member, rate) {
                continue;
            }
            let Some(rep) = self.replay(round, member, &f.parent)? else {
                continue;
            };
            self.metrics.emit(&json!({
                "event": "verified", "round": round, "member": member, "account": who.to_string(),
                "distance": rep.distance, "tolerance": REPLAY_TOLERANCE, "honest": rep.honest,
                "replay_secs": rep.secs,
            }))?;
            if !rep.honest {
                self.challenge(round, member, who, &rep)?;
            }
        }
        Ok(())
    }

    /// `member`'s replay of `round` (cached), or `None` when its payload was not kept.
    fn replay(&mut self, round: u32, member: u32, parent: &[u8; 32]) -> Result<Option<Replay>> {
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
        let peers = self.peers();
        let parent = self.block_on(self.store.get_or_fetch(
            &self.client,
            &peers,
            *parent,
            Duration::from_secs(120),
        ))?;
        let rep = self.replayer.check(
            &self.recipe,
            &self.a.recipe,
            &parent,
            round,
            member,
            &claimed,
        )?;
        tracing::info!(
            round,
            member,
            distance = rep.distance,
            honest = rep.honest,
            secs = rep.secs,
            "replayed"
        );
        self.duties.replays.insert((round, member), rep);
        Ok(Some(rep))
    }

    /// Opens a challenge against `who`'s contribution to `round` unless one is open or it was
    /// already found guilty.
    fn challenge(&mut self, round: u32, member: u32, who: &AccountId, rep: &Replay) -> Result<()> {
        let pool = self.pool;
        let verdict = self.block_on(self.chain.verdict(pool, round, who))?;
        let open = self.block_on(self.chain.open_against(pool, round, who))?;
        let outcome = if verdict == Some(Verdict::Guilty) || open > 0 {
            format!("not opened: {open} open, verdict {verdict:?}")
        } else if let Some(evidence) = self.retained.announcement(round, member) {
            let call = calls::open_challenge(pool, round, *who, evidence)?;
            match self.block_on(self.chain.submit(&call, &self.signer)) {
                Ok(_) => "opened".to_string(),
                Err(e) => format!("failed: {e}"),
            }
        } else {
            "not opened: no signed announcement kept".to_string()
        };
        tracing::warn!(
            round,
            member,
            distance = rep.distance,
            "challenge: {outcome}"
        );
        self.metrics.emit(&json!({
            "event": "challenge", "round": round, "member": member, "account": who.to_string(),
            "distance": rep.distance, "outcome": outcome,
        }))
    }

    /// Votes on every drawn jury we sit on.
    fn jury_duty(&mut self) -> Result<()> {
        if !self.a.juror {
            return Ok(());
        }
        let next = self.block_on(self.chain.next_challenge_id())?;
        for id in self.duties.cursor..next {
            if self.duties.handled.contains(&id) {
                continue;
            }
            match self.block_on(self.chain.challenge(id))? {
                None => {
                    self.duties.handled.insert(id);
                }
                Some(c) if c.jury.is_empty() => {}
                Some(c) => {
                    if c.jury.iter().any(|(j, _)| *j == self.account)
                        && self
                            .block_on(self.chain.vote_of(id, &self.account))?
                            .is_none()
                    {
                        self.judge(id, &c)?;
                    }
                    self.duties.handled.insert(id);
                }
            }
        }
        while self.duties.handled.remove(&self.duties.cursor) {
            self.duties.cursor += 1;
        }
        Ok(())
    }

    /// Whether a challenge of our pool about `round` still waits for its draw.
    fn jury_needs(&self, round: u32) -> Result<bool> {
        Ok(self.open_challenges()?.iter().any(|c| c.round == round))
    }

    /// Whether a challenge of our pool still waits for its draw or for our vote.
    fn jury_pending(&self) -> Result<bool> {
        if !self.a.juror {
            return Ok(false);
        }
        Ok(!self.open_challenges()?.is_empty())
    }

    /// Open challenges of our pool not handled yet.
    fn open_challenges(&self) -> Result<Vec<ChallengeInfo>> {
        let next = self.block_on(self.chain.next_challenge_id())?;
        let mut out = Vec::new();
        for id in self.duties.cursor..next {
            if self.duties.handled.contains(&id) {
                continue;
            }
            if let Some(c) = self.block_on(self.chain.challenge(id))? {
                if c.pool_id == self.pool {
                    out.push(c);
                }
            }
        }
        Ok(out)
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
        if self
            .retained
            .payload_with_digest(c.round, member, &c.payload_digest)
            .is_none()
        {
            return abstain(
                self,
                "the disputed payload is not among the kept ones".into(),
            );
        }
        let f = self
            .block_on(self.chain.final_checkpoint(self.pool, c.round))?
            .ok_or_else(|| anyhow!("round {} is not final", c.round))?;
        let rep = self
            .replay(c.round, member, &f.parent)?
            .ok_or_else(|| anyhow!("payload of member {member} vanished"))?;
        let guilty = !rep.honest;
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
            distance = rep.distance,
            guilty,
            "voted"
        );
        self.metrics.emit(&json!({
            "event": "vote", "challenge": id, "round": c.round, "member": member,
            "accused": c.accused.to_string(), "distance": rep.distance, "guilty": guilty,
        }))
    }
}
