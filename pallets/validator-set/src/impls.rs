//! [`StakeCommitments`]: the stake that backs validation cannot be unbonded.

use crate::pallet::*;
use synod_primitives::StakeCommitments;

/// [`Pallet::validating_stake`]: while `who` may still author blocks, `unbond` must leave the
/// stake it was elected with (at least `MinValidatorBond`).
impl<T: Config> StakeCommitments<T::AccountId, T::Balance> for Pallet<T> {
	fn committed(who: &T::AccountId) -> T::Balance {
		Self::validating_stake(who)
	}
}
