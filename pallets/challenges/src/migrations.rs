//! Storage migrations.

/// v1 → v2: juries become committees of seats drawn from the challenged round's contributors
/// ([`crate::JuryOf`] lists each juror with its snapshot stake and seats;
/// [`synod_primitives::protocol::JuryVotes`] counts seats, not stake; `Challenge::accountable`
/// is gone: every seated juror answers for its vote).
/// Undrawn open challenges are kept and draw a committee on schedule. A jury drawn under the
/// old rule has no seats to convert to: that challenge ends without a verdict
/// ([`crate::Event::ChallengeExpired`]), its bond is released, and the contribution may be
/// challenged again while its window is open. Nobody is slashed and nothing is lost.
pub mod v2 {
	use crate::{
		pallet::{BalanceOf, Challenge, Config, Event, OpenChallenges, Pallet},
		WeightInfo,
	};
	use alloc::vec::Vec;
	use codec::{Decode, Encode};
	use frame_support::{
		migrations::VersionedMigration, pallet_prelude::*, traits::UncheckedOnRuntimeUpgrade,
	};
	use frame_system::pallet_prelude::BlockNumberFor;
	use synod_primitives::{
		protocol::{JuryVotes, Verdict},
		Hash32, PoolId, RoundIndex,
	};

	/// Stake-weighted votes as storage version 1 kept them, in planck.
	#[derive(Encode, Decode, Clone, Default)]
	pub struct JuryVotesV1 {
		jury_stake: u128,
		guilty_stake: u128,
		innocent_stake: u128,
	}

	/// [`Challenge`] as stored by storage version 1.
	#[derive(Encode, Decode)]
	pub struct ChallengeV1<T: Config> {
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
		jury: BoundedVec<(T::AccountId, u128), T::JurySize>,
		accountable: BoundedVec<T::AccountId, T::JurySize>,
		votes: JuryVotesV1,
	}

	impl<T: Config> ChallengeV1<T> {
		/// The challenge without its old jury (an undrawn one is unchanged); whether it had
		/// one.
		fn upgrade(self) -> (Challenge<T>, bool) {
			let drawn = !self.jury.is_empty();
			let c = Challenge {
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
				jury: BoundedVec::new(),
				votes: JuryVotes::default(),
			};
			(c, drawn)
		}
	}

	/// The unversioned step; use [`MigrateV1ToV2`].
	pub struct Committees<T>(core::marker::PhantomData<T>);

	impl<T: Config> UncheckedOnRuntimeUpgrade for Committees<T> {
		fn on_runtime_upgrade() -> Weight {
			let mut n = 0u64;
			let mut drawn = Vec::new();
			OpenChallenges::<T>::translate::<ChallengeV1<T>, _>(|id, old| {
				n = n.saturating_add(1);
				let (c, had_jury) = old.upgrade();
				if had_jury {
					drawn.push((id, c.clone()));
				}
				Some(c)
			});
			let closed = drawn.len() as u64;
			for (id, c) in drawn {
				Pallet::<T>::release_bond(&c);
				Pallet::<T>::close(id, &c, Verdict::Expired);
				Pallet::<T>::deposit_event(Event::ChallengeExpired { challenge_id: id });
			}
			// Per closed challenge: the hold release, the votes' prefix, the open count and
			// the verdict (bounded by the weight of an expiry).
			T::DbWeight::get()
				.reads_writes(n, n)
				.saturating_add(T::WeightInfo::expire().saturating_mul(closed))
		}
	}

	/// Committees of seats (storage version 1 → 2).
	pub type MigrateV1ToV2<T> =
		VersionedMigration<1, 2, Committees<T>, Pallet<T>, <T as frame_system::Config>::DbWeight>;

	#[cfg(test)]
	mod tests {
		use super::*;
		use crate::{mock::*, Verdicts};
		use frame_support::{assert_ok, traits::OnRuntimeUpgrade};

		/// Rewrites challenge `id` as storage version 1 stored it, with `jury` as its old jury.
		fn as_v1(id: u32, jury: Vec<(AccountId, u128)>) {
			let c = OpenChallenges::<Test>::get(id).expect("open");
			let old = ChallengeV1::<Test> {
				pool_id: c.pool_id,
				round: c.round,
				accused: c.accused,
				accused_stake: c.accused_stake,
				challenger: c.challenger,
				bond: c.bond,
				payload_digest: c.payload_digest,
				opened_at: c.opened_at,
				draw_at: c.draw_at,
				expires_at: c.expires_at,
				jury: BoundedVec::truncate_from(jury),
				accountable: BoundedVec::new(),
				votes: JuryVotesV1 { jury_stake: 3_000, ..Default::default() },
			};
			frame_support::storage::unhashed::put_raw(
				&OpenChallenges::<Test>::hashed_key_for(id),
				&old.encode(),
			);
		}

