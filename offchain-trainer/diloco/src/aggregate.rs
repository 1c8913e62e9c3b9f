//! Aggregation rules for the included set's pseudo-gradients (`docs/architecture.md`, step 4).
//!
//! * [`Mean`]: DiLoCo's plain mean. One member can move it anywhere (breakdown point 0).
//! * [`ClippedTrimmedMean`]: norm clipping to the stake-weighted median norm, then a
//!   stake-weighted coordinate-wise trimmed mean; tolerates arbitrary inputs from members
//!   holding less than a third of the snapshot stake (see its docs for the bound).
//! * [`AggregationRule`]: the rule a pool's recipe names (committed on-chain through the pool
//!   DiLoCo job's `model_config_hash`), dispatching to one of the above.

use std::collections::BTreeMap;

use crate::{DilocoError, PseudoGradient};

/// Stake of each participant of a round (member index → planck of snapshot stake): the
/// weights of [`ClippedTrimmedMean`]. A member not in the map weighs 0.
pub type Stakes = BTreeMap<u32, u128>;

/// Combines the decoded pseudo-gradients of the included set into one outer gradient.
///
/// A rule is two steps, so that it can run one tensor at a time ([`crate::OuterState::apply`]
/// holds N tensors, not N models): per-input factors from the inputs' whole-vector L2 norms,
/// then a per-tensor combination. Implementations must be deterministic functions of their
/// input *in the order given* (member-index order), so that all honest survivors get
/// bit-identical results.
pub trait Aggregator: Send + Sync {
    /// The weight of member `member`'s input: its snapshot stake in planck for a rule that
    /// knows the round's stakes, 1 for every member otherwise. 0: the member is not a
    /// participant of the round, and its payload is rejected
    /// ([`crate::aggregate_payloads`]).
    fn weight(&self, _member: u32) -> u128 {
        1
    }

    /// The factor each input is scaled by, from the inputs' L2 norms ([`l2_norm`], f64, one
    /// per input, in input order) and weights ([`Aggregator::weight`], one per input).
    fn factors(&self, norms: &[f64], weights: &[u128]) -> Vec<f64>;

    /// Combines one tensor: `inputs[i]` is input i's elements of it (equal lengths, at least
    /// one input, every weight above 0), `factors` from [`Aggregator::factors`], `weights`
    /// one per input; writes `out` (same length).
    fn combine(&self, inputs: &[&[f32]], factors: &[f64], weights: &[u128], out: &mut [f32]);

