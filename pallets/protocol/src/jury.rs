//! Juries as committees (`docs/architecture.md`, step 7): [`COMMITTEE_SEATS`] seats, each drawn
//! *with replacement* with probability proportional to stake from the eligible jurors, from
//! randomness fixed only after the challenge was opened; votes are counted by seats and a
//! verdict needs a majority of *all* seats (a seat that does not vote never counts for
//! conviction).
//!
//! Why seats with replacement: every seat is an independent draw, so the number of seats an
//! adversary holds is Binomial(seats, a), where `a` is its share of the eligible stake, *however
//! it splits that stake over accounts* (one whale or a thousand sybils draw alike). A majority
//! threshold fails in either direction (an honest member convicted, or a cheater acquitted
//! because honest seats cannot reach a majority) only if the adversary holds at least half of
//! the seats; [`COMMITTEE_SEATS`] is the smallest committee for which that happens with
//! probability ≤ [`MAX_WRONG_VERDICT`] when `a` = [`ADVERSARY_SHARE`] (and less for any smaller
//! share). Committee sortition as in Algorand (Gilad et al., SOSP 2017, §5 and Appendix B);
//! seats drawn in proportion to stake with replacement as in Kleros' juror draw.

use crate::Planck;
use alloc::vec::Vec;
use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use scale_info::TypeInfo;

/// The adversary a committee is sized against: a share of the eligible juror stake just under
/// ⅓ (the bound of [`COMMITTEE_SEATS`] holds for every smaller share).
pub const ADVERSARY_SHARE: f64 = 1.0 / 3.0;

/// Most probability, per dispute, that an adversary holding less than [`ADVERSARY_SHARE`] of
/// the eligible stake convicts an honest member or acquits a cheater (all honest seats voting).
pub const MAX_WRONG_VERDICT: f64 = 1e-6;

/// Seeds an adversary may choose among for one draw: the seed is the randomness of the block
/// before the draw (`pallet-randomness`: its author's VRF, unique for the author's key and
/// slot), and an adversarial author of that block can only publish it or skip its slot.
pub const SEED_OPTIONS: u32 = 2;

/// Seats of a committee: the smallest odd size whose majority an adversary with
/// [`ADVERSARY_SHARE`] of the eligible stake reaches with probability ≤ [`MAX_WRONG_VERDICT`]
/// even when it picks the better of [`SEED_OPTIONS`] seeds (a union bound:
/// `SEED_OPTIONS × P ≤ MAX_WRONG_VERDICT`): 203 seats, [`wrong_verdict_probability`]`(203, ⅓)`
/// ≈ 4.89 × 10⁻⁷ per seed.
pub const COMMITTEE_SEATS: u32 =
	committee_seats(ADVERSARY_SHARE, MAX_WRONG_VERDICT / SEED_OPTIONS as f64);

/// Seats of an appeal committee: `2 × COMMITTEE_SEATS + 1` (407), drawn from the same frozen
/// eligible jurors with a later seed, as in Kleros' appeals to doubled juries. Its verdict
/// replaces the appealed ruling; an adversary with [`ADVERSARY_SHARE`] turns it with probability
/// [`wrong_verdict_probability`]`(407, ⅓)` ≈ 2 × 10⁻¹² per seed (printed by
/// `cargo test -p synod-protocol committee -- --nocapture`).
pub const APPEAL_SEATS: u32 = 2 * COMMITTEE_SEATS + 1;

/// The seats that decide a committee of `seats`: a strict majority, `⌊seats / 2⌋ + 1`.
pub const fn majority(seats: u32) -> u32 {
	seats / 2 + 1
}

