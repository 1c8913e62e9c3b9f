//! Storage migrations.

/// v0 → v1: [`crate::Challenge`] gains `accountable` (the drawn jurors that contributed to the
/// challenged round, the only ones slashed for not voting). Open challenges are kept (their
/// bonds stay held and come back at their verdict or expiry); one drawn before the upgrade gets
/// an empty list, and its expiry finds its accountable jurors from the round's contributors.
pub mod v1 {
	use crate::pallet::{BalanceOf, Challenge, Config, JuryOf, OpenChallenges, Pallet};
	use codec::{Decode, Encode};
	use frame_support::{
		migrations::VersionedMigration, pallet_prelude::*, traits::UncheckedOnRuntimeUpgrade,
	};
	use frame_system::pallet_prelude::BlockNumberFor;
	use synod_primitives::{protocol::JuryVotes, Hash32, PoolId, RoundIndex};

	/// [`Challenge`] as stored by storage version 0.
	#[derive(Encode, Decode)]
	pub struct ChallengeV0<T: Config> {
		pool_id: PoolId,
		round: RoundIndex,
		accused: T::AccountId,
		accused_stake: u128,
		challenger: T::AccountId,
		bond: BalanceOf<T>,
		payload_digest: Hash32,
		opened_at: BlockNumberFor<T>,
		draw_at: BlockNumberFor<T>,
		expires_at: BlockNumberFor<T>,
		jury: JuryOf<T>,
		votes: JuryVotes,
	}

	impl<T: Config> ChallengeV0<T> {
		fn upgrade(self) -> Challenge<T> {
			Challenge {
				pool_id: self.pool_id,
				round: self.round,
				accused: self.accused,
				accused_stake: self.accused_stake,
				challenger: self.challenger,
				bond: self.bond,
				payload_digest: self.payload_digest,
				opened_at: self.opened_at,
				draw_at: self.draw_at,
				expires_at: self.expires_at,
				jury: self.jury,
				accountable: BoundedVec::new(),
				votes: self.votes,
			}
		}
	}

	/// The unversioned step; use [`MigrateV0ToV1`].
	pub struct AddAccountable<T>(core::marker::PhantomData<T>);

	impl<T: Config> UncheckedOnRuntimeUpgrade for AddAccountable<T> {
		fn on_runtime_upgrade() -> Weight {
			let mut n = 0u64;
			OpenChallenges::<T>::translate_values::<ChallengeV0<T>, _>(|old| {
				n = n.saturating_add(1);
				Some(old.upgrade())
			});
			T::DbWeight::get().reads_writes(n, n)
		}
	}

	/// Adds [`Challenge::accountable`] to every open challenge (storage version 0 → 1).
	pub type MigrateV0ToV1<T> = VersionedMigration<
		0,
		1,
		AddAccountable<T>,
		Pallet<T>,
		<T as frame_system::Config>::DbWeight,
	>;

	#[cfg(test)]
	mod tests {
		use super::*;
		use crate::mock::*;
		use frame_support::{assert_ok, traits::OnRuntimeUpgrade};

		#[test]
		fn open_challenges_survive_the_upgrade() {
			run_test(|| {
				// Jurors: outsiders 6 and 7, and contributor 1.
				final_round();
				jurors(&[6, 7, 1], 1_000);
				assert_ok!(open_challenge(OUTSIDER, 0, 1, 3, [0xEE; 32]));
				let now = OpenChallenges::<Test>::get(0).expect("open");
				run_to_block(now.draw_at);
				let drawn = OpenChallenges::<Test>::get(0).expect("drawn");
				// Rewrite it as version 0 stored it, and the pallet as version 0.
				let old = ChallengeV0::<Test> {
					pool_id: drawn.pool_id,
					round: drawn.round,
					accused: drawn.accused,
					accused_stake: drawn.accused_stake,
					challenger: drawn.challenger,
					bond: drawn.bond,
					payload_digest: drawn.payload_digest,
					opened_at: drawn.opened_at,
					draw_at: drawn.draw_at,
					expires_at: drawn.expires_at,
					jury: drawn.jury.clone(),
					votes: drawn.votes,
				};
				frame_support::storage::unhashed::put_raw(
					&OpenChallenges::<Test>::hashed_key_for(0),
					&old.encode(),
				);
				StorageVersion::new(0).put::<Pallet<Test>>();
				assert!(OpenChallenges::<Test>::try_get(0).is_err(), "v0 bytes do not decode");
				MigrateV0ToV1::<Test>::on_runtime_upgrade();
				let migrated = OpenChallenges::<Test>::get(0).expect("kept");
				assert_eq!(migrated.jury, drawn.jury);
				assert!(migrated.accountable.is_empty());
				assert_eq!(Pallet::<Test>::on_chain_storage_version(), 1);
				// It still resolves: the bond comes back at expiry; the outsiders keep their
				// stake, and the contributor (found from the round's contributors, the record
				// being empty) loses 10 % of its drawn stake for not voting.
				run_to_block(migrated.expires_at - 1);
				let stake =
					|j| <TrainerStaking as synod_primitives::TrainerStake<_>>::active_stake(&j);
				let before = stake(1);
				run_to_block(migrated.expires_at);
				assert!(OpenChallenges::<Test>::get(0).is_none());
				assert_eq!(Balances::free_balance(OUTSIDER), 10_000);
				assert_eq!((stake(6), stake(7)), (1_000, 1_000));
				let drawn = migrated.jury.iter().find(|(j, _)| *j == 1).map(|(_, s)| *s);
				assert_eq!(drawn, Some(2_000), "the jury is all three registered jurors");
				assert_eq!(stake(1), before - 200);
			});
		}
	}
}
