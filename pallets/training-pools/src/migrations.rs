//! Storage migrations, in order: the runtime runs every step from the stored version on.

/// v0 → v1: `PoolInfo` gains `deposit` (the creator's storage deposit) and `ended_at`,
/// and members' peer ids are indexed in [`crate::PeerIds`]. Pools created before the upgrade
/// hold no deposit (0); pools that had already ended count as ended at the upgrade block, so
/// they can be reaped once `settled_by` of it has passed.
pub mod v1 {
	use super::v2::{PoolInfoV1, PoolSpecV1};
	use crate::pallet::{BalanceOf, Config, MemberList, Members, Pallet, PeerIds, Pools};
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
		/// The job specification (as version 1 stores it).
		pub spec: PoolSpecV1<T>,
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
		fn upgrade(self, now: BlockNumberFor<T>) -> PoolInfoV1<T> {
			PoolInfoV1 {
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
			// Written in version 1's layout (not today's `PoolInfo`): `v2` upgrades it next.
			let keys: alloc::vec::Vec<_> = Pools::<T>::iter_keys().collect();
			for id in keys {
				let key = Pools::<T>::hashed_key_for(id);
				if let Some(old) = frame_support::storage::unhashed::get::<PoolInfoV0<T>>(&key) {
					pools = pools.saturating_add(1);
					frame_support::storage::unhashed::put(&key, &old.upgrade(now));
				}
			}
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
		use crate::{migrations::v2, mock::*, PoolInfo};
		use frame_support::{assert_ok, traits::OnRuntimeUpgrade};

		fn as_v0(p: PoolInfo<Test>) -> PoolInfoV0<Test> {
			PoolInfoV0 {
				creator: p.creator,
				spec: v2::spec_v1(p.spec),
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
				// The runtime runs both steps in order (`runtime/src/lib.rs`, `Migrations`).
				MigrateV0ToV1::<Test>::on_runtime_upgrade();
				assert_eq!(Pallet::<Test>::on_chain_storage_version(), 1);
				v2::MigrateV1ToV2::<Test>::on_runtime_upgrade();
				assert_eq!(Pallet::<Test>::on_chain_storage_version(), 2);
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

/// v1 → v2: [`crate::PoolSpec`] gains `min_round_length` and `allowed_trainers`. Pools created
/// before the upgrade keep their behaviour: no minimum round length (0: commits at once and
/// ahead of a round), and anyone may join (an empty allow-list).
pub mod v2 {
	use crate::{
		pallet::{BalanceOf, Config, Pallet, Pools},
		PoolInfo, PoolSpec,
	};
	use codec::{Decode, Encode};
	use frame_support::{
		migrations::VersionedMigration, pallet_prelude::*, traits::UncheckedOnRuntimeUpgrade,
	};
	use frame_system::pallet_prelude::BlockNumberFor;
	use sp_runtime::{traits::Zero, Perbill};
	use synod_primitives::{Hash32, MemberIndex, PoolStatus, RoundIndex};

	/// [`PoolSpec`] as stored by storage version 1 (field docs on [`PoolSpec`]).
	#[derive(Encode, Decode)]
	#[allow(missing_docs, reason = "the fields of `PoolSpec`, documented there")]
	pub struct PoolSpecV1<T: Config> {
		pub model_config_hash: Hash32,
		pub initial_weights_hash: Hash32,
		pub dataset_id: BoundedVec<u8, T::MaxDatasetIdLen>,
		pub dataset_hash: Hash32,
		pub inner_steps: u32,
		pub rounds: RoundIndex,
		pub min_trainers: u32,
		pub max_trainers: u32,
		pub min_stake: BalanceOf<T>,
		pub reward_per_round: BalanceOf<T>,
		pub quorum: Perbill,
		pub round_timeout: BlockNumberFor<T>,
		pub challenge_window: BlockNumberFor<T>,
	}

	/// [`PoolInfo`] as stored by storage version 1 (field docs on [`PoolInfo`]).
	#[derive(Encode, Decode)]
	#[allow(missing_docs, reason = "the fields of `PoolInfo`, documented there")]
	pub struct PoolInfoV1<T: Config> {
		pub creator: T::AccountId,
		pub spec: PoolSpecV1<T>,
		pub status: PoolStatus,
		pub current_round: RoundIndex,
		pub next_member_index: MemberIndex,
		pub member_count: u32,
		pub total_stake: BalanceOf<T>,
		pub budget_held: BalanceOf<T>,
		pub budget_reserved: BalanceOf<T>,
		pub created_at: BlockNumberFor<T>,
		pub cancel_after: Option<RoundIndex>,
		pub deposit: BalanceOf<T>,
		pub ended_at: Option<BlockNumberFor<T>>,
	}

	/// `spec` as version 1 stored it (its new fields dropped).
	#[cfg(test)]
	pub(crate) fn spec_v1<T: Config>(s: PoolSpec<T>) -> PoolSpecV1<T> {
		PoolSpecV1 {
			model_config_hash: s.model_config_hash,
			initial_weights_hash: s.initial_weights_hash,
			dataset_id: s.dataset_id,
			dataset_hash: s.dataset_hash,
			inner_steps: s.inner_steps,
			rounds: s.rounds,
			min_trainers: s.min_trainers,
			max_trainers: s.max_trainers,
			min_stake: s.min_stake,
			reward_per_round: s.reward_per_round,
			quorum: s.quorum,
			round_timeout: s.round_timeout,
			challenge_window: s.challenge_window,
		}
	}

	impl<T: Config> PoolInfoV1<T> {
		fn upgrade(self) -> PoolInfo<T> {
			let s = self.spec;
			PoolInfo {
				creator: self.creator,
				spec: PoolSpec {
					model_config_hash: s.model_config_hash,
					initial_weights_hash: s.initial_weights_hash,
					dataset_id: s.dataset_id,
					dataset_hash: s.dataset_hash,
					inner_steps: s.inner_steps,
					rounds: s.rounds,
					min_trainers: s.min_trainers,
					max_trainers: s.max_trainers,
					min_stake: s.min_stake,
					reward_per_round: s.reward_per_round,
					quorum: s.quorum,
					round_timeout: s.round_timeout,
					challenge_window: s.challenge_window,
					min_round_length: Zero::zero(),
					allowed_trainers: BoundedVec::new(),
				},
				status: self.status,
				current_round: self.current_round,
				next_member_index: self.next_member_index,
				member_count: self.member_count,
				total_stake: self.total_stake,
				budget_held: self.budget_held,
				budget_reserved: self.budget_reserved,
				created_at: self.created_at,
				cancel_after: self.cancel_after,
				deposit: self.deposit,
				ended_at: self.ended_at,
			}
		}
	}

	/// The unversioned step; use [`MigrateV1ToV2`].
	pub struct AddRoundLengthAndAllowList<T>(core::marker::PhantomData<T>);

	impl<T: Config> UncheckedOnRuntimeUpgrade for AddRoundLengthAndAllowList<T> {
		fn on_runtime_upgrade() -> Weight {
			let mut pools = 0u64;
			Pools::<T>::translate_values::<PoolInfoV1<T>, _>(|old| {
				pools = pools.saturating_add(1);
				Some(old.upgrade())
			});
			T::DbWeight::get().reads_writes(pools, pools)
		}
	}

	/// Adds `PoolSpec::min_round_length` (0) and `PoolSpec::allowed_trainers` (empty) to every
	/// pool (storage version 1 → 2).
	pub type MigrateV1ToV2<T> = VersionedMigration<
		1,
		2,
		AddRoundLengthAndAllowList<T>,
		Pallet<T>,
		<T as frame_system::Config>::DbWeight,
	>;

	#[cfg(test)]
	mod tests {
		use super::*;
		use crate::mock::*;
		use frame_support::{assert_ok, traits::OnRuntimeUpgrade};

		fn as_v1(p: PoolInfo<Test>) -> PoolInfoV1<Test> {
			PoolInfoV1 {
				creator: p.creator,
				spec: spec_v1(p.spec),
				status: p.status,
				current_round: p.current_round,
				next_member_index: p.next_member_index,
				member_count: p.member_count,
				total_stake: p.total_stake,
				budget_held: p.budget_held,
				budget_reserved: p.budget_reserved,
				created_at: p.created_at,
				cancel_after: p.cancel_after,
				deposit: p.deposit,
				ended_at: p.ended_at,
			}
		}

		#[test]
		fn pools_survive_the_upgrade_open_to_all_and_without_a_round_length() {
			run_test(|| {
				// Pool 0 trains (two members), pool 1 was cancelled.
				training_pool(3, two_thirds(), &[500, 500]);
				let spec = spec(3, 2, two_thirds());
				assert_ok!(TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), spec));
				assert_ok!(TrainingPools::cancel_pool(RuntimeOrigin::signed(CREATOR), 1));
				let before: Vec<_> = (0..2).map(|i| Pools::<Test>::get(i).expect("pool")).collect();
				for (id, p) in before.iter().enumerate() {
					frame_support::storage::unhashed::put_raw(
						&Pools::<Test>::hashed_key_for(id as u32),
						&as_v1(p.clone()).encode(),
					);
				}
				StorageVersion::new(1).put::<Pallet<Test>>();
				assert!(Pools::<Test>::try_get(0).is_err(), "v1 bytes do not decode");
				MigrateV1ToV2::<Test>::on_runtime_upgrade();
				assert_eq!(Pallet::<Test>::on_chain_storage_version(), 2);
				for (id, old) in before.into_iter().enumerate() {
					let mut expected = old;
					expected.spec.min_round_length = 0;
					expected.spec.allowed_trainers = BoundedVec::new();
					assert_eq!(Pools::<Test>::get(id as u32), Some(expected));
				}
				// A second run changes nothing.
				MigrateV1ToV2::<Test>::on_runtime_upgrade();
				assert!(Pools::<Test>::get(0).is_some());
			});
		}
	}
}