/// Probability that an adversary holding share `adversary` (0..1) of the eligible stake turns
/// the verdict of a committee of `seats` seats drawn with replacement: it holds a majority
/// (convicts an honest member) or enough seats that the honest ones cannot reach a majority
/// (acquits a cheater). With `X ~ Binomial(seats, adversary)` this is
/// `P(X ≥ min(majority, seats − majority + 1))`, computed by summing the binomial
/// probabilities (exact up to f64 rounding while `(1 − adversary)^seats` stays above 10⁻³⁰⁰, e.g.
/// every `seats ≤ 1 001` at a share ≤ ½; beyond, it underflows and the result is meaningless). A
/// share ≤ 0 gives 0, a share ≥ 1 gives 1.
/// Evaluated at compile time for [`COMMITTEE_SEATS`]; the runtime never computes with floats.
pub const fn wrong_verdict_probability(seats: u32, adversary: f64) -> f64 {
	if adversary <= 0.0 {
		return 0.0;
	}
	if adversary >= 1.0 {
		return 1.0;
	}
	let maj = majority(seats);
	let block = seats.saturating_add(1).saturating_sub(maj);
	let k = if maj < block { maj } else { block };
	let q = 1.0 - adversary;
	// P(X = 0) = q^seats, then P(X = i + 1) = P(X = i) · (seats − i)/(i + 1) · adversary/q.
	let mut pmf = 1.0;
	let mut i = 0;
	while i < seats {
		pmf *= q;
		i += 1;
	}
	let mut tail = 0.0;
	let mut i = 0;
	while i <= seats {
		if i >= k {
			tail += pmf;
		}
		if i < seats {
			pmf = pmf * (seats - i) as f64 / (i + 1) as f64 * adversary / q;
		}
		i += 1;
	}
	tail
}

/// The smallest odd committee size whose [`wrong_verdict_probability`] at `adversary` is at
/// most `max_wrong` (searched up to 1 001 seats, which it returns if none smaller suffices).
pub const fn committee_seats(adversary: f64, max_wrong: f64) -> u32 {
	let mut seats = 1;
	while seats < 1_001 && wrong_verdict_probability(seats, adversary) > max_wrong {
		seats += 2;
	}
	seats
}

/// How a challenge ended.
#[derive(
	Clone,
	Copy,
	PartialEq,
	Eq,
	Encode,
	Decode,
	DecodeWithMemTracking,
	MaxEncodedLen,
	TypeInfo,
	Debug,
)]
#[cfg_attr(feature = "scale-decode", derive(scale_decode::DecodeAsType))]
pub enum Verdict {
	/// Jurors holding a majority of the committee's seats found the contribution dishonest.
	Guilty,
	/// Guilty can no longer reach a majority of the seats, or did not by the end of the vote
	/// (absent seats count for acquittal).
	Innocent,
	/// The voting period ended without a committee seated.
	Expired,
	/// Not enough juror stake besides the parties' could be drawn: no verdict, nobody is
	/// slashed.
	NoJury,
}

/// A juror of a committee: the stake it was drawn by and the seats it holds.
#[derive(
	Clone,
	PartialEq,
	Eq,
	PartialOrd,
	Ord,
	Encode,
	Decode,
	DecodeWithMemTracking,
	MaxEncodedLen,
	TypeInfo,
	Debug,
)]
pub struct Seated<AccountId> {
	/// The juror.
	pub who: AccountId,
	/// The stake it was drawn by (the runtime: its snapshot stake in the challenged round), in
	/// planck.
	pub stake: Planck,
	/// Seats it holds (≥ 1); its vote counts this many times.
	pub seats: u32,
}

