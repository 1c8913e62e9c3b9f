//! `bench verify`: what verification costs and catches, Proof-of-Learning segments against
//! whole replays, on the pool code path ([`Replayer::check_segments`],
//! [`Replayer::check_dispute`] and [`Replayer::check`]).
//!
//! Measured in one run: the inner phase with and without its trace (the trace's overhead),
//! a whole replay, and a segment check (start, end and [`VerifyConfig::segments`] sampled
//! segments); a lazy member that skips [`VerifyConfig::fake_fraction`] of its steps (whole
//! segments, contiguous: the hardest to find) checked by [`VerifyConfig::trials`] verifiers
//! drawing their segments as in a pool, and judged by a juror of a challenge narrowed to one
//! skipped segment. From those: each verifier's share of its own training compute at a
//! member's sample rate for [`VerifyConfig::members`] of equal stake (only the honest two
//! thirds of the stake are counted on to verify, [`honest_verifiers_at_least`]), and the
//! probability that a lazy member escapes a round.

use std::time::Instant;

use anyhow::{bail, Result};
use serde_json::json;
use synod_diloco::verify::{
    honest_verifiers_at_least, sample_rate, sampled_segments, segment_escape_probability,
    segment_len,
};

use crate::forger::{forged_contribution, skipping};
use synod_member::config::RecipeConfig;
use synod_member::pool::Recipe;
use synod_verify::replay::{Dispute, Residuals, TraceStates};
use synod_verify::{ReplayInput, Replayer};

/// What `bench verify` runs.
#[derive(Clone, Debug)]
pub struct VerifyConfig {
    /// The pool's recipe (its trace segments cut the phase), corpus and device.
    pub recipe: RecipeConfig,
    /// Inner steps per round (H).
    pub inner_steps: u32,
    /// Members of the pool, of equal stake (each verifies the others at a member's rate).
    pub members: u32,
    /// Segments each verifier replays per sampled contribution (`run --verify-segments`).
    pub segments: u32,
    /// Share of the other members' contributions each verifier samples (`run
    /// --verify-rate`); `None`: what a member samples at for `members` of equal stake.
    pub rate: Option<f64>,
    /// Share of its inner steps the lazy member skips.
    pub fake_fraction: f64,
    /// Verifiers that check the lazy member (each draws its own segments).
    pub trials: u32,
    /// Timed inner phases of each kind (plain, traced), alternated; the fastest counts.
    pub reps: u32,
}

