//! Proof-of-Learning segments (Jia et al. 2021, §4.2): an inner phase's full state — θ and the
//! AdamW moments and step count — at segment boundaries, and the replay of one segment from
//! its start state. A member that records the state hashes of every boundary commits to its
//! whole trajectory; a verifier then replays a few sampled segments of `k` steps instead of
//! the whole phase, and a member that skipped or faked steps fails every segment that holds
//! one (the boundaries and sampling rules are `synod_diloco::verify`'s).

use synod_checkpoint::ParamSet;

use crate::adamw::{FIRST_MOMENT_PREFIX, SECOND_MOMENT_PREFIX, STEP_NAME};
use crate::{load_params, param_set, ModelError, TchInnerTrainer};

impl TchInnerTrainer {
    /// The replica's full inner state: its parameters (named as in a checkpoint) and its
    /// optimizer's moments and step count ([`crate::AdamW::state`]), f32, in canonical order.
    /// `synod_checkpoint::to_bytes` of it is what a segment boundary's hash covers: 12 bytes
    /// per parameter plus headers.
    ///
    /// # Errors
    /// [`ModelError::Torch`] if a copy fails.
    pub fn phase_state(&mut self) -> Result<ParamSet, ModelError> {
        let params = param_set(&self.vs)?;
        let mut tensors = params.tensors().to_vec();
        tensors.extend(self.optimizer()?.state()?);
        Ok(ParamSet::new(tensors)?)
    }

    /// Loads a full inner state (as [`TchInnerTrainer::phase_state`] returns it) into the
    /// replica: parameters and optimizer state.
    ///
    /// # Errors
    /// [`ModelError::Layout`] if `state` is not a state of this model; libtorch errors.
    pub fn load_phase_state(&mut self, state: &ParamSet) -> Result<(), ModelError> {
        let mut params = state.clone();
        let _ = params.take_prefixed(FIRST_MOMENT_PREFIX);
        let _ = params.take_prefixed(SECOND_MOMENT_PREFIX);
        let _ = params.take_prefixed(STEP_NAME);
        load_params(&self.vs, &params)?;
        self.optimizer()?.restore(state)
    }

    /// Replays inner steps `from..to` of outer round `round` from `state`, the full state
    /// after `from` steps, and returns the full state after `to` steps. Bit-identical to the
    /// original phase at the same libtorch thread count and device.
    ///
    /// # Errors
    /// As [`TchInnerTrainer::load_phase_state`] and the inner steps; [`ModelError::Layout`]
    /// if `state`'s step count is not `from` or `to` exceeds H.
    pub fn replay_segment(
        &mut self,
        state: &ParamSet,
        round: u32,
        from: u32,
        to: u32,
    ) -> Result<ParamSet, ModelError> {
        if to < from || to > self.cfg.inner_steps {
            return Err(ModelError::Layout(format!(
                "segment {from}..{to} outside the phase of {} steps",
                self.cfg.inner_steps
            )));
        }
        self.load_phase_state(state)?;
        if self.optimizer()?.steps() != u64::from(from) {
            return Err(ModelError::Layout(format!(
                "the state is not the one after {from} steps"
            )));
        }
        self.run_steps(round, from, to)?;
        self.phase_state()
    }
}

/// How far a claimed segment end state is from its replay, both reached from `start`:
/// the largest of three relative L2 distances, each summed in f64 in canonical order —
/// the parameter *updates* over the segment (‖(claimed − start) − (replayed − start)‖ /
/// ‖replayed − start‖, so the distance measures the segment's work, not θ's size), the first
/// moments and the second moments (‖claimed − replayed‖ / ‖replayed‖). A different step count
/// or layout is `f64::INFINITY`; NaN anywhere is NaN (never within a tolerance).
pub fn state_distance(start: &ParamSet, claimed: &ParamSet, replayed: &ParamSet) -> f64 {
    if !claimed.same_layout(replayed) || !start.same_layout(replayed) {
        return f64::INFINITY;
    }
    // [params, m, v]: (‖difference‖², ‖reference‖²)
    let mut sums = [(0f64, 0f64); 3];
    for ((s, c), r) in start
        .tensors()
        .iter()
        .zip(claimed.tensors())
        .zip(replayed.tensors())
    {
        if r.name == STEP_NAME {
            if c.data != r.data {
                return f64::INFINITY;
            }
            continue;
        }
        let group = if r.name.starts_with(FIRST_MOMENT_PREFIX) {
            1
        } else if r.name.starts_with(SECOND_MOMENT_PREFIX) {
            2
        } else {
            0
        };
        let (diff, norm) = &mut sums[group];
        for ((a, b), z) in c.data.iter().zip(&r.data).zip(&s.data) {
            let (a, b, z) = (f64::from(*a), f64::from(*b), f64::from(*z));
            let reference = if group == 0 { b - z } else { b };
            *diff += (a - b) * (a - b);
            *norm += reference * reference;
        }
    }
    sums.iter()
        .map(|(d, n)| {
            if *n > 0.0 {
                d.sqrt() / n.sqrt()
            } else {
                d.sqrt()
            }
        })
        .fold(0.0, |acc: f64, x| {
            if x.is_nan() || acc.is_nan() {
                f64::NAN
            } else {
                acc.max(x)
            }
        })
}
