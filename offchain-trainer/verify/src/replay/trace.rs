//! Checking a contribution by its Proof-of-Learning trace (Jia et al. 2021, "Proof-of-Learning",
//! §4.2; [`synod_diloco::trace`]): a verifier's sample of segments
//! ([`Replayer::check_segments`]) and a juror's disputed part ([`Replayer::check_dispute`]),
//! both over one trace check that rebuilds the start, encodes the end and replays segments.

use std::time::Instant;

use anyhow::{bail, Result};
use synod_diloco::payload::Payload;
use synod_diloco::pseudo_gradient;
use synod_diloco::verify::{
    replay_distance, segment_drift, within_tolerance, REPLAY_TOLERANCE, SEGMENT_CONVICTION,
    SEGMENT_TOLERANCE,
};
use synod_diloco::SegmentReplay;

use super::{with_carried, Dispute, Replay, ReplayInput, Replayer, WholeReplay};

/// How a verifier gets the state a trace hash names: the bytes, already checked against the
/// hash (from its store or a member), or `None` if nobody served them in time.
pub type FetchState<'a> = dyn FnMut(&[u8; 32]) -> Option<Vec<u8>> + 'a;

/// What checking a trace found.
enum TraceCheck {
    /// Start, end and every sampled segment within tolerance (the largest distance).
    Passed(f64),
    /// A check failed: the part of the trace it found wrong, and its distance.
    Failed(Dispute, f64),
    /// A state was not served.
    Unserved,
    /// Every check passed, but the segments' drift extrapolated to the phase did not.
    Drift,
}

impl<T: SegmentReplay> Replayer<T> {
    /// Checks `c.member`'s contribution to `c.round` by its Proof-of-Learning trace (Jia et al.
    /// 2021, §4.2; [`synod_diloco::trace`]): the trace's first state must be θ_{r−1} with a
    /// fresh optimizer (rebuilt here bit for bit), its last state's θ must encode to the
    /// claimed payload, and each of `segments` (indices drawn by
    /// [`synod_diloco::verify::sampled_segments`]) must replay from its start state to its end
    /// state within [`SEGMENT_TOLERANCE`], and their drift extrapolated to the whole phase
    /// ([`segment_drift`]) must be within [`REPLAY_TOLERANCE`]. States come from `fetch`.
    /// A failed check of the trace's ends (its start is not the phase's start, or the payload
    /// does not encode its last state) decides at once, as it decides for jurors
    /// ([`Replayer::check_dispute`], [`Dispute::Encoding`]): dishonest, `failed` naming it, no
    /// whole replay (a whole replay could not make such a payload honest). Without a trace,
    /// with a state nobody serves, or when a segment check fails, it replays the whole phase
    /// ([`Replayer::check`]) and returns that, naming in `failed` a segment past
    /// [`SEGMENT_CONVICTION`] when the whole replay confirms the contribution dishonest: a
    /// challenge then names that part, never a part of an honest contribution. A sparse payload's end state is encoded with
    /// `c.residuals` as [`Replayer::check`] does.
    ///
    /// # Errors
    /// As [`Replayer::check`].
    pub fn check_segments(
        &mut self,
        c: &ReplayInput<'_, T>,
        segments: &[u32],
        fetch: &mut FetchState<'_>,
    ) -> Result<Replay> {
        let t0 = Instant::now();
        if segments.is_empty() && Payload::trace_of(c.claimed).is_some() {
            return self.check(c);
        }
        let Some(trace) = self.trace_of(c) else {
            return self.whole(c, WholeReplay::NoTrace, None);
        };
        let (why, failed) = match self.trace_check(c, &trace, segments, fetch)? {
            Ok(TraceCheck::Passed(d)) => {
                return Ok(Replay {
                    distance: d,
                    honest: true,
                    secs: t0.elapsed().as_secs_f64(),
                    segments: segments.len() as u32,
                    whole: None,
                    failed: None,
                })
            }
            // The trace's ends decide on their own, here as for jurors: the challenge names
            // them at once, a whole replay later.
            Ok(TraceCheck::Failed(Dispute::Encoding, d)) => {
                return Ok(Replay {
                    distance: d,
                    honest: false,
                    secs: t0.elapsed().as_secs_f64(),
                    segments: segments.len() as u32,
                    whole: None,
                    failed: Some(Dispute::Encoding),
                })
            }
            // Named only where it decides for jurors too: a segment failing by no more than
            // SEGMENT_CONVICTION may be this verifier's own device drifting, and its jurors
            // would replay whole anyway.
            Ok(TraceCheck::Failed(Dispute::Segment(_), d)) if d <= SEGMENT_CONVICTION => {
                (WholeReplay::Mismatch, None)
            }
            Ok(TraceCheck::Failed(part, _)) => (WholeReplay::Mismatch, Some(part)),
            Ok(TraceCheck::Drift) => (WholeReplay::Drift, None),
            Ok(TraceCheck::Unserved) => (WholeReplay::Unserved, None),
            // A state that does not parse or fit the model is the accused's fault: replay whole.
            Err(e) => {
                let (round, member) = (c.round, c.member);
                tracing::info!(round, member, "trace check failed ({e:#}): replaying whole");
                (WholeReplay::Refused, None)
            }
        };
        self.whole(c, why, failed)
    }

