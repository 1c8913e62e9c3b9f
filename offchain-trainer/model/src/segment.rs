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

/// Whether `state` can be an AdamW state reached by honest steps with these β: every value
/// finite, second moments ≥ 0, and per element |m| ≤ C·√v with
/// C = (1 − β₁) / √((1 − β₂)(1 − β₁²/β₂)) (Cauchy–Schwarz on m = (1−β₁)Σβ₁ᵏg, v = (1−β₂)Σβ₂ᵏg²;
/// 10⁻³ relative slack for rounding). A verifier refuses to replay from a state outside it: an
/// arbitrary start state (one huge first moment, say) could make the replay's own updates huge
/// and hide a lazy member's missing work inside the tolerance. With β₁² ≥ β₂ only finiteness
/// and v ≥ 0 are checked.
pub fn plausible_state(state: &ParamSet, beta1: f64, beta2: f64) -> bool {
    let tensors = state.tensors();
    if tensors
        .iter()
        .any(|t| t.data.iter().any(|x| !x.is_finite()))
    {
        return false;
    }
    let ratio = beta1 * beta1 / beta2;
    let bound = (ratio < 1.0).then(|| (1.0 - beta1) / ((1.0 - beta2) * (1.0 - ratio)).sqrt());
    for m in tensors
        .iter()
        .filter(|t| t.name.starts_with(FIRST_MOMENT_PREFIX))
    {
        let name = format!(
            "{SECOND_MOMENT_PREFIX}{}",
            &m.name[FIRST_MOMENT_PREFIX.len()..]
        );
        let Some(v) = tensors.iter().find(|t| t.name == name) else {
            return false;
        };
        if v.data.len() != m.data.len() || v.data.iter().any(|x| *x < 0.0) {
            return false;
        }
        if let Some(c) = bound {
            let fits = m.data.iter().zip(&v.data).all(|(m, v)| {
                f64::from(m.abs()) <= c * f64::from(*v).sqrt() * (1.0 + 1e-3) + 1e-30
            });
            if !fits {
                return false;
            }
        }
    }
    true
}

/// How far a claimed segment end state is from its replay, both reached from `start`: the
/// largest relative L2 distance over the tensors, each against its own reference and summed in
/// f64 — for a parameter, the segment's *update* (‖(claimed − start) − (replayed − start)‖ /
/// ‖replayed − start‖, so the distance measures the segment's work, not θ's size), for a moment
/// the replayed moment (‖claimed − replayed‖ / ‖replayed‖); a zero reference gives the
/// absolute distance. Per tensor, so that no one tensor's scale hides another's difference. A
/// different step count or layout is `f64::INFINITY`; NaN anywhere is NaN (never within a
/// tolerance). Check the start state with [`plausible_state`] first.
pub fn state_distance(start: &ParamSet, claimed: &ParamSet, replayed: &ParamSet) -> f64 {
    if !claimed.same_layout(replayed) || !start.same_layout(replayed) {
        return f64::INFINITY;
    }
    let mut worst = 0f64;
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
        let moment =
            r.name.starts_with(FIRST_MOMENT_PREFIX) || r.name.starts_with(SECOND_MOMENT_PREFIX);
        let (mut diff, mut norm) = (0f64, 0f64);
        for ((a, b), z) in c.data.iter().zip(&r.data).zip(&s.data) {
            let (a, b, z) = (f64::from(*a), f64::from(*b), f64::from(*z));
            let reference = if moment { b } else { b - z };
            diff += (a - b) * (a - b);
            norm += reference * reference;
        }
        let d = if norm > 0.0 {
            diff.sqrt() / norm.sqrt()
        } else {
            diff.sqrt()
        };
        if d.is_nan() {
            return f64::NAN;
        }
        worst = worst.max(d);
    }
    worst
}
