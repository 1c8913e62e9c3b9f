//! One round's exchange, outer step and commit: our payload kept before it is announced, the
//! included set all-gathered and kept as evidence, the outer step applied, and the checkpoint
//! served and committed in the background ([`super::settle`] waits for the outcome).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use synod_chain::submit::{account_of, Included, Signer};
use synod_chain::{calls, AccountId, Chain, ChainError, SynodEvent};
use synod_checkpoint::CheckpointHash;
use synod_diloco::{Contribution, OuterState};
use synod_p2p::{all_gather, ExchangeConfig, ExchangeOutcome};

use super::ctx::until_margin;
use super::rounds::RoundCtx;
use super::settle::{Pending, NOT_COMMITTED};
use super::Trainer;
use crate::config::Fault;
use crate::event::TrainerEvent;
use crate::train::RoundRecord;

/// Why a commit that landed counts for nothing ([`CommitOutcome::NotRecorded`]).
pub(super) const NOT_RECORDED: &str = "included, but the chain recorded no commit of ours";

/// What the chain made of one submission of our commit of a round ([`submit_commit`]).
#[derive(Debug)]
pub(super) enum CommitOutcome {
    /// In a finalized block, and the chain recorded it (`Checkpoints.CheckpointCommitted`).
    Recorded,
    /// In a finalized block, but the chain recorded no commit of ours (no
    /// `Checkpoints.CheckpointCommitted` of ours among its events). A commit after the round's
    /// deadline is refused instead (`Checkpoints::DeadlinePassed`, [`Self::Refused`]).
    NotRecorded,
    /// Refused as `Checkpoints::AlreadyCommitted`: the chain already holds a commit of ours
    /// for the round.
    AlreadyRecorded(ChainError),
    /// Refused as `Checkpoints::InnerPhaseNotOver`: the round takes no commit yet (it has not
    /// opened, or its first `min_round_length` blocks have not passed).
    NotYet(ChainError),
    /// Refused by the runtime for another reason (the round closed, we are not a member…):
    /// sending it again does not help.
    Refused(ChainError),
    /// Not confirmed (connection, transaction pool): it may be sent again.
    Failed(ChainError),
}

impl CommitOutcome {
    /// Classifies the result of submitting `who`'s commit of `round` of `pool`.
    fn of(result: Result<Included, ChainError>, pool: u32, round: u32, who: &AccountId) -> Self {
        match result {
            Ok(included) => {
                let recorded = included.events.iter().any(|e| {
                    matches!(e, SynodEvent::CheckpointCommitted { pool: p, round: r, who: w, .. }
                        if *p == pool && *r == round && w == who)
                });
                if recorded {
                    Self::Recorded
                } else {
                    Self::NotRecorded
                }
            }
            Err(e) if e.is_module("Checkpoints", "AlreadyCommitted") => Self::AlreadyRecorded(e),
            Err(e) if e.is_module("Checkpoints", "InnerPhaseNotOver") => Self::NotYet(e),
            Err(e @ (ChainError::Module { .. } | ChainError::Dispatch(_))) => Self::Refused(e),
            Err(e) => Self::Failed(e),
        }
    }
}

/// Submits `Checkpoints.commit_checkpoint(pool, round, hash, included)` signed by `signer` once and says
/// what came of it: the one way every path of the member (the round's background commit, its
/// retries, the commit over an agreed set, the attestation of a round that aggregated us)
/// commits a checkpoint.
pub(super) async fn submit_commit(
    chain: &Chain,
    signer: &Signer,
    pool: u32,
    round: u32,
    hash: CheckpointHash,
    included: Vec<u32>,
) -> CommitOutcome {
    let call = calls::commit_checkpoint(pool, round, hash, included);
    CommitOutcome::of(
        chain.submit(&call, signer).await,
        pool,
        round,
        &account_of(signer),
    )
}

/// Blocks kept back before a round's deadline for the outer step, our commit's inclusion and
/// the finality lag of the block the deadline is read at: the exchange stops waiting this
/// many blocks before it.
const EXCHANGE_MARGIN_BLOCKS: u64 = 5;