    /// Checks the part of `c.member`'s trace that a challenge disputes
    /// (`docs/architecture.md`, step 7, "Narrowed disputes"; [`synod_protocol::dispute`]): for
    /// [`Dispute::Encoding`] the trace's start and end (the payload must encode its last
    /// state), for [`Dispute::Segment`] those and the named segment's replay, as
    /// [`Replayer::check_segments`] checks them, and that check decides: a part that holds is
    /// honest, a start or end that fails, or a segment past [`SEGMENT_CONVICTION`], is
    /// dishonest (`failed` names it) without a whole replay. A whole replay
    /// ([`Replayer::check`]) decides instead for [`Dispute::Phase`], a segment the trace does
    /// not have, no trace of this pool's segments, a segment failing by no more than
    /// [`SEGMENT_CONVICTION`] (possibly honest drift), a state the accused does not serve
    /// (withholding neither convicts nor shields), a served state that is no state of this
    /// phase, or a drift past the whole phase's tolerance.
    ///
    /// # Errors
    /// As [`Replayer::check`].
    pub fn check_dispute(
        &mut self,
        c: &ReplayInput<'_, T>,
        dispute: Dispute,
        fetch: &mut FetchState<'_>,
    ) -> Result<Replay> {
        let t0 = Instant::now();
        let segments = dispute.segments();
        if dispute == Dispute::Phase {
            return self.check(c);
        }
        let Some(trace) = self.trace_of(c) else {
            return self.whole(c, WholeReplay::NoTrace, None);
        };
        if segments.iter().any(|i| *i as usize + 1 >= trace.len()) {
            return self.check(c);
        }
        let decided = |distance: f64, failed: Option<Dispute>| Replay {
            distance,
            honest: failed.is_none(),
            secs: t0.elapsed().as_secs_f64(),
            segments: segments.len() as u32,
            whole: None,
            failed,
        };
        let why = match self.trace_check(c, &trace, &segments, fetch)? {
            Ok(TraceCheck::Passed(d)) => return Ok(decided(d, None)),
            // A segment only just past its tolerance may be a larger model's or another
            // device's honest drift: the whole replay decides.
            Ok(TraceCheck::Failed(part @ Dispute::Segment(_), d)) if d <= SEGMENT_CONVICTION => {
                return self.whole(c, WholeReplay::Mismatch, Some(part));
            }
            Ok(TraceCheck::Failed(part, d)) => return Ok(decided(d, Some(part))),
            Ok(TraceCheck::Drift) => WholeReplay::Drift,
            Ok(TraceCheck::Unserved) => WholeReplay::Unserved,
            Err(e) => {
                let (round, member) = (c.round, c.member);
                tracing::info!(
                    round,
                    member,
                    "disputed part unchecked ({e:#}): replaying whole"
                );
                WholeReplay::Refused
            }
        };
        self.whole(c, why, None)
    }

    /// The claimed payload's trace (its boundary hashes) if it has one boundary per boundary
    /// of this pool's segments; `None` for no trace or one of another shape.
    fn trace_of(&self, c: &ReplayInput<'_, T>) -> Option<Vec<[u8; 32]>> {
        let bounds = c.recipe.segment_boundaries(self.inner_steps);
        Payload::trace_of(c.claimed).filter(|t| t.len() == bounds.len())
    }

    /// The whole replay ([`Replayer::check`]) of a contribution a trace check did not decide,
    /// with why (`why`) and the part of the trace a failed check named (`failed`).
    fn whole(
        &mut self,
        c: &ReplayInput<'_, T>,
        why: WholeReplay,
        failed: Option<Dispute>,
    ) -> Result<Replay> {
        let rep = self.check(c)?;
        Ok(Replay {
            whole: Some(why),
            // A part is named only when the whole replay confirms the contribution dishonest.
            failed: failed.filter(|_| !rep.honest),
            ..rep
        })
    }

