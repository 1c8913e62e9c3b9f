//! Replay verification of contributions (`docs/architecture.md`, step 7): the rules every verifier
//! and juror apply, so that they agree on what counts as honest.
//!
//! A member's inner phase is a pure function of θ_{r−1}, its member index, the round and the
//! pool's recipe (fresh AdamW each round, batches drawn from `(seed, member, round, step)`): a
//! verifier re-runs it ([`OuterState::contribute`](crate::OuterState::contribute) with a replica
//! of the accused's index), encodes it with the pool's codec and compares the two *decoded*
//! pseudo-gradients with [`replay_distance`]. Replays differ from the original only by
//! floating-point reassociation (thread counts, devices) and the codec's rounding; anything
//! above [`REPLAY_TOLERANCE`] is not the accused's honest work. This is the Proof-of-Learning
//! check of Jia et al. 2021 (§4, "verification by re-execution") applied to whole inner phases.
//!
//! Which contributions a verifier replays is drawn with [`sampled`] from the round's final
//! checkpoint hash, the randomness of the block that made it final (`pallet-randomness`: its
//! author's VRF output) and the verifier's own identity: unknown to the accused when it
//! announces (the block does not exist yet),
//! different for every verifier (the work spreads), and checkable by anyone afterwards.

use synod_checkpoint::ParamSet;

use crate::{decode_pseudo_gradient, DilocoError};

/// Largest [`replay_distance`] of an honest contribution. Measured on the tiny model, H = 30,
/// int8 (`synod-model` tests `replay.rs`, which print the figures): a replay with the same
/// thread count is bit-identical (0), 1 vs 2 libtorch threads differ by 1.3·10⁻⁷ (margin
/// ≈ 75 000×); a member that skips 3 of its 30 inner steps is at 0.13 (12.8× the tolerance),
/// and the attacks of [`crate::byzantine`] at ≥ 0.61 (copy: 0.61, ALIE: 0.63, zeros: 1,
/// sign flip: 2, Gaussian: 10, ×100: 99). CUDA in fp32 drifts from the CPU about as much as
/// another thread count (≤ 1.7·10⁻³ up to H = 400 on the baby model; `docs/benchmarks.md`,
/// `offchain-trainer/python/device_drift.py`), but drift grows with H and model size: the small
/// model at H = 100 reaches 2·10⁻² between honest runs, so `pool create` refuses recipes whose
/// measured drift exceeds half of this.
pub const REPLAY_TOLERANCE: f64 = 1e-2;

/// Domain separator of [`sampled`]'s draw.
const SAMPLE_DOMAIN: &[u8] = b"synod/verify/sample/v1";
/// Domain separator of [`sampled_segments`]' draw.
const SEGMENT_DOMAIN: &[u8] = b"synod/verify/segments/v1";

/// Relative L2 distance ‖claimed − replayed‖ / ‖replayed‖ between two encoded pseudo-gradients
/// of `member` for the parameters `params` (θ_{r−1}), both decoded with the codec's own checks.
/// A zero replay gives ‖claimed‖ (so 0 against 0). Sums in f64 in tensor order: every verifier
/// computes the same figure.
///
/// # Errors
/// [`DilocoError::Decode`] / [`DilocoError::Layout`] if either payload does not decode against
/// `params` (a verifier treats a claimed payload that does not decode as a mismatch).
pub fn replay_distance(
    params: &ParamSet,
    member: u32,
    claimed: &[u8],
    replayed: &[u8],
) -> Result<f64, DilocoError> {
    let c = decode_pseudo_gradient(params, member, claimed)?;
    let r = decode_pseudo_gradient(params, member, replayed)?;
    let (mut diff, mut norm) = (0f64, 0f64);
    if c.len() != r.len() {
        return Err(DilocoError::LayoutMismatch);
    }
    for (a, b) in c.iter().zip(&r) {
        if a.len() != b.len() {
            return Err(DilocoError::LayoutMismatch);
        }
        for (x, y) in a.iter().zip(b.iter()) {
            let d = f64::from(*x) - f64::from(*y);
            diff += d * d;
            norm += f64::from(*y) * f64::from(*y);
        }
    }
    let diff = diff.sqrt();
    Ok(if norm > 0.0 { diff / norm.sqrt() } else { diff })
}

