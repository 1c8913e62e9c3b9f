//! The inactivity leak (`docs/architecture.md`, "Liveness"): a member of a voided round's snapshot
//! that committed nothing for it loses `penalty_ppb` of its snapshot stake, and after
//! `drop_after` such rounds in a row it is dropped from the pool, so it no longer counts in the
//! next snapshots and the honest stake that remains reaches quorum again. A member that commits
//! anything (even a losing checkpoint) is not leaked: disagreement is not withholding.

use crate::{arith::ppb_floor, Planck};

/// Parameters of the inactivity leak.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct LeakRule {
	/// Share of the snapshot stake slashed per voided round without a commit, in ppb.
	pub penalty_ppb: u32,
	/// Consecutive voided rounds without a commit after which the member is dropped (≥ 1).
	pub drop_after: u32,
}

impl LeakRule {
	/// Planck slashed from a member with `stake` that did not commit in a voided round.
	pub fn penalty(&self, stake: Planck) -> Planck {
		ppb_floor(stake, self.penalty_ppb)
	}

	/// After a voided round: the member's new count of consecutive missed voided rounds, and
	/// whether it is dropped. `committed` resets the count.
	pub fn after_voided_round(&self, missed_before: u32, committed: bool) -> (u32, bool) {
		if committed {
			return (0, false);
		}
		let missed = missed_before.saturating_add(1);
		(missed, missed >= self.drop_after.max(1))
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn leaks_then_drops() {
		let rule = LeakRule { penalty_ppb: 10_000_000, drop_after: 3 };
		assert_eq!(rule.penalty(1_000), 10);
		assert_eq!(rule.after_voided_round(0, false), (1, false));
		assert_eq!(rule.after_voided_round(2, false), (3, true));
		assert_eq!(rule.after_voided_round(2, true), (0, false));
		assert_eq!(LeakRule { drop_after: 0, ..rule }.after_voided_round(0, false), (1, true));
	}
}
