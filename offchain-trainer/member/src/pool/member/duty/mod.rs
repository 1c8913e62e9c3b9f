//! A member's verification duties (`docs/architecture.md`, step 7), run by the **duty worker**,
//! a thread of their own beside the rounds and after the last one: replay a sample of the
//! other members of every final round's included set and challenge the ones outside the tolerance; as a
//! juror (unless `MemberConfig::juror` is off), replay disputed contributions and vote.
//!
//! The worker ([`DutyWorker`], driven through its [`DutyHandle`]) runs one pass of every duty
//! when the chain has finalized blocks (one pass for those finalized during the previous one)
//! or the training thread hands it a round's evidence, so a round is checked as soon as it is
//! final, while the next inner phase trains: a replay longer than an inner phase does not hold
//! the training thread (it shares the machine's cores, and a GPU's memory, with it). Nothing here ends `run`: a failed read,
//! replay or extrinsic is logged and retried at the next pass. The evidence of a round is
//! deleted once the chain has pruned its snapshot (settled: nothing can challenge it any more)
//! or the round is voided (by the chain, or at its deadline by the protocol's round state
//! machine that the chain subscription runs: [`told`]).
//!
//! One pass ([`DutyWorker::duty_pass`]) runs, in order: [`equivocation`] reports, the
//! [`juror`]'s read of its committee seats, the [`attest`]ation of final rounds that
//! aggregated our payload without a commit of ours, the [`verifier`]'s checks of closed
//! rounds, the [`challenger`]'s pending challenges, the juror's remaining votes, and the leak
//! [`decisions`] the chain's queue left open. The verifier's checks and the juror's votes run
//! earliest deadline first: before a round's checks and before each of them, the seats whose
//! vote ends by the close of that round's challenge window are judged (a juror reads the
//! challenges again first when a block was finalized meanwhile, so that a committee seat drawn
//! during a long pass votes after the replay under way, not after the pass), the others after
//! the checks; a round whose window has closed is not checked further. Every replay is kept by
//! the payload and the part of the trace it decided ([`replays`]): a payload is replayed once
//! per part, whether its verifier or its jurors asked.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicU64;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use synod_chain::calls;
use synod_chain::types::{AccountId, MemberInfo};
use synod_p2p::{Equivocation, PeerId};
use synod_protocol::{Action, RoundState, Timeline};

mod attest;
mod challenger;
mod decisions;
mod equivocation;
mod evidence;
mod juror;
mod replays;
mod told;
mod verifier;
mod waits;
mod worker;

use waits::{
    asks_residual_again, fetch_wait, residual_batch_wait, residual_deadline_passed,
    schedule_retry_blocks, RetryAt, CHECK_BUDGET, MIN_STATE_WAIT, RESIDUAL_RETRY_BLOCKS,
};
use worker::{timed_pass, Duty};
pub(super) use worker::{DutyHandle, DutyMsg};

use super::ctx::Ctx;
use crate::metrics::Metrics;
use crate::pool::verify::Replayer;

/// Trace states a verifier or a juror fetched for its checks: their files, by blake3.
type FetchedStates = std::collections::HashMap<[u8; 32], std::path::PathBuf>;

/// One check's trace states to fetch ([`DutyWorker::prefetch_trace_states`]): the round, the
/// accused's account and member index, and the segments the check replays.
type StateCheck = (u32, AccountId, u32, Vec<u32>);

/// What [`DutyWorker::replay`] checks of a contribution.
#[derive(Clone, Copy)]
pub(super) enum Check<'a> {
    /// These sampled segments of its trace first (a verifier), with the states fetched
    /// (its residuals among them).
    Segments(&'a [u32], &'a FetchedStates),
    /// The part of its trace a challenge disputes (a juror), with the states fetched (its
    /// residuals among them).
    Dispute(synod_chain::calls::Dispute, &'a FetchedStates),
}

/// Starts the duty worker of the member `ctx` on its own thread, writing its events to
/// `metrics`; it is told finalized blocks through `tx` (also handed to the chain
/// subscription) and reads them from `rx`.
///
/// # Errors
/// The thread cannot be spawned.
pub(super) fn spawn(
    ctx: Ctx,
    metrics: Metrics,
    tx: Sender<DutyMsg>,
    rx: Receiver<DutyMsg>,
) -> Result<DutyHandle> {
    let worker = DutyWorker {
        replayer: Replayer::new(ctx.inner_steps, ctx.spec_rounds),
        ctx,
        metrics,
        duties: Duties::default(),
        members: Vec::new(),
    };
    DutyHandle::start(worker, tx, rx)
}

