//! Fetching the evidence a check needs from the member that holds it: a sparse payload's
//! residuals and the Proof-of-Learning trace states of its sampled segments, waiting for them
//! only as long as the challenge window leaves after the round's other checks.

use std::time::Duration;

use anyhow::Result;
use synod_diloco::residual::{commitments_of, NO_RESIDUAL};

use super::DutyWorker;
use super::*;

/// The Proof-of-Learning trace state or residual `hash` from `peer` (at most `max` bytes),
/// asked again every 250 ms while the peer refuses it: a node serves each member at most
/// [`synod_p2p::EVIDENCE_PER_MEMBER`] evidence transfers at once, and one of ours from it (for
/// another round's dispute, or one we gave up on) may not have ended yet. The caller bounds
/// the time.
///
/// # Errors
/// As [`synod_p2p::Client::fetch_checkpoint`], but never [`synod_p2p::NetError::Refused`].
async fn fetch_evidence(
    client: &synod_p2p::Client,
    peer: synod_p2p::PeerId,
    hash: [u8; 32],
    max: u64,
) -> Result<Vec<u8>, synod_p2p::NetError> {
    loop {
        match client.fetch_checkpoint(peer, hash, max).await {
            Err(synod_p2p::NetError::Refused) => {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            r => return r,
        }
    }
}
use crate::pool::verify::carried::expected_carried_in;
use crate::pool::verify::prefetch::{prefetch_states, wanted_residuals, wanted_states, Wanted};
use crate::pool::verify::replay::Residuals;
use crate::pool::verify::Checker;

impl DutyWorker {
    /// `member`'s error-feedback residuals for its sparse payload `claimed` of `round`
    /// ([`Residuals`]; empty for a dense codec): its `carried_in` checked against the rule
    /// ([`expected_carried_in`], from the final included set of round − 1 and the payload of
    /// round − 1 we kept), both residuals taken from `fetched` (the pass's prefetch,
    /// [`DutyWorker::prefetch_trace_states`], topped up by
    /// [`DutyWorker::ask_residuals_again`]) and checked against their hashes. Nothing is
    /// fetched here: every residual of the pass was asked for side by side, so that k accused
    /// that withhold theirs cost the pass one residual wait, not k one after the other.
    ///
    /// # Errors
    /// Chain RPC failures.
    pub(super) fn residuals_of(
        &self,
        round: u32,
        member: u32,
        claimed: &[u8],
        fetched: &FetchedStates,
    ) -> Result<std::result::Result<Residuals, Unusable>> {
        if !self.ctx.recipe.pool.is_sparse() {
            return Ok(Ok(Residuals::default()));
        }
        let Ok(Some(c)) = commitments_of(member, claimed) else {
            return Ok(Err(Unusable::Dishonest));
        };
        let included_prev = self.ctx.final_included(round.saturating_sub(1))?;
        match expected_carried_in(&self.ctx.retained, round, member, &included_prev) {
            Some(h) if h != c.carried_in => {
                tracing::warn!(
                    round,
                    member,
                    "the payload carries in a residual the rule does not name"
                );
                return Ok(Err(Unusable::Dishonest));
            }
            Some(_) => {}
            None => {
                tracing::info!(
                    round,
                    member,
                    "its payload of round {} is not kept: cannot check the residual it carries in",
                    round.saturating_sub(1)
                );
                return Ok(Err(Unusable::Unknown));
            }
        }
        let fetch = |h: [u8; 32]| -> std::result::Result<Option<Vec<u8>>, Unusable> {
            if h == NO_RESIDUAL {
                return Ok(None);
            }
            match fetched.get(&h).and_then(|p| std::fs::read(p).ok()) {
                Some(b) if synod_checkpoint::hash(&b) == h => Ok(Some(b)),
                _ => Err(Unusable::Unserved),
            }
        };
        Ok((|| {
            Ok(Residuals {
                carried_in: fetch(c.carried_in)?,
                carried_out: fetch(c.carried_out)?,
            })
        })())
    }

    /// Member `member`'s libp2p peer id: from the member list, or, for a member that has left
    /// the pool since (its evidence is still served until its windows close), from the
    /// chain's record of former members.
    pub(super) fn peer_of(&self, member: u32) -> Option<synod_p2p::PeerId> {
        let bytes = match self.members.iter().find(|m| m.record.index == member) {
            Some(m) => m.record.peer_id.clone(),
            None => {
                self.ctx
                    .block_on(self.ctx.chain.former_member(self.ctx.pool, member))
                    .ok()
                    .flatten()?
                    .peer_id
            }
        };
        synod_p2p::PeerId::from_bytes(&bytes).ok()
    }

    /// How long the trace states of `checks` checks may be waited for when the finalized
    /// head is block `now` and challenges close at block `until`: what the window leaves,
    /// less [`LAG_BLOCKS`](synod_diloco::budget::LAG_BLOCKS) (the chain's head runs ahead of
    /// `now`, and a challenge is included a block after it is sent), after every check's
    /// segments and whole replay at twice this machine's idle step time (the replays share
    /// its cores with the inner phase); at least [`MIN_STATE_WAIT`]. An author that withholds
    /// its states forces the whole replay; waiting for them longer would let it outlast the
    /// window.
    pub(super) fn state_wait(&self, now: u64, until: u64, checks: usize) -> Duration {
        let blocks = until
            .saturating_sub(now)
            .saturating_sub(synod_diloco::budget::LAG_BLOCKS);
        let left = blocks as f64 * self.ctx.block_secs;
        let h = self.ctx.inner_steps;
        let load = synod_diloco::budget::VerifyLoad {
            inner_steps: h,
            segment_len: synod_diloco::verify::segment_len(h, self.ctx.recipe.pool.trace_segments),
            verify_segments: self.ctx.a.verify_segments,
            contributions: u32::try_from(checks).unwrap_or(u32::MAX),
            trace_segments: self.ctx.recipe.pool.trace_segments,
            state_bytes: 0,
            residual_bytes: 0,
        };
        let replays = 2.0 * load.replayed_steps() as f64 * self.ctx.step_secs;
        let secs = left - replays;
        if secs.is_finite() {
            Duration::from_secs_f64(secs.clamp(MIN_STATE_WAIT.as_secs_f64(), 1e6))
        } else {
            MIN_STATE_WAIT
        }
    }

    /// The trace states that the segment checks `checks` ((round, account, member, drawn
    /// segments)) need, fetched from their authors side by side ([`prefetch_states`]) into
    /// `by`'s [`Retained::fetched_dir`](crate::pool::verify::Retained::fetched_dir) of each round:
    /// each state gets at most [`STATE_FETCH`] plus its transfer at 10 MB/s, all of them twice
    /// that plus [`CHECK_BUDGET`], however many authors stall, and all of it at most `cap`
    /// ([`DutyWorker::state_wait`]). Contributions not kept, or without a trace of this
    /// pool's segments, need nothing. Returns each received state's file by blake3.
    pub(super) fn prefetch_trace_states(
        &self,
        checks: &[StateCheck],
        cap: Duration,
        by: Checker,
    ) -> FetchedStates {
        let boundaries = self
            .ctx
            .recipe
            .pool
            .segment_boundaries(self.ctx.inner_steps)
            .len();
        let mut asked = Vec::new();
        for (round, _, member, segments) in checks {
            // Only the accused serves its states (nobody else keeps them).
            let (Some(peer), Some(claimed)) = (
                self.peer_of(*member),
                self.ctx.retained.payload(*round, *member),
            ) else {
                continue;
            };
            asked.push(((peer, *round), claimed, segments.clone()));
        }
        let sparse = self.ctx.recipe.pool.is_sparse();
        let wanted = wanted_states(asked, boundaries, sparse);
        let fetches: u64 = wanted.iter().map(|(_, h)| h.len() as u64).sum();
        if wanted.is_empty() {
            return FetchedStates::new();
        }
        let max = self.ctx.recipe.max_state_bytes;
        let per_state = super::fetch_wait(max).min(cap);
        // The authors share our link: the round's wait grows with everything it fetches.
        let within =
            (2 * per_state + CHECK_BUDGET + Duration::from_secs(fetches * max / 10_000_000))
                .min(cap);
        self.fetch_states(wanted, max, per_state, within, by)
    }

    /// Asks the accused of `checks` again, side by side, for the residuals their payloads
    /// name that `states` lacks (a prefetch that waited less than a residual's transfer,
    /// [`asks_residual_again`], or a juror's whole-phase disputes, which prefetch no trace
    /// state), and adds what comes to `states`. Each residual gets [`fetch_wait`],
    /// the whole batch twice that plus the transfer of everything asked at 10 MB/s: k accused
    /// that withhold their residuals stall the pass for one such wait, not k.
    pub(super) fn ask_residuals_again(
        &self,
        checks: &[StateCheck],
        states: &mut FetchedStates,
        by: Checker,
    ) {
        if !self.ctx.recipe.pool.is_sparse() {
            return;
        }
        let asked = checks
            .iter()
            .filter_map(|(round, _, member, _)| {
                let peer = self.peer_of(*member)?;
                Some(((peer, *round), self.ctx.retained.payload(*round, *member)?))
            })
            .collect();
        let missed: Vec<_> = wanted_residuals(asked)
            .into_iter()
            .filter_map(|(k, hashes)| {
                let hashes: Vec<_> = hashes
                    .into_iter()
                    .filter(|h| !states.contains_key(h))
                    .collect();
                (!hashes.is_empty()).then_some((k, hashes))
            })
            .collect();
        let max = self.ctx.recipe.max_residual_bytes;
        let (per_state, within) = super::residual_batch_wait(&missed, max);
        let got = self.fetch_states(missed, max, per_state, within, by);
        states.extend(got);
    }

    /// Fetches `wanted` (per (author, round): the blake3 hashes wanted of it, at most `max`
    /// bytes each) side by side ([`prefetch_states`]) into `by`'s
    /// [`Retained::fetched_dir`](crate::pool::verify::Retained::fetched_dir) of each round,
    /// at most `per_state` each and `within` in all. Returns each received state's file by
    /// blake3.
    fn fetch_states(
        &self,
        wanted: Wanted<(synod_p2p::PeerId, u32)>,
        max: u64,
        per_state: Duration,
        within: Duration,
        by: Checker,
    ) -> FetchedStates {
        if wanted.is_empty() {
            return FetchedStates::new();
        }
        let rounds: BTreeSet<u32> = wanted.iter().map(|((_, round), _)| *round).collect();
        for round in rounds {
            if let Err(e) = std::fs::create_dir_all(self.ctx.retained.fetched_dir(round, by)) {
                tracing::warn!(round, "cannot keep fetched trace states: {e}");
                return FetchedStates::new();
            }
        }
        let retained = self.ctx.retained.clone();
        let client = self.ctx.client.clone();
        self.ctx.rt.block_on(prefetch_states(
            wanted,
            |(peer, _round)| *peer,
            per_state,
            within,
            move |(peer, round), h| {
                let client = client.clone();
                let path = retained
                    .fetched_dir(round, by)
                    .join(format!("{}.state", synod_checkpoint::hex(&h)));
                async move {
                    let bytes = fetch_evidence(&client, peer, h, max)
                        .await
                        .map_err(|e| tracing::info!(round, %peer, "trace state: {e}"))
                        .ok()?;
                    // Written whole, then renamed: a fetch cut at its deadline leaves no
                    // partial file under the state's name (one temporary file per author: two
                    // authors may serve the same residual at once).
                    tokio::task::spawn_blocking(move || {
                        let tmp = path.with_extension(format!("{peer}.tmp"));
                        std::fs::write(&tmp, bytes)?;
                        std::fs::rename(&tmp, &path).map(|_| path)
                    })
                    .await
                    .ok()?
                    .map_err(|e| tracing::warn!(round, "cannot keep a trace state: {e}"))
                    .ok()
                }
            },
        ))
    }
}
