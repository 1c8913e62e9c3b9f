//! Juries (`docs/architecture.md`, step 7): drawn stake-weighted from the bonded trainers that opted
//! in as jurors, from randomness fixed only after the challenge was opened; a verdict needs ⅔ of
//! the jury's stake.
//!
//! Why stake-weighted: a sybil with the minimum stake gets a seat with probability proportional
//! to that stake, so capturing a ⅔-of-stake jury costs about ⅔ of the juror stake, not two
//! accounts.

use crate::Planck;
use alloc::vec::Vec;
use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use scale_info::TypeInfo;

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
pub enum Verdict {
	/// Jurors holding ≥ ⅔ of the jury's stake found the contribution dishonest.
	Guilty,
	/// Guilty can no longer reach ⅔ of the jury's stake.
	Innocent,
	/// The voting period ended undecided.
	Expired,
	/// Not enough independent juror stake could be drawn: no verdict, nobody is slashed.
	NoJury,
}

/// Draws up to `seats` jurors from `candidates` (account, stake in planck), without
/// replacement, each draw picking a remaining candidate with probability proportional to its
/// stake. `random(j)` supplies 128 random bits for draw `j` (the runtime derives them from a
/// block hash fixed after the challenge was opened); zero-stake candidates are never drawn.
///
/// The modulo bias of `random(j) % remaining_stake` is below `remaining_stake / 2¹²⁸`.
/// Cost: O(seats × candidates).
pub fn draw_jury<AccountId: Clone>(
	candidates: &[(AccountId, Planck)],
	seats: u32,
	mut random: impl FnMut(u32) -> u128,
) -> Vec<(AccountId, Planck)> {
	let mut pool: Vec<(AccountId, Planck)> =
		candidates.iter().filter(|(_, s)| *s > 0).cloned().collect();
	let mut jury = Vec::new();
	for j in 0..seats {
		let total = pool.iter().fold(0u128, |acc, (_, s)| acc.saturating_add(*s));
		if total == 0 {
			break;
		}
		let mut target = random(j) % total;
		let mut pick = pool.len().saturating_sub(1);
		for (i, (_, s)) in pool.iter().enumerate() {
			if target < *s {
				pick = i;
				break;
			}
			target -= *s;
		}
		if pick < pool.len() {
			jury.push(pool.swap_remove(pick));
		}
	}
	jury
}

/// Stake-weighted votes of a jury, in planck.
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
	/// Total stake of the jury.
	pub jury_stake: Planck,
	/// Stake of jurors who voted guilty.
	pub guilty_stake: Planck,
	/// Stake of jurors who voted innocent.
	pub innocent_stake: Planck,
}

impl JuryVotes {
	/// Stake needed to convict: `⌈⅔ × jury_stake⌉`.
	pub fn conviction_threshold(&self) -> Planck {
		self.jury_stake - self.jury_stake / 3
	}

	/// The verdict as soon as it is certain: `Guilty` once guilty stake reaches the threshold,
	/// `Innocent` once it no longer can; `None` while undecided.
	pub fn decided(&self) -> Option<Verdict> {
		let threshold = self.conviction_threshold();
		if self.jury_stake > 0 && self.guilty_stake >= threshold {
			Some(Verdict::Guilty)
		} else if self.innocent_stake > self.jury_stake - threshold {
			Some(Verdict::Innocent)
		} else {
			None
		}
	}

	/// The verdict when the voting period is over: [`Self::decided`] or `Expired`.
	pub fn at_expiry(&self) -> Verdict {
		self.decided().unwrap_or(Verdict::Expired)
	}
}

#[cfg(test)]
mod tests {
	use super::*;
	use crate::PPB;
	use proptest::prelude::*;

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
	fn draws_without_replacement_and_skips_zero_stake() {
		let c = [(1u8, 10), (2, 0), (3, 10), (4, 10)];
		let jury = draw_jury(&c, 5, rng(7));
		assert_eq!(jury.len(), 3);
		let mut who: Vec<u8> = jury.iter().map(|(w, _)| *w).collect();
		who.sort();
		assert_eq!(who, vec![1, 3, 4]);
	}

	#[test]
	fn minimum_stake_sybils_rarely_sit() {
		// One honest juror with 1 000 000 planck, ten sybils with 100 each: over 2 000 draws of
		// one seat, sybils sit about 0.1 % of the time.
		let mut c = vec![(0u32, 1_000_000u128)];
		c.extend((1..=10).map(|i| (i, 100)));
		let sybil_seats =
			(0..2_000u64).filter(|seed| draw_jury(&c, 1, rng(*seed))[0].0 != 0).count();
		assert!(sybil_seats < 20, "sybils sat {sybil_seats} times of 2 000");
	}

	#[test]
	fn two_thirds_of_stake_convicts() {
		let v = JuryVotes { jury_stake: 300, guilty_stake: 199, innocent_stake: 0 };
		assert_eq!(v.decided(), None);
		assert_eq!(JuryVotes { guilty_stake: 200, ..v }.decided(), Some(Verdict::Guilty));
		assert_eq!(JuryVotes { innocent_stake: 101, ..v }.decided(), Some(Verdict::Innocent));
		assert_eq!(
			JuryVotes { guilty_stake: 150, innocent_stake: 100, ..v }.at_expiry(),
			Verdict::Expired
		);
		assert_eq!(JuryVotes::default().decided(), None, "an empty jury decides nothing");
	}

	proptest! {
		#[test]
		fn verdicts_are_consistent(jury in 0..u128::MAX, g in 0..=PPB, i in 0..=PPB) {
			let guilty = crate::arith::ppb_floor(jury, g);
			let innocent = crate::arith::ppb_floor(jury - guilty, i);
			let v = JuryVotes { jury_stake: jury, guilty_stake: guilty, innocent_stake: innocent };
			if v.decided() == Some(Verdict::Guilty) {
				// Guilty means ≥ 2/3: 3·guilty ≥ 2·jury (compared without overflow).
				prop_assert!(guilty >= jury - jury / 3);
			}
			if v.decided() == Some(Verdict::Innocent) {
				prop_assert!(guilty + (jury - guilty - innocent) < v.conviction_threshold());
			}
		}

		#[test]
		fn draw_is_deterministic_and_bounded(
			stakes in proptest::collection::vec(0..1_000_000u128, 0..30), seats in 0..10u32, seed in any::<u64>(),
		) {
			let c: Vec<(usize, u128)> = stakes.into_iter().enumerate().collect();
			let a = draw_jury(&c, seats, rng(seed));
			prop_assert_eq!(&a, &draw_jury(&c, seats, rng(seed)));
			prop_assert!(a.len() <= seats as usize);
			let mut ids: Vec<usize> = a.iter().map(|(w, _)| *w).collect();
			ids.sort();
			ids.dedup();
			prop_assert_eq!(ids.len(), a.len());
			prop_assert!(a.iter().all(|(_, s)| *s > 0));
		}
	}
}
