//! A split round: the chain fixed an included set other than ours (`synod_protocol::agreement`);
//! we fetch the payloads we lack, aggregate exactly that set and commit once more.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use synod_chain::calls;
use synod_diloco::Contribution;
use synod_p2p::message::PayloadRef;
use synod_p2p::PeerId;

use super::settle::Pending;
use super::Trainer;
use crate::event::TrainerEvent;
use crate::pool::store::{first_deliveries, HEDGE};

/// How long we try to fetch the payloads of the agreed set we lack, all of them together, in
/// seconds. Each was attested by at least one honest member, who holds and serves it.
const FETCH_SECS: u64 = 60;

impl Trainer {
    /// Recomputes round `p.round` over `agreed` from θ_{round−1} (`p.parent`) with the round's
    /// stakes, stores and serves the checkpoint, keeps (and relays) the payloads fetched for
    /// it, and commits `(hash, agreed)`; returns the new hash. `expect`: the final hash when
    /// the round is already final over `agreed` (we then commit only that hash, late).
    ///
    /// # Errors
    /// If θ_{round−1} or our own payload is not kept, the payloads of `agreed` we lack cannot
    /// all be fetched within [`FETCH_SECS`] (an announcement unseen, or no peer serves it), the
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
        kept.extend(self.fetch_agreed(round, &missing)?);
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
        let call = calls::commit_checkpoint(self.ctx.pool, round, outcome.hash, agreed.to_vec());
        self.ctx
            .block_on(self.ctx.chain.submit(&call, &self.ctx.signer))
            .context("commit over the agreed set")?;
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
    /// them out), each from its author or any member that holds it, all at once and hedged
    /// ([`first_deliveries`]) under one deadline of [`FETCH_SECS`]; keeps each with its signed
    /// announcement and relays it. An author that answers and then drips delays its own
    /// payload by one hedge, and no other payload.
    ///
    /// # Errors
    /// The first payload whose announcement was never seen or that no peer delivered in time
    /// (the others that arrived are kept).
    fn fetch_agreed(&self, round: u32, missing: &[u32]) -> Result<BTreeMap<u32, Arc<Vec<u8>>>> {
        if missing.is_empty() {
            return Ok(BTreeMap::new());
        }
        let deadline = Instant::now() + Duration::from_secs(FETCH_SECS);
        // Their announcements: gossip may still be bringing some.
        let mut announced = BTreeMap::new();
        loop {
            let seen = self.ctx.client.snapshot().announced;
            for &j in missing {
                if let Some(a) = seen.get(&(round, j)) {
                    announced.entry(j).or_insert_with(|| a.clone());
                }
            }
            if announced.len() == missing.len() || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        if let Some(j) = missing.iter().find(|j| !announced.contains_key(j)) {
            bail!("member {j}'s payload of round {round}: its announcement was never seen");
        }
        // Relays that served a body with the wrong digest are not asked again.
        let distrusted = self.ctx.client.snapshot().distrusted;
        let relays: Vec<PeerId> = self
            .peers()
            .into_iter()
            .filter(|p| !distrusted.contains(p))
            .collect();
        let members = self.ctx.client.members();
        let author = |j: u32| members.get(j).map(|m| m.peer_id);
        let wanted: Vec<((u32, PayloadRef), Vec<PeerId>)> = announced
            .iter()
            .map(|(&j, a)| {
                let by = author(j);
                let sources = by
                    .into_iter()
                    .chain(relays.iter().copied().filter(|p| Some(*p) != by));
                ((j, a.payload), sources.collect())
            })
            .collect();
        let max = self.ctx.recipe.max_payload_bytes;
        let left = deadline.saturating_duration_since(Instant::now());
        let got = self.ctx.block_on(first_deliveries(
            &wanted,
            HEDGE,
            left,
            |(j, payload), peer| {
                let client = self.ctx.client.clone();
                let by = author(j);
                async move {
                    let got = client
                        .fetch_payload_from(peer, j, round, payload, max)
                        .await;
                    if let Err(synod_p2p::NetError::DigestMismatch) = &got {
                        if Some(peer) != by {
                            client.distrust_relay(peer);
                        }
                    }
                    got
                }
            },
        ));
        let mut fetched = BTreeMap::new();
        let mut failed = None;
        for ((j, payload), got) in got {
            match got {
                Ok((_, bytes)) => {
                    let signed = announced.get(&j).map(|a| a.signed.as_slice());
                    self.ctx.retained.save(round, j, &bytes, signed)?;
                    // Others that lack it can get it from us too.
                    let bytes = Arc::new(bytes);
                    self.ctx
                        .client
                        .relay_verified(round, j, payload.digest, bytes.clone());
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