		#[test]
		fn undrawn_challenges_are_kept_and_old_juries_end_without_verdict() {
			run_test(|| {
				final_round();
				jurors(&[6, 7, 1], 1_000);
				// Challenge 0 had its jury drawn (and a guilty vote) under the old rule;
				// challenge 1 is still waiting for its draw.
				assert_ok!(open_challenge(OUTSIDER, 0, 1, 3, [0xEE; 32]));
				let draw_at = OpenChallenges::<Test>::get(0).expect("open").draw_at;
				run_to_block(draw_at);
				assert_ok!(open_challenge(7, 0, 1, 3, [0xEE; 32]));
				as_v1(0, vec![(6, 1_000), (7, 1_000), (1, 1_000)]);
				as_v1(1, vec![]);
				crate::Votes::<Test>::insert(0, 6, true);
				StorageVersion::new(1).put::<Pallet<Test>>();
				let held = Balances::free_balance(OUTSIDER);
				MigrateV1ToV2::<Test>::on_runtime_upgrade();
				assert_eq!(Pallet::<Test>::on_chain_storage_version(), 2);
				// The old jury's challenge ended without a verdict: bond back, votes gone.
				assert!(OpenChallenges::<Test>::get(0).is_none());
				assert_eq!(Balances::free_balance(OUTSIDER), held + BOND);
				assert_eq!(crate::Votes::<Test>::iter_prefix(0).count(), 0);
				assert_eq!(Verdicts::<Test>::get((0, 1, 3)), Some(Verdict::Expired));
				// The undrawn one draws a committee of seats on schedule.
				let c = OpenChallenges::<Test>::get(1).expect("kept");
				run_to_block(c.draw_at);
				let c = OpenChallenges::<Test>::get(1).expect("drawn");
				let seats: u32 = c.jury.iter().map(|s| s.seats).sum();
				assert_eq!((seats, c.votes.seats), (JURY_SEATS, JURY_SEATS));
			});
		}
	}
}

/// v2 → v3: each open challenge's eligible jurors are frozen ([`crate::EligibleJurors`]) and
/// its challenger's slot recorded ([`crate::OpenBy`]), and
/// [`crate::Verdicts`] and [`crate::Equivocations`] are keyed pool first (deleted by prefix
/// when the pool is reaped). An undrawn challenge gets the challenged round's eligible
/// contributors at the upgrade (what its draw would have read); a drawn one
/// needs none. Every verdict and equivocation is moved to its new key (one read and two
/// writes each: the chain holds one per challenged contribution).
pub mod v3 {
	use crate::pallet::{
		Config, EligibleJurors, Equivocations, OpenBy, OpenChallenges, Pallet, Verdicts,
	};
	use alloc::vec::Vec;
	use frame_support::{
		migrations::VersionedMigration, pallet_prelude::*, traits::UncheckedOnRuntimeUpgrade,
	};
	use synod_primitives::{protocol::Verdict, CheckpointsInspect, Hash32, PoolId, RoundIndex};

	/// The storage version 2 layouts: keyed by the blake2-128 of the whole tuple.
	pub(crate) mod old {
		use super::*;

		/// [`Verdicts`] as storage version 2 kept it.
		#[frame_support::storage_alias]
		pub type Verdicts<T: Config> = StorageMap<
			Pallet<T>,
			Blake2_128Concat,
			(PoolId, RoundIndex, <T as frame_system::Config>::AccountId),
			Verdict,
		>;

		/// [`Equivocations`] as storage version 2 kept it.
		#[frame_support::storage_alias]
		pub type Equivocations<T: Config> = StorageMap<
			Pallet<T>,
			Blake2_128Concat,
			(PoolId, RoundIndex, <T as frame_system::Config>::AccountId),
			(Hash32, Hash32),
		>;
	}

	/// The unversioned step; use [`MigrateV2ToV3`].
	pub struct FreezeEligible<T>(core::marker::PhantomData<T>);