/// The duty worker: a member's duties on their own thread.
pub(super) struct DutyWorker {
    ctx: Ctx,
    metrics: Metrics,
    replayer: Replayer<synod_model::TchInnerTrainer>,
    duties: Duties,
    /// The pool's members, read at the start of every pass that has work.
    members: Vec<MemberInfo>,
}

/// What a member tracks of its duties.
#[derive(Default)]
pub(super) struct Duties {
    /// Rounds whose evidence is kept and that are not verified yet.
    pub to_verify: BTreeSet<u32>,
    /// Replays done, by contribution and the part of its trace each decided (a juror reuses
    /// its verifier's replay, and its own for another challenge of the same part).
    replays: replays::Replays,
    /// Lowest challenge id not handled yet.
    cursor: u32,
    /// Challenge ids at or above `cursor` already handled (resolved, voted, not ours).
    handled: BTreeSet<u32>,
    /// Rounds with a challenge of our pool that waited for its draw, a ruling's execution or
    /// an appeal committee's draw at the last read of the challenges, or whose judging failed
    /// (their evidence is kept; `finish_duties` waits for them). Seats not judged yet are in
    /// `seats`.
    awaiting: BTreeSet<u32>,
    /// Committee seats read and not judged yet, judged in the order their votes end
    /// ([`DutyWorker::judge_seats`]).
    seats: Vec<juror::Pending>,
    /// Committees judged already (challenge id, end of its vote): a challenge with appeals is
    /// not `handled` until it closes, and an abstention is not repeated every pass.
    judged: BTreeSet<(u32, u32)>,
    /// The finalized block read just before the last jury pass read the challenges (`None`
    /// if that pass failed): every challenge opened at or before it was seen, and counted in
    /// `awaiting` if it still waits.
    jury_read_at: Option<u64>,
    /// Contributions found dishonest whose challenge is not open yet: (round, member) →
    /// (account, distance, the part of its trace the challenge disputes). Retried every pass
    /// until opened, convicted or out of the window.
    to_challenge: BTreeMap<(u32, u32), (AccountId, f64, calls::Dispute)>,
    /// Finalized block before which a challenge refused for a full schedule is not tried
    /// again ([`schedule_retry_blocks`]): each failed try costs a fee.
    challenge_not_before: RetryAt<(u32, u32)>,
    /// Equivocations seen by the network and not reported yet: (round, member) → (proof,
    /// failed submissions). See [`DutyWorker::report_equivocations`].
    to_report: BTreeMap<(u32, u32), (Equivocation, u32)>,
    /// The last parent checkpoint replayed from: (blake3, canonical bytes).
    parent: Option<([u8; 32], Arc<Vec<u8>>)>,
    /// Finalized block before which a round whose sparse residuals were not served is not
    /// verified again ([`RESIDUAL_RETRY_BLOCKS`]): each pass fetches its states anew.
    verify_not_before: RetryAt<u32>,
    /// Contributions checked already, kept until their round's evidence is forgotten (a round
    /// handed over again, its lacking payloads fetched for a recommit, checks only the new
    /// ones).
    verified: BTreeSet<(u32, u32)>,
    /// Sparse contributions whose residuals were not served: (round, member, verdict
    /// deadline) → the finalized block at which they were first missed
    /// ([`residual_deadline_passed`]); a verifier's and a juror's waits are counted apart.
    unserved: BTreeMap<(u32, u32, u64), u64>,
    /// Challenges against us seen open, and the next challenge id to look at
    /// ([`DutyWorker::accused_in_open_challenge`]).
    against_us: (BTreeSet<u32>, u32),
    /// Voided rounds whose unmatched commits may be left for us to decide → the block their
    /// equivocation reports close ([`DutyWorker::decide_unmatched_commits`]).
    to_decide: BTreeMap<u32, u64>,
    /// Voided rounds with nothing (left) to decide.
    decided: BTreeSet<u32>,
    /// The chain's `MaxDeadlinesPerBlock`, read once.
    spill: Option<u64>,
    /// Unsettled final rounds with nothing (left) to attest
    /// ([`DutyWorker::attest_included_rounds`]).
    attested: BTreeSet<u32>,
    /// What the chain subscription told of the pool's rounds, and when a round is read from
    /// the chain instead ([`told::Told`]).
    told: told::Told,
}

/// Whether a member that has finished its rounds may stop its duties after a pass that read
/// the challenges at finalized block `read_at` or later: no work is left (`work_left`, which
/// counts the challenges that pass saw waiting for a draw or our vote) and the last final
/// round (`last`, `None` if there is none) no longer accepted challenges at `read_at`. Every
/// challenge on it was then opened at or before that block, so the pass read it and counted
/// it. Deciding from the block reached *after* the pass missed a challenge opened while the
/// pass ran (at the window's last block, our own included): its committee, which seats every
/// registered contributor, was drawn after we stopped, and we were slashed as a no-show.
fn may_stop(last: Option<&RoundState>, read_at: u64, work_left: bool) -> bool {
    !work_left && !last.is_some_and(|r| r.phase(read_at).challenge_window_open())
}

