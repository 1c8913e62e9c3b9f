//! The rounds: optimistic inner phase, confirmation of the parent, exchange, outer step,
//! background commit; then the end of the pool.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use synod_chain::calls;
use synod_chain::types::PoolStatus;
use synod_checkpoint::CheckpointHash;
use synod_diloco::verify::segment_boundaries;
use synod_diloco::DilocoError;
use synod_p2p::{all_gather, ExchangeConfig, ExchangeOutcome};
use tokio::task::JoinHandle;

use super::{Event, Trainer};
use crate::chain_args::Fault;
use crate::plot::{loss_vs_tokens, Curve};
use crate::train::RoundRecord;

/// How a round ended on-chain.
#[derive(Debug, PartialEq, Eq)]
enum Closed {
    Final(CheckpointHash),
    Voided,
}

/// Our checkpoint of a round whose commit is in flight.
pub(super) struct Pending {
    pub round: u32,
    pub hash: CheckpointHash,
    commit: JoinHandle<Result<(), String>>,
    /// The included set we aggregated and committed (ascending member indices).
    pub included: Vec<u32>,
    /// blake3 of θ_{round−1}, the checkpoint the outer step was applied to.
    pub parent: CheckpointHash,
    /// The round's snapshot stakes (planck), the aggregation rule's weights.
    pub stakes: Vec<u128>,
}

/// What the chain says of a round we committed.
enum Step {
    Closed(Closed),
    /// The members' included sets split and the chain fixed this one, which is not ours; with
    /// the final hash when the round is already final over it (we commit it late).
    Agreed(Vec<u32>, Option<CheckpointHash>),
}

/// How many times we try to commit over an agreed (or final) set other than ours.
const RECOMMIT_TRIES: u32 = 3;

