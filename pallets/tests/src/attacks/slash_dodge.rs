//! Attack 3: slash dodge. Before, an accused member left the pool and unbonded during the voting
//! period (or while the round could still be challenged); the verdict slashed what was left.
//! Now the stake backing a round stays committed (neither unbonded nor moved to another pool)
//! until the round is settled, whether its member left or its pool ended.

use super::challenge;
use crate::mock::*;
use frame_support::{assert_noop, assert_ok};
use pallet_trainer_staking::{Error, SlashableUntil};

/// Round 1 final at block 1 with members 1..=3 (1 000 each) contributing; rounds 2 and 3 final
/// too (members 2 and 3), so that the pool completes, no round is voided and nobody is leaked.
fn two_final_rounds() {
	training_pool(3, two_thirds(), &[1_000, 1_000, 1_000]);
	for who in 1..=3 {
		assert_ok!(commit(who, 1, 7, &[0, 1, 2]));
	}
	assert_ok!(commit(2, 2, 8, &[1, 2]));
	assert_ok!(commit(3, 2, 8, &[1, 2]));
	assert_ok!(commit(2, 3, 9, &[1, 2]));
	assert_ok!(commit(3, 3, 9, &[1, 2]));
	assert!(pallet_checkpoints::FinalCheckpoints::<Test>::get(0, 3).is_some());
}

#[test]
fn slash_cannot_be_dodged_by_leaving_and_unbonding() {
	run_test(|| {
		two_final_rounds();
		jurors(&[2, 3], 1_000);
		// Rounds 1 to 3 opened at block 1 with deadline 11: the snapshot stake stays
		// slashable until settle_at(11) = 11 + 2·5 + 2 + (10 + 10) + 1 = 44.
		assert_eq!(SlashableUntil::<Test>::get(1), Some(44));
		let (id, jury) = challenge(2, 0, 1, 1);
		// The accused leaves and tries to unbond everything at once: the stake backing the
		// completed pool's rounds stays committed until they are settled.
		assert_ok!(TrainingPools::leave_pool(RuntimeOrigin::signed(1), 0));
		assert_noop!(
			TrainerStaking::unbond(RuntimeOrigin::signed(1), 1_000),
			Error::<Test>::StakeCommitted
		);
		// The verdict slashes half of its snapshot stake.
		super::all_vote(id, &jury, true);
		assert_eq!(staked(1), 500);
		run_to_block(44);
		assert_noop!(
			TrainerStaking::unbond(RuntimeOrigin::signed(1), 500),
			Error::<Test>::StakeCommitted
		);
		run_to_block(45);
		assert_ok!(TrainerStaking::unbond(RuntimeOrigin::signed(1), 500));
	});
}

#[test]
fn stake_stays_held_until_the_rounds_it_backs_are_settled() {
	run_test(|| {
		two_final_rounds();
		assert_ok!(TrainingPools::leave_pool(RuntimeOrigin::signed(3), 0));
		// The completed pool's rounds can still be challenged until settled at block 44: the
		// stake backing them is neither unbonded nor withdrawn before.
		run_to_block(44);
		assert_noop!(
			TrainerStaking::unbond(RuntimeOrigin::signed(3), 1_000),
			Error::<Test>::StakeCommitted
		);
		run_to_block(45);
		assert_ok!(TrainerStaking::unbond(RuntimeOrigin::signed(3), 1_000));
		assert!(SlashableUntil::<Test>::get(3).is_none_or(|until| until < 45));
	});
}