/// The jurors eligible for the committees of a round `r`'s challenges: its contributors
/// (`contributors`, the final checkpoint's, with their snapshot stakes), in their order, except
/// those that opted out (`opted_out`) and those that cannot replay it.
///
/// A replay of round `r` needs θ_{r−1}, every included payload of round `r` (both held by every
/// contributor) and what round `r − 1` left to its members: a sparse payload carries in its
/// author's error-feedback residual of round `r − 1`, named by that author's round `r − 1`
/// payload, which only round `r − 1`'s contributors are known to hold (they aggregated its
/// whole included set; being in the included set only says that the others received one's
/// own payload). So when round `r − 1` is final (`contributors_prev`: its contributors), a
/// contributor of `r` outside them (a member that joined in round `r`, or that did not commit
/// `r − 1`'s final hash) is not eligible: seated, it could not replay and would be slashed as a
/// no-show. In round 1, or after a voided round `r − 1` (`contributors_prev` = `None`), nothing
/// carries over and every contributor that did not opt out is eligible.
///
/// Cost: O(contributors × contributors_prev) comparisons and one `opted_out` call per
/// contributor.
pub fn eligible_jurors<'a, AccountId: PartialEq>(
	contributors: &'a [crate::Participant<AccountId>],
	contributors_prev: Option<&'a [crate::Participant<AccountId>]>,
	mut opted_out: impl FnMut(&AccountId) -> bool,
) -> impl Iterator<Item = &'a crate::Participant<AccountId>> {
	contributors.iter().filter(move |p| {
		let replays = contributors_prev.is_none_or(|prev| prev.iter().any(|q| q.who == p.who));
		replays && !opted_out(&p.who)
	})
}

/// Draws a committee of `seats` seats from `candidates` (account, stake in planck): each seat
/// independently picks a candidate with probability proportional to its stake (*with*
/// replacement, so a candidate may hold several seats); zero-stake candidates never sit.
/// `random(j)` supplies 128 random bits for seat `j` (the runtime derives them from a block hash
/// fixed after the challenge was opened). Returns the seated candidates in `candidates` order,
/// each once with its seat count (their seats sum to `seats`, or the result is empty when no
/// candidate has stake).
///
/// The modulo bias of `random(j) % total_stake` is below `total_stake / 2¹²⁸` per seat.
/// Cost: O(candidates + seats × log candidates).
pub fn draw_committee<AccountId: Clone>(
	candidates: &[(AccountId, Planck)],
	seats: u32,
	mut random: impl FnMut(u32) -> u128,
) -> Vec<Seated<AccountId>> {
	let staked: Vec<&(AccountId, Planck)> = candidates.iter().filter(|(_, s)| *s > 0).collect();
	// `ends[i]`: cumulative stake of candidates 0..=i (saturating: a saturated tail is only
	// drawn less often, never out of range).
	let mut total = 0u128;
	let ends: Vec<u128> = staked
		.iter()
		.map(|(_, s)| {
			total = total.saturating_add(*s);
			total
		})
		.collect();
	if total == 0 {
		return Vec::new();
	}
	let mut held = alloc::vec![0u32; staked.len()];
	for j in 0..seats {
		let target = random(j) % total;
		let pick = ends.partition_point(|end| *end <= target);
		if let Some(h) = held.get_mut(pick) {
			*h = h.saturating_add(1);
		}
	}
	staked
		.iter()
		.zip(held)
		.filter(|(_, seats)| *seats > 0)
		.map(|((who, stake), seats)| Seated { who: who.clone(), stake: *stake, seats })
		.collect()
}

/// Votes of a committee, counted in seats.
#[derive(
	Clone,
	Copy,
	Default,
	PartialEq,
	Eq,
	Encode,
	Decode,
	DecodeWithMemTracking,
	MaxEncodedLen,
	TypeInfo,
	Debug,
)]
pub struct JuryVotes {
	/// Seats of the committee (all drawn seats, voting or not).
	pub seats: u32,
	/// Seats of jurors who voted guilty.
	pub guilty: u32,
	/// Seats of jurors who voted innocent.
	pub innocent: u32,
}

impl JuryVotes {
	/// Seats needed to convict: [`majority`] of all seats.
	pub fn conviction_threshold(&self) -> u32 {
		majority(self.seats)
	}

	/// The verdict as soon as it is certain: `Guilty` once guilty seats reach a majority,
	/// `Innocent` once they no longer can; `None` while undecided.
	pub fn decided(&self) -> Option<Verdict> {
		let threshold = self.conviction_threshold();
		if self.seats > 0 && self.guilty >= threshold {
			Some(Verdict::Guilty)
		} else if self.innocent > self.seats.saturating_sub(threshold) {
			Some(Verdict::Innocent)
		} else {
			None
		}
	}

