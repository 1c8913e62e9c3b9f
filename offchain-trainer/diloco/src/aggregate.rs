//! Aggregation rules for the included set's pseudo-gradients (`docs/architecture.md`, step 4).
//!
//! * [`Mean`]: DiLoCo's plain mean. One member can move it anywhere (breakdown point 0).
//! * [`ClippedTrimmedMean`]: norm clipping to the median norm, then a coordinate-wise trimmed
//!   mean; tolerates f < n/3 arbitrary inputs (see its docs for the bound).
//! * [`AggregationRule`]: the rule a pool's recipe names (committed on-chain through the pool
//!   DiLoCo job's `model_config_hash`), dispatching to one of the above.

use crate::{DilocoError, PseudoGradient};

/// Combines the decoded pseudo-gradients of the included set into one outer gradient.
///
/// A rule is two steps, so that it can run one tensor at a time ([`crate::OuterState::apply`]
/// holds N tensors, not N models): per-input factors from the inputs' whole-vector L2 norms,
/// then a per-tensor combination. Implementations must be deterministic functions of their
/// input *in the order given* (member-index order), so that all honest survivors get
/// bit-identical results.
pub trait Aggregator: Send + Sync {
    /// The factor each input is scaled by, from the inputs' L2 norms ([`l2_norm`], f64, one
    /// per input, in input order).
    fn factors(&self, norms: &[f64]) -> Vec<f64>;

    /// Combines one tensor: `inputs[i]` is input i's elements of it (equal lengths, at least
    /// one input), `factors` from [`Aggregator::factors`]; writes `out` (same length).
    fn combine(&self, inputs: &[&[f32]], factors: &[f64], out: &mut [f32]);

    /// Aggregates whole pseudo-gradients `inputs` (one per included member, ascending member
    /// index, equal layouts): [`Aggregator::factors`] of their norms, then
    /// [`Aggregator::combine`] tensor by tensor.
    ///
    /// # Errors
    /// [`DilocoError::Empty`] for no input, [`DilocoError::LayoutMismatch`] for unequal layouts.
    fn aggregate(
        &self,
        round: u32,
        inputs: &[&PseudoGradient],
    ) -> Result<PseudoGradient, DilocoError> {
        let layout = common_layout(round, inputs)?;
        let norms: Vec<f64> = inputs.iter().map(|g| l2_norm(g)).collect();
        let factors = self.factors(&norms);
        let mut out: PseudoGradient = layout.iter().map(|t| vec![0.0; t.len()]).collect();
        for (t, o) in out.iter_mut().enumerate() {
            let tensors: Vec<&[f32]> = inputs.iter().map(|g| g[t].as_slice()).collect();
            self.combine(&tensors, &factors, o);
        }
        Ok(out)
    }
}

/// The first input, after checking that every input has its layout.
fn common_layout<'a>(
    round: u32,
    inputs: &[&'a PseudoGradient],
) -> Result<&'a PseudoGradient, DilocoError> {
    let first = *inputs.first().ok_or(DilocoError::Empty(round))?;
    for g in inputs {
        if g.len() != first.len() || g.iter().zip(first).any(|(a, b)| a.len() != b.len()) {
            return Err(DilocoError::LayoutMismatch);
        }
    }
    Ok(first)
}

/// The arithmetic mean (DiLoCo Algorithm 1, line 12): Σ Δ_i in input order, then × (1/n).
///
/// Not robust: a single input scaled by 1000 moves the aggregate by 1000/n times its size.
#[derive(Clone, Copy, Debug, Default)]
pub struct Mean;

impl Aggregator for Mean {
    fn factors(&self, norms: &[f64]) -> Vec<f64> {
        vec![1.0; norms.len()]
    }