	impl<T: Config> UncheckedOnRuntimeUpgrade for FreezeEligible<T> {
		fn on_runtime_upgrade() -> Weight {
			// Old and new keys share the storage prefix: read everything, then write.
			let verdicts: Vec<_> = old::Verdicts::<T>::drain().collect();
			let equivocations: Vec<_> = old::Equivocations::<T>::drain().collect();
			let moved = (verdicts.len() as u64).saturating_add(equivocations.len() as u64);
			for (key, v) in verdicts {
				Verdicts::<T>::insert(key, v);
			}
			for (key, e) in equivocations {
				Equivocations::<T>::insert(key, e);
			}
			let (mut reads, mut writes) = (moved.saturating_add(1), moved.saturating_mul(2));
			for (id, c) in OpenChallenges::<T>::iter() {
				reads = reads.saturating_add(1);
				OpenBy::<T>::mutate((c.pool_id, c.round, &c.accused, &c.challenger), |n| {
					*n = n.saturating_add(1)
				});
				writes = writes.saturating_add(1);
				if !c.jury.is_empty() {
					continue;
				}
				let contributors = T::Checkpoints::final_checkpoint(c.pool_id, c.round)
					.map(|f| f.contributors)
					.unwrap_or_default();
				EligibleJurors::<T>::insert(
					id,
					Pallet::<T>::eligible_among(c.pool_id, c.round, &contributors),
				);
				reads = reads.saturating_add(1);
				writes = writes.saturating_add(1);
			}
			T::DbWeight::get().reads_writes(reads, writes)
		}
	}

	/// Eligible jurors frozen at opening (storage version 2 → 3).
	pub type MigrateV2ToV3<T> = VersionedMigration<
		2,
		3,
		FreezeEligible<T>,
		Pallet<T>,
		<T as frame_system::Config>::DbWeight,
	>;

	#[cfg(test)]
	mod tests {
		use super::*;
		use crate::mock::*;
		use frame_support::{assert_ok, traits::OnRuntimeUpgrade};

		#[test]
		fn undrawn_challenges_get_the_eligible_contributors() {
			run_test(|| {
				final_round();
				jurors(&[6, 7, 1], 1_000);
				// Storage version 2 let one challenger hold two open challenges against one
				// contribution and kept neither eligible sets nor slots.
				let slot = (0u32, 1u32, 3u64, OUTSIDER);
				assert_ok!(open_challenge(OUTSIDER, 0, 1, 3, [0xEE; 32]));
				let drawn_at = OpenChallenges::<Test>::get(0).expect("open").draw_at;
				run_to_block(drawn_at);
				OpenBy::<Test>::remove(slot);
				assert_ok!(Challenges::unregister_juror(RuntimeOrigin::signed(1)));
				assert_ok!(open_challenge(OUTSIDER, 0, 1, 3, [0xEE; 32]));
				OpenBy::<Test>::remove(slot);
				EligibleJurors::<Test>::remove(0);
				EligibleJurors::<Test>::remove(1);
				StorageVersion::new(2).put::<Pallet<Test>>();
				MigrateV2ToV3::<Test>::on_runtime_upgrade();
				assert_eq!(Pallet::<Test>::on_chain_storage_version(), 3);
				// Both of the challenger's open challenges are counted in its slot.
				assert_eq!(OpenBy::<Test>::get(slot), 2);
				// Drawn: nothing to freeze. Undrawn: the contributors that did not opt out.
				assert!(EligibleJurors::<Test>::get(0).is_none());
				let eligible = EligibleJurors::<Test>::get(1).expect("frozen").into_inner();
				let contributors: Vec<_> = Checkpoints::final_checkpoint(0, 1)
					.expect("final")
					.contributors
					.into_iter()
					.map(|p| p.who)
					.filter(|w| *w != 1)
					.collect();
				assert!(!eligible.is_empty());
				assert_eq!(eligible, contributors);
			});
		}

		#[test]
		fn verdicts_and_equivocations_move_to_keys_by_pool() {
			run_test(|| {
				let key = (0u32, 1u32, 3u64);
				old::Verdicts::<Test>::insert(key, Verdict::Innocent);
				old::Equivocations::<Test>::insert(key, ([1; 32], [2; 32]));
				StorageVersion::new(2).put::<Pallet<Test>>();
				MigrateV2ToV3::<Test>::on_runtime_upgrade();
				assert_eq!(Verdicts::<Test>::get(key), Some(Verdict::Innocent));
				assert_eq!(Equivocations::<Test>::get(key), Some(([1; 32], [2; 32])));
				assert!(!old::Verdicts::<Test>::contains_key(key));
				assert!(!old::Equivocations::<Test>::contains_key(key));
				assert_eq!(Verdicts::<Test>::iter_prefix((0,)).count(), 1);
			});
		}
	}
}

