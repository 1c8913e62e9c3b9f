//! The robust aggregation rule against Byzantine pseudo-gradients: every attack of
//! `synod_diloco::byzantine` on the plain mean and on the clipped trimmed mean, the rule's
//! bound as a property, its determinism, and an end-to-end local run with a sign-flipping
//! member.
#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

mod common;
use common::Quadratic;

use proptest::prelude::*;
use synod_checkpoint::{NamedTensor, ParamSet};
use synod_codec::EncodeOptions;
use synod_diloco::byzantine::{Adversary, Attack};
use synod_diloco::{
    AggregationRule, Aggregator, ClippedTrimmedMean, DilocoError, Mean, NesterovSgd, OuterState,
    PseudoGradient, Stakes,
};

/// Three honest pseudo-gradients of two tensors, all pointing the same way (positive).
fn honest() -> Vec<PseudoGradient> {
    vec![
        vec![vec![0.10, 0.20, 0.30], vec![0.05]],
        vec![vec![0.12, 0.18, 0.33], vec![0.04]],
        vec![vec![0.09, 0.21, 0.28], vec![0.06]],
    ]
}

/// Per coordinate, [min, max] over `set`.
fn range(set: &[PseudoGradient]) -> Vec<Vec<(f32, f32)>> {
    set[0]
        .iter()
        .enumerate()
        .map(|(t, tensor)| {
            (0..tensor.len())
                .map(|k| {
                    set.iter()
                        .map(|g| g[t][k])
                        .fold((f32::MAX, f32::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)))
                })
                .collect()
        })
        .collect()
}

/// Member i holds `stakes[i]`.
fn stakes(stakes: &[u128]) -> Stakes {
    (0u32..).zip(stakes.iter().copied()).collect()
}

/// The first `honest` inputs of `all`, clipped as the rule clips them (τ from all norms,
/// every input of weight 1).
fn clipped_honest(all: &[PseudoGradient], honest: usize) -> Vec<PseudoGradient> {
    clipped_honest_weighted(all, honest, &vec![1; all.len()])
}

/// The first `honest` inputs of `all`, clipped as the rule clips them (τ from all norms
/// weighted by `weights`).
fn clipped_honest_weighted(
    all: &[PseudoGradient],
    honest: usize,
    weights: &[u128],
) -> Vec<PseudoGradient> {
    let norms: Vec<f64> = all.iter().map(synod_diloco::l2_norm).collect();
    let tau = ClippedTrimmedMean::clip_threshold(&norms, weights);
    all[..honest]
        .iter()
        .zip(&norms)
        .map(|(g, &n)| {
            let f = ClippedTrimmedMean::clip_factor(n, tau);
            g.iter()
                .map(|t| t.iter().map(|&x| (f64::from(x) * f) as f32).collect())
                .collect()
        })
        .collect()
}

fn within(g: &PseudoGradient, r: &[Vec<(f32, f32)>]) -> bool {
    g.iter()
        .zip(r)
        .all(|(t, rt)| t.iter().zip(rt).all(|(v, (lo, hi))| *lo <= *v && *v <= *hi))
}

/// The honest set plus the attacker's Δ (crafted from honest[0] as its own), attacker last.
fn with_attack(attack: Attack) -> Vec<PseudoGradient> {
    let h = honest();
    let others: Vec<&PseudoGradient> = h[1..].iter().collect();
    let bad = attack.craft(&h[0], &others, 7);
    let mut all = h.clone();
    all.push(bad);
    all
}

fn aggregate(rule: &dyn Aggregator, set: &[PseudoGradient]) -> PseudoGradient {
    let refs: Vec<&PseudoGradient> = set.iter().collect();
    rule.aggregate(1, &refs).unwrap()
}

#[test]
fn scaled_pseudo_gradient_cannot_steer_the_aggregate() {
    let set = with_attack(Attack::ScaleX100);
    let r = range(&honest());
    // The attack works on the plain mean: the aggregate leaves the honest range by far.
    let mean = aggregate(&Mean, &set);
    assert!(mean[0][0] > 2.0, "{mean:?}");
    let robust = aggregate(&ClippedTrimmedMean::default(), &set);
    assert!(within(&robust, &r), "{robust:?} outside {r:?}");
}

#[test]
fn sign_flipped_pseudo_gradient_cannot_reverse_the_aggregate() {
    let set = with_attack(Attack::SignFlip);
    let robust = aggregate(&ClippedTrimmedMean::default(), &set);
    assert!(within(&robust, &range(&honest())), "{robust:?}");
}

