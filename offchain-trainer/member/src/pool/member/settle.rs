//! The end of a round we committed: waiting for the chain to close it, committing again over
//! an included set the chain agreed on ([`super::agreed`]), and keeping the final checkpoint
//! served; and the end of the pool.

use std::time::Duration;

use anyhow::Result;
use synod_chain::{calls, types::PoolStatus};
use synod_checkpoint::CheckpointHash;
use synod_p2p::ExchangeConfig;
use tokio::task::JoinHandle;

use super::Trainer;
use crate::chain_args::Fault;
use crate::event::TrainerEvent;
use crate::plot::{loss_vs_tokens, Curve};

/// How a round ended on-chain.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Closed {
    Final(CheckpointHash),
    Voided,
}

/// Our checkpoint of a round whose commit is in flight.
pub(super) struct Pending {
    pub round: u32,
    pub hash: CheckpointHash,
    pub commit: JoinHandle<Result<(), String>>,
    /// The included set we aggregated and committed (ascending member indices).
    pub included: Vec<u32>,
    /// blake3 of θ_{round−1}, the checkpoint the outer step was applied to.
    pub parent: CheckpointHash,
    /// blake3 of the checkpoint our inner phase started from ([`Trainer::inner_start`]): the
    /// key our own payload is kept under.
    pub start: CheckpointHash,
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

/// The hash of a [`Pending`] round for which we commit nothing: our aggregate could not be
/// applied ([`synod_diloco::DilocoError::NonFinite`], nothing decodable). No checkpoint hashes
/// to it (blake3 of anything is 32 zero bytes with probability 2⁻²⁵⁶).
pub(super) const NOT_COMMITTED: CheckpointHash = [0; 32];

impl Trainer {
    /// Waits for our commit of `p` to be processed and for the round to close on-chain; if the
    /// members' included sets split and the chain fixes another set than ours, aggregates that
    /// one and commits again ([`Trainer::recommit`]).
    pub(super) fn settle(&mut self, mut p: Pending) -> Result<Closed> {
        let failure = match self.ctx.block_on(&mut p.commit) {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(format!("commit failed: {e}")),
            Err(e) => Some(format!("commit task failed: {e}")),
        };
        if let Some(e) = &failure {
            tracing::warn!(round = p.round, "{e}");
        }
        self.metrics.emit(&TrainerEvent::Commit {
            outcome: if failure.is_some() { "failed" } else { "ok" }.into(),
            error: failure,
            hash: synod_checkpoint::hex(&p.hash),
            round: p.round,
        })?;
        let (pool, round, me) = (self.ctx.pool, p.round, self.ctx.me);
        // A member of `--fault late` withholds its commit: it does not commit again either.
        let mut tries_left = if self.ctx.a.fault == Some(Fault::Late) {
            0
        } else {
            RECOMMIT_TRIES
        };
        // Our second commit's checkpoint, once the chain took it.
        let mut second: Option<CheckpointHash> = None;
        // Whether we asked the chain to void the round (once per round).
        let void_asked = std::cell::Cell::new(false);
        let closed = loop {
            let chain = &self.ctx.chain;
            let signer = &self.ctx.signer;
            let may = tries_left > 0 && second.is_none();
            let step = self.ctx.block_on(chain.wait_for(
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
                    // Past its deadline and not voided: the chain's queue had no room for it.
                    // Nobody else may commit again, so we void it ourselves, once; members
                    // wait `index mod 4` blocks more each, so that few calls race (the losers'
                    // fail and pay their fee).
                    if !void_asked.get() {
                        let open = chain.open_round(pool).await?;
                        let finalized = chain.finalized_number().await?;
                        let slack = u64::from(me % 4);
                        if open.is_some_and(|o| o.needs_void(round, finalized, slack)) {
                            match chain.submit(&calls::void_expired_round(pool), signer).await {
                                Ok(_) => void_asked.set(true),
                                // Closed by another member's call or commit meanwhile.
                                Err(e @ synod_chain::ChainError::Module { .. }) => {
                                    void_asked.set(true);
                                    tracing::debug!(round, "not voiding the expired round: {e}");
                                }
                                Err(e) => {
                                    tracing::warn!(round, "cannot void the expired round: {e}")
                                }
                            }
                        }
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
                            self.metrics.emit(&TrainerEvent::Recommit {
                                agreed: set,
                                error: Some(format!("{e:#}")),
                                fetched: None,
                                hash: None,
                                outcome: "failed".into(),
                                round,
                            })?;
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
        self.metrics.emit(&TrainerEvent::Closed {
            round,
            hash: synod_checkpoint::hex(&p.hash),
            detail,
        })?;
        for ours in std::iter::once(p.hash).chain(second) {
            if closed == Closed::Final(ours) {
                self.keep_serving_final(ours, None)?;
            } else {
                self.ctx.store.remove(&ours);
            }
        }
        Ok(closed)
    }

    /// Waits for the pool to complete, then serves until live peers have our last payload.
    pub(super) fn finish(mut self, last: u32) -> Result<()> {
        let (chain, pool) = (&self.ctx.chain, self.ctx.pool);
        let p = self.ctx.block_on(chain.wait_for(
            "the pool to complete",
            Duration::from_secs(3600),
            || async {
                Ok(chain
                    .pool(pool)
                    .await?
                    .filter(|p| p.status != PoolStatus::Training))
            },
        ))?;
        self.duties.finish(Duration::from_secs(3600));
        let (f, h) = self.ctx.last_final()?;
        if !self.curve.is_empty() {
            let label = format!(
                "member {} of pool {pool}, H={}",
                self.ctx.me, self.ctx.inner_steps
            );
            let png = self.ctx.a.base_path.join("loss.png");
            loss_vs_tokens(
                &png,
                "synod-trainer run: validation loss",
                &[Curve {
                    label: &label,
                    points: &self.curve,
                }],
            )?;
        }
        let metrics = self.metrics;
        metrics.emit(&TrainerEvent::Done {
            final_checkpoint: synod_checkpoint::hex(&h),
            final_checkpoint_file: self.ctx.store.path(&h),
            last_final_round: f,
            last_round_trained: last,
            pool,
            status: format!("{:?}", p.status),
        })?;
        let dead_after = ExchangeConfig::default().dead_after;
        self.ctx.rt.block_on(synod_p2p::finish(
            &self.ctx.client,
            last,
            dead_after,
            Duration::from_secs(30),
        ));
        Ok(())
    }
}
