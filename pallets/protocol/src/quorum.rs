//! The quorum rule (`docs/architecture.md`, step 6): a round is final when snapshot participants
//! holding at least `quorum` of the snapshot's stake committed the same checkpoint.
//!
//! The threshold is rounded **up**: with quorum ⅔ of 3 000 planck, 2 000 reaches it and 1 999 does
//! not; with quorum 50 % + 1 ppb two disjoint candidates can never both reach it.

use crate::arith::ppb_ceil;

/// Smallest committed stake that reaches `quorum_ppb` of `total` (planck): `⌈total × q / 10⁹⌉`,
/// at least 1 planck.
pub fn quorum_threshold(total: u128, quorum_ppb: u32) -> u128 {
	ppb_ceil(total, quorum_ppb).max(1)
}

/// Whether `committed` planck of a snapshot of `total` planck reaches `quorum_ppb`.
/// An empty snapshot (total 0) never reaches quorum.
pub fn reaches_quorum(committed: u128, total: u128, quorum_ppb: u32) -> bool {
	total > 0 && committed >= quorum_threshold(total, quorum_ppb)
}

#[cfg(test)]
mod tests {
	use super::*;
	use crate::PPB;
	use proptest::prelude::*;

	#[test]
	fn rounds_up() {
		// 2/3 of 3 000 is exactly 2 000 with the ppb value rounded up…
		assert_eq!(quorum_threshold(3_000, 666_666_667), 2_001);
		// …and with the rounded-down value 2 000 still suffices.
		assert_eq!(quorum_threshold(3_000, 666_666_666), 2_000);
		assert!(!reaches_quorum(1_999, 3_000, 666_666_666));
		// Dust can no longer decide: 51 % of 1 planck needs the whole planck.
		assert_eq!(quorum_threshold(1, 510_000_000), 1);
		assert!(!reaches_quorum(0, 0, 1));
		assert!(!reaches_quorum(u128::MAX, 0, PPB));
	}

	proptest! {
		#[test]
		fn two_disjoint_candidates_never_both_reach_a_majority_quorum(
			total in 1..u128::MAX, q in (PPB / 2 + 1)..=PPB, share in 0..=PPB,
		) {
			let a = crate::arith::ppb_floor(total, share);
			let b = total - a;
			prop_assert!(!(reaches_quorum(a, total, q) && reaches_quorum(b, total, q)));
		}

		#[test]
		fn threshold_is_exact(total in 1..u128::MAX, q in 1..=PPB) {
			let t = quorum_threshold(total, q);
			prop_assert!(reaches_quorum(t, total, q));
			prop_assert!(t == 1 || !reaches_quorum(t - 1, total, q));
		}
	}
}