/// The least time a member that has finished its rounds keeps its duties for, in seconds.
const MIN_DUTY_WAIT: Duration = Duration::from_secs(3600);

/// The longest a member that has finished its rounds keeps its duties ([`may_stop`] ends them
/// earlier once nothing is left), from finalized block `now`, at which its pool had ended:
/// until every challenge that can still be opened on its rounds is over, appeal included
/// ([`Timeline::settled_by`]`(now)`), at `block_secs` seconds per block, doubled for slow
/// blocks, and at least [`MIN_DUTY_WAIT`]. A cap shorter than the pool's windows would let a
/// member stop while challenges on its rounds can still be opened: their committees, frozen at
/// opening, would seat it (a registered juror) after it had gone and slash it as a no-show,
/// and a sparse pool's member would stop serving its residuals while still accused.
pub(super) fn duty_wait(timeline: &Timeline, now: u64, block_secs: f64) -> Duration {
    let blocks = timeline.settled_by(now).saturating_sub(now);
    let secs = blocks as f64 * block_secs * 2.0;
    if secs.is_finite() && secs > 0.0 {
        Duration::from_secs_f64(secs.min(1e9)).max(MIN_DUTY_WAIT)
    } else {
        MIN_DUTY_WAIT
    }
}

/// Why a sparse payload's residuals ([`synod_diloco::residual`]) are not there to replay it.
enum Unusable {
    /// The payload breaks the rules (no commitments, or a `carried_in` the rule does not
    /// name): dishonest without a replay.
    Dishonest,
    /// Its author did not serve a residual in time.
    Unserved,
    /// We did not keep its round r − 1 payload, so we cannot tell which residual it must carry
    /// in: not ours to judge (a fabricated `e_{r−1}` would explain any payload).
    Unknown,
}

/// How many of the latest challenge ids [`DutyWorker::accused_in_open_challenge`] reads the
/// first time (later calls read only the new ones).
const RECENT_CHALLENGES: u32 = 256;

/// Failed passes after which an equivocation report is given up (RPC errors; passes run at
/// every finalized block, so this is about as many blocks).
const MAX_REPORT_TRIES: u32 = 60;

/// A sparse contribution's residuals were not served in this pass (asked again next pass).
#[derive(Debug)]
struct ResidualsUnserved {
    round: u32,
    member: u32,
}

impl std::fmt::Display for ResidualsUnserved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "member {} did not serve the residuals of its round-{} payload (asked again next pass)",
            self.member, self.round
        )
    }
}

impl std::error::Error for ResidualsUnserved {}

impl Duty for DutyWorker {
    fn hand_over(&mut self, round: u32) {
        self.duties.to_verify.insert(round);
    }

    fn told(&mut self, round: u32, action: Action) {
        self.duties.told.told(round, action);
    }

    fn resync(&mut self) {
        self.duties.told.resync();
    }

    fn unfollowed(&mut self) {
        self.duties.told.unfollowed();
    }

    fn pass(&mut self) {
        self.duty_pass();
    }

    fn finish(&mut self, max_wait: Duration, busy_us: &AtomicU64) {
        self.finish_duties(max_wait, busy_us);
    }
}

impl DutyWorker {
    /// Whether this member verifies or judges at all.
    fn verifies(&self) -> bool {
        self.ctx.a.verify_rate != Some(0.0) || self.ctx.a.juror
    }

    /// One pass of every duty ([`Duty::pass`]).
    fn duty_pass(&mut self) {
        if !self.duties.to_verify.is_empty() || self.ctx.a.juror {
            match self.ctx.block_on(self.ctx.chain.members(self.ctx.pool)) {
                Ok(m) => self.members = m,
                Err(e) => tracing::warn!("duties: reading the members: {e}"),
            }
        }
        if let Err(e) = self.report_equivocations() {
            tracing::warn!("equivocation reports: {e:#}");
        }
        if let Err(e) = self.read_jury() {
            tracing::warn!("jury duty: {e:#}");
        }
        if let Err(e) = self.attest_included_rounds() {
            tracing::warn!("attesting final rounds: {e:#}");
        }
        // The verifier judges, before each of its checks, the seats whose vote ends by the
        // close of that round's challenge window; the other seats after its checks and the
        // challenges they found.
        if let Err(e) = self.verify_closed_rounds() {
            tracing::warn!("verification: {e:#}");
        }
        if let Err(e) = self.open_pending_challenges() {
            tracing::warn!("challenges: {e:#}");
        }
        self.judge_seats(None);
        if let Err(e) = self.decide_unmatched_commits() {
            tracing::warn!("leak decisions: {e:#}");
        }
    }