    /// The trace check of [`Replayer::check_segments`] over `trace` (the claimed payload's
    /// boundary hashes, one per boundary of this pool's segments): the start rebuilt from
    /// `c.parent`, the end's encoding, then each of `segments` replayed. `Err` in the inner
    /// result: a served state that does not parse or fit the model, or a failed segment
    /// replay.
    ///
    /// # Errors
    /// As [`Replayer::check`] (preparing the replica).
    fn trace_check(
        &mut self,
        c: &ReplayInput<'_, T>,
        trace: &[[u8; 32]],
        segments: &[u32],
        fetch: &mut FetchState<'_>,
    ) -> Result<Result<TraceCheck>> {
        let ReplayInput {
            recipe,
            round,
            member,
            claimed,
            residuals,
            ..
        } = *c;
        let bounds = recipe.segment_boundaries(self.inner_steps);
        let opts = recipe.encode_options();
        let (state, replica) = self.prepare(c)?;
        Ok((|| -> Result<TraceCheck> {
            let (mut feedback, carried_out) = residuals.replay_memory(recipe, &state.params)?;
            let start = replica.start_state(&state.params)?;
            if synod_checkpoint::hash(&synod_checkpoint::to_bytes(&start)?) != trace[0] {
                return Ok(TraceCheck::Failed(Dispute::Encoding, f64::INFINITY));
            }
            // Every state the check needs is fetched before any replay (the fetch deadlines
            // then count transfers only).
            let last = trace.len() - 1;
            let drawn: Vec<usize> = segments
                .iter()
                .map(|i| *i as usize)
                .filter(|i| *i < last)
                .collect();
            let mut served = std::collections::HashMap::new();
            for j in needed_states(trace.len(), segments) {
                let Some(bytes) = fetch(&trace[j]) else {
                    return Ok(TraceCheck::Unserved);
                };
                // A served state that is not this model's, or no honest AdamW state, is a
                // failed check (`Err`): replayed whole.
                let s = synod_checkpoint::from_bytes(&bytes)?;
                if !replica.plausible_state(&s, &start) {
                    bail!(
                        "state {} is no AdamW state of this phase",
                        synod_checkpoint::hex(&trace[j])
                    );
                }
                served.insert(j, s);
            }
            let state_at = |j: usize| if j == 0 { Some(&start) } else { served.get(&j) };
            let Some(end) = state_at(last) else {
                return Ok(TraceCheck::Unserved);
            };
            let delta = pseudo_gradient(&state.params, &replica.params_of(end))?;
            let encoded = feedback.encode(&state.params, delta, &opts)?;
            let mut worst = with_carried(
                replay_distance(&state.params, member, claimed, &encoded).unwrap_or(f64::INFINITY),
                &state.params,
                member,
                &feedback,
                &encoded,
                claimed,
                carried_out.as_ref(),
            );
            if !within_tolerance(worst) {
                return Ok(TraceCheck::Failed(Dispute::Encoding, worst));
            }
            let mut drifts = Vec::with_capacity(drawn.len());
            for &i in &drawn {
                let (Some(from), Some(to)) = (state_at(i), state_at(i + 1)) else {
                    return Ok(TraceCheck::Unserved);
                };
                let replayed = replica.replay_segment(from, round, bounds[i], bounds[i + 1])?;
                let d = replica.state_distance(from, to, &replayed);
                if d.is_nan() || d > SEGMENT_TOLERANCE {
                    let d = if d.is_nan() { f64::INFINITY } else { d };
                    return Ok(TraceCheck::Failed(
                        Dispute::Segment(u32::try_from(i).unwrap_or(u32::MAX)),
                        d,
                    ));
                }
                worst = worst.max(d);
                drifts.push(d);
            }
            if segment_drift(&drifts, last) > REPLAY_TOLERANCE {
                return Ok(TraceCheck::Drift);
            }
            Ok(TraceCheck::Passed(worst))
        })())
    }
}

/// Indices into a trace of `trace_len` states (boundaries 0..=S) of the states a segment
/// check of `segments` fetches from the trace's author: the end, and both boundaries of each
/// drawn segment except the start (index 0, rebuilt locally). Ascending, no repeats; segments
/// out of range are ignored.
pub fn needed_states(trace_len: usize, segments: &[u32]) -> Vec<usize> {
    let Some(last) = trace_len.checked_sub(1).filter(|l| *l > 0) else {
        return Vec::new();
    };
    let mut wanted = vec![last];
    for i in segments.iter().map(|i| *i as usize).filter(|i| *i < last) {
        wanted.extend([i, i + 1].into_iter().filter(|j| *j > 0 && *j < last));
    }
    wanted.sort_unstable();
    wanted.dedup();
    wanted
}

/// States of a trace by their blake3 (a verifier's view of what its author serves).
pub type TraceStates = std::collections::HashMap<[u8; 32], Vec<u8>>;