    /// Σ in f64 in input order, × (1/n) in f64, rounded once to f32 (factors are not applied:
    /// all 1). The mean of finite f32 values lies between their extremes, so it is finite:
    /// an f32 sum of inputs near `f32::MAX` would overflow to ∞.
    fn combine(&self, inputs: &[&[f32]], _factors: &[f64], out: &mut [f32]) {
        if inputs.is_empty() {
            return;
        }
        let inv = 1.0 / inputs.len() as f64;
        for (k, o) in out.iter_mut().enumerate() {
            let sum: f64 = inputs
                .iter()
                .map(|x| x.get(k).map_or(0.0, |v| f64::from(*v)))
                .sum();
            *o = (sum * inv) as f32;
        }
    }
}

/// Norm-clipped, coordinate-wise trimmed mean of n pseudo-gradients.
///
/// 1. **Clip** (Karimireddy, He & Jaggi 2021, *Learning from History for Byzantine Robust
///    Optimization*, ICML, §4 "centered clipping", here centred at 0): τ = the lower median of
///    the n L2 norms (f64); every Δ_i with ‖Δ_i‖ > τ is scaled by τ/‖Δ_i‖ (each element
///    multiplied in f64 and rounded once to f32).
/// 2. **Trim** (Yin, Chen, Ramchandran & Bartlett 2018, *Byzantine-Robust Distributed
///    Learning: Towards Optimal Statistical Rates*, ICML, §3 "coordinate-wise trimmed mean"):
///    per coordinate, sort the n clipped values (`f32::total_cmp`), drop the b smallest and b
///    largest, and average the rest (f64 sum in sorted order, rounded once to f32).
///
/// b = min(f_max, ⌊(n − 1)/2⌋) for n inputs, where f_max is the most Byzantine members the
/// round can hold: by default ⌊(n − 1)/3⌋; for a pool round, [`ClippedTrimmedMean::for_stakes`]
/// of its frozen snapshot — the largest number of participants whose stakes sum to less than a
/// third of the total (the threat model bounds the attacker's *stake*, not its accounts, so
/// cheap sybil seats raise b), counted over the whole snapshot, not only the members whose
/// payload arrived (an attacker that gets honest members excluded does not lower b).
///
/// **Bound** (the `docs/architecture.md` threat model): with f ≤ b arbitrary inputs, every output
/// coordinate lies between the smallest and the largest *clipped honest* value of that
/// coordinate, and τ lies between the smallest and the largest honest norm — so no input can
/// scale, flip or overflow the aggregate beyond what the honest members themselves span. With
/// b = 0 (e.g. three equal stakes) the rule is a clipped mean: one input moves the aggregate
/// by at most τ/n in norm.
///
/// **Determinism**: the result depends only on the multiset of inputs (sorting fixes the
/// order of every sum), so it is bit-identical on every member and independent of arrival
/// order; no fused multiply-add, no parallel reduction.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClippedTrimmedMean {
    /// The most Byzantine members the round can hold (f_max); `None`: ⌊(n − 1)/3⌋ of the n
    /// inputs (local simulation, equal stakes, everyone included).
    pub byzantine: Option<usize>,
}

impl ClippedTrimmedMean {
    /// Values dropped from *each* end of every coordinate for `n` equal participants:
    /// ⌊(n − 1)/3⌋, the largest f with f < n/3 (n = 4 → 1, n = 7 → 2, n ≤ 3 → 0).
    pub fn trimmed(n: usize) -> usize {
        n.saturating_sub(1) / 3
    }

    /// The rule for a round whose participants hold `stakes` (planck): f_max = the largest
    /// number of participants whose stakes sum to less than a third of the total — the sum of
    /// the f smallest stakes, compared exactly as 3·Σ < total. Equal stakes give ⌊(N − 1)/3⌋.
    pub fn for_stakes(stakes: &[u128]) -> Self {
        let mut sorted = stakes.to_vec();
        sorted.sort_unstable();
        let total = sorted.iter().fold(0u128, |a, s| a.saturating_add(*s));
        let mut sum = 0u128;
        let mut f = 0;
        for s in sorted {
            sum = sum.saturating_add(s);
            if sum.saturating_mul(3) >= total {
                break;
            }
            f += 1;
        }
        Self { byzantine: Some(f) }
    }

    /// b for `n` inputs (see the type's docs).
    pub fn trim_for(&self, n: usize) -> usize {
        self.byzantine
            .unwrap_or_else(|| Self::trimmed(n))
            .min(n.saturating_sub(1) / 2)
    }