    /// The peer ids of the pool's members other than us (as read at the pass's start).
    fn peers(&self) -> Vec<PeerId> {
        self.ctx.peers_in(&self.members)
    }

    /// After the pool's last round: keeps doing the duties until the last final round can no
    /// longer be challenged and no challenge of this pool waits for a draw or our vote (at
    /// most `max_wait`); then, as a juror, opts out of juries (a juror that has stopped would
    /// be drawn and, for rounds it contributed to, slashed as a no-show). Never fails: problems are logged.
    fn finish_duties(&mut self, max_wait: Duration, busy_us: &AtomicU64) {
        // The worker reads no more messages: the chain is read for every round.
        self.unfollowed();
        // A sparse pool's members serve their residuals until nobody can challenge them.
        if !self.verifies() && !self.ctx.recipe.pool.is_sparse() {
            if let Err(e) = self.report_equivocations() {
                tracing::warn!("equivocation reports: {e:#}");
            }
            self.attest_until_the_last_window_closes(max_wait);
            return;
        }
        let start = Instant::now();
        loop {
            let pass_began = self.ctx.block_on(self.ctx.chain.finalized_number());
            timed_pass(self, busy_us);
            // A juror judges from the block its jury duty read the challenges at (none if that
            // read failed: another pass); anyone else from the pass's first block.
            let judged_at = if self.ctx.a.juror {
                self.duties.jury_read_at
            } else {
                pass_began.ok()
            };
            match judged_at.map_or(Ok(true), |b| self.duties_left(b)) {
                Ok(false) => break,
                Ok(true) => {}
                Err(e) => tracing::warn!("duties: {e:#}"),
            }
            if start.elapsed() > max_wait {
                tracing::warn!("stopping duties after {max_wait:?} with work left");
                break;
            }
            std::thread::sleep(Duration::from_secs(2));
        }
        if self.ctx.a.juror {
            match self.ctx.block_on(
                self.ctx
                    .chain
                    .submit(&calls::unregister_juror(), &self.ctx.signer),
            ) {
                Ok(_) => tracing::info!("opted out of juries"),
                Err(e) if e.is_module("Challenges", "NotAJuror") => {}
                Err(e) => tracing::warn!("unregister_juror: {e}"),
            }
        }
    }

    /// Whether duties are left after a pass whose challenges were read at finalized block
    /// `read_at` or later ([`may_stop`]): the last final round could still be challenged at
    /// that block, a round is still to verify, a challenge is still to open, we are accused in
    /// an open challenge, a challenge of this pool waits for a draw or our vote, or a voided
    /// round's unmatched commits wait for a decision.
    fn duties_left(&mut self, read_at: u64) -> Result<bool> {
        let (last, _) = self.ctx.last_final()?;
        let last = self
            .ctx
            .block_on(self.ctx.chain.final_checkpoint(self.ctx.pool, last))?
            .map(|f| self.ctx.final_round(&f));
        let work_left = self.accused_in_open_challenge()?
            || !self.duties.to_verify.is_empty()
            || !self.duties.to_challenge.is_empty()
            || !self.duties.to_report.is_empty()
            || !self.duties.awaiting.is_empty()
            || !self.duties.seats.is_empty()
            || !self.duties.to_decide.is_empty();
        Ok(!may_stop(last.as_ref(), read_at, work_left))
    }

    /// Whether a challenge against us in this pool is open (among the last
    /// [`RECENT_CHALLENGES`] ids): we keep serving our evidence (a sparse payload's
    /// residuals, which only we hold) until it is decided.
    fn accused_in_open_challenge(&mut self) -> Result<bool> {
        let next = self.ctx.block_on(self.ctx.chain.next_challenge_id())?;
        // A failed read leaves what was tracked as it was (the next call reads it again).
        let (mut open, from) = self.duties.against_us.clone();
        // New ids once (at most the last RECENT_CHALLENGES), then only those against us.
        for id in from.max(next.saturating_sub(RECENT_CHALLENGES))..next {
            if let Some(c) = self.ctx.block_on(self.ctx.chain.challenge(id))? {
                if c.pool_id == self.ctx.pool && c.accused == self.ctx.account {
                    open.insert(id);
                }
            }
        }
        let mut still = BTreeSet::new();
        for id in open {
            if self.ctx.block_on(self.ctx.chain.challenge(id))?.is_some() {
                still.insert(id);
            }
        }
        let any = !still.is_empty();
        self.duties.against_us = (still, next);
        Ok(any)
    }
}

#[cfg(test)]
mod tests;
