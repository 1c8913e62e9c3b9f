//! Storage migrations.

/// v0 → v1: [`crate::PoolInfo`] gains `deposit` (the creator's storage deposit) and `ended_at`,
/// and members' peer ids are indexed in [`crate::PeerIds`]. Pools created before the upgrade
/// hold no deposit (0); pools that had already ended count as ended at the upgrade block, so
/// they can be reaped once `settled_by` of it has passed.
pub mod v1 {
	use crate::{
		pallet::{BalanceOf, Config, MemberList, Members, Pallet, PeerIds, Pools},
		PoolInfo, PoolSpec,
	};
	use codec::{Decode, Encode};
	use frame_support::{
		migrations::VersionedMigration, pallet_prelude::*, traits::UncheckedOnRuntimeUpgrade,
	};
	use frame_system::pallet_prelude::BlockNumberFor;
	use sp_runtime::traits::Zero;
	use synod_primitives::{MemberIndex, PoolStatus, RoundIndex};

	/// [`PoolInfo`] as stored by storage version 0.
	#[derive(Encode, Decode)]
	pub struct PoolInfoV0<T: Config> {
		/// Creator.
		pub creator: T::AccountId,
		/// The job specification.
		pub spec: PoolSpec<T>,
		/// Lifecycle state.
		pub status: PoolStatus,
		/// The round being committed.
		pub current_round: RoundIndex,
		/// Index the next member gets.
		pub next_member_index: MemberIndex,
		/// Current number of members.
		pub member_count: u32,
		/// Sum of the members' committed stake.
		pub total_stake: BalanceOf<T>,
		/// Budget still on hold.
		pub budget_held: BalanceOf<T>,
		/// Part of the budget owed to final rounds.
		pub budget_reserved: BalanceOf<T>,
		/// Block of creation.
		pub created_at: BlockNumberFor<T>,
		/// Last round of a pool cancelled while training.
		pub cancel_after: Option<RoundIndex>,
	}

	impl<T: Config> PoolInfoV0<T> {
		fn upgrade(self, now: BlockNumberFor<T>) -> PoolInfo<T> {
			PoolInfo {
				ended_at: self.status.has_ended().then_some(now),
				creator: self.creator,
				spec: self.spec,
				status: self.status,
				current_round: self.current_round,
				next_member_index: self.next_member_index,
				member_count: self.member_count,
				total_stake: self.total_stake,
				budget_held: self.budget_held,
				budget_reserved: self.budget_reserved,
				created_at: self.created_at,
				cancel_after: self.cancel_after,
				deposit: Zero::zero(),
			}
		}
	}

	/// The unversioned step; use [`MigrateV0ToV1`].
	pub struct AddDepositAndEnd<T>(core::marker::PhantomData<T>);

	impl<T: Config> UncheckedOnRuntimeUpgrade for AddDepositAndEnd<T> {
		fn on_runtime_upgrade() -> Weight {
			let now = frame_system::Pallet::<T>::block_number();
			let mut pools = 0u64;
			let mut members = 0u64;
			Pools::<T>::translate_values::<PoolInfoV0<T>, _>(|old| {
				pools = pools.saturating_add(1);
				Some(old.upgrade(now))
			});
			for (pool_id, list) in MemberList::<T>::iter() {
				for who in list {
					members = members.saturating_add(1);
					// Peer ids were not unique before: the earliest member keeps its id.
					if let Some(m) = Members::<T>::get(pool_id, &who) {
						if !PeerIds::<T>::contains_key(pool_id, &m.peer_id) {
							PeerIds::<T>::insert(pool_id, m.peer_id, who);
						}
					}
				}
			}
			T::DbWeight::get().reads_writes(
				pools.saturating_add(members.saturating_mul(2)),
				pools.saturating_add(members),
			)
		}
	}

	/// Adds `PoolInfo::deposit` and `PoolInfo::ended_at`, indexes peer ids (storage version
	/// 0 → 1).
	pub type MigrateV0ToV1<T> = VersionedMigration<
		0,
		1,
		AddDepositAndEnd<T>,
		Pallet<T>,
		<T as frame_system::Config>::DbWeight,
	>;

	#[cfg(test)]
	mod tests {
		use super::*;
		use crate::mock::*;
		use frame_support::{assert_ok, traits::OnRuntimeUpgrade};

		fn as_v0(p: PoolInfo<Test>) -> PoolInfoV0<Test> {
			PoolInfoV0 {
				creator: p.creator,
				spec: p.spec,
				status: p.status,
				current_round: p.current_round,
				next_member_index: p.next_member_index,
				member_count: p.member_count,
				total_stake: p.total_stake,
				budget_held: p.budget_held,
				budget_reserved: p.budget_reserved,
				created_at: p.created_at,
				cancel_after: p.cancel_after,
			}
		}

		#[test]
		fn pools_survive_the_upgrade_and_ended_ones_become_reapable() {
			run_test(|| {
				// Pool 0 trains (two members), pool 1 was cancelled.
				training_pool(3, two_thirds(), &[500, 500]);
				let spec = spec(3, 2, two_thirds());
				assert_ok!(TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), spec));
				assert_ok!(TrainingPools::cancel_pool(RuntimeOrigin::signed(CREATOR), 1));
				let before: Vec<_> = (0..2).map(|i| Pools::<Test>::get(i).expect("pool")).collect();
				// Rewrite them as version 0 stored them (no deposit was held then), without
				// the peer-id index, and the pallet as version 0.
				for (id, p) in before.iter().enumerate() {
					let reason = crate::HoldReason::PoolDeposit.into();
					assert_ok!(
						<Balances as frame_support::traits::fungible::MutateHold<_>>::release(
							&reason,
							&CREATOR,
							p.deposit,
							frame_support::traits::tokens::Precision::Exact,
						)
					);
					frame_support::storage::unhashed::put_raw(
						&Pools::<Test>::hashed_key_for(id as u32),
						&as_v0(p.clone()).encode(),
					);
				}
				let _ = PeerIds::<Test>::clear_prefix(0, 10, None);
				StorageVersion::new(0).put::<Pallet<Test>>();
				assert!(Pools::<Test>::try_get(0).is_err(), "v0 bytes do not decode");
				System::set_block_number(7);
				MigrateV0ToV1::<Test>::on_runtime_upgrade();
				assert_eq!(Pallet::<Test>::on_chain_storage_version(), 1);
				let training = Pools::<Test>::get(0).expect("kept");
				assert_eq!((training.deposit, training.ended_at), (0, None));
				assert_eq!(training.member_count, before[0].member_count);
				let cancelled = Pools::<Test>::get(1).expect("kept");
				assert_eq!((cancelled.deposit, cancelled.ended_at), (0, Some(7)));
				assert_eq!(PeerIds::<Test>::get(0, peer(1)), Some(1));
				assert_eq!(PeerIds::<Test>::get(0, peer(2)), Some(2));
				// The ended pool is reaped once settled; nothing was held for it.
				let after = TrainingPools::timeline(&cancelled).settled_by(7) + 1;
				System::set_block_number(after);
				assert_ok!(TrainingPools::reap_pool(RuntimeOrigin::signed(OUTSIDER), 1));
				assert!(Pools::<Test>::get(1).is_none());
			});
		}
	}
}
