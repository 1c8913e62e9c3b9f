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
    PseudoGradient,
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

/// The first `honest` inputs of `all`, clipped as the rule clips them (τ from all norms).
fn clipped_honest(all: &[PseudoGradient], honest: usize) -> Vec<PseudoGradient> {
    let norms: Vec<f64> = all.iter().map(synod_diloco::l2_norm).collect();
    let tau = ClippedTrimmedMean::clip_threshold(&norms);
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
fn trim_count_follows_the_one_third_threat_model() {
    let b: Vec<usize> = (0..=10).map(ClippedTrimmedMean::trimmed).collect();
    assert_eq!(b, vec![0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3]);
    // Equal stakes: the count rule.
    for n in 1..=10 {
        let stakes = vec![100u128; n];
        assert_eq!(
            ClippedTrimmedMean::for_stakes(&stakes).byzantine,
            Some(ClippedTrimmedMean::trimmed(n))
        );
    }
    // The snapshot, not the included set, decides b; never more than ⌊(n − 1)/2⌋ inputs.
    let seven = ClippedTrimmedMean::for_stakes(&[100; 7]);
    assert_eq!(seven.trim_for(4), 1);
    assert_eq!(seven.trim_for(5), 2);
    assert_eq!(ClippedTrimmedMean::for_stakes(&[100; 10]).trim_for(3), 1);
    assert_eq!(ClippedTrimmedMean::default().trim_for(4), 1);
    assert_eq!(
        ClippedTrimmedMean::clip_threshold(&[3.0, 1.0, 2.0, 100.0]),
        2.0
    );
    assert_eq!(ClippedTrimmedMean::clip_threshold(&[]), 0.0);
}

#[test]
fn sybil_seats_at_minimum_stake_cannot_outnumber_the_trim() {
    // Four honest members with 100 each, three sybils at the minimum stake 10: the sybils
    // hold 30 of 430 (< ⅓) but 3 of 7 seats. Counting seats, b = ⌊6/3⌋ = 2 and a sybil value
    // survives in every coordinate; counting stake, up to 4 seats (the sybils and one honest
    // seat: 130 < 430/3) may be Byzantine, and b = min(4, ⌊6/2⌋) = 3 trims the sybils away.
    let rule = ClippedTrimmedMean::for_stakes(&[100, 100, 100, 100, 10, 10, 10]);
    assert_eq!(rule.byzantine, Some(4));
    assert_eq!(rule.trim_for(7), 3);
    let mut set: Vec<PseudoGradient> = honest();
    set.push(vec![vec![0.11, 0.19, 0.31], vec![0.05]]);
    let flipped: PseudoGradient = vec![vec![-0.1, -0.1, -0.1], vec![-0.1]];
    set.extend(std::iter::repeat_n(flipped, 3));
    let honest_range = range(&clipped_honest(&set, 4));
    let robust = aggregate(&rule, &set);
    assert!(within(&robust, &honest_range), "{robust:?}");
    let by_count = aggregate(&ClippedTrimmedMean::default(), &set);
    assert!(!within(&by_count, &honest_range), "{by_count:?}");
    // With three honest members, the three sybils (30 of 330) could hold 3 of 6 seats: b is
    // capped at ⌊(n − 1)/2⌋ = 2 so that a value is kept, and the bound no longer holds.
    assert_eq!(
        ClippedTrimmedMean::for_stakes(&[100, 100, 100, 10, 10, 10]).trim_for(6),
        2
    );
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
        let rule = rule.aggregator(Some(&[100; 4]));
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
            let f = ClippedTrimmedMean::trimmed(n);
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
        let tau = ClippedTrimmedMean::clip_threshold(&norms);
        let honest_norms = &norms[..honest.len()];
        prop_assert!(honest_norms.iter().any(|n| *n >= tau) && honest_norms.iter().any(|n| *n <= tau));
        let clipped = clipped_honest(&all, honest.len());
        let r = range(&clipped);
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
