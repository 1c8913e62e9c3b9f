//! A split round: the chain fixed an included set other than ours (`synod_protocol::agreement`);
//! we fetch the payloads we lack, aggregate exactly that set and commit once more.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use synod_diloco::{Aggregator, Contribution, OuterState, RoundOutcome};
use synod_p2p::{Announced, PeerId};
use synod_protocol::{RoundPhase, RoundState};

use super::commit::{submit_commit, CommitOutcome, NOT_RECORDED};
use super::ctx::{until_margin, Ctx};
use super::settle::Pending;
use super::Trainer;
use crate::event::TrainerEvent;
use crate::pool::store::{first_deliveries, HEDGE};

/// How long we try to fetch the payloads of the agreed set we lack, all of them together, at
/// least, in seconds: up to the open round's deadline when that is later
/// ([`fetch_secs`]). Each was attested by at least one honest member, who holds and serves it.
const FETCH_SECS: u64 = 60;

/// Most members of a final set that equivocated whose other signed payload a late commit tries
/// in place of the one we hold ([`aggregate_matching`]: 2^k aggregates for k of them).
const MAX_EQUIVOCATORS_TRIED: usize = 3;

/// Blocks kept back before the round's deadline for our second commit to be included and for
/// the finality lag of the block we read the deadline at.
const COMMIT_MARGIN_BLOCKS: u64 = 3;

/// Whether the late-commit window of `round`, final ([`Ctx::final_round`]), leaves no time for
/// one more commit at finalized block `now`: [`COMMIT_MARGIN_BLOCKS`] or fewer blocks of it are
/// left (or it is not final). A commit after the window is not paid, and our attestation
/// records us as present without it (`duty/attest.rs`).
pub(super) fn late_window_closing(round: &RoundState, now: u64) -> bool {
    round.phase(now.saturating_add(COMMIT_MARGIN_BLOCKS + 1)) != RoundPhase::LateCommits
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
            Ok(Some(f)) if f.included == agreed => match chain.finalized_number().await {
                Ok(now) if late_window_closing(&ctx.final_round(&f), now) => return,
                _ => {}
            },
            Ok(Some(_)) => return,
            Ok(None) if chain.voided(pool, round).await.unwrap_or(false) => return,
            Ok(None) | Err(_) => {}
        }
    }
}

/// The aggregate of `contributions` from `state` (θ_{r−1}) under `agg` whose checkpoint hashes
/// to `expect` (a final round's hash), trying in place of the payloads of the members in
/// `others` the other payload each signed for the round (an equivocator's): every subset of
/// them, the set as given first. An equivocator's two payloads reach members in either order,
/// and a relay may hand us the one the final set did not aggregate. Returns the outcome and the
/// members whose other payload it took; `None` if no subset hashes to `expect` or `others`
/// holds more than [`MAX_EQUIVOCATORS_TRIED`] members. A subset whose aggregate fails (a
/// payload that does not decode, a non-finite step) is not it.
pub(super) fn aggregate_matching(
    state: &OuterState,
    contributions: &[Contribution],
    others: &BTreeMap<u32, Arc<Vec<u8>>>,
    agg: &dyn Aggregator,
    expect: [u8; 32],
) -> Option<(RoundOutcome, Vec<u32>)> {
    if others.len() > MAX_EQUIVOCATORS_TRIED {
        return None;
    }
    let members: Vec<u32> = others.keys().copied().collect();
    (0u32..1 << members.len()).find_map(|mask| {
        let used: Vec<u32> = (0..members.len())
            .filter(|i| mask & (1 << i) != 0)
            .map(|i| members[i])
            .collect();
        let tried: Vec<Contribution> = contributions
            .iter()
            .map(
                |c| match others.get(&c.member).filter(|_| used.contains(&c.member)) {
                    Some(other) => Contribution {
                        member: c.member,
                        payload: other.clone(),
                    },
                    None => c.clone(),
                },
            )
            .collect();
        let outcome = state.clone().apply(&tried, agg).ok()?;
        (outcome.hash == expect).then_some((outcome, used))
    })
}