	/// The verdict when the voting period is over: [`Self::decided`], else `Innocent` (seats
	/// that did not vote count for acquittal: a conviction needs a majority of all seats, and an
	/// undecided committee acquits, so that a challenge its committee leaves undecided costs the
	/// challenger its bond and can be appealed); `Expired` only for a committee without seats.
	pub fn at_expiry(&self) -> Verdict {
		match self.decided() {
			Some(verdict) => verdict,
			None if self.seats > 0 => Verdict::Innocent,
			None => Verdict::Expired,
		}
	}
}

/// Splits `amount` planck over the jurors of a committee who voted with its verdict
/// (`voters`: account, seats) per seat of the committee: `share_i = ⌊amount × seats_i /
/// paid_seats⌋`, `paid_seats` being every seat of the committee that is paid when its holder
/// votes with the verdict (the parties' seats excluded). A juror is paid for its own seats
/// whoever voted before it: voting at once, without a replay, to be among the voters when the
/// verdict becomes certain takes no more. Returns the shares (in input order) and the rest
/// (the seats that did not vote with the verdict, and rounding dust), which is not paid to
/// anyone. `Σ shares + rest = amount` always; if the voters hold more seats than `paid_seats`
/// (which a committee cannot), they are split over their own seats.
pub fn split_per_seat<AccountId: Clone>(
	amount: Planck,
	voters: &[(AccountId, u128)],
	paid_seats: u128,
) -> (Vec<(AccountId, Planck)>, Planck) {
	let total = paid_seats.max(crate::rewards::weight_of(voters));
	crate::rewards::split_over(amount, voters, total)
}

#[cfg(test)]
mod tests {
	use super::*;
	use proptest::prelude::*;

	/// The first voters of a committee are paid for their own seats, not for the seats that
	/// had not voted when the verdict became certain.
	#[test]
	fn voters_are_paid_per_seat_of_the_committee_not_per_seat_voted() {
		let (shares, rest) = split_per_seat(1_000, &[(1u8, 61), (2, 41)], 200);
		assert_eq!(shares, vec![(1, 305), (2, 205)]);
		assert_eq!(rest, 490);
		// Everyone voted with the verdict: all of it is paid (to the dust).
		let (shares, rest) = split_per_seat(1_000, &[(1u8, 100), (2, 100)], 200);
		assert_eq!((shares, rest), (vec![(1, 500), (2, 500)], 0));
		// Nobody did: nothing is.
		assert_eq!(split_per_seat::<u8>(1_000, &[], 200), (vec![], 1_000));
	}

	proptest! {
		/// Shares never exceed a voter's seat share of the committee, and nothing is created.
		#[test]
		fn per_seat_shares_are_bounded_by_the_seat_share(
			amount in 0u128..1_000_000_000_000_000,
			seats in proptest::collection::vec(0u128..300, 0..8),
			extra in 0u128..500,
		) {
			let voters: Vec<(usize, u128)> = seats.iter().copied().enumerate().collect();
			let paid_seats = seats.iter().sum::<u128>() + extra;
			let (shares, rest) = split_per_seat(amount, &voters, paid_seats);
			prop_assert_eq!(shares.iter().map(|(_, s)| s).sum::<u128>() + rest, amount);
			for ((_, share), s) in shares.iter().zip(&seats) {
				prop_assert!(paid_seats == 0 || *share <= amount * s / paid_seats);
			}
		}
	}

	fn rng(seed: u64) -> impl FnMut(u32) -> u128 {
		// SplitMix64, twice: deterministic test randomness.
		let mut s = seed;
		move |_| {
			let mut next = || {
				s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
				let mut z = s;
				z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
				z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
				z ^ (z >> 31)
			};
			(u128::from(next()) << 64) | u128::from(next())
		}
	}

