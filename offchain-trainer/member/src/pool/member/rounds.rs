//! The round loops, plain and overlapped: each round's inner phase (with its Proof-of-Learning
//! trace), confirmation of the parent, then [`super::commit`] and [`super::settle`].

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use synod_checkpoint::CheckpointHash;
use synod_codec::EncodeOptions;
use synod_diloco::{AggregationRule, Contribution, DilocoError, InnerReport, OuterState};
use synod_model::TchInnerTrainer;
use synod_p2p::{Client, ExchangeConfig};

use super::settle::{Closed, Pending, NOT_COMMITTED};
use super::Trainer;
use crate::pool::verify::carried::expected_carried_in;
use crate::pool::verify::Retained;
use crate::train::RoundRecord;
use synod_diloco::residual::NO_RESIDUAL;

/// What every round of one `train` call shares.
pub(super) struct RoundCtx {
    pub(super) codec: EncodeOptions,
    pub(super) rule: AggregationRule,
    pub(super) xcfg: ExchangeConfig,
    /// A member's empty error-feedback memory, for dense codecs (never filled); a sparse
    /// pool's rounds each get theirs ([`Trainer::round_feedback`]).
    pub(super) feedback: synod_diloco::ErrorFeedback,
    /// Tokens of one inner step's batch.
    pub(super) batch_tokens: u64,
    /// Inner steps whose full state goes into our Proof-of-Learning trace (empty: no trace).
    pub(super) boundaries: Vec<u32>,
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
}
