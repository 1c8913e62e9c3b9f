//! A split round: the chain fixed an included set other than ours (`synod_protocol::agreement`);
//! we fetch the payloads we lack, aggregate exactly that set and commit once more.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use synod_chain::calls;
use synod_diloco::{Contribution, OuterState};
use synod_p2p::PeerId;

use super::rounds::Pending;
use super::Trainer;

/// How long we try to fetch the payloads of the agreed set we lack, in seconds. Each was
/// attested by at least one honest member, who holds and serves it.
const FETCH_SECS: u64 = 60;

impl Trainer<'_> {
    /// Recomputes round `p.round` over `agreed` from θ_{round−1} (`p.parent`) with the round's
    /// stakes, stores and serves the checkpoint, keeps the payloads fetched for it as evidence,
    /// and commits `(hash, agreed)`; returns the new hash.
    ///
    /// # Errors
    /// If θ_{round−1} or our own payload is not kept, a payload of `agreed` cannot be fetched
    /// within [`FETCH_SECS`] (its announcement unseen, or no peer serves it), the aggregate or
    /// the commit fails.
    pub(super) fn recommit(&mut self, p: &Pending, agreed: &[u32]) -> Result<[u8; 32]> {
        let round = p.round;
        let mut contributions = Vec::with_capacity(agreed.len());
        let mut fetched = Vec::new();
        for &j in agreed {
            let kept = if j == self.me {
                self.retained.own(round, j, &p.parent)
            } else {
                self.retained.payload(round, j)
            };
            let payload = match kept {
                Some(bytes) => bytes,
                None if j == self.me => bail!("our own payload of round {round} is not kept"),
                None => {
                    let bytes = self.fetch_agreed(round, j)?;
                    fetched.push(j);
                    bytes
                }
            };
            contributions.push(Contribution {
                member: j,
                payload: Arc::new(payload),
            });
        }
        let parent = self
            .store
            .get(&p.parent)
            .ok_or_else(|| anyhow!("θ of round {} is not kept", round - 1))?;
        let r = &self.a.recipe;
        let mut state = OuterState::from_checkpoint(
            synod_checkpoint::from_bytes(&parent)?,
            r.outer.outer_lr,
            r.outer.outer_momentum,
            round - 1,
        )?;
        let rule = r.outer.aggregation.rule();
        let outcome = state.apply(&contributions, rule.aggregator(Some(&p.stakes)).as_ref())?;
        if outcome.included != agreed {
            bail!(
                "a payload of the agreed set does not decode (aggregated {:?} of {agreed:?})",
                outcome.included
            );
        }
        self.store.put(&outcome.checkpoint)?;
        self.block_on(
            self.client
                .serve_checkpoint(Arc::new(outcome.checkpoint.clone())),
        )?;
        let call = calls::commit_checkpoint(self.pool, round, outcome.hash, agreed.to_vec());
        self.block_on(self.chain.submit(&call, &self.signer))
            .context("commit over the agreed set")?;
        self.metrics.emit(&serde_json::json!({
            "event": "recommit", "round": round, "agreed": agreed, "fetched": fetched,
            "hash": synod_checkpoint::hex(&outcome.hash), "outcome": "ok",
        }))?;
        self.duties.to_verify.insert(round);
        Ok(outcome.hash)
    }

    /// Fetches member `j`'s payload of `round` (announced on gossip; we left it out) from its
    /// author or any member that holds it, and keeps it with its signed announcement.
    fn fetch_agreed(&self, round: u32, j: u32) -> Result<Vec<u8>> {
        let start = Instant::now();
        let max = self.recipe.max_payload_bytes;
        let mut last = String::from("its announcement was never seen");
        while start.elapsed() < Duration::from_secs(FETCH_SECS) {
            let announced = self.client.snapshot().announced.get(&(round, j)).cloned();
            if let Some(a) = announced {
                let author = self
                    .members
                    .iter()
                    .find(|m| m.record.index == j)
                    .and_then(|m| PeerId::from_bytes(&m.record.peer_id).ok());
                for peer in author.into_iter().chain(self.peers()) {
                    match self.block_on(
                        self.client
                            .fetch_payload_from(peer, j, round, a.payload, max),
                    ) {
                        Ok(bytes) => {
                            self.retained.save(round, j, &bytes, Some(&a.signed))?;
                            return Ok(bytes);
                        }
                        Err(e) => last = e.to_string(),
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        bail!("member {j}'s payload of round {round}: {last}")
    }
}
