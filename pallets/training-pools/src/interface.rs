//! [`PoolsInterface`] and [`StakeCommitments`] for the other pallets.

use crate::{pallet::*, types::MemberInfo, Event, WeightInfo};
use alloc::vec::Vec;
use frame_support::{
	pallet_prelude::*,
	traits::{
		fungible::MutateHold,
		tokens::{Fortitude, Precision, Restriction},
	},
};
use frame_system::pallet_prelude::BlockNumberFor;
use sp_runtime::traits::{SaturatedConversion, Saturating, Zero};
use synod_primitives::{
	protocol::MemberState, MemberIndex, MemberKey, MemberView, PoolId, PoolStatus, PoolsInterface,
	RoundIndex, RoundParams, StakeCommitments, TrainerStake,
};

impl<T: Config> StakeCommitments<T::AccountId, BalanceOf<T>> for Pallet<T> {
	/// Sum of the stake `who` committed to the Open or Training pools it is a member of, and
	/// to the pools it left whose round open at its leaving is not settled yet
	/// ([`LeftCommitments`]): one stake backs at most one live snapshot.
	fn committed(who: &T::AccountId) -> BalanceOf<T> {
		let now = frame_system::Pallet::<T>::block_number();
		TrainerPools::<T>::get(who)
			.iter()
			.fold(Zero::zero(), |acc: BalanceOf<T>, pool_id| {
				let member = Self::member_stake(*pool_id, who);
				let left = LeftCommitments::<T>::get(who, pool_id)
					.filter(|l| now <= l.until)
					.map(|l| l.stake);
				acc.saturating_add(member.unwrap_or_default())
					.saturating_add(left.unwrap_or_default())
			})
	}

	/// [`TrainerPools`], then per pool of it (`MaxPoolsPerTrainer` at most) its [`Pools`]
	/// record, the account's [`Members`] record and its [`LeftCommitments`] entry.
	fn committed_weight() -> Weight {
		let n = u64::from(T::MaxPoolsPerTrainer::get());
		T::DbWeight::get().reads(n.saturating_mul(3).saturating_add(1))
	}
}

/// Proof bytes of a double map's key beside its value, at most: the 32-byte prefix and two
/// hashed keys of at most 16 bytes of hash and 32 of key each.
const MAP_KEY_PROOF: usize = 32 + 2 * (16 + 32);

impl<T: Config> PoolsInterface<T::AccountId, BalanceOf<T>, BlockNumberFor<T>> for Pallet<T> {
	fn round_params(pool: PoolId) -> Option<RoundParams<T::AccountId, BalanceOf<T>>> {
		Pools::<T>::get(pool).map(|p| RoundParams {
			timeline: Self::timeline(&p),
			creator: p.creator,
			status: p.status,
			initial_checkpoint: p.spec.kind.initial_checkpoint(),
			current_round: p.current_round,
			rounds: p.spec.terms.rounds,
			quorum: p.spec.terms.quorum,
			reward_per_round: p.spec.terms.reward_per_round,
			budget_reserved: p.budget_reserved,
		})
	}

	fn member(pool: PoolId, who: &T::AccountId) -> Option<MemberView<T::AccountId, BalanceOf<T>>> {
		Members::<T>::get(pool, who).map(|m| MemberView {
			who: who.clone(),
			index: m.index,
			stake: m.stake,
			from_round: m.from_round,
		})
	}

	fn member_states(pool: PoolId) -> Vec<MemberState<T::AccountId>> {
		MemberList::<T>::get(pool)
			.into_iter()
			.filter_map(|who| {
				let m = Members::<T>::get(pool, &who)?;
				let bonded = T::Staking::active_stake(&who).saturated_into();
				Some(MemberState {
					index: m.index,
					committed: m.stake.saturated_into(),
					bonded,
					from_round: m.from_round,
					who,
				})
			})
			.collect()
	}

	fn drop_member(pool_id: PoolId, who: &T::AccountId) {
		// Also when it already left (its stake still counted in the round's snapshot): leaving
		// before the drop does not buy a way back in.
		if Pools::<T>::contains_key(pool_id) {
			Dropped::<T>::insert(pool_id, who, ());
		}
		if Self::remove_member(pool_id, who).is_ok() {
			Self::deposit_event(Event::MemberDropped { pool_id, who: who.clone() });
		}
	}