#[test]
fn every_simulated_attack_stays_within_the_honest_range() {
    let r = range(&honest());
    for attack in Attack::ALL {
        let robust = aggregate(&ClippedTrimmedMean::default(), &with_attack(attack));
        assert!(
            within(&robust, &r),
            "{}: {robust:?} outside {r:?}",
            attack.name()
        );
    }
}

#[test]
fn overflowing_pseudo_gradient_cannot_make_the_aggregate_non_finite() {
    let mut set = honest();
    set.push(vec![vec![3.0e38, 3.0e38, -3.0e38], vec![3.0e38]]);
    set.push(vec![vec![3.0e38, 3.0e38, -3.0e38], vec![3.0e38]]);
    // Summed in f64, the plain mean stays finite (a mean of finite values is) but as large as
    // the attack: an outer step on it is refused (`DilocoError::NonFinite`), so the round is
    // lost; only a robust rule keeps it.
    let mean = aggregate(&Mean, &set);
    assert!(mean[0][0].is_finite() && mean[0][0] > 1.0e38, "{mean:?}");
    // 5 inputs, b = 1: one of the two attackers survives trimming, but clipped to τ.
    let robust = aggregate(&ClippedTrimmedMean::default(), &set);
    assert!(robust.iter().flatten().all(|v| v.is_finite()), "{robust:?}");
    let norm = synod_diloco::l2_norm(&robust);
    let max_honest = honest()
        .iter()
        .map(synod_diloco::l2_norm)
        .fold(0.0, f64::max);
    assert!(norm <= max_honest * 1.000_001, "{norm} > {max_honest}");
}

#[test]
fn aggregate_is_bit_identical_in_any_arrival_order() {
    let set = with_attack(Attack::Gaussian);
    let first = aggregate(&ClippedTrimmedMean::default(), &set);
    let mut rotated = set.clone();
    for _ in 0..set.len() {
        rotated.rotate_left(1);
        let again = aggregate(&ClippedTrimmedMean::default(), &rotated);
        let bits =
            |g: &PseudoGradient| -> Vec<u32> { g.iter().flatten().map(|v| v.to_bits()).collect() };
        assert_eq!(bits(&again), bits(&first));
    }
}

#[test]
fn trim_follows_the_one_third_threat_model_in_stake() {
    // Equal stakes: the count rule, f = ⌊(N − 1)/3⌋ participants, T = f inputs' worth.
    let f: Vec<usize> = (0..=10)
        .map(|n| ClippedTrimmedMean::byzantine_count(&vec![100; n]))
        .collect();
    assert_eq!(f, vec![0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3]);
    for n in 1..=10u128 {
        assert_eq!(
            ClippedTrimmedMean::default().trim_thirds(n),
            3 * (n.saturating_sub(1) / 3)
        );
    }
    // The snapshot, not the included set, decides T (thirds of a planck): 7 × 100, f = 2,
    // T = 200; with 4 of them included it is capped to leave weight: ⌊(1 200 − 1)/2⌋.
    let seven = ClippedTrimmedMean::for_stakes(&stakes(&[100; 7]));
    assert_eq!(seven.trim_thirds(700), 600);
    assert_eq!(seven.trim_thirds(400), 599);
    // One stake of 40 among 100s: f = 2 smallest (40 + 100 < 540/3 = 180, + 100 is not); the
    // attacker may hold the two *largest* of any 2, 200 — but never a third of the total.
    let mixed = ClippedTrimmedMean::for_stakes(&stakes(&[40, 100, 100, 100, 100, 100]));
    assert_eq!(
        ClippedTrimmedMean::byzantine_count(&[40, 100, 100, 100, 100, 100]),
        2
    );
    assert_eq!(mixed.trim_thirds(540), 540);
    // The clipped mean trims nothing.
    assert_eq!(ClippedTrimmedMean::clipped_mean(None).trim_thirds(10), 0);
    // τ: the stake-weighted lower median.
    assert_eq!(
        ClippedTrimmedMean::clip_threshold(&[3.0, 1.0, 2.0, 100.0], &[1; 4]),
        2.0
    );
    assert_eq!(
        ClippedTrimmedMean::clip_threshold(&[3.0, 1.0, 2.0, 100.0], &[1, 1, 1, 10]),
        100.0
    );
    assert_eq!(
        ClippedTrimmedMean::clip_threshold(&[3.0, 1.0, 2.0, 100.0, 100.0], &[10, 10, 10, 1, 1]),
        2.0
    );
    assert_eq!(ClippedTrimmedMean::clip_threshold(&[], &[]), 0.0);
}

