//! Pool squatting: a party that joins a new pool first with the quorum's stake is the whole
//! snapshot of every round. If a round could be final as soon as it opened, it would commit
//! rounds 1..N within a few blocks (committing the next round ahead of time, each finality
//! opening a round its stored commit finalizes at once) and claim the whole budget after
//! settlement, before anyone else could join or the creator could cancel. A pool's
//! `min_round_length` refuses every commit within a round's first blocks (and ahead of it), so a
//! squatter finalizes at most one round per `min_round_length` blocks, no faster than honest
//! members train; a creator that wants no strangers lists the accounts that may join.

use crate::mock::*;
use frame_support::{assert_noop, assert_ok, BoundedVec};
use pallet_checkpoints::{Error, FinalCheckpoints};

/// Blocks a round of the paced pool accepts no commit in.
const LENGTH: u64 = 5;

/// A 20-round pool of one trainer whose rounds accept commits `LENGTH` blocks after opening.
fn paced_pool() -> u32 {
	let pool = pallet_training_pools::NextPoolId::<Test>::get();
	let spec = edited(spec(20, 1, two_thirds()), |s| s.terms.min_round_length = LENGTH);
	assert_ok!(TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), spec));
	pool
}

#[test]
fn a_pool_squatter_finalizes_no_round_faster_than_its_minimum_length() {
	run_test(|| {
		let pool = paced_pool();
		// The squatter joins first and alone holds the quorum: round 1 opens at once.
		bond_and_join(1, pool, 1_000);
		let opened = System::block_number();
		// Its best play: every block, commit the open round and the next one ahead, as often as
		// the chain takes them.
		let blocks = 50;
		let (mut refused, mut finals) = (0u32, 0u32);
		for n in opened..opened + blocks {
			run_to_block(n);
			for _ in 0..20 {
				let round = pallet_training_pools::Pools::<Test>::get(pool)
					.map(|p| p.current_round)
					.unwrap_or_default();
				let ahead = commit_to(pool, 1, round + 1, 9, &[0]);
				assert_eq!(ahead, Err(Error::<Test>::InnerPhaseNotOver.into()), "no commit ahead");
				match commit_to(pool, 1, round, 9, &[0]) {
					Ok(()) => finals += 1,
					Err(e) => {
						assert_eq!(e, Error::<Test>::InnerPhaseNotOver.into(), "block {n}");
						refused += 1;
						break;
					},
				}
			}
		}
		let final_rounds =
			(1..=20).filter(|r| FinalCheckpoints::<Test>::contains_key(pool, r)).count();
		println!(
			"{{\"blocks\":{blocks},\"min_round_length\":{LENGTH},\"final_rounds\":{final_rounds},\"refused_commits\":{refused}}}"
		);
		assert_eq!(final_rounds as u32, finals);
		// One round per `LENGTH` blocks at most: the inner phase's pace, not the block's.
		assert!(final_rounds as u64 <= blocks / LENGTH, "{final_rounds} rounds in {blocks} blocks");
		assert!(final_rounds >= 1, "an honest-paced member still finalizes");
		// Consecutive finalities are `LENGTH` blocks apart.
		let at: Vec<u64> = (1..=final_rounds as u32)
			.filter_map(|r| FinalCheckpoints::<Test>::get(pool, r).map(|f| f.finalized_at))
			.collect();
		assert!(at.windows(2).all(|w| w[1] - w[0] >= LENGTH), "{at:?}");
	});
}

