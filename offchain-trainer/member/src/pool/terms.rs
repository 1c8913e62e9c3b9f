//! A pool's terms against what its recipe costs ([`synod_diloco::budget`]): `pool create`
//! measures the recipe here and derives, or refuses, a challenge window and a round timeout
//! its members cannot meet, and a recipe whose honest replays drift past half the replay
//! tolerance from the reference device; `run` measures again on the member's machine and
//! refuses to join a pool whose window or timeout it cannot keep with its own
//! `MemberConfig::verify_rate` and `verify_segments`, or on a device that drifts from the
//! reference past half the tolerance ([`device_check`]).

use std::time::Instant;

use anyhow::Result;
use synod_checkpoint::ParamSet;
use synod_diloco::budget::{
    challenge_secs, checked_contributions, exchange_secs, min_challenge_window, min_round_timeout,
    VerifyLoad,
};
use synod_diloco::verify::{replay_distance, segment_len, REPLAY_TOLERANCE, SEGMENT_TOLERANCE};
use synod_model::load_params;
use synod_model::segment::state_distance;
use synod_model::tch;
use synod_p2p::Limits;

use crate::pool::Recipe;

/// Inner steps timed per run of [`step_secs`].
const PROBE_STEPS: u32 = 4;
/// Timed runs of [`step_secs`] after one untimed warm-up run; the fastest counts (a load
/// spike on the machine does not inflate it).
const PROBE_RUNS: u32 = 3;

/// Seconds per inner step of `recipe` on this machine, as a verifier replays one (a segment
/// replay from a fresh phase state, [`synod_model::TchInnerTrainer::replay_segment`]): the
/// fastest of [`PROBE_RUNS`] runs of up to [`PROBE_STEPS`] steps.
///
/// # Errors
/// libtorch errors.
pub fn step_secs(recipe: &Recipe, inner_steps: u32) -> Result<f64> {
    let n = inner_steps.clamp(1, PROBE_STEPS);
    let mut replica = recipe.setup.replica(&recipe.pool, 0, n, n)?;
    let state = recipe.restore(&recipe.theta0_bytes, 0)?;
    load_params(&replica.vs, &state.params)?;
    replica.reset_optimizer();
    let start = replica.phase_state()?;
    let mut best = f64::INFINITY;
    for run in 0..=PROBE_RUNS {
        let t = Instant::now();
        replica.replay_segment(&start, 1, 0, n)?;
        if run > 0 {
            best = best.min(t.elapsed().as_secs_f64());
        }
    }
    Ok(best / f64::from(n))
}

/// The device class replays are judged on: the CPU in fp32. Every member's device stays
/// within half the replay and segment tolerances of it on the pool's recipe (`pool create`
/// probes the creator's device against it, `run` probes a member's device before it joins:
/// [`device_check`]), so any two members' honest runs are within the whole tolerances of each
/// other (the distances are relative to nearly equal norms, so they add up like a metric's),
/// and a verifier or juror on any admitted device never convicts an honest member on another.
pub const REFERENCE_DEVICE: tch::Device = tch::Device::Cpu;

/// One side of a [`Noise`] probe: where and how a run of the inner phase ran.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Run {
    /// libtorch device.
    pub device: tch::Device,
    /// libtorch's intra-op thread count.
    pub threads: i32,
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.device {
            tch::Device::Cpu if self.threads == 1 => write!(f, "the CPU with 1 thread"),
            tch::Device::Cpu => write!(f, "the CPU with {} threads", self.threads),
            tch::Device::Cuda(i) => write!(f, "cuda:{i}"),
            d => write!(f, "{d:?}"),
        }
    }
}

/// How far two honest runs of the same inner phase are apart when only where they run
/// differs: this process's device against [`REFERENCE_DEVICE`] at another thread count (on a
/// CPU-only machine, two thread counts), the floating-point reassociation and kernel
/// differences a verifier on another machine sees. Measured from θ₀ on round
/// ⌈warm-up / H⌉ + 1, the first whose inner steps all run at the schedule's peak learning
/// rate, where the drift grows fastest.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Noise {
    /// [`replay_distance`] of the two payloads: relative L2 distance of the decoded
    /// pseudo-gradients (dimensionless).
    pub distance: f64,
    /// [`state_distance`] of the trace's first segment replayed in the two runs from the same
    /// start state (dimensionless): what a juror of a narrowed dispute on another machine sees
    /// of an honest segment.
    pub segment_distance: f64,
    /// The two runs: this process's device, then the reference.
    pub runs: (Run, Run),
    /// The round the phase was run for.
    pub round: u32,
}