/// How long an exchange may wait for payloads: `wait` (`MemberConfig::round_deadline`), but no longer than
/// until [`EXCHANGE_MARGIN_BLOCKS`] before the round's `deadline` block, read at finalized
/// block `finalized` with blocks of `block_secs` seconds (zero when that is past). A member
/// that announces and then serves its payload slowly holds the exchange open until then (one
/// that never announces, for [`announce_grace`]), so a wait past the chain's deadline would
/// make every honest commit land after it: the round voided and every honest member leaked as
/// silent.
fn exchange_wait(wait: Duration, deadline: u64, finalized: u64, block_secs: f64) -> Duration {
    until_margin(deadline, finalized, EXCHANGE_MARGIN_BLOCKS, block_secs).min(wait)
}

/// How long an exchange waits for a live member to announce its payload after we announced
/// ours ([`ExchangeConfig::announce_grace`]): two of our inner phases (`inner_steps` of
/// `step_secs` seconds each, measured at start), and at least the exchange's default (30 s).
/// In plain rounds, a member whose checkpoint lost the previous round cancels the phase it
/// trained ahead from it at the close, reloads the final checkpoint and trains the phase
/// again: it announces the reload plus up to one phase (the time from its commit to the
/// close, at most) after the others. Left out of this round too, its checkpoint would lose
/// again, and so on for good; two phases cover it, and an honest member up to three times as
/// slow as us. A member that
/// heartbeats and never announces then stretches a round by this, not to its deadline.
pub(super) fn announce_grace(step_secs: f64, inner_steps: u32) -> Duration {
    let floor = ExchangeConfig::default().announce_grace;
    let two_phases = 2.0 * step_secs * f64::from(inner_steps);
    if two_phases.is_finite() && two_phases > floor.as_secs_f64() {
        Duration::try_from_secs_f64(two_phases).unwrap_or(floor)
    } else {
        floor
    }
}

impl Trainer {
    /// Keeps the included set's payloads and signed announcements of `round` for verification.
    ///
    /// # Errors
    /// The duty worker has stopped ([`super::duty::DutyHandle::verify`]).
    pub(super) fn retain(&mut self, round: u32, ex: &ExchangeOutcome) -> Result<()> {
        for c in ex.included.iter().filter(|c| c.member != self.ctx.me) {
            let ann = ex.announcements.get(&c.member).map(|a| a.as_slice());
            if let Err(e) = self.ctx.retained.save(round, c.member, &c.payload, ann) {
                tracing::warn!(round, member = c.member, "cannot keep evidence: {e}");
            }
        }
        self.duties.verify(round)
    }

    /// Keeps our payload `mine` of round `r`, computed from checkpoint `start`, before it is
    /// announced — or, recomputed after a restart, swaps in the one kept then.
    pub(super) fn keep_own(
        &mut self,
        r: u32,
        start: &CheckpointHash,
        mine: &mut Contribution,
    ) -> Result<()> {
        // We sign one payload per round. It is kept before it is announced, so that,
        // restarted mid-round, we serve these very bytes again (`catch_up`) instead of
        // leaving peers waiting for a payload nobody holds; and a kept one wins over a
        // recomputation, which another thread count or device may round differently (two
        // signed payloads for one round read as equivocation).
        // Announcing a payload we could not keep would risk a second, different one after
        // a restart: an equivocation, slashed on-chain. A member that cannot write its
        // evidence directory stops instead.
        match self.ctx.retained.own(r, self.ctx.me, start) {
            Some(kept) => {
                // Recomputed after a restart: the kept payload's trace is the one we serve.
                self.ctx.forget_trace(r, &mine.payload, Some(&kept));
                self.ctx.serve_trace(r, &kept);
                mine.payload = Arc::new(kept);
            }
            None => {
                // A payload kept for r from another start is dead: so is its trace (but
                // not the states ours shares with it: same θ, other momentum).
                if let Some(old) = self.ctx.retained.payload(r, self.ctx.me) {
                    self.ctx.forget_trace(r, &old, Some(&mine.payload));
                }
                self.ctx
                    .retained
                    .save_own(r, self.ctx.me, start, &mine.payload)
                    .with_context(|| {
                        format!("keeping our payload of round {r} before announcing it")
                    })?;
            }
        }
        Ok(())
    }

