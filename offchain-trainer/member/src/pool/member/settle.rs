//! The end of a round we committed: waiting for the chain to close it, committing again over
//! an included set the chain agreed on ([`super::agreed`]), and keeping the final checkpoint
//! served; and the end of the pool.

use std::time::Duration;

use anyhow::Result;
use synod_chain::calls;
use synod_chain::types::{AccountId, FinalCheckpoint, OpenRound, PoolStatus};
use synod_checkpoint::CheckpointHash;
use synod_p2p::ExchangeConfig;
use synod_protocol::RoundPhase;
use tokio::task::JoinHandle;

use super::agreed::late_window_closing;
use super::commit::{submit_commit, CommitOutcome, NOT_RECORDED};
use super::Trainer;
use crate::config::Fault;
use crate::event::TrainerEvent;
use crate::plot::{loss_vs_tokens, Curve};

/// How a round ended on-chain.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Closed {
    Final(CheckpointHash),
    Voided,
}

impl Closed {
    /// The last final checkpoint once the round closed this way, `parent` being the one before
    /// it: the round's own final checkpoint, or `parent` after a void (a voided round changes
    /// nothing).
    pub(super) fn parent_after(&self, parent: CheckpointHash) -> CheckpointHash {
        match self {
            Self::Final(h) => *h,
            Self::Voided => parent,
        }
    }
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
    /// The round's snapshot stakes (member → planck), the aggregation rule's weights.
    pub stakes: synod_diloco::Stakes,
}

/// What the chain says of a round we committed.
enum Step {
    Closed(Closed),
    /// The members' included sets split and the chain fixed this one, which is not ours; with
    /// the final hash when the round is already final over it (we commit it late).
    Agreed(Vec<u32>, Option<CheckpointHash>),
    /// Our commit is not on the chain and may still count and be paid ([`retry_commit`]):
    /// submit it again.
    Retry,
}

/// What became of one more try of a commit of ours ([`Trainer::commit_again`]).
enum Retried {
    /// The chain holds our commit (taken now, or recorded by an earlier send).
    Taken,
    /// Refused or lost again: one try fewer.
    Failed,
    /// The round's inner phase is not over yet: tried again at the next look, not counted.
    NotYet,
}

/// How many more times we submit a commit of ours that is not on the chain (a lost
/// connection, a full pool, a dropped transaction), while it may still count and be paid.
const COMMIT_RETRIES: u32 = 3;

/// Our commit of a round, as [`retry_commit`] weighs it.
pub(super) struct Ours<'a> {
    /// The round.
    pub round: u32,
    /// blake3 of our checkpoint.
    pub hash: &'a CheckpointHash,
    /// The included set we aggregated (ascending member indices).
    pub included: &'a [u32],
    /// Our member index.
    pub index: u32,
    /// Our account.
    pub account: &'a AccountId,
    /// Whether the first submission of our commit failed.
    pub failed: bool,
}

/// What the chain shows of a round at one look.
pub(super) enum Look<'a> {
    /// Final: its record, and its phase at the finalized block.
    Final(&'a FinalCheckpoint, RoundPhase),
    /// Not final: the pool's open round, the included set the chain fixed if the members'
    /// sets split, and the finalized block.
    Open(Option<&'a OpenRound>, Option<&'a [u32]>, u64),
}

/// Whether we submit our commit again. While the round is the pool's open one before its
/// deadline, if our commit failed and the chain fixed no other included set: one more commit
/// may make it final. Once it is final over our checkpoint and included set, with our payload
/// in it (only then does a commit make us a contributor), while late commits are still paid
/// ([`RoundPhase::LateCommits`]) and it does not list us as a contributor: our commit failed,
/// or a send reported as taken (a used nonce) was not ours. After that window the duty
/// worker's attestation records it, unpaid, so that we are not leaked as a silent included
/// member (`duty/attest.rs`).
pub(super) fn retry_commit(ours: &Ours, look: Look) -> bool {
    match look {
        Look::Final(f, phase) => {
            f.hash == *ours.hash
                && f.included == ours.included
                && f.included.contains(&ours.index)
                && phase == RoundPhase::LateCommits
                && !f.contributors.contains(ours.account)
        }
        Look::Open(open, agreed, finalized) => {
            ours.failed
                && agreed.is_none_or(|s| s == ours.included)
                && open.is_some_and(|o| o.round == ours.round && finalized < u64::from(o.deadline))
        }
    }
}

