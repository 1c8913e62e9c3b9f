//! The round driver, one for plain and overlapped rounds: each round's inner phase (with its
//! Proof-of-Learning trace), [`super::commit`], then the next round's inner phase beside
//! [`super::settle`].

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use synod_checkpoint::CheckpointHash;
use synod_codec::EncodeOptions;
use synod_diloco::{
    AggregationRule, CancelToken, Contribution, DilocoError, InnerReport, OuterState,
};
use synod_model::TchInnerTrainer;
use synod_p2p::{Client, ExchangeConfig};

use super::settle::{Closed, NOT_COMMITTED};
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

/// Our payload of a round computed ahead (while the round before settled) from checkpoint
/// `start`.
struct Computed {
    round: u32,
    start: CheckpointHash,
    mine: Contribution,
    report: InnerReport,
}

/// An inner phase that did not finish: why, and the states it had already kept with its round's
/// evidence, the residual copied in for it included (dead now:
/// [`super::ctx::Ctx::forget_states`]).
struct Unfinished {
    error: DilocoError,
    kept: Vec<[u8; 32]>,
}

/// Our contribution to the round after `from` (θ and its round number), run by `worker` as
/// member `me` with the error-feedback memory `feedback`, with its Proof-of-Learning trace:
/// every boundary state (and a sparse payload's residual `e_r`) is kept with the round's
/// evidence in `retained` and served by its blake3 through `client` (the hashes go in front
/// of the payload). `copied`: the residual `e_{r−1}` already copied into the round's evidence
/// for it ([`Trainer::round_feedback`]).
///
/// # Errors
/// libtorch and encoding errors, a trace state that cannot be written, the worker's
/// [`CancelToken`] cancelled ([`DilocoError::Cancelled`]); each with the states kept so far.
#[allow(
    clippy::too_many_arguments,
    reason = "the phase thread's inputs: owned clones of the member's handles, passed apart"
)]
fn traced_phase(
    from: &OuterState,
    worker: &mut TchInnerTrainer,
    me: u32,
    ctx: &RoundCtx,
    feedback: &mut synod_diloco::ErrorFeedback,
    retained: &Retained,
    client: &Client,
    copied: Option<[u8; 32]>,
) -> Result<(Contribution, InnerReport), Unfinished> {
    let r = from.round + 1;
    let mut kept: Vec<[u8; 32]> = copied.into_iter().collect();
    let phase = from.contribute_traced(
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
            kept.push(hash);
            Ok(())
        },
    );
    phase.map_err(|error| Unfinished { error, kept })
}