/// Prints `{"bench":"verify",...}`.
///
/// # Errors
/// Fewer than 2 members or no inner step, a rate outside 0..=1; an honest contribution that
/// fails its check or a lazy one a check does not judge as its drawn segments say; an
/// unreadable corpus, libtorch, codec and replay errors.
pub fn run(a: &VerifyConfig) -> Result<()> {
    if a.members < 2 || a.inner_steps == 0 {
        bail!("--members must be ≥ 2 and --inner-steps ≥ 1");
    }
    let (h, round, accused) = (a.inner_steps, 1, 1);
    let recipe = Recipe::load(&a.recipe)?;
    let pool = &recipe.pool;
    let state = recipe.restore(&recipe.theta0_bytes, 0)?;
    let opts = pool.encode_options();
    let mut worker = recipe.setup.replica(pool, accused, h, 4 * h)?;
    let bounds = pool.segment_boundaries(h);
    let segments = bounds.len() as u32 - 1;

    // The accused's phase, plain and traced (states kept as a member keeps them, on disk),
    // alternated `reps` times after one untimed warm-up phase: the fastest of each.
    state.contribute(&mut worker, accused, &opts, &mut pool.feedback())?;
    let dir = std::env::temp_dir().join(format!("synod-bench-verify-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut states = TraceStates::new();
    let mut state_bytes = 0;
    let (mut inner_secs, mut traced_secs) = (f64::INFINITY, f64::INFINITY);
    let mut honest = None;
    for _ in 0..a.reps.max(1) {
        let t = Instant::now();
        state.contribute(&mut worker, accused, &opts, &mut pool.feedback())?;
        inner_secs = inner_secs.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let (c, _) = state.contribute_traced(
            &mut worker,
            accused,
            &opts,
            &mut pool.feedback(),
            &bounds,
            &mut |_, bytes, hash| {
                std::fs::write(dir.join(synod_checkpoint::hex(&hash)), &bytes)
                    .map_err(|e| synod_diloco::DilocoError::Inner(e.to_string()))?;
                state_bytes = bytes.len();
                states.insert(hash, bytes);
                Ok(())
            },
        )?;
        traced_secs = traced_secs.min(t.elapsed().as_secs_f64());
        honest = Some(c);
    }
    let honest = honest.ok_or_else(|| anyhow::anyhow!("no phase ran"))?;
    let _ = std::fs::remove_dir_all(&dir);

    // A verifier: a whole replay, then the segment check of the same payload.
    let mut replayer = Replayer::new(h, 4);
    let view = recipe.replay_view();
    let no_residuals = Residuals::default();
    let base = ReplayInput {
        recipe: &view,
        parent: &recipe.theta0_bytes,
        round,
        member: accused,
        claimed: &honest.payload,
        residuals: &no_residuals,
    };
    let whole = replayer.check(&base)?;
    // Verifier `v`'s segment check of `payload`, its states served from `served`.
    let mut check = |v: &[u8], payload: &[u8], served: &TraceStates| {
        let drawn = sampled_segments(&[0; 32], &[1; 32], v, round, accused, segments, a.segments);
        let rep = replayer.check_segments(
            &ReplayInput {
                claimed: payload,
                ..base
            },
            &drawn,
            &mut |h| served.get(h).cloned(),
        );
        (drawn, rep)
    };
    let checked = check(b"bench", &honest.payload, &states).1?;
    if !whole.honest || !checked.honest || checked.whole.is_some() {
        bail!("the honest contribution failed its check: {whole:?} {checked:?}");
    }

    // The lazy member: contiguous whole segments, the fewest bad segments for its share.
    let k = segment_len(h, pool.trace_segments);
    let skipped_steps = (a.fake_fraction * f64::from(h)).ceil() as u32;
    let bad = skipped_steps.div_ceil(k).clamp(1, segments);
    let skip: Vec<u32> = (segments - bad..segments).collect();
    let (lazy, lazy_states) = forged_contribution(
        &mut worker,
        &state.params,
        round,
        &mut skipping(&skip),
        &bounds,
        &opts,
    )?;
    // Each verifier draws its segments; one that misses the skipped ones sees a consistent
    // trace (the check is run all the same: it is the pool's code path).
    let mut caught = 0u32;
    for v in 0..a.trials {
        let (drawn, rep) = check(&v.to_le_bytes(), &lazy, &lazy_states);
        let rep = rep?;
        if rep.honest == drawn.iter().any(|i| skip.contains(i)) {
            bail!("verifier {v} drew {drawn:?} of the skipped {skip:?} and found {rep:?}");
        }
        caught += u32::from(!rep.honest);
    }
    // A juror of the challenge a verifier that caught it opens: the dispute names the first
    // skipped segment, and the juror checks that segment alone (no whole replay).
    let dispute = Dispute::Segment(skip[0]);
    let judged = replayer.check_dispute(
        &ReplayInput {
            claimed: &lazy,
            ..base
        },
        dispute,
        &mut |h| lazy_states.get(h).cloned(),
    )?;
    if judged.honest || judged.whole.is_some() {
        bail!("the juror's check of {dispute:?} did not decide guilty: {judged:?}");
    }

    // Per round: every member samples each other contribution at a member's rate; only the
    // fewest honest verifiers the stakes guarantee are counted on (the others may be the
    // lazy member's own seats).
    let n = a.members;
    let stakes = vec![1u128; n as usize];
    // The accused is none of its own verifiers.
    let honest = honest_verifiers_at_least(&stakes, u128::from(n)).min(n as usize - 1);
    let rate = a.rate.unwrap_or_else(|| sample_rate(honest));
    if !(0.0..=1.0).contains(&rate) {
        bail!("--rate must be within 0..=1, not {rate}");
    }
    let checks_per_verifier = f64::from(n - 1) * rate;
    let escape_check = segment_escape_probability(segments, bad, a.segments);
    let escape_round = (1.0 - rate * (1.0 - escape_check)).powi(honest as i32);
    let rounds_99 = (0.01f64.ln() / escape_round.ln()).ceil();
    let worst_secs = f64::from(n - 1) * (checked.secs + whole.secs);
    // Samples of one contribution needed to catch it in one round with 99 %.
    let samples_99 = (1..=segments)
        .find(|s| segment_escape_probability(segments, bad, *s) <= 0.01)
        .unwrap_or(segments);
    println!(
        "{}",
        json!({
            "bench": "verify",
            "inner_steps": h,
            "segments": segments,
            "segment_len": k,
            "state_bytes": state_bytes,
            "trace_bytes_on_disk_per_round": state_bytes * bounds.len(),
            "inner_secs": inner_secs,
            "traced_inner_secs": traced_secs,
            "trace_overhead": traced_secs / inner_secs - 1.0,
            "whole_replay_secs": whole.secs,
            "segment_check_secs": checked.secs,
            "segments_per_check": a.segments,
            "segment_check_vs_whole_replay": checked.secs / whole.secs,
            // A juror's vote on a challenge narrowed to the lazy member's first skipped
            // segment (`Replayer::check_dispute`): guilty, from that segment alone.
            "juror_dispute_guilty": !judged.honest,
            "juror_dispute_secs": judged.secs,
            "juror_dispute_vs_whole_replay": judged.secs / whole.secs,
            "members": n,
            "verify_rate": rate,
            "honest_verifiers": honest,
            "contributions_checked_per_verifier": checks_per_verifier,
            "cost_share_whole_replays": checks_per_verifier * whole.secs / inner_secs,
            "cost_share_segments": checks_per_verifier * checked.secs / inner_secs,
            "fake_fraction": a.fake_fraction,
            "bad_segments": bad,
            "escape_one_check": escape_check,
            "caught_measured": f64::from(caught) / f64::from(a.trials.max(1)),
            "caught_expected": 1.0 - escape_check,
            "escape_one_round": escape_round,
            "rounds_to_catch_99pct": rounds_99,
            "segments_for_99pct_in_one_check": samples_99,
            // Steps replayed over steps trained, for one contribution.
            "cost_share_for_99pct_in_one_round": f64::from(samples_99 * k) / f64::from(h),
            // Verification latency against the challenge window (2 s blocks, state
            // transfers not counted): a verifier's checks of one round at the sample rate,
            // the worst case (every other member checked, each segment check failing into a
            // whole replay), and the smallest window in which the worst case still
            // challenges (`synod_diloco::budget::min_challenge_window`).
            "round_checks_secs": checks_per_verifier * checked.secs,
            "round_checks_secs_worst": worst_secs,
            "min_challenge_window_blocks": synod_diloco::budget::min_challenge_window(worst_secs, 2.0),
        })
    );
    Ok(())
}