#[test]
fn sybil_seats_at_minimum_stake_cannot_outnumber_the_trim() {
    // Four honest members with 100 each, three sybils at the minimum stake 10: the sybils
    // hold 30 of 430 (< ⅓) but 3 of 7 inputs. Counting inputs, b = ⌊6/3⌋ = 2 and a sybil
    // value survives in every coordinate; weighing stake, T = min(430, 3 × 400)/3 ≈ 143 of
    // stake is trimmed from each end and the sybils' 30 go with it.
    let rule = ClippedTrimmedMean::for_stakes(&stakes(&[100, 100, 100, 100, 10, 10, 10]));
    assert_eq!(rule.trim_thirds(430), 430);
    let mut set: Vec<PseudoGradient> = honest();
    set.push(vec![vec![0.11, 0.19, 0.31], vec![0.05]]);
    let flipped: PseudoGradient = vec![vec![-0.1, -0.1, -0.1], vec![-0.1]];
    set.extend(std::iter::repeat_n(flipped, 3));
    let weights = [100, 100, 100, 100, 10, 10, 10];
    let honest_range = range(&clipped_honest_weighted(&set, 4, &weights));
    let robust = aggregate(&rule, &set);
    assert!(within(&robust, &honest_range), "{robust:?}");
    let by_count = aggregate(&ClippedTrimmedMean::default(), &set);
    assert!(!within(&by_count, &honest_range), "{by_count:?}");
}

#[test]
fn sybils_outnumbering_honest_members_by_count_cannot_overflow_the_aggregate() {
    // 15 honest members of 100 and 17 sybils at the minimum stake 10 (170 of 1 670, ≈ 10 %,
    // but 17 of 32 payloads) sending f32::MAX. Counted per payload, the lower median norm is
    // a sybil's (no clipping) and a trim of b values per end (at most ⌊31/2⌋ = 15) leaves
    // sybil values in every coordinate: the aggregate is above 10³⁸ and every honest member's
    // outer step is refused (`NonFinite`), so the honest commit nothing and are leaked as
    // silent. Weighed by stake, τ is an honest norm (the sybils are clipped to it) and every
    // coordinate stays within the clipped honest values.
    let honest_set: Vec<PseudoGradient> = (0..15)
        .map(|i| {
            let d = i as f32 * 0.001;
            vec![vec![0.10 + d, 0.20 - d, 0.30 + d], vec![0.05 + d]]
        })
        .collect();
    let huge: PseudoGradient = vec![vec![f32::MAX, f32::MAX, f32::MIN], vec![f32::MAX]];
    let mut set = honest_set.clone();
    set.extend(std::iter::repeat_n(huge, 17));
    let weights: Vec<u128> = [vec![100; 15], vec![10; 17]].concat();
    let rule = ClippedTrimmedMean::for_stakes(&stakes(&weights));
    let robust = aggregate(&rule, &set);
    let honest_range = range(&clipped_honest_weighted(&set, 15, &weights));
    assert!(
        within(&robust, &honest_range),
        "{robust:?} outside {honest_range:?}"
    );
    // The outer step on it is taken.
    let theta = ParamSet::new(vec![
        NamedTensor {
            name: "a".into(),
            shape: vec![3],
            data: vec![0.0; 3],
        },
        NamedTensor {
            name: "b".into(),
            shape: vec![1],
            data: vec![0.0],
        },
    ])
    .unwrap();
    let mut stepped = theta.clone();
    NesterovSgd::new(0.7, 0.9)
        .step(&mut stepped, &robust)
        .unwrap();
    // Counted per payload (equal weights), the sybils decide it.
    let by_count = aggregate(&ClippedTrimmedMean::default(), &set);
    assert!(by_count[0][0] > 1.0e38, "{by_count:?}");
    let mut refused = theta;
    assert!(matches!(
        NesterovSgd::new(0.7, 0.9).step(&mut refused, &by_count),
        Err(DilocoError::NonFinite)
    ));
}

#[test]
fn clipped_mean_of_few_members_bounds_a_scaled_input() {
    // n = 2 (b = 0): both are clipped to the smaller norm, so ×100 cannot dominate.
    let a: PseudoGradient = vec![vec![1.0, 0.0]];
    let bad: PseudoGradient = vec![vec![0.0, 100.0]];
    let g = aggregate(&ClippedTrimmedMean::default(), &[a, bad]);
    assert_eq!(g, vec![vec![0.5, 0.5]]);
}

