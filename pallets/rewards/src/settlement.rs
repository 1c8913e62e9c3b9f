//! Reservation at finality, settlement, claims and `try_state`.

use crate::{pallet::*, Event, WeightInfo};
use alloc::vec::Vec;
use frame_support::pallet_prelude::*;
use frame_system::pallet_prelude::BlockNumberFor;
use sp_runtime::traits::{One, SaturatedConversion, Saturating, Zero};
use synod_primitives::{
	protocol, ChallengesInspect, CheckpointsInspect, OnRoundFinalized, OnRoundSettled, PoolId,
	PoolsInterface, RoundIndex,
};

impl<T: Config> OnRoundFinalized<BlockNumberFor<T>> for Pallet<T> {
	fn round_finalized(pool_id: PoolId, round: RoundIndex, at: BlockNumberFor<T>) {
		let Some(params) = T::Pools::round_params(pool_id) else {
			return;
		};
		let settle_at: BlockNumberFor<T> =
			params.timeline.settle_at(at.saturated_into()).saturated_into();
		// A full block pushes the settlement to a later one, a bounded number of times; after
		// that it is settled lazily (`claim_rewards`, `settle_round`).
		let mut slot = settle_at;
		let mut scheduled = false;
		for _ in 0..T::MaxSettlementsPerBlock::get().max(1) {
			if Settlements::<T>::try_mutate(slot, |s| s.try_push((pool_id, round))).is_ok() {
				scheduled = true;
				break;
			}
			slot = slot.saturating_add(One::one());
		}
		let settle_at = if scheduled { slot } else { settle_at };
		let reserved = T::Pools::reserve_reward(pool_id);
		Unsettled::<T>::insert(pool_id, round, PendingRound { reserved, settle_at, scheduled });
		Self::deposit_event(Event::RewardReserved { pool_id, round, reserved, settle_at });
	}

	/// The settlement lists after the first that the search for a slot reads when they are
	/// full (`MaxSettlementsPerBlock − 1` of them, at their largest).
	fn probe_weight() -> Weight {
		let lists = T::MaxSettlementsPerBlock::get().saturating_sub(1);
		let max_len =
			BoundedVec::<(PoolId, RoundIndex), T::MaxSettlementsPerBlock>::max_encoded_len();
		synod_primitives::list_probe_weight::<T::DbWeight>(lists, max_len)
	}
}

/// A pool's records here: unsettled rounds (the pool is in use while any is left: anyone can
/// `settle_round` it) and credited, unclaimed rewards, which reaping pays out to their members
/// as a claim would (one that cannot be paid is forfeited to the creator): an unclaimed reward
/// never holds the creator's deposit hostage.
impl<T: Config> synod_primitives::PoolRecords for Pallet<T> {
	fn in_use(pool: PoolId) -> bool {
		Unsettled::<T>::iter_prefix(pool).next().is_some()
	}

	fn clear(pool: PoolId, limit: u32) -> (u32, bool) {
		SettleCursor::<T>::remove(pool);
		let owed: Vec<(T::AccountId, T::Balance)> =
			Claimable::<T>::iter_prefix(pool).take(limit as usize).collect();
		let mut paid = 0u32;
		for (who, amount) in owed {
			// A payment fails only if it cannot be made (less than the existential deposit to
			// an account that no longer exists): forfeited to the creator, or it would hold the
			// pool (and the creator's deposit) forever.
			if Self::do_claim(who.clone(), pool).is_err() {
				Claimable::<T>::remove(pool, &who);
				T::Pools::unreserve(pool, amount);
				Self::deposit_event(Event::RewardForfeited { pool_id: pool, who, amount });
			}
			paid = paid.saturating_add(1);
		}
		(paid, Claimable::<T>::iter_prefix(pool).next().is_none())
	}

	fn clear_weight(limit: u32) -> Weight {
		// Each record is one payment; plus the prefix read and the emptiness check, and the
		// scan cursor's removal.
		T::WeightInfo::pay_claim()
			.saturating_mul(u64::from(limit))
			.saturating_add(T::DbWeight::get().reads_writes(2, 1))
	}
}