impl Trainer {
    /// Our error-feedback memory for round `r`, whose inner phase starts from the checkpoint
    /// of round r − 1 with included set `included_prev` (ours while our commit of round r − 1
    /// is pending; `None`: the chain's, of a final checkpoint): a fresh one for dense codecs; for
    /// the sparse codec, `e_{r−1}` as the shared rule names it
    /// ([`expected_carried_in`]): our round r − 1 residual, read back from our evidence, if our
    /// payload is in `included_prev`, else zero. `e_{r−1}` is copied into round r's evidence
    /// and served from there: verifiers of round r fetch it after round r − 1's evidence may
    /// be gone.
    ///
    /// A residual that cannot be read back (our evidence deleted under us) is replaced by
    /// zero, with a warning: the payload's `carried_in` then breaks the rule and verifiers
    /// will flag it, which nothing here can avoid.
    ///
    /// Returns the memory and the hash of the residual copied into round r's evidence, if one
    /// was.
    ///
    /// # Errors
    /// The chain's included set of round r − 1 cannot be read.
    fn round_feedback(
        &self,
        r: u32,
        included_prev: Option<&[u32]>,
        like: &synod_checkpoint::ParamSet,
    ) -> Result<(synod_diloco::ErrorFeedback, Option<[u8; 32]>)> {
        let recipe = &self.ctx.recipe.pool;
        if !recipe.is_sparse() {
            return Ok((recipe.feedback(), None));
        }
        let chain_set;
        let included_prev = match included_prev {
            Some(set) => set,
            None => {
                chain_set = self.ctx.final_included(r - 1)?;
                &chain_set
            }
        };
        let (residual, copied) =
            match expected_carried_in(&self.ctx.retained, r, self.ctx.me, included_prev) {
                Some(h) if h == NO_RESIDUAL => (None, None),
                Some(h) => {
                    let e = self.read_residual(r, &h, like);
                    let copied = e.is_some().then_some(h);
                    (e, copied)
                }
                None => {
                    tracing::warn!(
                        round = r,
                        "our payload of round {} is not kept: starting from a zero residual",
                        r - 1
                    );
                    (None, None)
                }
            };
        Ok((
            synod_diloco::ErrorFeedback::committed(recipe.ef_decay(), residual),
            copied,
        ))
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
        let Some((state, parent)) = self.catch_up(from_round, resumed)? else {
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
        let codec = self.ctx.recipe.pool.encode_options();
        let rule = self.ctx.recipe.pool.aggregation;
        let xcfg = ExchangeConfig {
            deadline: self.ctx.a.round_deadline,
            announce_grace: super::commit::announce_grace(self.ctx.step_secs, self.ctx.inner_steps),
            max_payload_bytes: self.ctx.recipe.max_payload_bytes,
            ..ExchangeConfig::default()
        };
        let batch_tokens =
            (self.ctx.recipe.setup.plan.batch * self.ctx.recipe.setup.plan.seq_len) as u64;
        let boundaries = if self.ctx.recipe.pool.keep_inner_state {
            Vec::new() // not replayable from θ alone: no trace either
        } else {
            self.ctx
                .recipe
                .pool
                .segment_boundaries(self.ctx.inner_steps)
        };
        let ctx = RoundCtx {
            codec,
            feedback: self.ctx.recipe.pool.feedback(),
            rule,
            xcfg,
            batch_tokens,
            boundaries,
        };
        // The first round's wall clock starts here, after catching up.
        self.round_clock = Instant::now();
        self.duties.take_busy_secs();
        self.drive(state, parent, &ctx)
    }

    /// The round driver, for plain and overlapped rounds alike: round r's inner phase (computed
    /// ahead during round r − 1 when its start still holds, else now), the exchange, the outer
    /// step and the commit of round r; then round r + 1's inner phase on a thread of its own
    /// while round r settles on-chain here. Where round r + 1's phase starts is the schedule's
    /// one difference:
    /// - **plain rounds** train optimistically from our θ_r, before the chain closes round r:
    ///   if another checkpoint wins or round r is voided, that phase is discarded and round
    ///   r + 1 is trained again from the final checkpoint (a wrong payload is never
    ///   announced);
    /// - **overlapped rounds** ([`synod_diloco::OuterState::overlapped`], `PoolRecipe::overlap`, a
    ///   one-step-delayed outer update) train from θ_{r−1}, the last final checkpoint, which
    ///   no outcome of round r can change ([`crate::pool::inner_start`]): nothing is
    ///   discarded but after a restart.
    ///
    /// A phase trained ahead from a start that round r's close did not keep is cancelled at the
    /// close ([`CancelToken`], before its next inner step) rather than awaited, and its trace
    /// states are deleted: the phase from the final checkpoint starts at once.
    ///
    /// Returns the last round we computed.
    fn drive(
        &mut self,
        mut state: OuterState,
        mut parent: CheckpointHash,
        ctx: &RoundCtx,
    ) -> Result<u32> {
        let overlap = self.ctx.recipe.pool.overlap;
        let mut ahead: Option<Computed> = None;
        // Round r's start, when round r − 1's end already read it (to check the phase ahead).
        let mut next_start: Option<CheckpointHash> = None;
        let mut last = 0;
        while state.round < self.ctx.spec_rounds {
            let r = state.round + 1;
            let stakes = self.refresh_members(r)?;
            let start = match next_start.take() {
                Some(start) => start,
                None => self.ctx.inner_start(r, parent)?,
            };
            // Inner-phase seconds that run within this round's wall clock.
            let mut busy = 0.0;
            let (mut mine, report) = match ahead.take() {
                Some(c) if c.round == r && c.start == start => (c.mine, c.report),
                stale => {
                    if let Some(c) = stale {
                        // Trained from a start that lost (or, after a restart, not ours).
                        self.ctx.forget_trace(c.round, &c.mine.payload, None);
                    }
                    let phase = self.phase_now(r, &state, parent, start, ctx)?;
                    busy += phase.1.secs;
                    phase
                }
            };
            self.inject_fault(r, &state, &mut mine, &ctx.codec)?;
            self.keep_own(r, &start, &mut mine)?;
            let more = r < self.ctx.spec_rounds;
            // Owned: the scope below borrows `self` mutably while the phase thread runs.
            let (retained, client, me) = (
                self.ctx.retained.clone(),
                self.ctx.client.clone(),
                self.ctx.me,
            );
            let (settled, start_after, job) = std::thread::scope(|s| {
                // Round r + 1's inner phase from `from` (numbered so that its next round is
                // r + 1), on another thread with our inner trainer, and the token that
                // cancels it.
                let spawn = |from: OuterState,
                             (mut feedback, copied): (synod_diloco::ErrorFeedback, _),
                             mut w: TchInnerTrainer| {
                    let (retained, client) = (retained.clone(), client.clone());
                    let cancel = CancelToken::new();
                    w.set_cancel(Some(cancel.clone()));
                    let phase = s.spawn(move || {
                        let res = traced_phase(
                            &from,
                            &mut w,
                            me,
                            ctx,
                            &mut feedback,
                            &retained,
                            &client,
                            copied,
                        );
                        w.set_cancel(None);
                        (w, res)
                    });
                    (phase, cancel)
                };
                let mut job = None;
                if overlap && more {
                    // From θ_{r−1}, before round r's outer step (overlapped rounds are dense:
                    // `Recipe::load` refuses sparse ones).
                    if let Some(w) = self.worker.take() {
                        let mut from = state.clone();
                        from.round = r;
                        job = Some((parent, spawn(from, (ctx.feedback.clone(), None), w)));
                    }
                }
                let committed =
                    self.exchange_and_commit(r, mine, &mut state, parent, start, stakes, ctx);
                if let (false, true, Ok((p, _))) = (overlap, more, &committed) {
                    // From our θ_r, while it is not final yet: nothing of ours to train from
                    // if we committed nothing.
                    if p.hash != NOT_COMMITTED {
                        let feedback = self.round_feedback(r + 1, Some(&p.included), &state.params);
                        match (feedback, self.worker.take()) {
                            (Ok(f), Some(w)) => job = Some((p.hash, spawn(state.clone(), f, w))),
                            (f, w) => {
                                self.worker = w;
                                if let Err(e) = f {
                                    // Trained after round r settles instead.
                                    tracing::warn!(round = r + 1, "not training ahead: {e:#}");
                                }
                            }
                        }
                    }
                }
                let settled = committed.and_then(|(p, rec)| {
                    let ours = p.hash;
                    Ok((ours, self.settle(p)?, rec))
                });
                // Round r + 1's start as the close decided it: a phase running ahead from
                // another start is dead, cancelled now rather than awaited.
                let start_after = match (&job, &settled) {
                    (Some(_), Ok((_, closed, _))) => {
                        Some(self.ctx.inner_start(r + 1, closed.parent_after(parent)))
                    }
                    _ => None,
                };
                if let (Some((start, (_, cancel))), Some(Ok(next))) = (&job, &start_after) {
                    if next != start {
                        cancel.cancel();
                    }
                }
                // A phase cancelled may end with any error of the work it was doing: dead too.
                let job = job
                    .map(|(start, (phase, cancel))| (start, phase.join(), cancel.is_cancelled()));
                (settled, start_after, job)
            });
            match job {
                Some((start, Ok((w, res)), doomed)) => {
                    self.worker = Some(w);
                    match res {
                        Ok((mine, report)) => {
                            ahead = Some(Computed {
                                round: r + 1,
                                start,
                                mine,
                                report,
                            })
                        }
                        Err(Unfinished { error, kept }) => {
                            self.ctx.forget_states(r + 1, &kept);
                            if !doomed {
                                return Err(error.into());
                            }
                            tracing::info!(
                                round = r + 1,
                                "cancelled the inner phase trained ahead from a checkpoint that \
                                 did not become final: {error}"
                            );
                        }
                    }
                }
                Some((_, Err(_), _)) => bail!("the inner phase of round {} panicked", r + 1),
                None => {}
            }
            let (ours, closed, rec) = settled?;
            // What round r + 1 trains from: our θ_r if it is final; else the final one, or
            // after a void θ_{r−1} (a voided round changed nothing; its number moves on).
            let last_final = closed.parent_after(parent);
            let reload = (closed != Closed::Final(ours)).then_some(last_final);
            parent = last_final;
            // The phase computed meanwhile counts if round r + 1 starts where it did;
            // otherwise it is discarded now (its trace is dead). Round r + 1's start, read
            // once at the close whenever a phase ran ahead, is kept for the next round.
            match (start_after, ahead.take()) {
                (Some(Ok(start)), c) => {
                    next_start = Some(start);
                    match c {
                        Some(c) if start == c.start => {
                            busy += c.report.secs;
                            ahead = Some(c);
                        }
                        Some(c) => self.ctx.forget_trace(c.round, &c.mine.payload, None),
                        None => {}
                    }
                }
                (Some(Err(e)), c) => {
                    if let Some(c) = c {
                        self.ctx.forget_trace(c.round, &c.mine.payload, None);
                    }
                    return Err(e);
                }
                (None, c) => ahead = c,
            }
            // The round's training loss is its own phase's; its inner seconds are those that
            // ran within its wall clock (mostly the next round's phase, computed meanwhile),
            // an optimistic phase discarded after a lost vote not counted.
            let rec = RoundRecord {
                train_loss: report.mean_loss,
                compute_secs: busy,
                ..rec
            };
            self.record(&state, rec, Some(busy))?;
            if let Some(h) = reload {
                // Kept, even at the last round (ours lost the vote, or we committed nothing).
                state = self.load(h, r)?;
            }
            last = r;
        }
        Ok(last)
    }

    /// Round `r`'s inner phase computed now, from `start`: θ_{r−1} as `state` holds it when
    /// `start` is `parent`, else (overlapped rounds after a restart, or a round computed ahead
    /// from another start) the checkpoint `start`, fetched if we do not hold it.
    fn phase_now(
        &mut self,
        r: u32,
        state: &OuterState,
        parent: CheckpointHash,
        start: CheckpointHash,
        ctx: &RoundCtx,
    ) -> Result<(Contribution, InnerReport)> {
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
            self.ctx.recipe.restore(&bytes, r - 1)?
        };
        let (mut feedback, copied) = self.round_feedback(r, None, &from.params)?;
        let worker = self
            .worker
            .as_mut()
            .ok_or_else(|| anyhow!("no inner trainer"))?;
        traced_phase(
            &from,
            worker,
            self.ctx.me,
            ctx,
            &mut feedback,
            &self.ctx.retained,
            &self.ctx.client,
            copied,
        )
        .map_err(|Unfinished { error, kept }| {
            self.ctx.forget_states(r, &kept);
            error.into()
        })
    }
}