	fn member_key(pool: PoolId, index: MemberIndex, who: &T::AccountId) -> Option<MemberKey> {
		if let Some(m) = Members::<T>::get(pool, who).filter(|m| m.index == index) {
			return Some(MemberKey {
				peer_id: m.peer_id.into_inner(),
				ml_dsa_key: m.ml_dsa_key.to_vec(),
			});
		}
		FormerMembers::<T>::get(pool, index)
			.filter(|f| f.who == *who)
			.map(|f| MemberKey {
				peer_id: f.peer_id.into_inner(),
				ml_dsa_key: f.ml_dsa_key.to_vec(),
			})
	}

	/// Measured by the `cancel_pool` benchmark, which ends an Open pool: each member's
	/// `LeftCommitments` entry read and its `TrainerPools` list read and written, and the budget
	/// released as a training pool's end releases it. A training pool's end also reads each
	/// member's `Members` record first (a member in the last round's snapshot then has its
	/// `LeftCommitments` entry read and written; one that joined during that round, the same
	/// accesses as in the benchmark): one read and its proof per member are added.
	fn end_weight(members: u32) -> Weight {
		let members = members.clamp(1, T::MaxMembers::get().max(1));
		let record = MemberInfo::<T>::max_encoded_len().saturating_add(MAP_KEY_PROOF) as u64;
		T::WeightInfo::cancel_pool(members)
			.saturating_add(T::DbWeight::get().reads(members.into()))
			.saturating_add(Weight::from_parts(0, record.saturating_mul(members.into())))
	}

	fn member_count(pool: PoolId) -> u32 {
		MemberList::<T>::decode_len(pool).map_or(0, |n| n.saturated_into())
	}

	fn close_round(pool_id: PoolId, round: RoundIndex) -> Option<RoundIndex> {
		let mut pool = Pools::<T>::get(pool_id)?;
		if pool.status != PoolStatus::Training || pool.current_round != round {
			return (pool.status == PoolStatus::Training).then_some(pool.current_round);
		}
		// A pool every member has left is cancelled rather than run on: each round would open
		// with an empty snapshot and be voided at its deadline, a void (and a deadline slot)
		// every `round_timeout` blocks for nothing but the creator's deposit. (Its last round
		// completes it.)
		let memberless = pool.member_count == 0 && round < pool.spec.terms.rounds;
		if pool.cancel_after.is_some_and(|last| round >= last) || memberless {
			pool.status = PoolStatus::Cancelled;
			let released = Self::end_pool(pool_id, &mut pool);
			Pools::<T>::insert(pool_id, pool);
			Self::deposit_event(Event::PoolCancelled { pool_id, released });
			return None;
		}
		if round >= pool.spec.terms.rounds {
			pool.status = PoolStatus::Completed;
			let released = Self::end_pool(pool_id, &mut pool);
			Pools::<T>::insert(pool_id, pool);
			Self::deposit_event(Event::PoolCompleted { pool_id, released });
			return None;
		}
		let next = round.saturating_add(1);
		pool.current_round = next;
		Pools::<T>::insert(pool_id, pool);
		Self::deposit_event(Event::RoundStarted { pool_id, round: next });
		Some(next)
	}

	fn reserve_reward(pool_id: PoolId) -> BalanceOf<T> {
		let Some(mut pool) = Pools::<T>::get(pool_id) else {
			return Zero::zero();
		};
		let free = pool.budget_held.saturating_sub(pool.budget_reserved);
		let amount = pool.spec.terms.reward_per_round.min(free);
		pool.budget_reserved = pool.budget_reserved.saturating_add(amount);
		Pools::<T>::insert(pool_id, pool);
		amount
	}

	fn pay_reserved(pool_id: PoolId, to: &T::AccountId, amount: BalanceOf<T>) -> DispatchResult {
		let mut pool = Pools::<T>::get(pool_id).ok_or(Error::<T>::PoolNotFound)?;
		ensure!(amount <= pool.budget_reserved, Error::<T>::Overflow);
		let paid = T::Currency::transfer_on_hold(
			&Self::budget_reason(),
			&pool.creator,
			to,
			amount,
			Precision::Exact,
			Restriction::Free,
			Fortitude::Force,
		)?;
		pool.budget_reserved = pool.budget_reserved.saturating_sub(paid);
		pool.budget_held = pool.budget_held.saturating_sub(paid);
		Pools::<T>::insert(pool_id, pool);
		Ok(())
	}

	fn unreserve(pool_id: PoolId, amount: BalanceOf<T>) {
		let Some(mut pool) = Pools::<T>::get(pool_id) else {
			return;
		};
		pool.budget_reserved = pool.budget_reserved.saturating_sub(amount);
		if matches!(pool.status, PoolStatus::Completed | PoolStatus::Cancelled) {
			Self::release_unreserved(&mut pool);
		}
		Pools::<T>::insert(pool_id, pool);
	}
}