impl Trainer<'_> {
    /// Waits for our commit of `p` to be processed and for the round to close on-chain; if the
    /// members' included sets split and the chain fixes another set than ours, aggregates that
    /// one and commits again ([`Trainer::recommit`]).
    fn settle(&mut self, mut p: Pending) -> Result<Closed> {
        let failure = match self.block_on(&mut p.commit) {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(format!("commit failed: {e}")),
            Err(e) => Some(format!("commit task failed: {e}")),
        };
        if let Some(e) = &failure {
            tracing::warn!(round = p.round, "{e}");
        }
        self.metrics.emit(&serde_json::json!({
            "event": "commit", "round": p.round, "hash": synod_checkpoint::hex(&p.hash),
            "outcome": if failure.is_some() { "failed" } else { "ok" }, "error": failure,
        }))?;
        let (pool, round, me) = (self.pool, p.round, self.me);
        // A member of `--fault late` withholds its commit: it does not commit again either.
        let mut tries_left = if self.a.fault == Some(Fault::Late) {
            0
        } else {
            RECOMMIT_TRIES
        };
        // Our second commit's checkpoint, once the chain took it.
        let mut second: Option<CheckpointHash> = None;
        let closed = loop {
            let chain = &self.chain;
            let may = tries_left > 0 && second.is_none();
            let step = self.block_on(chain.wait_for(
                "the round to close",
                Duration::from_secs(3600),
                || async {
                    if let Some(f) = chain.final_checkpoint(pool, round).await? {
                        // Final over another set that holds our payload (a split round is
                        // final once quorum has committed again): commit it late, to be paid.
                        if may
                            && f.hash != p.hash
                            && f.included != p.included
                            && f.included.contains(&me)
                        {
                            return Ok(Some(Step::Agreed(f.included, Some(f.hash))));
                        }
                        return Ok(Some(Step::Closed(Closed::Final(f.hash))));
                    }
                    if chain.voided(pool, round).await? {
                        return Ok(Some(Step::Closed(Closed::Voided)));
                    }
                    if may {
                        if let Some(agreed) = chain.agreed_set(pool, round).await? {
                            if agreed != p.included {
                                return Ok(Some(Step::Agreed(agreed, None)));
                            }
                        }
                    }
                    Ok(None)
                },
            ))?;
            match step {
                Step::Closed(c) => break c,
                Step::Agreed(set, expect) => {
                    tries_left -= 1;
                    match self.recommit(&p, &set, expect) {
                        Ok(h) => second = Some(h),
                        Err(e) => {
                            tracing::warn!(round, "cannot commit over the agreed set: {e:#}");
                            self.metrics.emit(&serde_json::json!({
                                "event": "recommit", "round": round, "agreed": set,
                                "outcome": "failed", "error": format!("{e:#}"),
                            }))?;
                        }
                    }
                }
            }
        };
        let detail = match &closed {
            Closed::Final(h) if *h == p.hash => "final: our checkpoint".to_string(),
            Closed::Final(h) if Some(*h) == second => {
                "final: our checkpoint over the agreed included set".to_string()
            }
            Closed::Final(h) => {
                format!("final at {} (ours lost the vote)", synod_checkpoint::hex(h))
            }
            Closed::Voided => "voided".to_string(),
        };
        self.metrics.emit(&Event {
            event: "closed",
            round,
            hash: synod_checkpoint::hex(&p.hash),
            detail,
        })?;
        for ours in std::iter::once(p.hash).chain(second) {
            if closed == Closed::Final(ours) {
                self.keep_serving_final(ours, None)?;
            } else {
                self.store.remove(&ours);
            }
        }
        Ok(closed)
    }

    /// Keeps the included set's payloads and signed announcements of `round` for verification.
    fn retain(&mut self, round: u32, ex: &ExchangeOutcome) {
        for c in ex.included.iter().filter(|c| c.member != self.me) {
            let ann = ex.announcements.get(&c.member).map(|a| a.as_slice());
            if let Err(e) = self.retained.save(round, c.member, &c.payload, ann) {
                tracing::warn!(round, member = c.member, "cannot keep evidence: {e}");
            }
        }
        self.duties.to_verify.insert(round);
    }

    /// Trains until the pool's last round; returns the last round we computed.
    pub(super) fn train(&mut self, from_round: u32, resumed: bool) -> Result<u32> {
        // After a restart, the traces of our rounds that can still be verified are served
        // again (they are kept with the rounds' evidence).
        for r in self.retained.rounds() {
            if let Some(payload) = self.retained.payload(r, self.me) {
                self.serve_trace(r, &payload);
            }
        }
        // θ of the round we train from (its blake3): the last final checkpoint.
        let Some((mut state, mut parent)) = self.catch_up(from_round, resumed)? else {
            return Ok(0);
        };
        if state.round == 0 {
            let r0 = self.blank(0);
            self.record(
                &state,
                RoundRecord {
                    checkpoint_hash: Some(synod_checkpoint::hex(&self.recipe.theta0_hash)),
                    ..r0
                },
            )?;
        }
        let codec = self.a.recipe.outer.encode_options();
        let rule = self.a.recipe.outer.aggregation.rule();
        let xcfg = ExchangeConfig {
            deadline: Duration::from_secs(self.a.round_deadline),
            max_payload_bytes: self.recipe.max_payload_bytes,
            ..ExchangeConfig::default()
        };
        let batch_tokens = (self.recipe.setup.plan.batch * self.recipe.setup.plan.seq_len) as u64;
        let boundaries = if self.a.recipe.model.keep_inner_state {
            Vec::new() // not replayable from θ alone: no trace either
        } else {
            segment_boundaries(self.inner_steps)
        };
        let mut pending: Option<Pending> = None;
        let mut last = 0;
        while state.round < self.spec_rounds {
            let r = state.round + 1;
            let t_round = Instant::now();
            self.refresh_members(r)?;
            // Our Proof-of-Learning trace: every boundary state is kept with the round's
            // evidence and served to verifiers by its blake3 (the hashes go in front of our
            // payload).
            let (retained, client) = (&self.retained, &self.client);
            let (mut mine, report) = state.contribute_traced(
                &mut self.worker,
                self.me,
                &codec,
                // A pool's codec is dense (`Recipe::load` refuses sparse): no memory to keep.
                &mut self.a.recipe.outer.feedback(),
                &boundaries,
                &mut |_, bytes, hash| {
                    let path = retained
                        .save_trace_state(r, &hash, &bytes)
                        .map_err(|e| DilocoError::Inner(format!("keeping a trace state: {e:#}")))?;
                    client.serve_file(hash, path);
                    Ok(())
                },
            )?;
            if let Some(p) = pending.take() {
                let ours = p.hash;
                match self.settle(p)? {
                    Closed::Final(h) if h == ours => parent = ours,
                    _ => {
                        // That phase started from a θ_{r−1} that lost: its trace is dead.
                        self.forget_trace(r, &mine.payload, None);
                        let (_, hash) = self.last_final()?;
                        state = self.load(hash, r - 1)?;
                        parent = hash;
                        continue;
                    }
                }
            }
            // Round r is open on-chain now (r − 1 closed): gather from its frozen snapshot,
            // whose stakes (not the payloads that arrive) set the aggregate's trim.
            let stakes = self.refresh_members(r)?;
            self.inject_fault(r, &state, &mut mine, &codec)?;
            // We sign one payload per round. It is kept before it is announced, so that,
            // restarted mid-round, we serve these very bytes again (`catch_up`) instead of
            // leaving peers waiting for a payload nobody holds; and a kept one wins over a
            // recomputation, which another thread count or device may round differently (two
            // signed payloads for one round read as equivocation).
            // Announcing a payload we could not keep would risk a second, different one after
            // a restart: an equivocation, slashed on-chain. A member that cannot write its
            // evidence directory stops instead.
            match self.retained.own(r, self.me, &parent) {
                Some(kept) => {
                    // Recomputed after a restart: the kept payload's trace is the one we serve.
                    self.forget_trace(r, &mine.payload, Some(&kept));
                    self.serve_trace(r, &kept);
                    mine.payload = std::sync::Arc::new(kept);
                }
                None => {
                    // A payload kept for r from another θ_{r−1} is dead: so is its trace (but
                    // not the states ours shares with it: same θ, other momentum).
                    if let Some(old) = self.retained.payload(r, self.me) {
                        self.forget_trace(r, &old, Some(&mine.payload));
                    }
                    self.retained
                        .save_own(r, self.me, &parent, &mine.payload)
                        .with_context(|| {
                            format!("keeping our payload of round {r} before announcing it")
                        })?;
                }
            }
            let payload_bytes = mine.payload.len() as u64;
            let sp = super::spinner(
                self.a.quiet,
                format!("round {r}: exchanging pseudo-gradients (fetching the members' payloads)"),
            );
            let ex = self.block_on(all_gather(&self.client, r, mine.payload, xcfg));
            sp.finish_and_clear();
            let ex = ex?;
            let received: u64 = ex
                .included
                .iter()
                .filter(|c| c.member != self.me)
                .map(|c| c.payload.len() as u64)
                .sum();
            self.metrics.emit(&serde_json::json!({
                "event": "exchange", "round": r, "bytes_received": received,
                "peers_connected": self.client.snapshot().connected.len(),
            }))?;
            self.retain(r, &ex);
            let t_outer = Instant::now();
            let outcome = state.apply(&ex.included, rule.aggregator(Some(&stakes)).as_ref())?;
            self.store.put(&outcome.checkpoint)?;
            self.block_on(self.client.serve_checkpoint(Arc::new(outcome.checkpoint)))?;
            let outer_secs = t_outer.elapsed().as_secs_f64();
            self.tokens +=
                outcome.included.len() as u64 * u64::from(self.inner_steps) * batch_tokens;
            let rec = RoundRecord {
                train_loss: report.mean_loss,
                bytes_sent_per_worker: payload_bytes,
                checkpoint_hash: Some(synod_checkpoint::hex(&outcome.hash)),
                included: outcome.included.clone(),
                compute_secs: report.secs,
                outer_secs,
                exchange_secs: ex.secs,
                excluded: ex.excluded,
                ..self.blank(r)
            }
            .with_wall(t_round.elapsed().as_secs_f64());
            self.record(&state, rec)?;
            let (chain, signer, pool, hash, included) = (
                self.chain.clone(),
                self.signer.clone(),
                self.pool,
                outcome.hash,
                outcome.included.clone(),
            );
            let withhold = self.a.fault == Some(Fault::Late);
            let commit = self.rt.spawn(async move {
                if withhold {
                    return Ok(());
                }
                match chain
                    .submit(&calls::commit_checkpoint(pool, r, hash, included), &signer)
                    .await
                {
                    Ok(_) => Ok(()),
                    Err(e) if e.is_module("Checkpoints", "AlreadyCommitted") => Ok(()),
                    Err(e) => Err(e.to_string()),
                }
            });
            pending = Some(Pending {
                round: r,
                hash: outcome.hash,
                commit,
                included: outcome.included,
                parent,
                stakes,
            });
            last = r;
            self.duties();
        }
        if let Some(p) = pending.take() {
            if let Closed::Final(h) = self.settle(p)? {
                // Keep the final file even if ours lost the vote.
                let peers = self.peers();
                self.block_on(self.store.get_or_fetch(
                    &self.client,
                    &peers,
                    h,
                    Duration::from_secs(300),
                ))?;
            }
        }
        Ok(last)
    }

    /// Waits for the pool to complete, then serves until live peers have our last payload.
    pub(super) fn finish(mut self, last: u32) -> Result<()> {
        let (chain, pool) = (&self.chain, self.pool);
        let p = self.block_on(chain.wait_for(
            "the pool to complete",
            Duration::from_secs(3600),
            || async {
                Ok(chain
                    .pool(pool)
                    .await?
                    .filter(|p| p.status != PoolStatus::Training))
            },
        ))?;
        self.finish_duties(Duration::from_secs(3600));
        let (f, h) = self.last_final()?;
        if !self.curve.is_empty() {
            let label = format!("member {} of pool {pool}, H={}", self.me, self.inner_steps);
            let png = self.a.base_path.join("loss.png");
            loss_vs_tokens(
                &png,
                "synod-trainer run: validation loss",
                &[Curve {
                    label: &label,
                    points: &self.curve,
                }],
            )?;
        }
        let mut metrics = self.metrics;
        metrics.emit(&serde_json::json!({
            "event": "done", "pool": pool, "status": format!("{:?}", p.status), "last_round_trained": last,
            "last_final_round": f, "final_checkpoint": synod_checkpoint::hex(&h),
            "final_checkpoint_file": self.store.path(&h),
        }))?;
        let dead_after = ExchangeConfig::default().dead_after;
        self.rt.block_on(synod_p2p::finish(
            &self.client,
            last,
            dead_after,
            Duration::from_secs(30),
        ));
        Ok(())
    }
}
