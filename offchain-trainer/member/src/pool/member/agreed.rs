//! A split round: the chain fixed an included set other than ours (`synod_protocol::agreement`);
//! we fetch the payloads we lack, aggregate exactly that set and commit once more.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use synod_diloco::Contribution;
use synod_p2p::PeerId;
use synod_protocol::Timeline;

use super::commit::{submit_commit, CommitOutcome, NOT_RECORDED};
use super::ctx::Ctx;
use super::settle::Pending;
use super::Trainer;
use crate::event::TrainerEvent;
use crate::pool::store::{first_deliveries, HEDGE};

/// How long we try to fetch the payloads of the agreed set we lack, all of them together, at
/// least, in seconds: up to the open round's deadline when that is later
/// ([`fetch_secs`]). Each was attested by at least one honest member, who holds and serves it.
const FETCH_SECS: u64 = 60;

/// Blocks kept back before the round's deadline for our second commit to be included and for
/// the finality lag of the block we read the deadline at.
const COMMIT_MARGIN_BLOCKS: u64 = 3;

/// Whether the late-commit window of a round final at block `finalized_at` (the pool's
/// challenge window, `challenge_window` blocks) leaves no time for one more commit at finalized
/// block `now`: [`COMMIT_MARGIN_BLOCKS`] or fewer blocks are left. A commit after the window is
/// not paid, and our attestation records us as present without it (`duty/attest.rs`).
pub(super) fn late_window_closing(finalized_at: u64, challenge_window: u32, now: u64) -> bool {
    let until =
        Timeline::for_pool(0, u64::from(challenge_window), 0, 0).late_commits_until(finalized_at);
    now.saturating_add(COMMIT_MARGIN_BLOCKS) >= until
}

/// Resolves once `round` closed at the finalized head so that a commit over `agreed` can no
/// longer count: voided, final over another included set, or final over `agreed` with its
/// late-commit window closing ([`late_window_closing`]). Read every block; a failed read
/// counts as still open.
async fn round_closes(ctx: &Ctx, round: u32, agreed: &[u32]) {
    let (chain, pool) = (&ctx.chain, ctx.pool);
    let block = Duration::from_secs_f64(ctx.block_secs.max(0.1));
    loop {
        tokio::time::sleep(block).await;
        let Ok(open) = chain.open_round(pool).await else {
            continue;
        };
        if open.is_some_and(|o| o.round == round) {
            continue;
        }
        match chain.final_checkpoint(pool, round).await {
            Ok(Some(f)) if f.included == agreed => {
                let at = u64::from(f.finalized_at);
                match chain.finalized_number().await {
                    Ok(now) if late_window_closing(at, ctx.challenge_window, now) => return,
                    _ => {}
                }
            }
            Ok(Some(_)) => return,
            Ok(None) if chain.voided(pool, round).await.unwrap_or(false) => return,
            Ok(None) | Err(_) => {}
        }
    }
}

/// Seconds to fetch the agreed payloads we lack for an open round whose deadline is block
/// `deadline`, at finalized block `finalized`, with blocks of `block_secs` seconds: until
/// [`COMMIT_MARGIN_BLOCKS`] before the deadline, and at least [`FETCH_SECS`]. A commit off the
/// agreed set is leaked at a void when the set left `RecommitPeriod` blocks to commit over it
/// (`synod_protocol::leak::agreed_in_time`), so we keep fetching as long as a commit can still
/// count, not a fixed time.
fn fetch_secs(deadline: u64, finalized: u64, block_secs: f64) -> u64 {
    let blocks = deadline.saturating_sub(finalized.saturating_add(COMMIT_MARGIN_BLOCKS));
    ((blocks as f64 * block_secs.max(0.0)) as u64).max(FETCH_SECS)
}