/// Which final pair of a round we committed we commit late ([`final_pair`]).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum FinalPair {
    /// Final over another included set than our latest commit's, which holds our payload (a
    /// split round is final once quorum has committed again): the chain takes one more commit
    /// of ours, over the final set.
    OtherSet,
    /// Final over our latest commit's included set with another hash: an equivocator may have
    /// given us its other payload; the chain takes the final pair once.
    SameSet,
}

/// Whether round `f`, final with another checkpoint than `latest` (the hash and included set
/// of our latest commit: the first, or the last over an agreed or final set), holds our
/// payload `me`, and how its final pair differs from our commit. A round final over a third
/// set after we recommitted over the agreed one is [`FinalPair::OtherSet`] too: the chain
/// takes a commit over the final set from any participant whose latest commit named another.
pub(super) fn final_pair(
    f: &FinalCheckpoint,
    latest: (CheckpointHash, &[u32]),
    me: u32,
) -> Option<FinalPair> {
    if f.hash == latest.0 || !f.included.contains(&me) {
        return None;
    }
    Some(if f.included == latest.1 {
        FinalPair::SameSet
    } else {
        FinalPair::OtherSet
    })
}

/// How many times we try to commit over an agreed (or final) set other than ours.
const RECOMMIT_TRIES: u32 = 3;

/// The hash of a [`Pending`] round for which we commit nothing: our aggregate could not be
/// applied ([`synod_diloco::DilocoError::NonFinite`], nothing decodable). No checkpoint hashes
/// to it (blake3 of anything is 32 zero bytes with probability 2⁻²⁵⁶).
pub(super) const NOT_COMMITTED: CheckpointHash = [0; 32];