#[test]
fn rules_refuse_empty_and_unequal_layouts() {
    for rule in [AggregationRule::Mean, AggregationRule::ClippedTrimmedMean] {
        let rule = rule.aggregator(Some(&stakes(&[100; 4])));
        assert!(matches!(rule.aggregate(3, &[]), Err(DilocoError::Empty(3))));
        let a: PseudoGradient = vec![vec![1.0]];
        let b: PseudoGradient = vec![vec![1.0, 2.0]];
        assert!(matches!(
            rule.aggregate(1, &[&a, &b]),
            Err(DilocoError::LayoutMismatch)
        ));
    }
    assert_eq!(
        AggregationRule::default(),
        AggregationRule::ClippedTrimmedMean
    );
}

fn vector(len: usize) -> impl Strategy<Value = Vec<f32>> {
    prop::collection::vec(-1.0f32..1.0, len)
}

fn arbitrary(len: usize) -> impl Strategy<Value = Vec<f32>> {
    prop::collection::vec(
        prop_oneof![
            -1.0f32..1.0,
            -1.0e30f32..1.0e30,
            Just(f32::MAX),
            Just(f32::MIN),
            Just(0.0f32)
        ],
        len,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// With f = ⌊(n−1)/3⌋ arbitrary inputs, every output coordinate lies within the clipped
    /// honest values of that coordinate, and τ within the honest norms.
    #[test]
    fn byzantine_minority_keeps_every_coordinate_within_the_honest_range(
        (honest, byzantine) in (4usize..=10).prop_flat_map(|n| {
            let f = ClippedTrimmedMean::byzantine_count(&vec![1; n]);
            (
                prop::collection::vec(vector(6), n - f),
                prop::collection::vec(arbitrary(6), f),
            )
        })
    ) {
        let all: Vec<PseudoGradient> = honest
            .iter()
            .chain(&byzantine)
            .map(|v| vec![v.clone()])
            .collect();
        let refs: Vec<&PseudoGradient> = all.iter().collect();
        let out = ClippedTrimmedMean::default().aggregate(1, &refs).unwrap();
        let norms: Vec<f64> = all.iter().map(synod_diloco::l2_norm).collect();
        let tau = ClippedTrimmedMean::clip_threshold(&norms, &vec![1; norms.len()]);
        let honest_norms = &norms[..honest.len()];
        prop_assert!(honest_norms.iter().any(|n| *n >= tau) && honest_norms.iter().any(|n| *n <= tau));
        let clipped = clipped_honest(&all, honest.len());
        let r = range(&clipped);
        prop_assert!(within(&out, &r), "{:?} outside {:?}", out, r);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Members holding less than a third of the stake, split over any number of accounts
    /// (one whale, many sybils at the minimum, mixed) and sending arbitrary values, against
    /// honest members of any stakes (few large, many small): every output coordinate lies
    /// within the clipped honest values, τ within the honest norms.
    #[test]
    fn byzantine_stake_under_a_third_keeps_every_coordinate_within_the_honest_range_for_any_split(
        (honest, honest_stakes, byzantine, byzantine_stakes) in
            (prop::collection::vec(1u128..1_000, 2..8), 1usize..24)
                .prop_flat_map(|(honest_stakes, accounts)| {
                    let h: u128 = honest_stakes.iter().sum();
                    // A < W/3 with W = H + A: 2A < H.
                    let most = (h - 1) / 2;
                    let shares = prop::collection::vec(1u128..1_000, accounts);
                    (
                        prop::collection::vec(vector(6), honest_stakes.len()),
                        Just(honest_stakes),
                        prop::collection::vec(arbitrary(6), accounts),
                        shares.prop_map(move |w| {
                            // Scale the shares to a total of at most `most` (≥ 1 each where it can).
                            let sum: u128 = w.iter().sum();
                            w.iter().map(|x| (x * most / sum).max(u128::from(most >= w.len() as u128))).collect::<Vec<u128>>()
                        }),
                    )
                })
    ) {
        let weights: Vec<u128> = honest_stakes.iter().chain(&byzantine_stakes).copied().collect();
        let h: u128 = honest_stakes.iter().sum();
        let a: u128 = byzantine_stakes.iter().sum();
        prop_assume!(3 * a < h + a);
        let all: Vec<PseudoGradient> = honest
            .iter()
            .chain(&byzantine)
            .map(|v| vec![v.clone()])
            .collect();
        let rule = ClippedTrimmedMean::for_stakes(&stakes(&weights));
        let out = aggregate(&rule, &all);
        let positive: Vec<u128> = weights.iter().copied().filter(|w| *w > 0).collect();
        let kept: Vec<PseudoGradient> = all
            .iter()
            .zip(&weights)
            .filter(|(_, w)| **w > 0)
            .map(|(g, _)| g.clone())
            .collect();
        let norms: Vec<f64> = kept.iter().map(synod_diloco::l2_norm).collect();
        let tau = ClippedTrimmedMean::clip_threshold(&norms, &positive);
        let honest_norms = &norms[..honest.len()];
        prop_assert!(honest_norms.iter().any(|n| *n >= tau) && honest_norms.iter().any(|n| *n <= tau));
        let r = range(&clipped_honest_weighted(&kept, honest.len(), &positive));
        prop_assert!(within(&out, &r), "{:?} outside {:?}", out, r);
    }
}

/// Final distance to the honest target after `rounds` local rounds with member 3 attacking.
fn distance_after_attack(rule: AggregationRule, attack: Attack, rounds: u32) -> f32 {
    let start = ParamSet::new(vec![NamedTensor {
        name: "w".into(),
        shape: vec![4],
        data: vec![0.0; 4],
    }])
    .unwrap();
    let target = vec![1.0, -2.0, 3.0, 0.5];
    let mut workers: Vec<Quadratic> = (0..4)
        .map(|_| Quadratic {
            target: target.clone(),
            steps: 10,
        })
        .collect();
    let adversary = Adversary {
        member: 3,
        attack,
        seed: 1,
    };
    let mut s = OuterState::new(start, NesterovSgd::new(0.7, 0.9));
    let rule = rule.aggregator(None);
    for _ in 0..rounds {
        let (out, _, _) = s
            .local_round(
                &mut workers,
                rule.as_ref(),
                &EncodeOptions::default(),
                &mut Vec::new(),
                Some(&adversary),
            )
            .unwrap();
        assert_eq!(out.included, vec![0, 1, 2, 3]);
    }
    s.params.tensors()[0]
        .data
        .iter()
        .zip(&target)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn byzantine_member_cannot_stop_a_pool_from_converging() {
    // On the plain mean, one scaled member out of four makes training diverge (×20 a round;
    // after ~28 rounds its Δ is no longer finite and the codec refuses it).
    assert!(distance_after_attack(AggregationRule::Mean, Attack::ScaleX100, 8) > 1.0);
    for attack in Attack::ALL {
        let d = distance_after_attack(AggregationRule::ClippedTrimmedMean, attack, 30);
        assert!(d < 0.05, "{}: distance {d}", attack.name());
    }
}

#[test]
fn clipped_mean_keeps_the_coordinates_one_sparse_member_sent_and_still_clips_a_scaled_one() {
    // Four sparse payloads, each member sending its own coordinate only.
    let sparse: Vec<PseudoGradient> = (0..4)
        .map(|i| vec![(0..4).map(|k| if k == i { 0.4 } else { 0.0 }).collect()])
        .collect();
    let refs: Vec<&PseudoGradient> = sparse.iter().collect();
    // The trimmed mean (b = 1 of 4) drops every lone value.
    let trimmed = AggregationRule::ClippedTrimmedMean
        .aggregator(None)
        .aggregate(1, &refs)
        .unwrap();
    assert_eq!(trimmed[0], vec![0.0; 4]);
    let rule = AggregationRule::ClippedMean.aggregator(None);
    assert_eq!(rule.aggregate(1, &refs).unwrap()[0], vec![0.1; 4]);
    // Member 3 scales its coordinate ×1000: clipped to the median norm 0.4, it moves the
    // aggregate by at most τ/n = 0.1 (the plain mean: by 100).
    let mut attacked = sparse.clone();
    attacked[3][0][3] = 400.0;
    let refs: Vec<&PseudoGradient> = attacked.iter().collect();
    let out = rule.aggregate(1, &refs).unwrap();
    assert!((out[0][3] - 0.1).abs() < 1e-6, "{:?}", out[0]);
    assert!(Mean.aggregate(1, &refs).unwrap()[0][3] > 99.0);
    assert_eq!(AggregationRule::ClippedMean.name(), "clipped_mean");
}