/// Whether a contribution at `distance` from its replay is honest (≤ [`REPLAY_TOLERANCE`];
/// NaN is not).
pub fn within_tolerance(distance: f64) -> bool {
    distance <= REPLAY_TOLERANCE
}

/// The default share of the other contributors each verifier replays, for `contributors`
/// members in a round that all verify: the smallest rate at which a contribution escapes all
/// `contributors − 1` other verifiers with probability ≤ 1 % ([`sample_rate`] of n − 1, so
/// ≥ 2 verifiers in expectation from n = 4 on). 1.0 for n ≤ 2, 0.0 for a single member.
/// A pool member samples at [`sample_rate`] of [`honest_verifiers_at_least`] instead: it
/// cannot assume every other contributor verifies.
pub fn default_sample_rate(contributors: usize) -> f64 {
    match contributors {
        0 | 1 => 0.0,
        n => sample_rate(n - 1),
    }
}

/// The smallest rate at which a contribution escapes `verifiers` independent verifiers with
/// probability ≤ 1 %: `1 − 0.01^{1/verifiers}`; 1.0 (check everything) for none.
pub fn sample_rate(verifiers: usize) -> f64 {
    match verifiers {
        0 => 1.0,
        m => 1.0 - 0.01f64.powf(1.0 / m as f64),
    }
}

/// The fewest honest contributors a final round can have when the adversary holds less than
/// a third of the round's stake `round_stake` (the protocol's assumption,
/// `docs/architecture.md`), whatever the split of that stake over accounts: the contributors
/// (snapshot participants, snapshot stakes `contributor_stakes`, planck) hold Σ, of which
/// the adversary's are at most ⌊`round_stake` / 3⌋, so honest contributors hold at least
/// Σ − ⌊`round_stake` / 3⌋, and no set of fewer contributors than the largest stakes reaching
/// that much can. Every honest contributor verifies (the accused, if it cheated, is not among
/// them), so sampling at [`sample_rate`] of this number lets a dishonest payload escape with
/// probability ≤ 1 % however many seats sybils hold (they count in the number of
/// contributors, not in this bound).
pub fn honest_verifiers_at_least(contributor_stakes: &[u128], round_stake: u128) -> usize {
    let total = contributor_stakes
        .iter()
        .fold(0u128, |a, s| a.saturating_add(*s));
    let honest = total.saturating_sub(round_stake / 3);
    if honest == 0 {
        return 0;
    }
    let mut stakes = contributor_stakes.to_vec();
    stakes.sort_unstable_by(|a, b| b.cmp(a));
    let mut sum = 0u128;
    for (k, s) in stakes.iter().enumerate() {
        sum = sum.saturating_add(*s);
        if sum >= honest {
            return k + 1;
        }
    }
    stakes.len()
}

/// Whether `verifier` (its account or key bytes) replays `member`'s contribution to `round`,
/// whose final checkpoint is `final_hash`, with `seed` the randomness of the block in which the
/// round became final (32 bytes, `Randomness.History`): blake3 of the inputs read as a uniform number in [0, 1), below `rate`. Rates
/// ≥ 1 select everything, ≤ 0 nothing.
///
/// The final hash alone would not do: the aggregate is deterministic, so the last member to
/// announce could compute it for variants of its own payload and pick one no verifier
/// samples. The block's randomness is unknown to every member when it announces, and its
/// author cannot grind it (a VRF output: the author can only publish or skip its slot).
pub fn sampled(
    final_hash: &[u8; 32],
    seed: &[u8; 32],
    verifier: &[u8],
    round: u32,
    member: u32,
    rate: f64,
) -> bool {
    let mut first = [0u8; 8];
    draw(SAMPLE_DOMAIN, final_hash, seed, verifier, round, member).fill(&mut first);
    let x = u64::from_le_bytes(first) as f64 / (u64::MAX as f64 + 1.0);
    x < rate
}