/// [`Noise`] of `recipe`'s inner phase of `inner_steps` in a pool of `rounds`: this process's
/// device and thread count against [`REFERENCE_DEVICE`] with half the threads (2 on a single
/// thread). Two whole inner phases and two replays of the trace's first segment.
///
/// # Errors
/// libtorch, codec or checkpoint errors.
pub fn honest_noise(recipe: &Recipe, inner_steps: u32, rounds: u32) -> Result<Noise> {
    let h = inner_steps.max(1);
    let round = recipe
        .pool
        .warmup
        .div_ceil(h)
        .saturating_add(1)
        .min(rounds.max(1));
    let state = recipe.restore(&recipe.theta0_bytes, round - 1)?;
    let opts = recipe.pool.encode_options();
    let here = tch::get_num_threads().max(1);
    let runs = (
        Run {
            device: recipe.setup.device,
            threads: here,
        },
        Run {
            device: REFERENCE_DEVICE,
            threads: if here > 1 { here / 2 } else { 2 },
        },
    );
    let total = h.saturating_mul(rounds.max(1));
    let replica = |run: Run| -> Result<synod_model::TchInnerTrainer> {
        tch::set_num_threads(run.threads);
        recipe
            .setup
            .replica_on(run.device, &recipe.pool, 0, h, total)
    };
    let phase = |run: Run| -> Result<std::sync::Arc<Vec<u8>>> {
        let mut replica = replica(run)?;
        let (c, _) = state.contribute(&mut replica, 0, &opts, &mut recipe.pool.feedback())?;
        Ok(c.payload)
    };
    let a = phase(runs.0);
    let b = if a.is_ok() {
        phase(runs.1)
    } else {
        Ok(Default::default())
    };
    // The trace's first segment, replayed from the phase's start state in each run.
    let bounds = recipe.pool.segment_boundaries(h);
    let (from, to) = (
        bounds.first().copied().unwrap_or(0),
        bounds.get(1).copied().unwrap_or(h),
    );
    let segment = |run: Run| -> Result<(ParamSet, ParamSet)> {
        let mut replica = replica(run)?;
        load_params(&replica.vs, &state.params)?;
        replica.reset_optimizer();
        let start = replica.phase_state()?;
        let end = replica.replay_segment(&start, round, from, to)?;
        Ok((start, end))
    };
    let segments = a.is_ok().then(|| (segment(runs.0), segment(runs.1)));
    tch::set_num_threads(here);
    let distance = replay_distance(&state.params, 0, &a?, &b?)?;
    let segment_distance = match segments {
        Some((x, y)) => {
            let ((start, end_here), (_, end_other)) = (x?, y?);
            state_distance(&start, &end_here, &end_other)
        }
        None => f64::NAN,
    };
    Ok(Noise {
        distance,
        segment_distance,
        runs,
        round,
    })
}

/// Refuses to let a member that has not joined yet train on a device other than
/// [`REFERENCE_DEVICE`] whose honest runs of the pool's recipe drift from the reference past
/// half a tolerance (`probe` measures it: [`honest_noise`]); a member on the reference
/// device, or one already joined (refusing it would leave its stake unserved), is not probed.
/// Returns the measured noise, if probed.
///
/// # Errors
/// [`TermsError::DeviceDrift`]; the probe's own errors.
pub fn device_check(
    device: tch::Device,
    joined: bool,
    probe: impl FnOnce() -> Result<Noise>,
) -> Result<Option<Noise>> {
    if joined || device == REFERENCE_DEVICE {
        return Ok(None);
    }
    let n = probe()?;
    check_noise(&n).map_err(|e| TermsError::DeviceDrift {
        device: n.runs.0.to_string(),
        reason: e.to_string(),
    })?;
    Ok(Some(n))
}

/// Bytes of one honest trace state of `recipe`'s model: θ and the two AdamW moments, 4 bytes
/// per parameter each (headers aside). What a verifier fetches per state; the fetch limit
/// (`Recipe::max_state_bytes`) adds slack to it.
///
/// # Errors
/// θ₀'s bytes do not parse (they were built by this process).
pub fn state_bytes(recipe: &Recipe) -> Result<u64> {
    let theta = synod_checkpoint::from_bytes(&recipe.theta0_bytes)?;
    Ok(theta
        .tensors()
        .iter()
        .filter(|t| !t.name.starts_with("outer_momentum."))
        .map(|t| 12 * t.data.len() as u64)
        .sum())
}

