//! Attack 9: sham challenge. Before, one challenge per (pool, round, accused) was ever allowed:
//! a friend of the cheater opened a bogus one first, let it fail, and the real one was refused.

use super::{all_vote, challenge};
use crate::mock::*;
use frame_support::{assert_noop, assert_ok};
use pallet_challenges::{Error, Verdict, Verdicts};

#[test]
fn sham_challenge_does_not_shield_the_cheater() {
	run_test(|| {
		final_round();
		jurors(&[4, 5], 1_000);
		// Member 2, a friend of cheater 1, opens a sham challenge first…
		assert_ok!(open_challenge(2, 0, 1, 1, [0; 32]));
		// …the real challenge is still accepted, and convicts.
		let (real, jury) = challenge(3, 0, 1, 1);
		all_vote(real, &jury, true);
		assert_eq!(Verdicts::<Test>::get((0, 1, 1)), Some(Verdict::Guilty));
		assert_eq!(staked(1), 500);
		// The sham expires undecided: the guilty verdict stands.
		run_to_block(23);
		assert!(!pallet_challenges::OpenChallenges::<Test>::contains_key(0));
		assert_eq!(Verdicts::<Test>::get((0, 1, 1)), Some(Verdict::Guilty));
		// The cheater is not paid for the round; the others keep their own share (its share
		// returns to the budget).
		run_to_block(33);
		assert_eq!(pallet_rewards::Claimable::<Test>::get(0, 1), 0);
		assert_eq!(pallet_rewards::Claimable::<Test>::get(0, 2), 200);
	});
}

#[test]
fn open_challenges_per_contribution_are_bounded() {
	run_test(|| {
		final_round();
		assert_ok!(open_challenge(2, 0, 1, 1, [0; 32]));
		assert_ok!(open_challenge(3, 0, 1, 1, [0; 32]));
		assert_noop!(open_challenge(4, 0, 1, 1, [0; 32]), Error::<Test>::AlreadyChallenged);
	});
}

#[test]
fn repeated_challenges_cannot_slash_twice() {
	run_test(|| {
		final_round();
		jurors(&[4, 5], 1_000);
		// Two challenges against the same contribution, both convicting.
		assert_ok!(open_challenge(2, 0, 1, 1, [0; 32]));
		let (second, jury) = challenge(3, 0, 1, 1);
		all_vote(0, &jury, true);
		assert_eq!(staked(1), 500);
		all_vote(second, &jury, true);
		assert_eq!(staked(1), 500, "one offence, one slash");
		assert!(challenges_events().contains(&pallet_challenges::Event::AccusedFoundGuilty {
			challenge_id: second,
			accused: 1,
			slashed: 0
		}));
		assert_noop!(open_challenge(4, 0, 1, 1, [0; 32]), Error::<Test>::AlreadyConvicted);
	});
}
