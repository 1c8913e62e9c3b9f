//! The life of a pool (`docs/architecture.md`, step 1): `Open` → `Training` (when `min_trainers`
//! joined) → `Completed` | `Cancelled`, and what its creator holds for its storage.
//!
//! An ended pool is **reaped** once nothing can use its records any more: every round it ran is
//! settled ([`crate::Timeline::settled_by`] its end), every reward claimed. Reaping deletes the
//! pool, its members and former members (their deposits go back to them) and its round
//! history, and returns the creator's storage deposit.

use crate::{Planck, RoundIndex};
use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use scale_info::TypeInfo;

/// Lifecycle of a pool: `Open` → `Training` → `Completed` | `Cancelled`.
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
pub enum PoolStatus {
	/// Accepting members; no round has started.
	Open,
	/// Rounds are running; `current_round` is the round being committed.
	Training,
	/// Every outer round closed (final or voided).
	Completed,
	/// Cancelled by its creator or root; unreserved budget released.
	Cancelled,
}

impl PoolStatus {
	/// Whether the pool takes members and runs rounds (`Open` or `Training`).
	pub fn is_active(self) -> bool {
		matches!(self, Self::Open | Self::Training)
	}

	/// Whether the pool has ended (`Completed` or `Cancelled`): no round will open again.
	pub fn has_ended(self) -> bool {
		!self.is_active()
	}
}

/// The storage deposit a pool's creator holds until the pool is reaped, in planck: `base` for
/// the pool's own records plus `per_round` for each of its `rounds` (each leaves one final or
/// voided record). `None` if it overflows `u128`.
pub fn pool_deposit(base: Planck, per_round: Planck, rounds: RoundIndex) -> Option<Planck> {
	per_round.checked_mul(Planck::from(rounds))?.checked_add(base)
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn only_completed_and_cancelled_pools_have_ended() {
		assert!(!PoolStatus::Open.has_ended());
		assert!(!PoolStatus::Training.has_ended());
		assert!(PoolStatus::Completed.has_ended());
		assert!(PoolStatus::Cancelled.has_ended());
	}

	#[test]
	fn the_deposit_grows_with_the_rounds_and_never_wraps() {
		assert_eq!(pool_deposit(100, 7, 0), Some(100));
		assert_eq!(pool_deposit(100, 7, 3), Some(121));
		assert_eq!(pool_deposit(u128::MAX, 1, 1), None);
		assert_eq!(pool_deposit(0, u128::MAX, 2), None);
	}
}
