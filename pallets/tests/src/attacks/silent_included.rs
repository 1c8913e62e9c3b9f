//! A silent included member: its payload is aggregated (it is in the final included set) but it
//! never commits the final hash, so it is no contributor. If only contributors could be
//! challenged, such a member would move the model every round, up to the aggregation rule's
//! bound, with nothing at stake but the leak; every member of the included set answers for its
//! payload. And its silence is leaked as a withholder's is: once the round is settled (nothing
//! can challenge it any more), each included participant that recorded no commit for the round
//! loses `InactivityLeak` of its snapshot stake and has the round counted as missed. A commit
//! recorded after the late-commit window (not paid) spares an honest member that is only slow.

use super::{all_vote, challenge};
use crate::mock::*;
use frame_support::{assert_noop, assert_ok, traits::Get};
use pallet_challenges::{Error, Verdict, Verdicts};
use pallet_checkpoints::Event as CheckpointsEvent;

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
		run_to_challenges(0, 1);
		assert_noop!(open_challenge(1, 0, 1, 5, [0x44; 32]), Error::<Test>::NotIncluded);
		assert_eq!(staked(5), 1_000);
	});
}

/// Pool 0 of one round with members 1..=5 (1 000 each): members 1..=4 commit round 1 over all
/// five payloads (final at once), member 5, whose payload they aggregated, does not. Returns
/// the round's settlement block.
fn final_without_member_5() -> u64 {
	training_pool(1, two_thirds(), &[1_000; 5]);
	for who in 1..=4 {
		assert_ok!(commit(who, 1, 7, &[0, 1, 2, 3, 4]));
	}
	pallet_rewards::Unsettled::<Test>::get(0, 1)
		.expect("round 1 is final")
		.settle_at
}

/// The leaks of silent included members so far: `(round, who, leaked, missed)`.
fn silent_leaks() -> Vec<(u32, AccountId, Balance, u32)> {
	checkpoints_events()
		.into_iter()
		.filter_map(|e| match e {
			CheckpointsEvent::SilentIncludedLeaked { round, who, leaked, missed, .. } => {
				Some((round, who, leaked, missed))
			},
			_ => None,
		})
		.collect()
}

#[test]
fn a_silent_included_member_is_leaked_when_the_round_is_settled() {
	run_test(|| {
		let settle_at = final_without_member_5();
		// Nothing is decided while the round can still be challenged: it could still commit.
		run_to_block(settle_at);
		assert!(silent_leaks().is_empty());
		assert_eq!(staked(5), 1_000);
		// Settled at `settle_at`; its silent included member is leaked in the next block, 1 %
		// of its snapshot stake, and its missed round counted, as a withholder's is.
		run_to_block(settle_at + 1);
		assert_eq!(silent_leaks(), vec![(1, 5, 10, 1)]);
		assert_eq!(staked(5), 990);
		for who in 1..=4 {
			assert_eq!(staked(who), 1_000, "member {who} committed");
		}
		assert_eq!(pallet_checkpoints::MissedRounds::<Test>::get(0, 5), 1);
		assert!(!pallet_checkpoints::UnmatchedCommits::<Test>::contains_key((0, 1)));
	});
}

#[test]
fn a_slow_included_member_that_commits_before_settlement_is_not_leaked() {
	run_test(|| {
		let settle_at = final_without_member_5();
		// Past the late-commit window (5 blocks): no longer paid, but its commit is recorded,
		// so it is not silent.
		let fin = pallet_checkpoints::FinalCheckpoints::<Test>::get(0, 1).expect("final");
		run_to_block(fin.finalized_at + 6);
		assert_ok!(commit(5, 1, 7, &[0, 1, 2, 3, 4]));
		assert!(!pallet_checkpoints::FinalCheckpoints::<Test>::get(0, 1)
			.expect("final")
			.contributors
			.contains(&5));
		// A second late commit is still refused.
		assert_noop!(
			commit(5, 1, 8, &[0, 1, 2, 3, 4]),
			pallet_checkpoints::Error::<Test>::AlreadyCommitted
		);
		run_to_block(settle_at + 2);
		assert!(silent_leaks().is_empty());
		assert_eq!(staked(5), 1_000);
		assert_eq!(pallet_rewards::Claimable::<Test>::get(0, 5), 0, "not paid");
		// Once settled, no commit is recorded any more.
		assert_noop!(
			commit(3, 1, 7, &[0, 1, 2, 3, 4]),
			pallet_checkpoints::Error::<Test>::RoundClosed
		);
	});
}

#[test]
fn a_member_left_out_of_the_included_set_is_not_leaked_at_settlement() {
	run_test(|| {
		training_pool(1, two_thirds(), &[1_000; 5]);
		for who in 1..=4 {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2, 3]));
		}
		let settle_at = pallet_rewards::Unsettled::<Test>::get(0, 1).expect("final").settle_at;
		run_to_block(settle_at + 1);
		assert!(silent_leaks().is_empty(), "nothing of member 5 reached the model");
		assert_eq!(staked(5), 1_000);
	});
}

/// An attacker fills the decision's block and the blocks after it with other pools' deadlines
/// so that the queue has no room for the leak: the silent member's stake stays slashable and
/// anyone's `decide_unmatched_commits` leaks it.
#[test]
fn a_full_deadline_queue_cannot_buy_a_silent_included_member_out_of_the_leak() {
	run_test(|| {
		let settle_at = final_without_member_5();
		let spill: u32 = <Test as pallet_checkpoints::Config>::MaxDeadlinesPerBlock::get();
		let spill = u64::from(spill);
		for at in settle_at + 1..=settle_at + spill {
			pallet_checkpoints::Deadlines::<Test>::mutate(
				at,
				|d| {
					while d.try_push((99, 1)).is_ok() {}
				},
			);
		}
		run_to_block(settle_at + 1);
		assert!(silent_leaks().is_empty(), "no room in the queue");
		assert!(pallet_checkpoints::UnmatchedCommits::<Test>::contains_key((0, 1)));
		assert_ok!(Checkpoints::decide_unmatched_commits(RuntimeOrigin::signed(1), 0, 1));
		assert_eq!(silent_leaks(), vec![(1, 5, 10, 1)]);
		assert_eq!(staked(5), 990);
	});
}
