//! A silent included member: its payload is aggregated (it is in the final included set) but it
//! never commits the final hash, so it is no contributor. If only contributors could be
//! challenged, such a member would move the model every round, up to the aggregation rule's
//! bound, with nothing at stake but the leak; every member of the included set answers for its
//! payload.

use super::{all_vote, challenge};
use crate::mock::*;
use frame_support::{assert_noop, assert_ok};
use pallet_challenges::{Error, Verdict, Verdicts};

#[test]
fn an_included_member_that_never_commits_is_challenged_and_convicted() {
	run_test(|| {
		training_pool(3, two_thirds(), &[1_000; 5]);
		// Members 1..=4 aggregate all five payloads and commit; member 5 (index 4), whose
		// forged payload they aggregated, stays silent. 4 000 of 5 000 is past the ⅔ quorum.
		for who in 1..=4 {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2, 3, 4]));
		}
		let fin = pallet_checkpoints::FinalCheckpoints::<Test>::get(0, 1).expect("final");
		assert!(!fin.contributors.contains(&5), "member 5 did not commit");
		let (id, jury) = challenge(1, 0, 1, 5);
		assert!(!jury.is_empty(), "a committee of the round's contributors is drawn");
		all_vote(id, &jury, true);
		assert_eq!(Verdicts::<Test>::get((0, 1, 5)), Some(Verdict::Guilty));
		assert_eq!(staked(5), 500, "its snapshot stake is slashed");
	});
}

#[test]
fn a_member_left_out_of_the_included_set_cannot_be_challenged() {
	run_test(|| {
		training_pool(3, two_thirds(), &[1_000; 5]);
		// Member 5's payload was not aggregated: nothing of it reached the model.
		for who in 1..=4 {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2, 3]));
		}
		assert_noop!(open_challenge(1, 0, 1, 5, [0x44; 32]), Error::<Test>::NotIncluded);
		assert_eq!(staked(5), 1_000);
	});
}