    /// How long round `r`'s exchange may wait for payloads: `wait` (`MemberConfig::round_deadline`), cut
    /// to [`exchange_wait`] of the chain's deadline when `r` is the open round. If the chain
    /// cannot be read (the node restarting), `wait`: the round goes on, uncut.
    fn exchange_wait(&self, r: u32, wait: Duration) -> Duration {
        let chain = &self.ctx.chain;
        let read = self.ctx.block_on(async {
            let open = chain.open_round(self.ctx.pool).await?;
            let finalized = chain.finalized_number().await?;
            Ok::<_, synod_chain::ChainError>((open, finalized))
        });
        match read {
            Ok((Some(open), finalized)) if open.round == r => exchange_wait(
                wait,
                u64::from(open.deadline),
                finalized,
                self.ctx.block_secs,
            ),
            Ok(_) => wait,
            Err(e) => {
                tracing::warn!(
                    round = r,
                    "exchange waits {wait:?}: cannot read the round's deadline: {e}"
                );
                wait
            }
        }
    }

    /// Round `r` from our payload `mine` (computed from checkpoint `start`): all-gathers the
    /// included set, keeps its evidence, applies the outer step to `state` (θ_{r−1}, blake3
    /// `parent`) with the snapshot's stakes ([`Trainer::round_stakes`]; `stakes` before the
    /// round opens), serves the checkpoint and commits it in the
    /// background. Returns the pending commit and the round's record (without its inner
    /// phase's figures and validation loss).
    #[allow(
        clippy::too_many_arguments,
        reason = "the round's inputs, each used once"
    )]
    pub(super) fn exchange_and_commit(
        &mut self,
        r: u32,
        mine: Contribution,
        state: &mut OuterState,
        parent: CheckpointHash,
        start: CheckpointHash,
        stakes: synod_diloco::Stakes,
        ctx: &RoundCtx,
    ) -> Result<(Pending, RoundRecord)> {
        let payload_bytes = mine.payload.len() as u64;
        let xcfg = ExchangeConfig {
            deadline: self.exchange_wait(r, ctx.xcfg.deadline),
            ..ctx.xcfg
        };
        let sp = super::spinner(
            self.ctx.a.quiet,
            format!("round {r}: exchanging pseudo-gradients (fetching the members' payloads)"),
        );
        let ex = self
            .ctx
            .block_on(all_gather(&self.ctx.client, r, mine.payload, xcfg));
        sp.finish_and_clear();
        let ex = ex?;
        let received: u64 = ex
            .included
            .iter()
            .filter(|c| c.member != self.ctx.me)
            .map(|c| c.payload.len() as u64)
            .sum();
        self.metrics.emit(&TrainerEvent::Exchange {
            bytes_received: received,
            peers_connected: self.ctx.client.snapshot().connected.len() as u64,
            round: r,
        })?;
        self.retain(r, &ex)?;
        let t_outer = Instant::now();
        let included = contributions(&ex.included);
        // The snapshot's weights: the round may have opened during the exchange.
        let stakes = self.round_stakes(r, stakes);
        let outcome = match state.apply(&included, ctx.rule.aggregator(Some(&stakes)).as_ref()) {
            Ok(outcome) => outcome,
            Err(e) => {
                // A peer's payload (a `mean` pool's outer gradient too large for f32) or the
                // exchange left nothing to apply: we commit nothing, θ stays as it was, and we
                // wait for the chain's outcome of the round like a member whose commit failed.
                tracing::warn!(round = r, "not committing round {r}: {e}");
                let reason = format!("not committed: {e}");
                let rec = RoundRecord {
                    bytes_sent_per_worker: payload_bytes,
                    exchange_secs: ex.secs,
                    excluded: ex.excluded,
                    ..self.blank(r)
                };
                let pending = Pending {
                    round: r,
                    hash: NOT_COMMITTED,
                    commit: self.ctx.rt.spawn(async move { Err(reason) }),
                    included: Vec::new(),
                    parent,
                    start,
                    stakes,
                };
                return Ok((pending, rec));
            }
        };
        self.ctx.store.put(&outcome.checkpoint)?;
        self.ctx.block_on(
            self.ctx
                .client
                .serve_checkpoint(Arc::new(outcome.checkpoint)),
        )?;
        let outer_secs = t_outer.elapsed().as_secs_f64();
        self.tokens +=
            outcome.included.len() as u64 * u64::from(self.ctx.inner_steps) * ctx.batch_tokens;
        let rec = RoundRecord {
            bytes_sent_per_worker: payload_bytes,
            checkpoint_hash: Some(synod_checkpoint::hex(&outcome.hash)),
            included: outcome.included.clone(),
            outer_secs,
            exchange_secs: ex.secs,
            excluded: ex.excluded,
            ..self.blank(r)
        };
        let (chain, signer, pool, hash, included) = (
            self.ctx.chain.clone(),
            self.ctx.signer.clone(),
            self.ctx.pool,
            outcome.hash,
            outcome.included.clone(),
        );
        let withhold = self.ctx.a.fault == Some(Fault::Late);
        let block = Duration::from_secs_f64(self.ctx.block_secs.max(0.1));
        let commit = self.ctx.rt.spawn(async move {
            if withhold {
                return Ok(());
            }
            // A round refuses commits in its first `min_round_length` blocks (and before it
            // opens): a member faster than that waits a block and commits again, while the
            // round is the pool's open one (at most `min_round_length` blocks).
            loop {
                match submit_commit(&chain, &signer, pool, r, hash, included.clone()).await {
                    CommitOutcome::Recorded | CommitOutcome::AlreadyRecorded(_) => return Ok(()),
                    CommitOutcome::NotYet(e) => {
                        match chain.open_round(pool).await {
                            Ok(open) if open.as_ref().is_none_or(|o| o.round != r) => {
                                return Err(format!("{e} (round {r} is not the open round)"));
                            }
                            Ok(_) => {}
                            // A failed read is not a closed round: ask again next block.
                            Err(read) => {
                                tracing::warn!(round = r, "reading the open round: {read}")
                            }
                        }
                        tracing::debug!(round = r, "round {r} accepts no commit yet: {e}");
                        tokio::time::sleep(block).await;
                    }
                    CommitOutcome::NotRecorded => return Err(NOT_RECORDED.into()),
                    CommitOutcome::Refused(e) | CommitOutcome::Failed(e) => {
                        return Err(e.to_string())
                    }
                }
            }
        });
        Ok((
            Pending {
                round: r,
                hash: outcome.hash,
                commit,
                included: outcome.included,
                parent,
                start,
                stakes,
            },
            rec,
        ))
    }
}

