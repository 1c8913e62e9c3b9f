//! Proof-of-Learning segments (Jia et al. 2021, §4.2): an inner phase's full state — θ and the
//! AdamW moments and step count — at segment boundaries, and the replay of one segment from
//! its start state. A member that records the state hashes of every boundary commits to its
//! whole trajectory; a verifier then replays a few sampled segments of `k` steps instead of
//! the whole phase, and a member that skipped or faked steps fails every segment that holds
//! one (the boundaries and sampling rules are `synod_diloco::verify`'s).

use synod_checkpoint::ParamSet;
use synod_diloco::{DilocoError, SegmentReplay};

use crate::adamw::{FIRST_MOMENT_PREFIX, SECOND_MOMENT_PREFIX, STEP_NAME};
use crate::{load_params, param_set, InnerConfig, ModelError, TchInnerTrainer};

/// The parameters of a full inner state ([`TchInnerTrainer::phase_state`]): its optimizer's
/// tensors removed.
pub fn params_of(state: &ParamSet) -> ParamSet {
    let mut p = state.clone();
    for prefix in [FIRST_MOMENT_PREFIX, SECOND_MOMENT_PREFIX, STEP_NAME] {
        let _ = p.take_prefixed(prefix);
    }
    p
}

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
        load_params(&self.vs, &params_of(state))?;
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

/// The tch replica's full state is θ plus [`crate::AdamW`]'s moments and step count
/// ([`TchInnerTrainer::phase_state`]); its bounds are [`plausible_state`] and its distance
/// [`state_distance`].
impl SegmentReplay for TchInnerTrainer {
    fn set_worker(&mut self, worker: u32) {
        self.worker = worker;
    }

    fn start_state(&mut self, start: &ParamSet) -> Result<ParamSet, DilocoError> {
        load_params(&self.vs, start)?;
        self.reset_optimizer();
        Ok(self.phase_state()?)
    }

    fn replay_segment(
        &mut self,
        state: &ParamSet,
        round: u32,
        from: u32,
        to: u32,
    ) -> Result<ParamSet, DilocoError> {
        Ok(TchInnerTrainer::replay_segment(
            self, state, round, from, to,
        )?)
    }

    fn plausible_state(&self, state: &ParamSet, start: &ParamSet) -> bool {
        plausible_state(state, start, &self.cfg)
    }

    fn params_of(&self, state: &ParamSet) -> ParamSet {
        params_of(state)
    }

    fn state_distance(&self, start: &ParamSet, claimed: &ParamSet, replayed: &ParamSet) -> f64 {
        state_distance(start, claimed, replayed)
    }
}

/// Relative slack of [`plausible_state`]'s bounds (f32 rounding).
const SLACK: f64 = 1e-3;

/// Whether `state` can be the full state after `t` honest inner steps (t its step counter)
/// from `start` (the phase's start state: θ_{r−1}, zero moments; same layout required) under
/// `cfg`. The bounds follow from AdamW with global-norm clipping at G = `cfg.grad_clip`, every
/// clipped gradient having ‖g‖ ≤ G:
/// * every value finite, second moments ≥ 0, the step counter t a whole number within
///   0..=`cfg.inner_steps`;
/// * Σ v ≤ (1 − β₂ᵗ)·G² and ‖m‖ ≤ (1 − β₁ᵗ)·G over the whole state;
/// * per element |m| ≤ C·√v, C = (1 − β₁)/√((1 − β₂)(1 − β₁²/β₂)) (Cauchy–Schwarz on
///   m = (1−β₁)Σβ₁ᵏg, v = (1−β₂)Σβ₂ᵏg²), so one AdamW step moves an element by at most
///   η·A, A = maxₛ C·√(1 − β₂ˢ)/(1 − β₁ˢ);
/// * per parameter |θ − θ_{r−1}| ≤ t·η·(A + λ·(|θ_{r−1}| + t·η·A)) with η the peak learning
///   rate and λ the weight decay.
///
/// A verifier replays only from states inside them: an arbitrary start state (a huge moment,
/// a huge parameter that weight decay then moves far) could make the replay's own update so
/// large that a lazy member's missing work hid inside the tolerance. Without clipping
/// (`grad_clip` = 0) or with β₁² ≥ β₂ nothing is plausible: such recipes are replayed whole.
/// Bounds carry [`SLACK`] relative and tiny absolute slack.
pub fn plausible_state(state: &ParamSet, start: &ParamSet, cfg: &InnerConfig) -> bool {
    let (b1, b2, g) = (cfg.beta1, cfg.beta2, cfg.grad_clip);
    let ratio = b1 * b1 / b2;
    if g <= 0.0 || ratio >= 1.0 || !state.same_layout(start) {
        return false;
    }
    let tensors = state.tensors();
    if tensors
        .iter()
        .any(|t| t.data.iter().any(|x| !x.is_finite()))
    {
        return false;
    }
    let Ok(i) = tensors.binary_search_by(|t| t.name.as_str().cmp(STEP_NAME)) else {
        return false;
    };
    let t = tensors[i].data.first().map_or(-1.0, |x| f64::from(*x));
    // A phase has `inner_steps` steps (the moments and the counter start at zero each round):
    // a larger counter is no honest state, and would cost the bound below t iterations.
    if t < 0.0 || t.fract() != 0.0 || t > f64::from(cfg.inner_steps) {
        return false;
    }
    let c = (1.0 - b1) / ((1.0 - b2) * (1.0 - ratio)).sqrt();
    let a = (1..=(t as u32).max(1))
        .map(|s| c * (1.0 - b2.powi(s as i32)).sqrt() / (1.0 - b1.powi(s as i32)))
        .fold(0.0, f64::max);
    let eta = cfg.lr.max(cfg.min_lr);
    let lambda = cfg.weight_decay.max(0.0);
    let (mut sum_v, mut sum_m2) = (0f64, 0f64);
    for (x, s0) in tensors.iter().zip(start.tensors()) {
        if let Some(name) = x.name.strip_prefix(FIRST_MOMENT_PREFIX) {
            let v_name = format!("{SECOND_MOMENT_PREFIX}{name}");
            let Ok(j) = tensors.binary_search_by(|t| t.name.cmp(&v_name)) else {
                return false;
            };
            let v = &tensors[j];
            if v.data.len() != x.data.len() {
                return false;
            }
            for (m, v) in x.data.iter().zip(&v.data) {
                let (m, v) = (f64::from(*m), f64::from(*v));
                if v < 0.0 || m.abs() > c * v.sqrt() * (1.0 + SLACK) + 1e-18 {
                    return false;
                }
                sum_m2 += m * m;
            }
        } else if x.name.starts_with(SECOND_MOMENT_PREFIX) {
            sum_v += x.data.iter().map(|v| f64::from(*v)).sum::<f64>();
        } else if x.name != STEP_NAME {
            for (p, p0) in x.data.iter().zip(&s0.data) {
                let (p, p0) = (f64::from(*p), f64::from(*p0));
                let drift = t * eta * (a + lambda * (p0.abs() + t * eta * a));
                if (p - p0).abs() > drift * (1.0 + SLACK) + 1e-6 {
                    return false;
                }
            }
        }
    }
    sum_v <= (1.0 - b2.powf(t)) * g * g * (1.0 + SLACK) + 1e-30
        && sum_m2.sqrt() <= (1.0 - b1.powf(t)) * g * (1.0 + SLACK) + 1e-30
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
