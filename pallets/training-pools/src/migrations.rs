//! Storage migrations.

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
			let s = p.spec;
			PoolInfoV1 {
				creator: p.creator,
				spec: PoolSpecV1 {
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
				},
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
