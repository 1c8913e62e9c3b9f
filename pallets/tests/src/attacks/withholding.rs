//! A withholding minority: members holding more than 1 − quorum of the stake stall a pool by
//! not committing. The leak costs them stake and drops them after `DropAfterMissed` voided
//! rounds, and a dropped account cannot join that pool again (leaving first does not help).

use crate::mock::*;
use frame_support::{assert_noop, assert_ok};
use pallet_checkpoints::{Event, FinalCheckpoints, Voided};
use synod_primitives::PoolsInterface;

#[test]
fn withholding_minority_is_leaked_and_dropped() {
	run_test(|| {
		// Member 3 holds half the stake: without it no round reaches ⅔.
		training_pool(5, two_thirds(), &[1_000, 1_000, 2_000]);
		assert_ok!(commit(1, 1, 7, &[0, 1]));
		assert_ok!(commit(2, 1, 7, &[0, 1]));
		run_to_block(11);
		assert!(Voided::<Test>::get(0, 1).is_some());
		assert_eq!(staked(3), 2_000 - 20, "1 % of its snapshot stake");
		assert_ok!(commit(1, 2, 8, &[0, 1]));
		assert_ok!(commit(2, 2, 8, &[0, 1]));
		run_to_block(21);
		assert!(Voided::<Test>::get(0, 2).is_some());
		// 1 % of 1 980 (its weight in round 2), then dropped after two silent voided rounds.
		assert_eq!(staked(3), 2_000 - 20 - 19);
		assert!(pools_events().iter().any(|e| matches!(
			e,
			pallet_training_pools::Event::MemberDropped { pool_id: 0, who: 3 }
		)));
		assert!(checkpoints_events().iter().any(|e| matches!(
			e,
			Event::InactivityLeaked { round: 2, who: 3, leaked: 19, missed: 2, .. }
		)));
		// The honest stake is the whole snapshot now: round 3 becomes final.
		assert_eq!(Checkpoints::round_snapshot(0, 3).len(), 2);
		assert_ok!(commit(1, 3, 9, &[0, 1]));
		assert_ok!(commit(2, 3, 9, &[0, 1]));
		assert!(FinalCheckpoints::<Test>::get(0, 3).is_some());
		// Members who committed were never leaked.
		assert_eq!((staked(1), staked(2)), (1_000, 1_000));
	});
}

#[test]
fn disagreeing_is_not_withholding() {
	run_test(|| {
		training_pool(3, two_thirds(), &[1_000, 1_000, 1_000]);
		for (who, hash) in [(1, 7), (2, 8), (3, 9)] {
			assert_ok!(commit(who, 1, hash, &[0, 1, 2]));
		}
		run_to_block(11);
		assert!(Voided::<Test>::get(0, 1).is_some());
		assert_eq!((staked(1), staked(2), staked(3)), (1_000, 1_000, 1_000));
		assert!(!checkpoints_events().iter().any(|e| matches!(e, Event::InactivityLeaked { .. })));
	});
}

/// Withholds until the leak drops it, as in [`withholding_minority_is_leaked_and_dropped`].
fn withhold_until_dropped() {
	training_pool(6, two_thirds(), &[1_000, 1_000, 2_000]);
	for (round, hash, block) in [(1, 7, 11), (2, 8, 21)] {
		assert_ok!(commit(1, round, hash, &[0, 1]));
		assert_ok!(commit(2, round, hash, &[0, 1]));
		run_to_block(block);
		assert!(Voided::<Test>::get(0, round).is_some());
	}
}

#[test]
fn dropped_withholder_cannot_rejoin_to_stall_again() {
	run_test(|| {
		withhold_until_dropped();
		assert!(pools_events().iter().any(|e| matches!(
			e,
			pallet_training_pools::Event::MemberDropped { pool_id: 0, who: 3 }
		)));
		// Once its commitment to the voided rounds has ended, it would have the stake to join
		// again (and would void two more rounds for another 2 % of it, for ever): refused.
		assert_ok!(commit(1, 3, 9, &[0, 1]));
		assert_ok!(commit(2, 3, 9, &[0, 1]));
		run_to_block(40);
		assert_noop!(join(3, 0, 1_900), pallet_training_pools::Error::<Test>::DroppedFromPool);
		// Another pool is another matter, once the round it was dropped in (at block 21) is
		// settled: its stake backs that round until then.
		let settled = TrainingPools::round_params(0).expect("pool").timeline.settled_by(21);
		run_to_block(settled + 1);
		assert_ok!(TrainingPools::create_pool(
			RuntimeOrigin::signed(CREATOR),
			spec(2, 2, two_thirds())
		));
		assert_ok!(join(3, 1, 1_900));
	});
}

#[test]
fn withholder_leaving_before_its_drop_cannot_rejoin() {
	run_test(|| {
		training_pool(6, two_thirds(), &[1_000, 1_000, 2_000]);
		assert_ok!(commit(1, 1, 7, &[0, 1]));
		assert_ok!(commit(2, 1, 7, &[0, 1]));
		run_to_block(11);
		assert!(Voided::<Test>::get(0, 1).is_some());
		// One round missed: it leaves before the second would drop it. Round 2's snapshot
		// still counts its stake, so round 2 is voided too, and the leak drops it all the same.
		assert_ok!(TrainingPools::leave_pool(RuntimeOrigin::signed(3), 0));
		assert_ok!(commit(1, 2, 8, &[0, 1]));
		assert_ok!(commit(2, 2, 8, &[0, 1]));
		run_to_block(21);
		assert!(Voided::<Test>::get(0, 2).is_some());
		assert!(checkpoints_events()
			.iter()
			.any(|e| matches!(e, Event::InactivityLeaked { round: 2, who: 3, missed: 2, .. })));
		assert_ok!(commit(1, 3, 9, &[0, 1]));
		assert_ok!(commit(2, 3, 9, &[0, 1]));
		run_to_block(40);
		assert_noop!(join(3, 0, 1_900), pallet_training_pools::Error::<Test>::DroppedFromPool);
	});
}