/// v3 → v4: every contributor is a juror by default. The opt-in list `Jurors` is deleted, and
/// every bonded account that `Bonded` lists and that was not on it is opted out
/// ([`crate::OptedOut`]): nobody's jury duty changes at the upgrade, so a trainer that does
/// not judge (one started without jury duty) is never seated and slashed as a no-show. A
/// trainer opts in when it starts (`synod-trainer run`, unless `--no-jury`).
pub mod v4 {
	use crate::pallet::{Config, OptedOut, Pallet};
	use alloc::vec::Vec;
	use frame_support::{
		migrations::VersionedMigration, pallet_prelude::*, traits::UncheckedOnRuntimeUpgrade,
	};

	/// The storage version 3 layout.
	pub(crate) mod old {
		use super::*;

		/// The opt-in list (at most 256 accounts), deleted by [`MigrateV3ToV4`].
		#[frame_support::storage_alias]
		pub type Jurors<T: Config> = StorageValue<
			Pallet<T>,
			BoundedVec<<T as frame_system::Config>::AccountId, ConstU32<256>>,
			ValueQuery,
		>;
	}

	/// The unversioned step; use [`MigrateV3ToV4`]. `Bonded` lists the bonded accounts (the
	/// runtime: `TrainerStaking::Ledger`'s keys), read once.
	pub struct JurorsByDefault<T, Bonded>(core::marker::PhantomData<(T, Bonded)>);

	impl<T: Config, Bonded: Get<Vec<T::AccountId>>> UncheckedOnRuntimeUpgrade
		for JurorsByDefault<T, Bonded>
	{
		fn on_runtime_upgrade() -> Weight {
			let registered = old::Jurors::<T>::take();
			let bonded = Bonded::get();
			let mut writes = 1u64;
			for who in bonded.iter().filter(|w| !registered.contains(w)) {
				OptedOut::<T>::insert(who, ());
				writes = writes.saturating_add(1);
			}
			T::DbWeight::get().reads_writes((bonded.len() as u64).saturating_add(1), writes)
		}
	}

	/// Jurors by default (storage version 3 → 4), the registered jurors' and the other bonded
	/// accounts' duty unchanged.
	pub type MigrateV3ToV4<T, Bonded> = VersionedMigration<
		3,
		4,
		JurorsByDefault<T, Bonded>,
		Pallet<T>,
		<T as frame_system::Config>::DbWeight,
	>;

	#[cfg(test)]
	mod tests {
		use super::*;
		use crate::mock::*;
		use frame_support::traits::OnRuntimeUpgrade;

		frame_support::parameter_types! {
			pub Bonded: Vec<AccountId> = vec![6, 7, 8];
		}

		#[test]
		fn registered_jurors_stay_jurors_and_other_bonded_accounts_are_opted_out() {
			run_test(|| {
				old::Jurors::<Test>::put(BoundedVec::truncate_from(vec![6u64, 7]));
				StorageVersion::new(3).put::<Pallet<Test>>();
				MigrateV3ToV4::<Test, Bonded>::on_runtime_upgrade();
				assert_eq!(Pallet::<Test>::on_chain_storage_version(), 4);
				assert!(!old::Jurors::<Test>::exists());
				let opted_out: Vec<AccountId> = OptedOut::<Test>::iter_keys().collect();
				assert_eq!(opted_out, [8]);
			});
		}
	}
}

/// v4 → v5: appeals. A round that opened before this upgrade had its stake's slashable window
/// and its settlement fixed without an appeal's blocks, so its challenges are judged as before
/// (a verdict executes at once): [`crate::AppealsFrom`] is set to the upgrade's block. The
/// committee bound of [`crate::JuryOf`] grows to `AppealJurySize` (same encoding). Nothing is
/// rewritten.
pub mod v5 {
	use crate::pallet::{AppealsFrom, Config, Pallet};
	use frame_support::{
		migrations::VersionedMigration, pallet_prelude::*, traits::UncheckedOnRuntimeUpgrade,
	};
	use sp_runtime::traits::One;

	/// The unversioned step; use [`MigrateV4ToV5`].
	pub struct AppealsFromNow<T>(core::marker::PhantomData<T>);

	impl<T: Config> UncheckedOnRuntimeUpgrade for AppealsFromNow<T> {
		fn on_runtime_upgrade() -> Weight {
			// At least block 1: 0 means "every round" (a chain with appeals from genesis).
			let now = frame_system::Pallet::<T>::block_number();
			AppealsFrom::<T>::put(now.max(One::one()));
			T::DbWeight::get().reads_writes(1, 1)
		}
	}

	/// Appeals for rounds opened from the upgrade's block on (storage version 4 → 5).
	pub type MigrateV4ToV5<T> = VersionedMigration<
		4,
		5,
		AppealsFromNow<T>,
		Pallet<T>,
		<T as frame_system::Config>::DbWeight,
	>;