	#[test]
	fn committee_size_is_the_smallest_that_meets_the_bound() {
		let options = f64::from(SEED_OPTIONS);
		let p = wrong_verdict_probability(COMMITTEE_SEATS, ADVERSARY_SHARE);
		let smaller = wrong_verdict_probability(COMMITTEE_SEATS - 2, ADVERSARY_SHARE);
		println!(
			"{{\"committee_seats\":{COMMITTEE_SEATS},\"seed_options\":{SEED_OPTIONS},\
			 \"p_wrong_verdict_per_seed\":{p:e},\"p_wrong_verdict_best_seed\":{:e},\
			 \"p_wrong_verdict_best_seed_with_{}_seats\":{:e}}}",
			options * p,
			COMMITTEE_SEATS - 2,
			options * smaller
		);
		assert_eq!(COMMITTEE_SEATS, 203);
		assert!(options * p <= MAX_WRONG_VERDICT && options * smaller > MAX_WRONG_VERDICT);
		// A smaller adversary does even worse.
		assert!(wrong_verdict_probability(COMMITTEE_SEATS, 0.3) < p / 10.0);
	}

	#[test]
	fn committee_of_an_appeal_turns_far_less_often() {
		let first = wrong_verdict_probability(COMMITTEE_SEATS, ADVERSARY_SHARE);
		let appeal = wrong_verdict_probability(APPEAL_SEATS, ADVERSARY_SHARE);
		// An honest member wrongly convicted must lose both committees: the first's ruling is
		// appealed, and the appeal's verdict is the one executed.
		println!(
			"{{\"appeal_seats\":{APPEAL_SEATS},\"p_wrong_verdict_per_seed\":{appeal:e},\
			 \"p_wrong_first_and_appeal_best_seeds\":{:e}}}",
			f64::from(SEED_OPTIONS) * first * f64::from(SEED_OPTIONS) * appeal
		);
		assert_eq!(APPEAL_SEATS, 407);
		assert!(appeal < first / 1e4, "{appeal:e} vs {first:e}");
		assert!(f64::from(SEED_OPTIONS) * appeal <= MAX_WRONG_VERDICT * 1e-5);
	}

	#[test]
	fn binomial_tail_matches_exact_small_cases() {
		// 3 seats, majority 2: P(X ≥ 2) = 3a²(1 − a) + a³.
		let a = 0.25;
		let exact = 3.0 * a * a * (1.0 - a) + a * a * a;
		assert!((wrong_verdict_probability(3, a) - exact).abs() < 1e-15);
		// 4 seats: majority 3, but 2 seats already block a conviction: P(X ≥ 2).
		let exact4 = 1.0 - (1.0 - a).powi(4) - 4.0 * a * (1.0 - a).powi(3);
		assert!((wrong_verdict_probability(4, a) - exact4).abs() < 1e-15);
		assert!((wrong_verdict_probability(1, a) - a).abs() < 1e-15);
	}

	#[test]
	fn seats_are_drawn_with_replacement_in_proportion_to_stake() {
		let c = [(1u8, 10), (2, 0), (3, 30)];
		let committee = draw_committee(&c, 1_000, rng(7));
		assert_eq!(committee.iter().map(|s| s.seats).sum::<u32>(), 1_000);
		assert!(committee.iter().all(|s| s.who != 2), "zero stake never sits");
		let three = committee.iter().find(|s| s.who == 3).map_or(0, |s| s.seats);
		assert!((700..800).contains(&three), "¾ of the stake, {three} of 1 000 seats");
		assert!(draw_committee::<u8>(&[(1, 0)], 5, rng(1)).is_empty());
	}

