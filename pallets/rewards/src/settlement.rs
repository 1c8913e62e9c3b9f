//! Reservation at finality, settlement, claims and `try_state`.

use crate::{pallet::*, Event};
use alloc::vec::Vec;
use frame_support::pallet_prelude::*;
use frame_system::pallet_prelude::BlockNumberFor;
use sp_runtime::traits::{CheckedDiv, One, Saturating, Zero};
use synod_primitives::{
	ChallengesInspect, CheckpointsInspect, OnRoundFinalized, PoolId, PoolsInterface, RoundIndex,
};

impl<T: Config> OnRoundFinalized<BlockNumberFor<T>> for Pallet<T> {
	fn round_finalized(pool_id: PoolId, round: RoundIndex, at: BlockNumberFor<T>) -> DispatchResult {
		let params = T::Pools::round_params(pool_id).ok_or(DispatchError::CannotLookup)?;
		let mut settle_at = at
			.saturating_add(params.challenge_window)
			.saturating_add(T::VotingPeriod::get())
			.saturating_add(One::one());
		// A full block pushes the settlement to the next one, a bounded number of times.
		let mut scheduled = false;
		for _ in 0..T::MaxSettlementsPerBlock::get().max(1) {
			if Settlements::<T>::try_mutate(settle_at, |s| s.try_push((pool_id, round))).is_ok() {
				scheduled = true;
				break;
			}
			settle_at = settle_at.saturating_add(One::one());
		}
		ensure!(scheduled, Error::<T>::TooManySettlements);
		let reserved = T::Pools::reserve_reward(pool_id);
		Unsettled::<T>::insert(pool_id, round, PendingRound { reserved, settle_at });
		Self::deposit_event(Event::RewardReserved { pool_id, round, reserved, settle_at });
		Ok(())
	}
}

impl<T: Config> Pallet<T> {
	/// Credits `(pool, round)`'s reserved reward to its contributors not found guilty.
	pub(crate) fn settle(pool_id: PoolId, round: RoundIndex) {
		let Some(pending) = Unsettled::<T>::take(pool_id, round) else { return };
		let eligible: Vec<T::AccountId> = T::Checkpoints::final_checkpoint(pool_id, round)
			.map(|f| f.contributors)
			.unwrap_or_default()
			.into_iter()
			.filter(|who| !T::Challenges::is_guilty(pool_id, round, who))
			.collect();
		let n = T::Balance::from(eligible.len() as u32);
		let share = pending.reserved.checked_div(&n).unwrap_or_else(Zero::zero);
		for who in eligible.iter() {
			Claimable::<T>::mutate(pool_id, who, |c| *c = c.saturating_add(share));
		}
		let returned = pending.reserved.saturating_sub(share.saturating_mul(n));
		if !returned.is_zero() {
			T::Pools::unreserve(pool_id, returned);
		}
		Self::deposit_event(Event::RoundSettled {
			pool_id,
			round,
			share,
			paid: eligible.len() as u32,
			returned,
		});
	}

	pub(crate) fn do_claim(who: T::AccountId, pool_id: PoolId) -> DispatchResult {
		let amount = Claimable::<T>::get(pool_id, &who);
		ensure!(!amount.is_zero(), Error::<T>::NothingToClaim);
		T::Pools::pay_reserved(pool_id, &who, amount)?;
		Claimable::<T>::remove(pool_id, &who);
		Self::deposit_event(Event::RewardsClaimed { pool_id, who, amount });
		Ok(())
	}

	/// Invariant: each pool's reserved budget equals its unsettled reservations plus its
	/// claimable rewards; every unsettled round is scheduled.
	pub fn do_try_state() -> Result<(), sp_runtime::TryRuntimeError> {
		use alloc::collections::btree_map::BTreeMap;
		let mut owed: BTreeMap<PoolId, T::Balance> = BTreeMap::new();
		for (pool_id, round, p) in Unsettled::<T>::iter() {
			ensure!(
				Settlements::<T>::get(p.settle_at).contains(&(pool_id, round)),
				"unsettled round is not scheduled"
			);
			let e = owed.entry(pool_id).or_default();
			*e = e.saturating_add(p.reserved);
		}
		for (pool_id, _, c) in Claimable::<T>::iter() {
			let e = owed.entry(pool_id).or_default();
			*e = e.saturating_add(c);
		}
		for (pool_id, amount) in owed {
			let params = T::Pools::round_params(pool_id).ok_or("rewards owed by an unknown pool")?;
			ensure!(
				params.budget_reserved == amount,
				"pool's reserved budget differs from what rewards owe"
			);
		}
		Ok(())
	}
}
