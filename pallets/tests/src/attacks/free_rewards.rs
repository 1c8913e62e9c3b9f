//! Attack 5: free rewards. Before, a late commit at `finalized_at + W` made an account a
//! contributor when no challenge could be opened any more, and rewards were split per account,
//! so one stake split over many accounts earned more.

use crate::mock::*;
use frame_support::{assert_noop, assert_ok};
use pallet_checkpoints::{Error, FinalCheckpoints};
use pallet_rewards::Claimable;

#[test]
fn late_commit_is_not_a_free_reward() {
	run_test(|| {
		training_pool(3, two_thirds(), &[1_000, 1_000, 1_000]);
		assert_ok!(commit(1, 1, 7, &[0, 1, 2]));
		assert_ok!(commit(2, 1, 7, &[0, 1, 2]));
		assert_eq!(FinalCheckpoints::<Test>::get(0, 1).expect("final").finalized_at, 1);
		// Member 3 commits at the last block of the late-commit window (1 + W = 6)…
		run_to_block(6);
		assert_ok!(commit(3, 1, 7, &[0, 1, 2]));
		assert!(FinalCheckpoints::<Test>::get(0, 1).expect("final").contributors.contains(&3));
		// …and can still be challenged for W more blocks.
		run_to_block(11);
		assert_ok!(open_challenge(OUTSIDER, 0, 1, 3, [0x44; 32]));
		run_to_block(12);
		assert_noop!(
			open_challenge(OUTSIDER, 0, 1, 2, [0x44; 32]),
			pallet_challenges::Error::<Test>::ChallengeWindowClosed
		);
	});
}

/// After the window a commit is only recorded (so that a slow member is not leaked as a silent
/// included one): never a contributor, never paid; and nothing is recorded once the round is
/// settled.
#[test]
fn commits_after_the_window_are_never_paid() {
	run_test(|| {
		training_pool(1, two_thirds(), &[1_000, 1_000, 1_000]);
		assert_ok!(commit(1, 1, 7, &[0, 1, 2]));
		assert_ok!(commit(2, 1, 7, &[0, 1, 2]));
		run_to_block(7);
		assert_ok!(commit(3, 1, 7, &[0, 1, 2]));
		assert!(!FinalCheckpoints::<Test>::get(0, 1).expect("final").contributors.contains(&3));
		let settle_at = pallet_rewards::Unsettled::<Test>::get(0, 1).expect("final").settle_at;
		run_to_block(settle_at);
		assert_eq!(Claimable::<Test>::get(0, 3), 0);
		assert_eq!(Claimable::<Test>::get(0, 1), 500);
		assert_noop!(commit(3, 1, 7, &[0, 1, 2]), Error::<Test>::RoundClosed);
	});
}

#[test]
fn rewards_are_split_by_stake_not_by_account() {
	run_test(|| {
		// One owner's 3 000 as one account (1) against 3 000 split over three sybils (2, 3, 4).
		training_pool(1, two_thirds(), &[3_000, 1_000, 1_000, 1_000]);
		for who in 1..=4 {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2, 3]));
		}
		// settle_at = 1 + 2·5 + 2 + (10 + 10) + 1.
		run_to_block(34);
		assert_eq!(Claimable::<Test>::get(0, 1), 500);
		for sybil in 2..=4 {
			assert_eq!(Claimable::<Test>::get(0, sybil), 166);
		}
		let before = free(1);
		assert_ok!(Rewards::claim_rewards(RuntimeOrigin::signed(1), 0));
		assert_eq!(free(1), before + 500);
	});
}
