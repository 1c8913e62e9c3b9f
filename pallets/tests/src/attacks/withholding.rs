//! Attack 7: a withholding minority. Before, members holding more than 1 − quorum of the stake
//! stalled a pool for ever by not committing, at no cost.

use crate::mock::*;
use frame_support::assert_ok;
use pallet_checkpoints::{Event, FinalCheckpoints, Voided};

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
