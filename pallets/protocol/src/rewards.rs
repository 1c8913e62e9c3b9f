//! Splitting a final round's reward (`docs/architecture.md`, step 8): pro rata to the contributors'
//! snapshot stake, so splitting one stake over many accounts earns nothing extra.

use crate::{arith::mul_div_floor, Planck};
use alloc::vec::Vec;

/// Splits `reward` planck over `contributors` (account, snapshot stake in planck) pro rata:
/// `share_i = ⌊reward × stake_i / Σ stake⌋`. Returns the shares (in input order, zero shares
/// included) and the undistributed remainder (rounding dust; all of `reward` if the stakes sum
/// to 0). `Σ shares + remainder = reward` always.
pub fn split_by_stake<AccountId: Clone>(
	reward: Planck,
	contributors: &[(AccountId, Planck)],
) -> (Vec<(AccountId, Planck)>, Planck) {
	split_over(reward, contributors, weight_of(contributors))
}

/// Σ of the weights of `parts` (saturating).
pub(crate) fn weight_of<AccountId>(parts: &[(AccountId, u128)]) -> u128 {
	parts.iter().fold(0u128, |acc, (_, w)| acc.saturating_add(*w))
}

/// Splits `amount` planck over `parts` (account, weight) as `⌊amount × weight_i / total⌋`,
/// `total` ≥ Σ weights; returns the shares (in input order) and the rest. `Σ shares + rest =
/// amount` always.
pub(crate) fn split_over<AccountId: Clone>(
	amount: Planck,
	parts: &[(AccountId, u128)],
	total: u128,
) -> (Vec<(AccountId, Planck)>, Planck) {
	let mut paid = 0u128;
	let shares = parts
		.iter()
		.map(|(who, weight)| {
			// ≤ amount because weight ≤ total (a saturated total only makes shares smaller).
			let share = mul_div_floor(amount, *weight, total)
				.unwrap_or(0)
				.min(amount.saturating_sub(paid));
			paid = paid.saturating_add(share);
			(who.clone(), share)
		})
		.collect();
	(shares, amount.saturating_sub(paid))
}

#[cfg(test)]
mod tests {
	use super::*;
	use proptest::prelude::*;

	#[test]
	fn by_stake_not_by_account() {
		let (s, dust) = split_by_stake(1_000, &[(1u8, 300), (2, 100), (3, 100), (4, 100)]);
		assert_eq!(s, vec![(1, 500), (2, 166), (3, 166), (4, 166)]);
		assert_eq!(dust, 2);
		let (s, dust) = split_by_stake(1_000, &[(1u8, 0)]);
		assert_eq!((s, dust), (vec![(1, 0)], 1_000));
	}

	proptest! {
		#[test]
		fn conserves_the_reward(
			reward in any::<u128>(),
			stakes in proptest::collection::vec(any::<u128>(), 0..40),
		) {
			let c: Vec<(usize, u128)> = stakes.into_iter().enumerate().collect();
			let (s, dust) = split_by_stake(reward, &c);
			let paid = s.iter().fold(0u128, |a, (_, x)| a.checked_add(*x).expect("no overflow"));
			prop_assert_eq!(paid.checked_add(dust), Some(reward));
		}

		#[test]
		fn sybil_split_earns_no_more(reward in 0..u64::MAX as u128, stake in 2..u64::MAX as u128, other in 1..u64::MAX as u128) {
			let (one, _) = split_by_stake(reward, &[(0u8, stake), (1, other)]);
			let half = stake / 2;
			let (split, _) = split_by_stake(reward, &[(0u8, half), (2, stake - half), (1, other)]);
			prop_assert!(split[0].1 + split[1].1 <= one[0].1 + 1);
		}
	}
}