    /// The clip threshold τ for these norms: their lower median (`f64`, ≥ 0).
    pub fn clip_threshold(norms: &[f64]) -> f64 {
        let mut sorted = norms.to_vec();
        sorted.sort_by(f64::total_cmp);
        sorted
            .get(sorted.len().saturating_sub(1) / 2)
            .copied()
            .unwrap_or(0.0)
    }

    /// The factor an input of norm `norm` is multiplied by under threshold `tau`: τ/‖Δ‖ if
    /// ‖Δ‖ > τ, else 1.
    pub fn clip_factor(norm: f64, tau: f64) -> f64 {
        if norm > tau && norm > 0.0 {
            tau / norm
        } else {
            1.0
        }
    }
}

/// Adds Σ x² of `t` (f64, element order) to the running sum `acc`: [`l2_norm`] one tensor at
/// a time, with the same rounding.
pub fn sum_of_squares(acc: f64, t: &[f32]) -> f64 {
    t.iter().fold(acc, |a, &x| a + f64::from(x) * f64::from(x))
}

/// ‖g‖₂ accumulated in f64 in tensor and element order.
pub fn l2_norm(g: &PseudoGradient) -> f64 {
    g.iter().fold(0.0, |a, t| sum_of_squares(a, t)).sqrt()
}

impl Aggregator for ClippedTrimmedMean {
    fn factors(&self, norms: &[f64]) -> Vec<f64> {
        let tau = Self::clip_threshold(norms);
        norms.iter().map(|&x| Self::clip_factor(x, tau)).collect()
    }

    fn combine(&self, inputs: &[&[f32]], factors: &[f64], out: &mut [f32]) {
        let n = inputs.len();
        let b = self.trim_for(n);
        let inv = 1.0 / (n - 2 * b) as f64;
        let mut column = vec![0f32; n];
        for (k, o) in out.iter_mut().enumerate() {
            for ((c, x), f) in column.iter_mut().zip(inputs).zip(factors) {
                *c = (f64::from(x[k]) * f) as f32;
            }
            column.sort_unstable_by(f32::total_cmp);
            let sum: f64 = column[b..n - b].iter().map(|&v| f64::from(v)).sum();
            *o = (sum * inv) as f32;
        }
    }
}

/// The aggregation rule of a pool (part of its recipe, hence of the on-chain
/// `model_config_hash`): every member of a pool must use the same one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AggregationRule {
    /// [`Mean`]: DiLoCo's plain mean; not robust.
    Mean,
    /// [`ClippedTrimmedMean`]: tolerates f < n/3 arbitrary pseudo-gradients.
    #[default]
    ClippedTrimmedMean,
    /// [`ClippedTrimmedMean`] with no trim (b = 0): norm clipping to the median norm, then
    /// the mean; each input moves the aggregate by at most τ/n in norm. The rule for sparse
    /// payloads, where most coordinates are sent by one member only and a trim would drop them.
    ClippedMean,
}

impl AggregationRule {
    /// The rule's name in recipes and JSON (`mean`, `clipped_trimmed_mean`, `clipped_mean`).
    pub fn name(self) -> &'static str {
        match self {
            AggregationRule::Mean => "mean",
            AggregationRule::ClippedTrimmedMean => "clipped_trimmed_mean",
            AggregationRule::ClippedMean => "clipped_mean",
        }
    }

    /// The rule for a round whose participants hold `stakes` (planck; `None`: every input is
    /// a participant with equal stake, as in local simulation).
    pub fn aggregator(self, stakes: Option<&[u128]>) -> Box<dyn Aggregator> {
        match self {
            AggregationRule::Mean => Box::new(Mean),
            AggregationRule::ClippedTrimmedMean => Box::new(
                stakes.map_or_else(ClippedTrimmedMean::default, ClippedTrimmedMean::for_stakes),
            ),
            AggregationRule::ClippedMean => Box::new(ClippedTrimmedMean { byzantine: Some(0) }),
        }
    }
}