/// The random stream of one verifier's draws about one contribution: blake3 (XOF) of
/// `domain`, the round's final hash, the finality block's randomness, the verifier's identity
/// (length-prefixed), the round and the member.
fn draw(
    domain: &[u8],
    final_hash: &[u8; 32],
    seed: &[u8; 32],
    verifier: &[u8],
    round: u32,
    member: u32,
) -> blake3::OutputReader {
    let mut h = blake3::Hasher::new();
    h.update(domain);
    h.update(final_hash);
    h.update(seed);
    h.update(&(verifier.len() as u64).to_le_bytes());
    h.update(verifier);
    h.update(&round.to_le_bytes());
    h.update(&member.to_le_bytes());
    h.finalize_xof()
}

/// Segments an inner phase is cut into for Proof-of-Learning checks (Jia et al. 2021, §4.2)
/// unless the recipe says otherwise (`PoolRecipe::trace_segments`): a member records its full state
/// (θ, AdamW moments, step) at every segment boundary.
pub const DEFAULT_SEGMENTS: u32 = 16;

/// Most segments a recipe may cut an inner phase into ([`synod_protocol::limits`]). Bounds a
/// trace's hashes ([`crate::trace::MAX_TRACE_HASHES`]).
pub const MAX_SEGMENTS: u32 = synod_protocol::limits::MAX_TRACE_SEGMENTS;

/// Largest `synod_model::segment::state_distance` between a segment's honest end state and its
/// replay from the same start state. Measured on the tiny model, H = 32, segments of 2 steps
/// (`synod-model` tests `segments.rs`, which print the figures): bit-identical (0) at one
/// thread count, ≤ 8.2·10⁻⁵ at 1 vs 2 libtorch threads (margin ≈ 120×; the distance is per
/// tensor, and small tensors' moments carry most of it); one skipped step in a segment is at
/// 0.50 (50× above). A lazy member can bend each segment's update by up to this share
/// undetected by segment checks — a whole replay (what jurors of a whole-phase dispute run)
/// still bounds the sum.
pub const SEGMENT_TOLERANCE: f64 = 1e-2;

/// Smallest segment distance (`synod_model::segment::state_distance`) that convicts on its
/// own, with no whole replay, when a challenge disputes that segment
/// (`synod_protocol::Dispute::Segment`): 10 × [`SEGMENT_TOLERANCE`]. Honest segments of the
/// tiny model are ≤ 8.2·10⁻⁵ apart between 1 and 2 libtorch threads (≈ 1 200× below this);
/// `state_distance` across devices and on larger models is not measured, and a larger model,
/// longer segments or another device may drift past [`SEGMENT_TOLERANCE`] honestly, so a
/// segment failing between the two is judged by a whole replay. One skipped inner step is at
/// 0.50, 5× above this.
pub const SEGMENT_CONVICTION: f64 = 10.0 * SEGMENT_TOLERANCE;

/// The drift a whole inner phase accumulates if every one of its `segments_in_phase` segments
/// drifted as far as the segments drawn did: the mean of the drawn segments' replay distances
/// (`distances`, each [`SEGMENT_TOLERANCE`] at most) times `segments_in_phase`; 0 with none
/// drawn. A member that bends every segment one way, each within [`SEGMENT_TOLERANCE`], passes
/// every segment check; past [`REPLAY_TOLERANCE`] this extrapolation sends its check to a
/// whole replay, which bounds the sum as jurors judge it. Honest segments drift ≤ 8.2·10⁻⁵
/// apart (1 vs 2 libtorch threads), so a 16-segment trace extrapolates to ≤ 1.3·10⁻³; a trace
/// cut into ≥ 122 segments may send an honest member's check to a whole replay (a slower
/// check, never a wrong verdict).
pub fn segment_drift(distances: &[f64], segments_in_phase: usize) -> f64 {
    if distances.is_empty() {
        return 0.0;
    }
    let mean = distances.iter().sum::<f64>() / distances.len() as f64;
    mean * segments_in_phase as f64
}

/// Segment boundaries of a phase of `inner_steps` H cut into at most `segments` S segments
/// (clamped to 1..=[`MAX_SEGMENTS`]): `0, k, 2k, …` and H itself, with `k = ⌈H / S⌉`
/// ([`segment_len`]). Segment `i` runs from `b[i]` to `b[i + 1]`; there are `⌈H / k⌉ ≤ S` of
/// them (H of one step each once S ≥ H).
pub fn segment_boundaries(inner_steps: u32, segments: u32) -> Vec<u32> {
    let k = segment_len(inner_steps, segments);
    let mut b: Vec<u32> = (0..inner_steps).step_by(k.max(1) as usize).collect();
    b.push(inner_steps);
    b
}