impl<T: Config> Pallet<T> {
	/// Settles up to `MaxSettlementsPerBlock` of `pool_id`'s rounds that are due, after reading
	/// at most `2 × MaxSettlementsPerBlock` unsettled entries from [`SettleCursor`] on (wrapping
	/// around), and moves the cursor past them. Returns the rounds settled.
	pub(crate) fn settle_due(pool_id: PoolId) -> u32 {
		let now = frame_system::Pallet::<T>::block_number();
		// Bounded work: at most 2 × MaxSettlementsPerBlock entries are read and at most
		// MaxSettlementsPerBlock settled (what `claim_rewards` is weighed for); anything due
		// beyond them is settled by the next claim (the cursor moves on, so that rounds not
		// due yet cannot hide a due one from every claim) or `settle_round`.
		let max = T::MaxSettlementsPerBlock::get() as usize;
		let budget = max.saturating_mul(2);
		let mut read: Vec<(RoundIndex, BlockNumberFor<T>)> = match SettleCursor::<T>::get(pool_id) {
			Some(after) => Unsettled::<T>::iter_prefix_from(
				pool_id,
				Unsettled::<T>::hashed_key_for(pool_id, after),
			)
			.take(budget)
			.map(|(r, p)| (r, p.settle_at))
			.collect(),
			None => Vec::new(),
		};
		if read.len() < budget {
			// Wrapped around: from the first key, up to the entries read already.
			let left = budget.saturating_sub(read.len());
			let first = read.first().map(|(r, _)| *r);
			read.extend(
				Unsettled::<T>::iter_prefix(pool_id)
					.take(left)
					.take_while(|(r, _)| Some(*r) != first)
					.map(|(r, p)| (r, p.settle_at)),
			);
		}
		let due: Vec<RoundIndex> =
			read.iter().filter(|(_, at)| *at <= now).take(max).map(|(r, _)| *r).collect();
		// The next scan starts after the last round read, or, when due rounds read were left
		// for the settlement limit, after the last one settled (they come first next time).
		let last = match due.last() {
			Some(r) if due.len() == max => Some(*r),
			_ => read.last().map(|(r, _)| *r).filter(|_| read.len() == budget),
		};
		match last {
			Some(r) => SettleCursor::<T>::insert(pool_id, r),
			None => SettleCursor::<T>::remove(pool_id),
		}
		let settled = due.len() as u32;
		for round in due {
			Self::settle(pool_id, round);
		}
		settled
	}

	/// Weight of a `claim_rewards` that settled `settled` rounds: the claim with the most reads
	/// of unsettled entries (benchmarked), and, if it settled any, the settlements (each
	/// weighed with `MaxContributors` contributors) with their `OnRoundSettled` hooks.
	pub fn claim_weight(settled: u32) -> Weight {
		let claim = T::WeightInfo::claim_rewards();
		if settled == 0 {
			return claim;
		}
		claim
			.saturating_add(T::WeightInfo::on_initialize_settle(settled, T::MaxContributors::get()))
			.saturating_add(
				<T::OnRoundSettled as synod_primitives::OnRoundSettled>::weight()
					.saturating_mul(u64::from(settled)),
			)
	}

	/// Credits `(pool, round)`'s reserved reward to its contributors not found guilty, pro rata
	/// to their snapshot stake.
	pub(crate) fn settle(pool_id: PoolId, round: RoundIndex) {
		let Some(pending) = Unsettled::<T>::take(pool_id, round) else {
			return;
		};
		if pending.scheduled {
			Settlements::<T>::mutate(pending.settle_at, |s| s.retain(|e| *e != (pool_id, round)));
		}
		// Shares over *all* contributors; a guilty one's share returns to the budget (it does
		// not enrich the co-contributors, who could otherwise profit from a false conviction).
		let contributors: Vec<(T::AccountId, u128)> =
			T::Checkpoints::final_checkpoint(pool_id, round)
				.map(|f| f.contributors)
				.unwrap_or_default()
				.into_iter()
				.map(|p| (p.who, p.stake))
				.collect();
		let (shares, _) =
			protocol::split_by_stake(pending.reserved.saturated_into(), &contributors);
		let mut paid = T::Balance::zero();
		let mut credited = 0u32;
		for (who, share) in shares {
			let share: T::Balance = share.saturated_into();
			if share.is_zero() || T::Challenges::is_guilty(pool_id, round, &who) {
				continue;
			}
			Claimable::<T>::mutate(pool_id, &who, |c| *c = c.saturating_add(share));
			paid = paid.saturating_add(share);
			credited = credited.saturating_add(1);
		}
		let returned = pending.reserved.saturating_sub(paid);
		if !returned.is_zero() {
			T::Pools::unreserve(pool_id, returned);
		}
		Self::deposit_event(Event::RoundSettled { pool_id, round, paid, credited, returned });
		T::OnRoundSettled::round_settled(pool_id, round);
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
	/// claimable rewards; every round said to be scheduled is.
	pub fn do_try_state() -> Result<(), sp_runtime::TryRuntimeError> {
		use alloc::collections::btree_map::BTreeMap;
		let mut owed: BTreeMap<PoolId, T::Balance> = BTreeMap::new();
		for (pool_id, round, p) in Unsettled::<T>::iter() {
			ensure!(
				!p.scheduled || Settlements::<T>::get(p.settle_at).contains(&(pool_id, round)),
				"unsettled round is not scheduled where it says"
			);
			let e = owed.entry(pool_id).or_default();
			*e = e.saturating_add(p.reserved);
		}
		for (pool_id, _, c) in Claimable::<T>::iter() {
			let e = owed.entry(pool_id).or_default();
			*e = e.saturating_add(c);
		}
		for (pool_id, amount) in owed {
			let params =
				T::Pools::round_params(pool_id).ok_or("rewards owed by an unknown pool")?;
			ensure!(
				params.budget_reserved == amount,
				"pool's reserved budget differs from what rewards owe"
			);
		}
		Ok(())
	}
}