/// Residual bytes one check fetches: two error-feedback residuals
/// ([`synod_diloco::residual::max_residual_bytes`]) in a sparse pool, none in a dense one.
pub fn residual_bytes(recipe: &Recipe) -> u64 {
    if recipe.pool.is_sparse() {
        2 * recipe.max_residual_bytes
    } else {
        0
    }
}

/// What a pool's terms are checked against: one machine's cost per inner step and the
/// pool's shape.
#[derive(Clone, Copy, Debug)]
pub struct Costs {
    /// Seconds per inner step ([`step_secs`], or stated).
    pub step_secs: f64,
    /// Seconds per block (the runtime's slot duration).
    pub block_secs: f64,
    /// Assumed download and upload rate, bytes per second.
    pub bytes_per_sec: f64,
    /// Inner steps H per round.
    pub inner_steps: u32,
    /// The recipe's trace segments S.
    pub trace_segments: u32,
    /// Segments a verifier replays per checked contribution.
    pub verify_segments: u32,
    /// Most members of the pool.
    pub members: u32,
    /// The verifier's sample rate, if it states one (else every other member: the worst case).
    pub rate: Option<f64>,
    /// Largest trace state, bytes.
    pub state_bytes: u64,
    /// Residual bytes a check fetches (sparse pools), bytes.
    pub residual_bytes: u64,
    /// Largest payload, bytes.
    pub payload_bytes: u64,
    /// Blocks after a round opens before it accepts commits (`PoolTerms::min_round_length`).
    pub min_round_length: u32,
}

/// What a pool's shape and a verifier's settings are, for [`Costs::for_recipe`].
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Inner steps H per round.
    pub inner_steps: u32,
    /// Most members of the pool.
    pub members: u32,
    /// Segments a verifier replays per checked contribution.
    pub verify_segments: u32,
    /// The verifier's sample rate, if it states one.
    pub rate: Option<f64>,
}

impl Costs {
    /// The costs of `recipe` in a pool shaped `shape`, at `step_secs` per
    /// inner step, `block_secs` per block and `bytes_per_sec` of link.
    ///
    /// # Errors
    /// As [`state_bytes`].
    pub fn for_recipe(
        recipe: &Recipe,
        shape: Shape,
        step_secs: f64,
        block_secs: f64,
        bytes_per_sec: f64,
    ) -> Result<Self> {
        Ok(Self {
            step_secs,
            block_secs,
            bytes_per_sec,
            inner_steps: shape.inner_steps,
            trace_segments: recipe.pool.trace_segments,
            verify_segments: shape.verify_segments,
            members: shape.members,
            rate: shape.rate,
            state_bytes: state_bytes(recipe)?,
            residual_bytes: residual_bytes(recipe),
            payload_bytes: recipe.max_payload_bytes,
            min_round_length: 0,
        })
    }

    /// These costs in a pool whose rounds accept commits only `blocks` after they open.
    pub fn with_min_round_length(self, blocks: u32) -> Self {
        Self {
            min_round_length: blocks,
            ..self
        }
    }

    fn load(&self) -> VerifyLoad {
        VerifyLoad {
            inner_steps: self.inner_steps,
            segment_len: segment_len(self.inner_steps, self.trace_segments),
            verify_segments: self.verify_segments,
            contributions: checked_contributions(self.members, self.rate),
            trace_segments: self.trace_segments,
            state_bytes: self.state_bytes,
            residual_bytes: self.residual_bytes,
        }
    }

    /// Seconds of one verifier's checks of a round, its compute scaled by `margin`.
    pub fn verify_secs(&self, margin: f64) -> f64 {
        self.load()
            .secs(self.step_secs * margin, self.bytes_per_sec)
    }

    /// The smallest challenge window, compute scaled by `margin`.
    pub fn min_window(&self, margin: f64) -> u32 {
        min_challenge_window(self.verify_secs(margin), self.block_secs)
    }