#[test]
fn a_commit_in_the_rounds_inner_phase_is_refused_and_accepted_once_it_is_over() {
	run_test(|| {
		let pool = paced_pool();
		bond_and_join(1, pool, 1_000);
		let opened = System::block_number();
		run_to_block(opened + LENGTH - 1);
		assert_noop!(commit_to(pool, 1, 1, 9, &[0]), Error::<Test>::InnerPhaseNotOver);
		// The transaction pool's check refuses it too (with the error's index), so an early
		// commit takes no block space; so is a commit ahead.
		let check = |round| Checkpoints::check_commit(1, pool, round, [9; 32], included(&[0]));
		assert_noop!(check(1), Error::<Test>::InnerPhaseNotOver);
		assert_noop!(check(2), Error::<Test>::InnerPhaseNotOver);
		run_to_block(opened + LENGTH);
		assert_ok!(commit_to(pool, 1, 1, 9, &[0]));
		assert_eq!(
			FinalCheckpoints::<Test>::get(pool, 1).map(|f| f.finalized_at),
			Some(opened + LENGTH)
		);
	});
}

#[test]
fn a_squatter_cannot_join_a_pool_restricted_to_allowed_trainers() {
	run_test(|| {
		let pool = pallet_training_pools::NextPoolId::<Test>::get();
		let spec = edited(spec(3, 3, two_thirds()), |s| {
			s.terms.allowed_trainers = BoundedVec::truncate_from(vec![1, 2, 3])
		});
		assert_ok!(TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), spec));
		// The squatter has more stake than the whole allowed set, and comes first.
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(8), 5_000));
		assert_noop!(join(8, pool, 5_000), pallet_training_pools::Error::<Test>::NotAllowedToJoin);
		for who in 1..=3 {
			bond_and_join(who, pool, 1_000);
		}
		let info = pallet_training_pools::Pools::<Test>::get(pool).expect("pool");
		assert_eq!((info.status, info.member_count), (synod_primitives::PoolStatus::Training, 3));
	});
}

/// The list can change while the pool lives: an allowed trainer that never shows up (or turns
/// out hostile) is replaced by its creator alone, and the new list decides later joins.
#[test]
fn a_creator_replaces_its_allow_list_and_only_the_new_accounts_join() {
	use pallet_training_pools::{Error as PoolError, Event as PoolEvent};
	run_test(|| {
		let pool = pallet_training_pools::NextPoolId::<Test>::get();
		let spec = edited(spec(3, 2, two_thirds()), |s| {
			s.terms.allowed_trainers = BoundedVec::truncate_from(vec![1, 2, 3])
		});
		assert_ok!(TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), spec));
		bond_and_join(1, pool, 1_000);
		let set = |who, list: Vec<AccountId>| {
			TrainingPools::set_allowed_trainers(
				RuntimeOrigin::signed(who),
				pool,
				BoundedVec::truncate_from(list),
			)
		};
		// Only the creator may change it, never to a list that cannot start the pool.
		assert_noop!(set(8, vec![8, 9]), PoolError::<Test>::NotCreator);
		assert_noop!(set(CREATOR, vec![4, 4]), PoolError::<Test>::InvalidAllowedTrainers);
		assert_noop!(set(CREATOR, vec![4]), PoolError::<Test>::InvalidAllowedTrainers);
		assert_ok!(set(CREATOR, vec![1, 4]));
		System::assert_last_event(
			PoolEvent::<Test>::AllowedTrainersSet { pool_id: pool, allowed: 2 }.into(),
		);
		// Trainer 2 was dropped from the list, trainer 4 replaces it; member 1 stays.
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(2), 1_000));
		assert_noop!(join(2, pool, 1_000), PoolError::<Test>::NotAllowedToJoin);
		bond_and_join(4, pool, 1_000);
		let info = pallet_training_pools::Pools::<Test>::get(pool).expect("pool");
		assert_eq!((info.status, info.member_count), (synod_primitives::PoolStatus::Training, 2));
		// An empty list opens the pool to anyone; an ended pool's list is fixed.
		assert_ok!(set(CREATOR, vec![]));
		assert_ok!(TrainingPools::cancel_pool(RuntimeOrigin::signed(CREATOR), pool));
		assert_noop!(set(CREATOR, vec![1, 4]), PoolError::<Test>::PoolEnded);
	});
}
