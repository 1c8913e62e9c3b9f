//! The rounds: optimistic inner phase, confirmation of the parent, exchange, outer step,
//! background commit; then the end of the pool.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use synod_chain::calls;
use synod_chain::types::PoolStatus;
use synod_checkpoint::CheckpointHash;
use synod_codec::EncodeOptions;
use synod_diloco::{AggregationRule, Contribution, DilocoError, InnerReport, OuterState};
use synod_model::TchInnerTrainer;
use synod_p2p::{all_gather, Client, ExchangeConfig, ExchangeOutcome};
use tokio::task::JoinHandle;

use super::Trainer;
use crate::chain_args::Fault;
use crate::event::TrainerEvent;
use crate::plot::{loss_vs_tokens, Curve};
use crate::pool::verify::carried::expected_carried_in;
use crate::pool::verify::Retained;
use crate::train::RoundRecord;
use synod_diloco::residual::NO_RESIDUAL;

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
const NOT_COMMITTED: CheckpointHash = [0; 32];

/// What every round of one `train` call shares.
pub(super) struct RoundCtx {
    codec: EncodeOptions,
    rule: AggregationRule,
    xcfg: ExchangeConfig,
    /// A member's empty error-feedback memory, for dense codecs (never filled); a sparse
    /// pool's rounds each get theirs ([`Trainer::round_feedback`]).
    feedback: synod_diloco::ErrorFeedback,
    /// Tokens of one inner step's batch.
    batch_tokens: u64,
    /// Inner steps whose full state goes into our Proof-of-Learning trace (empty: no trace).
    boundaries: Vec<u32>,
}

/// Our payload of a round computed ahead (overlapped rounds) from checkpoint `start`.
struct Computed {
    round: u32,
    start: CheckpointHash,
    mine: Contribution,
    report: InnerReport,
}

impl RoundRecord {
    /// This round's record with its inner phase's `report` (mean loss, seconds).
    fn with_phase(self, report: &InnerReport) -> Self {
        RoundRecord {
            train_loss: report.mean_loss,
            compute_secs: report.secs,
            ..self
        }
    }
}

/// Our contribution to the round after `from` (θ and its round number), run by `worker` as
/// member `me` with the error-feedback memory `feedback`, with its Proof-of-Learning trace:
/// every boundary state (and a sparse payload's residual `e_r`) is kept with the round's
/// evidence in `retained` and served by its blake3 through `client` (the hashes go in front
/// of the payload).
///
/// # Errors
/// libtorch and encoding errors; a trace state that cannot be written.
fn traced_phase(
    from: &OuterState,
    worker: &mut TchInnerTrainer,
    me: u32,
    ctx: &RoundCtx,
    feedback: &mut synod_diloco::ErrorFeedback,
    retained: &Retained,
    client: &Client,
) -> Result<(Contribution, InnerReport)> {
    let r = from.round + 1;
    Ok(from.contribute_traced(
        worker,
        me,
        &ctx.codec,
        feedback,
        &ctx.boundaries,
        &mut |_, bytes, hash| {
            let path = retained
                .save_trace_state(r, &hash, &bytes)
                .map_err(|e| DilocoError::Inner(format!("keeping a trace state: {e:#}")))?;
            client.serve_file(hash, path);
            Ok(())
        },
    )?)
}

impl Trainer {
    /// Our error-feedback memory for round `r`, whose inner phase starts from the checkpoint
    /// of round r − 1 with included set `included_prev`: a fresh one for dense codecs; for
    /// the sparse codec, `e_{r−1}` as the shared rule names it
    /// ([`expected_carried_in`]): our round r − 1 residual, read back from our evidence, if our
    /// payload is in `included_prev`, else zero. `e_{r−1}` is copied into round r's evidence
    /// and served from there: verifiers of round r fetch it after round r − 1's evidence may
    /// be gone.
    ///
    /// A residual that cannot be read back (our evidence deleted under us) is replaced by
    /// zero, with a warning: the payload's `carried_in` then breaks the rule and verifiers
    /// will flag it, which nothing here can avoid.
    fn round_feedback(
        &self,
        r: u32,
        included_prev: &[u32],
        like: &synod_checkpoint::ParamSet,
    ) -> synod_diloco::ErrorFeedback {
        let outer = &self.ctx.a.recipe.outer;
        if !outer.wire.sparse() {
            return outer.feedback();
        }
        let residual = match expected_carried_in(&self.ctx.retained, r, self.ctx.me, included_prev)
        {
            Some(h) if h == NO_RESIDUAL => None,
            Some(h) => self.read_residual(r, &h, like),
            None => {
                tracing::warn!(
                    round = r,
                    "our payload of round {} is not kept: starting from a zero residual",
                    r - 1
                );
                None
            }
        };
        synod_diloco::ErrorFeedback::committed(outer.ef_decay, residual)
    }