impl Trainer {
    /// Recomputes round `p.round` over `agreed` from θ_{round−1} (`p.parent`) with the round's
    /// stakes, stores and serves the checkpoint, keeps (and relays) the payloads fetched for
    /// it, and commits `(hash, agreed)`; returns the new hash. `expect`: the final hash when
    /// the round is already final over `agreed` (we then commit only that hash, late).
    ///
    /// # Errors
    /// If θ_{round−1} or our own payload is not kept, the payloads of `agreed` we lack cannot
    /// all be fetched in time ([`fetch_secs`]; an announcement unseen, or no peer serves it), the
    /// aggregate differs from `expect`, or the commit fails.
    pub(super) fn recommit(
        &mut self,
        p: &Pending,
        agreed: &[u32],
        expect: Option<[u8; 32]>,
    ) -> Result<[u8; 32]> {
        let round = p.round;
        // The round's own participants (a member that left since is in its snapshot), so that
        // its payload can still be fetched and verified.
        self.refresh_members(round)?;
        let mut kept = BTreeMap::new();
        let mut missing = Vec::new();
        for &j in agreed {
            let payload = if j == self.ctx.me {
                self.ctx.retained.own(round, j, &p.start)
            } else {
                self.ctx.retained.payload(round, j)
            };
            match payload {
                Some(bytes) => {
                    kept.insert(j, Arc::new(bytes));
                }
                None if j == self.ctx.me => bail!("our own payload of round {round} is not kept"),
                None => missing.push(j),
            }
        }
        // An open round: fetch until shortly before its deadline; a final one (a late commit of
        // the final pair): for FETCH_SECS. Either ends when a commit can no longer count
        // ([`round_closes`]).
        let secs = match expect {
            Some(_) => FETCH_SECS,
            None => {
                let chain = &self.ctx.chain;
                let open = self.ctx.block_on(chain.open_round(self.ctx.pool))?;
                let now = self.ctx.block_on(chain.finalized_number())?;
                open.filter(|o| o.round == round).map_or(FETCH_SECS, |o| {
                    fetch_secs(u64::from(o.deadline), now, self.ctx.block_secs)
                })
            }
        };
        kept.extend(self.fetch_agreed(round, &missing, Duration::from_secs(secs), agreed)?);
        let contributions: Vec<Contribution> = agreed
            .iter()
            .filter_map(|j| {
                kept.get(j).map(|payload| Contribution {
                    member: *j,
                    payload: payload.clone(),
                })
            })
            .collect();
        let fetched = missing;
        let parent = self
            .ctx
            .store
            .get(&p.parent)
            .ok_or_else(|| anyhow!("θ of round {} is not kept", round - 1))?;
        let mut state = self.ctx.a.recipe.outer.restore(&parent, round - 1)?;
        let rule = self.ctx.a.recipe.outer.aggregation().rule();
        let outcome = state.apply(&contributions, rule.aggregator(Some(&p.stakes)).as_ref())?;
        if outcome.included != agreed {
            bail!(
                "a payload of the agreed set does not decode (aggregated {:?} of {agreed:?})",
                outcome.included
            );
        }
        if let Some(h) = expect.filter(|h| *h != outcome.hash) {
            bail!(
                "our aggregate of the final set is {}, not the final {}",
                synod_checkpoint::hex(&outcome.hash),
                synod_checkpoint::hex(&h)
            );
        }
        self.ctx.store.put(&outcome.checkpoint)?;
        self.ctx.block_on(
            self.ctx
                .client
                .serve_checkpoint(Arc::new(outcome.checkpoint.clone())),
        )?;
        let ctx = &self.ctx;
        match ctx.block_on(submit_commit(
            &ctx.chain,
            &ctx.signer,
            ctx.pool,
            round,
            outcome.hash,
            agreed.to_vec(),
        )) {
            CommitOutcome::Recorded => {}
            CommitOutcome::NotRecorded => bail!("commit over the agreed set: {NOT_RECORDED}"),
            CommitOutcome::AlreadyRecorded(e)
            | CommitOutcome::NotYet(e)
            | CommitOutcome::Refused(e)
            | CommitOutcome::Failed(e) => {
                return Err(anyhow::Error::new(e).context("commit over the agreed set"))
            }
        }
        self.metrics.emit(&TrainerEvent::Recommit {
            agreed: agreed.to_vec(),
            error: None,
            fetched: Some(fetched),
            hash: Some(synod_checkpoint::hex(&outcome.hash)),
            outcome: "ok".into(),
            round,
        })?;
        Ok(outcome.hash)
    }