/// The exchange's included payloads as DiLoCo contributions (the bytes are shared, not copied).
fn contributions(included: &[synod_p2p::Gathered]) -> Vec<Contribution> {
    included
        .iter()
        .map(|g| Contribution {
            member: g.member,
            payload: g.payload.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exchange_stops_waiting_before_the_rounds_deadline() {
        let wait = Duration::from_secs(300);
        // 60 blocks of 2 s left, 5 kept back: 110 s.
        assert_eq!(exchange_wait(wait, 160, 100, 2.0), Duration::from_secs(110));
        // Far from the deadline: the configured wait.
        assert_eq!(exchange_wait(wait, 10_000, 100, 2.0), wait);
        // At or past the margin: no wait.
        assert_eq!(exchange_wait(wait, 104, 100, 2.0), Duration::ZERO);
        assert_eq!(exchange_wait(wait, 50, 100, 2.0), Duration::ZERO);
        assert_eq!(exchange_wait(wait, u64::MAX, 0, f64::NAN), Duration::ZERO);
        assert_eq!(exchange_wait(wait, u64::MAX, 0, f64::INFINITY), wait);
    }

    /// A member 0.5 s per inner step at H = 500 (250 s phases) waits 500 s for an
    /// announcement: a member that lost the previous round cancels the phase it trained ahead,
    /// reloads the final checkpoint and trains it again, up to 250 s (plus the reload) after us. A fast one waits the 30 s floor; a
    /// nonsense measurement falls back to the floor.
    #[test]
    fn an_unannounced_member_is_awaited_two_inner_phases_and_at_least_30_s() {
        assert_eq!(announce_grace(0.5, 500), Duration::from_secs(500));
        assert_eq!(announce_grace(0.1, 100), Duration::from_secs(30));
        assert_eq!(announce_grace(0.01, 100), Duration::from_secs(30));
        assert_eq!(announce_grace(f64::NAN, 100), Duration::from_secs(30));
        assert_eq!(announce_grace(f64::INFINITY, 100), Duration::from_secs(30));
        assert_eq!(announce_grace(-1.0, 100), Duration::from_secs(30));
        assert_eq!(announce_grace(1e300, u32::MAX), Duration::from_secs(30));
    }

    fn module(error: &str) -> ChainError {
        ChainError::Module {
            pallet: "Checkpoints".into(),
            error: error.into(),
            docs: String::new(),
        }
    }

    fn of(result: Result<Included, ChainError>) -> CommitOutcome {
        CommitOutcome::of(result, 1, 4, &AccountId::from([2; 32]))
    }

    fn landed(events: Vec<SynodEvent>) -> Result<Included, ChainError> {
        Ok(Included {
            block_hash: [7; 32],
            block_number: 9,
            events,
        })
    }

    fn committed(pool: u32, round: u32, who: u8) -> SynodEvent {
        SynodEvent::CheckpointCommitted {
            pool,
            round,
            who: AccountId::from([who; 32]),
            hash: [3; 32],
        }
    }

    #[test]
    fn a_commit_counts_only_when_the_chain_records_it_for_us() {
        assert!(matches!(
            of(landed(vec![committed(1, 4, 2)])),
            CommitOutcome::Recorded
        ));
        // A landed extrinsic without our record (another event only) counts for nothing.
        let voided = SynodEvent::RoundVoided { pool: 1, round: 4 };
        assert!(matches!(
            of(landed(vec![voided])),
            CommitOutcome::NotRecorded
        ));
        // Another member's, another round's or another pool's record is not ours.
        for other in [committed(1, 4, 5), committed(1, 3, 2), committed(2, 4, 2)] {
            assert!(matches!(
                of(landed(vec![other])),
                CommitOutcome::NotRecorded
            ));
        }
    }

    #[test]
    fn a_commit_s_outcome_tells_a_held_commit_a_round_not_ready_a_refusal_and_a_lost_send_apart() {
        assert!(matches!(
            of(Err(module("AlreadyCommitted"))),
            CommitOutcome::AlreadyRecorded(_)
        ));
        assert!(matches!(
            of(Err(module("InnerPhaseNotOver"))),
            CommitOutcome::NotYet(_)
        ));
        assert!(matches!(
            of(Err(module("RoundNotOpen"))),
            CommitOutcome::Refused(_)
        ));
        // Past the deadline the chain refuses a commit: sending it again does not help (the
        // round is voided by the chain's queue or by `void_expired_round`).
        assert!(matches!(
            of(Err(module("DeadlinePassed"))),
            CommitOutcome::Refused(_)
        ));
        assert!(matches!(
            of(Err(ChainError::Dispatch("BadOrigin".into()))),
            CommitOutcome::Refused(_)
        ));
        // A pallet error of another pallet is a refusal, not a held commit.
        let other = ChainError::Module {
            pallet: "Rewards".into(),
            error: "AlreadyCommitted".into(),
            docs: String::new(),
        };
        assert!(matches!(of(Err(other)), CommitOutcome::Refused(_)));
        assert!(matches!(
            of(Err(ChainError::Rpc("connection reset".into()))),
            CommitOutcome::Failed(_)
        ));
        assert!(matches!(
            of(Err(ChainError::Rejected("Priority is too low".into()))),
            CommitOutcome::Failed(_)
        ));
    }
}