    /// Our residual `hash` of round `r − 1`, read from its evidence and checked, then kept and
    /// served with round `r`'s; `None` (warned) if it is gone or damaged.
    fn read_residual(
        &self,
        r: u32,
        hash: &[u8; 32],
        like: &synod_checkpoint::ParamSet,
    ) -> Option<synod_diloco::PseudoGradient> {
        let read = || -> Result<synod_diloco::PseudoGradient> {
            let bytes = self.ctx.retained.kept_state(r - 1, hash)?;
            let e = synod_diloco::residual::residual_from_bytes(like, &bytes)?;
            let path = self.ctx.retained.save_trace_state(r, hash, &bytes)?;
            self.ctx.client.serve_file(*hash, path);
            Ok(e)
        };
        read()
            .map_err(|e| {
                tracing::warn!(
                    round = r,
                    residual = synod_checkpoint::hex(hash),
                    "cannot carry our residual in, starting from zero: {e:#}"
                );
            })
            .ok()
    }

    /// Waits for our commit of `p` to be processed and for the round to close on-chain; if the
    /// members' included sets split and the chain fixes another set than ours, aggregates that
    /// one and commits again ([`Trainer::recommit`]).
    fn settle(&mut self, mut p: Pending) -> Result<Closed> {
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
        let closed = loop {
            let chain = &self.ctx.chain;
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

    /// Keeps the included set's payloads and signed announcements of `round` for verification.
    ///
    /// # Errors
    /// The duty worker has stopped ([`super::duty::DutyHandle::verify`]).
    fn retain(&mut self, round: u32, ex: &ExchangeOutcome) -> Result<()> {
        for c in ex.included.iter().filter(|c| c.member != self.ctx.me) {
            let ann = ex.announcements.get(&c.member).map(|a| a.as_slice());
            if let Err(e) = self.ctx.retained.save(round, c.member, &c.payload, ann) {
                tracing::warn!(round, member = c.member, "cannot keep evidence: {e}");
            }
        }
        self.duties.verify(round)
    }

    /// Trains until the pool's last round; returns the last round we computed.
    pub(super) fn train(&mut self, from_round: u32, resumed: bool) -> Result<u32> {
        // After a restart, the traces of our rounds that can still be verified are served
        // again (they are kept with the rounds' evidence).
        for r in self.ctx.retained.rounds() {
            if let Some(payload) = self.ctx.retained.payload(r, self.ctx.me) {
                self.ctx.serve_trace(r, &payload);
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
                    checkpoint_hash: Some(synod_checkpoint::hex(&self.ctx.recipe.theta0_hash)),
                    ..r0
                },
                None,
            )?;
        }
        let codec = self.ctx.a.recipe.outer.encode_options();
        let rule = self.ctx.a.recipe.outer.aggregation().rule();
        let xcfg = ExchangeConfig {
            deadline: Duration::from_secs(self.ctx.a.round_deadline),
            max_payload_bytes: self.ctx.recipe.max_payload_bytes,
            ..ExchangeConfig::default()
        };
        let batch_tokens =
            (self.ctx.recipe.setup.plan.batch * self.ctx.recipe.setup.plan.seq_len) as u64;
        let boundaries = if self.ctx.a.recipe.model.keep_inner_state {
            Vec::new() // not replayable from θ alone: no trace either
        } else {
            self.ctx.a.recipe.segment_boundaries(self.ctx.inner_steps)
        };
        let ctx = RoundCtx {
            codec,
            feedback: self.ctx.a.recipe.outer.feedback(),
            rule,
            xcfg,
            batch_tokens,
            boundaries,
        };
        // The first round's wall clock starts here, after catching up.
        self.round_clock = Instant::now();
        self.duties.take_busy_secs();
        if self.ctx.a.recipe.outer.overlap {
            return self.train_overlapped(state, parent, &ctx);
        }
        let mut pending: Option<Pending> = None;
        let mut last = 0;
        while state.round < self.ctx.spec_rounds {
            let r = state.round + 1;
            self.refresh_members(r)?;
            // θ_{r−1}'s included set: ours while its commit is pending (optimistic), else the
            // chain's (a final checkpoint we loaded).
            let included_prev = match &pending {
                Some(p) => p.included.clone(),
                None => self.ctx.final_included(state.round)?,
            };
            let mut feedback = self.round_feedback(r, &included_prev, &state.params);
            let worker = self
                .worker
                .as_mut()
                .ok_or_else(|| anyhow!("no inner trainer"))?;
            let (mut mine, report) = traced_phase(
                &state,
                worker,
                self.ctx.me,
                &ctx,
                &mut feedback,
                &self.ctx.retained,
                &self.ctx.client,
            )?;
            if let Some(p) = pending.take() {
                let ours = p.hash;
                match self.settle(p)? {
                    Closed::Final(h) if h == ours => parent = ours,
                    _ => {
                        // That phase started from a θ_{r−1} that lost: its trace is dead.
                        self.ctx.forget_trace(r, &mine.payload, None);
                        let (_, hash) = self.ctx.last_final()?;
                        state = self.load(hash, r - 1)?;
                        parent = hash;
                        continue;
                    }
                }
            }
            // Round r is open on-chain now (r − 1 closed): gather from its frozen snapshot,
            // whose stakes (not the payloads that arrive) set the aggregate's trim.
            let stakes = self.refresh_members(r)?;
            self.inject_fault(r, &state, &mut mine, &ctx.codec)?;
            self.keep_own(r, &parent, &mut mine)?;
            let (p, rec) =
                self.exchange_and_commit(r, mine, &mut state, parent, parent, stakes, &ctx)?;
            self.record(&state, rec.with_phase(&report), Some(report.secs))?;
            last = r;
            if p.hash == NOT_COMMITTED {
                // Nothing of ours to train round r + 1 from: wait for round r to close and go
                // on from its outcome, numbered as after round r (a voided round changed
                // nothing: round r + 1 trains from θ_{r−1}).
                match self.settle(p)? {
                    Closed::Final(h) => {
                        state = self.load(h, r)?;
                        parent = h;
                    }
                    Closed::Voided => {
                        let (_, hash) = self.ctx.last_final()?;
                        state = self.load(hash, r)?;
                        parent = hash;
                    }
                }
                continue;
            }
            pending = Some(p);
        }
        if let Some(p) = pending.take() {
            if let Closed::Final(h) = self.settle(p)? {
                // Keep the final file even if ours lost the vote.
                let peers = self.peers();
                self.ctx.block_on(self.ctx.store.get_or_fetch(
                    &self.ctx.client,
                    &peers,
                    h,
                    Duration::from_secs(300),
                ))?;
            }
        }
        Ok(last)
    }

    /// [`Trainer::train`] with overlapped rounds (`--overlap`, a one-step-delayed outer update;
    /// [`synod_diloco::OuterState::overlapped`]): while round r's pseudo-gradients are
    /// exchanged, aggregated, committed and settled on-chain, round r + 1's inner phase runs on
    /// another thread from θ_{r−1}, the last final checkpoint, which no outcome of round r can
    /// change — nothing is computed optimistically, so no lost vote or voided round discards
    /// an inner phase (only a restart does, and the kept payload then wins). Round r's inner
    /// phase starts from [`Trainer::inner_start`].
    fn train_overlapped(
        &mut self,
        mut state: OuterState,
        mut parent: CheckpointHash,
        ctx: &RoundCtx,
    ) -> Result<u32> {
        let mut next: Option<Computed> = None;
        let mut last = 0;
        while state.round < self.ctx.spec_rounds {
            let r = state.round + 1;
            let stakes = self.refresh_members(r)?;
            let start = self.ctx.inner_start(r, parent)?;
            // Inner-phase seconds run within this round's wall clock.
            let mut busy = 0.0;
            let (mut mine, report) = match next.take() {
                Some(c) if c.round == r && c.start == start => (c.mine, c.report),
                stale => {
                    if let Some(c) = stale {
                        self.ctx.forget_trace(c.round, &c.mine.payload, None);
                    }
                    // θ_{r−2} after a restart or a round computed ahead from another start
                    // (not pinned as the last final checkpoint: it is not).
                    let from = if start == parent {
                        state.clone()
                    } else {
                        let peers = self.peers();
                        let bytes = self.ctx.block_on(self.ctx.store.get_or_fetch(
                            &self.ctx.client,
                            &peers,
                            start,
                            Duration::from_secs(300),
                        ))?;
                        self.ctx.a.recipe.outer.restore(&bytes, r - 1)?
                    };
                    let worker = self
                        .worker
                        .as_mut()
                        .ok_or_else(|| anyhow!("no inner trainer"))?;
                    let phase = traced_phase(
                        &from,
                        worker,
                        self.ctx.me,
                        ctx,
                        &mut ctx.feedback.clone(),
                        &self.ctx.retained,
                        &self.ctx.client,
                    )?;
                    busy += phase.1.secs;
                    phase
                }
            };
            self.inject_fault(r, &state, &mut mine, &ctx.codec)?;
            self.keep_own(r, &start, &mut mine)?;
            // Round r + 1 starts from θ_{r−1}: its inner phase runs while round r settles.
            let ahead = (r < self.ctx.spec_rounds)
                .then(|| {
                    let mut from = state.clone();
                    from.round = r; // θ_{r−1}, numbered so that its next round is r + 1
                    self.worker.take().map(|w| (from, w))
                })
                .flatten();
            let (retained, client, me) = (
                self.ctx.retained.clone(),
                self.ctx.client.clone(),
                self.ctx.me,
            );
            let (settled, job) = std::thread::scope(|s| {
                let job = ahead.map(|(from, mut w)| {
                    s.spawn(move || {
                        // Overlapped rounds are dense (`Recipe::load` refuses sparse).
                        let mut feedback = ctx.feedback.clone();
                        let res =
                            traced_phase(&from, &mut w, me, ctx, &mut feedback, &retained, &client);
                        (w, res)
                    })
                });
                let settled = self
                    .exchange_and_commit(r, mine, &mut state, parent, start, stakes, ctx)
                    .and_then(|(p, rec)| {
                        let ours = p.hash;
                        Ok((ours, self.settle(p)?, rec))
                    });
                (settled, job.map(|j| j.join()))
            });
            match job {
                Some(Ok((w, res))) => {
                    self.worker = Some(w);
                    let (mine, report) = res?;
                    busy += report.secs;
                    next = Some(Computed {
                        round: r + 1,
                        start: parent,
                        mine,
                        report,
                    });
                }
                Some(Err(_)) => bail!("the inner phase of round {} panicked", r + 1),
                None => {}
            }
            let (ours, closed, rec) = settled?;
            self.record(&state, rec.with_phase(&report), Some(busy))?;
            match closed {
                Closed::Final(h) if h == ours => parent = h,
                Closed::Final(h) => {
                    state = self.load(h, r)?;
                    parent = h;
                }
                Closed::Voided => {
                    // Round r + 1 goes on from θ_{r−1}; its number moves on.
                    state = self.load(parent, r)?;
                }
            }
            last = r;
        }
        Ok(last)
    }

    /// Keeps our payload `mine` of round `r`, computed from checkpoint `start`, before it is
    /// announced — or, recomputed after a restart, swaps in the one kept then.
    fn keep_own(&mut self, r: u32, start: &CheckpointHash, mine: &mut Contribution) -> Result<()> {
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

    /// Round `r` from our payload `mine` (computed from checkpoint `start`): all-gathers the
    /// included set, keeps its evidence, applies the outer step to `state` (θ_{r−1}, blake3
    /// `parent`) with the snapshot's `stakes`, serves the checkpoint and commits it in the
    /// background. Returns the pending commit and the round's record (without its inner
    /// phase's figures and validation loss).
    #[allow(
        clippy::too_many_arguments,
        reason = "the round's inputs, each used once"
    )]
    fn exchange_and_commit(
        &mut self,
        r: u32,
        mine: Contribution,
        state: &mut OuterState,
        parent: CheckpointHash,
        start: CheckpointHash,
        stakes: Vec<u128>,
        ctx: &RoundCtx,
    ) -> Result<(Pending, RoundRecord)> {
        let payload_bytes = mine.payload.len() as u64;
        let sp = super::spinner(
            self.ctx.a.quiet,
            format!("round {r}: exchanging pseudo-gradients (fetching the members' payloads)"),
        );
        let ex = self
            .ctx
            .block_on(all_gather(&self.ctx.client, r, mine.payload, ctx.xcfg));
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
        let included = crate::train::net::contributions(&ex.included);
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
        let commit = self.ctx.rt.spawn(async move {
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