/// Inner steps per segment for a phase of H steps cut into at most `segments` S:
/// `⌈H / S⌉` (at least 1; S clamped to 1..=[`MAX_SEGMENTS`]).
pub fn segment_len(inner_steps: u32, segments: u32) -> u32 {
    inner_steps.div_ceil(segments.clamp(1, MAX_SEGMENTS)).max(1)
}

/// The `count` distinct segments (indices in `0..segments`, ascending) that `verifier`
/// replays of `member`'s contribution to `round`: drawn like [`sampled`] from the round's
/// final hash, the finality block's randomness `seed` and the verifier's identity, so the accused
/// cannot know which when it commits its trace. All of them when `count ≥ segments`.
pub fn sampled_segments(
    final_hash: &[u8; 32],
    seed: &[u8; 32],
    verifier: &[u8],
    round: u32,
    member: u32,
    segments: u32,
    count: u32,
) -> Vec<u32> {
    let mut xof = draw(SEGMENT_DOMAIN, final_hash, seed, verifier, round, member);
    // Partial Fisher–Yates over 0..segments with 64-bit draws (modulo bias < 2⁻³²).
    let mut pool: Vec<u32> = (0..segments).collect();
    let take = count.min(segments) as usize;
    for i in 0..take {
        let mut word = [0u8; 8];
        xof.fill(&mut word);
        let left = (pool.len() - i) as u64;
        let j = i + (u64::from_le_bytes(word) % left) as usize;
        pool.swap(i, j);
    }
    pool.truncate(take);
    pool.sort_unstable();
    pool
}