/// Seconds to fetch the agreed payloads we lack for an open round whose deadline is block
/// `deadline`, at finalized block `finalized`, with blocks of `block_secs` seconds: until
/// [`COMMIT_MARGIN_BLOCKS`] before the deadline, and at least [`FETCH_SECS`]. A commit off the
/// agreed set is leaked at a void when the set left the pool's recommit period to commit over it
/// (`synod_protocol::leak::agreed_in_time`), so we keep fetching as long as a commit can still
/// count, not a fixed time.
fn fetch_secs(deadline: u64, finalized: u64, block_secs: f64) -> u64 {
    until_margin(deadline, finalized, COMMIT_MARGIN_BLOCKS, block_secs)
        .as_secs()
        .max(FETCH_SECS)
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
        let mut state = self.ctx.recipe.restore(&parent, round - 1)?;
        let rule = self.ctx.recipe.pool.aggregation;
        // The snapshot's weights, read again: `p.stakes` are the stakes read before the round
        // opened when its snapshot could not be read at the exchange.
        let stakes = match self.ctx.block_on(self.ctx.snapshot_stakes(round)) {
            Ok(Some(stakes)) => stakes,
            _ => p.stakes.clone(),
        };
        let agg = rule.aggregator(Some(&stakes));
        // θ_{r−1} again, for a late commit whose aggregate may have to be made once more.
        let before = expect.map(|_| state.clone());
        let mut outcome = state.apply(&contributions, agg.as_ref())?;
        if let (Some(h), Some(before)) = (expect.filter(|h| *h != outcome.hash), before) {
            let ours = synod_checkpoint::hex(&outcome.hash);
            drop(outcome);
            // The final set may hold the other payload of a member that signed two.
            let others = self.other_payloads(round, &kept, agreed);
            let bytes: BTreeMap<u32, Arc<Vec<u8>>> =
                others.iter().map(|(j, (_, b))| (*j, b.clone())).collect();
            let found = match bytes.is_empty() {
                true => None,
                false => aggregate_matching(&before, &contributions, &bytes, agg.as_ref(), h),
            };
            let Some((found, used)) = found else {
                bail!(
                    "our aggregate of the final set is {ours}, not the final {} (other payloads \
                     of equivocators tried: {:?})",
                    synod_checkpoint::hex(&h),
                    bytes.keys().collect::<Vec<_>>()
                );
            };
            for j in &used {
                if let Some((a, b)) = others.get(j) {
                    self.keep_fetched(round, *j, a, b)
                        .map_err(|e| anyhow!("member {j}'s other payload: {e}"))?;
                }
            }
            if !used.is_empty() {
                // Verified as the payloads the final set holds.
                self.duties.verify(round)?;
            }
            outcome = found;
        }
        if outcome.included != agreed {
            bail!(
                "a payload of the agreed set does not decode (aggregated {:?} of {agreed:?})",
                outcome.included
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
        let wanted = self.sources(missing);
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
                let bytes = Arc::new(bytes);
                self.keep_fetched(round, j, &a, &bytes)?;
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

    /// Where to fetch the payloads of round members `missing` from: each from its author first,
    /// then every other member, relays rotated by author and by us as the exchange rotates them.
    fn sources(&self, missing: &[u32]) -> Vec<(u32, Vec<PeerId>)> {
        let members = self.ctx.client.members();
        let peers = self.peers();
        missing
            .iter()
            .map(|&j| {
                let by = members.get(j).map(|m| m.peer_id);
                let mut relays: Vec<PeerId> =
                    peers.iter().copied().filter(|p| Some(*p) != by).collect();
                synod_p2p::exchange::rotate_relays(&mut relays, j, self.ctx.me);
                (j, by.into_iter().chain(relays).collect())
            })
            .collect()
    }

    /// Keeps member `j`'s payload `bytes` of `round` with its signed announcement `a` (what its
    /// verifiers and a challenge of it need) and relays it to members that lack it.
    ///
    /// # Errors
    /// The payload cannot be written.
    fn keep_fetched(
        &self,
        round: u32,
        j: u32,
        a: &Announced,
        bytes: &Arc<Vec<u8>>,
    ) -> Result<(), String> {
        self.ctx
            .retained
            .save(round, j, bytes, Some(&a.signed))
            .map_err(|e| format!("keeping it: {e:#}"))?;
        self.ctx
            .client
            .relay_verified(round, j, a.payload.digest, bytes.clone());
        Ok(())
    }

    /// The other payload of each member of `kept` (not us) that signed two for `round`: the
    /// one whose announcement we saw and whose digest is not that of the payload we hold, with
    /// that announcement, fetched from its author or any member under one deadline of
    /// [`FETCH_SECS`] and no later than the round closes for a commit over `agreed`
    /// ([`round_closes`]). At most [`MAX_EQUIVOCATORS_TRIED`] members are asked for; one nobody
    /// serves in time is left out (logged).
    fn other_payloads(
        &self,
        round: u32,
        kept: &BTreeMap<u32, Arc<Vec<u8>>>,
        agreed: &[u32],
    ) -> BTreeMap<u32, (Announced, Arc<Vec<u8>>)> {
        let seen = self.ctx.client.snapshot();
        let other: BTreeMap<u32, Announced> = kept
            .iter()
            .filter(|(j, _)| **j != self.ctx.me)
            .filter_map(|(j, bytes)| {
                let all = seen.announcements(round, *j);
                if all.len() < 2 {
                    return None;
                }
                let held = *blake3::hash(bytes).as_bytes();
                let other = all.into_iter().find(|a| a.payload.digest != held)?;
                Some((*j, other.clone()))
            })
            .take(MAX_EQUIVOCATORS_TRIED)
            .collect();
        if other.is_empty() {
            return BTreeMap::new();
        }
        let wanted = self.sources(&other.keys().copied().collect::<Vec<_>>());
        let max = self.ctx.recipe.max_payload_bytes;
        let fetch = first_deliveries(
            &wanted,
            HEDGE,
            Duration::from_secs(FETCH_SECS),
            |j, peer| {
                let client = self.ctx.client.clone();
                let want = other.get(&j).map(|a| a.payload);
                async move {
                    let want =
                        want.ok_or(synod_p2p::NetError::NotAnnounced { round, member: j })?;
                    client.fetch_payload_from(peer, j, round, want, max).await
                }
            },
        );
        let closed = round_closes(&self.ctx, round, agreed);
        let raced = self
            .ctx
            .block_on(futures::future::select(Box::pin(fetch), Box::pin(closed)));
        let futures::future::Either::Left((delivered, _)) = raced else {
            tracing::warn!(
                round,
                "the round closed while we fetched equivocators' other payloads"
            );
            return BTreeMap::new();
        };
        let mut got = BTreeMap::new();
        for (j, res) in delivered {
            match (res, other.get(&j)) {
                (Ok((_, bytes)), Some(a)) => {
                    got.insert(j, (a.clone(), Arc::new(bytes)));
                }
                (Err(e), _) => {
                    tracing::warn!(round, member = j, "its other signed payload: {e}");
                }
                (Ok(_), None) => {}
            }
        }
        got
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
        let final_at = |at, window| {
            RoundState::finalized(
                synod_protocol::Timeline::for_pool(0, window, 0, 0),
                at,
                [0; 32],
            )
        };
        let round = final_at(100, 10);
        assert!(!late_window_closing(&round, 100));
        assert!(!late_window_closing(&round, 106));
        assert!(late_window_closing(&round, 107));
        assert!(late_window_closing(&round, 200));
        assert!(late_window_closing(&final_at(100, 0), 100));
        assert!(late_window_closing(&final_at(u64::MAX - 1, 0), u64::MAX));
        // A round that is not final has no late commits.
        let open = RoundState::new(synod_protocol::Timeline::for_pool(0, 10, 0, 0), 0);
        assert!(late_window_closing(&open, 0));
    }

    /// θ of four weights, and member `j`'s fp32 payload pushing every weight by `scale`.
    fn payload(like: &synod_checkpoint::ParamSet, j: u32, scale: f32) -> Contribution {
        let delta = vec![vec![scale; 4]];
        let opts = synod_codec::EncodeOptions::fp32();
        Contribution {
            member: j,
            payload: Arc::new(synod_diloco::encode_pseudo_gradient(like, &delta, &opts).unwrap()),
        }
    }

    /// An equivocator (member 2) signed payloads A and B; the final set aggregated B, and a
    /// colluding relay handed us A. A late commit of the final pair aggregates B in A's place
    /// once it holds both, and never takes an equivocator's other payload when the set as held
    /// already matches.
    #[test]
    fn a_final_set_holding_an_equivocators_other_payload_is_matched_with_it() {
        let theta = synod_checkpoint::ParamSet::new(vec![synod_checkpoint::NamedTensor {
            name: "w".into(),
            shape: vec![4],
            data: vec![1.0; 4],
        }])
        .unwrap();
        let state = OuterState::new(theta.clone(), synod_diloco::NesterovSgd::new(0.7, 0.0));
        let agg = synod_diloco::Mean;
        let (a, b) = (payload(&theta, 2, 0.5), payload(&theta, 2, -3.0));
        let honest = [payload(&theta, 0, 0.1), payload(&theta, 1, 0.2)];
        let with = |c: &Contribution| [honest[0].clone(), honest[1].clone(), c.clone()];
        let final_hash = state.clone().apply(&with(&b), &agg).unwrap().hash;
        let others = BTreeMap::from([(2, b.payload.clone())]);
        let (found, used) =
            aggregate_matching(&state, &with(&a), &others, &agg, final_hash).unwrap();
        assert_eq!((found.hash, used), (final_hash, vec![2]));
        // Held B already: nothing replaced.
        let (_, used) = aggregate_matching(&state, &with(&b), &others, &agg, final_hash).unwrap();
        assert!(used.is_empty());
        // Neither payload gives the final hash: no match.
        let wrong = BTreeMap::from([(2, payload(&theta, 2, 9.0).payload)]);
        assert!(aggregate_matching(&state, &with(&a), &wrong, &agg, final_hash).is_none());
        // Too many equivocators to try every subset.
        let many: BTreeMap<u32, _> = (0..=MAX_EQUIVOCATORS_TRIED as u32)
            .map(|j| (j, b.payload.clone()))
            .collect();
        assert!(aggregate_matching(&state, &with(&a), &many, &agg, final_hash).is_none());
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