	#[cfg(test)]
	mod tests {
		use super::*;
		use crate::mock::*;
		use frame_support::{assert_ok, traits::OnRuntimeUpgrade};

		#[test]
		fn rounds_opened_before_the_upgrade_are_judged_without_appeals() {
			run_test(|| {
				AppealPeriod::set(&6);
				final_round();
				run_to_block(3);
				StorageVersion::new(4).put::<Pallet<Test>>();
				MigrateV4ToV5::<Test>::on_runtime_upgrade();
				assert_eq!(Pallet::<Test>::on_chain_storage_version(), 5);
				assert_eq!(AppealsFrom::<Test>::get(), 3);
				// Round 1 opened before the upgrade: no appeal side, its verdict executes at once.
				assert_ok!(open_challenge(2, 0, 1, 1, [0x44; 32]));
				assert!(!crate::Appeals::<Test>::contains_key(0));
			});
		}
	}
}

/// v5 → v6: closing a challenge frees its slots in the schedule. [`crate::ScheduledAt`] is
/// filled from [`crate::Expiries`] for the open challenges, and the slots that closed
/// challenges still held in blocks to come are freed. Reads every entry of the schedule (at
/// most [`crate::MAX_SCHEDULED_PER_BLOCK`] per block, over the blocks open challenges still
/// need).
pub mod v6 {
	use crate::pallet::{Config, Expiries, OpenChallenges, Pallet, ScheduledAt};
	use alloc::vec::Vec;
	use frame_support::{
		migrations::VersionedMigration, pallet_prelude::*, traits::UncheckedOnRuntimeUpgrade,
	};

	/// The unversioned step; use [`MigrateV5ToV6`].
	pub struct FreeClosedSlots<T>(core::marker::PhantomData<T>);

	impl<T: Config> UncheckedOnRuntimeUpgrade for FreeClosedSlots<T> {
		fn on_runtime_upgrade() -> Weight {
			let now = frame_system::Pallet::<T>::block_number();
			let (mut reads, mut writes) = (0u64, 0u64);
			let all: Vec<_> = Expiries::<T>::iter().collect();
			reads = reads.saturating_add(all.len() as u64);
			for (at, mut ids) in all.into_iter().filter(|(at, _)| *at > now) {
				let before = ids.len();
				ids.retain(|id| OpenChallenges::<T>::contains_key(id));
				for id in ids.iter() {
					ScheduledAt::<T>::mutate(id, |s| {
						let _ = s.try_push(at);
					});
				}
				// Each id's `OpenChallenges` check, and each kept one's `ScheduledAt` entry.
				reads = reads.saturating_add(before as u64).saturating_add(ids.len() as u64);
				writes = writes.saturating_add(ids.len() as u64);
				if ids.len() != before {
					writes = writes.saturating_add(1);
					if ids.is_empty() {
						Expiries::<T>::remove(at);
					} else {
						Expiries::<T>::insert(at, ids);
					}
				}
			}
			T::DbWeight::get().reads_writes(reads, writes)
		}
	}

	/// Closed challenges free their slots (storage version 5 → 6).
	pub type MigrateV5ToV6<T> = VersionedMigration<
		5,
		6,
		FreeClosedSlots<T>,
		Pallet<T>,
		<T as frame_system::Config>::DbWeight,
	>;

	#[cfg(test)]
	mod tests {
		use super::*;
		use crate::mock::*;
		use frame_support::{assert_ok, traits::OnRuntimeUpgrade};

		#[test]
		fn open_challenges_record_their_slots_and_closed_ones_free_theirs() {
			run_test(|| {
				final_round();
				jurors(&[3, 4, 5], 1_000);
				assert_ok!(open_challenge(2, 0, 1, 1, [0x44; 32]));
				let c = OpenChallenges::<Test>::get(0).expect("open");
				let slots = ScheduledAt::<Test>::take(0);
				assert_eq!(slots.len(), 2, "its draw and its expiry");
				// A challenge closed under the old rule, still holding a later slot.
				Expiries::<Test>::mutate(c.expires_at, |e| e.try_push(7).expect("room"));
				StorageVersion::new(5).put::<Pallet<Test>>();
				MigrateV5ToV6::<Test>::on_runtime_upgrade();
				assert_eq!(Pallet::<Test>::on_chain_storage_version(), 6);
				let mut rebuilt = ScheduledAt::<Test>::get(0).into_inner();
				rebuilt.sort();
				assert_eq!(rebuilt, slots.into_inner(), "rebuilt from the schedule");
				assert!(!Expiries::<Test>::get(c.expires_at).contains(&7));
				assert!(Expiries::<Test>::get(c.expires_at).contains(&0));
			});
		}
	}
}