/// Probability that `samples` segments drawn without replacement from `segments` all miss the
/// `bad` ones (a member that faked steps in `bad` segments escapes one verifier):
/// `∏_{i<samples} (segments − bad − i) / (segments − i)`. Independent verifiers multiply.
pub fn segment_escape_probability(segments: u32, bad: u32, samples: u32) -> f64 {
    let (m, b) = (f64::from(segments), f64::from(bad.min(segments)));
    (0..samples.min(segments))
        .map(f64::from)
        .map(|i| ((m - b - i) / (m - i)).max(0.0))
        .product()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_drift_extrapolates_the_drawn_segments_to_the_whole_phase() {
        assert_eq!(segment_drift(&[], 16), 0.0);
        // Honest noise over 16 segments stays far inside the whole phase's tolerance.
        assert!(segment_drift(&[8.2e-5, 1e-5], 16) < REPLAY_TOLERANCE / 5.0);
        // A bend of half the segment tolerance in each of 16 segments: 8× the whole tolerance.
        let bent = segment_drift(&[SEGMENT_TOLERANCE / 2.0; 3], 16);
        assert!((bent - 8.0 * REPLAY_TOLERANCE).abs() < 1e-12, "{bent}");
    }

    #[test]
    fn default_rate_leaves_at_most_one_percent_unchecked_and_two_verifiers_expected() {
        for n in 2..64usize {
            let p = default_sample_rate(n);
            let escape = (1.0 - p).powi(n as i32 - 1);
            assert!(escape <= 0.010_000_1, "n={n}: escapes with {escape}");
            if n >= 4 {
                assert!((n - 1) as f64 * p >= 2.0, "n={n}: {p}");
            }
        }
        assert_eq!(default_sample_rate(1), 0.0);
    }

    /// The probability that a dishonest payload escapes every honest contributor of a round in
    /// which the adversary holds `attacker` (planck) over `seats` contributing accounts beside
    /// the honest contributors' `honest` stakes and `absent` (planck) of stake that is not
    /// among the contributors (silent, or a committer left out of the included set): each
    /// honest contributor samples at `rate` of the contributors' stakes and the round's stake.
    fn escape(
        honest: &[u128],
        attacker: u128,
        seats: u32,
        absent: u128,
        rate: impl Fn(&[u128], u128) -> f64,
    ) -> f64 {
        let mut stakes = honest.to_vec();
        let seats = seats.max(1);
        let each = attacker / u128::from(seats);
        stakes
            .extend((0..seats).map(|i| each + u128::from(i == 0) * (attacker % u128::from(seats))));
        let round: u128 = stakes.iter().sum::<u128>() + absent;
        (1.0 - rate(&stakes, round)).powi(honest.len() as i32)
    }

    #[test]
    fn sybil_seats_cannot_dilute_the_sample_rate() {
        // Four honest members of 100; the adversary holds just under a third of the round's
        // stake (199 of 599) and splits it over any number of seats, every seat committing.
        let honest = [100u128; 4];
        let by_count = |stakes: &[u128], _: u128| default_sample_rate(stakes.len());
        let by_stake =
            |stakes: &[u128], round: u128| sample_rate(honest_verifiers_at_least(stakes, round));
        // Counting seats, 8 sybils let a cheater escape 18.7 % of its rounds.
        let diluted = escape(&honest, 199, 8, 0, by_count);
        assert!((0.18..0.19).contains(&diluted), "{diluted}");
        for seats in 1..=40 {
            let p = escape(&honest, 199, seats, 0, by_stake);
            assert!(p <= 0.010_000_1, "{seats} seats: escapes with {p}");
        }
        // However the honest stake is split, and with stake outside the contributors (an
        // honest committer left out of the included set, silent members): the adversary holds
        // as much as stays under a third of the round, all of it among the contributors.
        for honest in [
            vec![250u128, 50, 50, 50],
            vec![397, 1, 1, 1],
            vec![40; 10],
            vec![100],
        ] {
            let total_honest: u128 = honest.iter().sum();
            for absent in [0u128, 100, 400, 1_000] {
                let attacker = (total_honest + absent - 1) / 2;
                for seats in 1..=30 {
                    let p = escape(&honest, attacker, seats, absent, by_stake);
                    assert!(
                        p <= 0.010_000_1,
                        "{honest:?}, {absent} absent, {seats} seats: {p}"
                    );
                }
            }
        }
    }

    #[test]
    fn honest_verifiers_are_counted_from_the_largest_stakes_past_the_adversarys_third() {
        // Equal stakes, everyone a contributor: the adversary may hold one of four seats.
        assert_eq!(honest_verifiers_at_least(&[100; 4], 400), 3);
        assert_eq!(honest_verifiers_at_least(&[100; 10], 1000), 7);
        // Six of nine contributing: the adversary's 300 may all be among them.
        assert_eq!(honest_verifiers_at_least(&[100; 6], 900), 3);
        // Nothing is sure to be honest: check everything.
        assert_eq!(honest_verifiers_at_least(&[100; 3], 900), 0);
        assert_eq!(sample_rate(0), 1.0);
        // One large honest member may be all there is.
        assert_eq!(honest_verifiers_at_least(&[700, 100, 100, 100], 1000), 1);
        assert!(sample_rate(1) >= 0.99);
    }

    #[test]
    fn sampling_spreads_over_verifiers_and_follows_the_rate() {
        let (hash, seed) = ([7u8; 32], [9u8; 32]);
        let hits = (0..10_000u32)
            .filter(|m| sampled(&hash, &seed, b"alice", 3, *m, 0.25))
            .count();
        assert!((2300..2700).contains(&hits), "{hits}");
        let same = (0..1000u32)
            .filter(|m| {
                sampled(&hash, &seed, b"alice", 3, *m, 0.5)
                    == sampled(&hash, &seed, b"bob", 3, *m, 0.5)
            })
            .count();
        assert!(
            (400..600).contains(&same),
            "verifiers must draw independently: {same}"
        );
        assert!(sampled(&hash, &seed, b"x", 1, 1, 1.0));
        assert!(!sampled(&hash, &seed, b"x", 1, 1, 0.0));
    }

    #[test]
    fn last_announcer_cannot_grind_the_final_hash_to_escape_the_sample() {
        // With the draw keyed by the final hash alone, a member announcing last tries payload
        // variants (each gives another final hash) until no verifier samples it: about one
        // variant in eleven escapes two verifiers at rate 0.7. The finality block's randomness,
        // unknown when it announces, re-draws every sample: the escapes do not carry over.
        let rate = 0.7;
        let verifiers: [&[u8]; 2] = [b"v1", b"v2"];
        let escapes = |h: &[u8; 32], seed: &[u8; 32]| {
            verifiers.iter().all(|v| !sampled(h, seed, v, 5, 3, rate))
        };
        let known_seed = [0u8; 32];
        let ground: Vec<[u8; 32]> = (0..2000u32)
            .map(|i| *blake3::hash(&i.to_le_bytes()).as_bytes())
            .filter(|h| escapes(h, &known_seed))
            .collect();
        assert!(ground.len() > 100, "grinding works against a known seed");
        let still = ground.iter().filter(|h| escapes(h, &[1u8; 32])).count();
        assert!(
            (still as f64) < 0.2 * ground.len() as f64,
            "{still} of {} ground hashes still escape under the block hash",
            ground.len()
        );
    }

    #[test]
    fn boundaries_cover_the_phase_in_at_most_the_recipes_segments() {
        for s in [1, 2, 7, DEFAULT_SEGMENTS, 64, 1000, MAX_SEGMENTS] {
            for h in (1..200u32).chain([999, 1000, 4096]) {
                let b = segment_boundaries(h, s);
                assert_eq!(b.first(), Some(&0));
                assert_eq!(b.last(), Some(&h));
                assert!(b
                    .windows(2)
                    .all(|w| w[0] < w[1] && w[1] - w[0] <= segment_len(h, s)));
                assert!(b.len() as u32 - 1 <= s.min(h), "h={h} s={s}: {b:?}");
            }
        }
        assert_eq!(
            segment_boundaries(50, DEFAULT_SEGMENTS),
            [0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 50]
        );
        // One-step segments once S ≥ H; out-of-range counts are clamped, never a panic.
        assert_eq!(segment_boundaries(5, 1000), [0, 1, 2, 3, 4, 5]);
        assert_eq!(segment_boundaries(5, 0), [0, 5]);
        assert_eq!(
            segment_boundaries(8192, u32::MAX).len() as u32 - 1,
            MAX_SEGMENTS
        );
    }

    #[test]
    fn sampled_segments_are_distinct_in_range_and_differ_by_verifier() {
        let (hash, seed) = ([3u8; 32], [4u8; 32]);
        let mut hits = [0u32; 13];
        for v in 0..2000u32 {
            let s = sampled_segments(&hash, &seed, &v.to_le_bytes(), 2, 1, 13, 3);
            assert_eq!(s.len(), 3);
            assert!(s.windows(2).all(|w| w[0] < w[1]) && s.iter().all(|i| *i < 13));
            for i in s {
                hits[i as usize] += 1;
            }
        }
        // 6000 draws over 13 segments: ≈ 461 each.
        assert!(hits.iter().all(|h| (380..540).contains(h)), "{hits:?}");
        assert_eq!(
            sampled_segments(&hash, &seed, b"v", 2, 1, 5, 9),
            [0, 1, 2, 3, 4]
        );
        let same_seed = sampled_segments(&hash, &seed, b"v", 2, 1, 13, 3);
        assert_eq!(same_seed, sampled_segments(&hash, &seed, b"v", 2, 1, 13, 3));
        assert!(
            (0..50u8).any(|i| sampled_segments(&hash, &[i; 32], b"v", 2, 1, 13, 3) != same_seed)
        );
    }

    #[test]
    fn escape_probability_matches_drawing_without_replacement() {
        assert_eq!(segment_escape_probability(13, 0, 4), 1.0);
        assert_eq!(segment_escape_probability(13, 2, 13), 0.0);
        assert!((segment_escape_probability(13, 2, 1) - 11.0 / 13.0).abs() < 1e-12);
        // Monte Carlo with the sampler itself: 2 bad segments of 13, 3 samples.
        let escapes = (0..20_000u32)
            .filter(|v| {
                sampled_segments(&[1; 32], &[2; 32], &v.to_le_bytes(), 1, 0, 13, 3)
                    .iter()
                    .all(|i| *i != 5 && *i != 9)
            })
            .count() as f64
            / 20_000.0;
        let p = segment_escape_probability(13, 2, 3);
        assert!((escapes - p).abs() < 0.015, "{escapes} vs {p}");
    }
}
