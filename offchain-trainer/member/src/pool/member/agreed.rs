//! A split round: the chain fixed an included set other than ours (`synod_protocol::agreement`);
//! we fetch the payloads we lack, aggregate exactly that set and commit once more.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use synod_chain::calls;
use synod_diloco::Contribution;

use super::settle::Pending;
use super::Trainer;
use crate::event::TrainerEvent;

/// How long we try to fetch the payloads of the agreed set we lack, in seconds. Each was
/// attested by at least one honest member, who holds and serves it.
const FETCH_SECS: u64 = 60;

impl Trainer {
    /// Recomputes round `p.round` over `agreed` from θ_{round−1} (`p.parent`) with the round's
    /// stakes, stores and serves the checkpoint, keeps (and relays) the payloads fetched for
    /// it, and commits `(hash, agreed)`; returns the new hash. `expect`: the final hash when
    /// the round is already final over `agreed` (we then commit only that hash, late).
    ///
    /// # Errors
    /// If θ_{round−1} or our own payload is not kept, a payload of `agreed` cannot be fetched
    /// within [`FETCH_SECS`] (its announcement unseen, or no peer serves it), the aggregate
    /// differs from `expect`, or the commit fails.
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
        let mut contributions = Vec::with_capacity(agreed.len());
        let mut fetched = Vec::new();
        for &j in agreed {
            let kept = if j == self.ctx.me {
                self.ctx.retained.own(round, j, &p.start)
            } else {
                self.ctx.retained.payload(round, j)
            };
            let payload = match kept {
                Some(bytes) => Arc::new(bytes),
                None if j == self.ctx.me => bail!("our own payload of round {round} is not kept"),
                None => {
                    let bytes = self.fetch_agreed(round, j)?;
                    fetched.push(j);
                    bytes
                }
            };
            contributions.push(Contribution { member: j, payload });
        }
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

    /// Fetches member `j`'s payload of `round` (announced on gossip; we left it out) from its
    /// author or any member that holds it, and keeps it with its signed announcement.
    fn fetch_agreed(&self, round: u32, j: u32) -> Result<Arc<Vec<u8>>> {
        let start = Instant::now();
        let max = self.ctx.recipe.max_payload_bytes;
        let mut last = String::from("its announcement was never seen");
        while start.elapsed() < Duration::from_secs(FETCH_SECS) {
            let announced = self
                .ctx
                .client
                .snapshot()
                .announced
                .get(&(round, j))
                .cloned();
            if let Some(a) = announced {
                let author = self.ctx.client.members().get(j).map(|m| m.peer_id);
                // Relays that served a body with the wrong digest are not asked again.
                let distrusted = self.ctx.client.snapshot().distrusted;
                let relays = self.peers().into_iter().filter(|p| !distrusted.contains(p));
                for peer in author.into_iter().chain(relays) {
                    match self.ctx.block_on(
                        self.ctx
                            .client
                            .fetch_payload_from(peer, j, round, a.payload, max),
                    ) {
                        Ok(bytes) => {
                            self.ctx.retained.save(round, j, &bytes, Some(&a.signed))?;
                            // Verified too (the duty worker may have checked the round
                            // without it), whether or not our recommit lands.
                            self.duties.verify(round)?;
                            // Others that lack it can get it from us too.
                            let bytes = Arc::new(bytes);
                            self.ctx.client.relay_verified(
                                round,
                                j,
                                a.payload.digest,
                                bytes.clone(),
                            );
                            return Ok(bytes);
                        }
                        Err(e) => {
                            if Some(peer) != author
                                && matches!(e, synod_p2p::NetError::DigestMismatch)
                            {
                                self.ctx.client.distrust_relay(peer);
                            }
                            last = e.to_string();
                        }
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        bail!("member {j}'s payload of round {round}: {last}")
    }
}