impl Trainer {
    /// Whether round `round`, final over `included` (our own set) with another hash than
    /// ours, may be recomputed to the final hash: some member of the set signed two payloads
    /// for the round (we may have aggregated the one the final committers did not), or the
    /// round's snapshot stakes differ from `stakes`, the ones we aggregated with (`None`: read
    /// from the snapshot already). Otherwise our aggregate is what it is (a divergence), and
    /// recomputing it is wasted time.
    ///
    /// # Errors
    /// Chain RPC failures.
    async fn final_hash_may_be_ours(
        &self,
        round: u32,
        included: &[u32],
        stakes: Option<&synod_diloco::Stakes>,
    ) -> Result<bool, synod_chain::ChainError> {
        let seen = self.ctx.client.snapshot();
        let me = self.ctx.me;
        if included
            .iter()
            .any(|j| *j != me && seen.announcements(round, *j).len() >= 2)
        {
            return Ok(true);
        }
        let Some(stakes) = stakes else {
            return Ok(false);
        };
        Ok(self
            .ctx
            .snapshot_stakes(round)
            .await?
            .is_some_and(|s| s != *stakes))
    }

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
        let failed = failure.is_some();
        self.metrics.emit(&TrainerEvent::Commit {
            outcome: if failed { "failed" } else { "ok" }.into(),
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
        // Commit again if ours is not on the chain ([`retry_commit`]); not when we had nothing
        // to commit, nor when we withhold it.
        let withheld = p.hash == NOT_COMMITTED || self.ctx.a.fault == Some(Fault::Late);
        let mut retries_left = if withheld { 0 } else { COMMIT_RETRIES };
        // Our later commits' checkpoints and included sets (over the agreed set, then the final
        // pair), in order, once the chain took each.
        let mut recommits: Vec<(CheckpointHash, Vec<u32>)> = Vec::new();
        // The finalized block from which we may ask the chain to void the round (again):
        // `u64::MAX` once our void landed or the chain refused it (`void_asked_until`).
        let void_from = std::cell::Cell::new(0u64);
        // Whether we recomputed the final checkpoint over our own included set (once).
        let mut same_set_tried = false;
        let closed = loop {
            let chain = &self.ctx.chain;
            let signer = &self.ctx.signer;
            let may = tries_left > 0 && recommits.is_empty();
            let retry = retries_left > 0 && recommits.is_empty();
            // Our latest commit: the first, or the last recommit.
            let latest = match recommits.last() {
                Some((h, s)) => (*h, s.as_slice()),
                None => (p.hash, p.included.as_slice()),
            };
            let ours = Ours {
                round,
                hash: &p.hash,
                included: &p.included,
                index: me,
                account: &self.ctx.account,
                failed,
            };
            let step = self.ctx.block_on(self.ctx.watch.wait_for(
                "the round to close",
                Duration::from_secs(3600),
                || async {
                    if let Some(f) = chain.final_checkpoint(pool, round).await? {
                        // Final over another set that holds our payload (a split round is
                        // final once quorum has committed again), or over our set with another
                        // hash (an equivocator gave us its other payload; tried once: a plain
                        // divergence finds no payload that makes the final hash): commit it
                        // late, to be paid, while its late-commit window leaves time; else we
                        // go on to the next round (which fetches the final checkpoint).
                        let late = match final_pair(&f, latest, me).filter(|_| tries_left > 0) {
                            Some(FinalPair::OtherSet) => true,
                            // After a recommit, which read the snapshot's stakes again, only
                            // an equivocator's other payload can explain another hash.
                            Some(FinalPair::SameSet) => {
                                !same_set_tried
                                    && self
                                        .final_hash_may_be_ours(
                                            round,
                                            &f.included,
                                            recommits.is_empty().then_some(&p.stakes),
                                        )
                                        .await?
                            }
                            None => false,
                        };
                        if late {
                            let now = chain.finalized_number().await?;
                            if !late_window_closing(&self.ctx.final_round(&f), now) {
                                return Ok(Some(Step::Agreed(f.included, Some(f.hash))));
                            }
                        }
                        if retry && f.hash == p.hash {
                            let now = chain.finalized_number().await?;
                            let phase = self.ctx.final_round(&f).phase(now);
                            if retry_commit(&ours, Look::Final(&f, phase)) {
                                return Ok(Some(Step::Retry));
                            }
                        }
                        return Ok(Some(Step::Closed(Closed::Final(f.hash))));
                    }
                    if chain.voided(pool, round).await? {
                        return Ok(Some(Step::Closed(Closed::Voided)));
                    }
                    // Past its deadline and not voided: the chain's queue had no room for it.
                    // The chain refuses commits now, so we void it ourselves; members wait
                    // `index mod 4` blocks more each, so that few calls race (the pool holds
                    // one void per pool and refuses one that would fail, unpaid).
                    if void_from.get() != u64::MAX {
                        let finalized = chain.finalized_number().await?;
                        let open = chain.open_round(pool).await?;
                        let slack = u64::from(me % 4);
                        if finalized >= void_from.get()
                            && open.is_some_and(|o| o.needs_void(round, finalized, slack))
                        {
                            let sent = chain.submit(&calls::void_expired_round(pool), signer).await;
                            if let Some(from) =
                                void_asked_until(sent.as_ref().map(|_| ()), finalized)
                            {
                                void_from.set(from);
                            }
                            if let Err(e) = sent {
                                if void_asked_until(Err(&e), finalized).is_some() {
                                    tracing::debug!(
                                        round,
                                        "not voiding the expired round now: {e}"
                                    );
                                } else {
                                    tracing::warn!(round, "cannot void the expired round: {e}");
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
                    if retry && failed {
                        let open = chain.open_round(pool).await?;
                        let agreed = chain.agreed_set(pool, round).await?;
                        let now = chain.finalized_number().await?;
                        let look = Look::Open(open.as_ref(), agreed.as_deref(), now);
                        if retry_commit(&ours, look) {
                            return Ok(Some(Step::Retry));
                        }
                    }
                    Ok(None)
                },
            ))?;
            match step {
                Step::Closed(c) => break c,
                Step::Retry => {
                    let block = Duration::from_secs_f64(self.ctx.block_secs.max(0.1));
                    match self.commit_again(&p)? {
                        Retried::Taken => retries_left = 0,
                        // The next try a block later at the soonest.
                        Retried::Failed => {
                            retries_left -= 1;
                            std::thread::sleep(block);
                        }
                        Retried::NotYet => std::thread::sleep(block),
                    }
                }
                Step::Agreed(set, expect) => {
                    tries_left -= 1;
                    same_set_tried |= set.as_slice() == latest.1;
                    match self.recommit(&p, &set, expect) {
                        Ok(h) => recommits.push((h, set)),
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
            Closed::Final(h) if recommits.iter().any(|(r, _)| r == h) => {
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
        for ours in std::iter::once(p.hash).chain(recommits.into_iter().map(|(h, _)| h)) {
            if closed == Closed::Final(ours) {
                self.keep_serving_final(ours, None)?;
            } else {
                self.ctx.store.remove(&ours);
            }
        }
        Ok(closed)
    }

    /// Submits our commit of `p` again ([`retry_commit`]); it counts once
    /// [`synod_chain::Chain::submit`] has found it in a finalized block. Logs a `commit` event
    /// for the try, except when the chain already held our commit (refused as
    /// `AlreadyCommitted`) or the round's inner phase is not over.
    fn commit_again(&mut self, p: &Pending) -> Result<Retried> {
        let ctx = &self.ctx;
        let error = match ctx.block_on(submit_commit(
            &ctx.chain,
            &ctx.signer,
            ctx.pool,
            p.round,
            p.hash,
            p.included.clone(),
        )) {
            CommitOutcome::Recorded => None,
            CommitOutcome::NotRecorded => Some(NOT_RECORDED.to_string()),
            CommitOutcome::AlreadyRecorded(_) => return Ok(Retried::Taken),
            CommitOutcome::NotYet(_) => return Ok(Retried::NotYet),
            CommitOutcome::Refused(e) | CommitOutcome::Failed(e) => {
                Some(format!("commit failed again: {e}"))
            }
        };
        let round = p.round;
        match &error {
            Some(e) => tracing::warn!(round, "{e}"),
            None => tracing::info!(round, "committed on a later try"),
        }
        let taken = error.is_none();
        self.metrics.emit(&TrainerEvent::Commit {
            outcome: if taken { "ok" } else { "failed" }.into(),
            error,
            hash: synod_checkpoint::hex(&p.hash),
            round,
        })?;
        Ok(if taken {
            Retried::Taken
        } else {
            Retried::Failed
        })
    }

    /// Waits for the pool to complete, then serves until live peers have our last payload.
    pub(super) fn finish(mut self, last: u32) -> Result<()> {
        let (chain, pool) = (&self.ctx.chain, self.ctx.pool);
        let p = self.ctx.block_on(self.ctx.watch.wait_for(
            "the pool to complete",
            Duration::from_secs(3600),
            || async {
                Ok(chain
                    .pool(pool)
                    .await?
                    .filter(|p| p.status != PoolStatus::Training))
            },
        ))?;
        // Until nothing of our rounds can be challenged or judged any more (duties end
        // earlier once nothing is left).
        let ended = self.ctx.block_on(chain.finalized_number())?;
        self.duties.finish(super::duty::duty_wait(
            &self.ctx.timeline,
            ended,
            self.ctx.block_secs,
        ));
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

/// Finalized blocks a member waits before asking again for the void of a round whose void by
/// another account the transaction pool held: that void may never land (its sender can
/// replace it, or lack the fee when it is included). Not every block: the node runs the
/// whole void (`check_void`) before it finds the tag taken.
const VOID_REASK_BLOCKS: u64 = 3;

/// After our `void_expired_round` returned `sent` at finalized block `finalized`: the
/// finalized block from which we may ask again. `u64::MAX` (never) once it landed or the chain
/// refused it with a pallet error (another void closed the round meanwhile);
/// `finalized + VOID_REASK_BLOCKS` when the transaction pool already holds another account's
/// void of the pool (`CheckDutyCall` keeps one per pool, [`ChainError::is_same_tag_queued`]);
/// `finalized + MORTALITY` when the send's fate is unknown (a lost connection, a re-send that
/// neither landed nor left the pool in time): our void may still be in the pool, and another
/// of ours, with the next nonce, would take its place there (the pool keeps one void per pool,
/// the later one priced at the fee multiplier of a later block) and then wait behind the nonce
/// it replaced; past its era (`synod_chain::submit::MORTALITY` blocks) it is gone; the other
/// members void the round meanwhile. `None` (at the next pass) after any other failure.
fn void_asked_until(sent: Result<(), &synod_chain::ChainError>, finalized: u64) -> Option<u64> {
    use synod_chain::ChainError;
    match sent {
        Ok(()) | Err(ChainError::Module { .. }) => Some(u64::MAX),
        Err(e) if e.is_same_tag_queued() => Some(finalized.saturating_add(VOID_REASK_BLOCKS)),
        Err(ChainError::Rpc(_) | ChainError::Timeout { .. }) => {
            Some(finalized.saturating_add(synod_chain::submit::MORTALITY))
        }
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{final_pair, retry_commit, void_asked_until, FinalPair, Look, Ours};
    use synod_chain::types::{AccountId, FinalCheckpoint, OpenRound};
    use synod_chain::ChainError;
    use synod_protocol::{RoundState, Timeline};

    /// Attack: an outsider keeps its own void of a pool in the transaction pool (one void per
    /// pool: the members' voids are refused with "Priority is too low") and never lets it
    /// land (it replaces it, or empties its account). A member refused so asks again 3
    /// finalized blocks later; one whose void landed, or that the chain refused (another void
    /// closed the round), does not; one whose void's fate is unknown (a lost connection) waits
    /// out the void's era rather than send a second void of its own that would replace the
    /// first in the pool; one whose send failed before the pool took it asks at the next pass.
    #[test]
    fn a_void_held_in_the_pool_by_another_account_is_asked_again() {
        let module = ChainError::Module {
            pallet: "Checkpoints".into(),
            error: "NoOpenRound".into(),
            docs: String::new(),
        };
        assert_eq!(void_asked_until(Ok(()), 100), Some(u64::MAX));
        assert_eq!(void_asked_until(Err(&module), 100), Some(u64::MAX));
        let queued = ChainError::Rejected("Priority is too low: (1 vs 1)".into());
        assert_eq!(void_asked_until(Err(&queued), 100), Some(103));
        let fees = ChainError::Rejected("Inability to pay some fees".into());
        assert_eq!(void_asked_until(Err(&fees), 100), None);
        let lost = ChainError::Rpc("connection reset".into());
        assert_eq!(void_asked_until(Err(&lost), 100), Some(132));
        let stuck = ChainError::Timeout {
            secs: 600,
            what: "nonce to advance".into(),
        };
        assert_eq!(void_asked_until(Err(&stuck), 100), Some(132));
        let unreachable = ChainError::Connect {
            url: "ws://127.0.0.1:9944".into(),
            reason: "refused".into(),
        };
        assert_eq!(void_asked_until(Err(&unreachable), 100), None);
    }

    /// A member whose commit failed (a lost connection, a dropped transaction) or is not
    /// recorded commits again while the commit may still make the round final or be paid:
    /// while the round is open before its deadline (and the chain fixed no other included
    /// set), and once it is final over our checkpoint and included set, our payload in it,
    /// without us among its contributors, within the late-commit window (5 blocks after
    /// finality at block 100). Not after, not for another round, checkpoint or set: the
    /// attestation records those, unpaid, or the recommit over the agreed set does.
    #[test]
    fn a_commit_that_did_not_land_is_retried_while_it_can_still_be_paid() {
        let (hash, me, other) = ([7; 32], AccountId::from([1; 32]), AccountId::from([2; 32]));
        let included = [0, 1];
        let ours = |failed| Ours {
            round: 3,
            hash: &hash,
            included: &included,
            index: 1,
            account: &me,
            failed,
        };
        let open = |round| OpenRound {
            round,
            opened_at: 50,
            deadline: 80,
            scheduled_at: Some(80),
        };
        let (o3, o4) = (open(3), open(4));
        assert!(retry_commit(&ours(true), Look::Open(Some(&o3), None, 79)));
        assert!(retry_commit(
            &ours(true),
            Look::Open(Some(&o3), Some(&[0, 1]), 79)
        ));
        let taken = Look::Open(Some(&o3), None, 79);
        assert!(!retry_commit(&ours(false), taken), "our commit was taken");
        let split = Look::Open(Some(&o3), Some(&[0, 2]), 79);
        assert!(
            !retry_commit(&ours(true), split),
            "the chain fixed another set"
        );
        let late = Look::Open(Some(&o3), None, 80);
        assert!(!retry_commit(&ours(true), late), "past the deadline");
        let next = Look::Open(Some(&o4), None, 60);
        assert!(!retry_commit(&ours(true), next), "another round is open");
        assert!(
            !retry_commit(&ours(true), Look::Open(None, None, 60)),
            "no round open"
        );
        let fin = |hash, included: Vec<u32>, contributors: Vec<AccountId>| FinalCheckpoint {
            hash,
            parent: [0; 32],
            included,
            contributors,
            finalized_at: 100,
            committed_stake: 0,
            round_stake: 0,
        };
        let round = RoundState::finalized(Timeline::for_pool(0, 5, 0, 0), 100, hash);
        let without_us = fin(hash, vec![0, 1], vec![other]);
        for failed in [true, false] {
            for now in [101, 105] {
                let look = Look::Final(&without_us, round.phase(now));
                assert!(
                    retry_commit(&ours(failed), look),
                    "final without us at {now}"
                );
            }
        }
        let closed = Look::Final(&without_us, round.phase(106));
        assert!(!retry_commit(&ours(true), closed), "the late window closed");
        let with_us = fin(hash, vec![0, 1], vec![other, me]);
        let look = Look::Final(&with_us, round.phase(101));
        assert!(!retry_commit(&ours(true), look), "recorded");
        let theirs = fin([8; 32], vec![0, 1], vec![other]);
        let look = Look::Final(&theirs, round.phase(101));
        assert!(
            !retry_commit(&ours(true), look),
            "final over another checkpoint"
        );
        // Our payload left out of the final set (ours too): a commit would not make us a
        // contributor, so one that landed would be retried forever.
        let without_our_payload = fin(hash, vec![0], vec![other]);
        let look = Look::Final(&without_our_payload, round.phase(101));
        let ours_left_out = Ours {
            included: &[0],
            ..ours(true)
        };
        assert!(
            !retry_commit(&ours_left_out, look),
            "our payload is not included"
        );
    }

    /// A round we committed over our set [0, 1, 2], then over the agreed set [0, 1] (the
    /// members' sets split), and that the chain made final over a third set [1, 2] that holds
    /// our payload: we commit the final pair late, as the chain allows (our latest commit named
    /// another set), to be paid and stay on the next round's juries. Before, a member that had
    /// recommitted once never looked at the final set again.
    #[test]
    fn a_round_final_over_a_third_set_after_our_recommit_gets_our_final_pair() {
        let fin = |hash, included: Vec<u32>| FinalCheckpoint {
            hash,
            parent: [0; 32],
            included,
            contributors: vec![],
            finalized_at: 100,
            committed_stake: 0,
            round_stake: 0,
        };
        let (first, second, third) = ([1; 32], [2; 32], [3; 32]);
        let after_recommit = ([2; 32], &[0u32, 1][..]);
        assert_eq!(
            final_pair(&fin(third, vec![1, 2]), after_recommit, 1),
            Some(FinalPair::OtherSet)
        );
        assert_eq!(
            final_pair(&fin(third, vec![1, 2]), (first, &[0, 1, 2]), 1),
            Some(FinalPair::OtherSet),
            "before any recommit"
        );
        assert_eq!(
            final_pair(&fin(third, vec![0, 1]), after_recommit, 1),
            Some(FinalPair::SameSet),
            "final over our recommit's set with another hash"
        );
        assert_eq!(
            final_pair(&fin(second, vec![0, 1]), after_recommit, 1),
            None,
            "final over our recommit"
        );
        assert_eq!(
            final_pair(&fin(third, vec![1, 2]), after_recommit, 0),
            None,
            "our payload is not in the final set"
        );
    }
}