    /// Aggregates whole pseudo-gradients `inputs`, input i being member i's (equal layouts):
    /// [`Aggregator::factors`] of their norms, then [`Aggregator::combine`] tensor by tensor.
    /// Inputs of weight 0 are left out.
    ///
    /// # Errors
    /// [`DilocoError::Empty`] for no input of positive weight, [`DilocoError::LayoutMismatch`]
    /// for unequal layouts.
    fn aggregate(
        &self,
        round: u32,
        inputs: &[&PseudoGradient],
    ) -> Result<PseudoGradient, DilocoError> {
        let (inputs, weights): (Vec<&PseudoGradient>, Vec<u128>) = inputs
            .iter()
            .zip(0u32..)
            .map(|(g, m)| (*g, self.weight(m)))
            .filter(|(_, w)| *w > 0)
            .unzip();
        let layout = common_layout(round, &inputs)?;
        let norms: Vec<f64> = inputs.iter().map(|g| l2_norm(g)).collect();
        let factors = self.factors(&norms, &weights);
        let mut out: PseudoGradient = layout.iter().map(|t| vec![0.0; t.len()]).collect();
        for (t, o) in out.iter_mut().enumerate() {
            let tensors: Vec<&[f32]> = inputs.iter().map(|g| g[t].as_slice()).collect();
            self.combine(&tensors, &factors, &weights, o);
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
/// Unweighted: every input counts once whatever its stake.
#[derive(Clone, Copy, Debug, Default)]
pub struct Mean;

impl Aggregator for Mean {
    fn factors(&self, norms: &[f64], _weights: &[u128]) -> Vec<f64> {
        vec![1.0; norms.len()]
    }

    /// Σ in f64 in input order, × (1/n) in f64, rounded once to f32 (factors are not applied:
    /// all 1). The mean of finite f32 values lies between their extremes, so it is finite:
    /// an f32 sum of inputs near `f32::MAX` would overflow to ∞.
    fn combine(&self, inputs: &[&[f32]], _factors: &[f64], _weights: &[u128], out: &mut [f32]) {
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

/// Stake-weighted, norm-clipped, coordinate-wise trimmed mean of n pseudo-gradients.
///
/// Every input i carries its member's snapshot stake w_i ([`Stakes`]; 1 each without
/// stakes). The threat model bounds the attacker's *stake*, not its accounts, so every
/// statistic is taken over stake, never over a count of payloads: sybils at the minimum
/// stake that outnumber the honest members choose neither the threshold nor what survives
/// the trim.
///
/// 1. **Clip** (Karimireddy, He & Jaggi 2021, *Learning from History for Byzantine Robust
///    Optimization*, ICML, §4 "centered clipping", here centred at 0): τ = the stake-weighted
///    lower median of the n L2 norms ([`ClippedTrimmedMean::clip_threshold`], f64); every Δ_i
///    with ‖Δ_i‖ > τ is scaled by τ/‖Δ_i‖ (each element multiplied in f64 and rounded once to
///    f32).
/// 2. **Trim** (Yin, Chen, Ramchandran & Bartlett 2018, *Byzantine-Robust Distributed
///    Learning: Towards Optimal Statistical Rates*, ICML, §3 "coordinate-wise trimmed mean",
///    weighted by stake): per coordinate, sort the n clipped values (`f32::total_cmp`, ties
///    by weight), remove a stake mass T from the bottom and T from the top (an input on the
///    boundary loses part of its weight), and take the stake-weighted mean of what is left
///    (f64, summed in sorted order, rounded once to f32).
///
/// T ([`ClippedTrimmedMean::trim_thirds`]) bounds the stake the round's Byzantine
/// participants can hold: less than a third of the snapshot's total W, and at most the f
/// largest stakes, f being the most participants whose stakes can sum to less than W/3. It is
/// counted over the whole snapshot, not only the members whose payload arrived (an attacker
/// that gets honest members excluded does not lower T), and capped so that some stake of the
/// included set is always left. Equal stakes give T = ⌊(N − 1)/3⌋ inputs' worth, the
/// classical b = f < N/3; with equal weights the rule computes exactly that count-based
/// trimmed mean (the same bits).
///
/// **Bound** (the `docs/architecture.md` threat model): with Byzantine inputs holding stake
/// A ≤ T, and honest inputs holding more than half of the included stake, every output
/// coordinate lies between the smallest and the largest *clipped honest* value of that
/// coordinate (an attacker value that survives has more than T of stake at or below it and
/// at or above it, hence an honest value on either side), and τ lies between the smallest
/// and the largest honest norm — so no input can scale, flip or overflow the aggregate beyond
/// what the honest members themselves span, however many accounts its stake is split over.
/// With T = 0 (e.g. three equal stakes) the rule is a clipped weighted mean: input i moves
/// the aggregate by at most τ·w_i/W_inc in norm (W_inc the included inputs' stake).
///
/// **Determinism**: the result depends only on the multiset of (input, weight) pairs (sorting
/// fixes the order of every sum), so it is bit-identical on every member and independent of
/// arrival order; no fused multiply-add, no parallel reduction.
#[derive(Clone, Debug)]
pub struct ClippedTrimmedMean {
    /// The round's snapshot (member → planck), every participant whether or not its payload
    /// arrived; `None`: every input weighs 1 and the inputs are the whole round (local
    /// simulation).
    stakes: Option<Stakes>,
    /// Whether to trim (`false`: the clipped weighted mean, T = 0).
    trim: bool,
}

impl Default for ClippedTrimmedMean {
    /// Equal weights, trimmed: the rule of a local simulation.
    fn default() -> Self {
        Self {
            stakes: None,
            trim: true,
        }
    }
}

impl ClippedTrimmedMean {
    /// The rule for a round whose participants hold `stakes` (planck).
    pub fn for_stakes(stakes: &Stakes) -> Self {
        Self {
            stakes: Some(stakes.clone()),
            trim: true,
        }
    }

    /// The clipped weighted mean (no trim) for `stakes` (`None`: equal weights).
    pub fn clipped_mean(stakes: Option<&Stakes>) -> Self {
        Self {
            stakes: stakes.cloned(),
            trim: false,
        }
    }

    /// The most participants whose stakes can sum to less than a third of their total: the
    /// f smallest `stakes` (planck), compared exactly as 3·Σ < total. Equal stakes give
    /// ⌊(N − 1)/3⌋ (N = 4 → 1, N = 7 → 2, N ≤ 3 → 0).
    pub fn byzantine_count(stakes: &[u128]) -> usize {
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
        f
    }

    /// T, the stake trimmed from *each* end of every coordinate, in thirds of a planck (3·T,
    /// so that a third of the total is exact), for an included set holding `included`
    /// planck (or inputs, without stakes): min(W, 3 × the [`Self::byzantine_count`] largest
    /// stakes) over the snapshot's stakes (without stakes: `included` inputs of weight 1),
    /// capped at ⌊(3·included − 1)/2⌋ so that some weight is left. 0 for the clipped mean.
    pub fn trim_thirds(&self, included: u128) -> u128 {
        if !self.trim {
            return 0;
        }
        let stakes: Vec<u128> = match &self.stakes {
            Some(s) => s.values().copied().collect(),
            None => vec![1; usize::try_from(included).unwrap_or(usize::MAX)],
        };
        let total = stakes.iter().fold(0u128, |a, s| a.saturating_add(*s));
        let f = Self::byzantine_count(&stakes);
        let mut largest = stakes;
        largest.sort_unstable_by(|a, b| b.cmp(a));
        let most = largest
            .iter()
            .take(f)
            .fold(0u128, |a, s| a.saturating_add(*s));
        let cap = included.saturating_mul(3).saturating_sub(1) / 2;
        total.min(most.saturating_mul(3)).min(cap)
    }

    /// The clip threshold τ for these norms: their lower median weighted by `weights` (one
    /// per norm), the smallest norm at which the weight of the norms at or below it reaches
    /// half the total (`f64`, ≥ 0; 0 for no norm). Equal weights: the lower median.
    pub fn clip_threshold(norms: &[f64], weights: &[u128]) -> f64 {
        let mut sorted: Vec<(f64, u128)> =
            norms.iter().copied().zip(weights.iter().copied()).collect();
        sorted.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let total = weights.iter().fold(0u128, |a, w| a.saturating_add(*w));
        let mut below = 0u128;
        for (norm, w) in &sorted {
            below = below.saturating_add(*w);
            if below.saturating_mul(2) >= total {
                return *norm;
            }
        }
        0.0
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

    /// With every weight equal, the trim in whole inputs b (T = b·w), if it is one.
    fn whole_inputs_trimmed(weights: &[u128], thirds: u128) -> Option<usize> {
        let w = *weights.first()?;
        if w == 0 || weights.iter().any(|x| *x != w) {
            return None;
        }
        let per_input = w.saturating_mul(3);
        thirds
            .is_multiple_of(per_input)
            .then(|| usize::try_from(thirds / per_input).ok())
            .flatten()
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
    fn weight(&self, member: u32) -> u128 {
        match &self.stakes {
            Some(s) => s.get(&member).copied().unwrap_or(0),
            None => 1,
        }
    }

    fn factors(&self, norms: &[f64], weights: &[u128]) -> Vec<f64> {
        let tau = Self::clip_threshold(norms, weights);
        norms.iter().map(|&x| Self::clip_factor(x, tau)).collect()
    }

    fn combine(&self, inputs: &[&[f32]], factors: &[f64], weights: &[u128], out: &mut [f32]) {
        let n = inputs.len();
        if n == 0 {
            return;
        }
        let included = weights.iter().fold(0u128, |a, w| a.saturating_add(*w));
        let thirds = self.trim_thirds(included);
        let mut column = vec![0f32; n];
        if let Some(b) = Self::whole_inputs_trimmed(weights, thirds).filter(|b| 2 * b < n) {
            // Equal weights: the count-based trimmed mean, b inputs from each end.
            let inv = 1.0 / (n - 2 * b) as f64;
            for (k, o) in out.iter_mut().enumerate() {
                for ((c, x), f) in column.iter_mut().zip(inputs).zip(factors) {
                    *c = (f64::from(x[k]) * f) as f32;
                }
                column.sort_unstable_by(f32::total_cmp);
                let sum: f64 = column[b..n - b].iter().map(|&v| f64::from(v)).sum();
                *o = (sum * inv) as f32;
            }
            return;
        }
        let scaled: Vec<u128> = weights.iter().map(|w| w.saturating_mul(3)).collect();
        let mut order: Vec<usize> = (0..n).collect();
        let mut left = vec![0u128; n];
        for (k, o) in out.iter_mut().enumerate() {
            for ((c, x), f) in column.iter_mut().zip(inputs).zip(factors) {
                *c = (f64::from(x[k]) * f) as f32;
            }
            order.sort_unstable_by(|&a, &b| {
                column[a]
                    .total_cmp(&column[b])
                    .then(weights[a].cmp(&weights[b]))
            });
            for (l, &i) in left.iter_mut().zip(&order) {
                *l = scaled[i];
            }
            trim_from(left.iter_mut(), thirds);
            trim_from(left.iter_mut().rev(), thirds);
            // −0.0, the start of `Iterator::sum` of floats: an all −0.0 column stays −0.0.
            let (mut sum, mut mass) = (-0.0f64, 0f64);
            for (l, &i) in left.iter().zip(&order) {
                if *l > 0 {
                    let w = *l as f64;
                    sum += w * f64::from(column[i]);
                    mass += w;
                }
            }
            *o = if mass > 0.0 { (sum / mass) as f32 } else { 0.0 };
        }
    }
}

/// Removes `mass` from the weights in `left`, in the order given, each down to 0 before
/// the next.
fn trim_from<'a>(left: impl Iterator<Item = &'a mut u128>, mut mass: u128) {
    for l in left {
        if mass == 0 {
            break;
        }
        let cut = (*l).min(mass);
        *l -= cut;
        mass -= cut;
    }
}

/// The aggregation rule of a pool (part of its recipe, hence of the on-chain
/// `model_config_hash`): every member of a pool must use the same one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AggregationRule {
    /// [`Mean`]: DiLoCo's plain mean; not robust.
    Mean,
    /// [`ClippedTrimmedMean`]: tolerates arbitrary pseudo-gradients from members holding
    /// less than a third of the snapshot stake, however many accounts.
    #[default]
    ClippedTrimmedMean,
    /// [`ClippedTrimmedMean`] with no trim (T = 0): norm clipping to the stake-weighted median
    /// norm, then the stake-weighted mean; input i moves the aggregate by at most τ·w_i/W_inc in
    /// norm. The rule for sparse payloads, where most coordinates are sent by one member only
    /// and a trim would drop them.
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

    /// The rule for a round whose participants hold `stakes` (member → planck of snapshot
    /// stake; `None`: every input is a participant with weight 1, as in local simulation).
    pub fn aggregator(self, stakes: Option<&Stakes>) -> Box<dyn Aggregator> {
        match self {
            AggregationRule::Mean => Box::new(Mean),
            AggregationRule::ClippedTrimmedMean => Box::new(
                stakes.map_or_else(ClippedTrimmedMean::default, ClippedTrimmedMean::for_stakes),
            ),
            AggregationRule::ClippedMean => Box::new(ClippedTrimmedMean::clipped_mean(stakes)),
        }
    }
}