	#[test]
	fn majority_of_seats_convicts_and_absent_seats_acquit() {
		let v = JuryVotes { seats: 203, guilty: 101, innocent: 0 };
		assert_eq!(v.decided(), None);
		assert_eq!(JuryVotes { guilty: 102, ..v }.decided(), Some(Verdict::Guilty));
		assert_eq!(JuryVotes { innocent: 102, ..v }.decided(), Some(Verdict::Innocent));
		assert_eq!(JuryVotes { innocent: 101, ..v }.decided(), None);
		assert_eq!(v.at_expiry(), Verdict::Innocent, "101 guilty and 102 absent: acquitted");
		assert_eq!(JuryVotes { guilty: 102, ..v }.at_expiry(), Verdict::Guilty);
		assert_eq!(JuryVotes { seats: 203, ..JuryVotes::default() }.at_expiry(), Verdict::Innocent);
		assert_eq!(JuryVotes::default().at_expiry(), Verdict::Expired, "no committee, no verdict");
		assert_eq!(JuryVotes::default().decided(), None, "an empty committee decides nothing");
		// Even committees: 2 of 4 innocent seats already block a conviction.
		let even = JuryVotes { seats: 4, guilty: 0, innocent: 2 };
		assert_eq!(even.decided(), Some(Verdict::Innocent));
	}

	#[test]
	fn eligible_jurors_are_the_contributors_that_can_replay_and_did_not_opt_out() {
		let p = |index: u32, who: u64| crate::Participant { index, who, stake: 10 };
		let contributors = [p(0, 1), p(1, 2), p(2, 3), p(3, 4)];
		let who = |e: Vec<&crate::Participant<u64>>| e.iter().map(|q| q.who).collect::<Vec<_>>();
		// Round 1 (or after a void): everyone that did not opt out.
		assert_eq!(who(eligible_jurors(&contributors, None, |w| *w == 2).collect()), [1, 3, 4]);
		// Round r − 1 final without 4 (a newcomer) and 3 (did not commit it): they cannot
		// replay.
		let prev = [p(0, 1), p(1, 2), p(5, 9)];
		assert_eq!(who(eligible_jurors(&contributors, Some(&prev), |_| false).collect()), [1, 2]);
		assert_eq!(who(eligible_jurors(&contributors, Some(&prev), |w| *w == 1).collect()), [2]);
	}

	proptest! {
		#[test]
		fn verdicts_are_consistent(seats in 0..1_000u32, g in 0..1_000u32, i in 0..1_000u32) {
			let guilty = g.min(seats);
			let innocent = i.min(seats - guilty);
			let v = JuryVotes { seats, guilty, innocent };
			match v.decided() {
				Some(Verdict::Guilty) => prop_assert!(2 * guilty > seats),
				// Innocent: even every undecided seat voting guilty stays short of a majority.
				Some(Verdict::Innocent) => prop_assert!(2 * (seats - innocent) <= seats),
				_ => prop_assert!(seats == 0 || (2 * guilty <= seats && 2 * (seats - innocent) > seats)),
			}
			// At the end of the vote only a majority of all seats convicts; a committee acquits
			// otherwise; no committee, no verdict.
			let end = v.at_expiry();
			prop_assert_eq!(end == Verdict::Guilty, 2 * guilty > seats);
			prop_assert_eq!(end == Verdict::Expired, seats == 0);
		}

		#[test]
		fn draw_is_deterministic_and_fills_every_seat(
			stakes in proptest::collection::vec(0..1_000_000u128, 0..30), seats in 0..300u32, seed in any::<u64>(),
		) {
			let c: Vec<(usize, u128)> = stakes.into_iter().enumerate().collect();
			let a = draw_committee(&c, seats, rng(seed));
			prop_assert_eq!(&a, &draw_committee(&c, seats, rng(seed)));
			let any_stake = c.iter().any(|(_, s)| *s > 0);
			let filled: u32 = a.iter().map(|s| s.seats).sum();
			prop_assert_eq!(filled, if any_stake { seats } else { 0 });
			prop_assert!(a.windows(2).all(|w| w[0].who < w[1].who), "candidate order, each once");
			prop_assert!(a.iter().all(|s| s.stake > 0 && s.seats > 0 && c[s.who].1 == s.stake));
		}
	}
}