    /// The smallest round timeout, compute scaled by `margin`.
    pub fn min_timeout(&self, margin: f64) -> u32 {
        min_round_timeout(
            f64::from(self.inner_steps) * self.step_secs * margin,
            self.verify_secs(margin),
            exchange_secs(self.members, self.payload_bytes, self.bytes_per_sec),
            self.block_secs,
            self.min_round_length,
        )
    }

    /// The default minimum round length (blocks) for a pool whose rounds time out after
    /// `round_timeout` blocks, on a chain whose floor is `chain_floor` blocks
    /// ([`synod_diloco::budget::min_round_length`] of the inner phase measured here).
    pub fn min_round_length(&self, chain_floor: u32, round_timeout: u32) -> u32 {
        synod_diloco::budget::min_round_length(
            f64::from(self.inner_steps) * self.step_secs,
            self.block_secs,
            chain_floor,
            round_timeout,
        )
    }

    /// Refuses `window` and `timeout` (blocks) below [`Costs::min_window`] and
    /// [`Costs::min_timeout`] at `margin`; `hint` says what to change.
    ///
    /// # Errors
    /// [`TermsError::WindowTooShort`], [`TermsError::TimeoutTooShort`].
    pub fn check(
        &self,
        window: u32,
        timeout: u32,
        margin: f64,
        hint: &'static str,
    ) -> Result<(), TermsError> {
        let load = self.load();
        let min = self.min_window(margin);
        if window < min {
            return Err(TermsError::WindowTooShort {
                window,
                available: challenge_secs(window, self.block_secs),
                needed: self.verify_secs(margin),
                checks: load.contributions,
                steps: load.replayed_steps(),
                step_secs: self.step_secs * margin,
                fetched: load.fetched_bytes(),
                min,
                hint,
            });
        }
        let min = self.min_timeout(margin);
        if timeout < min {
            return Err(TermsError::TimeoutTooShort {
                timeout,
                available: f64::from(timeout) * self.block_secs,
                phase: f64::from(self.inner_steps) * self.step_secs * margin,
                duties: self.verify_secs(margin),
                exchange: exchange_secs(self.members, self.payload_bytes, self.bytes_per_sec),
                min_round_length: self.min_round_length,
                min,
                hint,
            });
        }
        Ok(())
    }
}

/// Why a pool's terms, or a recipe, are refused.
#[derive(Debug, thiserror::Error)]
pub enum TermsError {
    /// The challenge window closes before one verifier's checks of a round can challenge.
    #[error(
        "a challenge window of {window} blocks leaves a verifier {available:.1} s after \
         finality, and its checks of one round take {needed:.1} s ({checks} contributions \
         checked, {steps} inner steps replayed at {step_secs:.4} s, {fetched} bytes of trace \
         states fetched): a lazy member would be paid before it can be challenged; {hint} \
         (window ≥ {min})"
    )]
    WindowTooShort {
        /// The window, blocks.
        window: u32,
        /// Seconds it leaves after the lag.
        available: f64,
        /// Seconds the checks take.
        needed: f64,
        /// Contributions checked.
        checks: u32,
        /// Inner steps replayed.
        steps: u64,
        /// Seconds per step (margin included).
        step_secs: f64,
        /// Bytes fetched.
        fetched: u64,
        /// The smallest window that fits.
        min: u32,
        /// What to change.
        hint: &'static str,
    },
    /// The round is voided before a member's inner phase, exchange and duties fit.
    #[error(
        "a round timeout of {timeout} blocks ({available:.1} s) is shorter than a member's \
         round: {phase:.1} s of inner phase, {duties:.1} s of verification sharing its \
         compute, {exchange:.1} s of exchange, its commit no sooner than {min_round_length} \
         blocks after the round opens, and its inclusion; honest members would be leaked; \
         {hint} (timeout ≥ {min})"
    )]
    TimeoutTooShort {
        /// The timeout, blocks.
        timeout: u32,
        /// Seconds it lasts.
        available: f64,
        /// Seconds of the inner phase.
        phase: f64,
        /// Seconds of duties.
        duties: f64,
        /// Seconds of exchange.
        exchange: f64,
        /// Blocks before the round accepts commits.
        min_round_length: u32,
        /// The smallest timeout that fits.
        min: u32,
        /// What to change.
        hint: &'static str,
    },
    /// Honest replays of the recipe differ by more than half the replay tolerance.
    #[error(
        "two honest runs of this recipe's inner phase (round {round}) differ by {distance:.3e} \
         between {} and {}, over half the replay tolerance ({tolerance}): verifiers on other \
         machines would convict honest members; use fewer inner steps, a lower learning rate \
         or a smaller model",
        runs.0,
        runs.1
    )]
    NoisyRecipe {
        /// The measured distance.
        distance: f64,
        /// The two runs compared.
        runs: (Run, Run),
        /// The round probed.
        round: u32,
        /// The replay tolerance.
        tolerance: f64,
    },
    /// Honest replays of one trace segment differ by more than half the segment tolerance.
    #[error(
        "two honest replays of this recipe's first trace segment differ by {distance:.3e} \
         between {} and {}, over half the segment tolerance ({tolerance}): verifiers' segment \
         checks would replay honest members whole, and jurors of narrowed disputes on other \
         devices could convict them; use more trace segments (--trace-segments), a lower \
         learning rate or a smaller model",
        runs.0,
        runs.1
    )]
    NoisySegments {
        /// The measured segment distance.
        distance: f64,
        /// The two runs compared.
        runs: (Run, Run),
        /// The segment tolerance.
        tolerance: f64,
    },
    /// A member's device drifts from [`REFERENCE_DEVICE`] past half a tolerance on the pool's
    /// recipe ([`device_check`]).
    #[error(
        "this member's device ({device}) drifts from the reference device (the CPU) on this \
         pool's recipe: {reason}; verifiers and jurors on the reference device would convict \
         its honest work: run it with --device cpu"
    )]
    DeviceDrift {
        /// The member's device.
        device: String,
        /// What the probe found ([`TermsError::NoisyRecipe`] or [`TermsError::NoisySegments`]).
        reason: String,
    },
}

