//! `try_state`: the invariants of pools' budget holds, reservations, member counts, stakes and
//! commitments.

use crate::pallet::*;
use frame_support::pallet_prelude::*;
use sp_runtime::traits::{Saturating, Zero};
use synod_primitives::{protocol, PoolStatus};

impl<T: Config> Pallet<T> {
	/// Invariants: budget holds, reservations, member counts, stakes and commitments.
	pub fn do_try_state() -> Result<(), sp_runtime::TryRuntimeError> {
		use alloc::collections::btree_map::BTreeMap;
		use frame_support::traits::fungible::InspectHold;
		let mut held_by_creator: BTreeMap<T::AccountId, BalanceOf<T>> = BTreeMap::new();
		let mut deposit_by_creator: BTreeMap<T::AccountId, BalanceOf<T>> = BTreeMap::new();
		for (pool_id, pool) in Pools::<T>::iter() {
			ensure!(pool.budget_reserved <= pool.budget_held, "reserved budget exceeds held");
			let allowed = &pool.spec.terms.allowed_trainers;
			ensure!(Self::check_distinct(allowed).is_ok(), "an account is allowed twice");
			ensure!(
				protocol::check_allowed_trainers(
					allowed.len() as u32,
					pool.spec.terms.min_trainers
				)
				.is_ok(),
				"the allow-list names fewer than min_trainers accounts"
			);
			ensure!(
				pool.ended_at.is_some() == pool.status.has_ended(),
				"ended_at set for a pool that has not ended, or missing"
			);
			let e = held_by_creator.entry(pool.creator.clone()).or_default();
			*e = e.saturating_add(pool.budget_held);
			let e = deposit_by_creator.entry(pool.creator.clone()).or_default();
			*e = e.saturating_add(pool.deposit);
			let list = MemberList::<T>::get(pool_id);
			ensure!(list.len() as u32 == pool.member_count, "member_count differs from MemberList");
			ensure!(
				PeerIds::<T>::iter_prefix(pool_id).count() == list.len(),
				"registered peer ids differ from the members"
			);
			let mut stake = BalanceOf::<T>::zero();
			for who in list.iter() {
				let m = Members::<T>::get(pool_id, who).ok_or("listed member has no record")?;
				ensure!(
					PeerIds::<T>::get(pool_id, &m.peer_id).as_ref() == Some(who),
					"a member's peer id is not registered to it"
				);
				stake = stake.saturating_add(m.stake);
				let active = matches!(pool.status, PoolStatus::Open | PoolStatus::Training);
				let left = LeftCommitments::<T>::contains_key(who, pool_id);
				ensure!(
					TrainerPools::<T>::get(who).contains(&pool_id) == (active || left),
					"TrainerPools out of sync with pool status"
				);
			}
			ensure!(stake == pool.total_stake, "total_stake differs from the members' stakes");
		}
		for (pool_id, who, ()) in Dropped::<T>::iter() {
			ensure!(Pools::<T>::contains_key(pool_id), "a dropped account of a reaped pool");
			ensure!(!Members::<T>::contains_key(pool_id, &who), "a dropped account is a member");
		}
		for (who, pools) in TrainerPools::<T>::iter() {
			for pool_id in pools.iter() {
				ensure!(
					LeftCommitments::<T>::contains_key(&who, pool_id)
						|| Self::member_stake(*pool_id, &who).is_some(),
					"a pool in TrainerPools holds none of the account's stake"
				);
			}
		}
		for (who, pool_id, _) in LeftCommitments::<T>::iter() {
			ensure!(
				TrainerPools::<T>::get(&who).contains(&pool_id),
				"a left commitment's pool is missing from TrainerPools"
			);
		}
		let mut deposits: BTreeMap<T::AccountId, BalanceOf<T>> = BTreeMap::new();
		for (_, who, m) in Members::<T>::iter() {
			let e = deposits.entry(who).or_default();
			*e = e.saturating_add(m.deposit);
		}
		for (_, _, f) in FormerMembers::<T>::iter() {
			let e = deposits.entry(f.who).or_default();
			*e = e.saturating_add(f.deposit);
		}
		for (who, held) in deposits {
			ensure!(
				T::Currency::balance_on_hold(&Self::deposit_reason(), &who) == held,
				"member deposit hold differs from the account's records"
			);
		}
		for (creator, held) in held_by_creator {
			ensure!(
				T::Currency::balance_on_hold(&Self::budget_reason(), &creator) == held,
				"budget hold differs from the sum of the creator's pools"
			);
		}
		for (creator, held) in deposit_by_creator {
			ensure!(
				T::Currency::balance_on_hold(&Self::pool_deposit_reason(), &creator) == held,
				"pool deposit hold differs from the sum of the creator's pools"
			);
		}
		Ok(())
	}
}
