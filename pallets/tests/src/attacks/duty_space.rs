//! Duty space. Commits and votes are `Operational` calls: they may use block space that
//! ordinary transactions (block stuffing) cannot. The runtime admits one only if it would
//! succeed (`check_commit`, `check_vote`: the call run and its effects discarded), so that an
//! outsider, an unseated juror, or a member repeating a failing commit cannot take that space.
//! `runtime/src/configs/duty.rs` tests the transaction extension and the stuffed block.

use super::challenge;
use crate::mock::*;
use frame_support::{assert_noop, assert_ok, dispatch::GetDispatchInfo};
use pallet_challenges::{OpenChallenges, Votes};
use pallet_checkpoints::{Commits, Error};

#[test]
fn only_a_commit_that_would_succeed_is_admitted_and_the_check_keeps_nothing() {
	run_test(|| {
		training_pool(3, two_thirds(), &[1_000; 3]);
		let check =
			|who, round| Checkpoints::check_commit(who, 0, round, [7; 32], included(&[0, 1, 2]));
		// A participant's commit passes, and the check leaves no trace.
		let before = sp_io::storage::root(sp_runtime::StateVersion::V1);
		assert_ok!(check(1, 1));
		assert_eq!(sp_io::storage::root(sp_runtime::StateVersion::V1), before);
		assert!(Commits::<Test>::get((0, 1), 1).is_none());
		// An outsider's is refused with the call's own error.
		assert_noop!(check(OUTSIDER, 1), Error::<Test>::NotMember);
		// Once committed, repeating it is refused: a member cannot fill the space with it.
		assert_ok!(commit(1, 1, 7, &[0, 1, 2]));
		assert_noop!(check(1, 1), Error::<Test>::AlreadyCommitted);
		// A round far ahead is refused too.
		assert_noop!(check(2, 5), Error::<Test>::RoundNotOpen);
	});
}

/// Attack: an outsider's commits at the block before a round's deadline. The transaction pool
/// dry-runs a duty call at the next block's number without its hooks, so a commit then ran
/// the void of the expired round and passed, whoever sent it: copies from any funded account
/// (nonce after nonce) were kept and gossiped as `Operational` calls, and refused unpaid at
/// inclusion once the block's own hook had voided the round. A commit is now the round's
/// participants' only, after the deadline too.
#[test]
fn an_outsiders_commit_after_the_deadline_is_refused() {
	run_test(|| {
		training_pool(3, two_thirds(), &[1_000; 3]);
		let deadline = Checkpoints::open_round(0).expect("open").deadline;
		// The pool's view of the next block: its number, no hook run.
		System::set_block_number(deadline);
		let check =
			|who, round| Checkpoints::check_commit(who, 0, round, [7; 32], included(&[0, 1, 2]));
		assert_noop!(check(OUTSIDER, 1), Error::<Test>::NotMember);
		// A participant's still voids the expired round.
		assert_ok!(check(1, 1));
	});
}

/// Attack: a stuffed block's duty space filled with the commits of one-member pools of the
/// attacker's own (a commit every block each, tipped). A commit booked, and was charged, the
/// weight of a 32-member pool's void, so two of them took the whole space and an honest
/// member's commit never landed: its rounds were voided and its members leaked. A commit that
/// does not void is now charged for its own path at its pool's size, and the block takes the
/// rest back (the runtime refunds the duty check's share too: `runtime/src/configs/duty.rs`,
/// `own_pool_commits_must_be_many_to_starve_a_commit_in_a_stuffed_block`, which counts them).
#[test]
fn a_small_pools_commit_takes_the_block_space_of_its_own_path_not_of_a_void() {
	run_test(|| {
		let pool = training_pool(3, two_thirds(), &[100]);
		run_to_block(Checkpoints::commits_from(pool).expect("round 1 open"));
		let call = pallet_checkpoints::Call::<Test>::commit_checkpoint {
			pool_id: pool,
			round: 1,
			checkpoint_hash: [1; 32],
			included: included(&[0]),
		};
		let booked = call.get_dispatch_info().call_weight;
		let commit = |round| {
			Checkpoints::commit_checkpoint(
				RuntimeOrigin::signed(1),
				pool,
				round,
				[1; 32],
				included(&[0]),
			)
		};
		// Round 1 final by this commit, round 2 opened with a snapshot of one.
		let post = commit(1).expect("the member's commit finalizes its round");
		assert!(pallet_checkpoints::FinalCheckpoints::<Test>::contains_key(pool, 1));
		let used = Checkpoints::commit_weight_at(1);
		assert_eq!(post.actual_weight, Some(used));
		assert!(
			used.ref_time().saturating_mul(4) < booked.ref_time(),
			"charged {used} of {booked} booked"
		);
		// A commit after the deadline voids the round: charged as booked.
		let deadline = Checkpoints::open_round(pool).expect("round 2 open").deadline;
		System::set_block_number(deadline);
		let post = commit(2).expect("a participant's late commit voids the round");
		assert!(pallet_checkpoints::Voided::<Test>::contains_key(pool, 2));
		assert_eq!(post.actual_weight, None);
		// The last round's commit ends the pool (every member's commitment released): charged
		// as booked.
		run_to_block(Checkpoints::commits_from(pool).expect("round 3 open"));
		assert_eq!(commit(3).expect("the last round final").actual_weight, None);
	});
}

#[test]
fn only_a_seated_jurors_first_vote_is_admitted() {
	run_test(|| {
		final_round();
		jurors(&[6, 7], 1_000);
		let (id, jury) = challenge(2, 0, 1, 1);
		let seated = jury.first().map(|(j, _)| *j).expect("a committee");
		let before = sp_io::storage::root(sp_runtime::StateVersion::V1);
		assert_ok!(Challenges::check_vote(seated, id, true));
		assert_eq!(sp_io::storage::root(sp_runtime::StateVersion::V1), before);
		assert!(Votes::<Test>::get(id, seated).is_none());
		assert_noop!(
			Challenges::check_vote(OUTSIDER, id, true),
			pallet_challenges::Error::<Test>::NotJuror
		);
		assert_ok!(Challenges::vote(RuntimeOrigin::signed(seated), id, false));
		if OpenChallenges::<Test>::contains_key(id) {
			assert_noop!(
				Challenges::check_vote(seated, id, false),
				pallet_challenges::Error::<Test>::AlreadyVoted
			);
		}
		assert_noop!(
			Challenges::check_vote(seated, id + 1, true),
			pallet_challenges::Error::<Test>::ChallengeNotFound
		);
	});
}