/// Refuses a recipe whose honest replays drift past half of [`REPLAY_TOLERANCE`], or whose
/// honest segment replays drift past half of [`SEGMENT_TOLERANCE`] (a juror of a narrowed
/// dispute convicts on one segment alone past [`synod_diloco::verify::SEGMENT_CONVICTION`],
/// 20× that).
///
/// # Errors
/// [`TermsError::NoisyRecipe`], [`TermsError::NoisySegments`] (NaN distances included).
pub fn check_noise(n: &Noise) -> Result<(), TermsError> {
    if n.distance.is_nan() || n.distance > REPLAY_TOLERANCE / 2.0 {
        return Err(TermsError::NoisyRecipe {
            distance: n.distance,
            runs: n.runs,
            round: n.round,
            tolerance: REPLAY_TOLERANCE,
        });
    }
    if n.segment_distance.is_nan() || n.segment_distance > SEGMENT_TOLERANCE / 2.0 {
        return Err(TermsError::NoisySegments {
            distance: n.segment_distance,
            runs: n.runs,
            tolerance: SEGMENT_TOLERANCE,
        });
    }
    Ok(())
}

/// Upload rate, bytes per second, at which a member of a pool of `members` answers every
/// evidence request (a juror's residual, a verifier's trace state) asked again after the
/// transfers running at the first ask end, whatever the other members download from it: while
/// it serves evidence, each other member holds at most [`synod_p2p::EVIDENCE_PER_MEMBER`]
/// evidence and [`synod_p2p::CONTENDED_PER_MEMBER`] new bulk transfers, and each must keep
/// [`Limits::slowest_kept_rate`] (the serving rule, `synod_p2p`'s `network/serve.rs`). Counted
/// per transfer, the worst case (TCP shares a link per connection, a single-transfer juror's
/// favour).
pub fn evidence_capacity(members: u32, limits: &Limits) -> f64 {
    let per_member = (synod_p2p::EVIDENCE_PER_MEMBER + synod_p2p::CONTENDED_PER_MEMBER) as f64;
    per_member * f64::from(members.saturating_sub(1)) * limits.slowest_kept_rate()
}

/// The hint of a refusal at `pool create`.
pub const CREATE_HINT: &str = "lengthen it, or give the members' --step-secs";
/// The hint of a refusal at `run`.
pub const JOIN_HINT: &str = "this member cannot keep the pool's terms: run it on faster \
     hardware, or join a pool with longer ones";

/// The margin a creator applies ([`CREATOR_MARGIN`]) and a member does not (1).
pub const MEMBER_MARGIN: f64 = 1.0;

#[cfg(test)]
mod tests;