    /// Fetches the payloads of `round` by the members `missing` (announced on gossip; we left
    /// them out), each from its author or any other member, relays rotated by author and by
    /// us as the exchange rotates them, all at once and hedged ([`first_deliveries`]) under
    /// one deadline of `timeout`, and no later than the round closes for a commit over
    /// `agreed` ([`round_closes`]); keeps each with its signed announcement and relays it.
    /// A member that equivocated signed two payloads: each source is asked for either
    /// ([`synod_p2p::Client::fetch_announced_from`]), since the one the others aggregated may
    /// be the one we saw second.
    /// A payload whose announcement we have not seen yet is asked for again until it arrives
    /// (or the deadline passes); a relay that served a body with the wrong digest is not asked
    /// again. An author that answers and then drips delays its own payload by one hedge, and
    /// no other payload.
    ///
    /// # Errors
    /// The first payload whose announcement was never seen or that no peer delivered in time
    /// (the others that arrived are kept and relayed).
    fn fetch_agreed(
        &self,
        round: u32,
        missing: &[u32],
        timeout: Duration,
        agreed: &[u32],
    ) -> Result<BTreeMap<u32, Arc<Vec<u8>>>> {
        if missing.is_empty() {
            return Ok(BTreeMap::new());
        }
        let members = self.ctx.client.members();
        let author = |j: u32| members.get(j).map(|m| m.peer_id);
        let peers = self.peers();
        let wanted: Vec<(u32, Vec<PeerId>)> = missing
            .iter()
            .map(|&j| {
                let by = author(j);
                let mut relays: Vec<PeerId> =
                    peers.iter().copied().filter(|p| Some(*p) != by).collect();
                synod_p2p::exchange::rotate_relays(&mut relays, j, self.ctx.me);
                (j, by.into_iter().chain(relays).collect())
            })
            .collect();
        let max = self.ctx.recipe.max_payload_bytes;
        let fetch = first_deliveries(&wanted, HEDGE, timeout, |j, peer| {
            let client = self.ctx.client.clone();
            let by = author(j);
            async move {
                let seen = client.snapshot();
                if Some(peer) != by && seen.distrusted.contains(&peer) {
                    return Err(String::from("a relay that served a wrong body"));
                }
                let got = client.fetch_announced_from(peer, j, round, max).await;
                if let Err(synod_p2p::NetError::DigestMismatch) = &got {
                    if Some(peer) != by {
                        client.distrust_relay(peer);
                    }
                }
                got.map_err(|e| e.to_string())
            }
        });
        // The fetch ends when the round closes so that our commit could no longer count
        // (voided, final over another set, or its late commits closing): waiting on would hold
        // the next round.
        let closed = round_closes(&self.ctx, round, agreed);
        let raced = self
            .ctx
            .block_on(futures::future::select(Box::pin(fetch), Box::pin(closed)));
        let got = match raced {
            futures::future::Either::Left((got, _)) => got,
            futures::future::Either::Right(..) => {
                bail!("round {round} closed while we fetched the agreed payloads")
            }
        };
        let mut fetched = BTreeMap::new();
        let mut failed = None;
        for (j, got) in got {
            // With the announcement the delivery was checked against.
            let kept = got.and_then(|(_, (a, bytes))| {
                self.ctx
                    .retained
                    .save(round, j, &bytes, Some(&a.signed))
                    .map_err(|e| format!("keeping it: {e:#}"))?;
                // Others that lack it can get it from us too.
                let bytes = Arc::new(bytes);
                self.ctx
                    .client
                    .relay_verified(round, j, a.payload.digest, bytes.clone());
                Ok(bytes)
            });
            match kept {
                Ok(bytes) => {
                    fetched.insert(j, bytes);
                }
                Err(e) => {
                    failed.get_or_insert(format!("member {j}'s payload of round {round}: {e}"));
                }
            }
        }
        if !fetched.is_empty() {
            // Verified too (the duty worker may have checked the round without them), whether
            // or not our recommit lands.
            self.duties.verify(round)?;
        }
        match failed {
            Some(e) => bail!(e),
            None => Ok(fetched),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A round final at block 100 with a 10-block challenge window takes late commits
    /// through block 110: we stop trying once 3 blocks or fewer are left, so a split round's
    /// recovery never outlasts the window (and holds the next round) for a commit that would
    /// be refused or unpaid.
    #[test]
    fn a_late_commit_is_tried_only_while_the_late_window_leaves_time() {
        assert!(!late_window_closing(100, 10, 100));
        assert!(!late_window_closing(100, 10, 106));
        assert!(late_window_closing(100, 10, 107));
        assert!(late_window_closing(100, 10, 200));
        assert!(late_window_closing(100, 0, 100));
        assert!(late_window_closing(u64::MAX, u32::MAX, u64::MAX));
    }

    #[test]
    fn the_agreed_payloads_are_fetched_until_shortly_before_the_deadline() {
        // 100 blocks left, 3 kept back, 2 s blocks.
        assert_eq!(fetch_secs(200, 100, 2.0), 194);
        // Little or no time left: still the floor.
        assert_eq!(fetch_secs(110, 100, 2.0), FETCH_SECS);
        assert_eq!(fetch_secs(100, 200, 2.0), FETCH_SECS);
        assert_eq!(fetch_secs(u64::MAX, u64::MAX, f64::NAN), FETCH_SECS);
    }
}
