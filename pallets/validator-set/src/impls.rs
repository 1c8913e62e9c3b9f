//! [`StakeCommitments`]: the stake that backs validation cannot be unbonded.

use crate::pallet::*;
use frame_support::traits::Get;
use synod_primitives::StakeCommitments;

/// [`Pallet::validating_stake`]: while `who` may still author blocks, `unbond` must leave the
/// stake it was elected with (at least `MinValidatorBond`).
impl<T: Config> StakeCommitments<T::AccountId, T::Balance> for Pallet<T> {
	fn committed(who: &T::AccountId) -> T::Balance {
		Self::validating_stake(who)
	}
	/// `validating_stake`'s reads: the active, queued and candidate lists and the session's
	/// validators.
	fn committed_weight() -> frame_support::weights::Weight {
		T::DbWeight::get().reads(4)
	}
}
