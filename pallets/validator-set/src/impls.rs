//! [`StakeCommitments`]: the stake that backs validation cannot be unbonded.

use crate::pallet::*;
use frame_support::traits::Get;
use sp_runtime::traits::Zero;
use synod_primitives::StakeCommitments;

/// `MinValidatorBond` for a candidate or an active or queued validator, zero otherwise: while
/// `who` may still author blocks, `unbond` must leave the minimum bond active.
impl<T: Config> StakeCommitments<T::AccountId, T::Balance> for Pallet<T> {
	fn committed(who: &T::AccountId) -> T::Balance {
		if Self::is_validating(who) {
			T::MinValidatorBond::get()
		} else {
			Zero::zero()
		}
	}
}
