//! Duty space. Commits, voids of expired rounds, votes and appeals are `Operational` calls:
//! they may use block space that ordinary transactions (block stuffing) cannot. The runtime
//! admits one only if it would succeed (`check_commit`, `check_void`, `check_vote`,
//! `check_appeal`: the call run and its effects discarded), so that an outsider, an unseated
//! juror, a member repeating a failing commit or anyone's void of a round the deadline queue
//! voids cannot take that space.
//! `runtime/src/configs/duty.rs` tests the transaction extension and the stuffed block.

use super::challenge;
use crate::mock::*;
use frame_support::{assert_noop, assert_ok, dispatch::GetDispatchInfo, traits::Get};
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
/// inclusion once the block's own hook had voided the round. A commit is the round's
/// participants' only, and nobody's after the deadline.
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
		// A participant's is refused too: the round is voided by the hook, not by a commit.
		assert_noop!(check(1, 1), Error::<Test>::DeadlinePassed);
	});
}

/// `post` reports `used`, strictly less time than `booked` and nothing beyond it.
fn assert_charged(
	post: &frame_support::dispatch::PostDispatchInfo,
	used: frame_support::weights::Weight,
	booked: frame_support::weights::Weight,
) {
	assert_eq!(post.actual_weight, Some(used));
	assert!(
		used.all_lte(booked) && used.ref_time() < booked.ref_time(),
		"charged {used} of {booked} booked"
	);
}

/// Attack: a stuffed block's duty space filled with the commits of one-member pools of the
/// attacker's own (a commit every block each, tipped). A commit booked, and was charged, the
/// weight of a 32-member pool's void, so two of them took the whole space and an honest
/// member's commit never landed: its rounds were voided and its members leaked. A commit is
/// charged for its own path at its pool's size, and the block takes the rest back (the
/// runtime refunds the duty check's share too: `runtime/src/configs/duty.rs`,
/// `own_pool_commits_must_be_many_to_starve_a_commit_in_a_stuffed_block`, which counts them).
#[test]
fn a_small_pools_commit_takes_the_block_space_of_its_own_path_not_of_a_void() {
	run_test(|| {
		let pool = training_pool(3, two_thirds(), &[100]);
		run_to_block(Checkpoints::commits_from(pool).expect("round 1 open"));
		let booked = commit_call(pool, 1).get_dispatch_info().call_weight;
		// Round 1 final by this commit, round 2 opened with a snapshot of one.
		let post = own_commit(pool, 1).expect("the member's commit finalizes its round");
		assert!(pallet_checkpoints::FinalCheckpoints::<Test>::contains_key(pool, 1));
		assert_charged(&post, Checkpoints::commit_weight_at(1), booked);
	});
}

/// Attack: the same stuffed block's duty space filled with the commits the chain charged as
/// booked whatever the pool's size: a commit after a deadline that no deadline list held (the
/// attacker fills them first) voided the round and paid a 32-member void, and the commit
/// finalizing the last round of a one-round pool of the attacker's own ended the pool and paid
/// the same. Two of either per block kept every honest commit out. A commit after the deadline
/// is now refused (the round is voided by the queue or by `void_expired_round`, a duty of its
/// own), and a commit that ends its pool is charged its path and the end of a pool of its
/// size.
#[test]
fn late_and_pool_ending_commits_cannot_take_the_block_space_of_a_large_pool() {
	run_test(|| {
		let pool = training_pool(2, two_thirds(), &[100]);
		let booked = commit_call(pool, 1).get_dispatch_info().call_weight;
		// Round 1's deadline passes with no list holding it: a commit is refused, unpaid.
		let deadline = Checkpoints::open_round(pool).expect("round 1 open").deadline;
		pallet_checkpoints::Deadlines::<Test>::remove(deadline);
		run_to_block(deadline);
		assert!(!pallet_checkpoints::Voided::<Test>::contains_key(pool, 1));
		assert_noop!(own_commit(pool, 1), Error::<Test>::DeadlinePassed);
		assert_noop!(
			Checkpoints::check_commit(1, pool, 1, [1; 32], included(&[0])),
			Error::<Test>::DeadlinePassed
		);
		// Anyone voids it.
		assert_ok!(Checkpoints::void_expired_round(RuntimeOrigin::signed(OUTSIDER), pool));
		assert!(pallet_checkpoints::Voided::<Test>::contains_key(pool, 1));
		// The last round's commit ends the pool: charged for a one-member pool's end.
		run_to_block(Checkpoints::commits_from(pool).expect("round 2 open"));
		let post = own_commit(pool, 2).expect("the last round final");
		assert_eq!(
			TrainingPools::pool(pool).map(|p| p.status),
			Some(synod_primitives::PoolStatus::Completed)
		);
		assert_charged(&post, Checkpoints::ending_commit_weight_at(1, 1), booked);
	});
}

/// Attack: finalizations that fill the deadline and settlement lists of the blocks ahead (23
/// a block in the runtime) so that every later finalizing commit probes list after full list
/// while it is charged its benchmark, which found room in the first list it tried: up to
/// `MaxDeadlinesPerBlock − 1` deadline lists and `MaxSettlementsPerBlock − 1` settlement lists
/// read and proved uncharged per commit. A commit is now charged every list it may probe.
#[test]
fn a_finalizing_commit_is_charged_for_the_full_lists_it_may_probe() {
	run_test(|| {
		let pool = training_pool(3, two_thirds(), &[100]);
		let from = Checkpoints::commits_from(pool).expect("round 1 open");
		run_to_block(from);
		let max_deadlines = <Test as pallet_checkpoints::Config>::MaxDeadlinesPerBlock::get();
		let max_settlements = <Test as pallet_rewards::Config>::MaxSettlementsPerBlock::get();
		// Every list from here on is full of another pool's entries.
		let full =
			|n: u32| frame_support::BoundedVec::truncate_from((0..n).map(|r| (99, r)).collect());
		for at in from..from + 500 {
			pallet_checkpoints::Deadlines::<Test>::insert(at, full(max_deadlines));
			pallet_rewards::Settlements::<Test>::insert(at, full(max_settlements));
		}
		let post = own_commit(pool, 1).expect("the commit finalizes its round");
		let next = Checkpoints::open_round(pool).expect("round 2 open");
		assert_eq!(next.scheduled_at, None, "every deadline list it probed was full");
		assert!(!pallet_rewards::Unsettled::<Test>::get(pool, 1).expect("reserved").scheduled);
		let used = post.actual_weight.expect("charged its path");
		assert_eq!(used, Checkpoints::commit_weight_at(1));
		// Proof of each list probed after the first: deadlines, then settlements.
		let list = |n: u32| (n.saturating_sub(1) as u64) * ((n as u64) * 8 + 1 + 48);
		let probed = list(max_deadlines) + list(max_settlements);
		let benchmarked = <() as pallet_checkpoints::WeightInfo>::commit_checkpoint(2).proof_size();
		assert!(
			used.proof_size() >= benchmarked + probed,
			"charged {used} for a benchmark of {benchmarked} bytes of proof and {probed} probed"
		);
	});
}

/// The commit of member 1 (the pool's only member) to `round` of `pool`, over `[0]`.
fn commit_call(pool: u32, round: u32) -> pallet_checkpoints::Call<Test> {
	pallet_checkpoints::Call::<Test>::commit_checkpoint {
		pool_id: pool,
		round,
		checkpoint_hash: [1; 32],
		included: included(&[0]),
	}
}

/// Member 1's commit to `round` of `pool` (see [`commit_call`]).
fn own_commit(pool: u32, round: u32) -> frame_support::dispatch::DispatchResultWithPostInfo {
	Checkpoints::commit_checkpoint(RuntimeOrigin::signed(1), pool, round, [1; 32], included(&[0]))
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

/// Attack: a stuffed block against a committee's votes. Every vote was charged as the one that
/// decides (an appeal committee's deciding vote, paying every voter twice), so a stuffed block
/// took 3 votes and a committee of 32 jurors needed 11 blocks to vote, while an attacker seated
/// on sham challenges of its own filled the duty space with few calls. A vote that decides
/// nothing is charged its own path (`vote_undecided`); only the deciding vote is charged as
/// booked (the runtime counts the votes a stuffed block takes:
/// `a_stuffed_block_takes_a_whole_committees_votes`, `runtime/src/configs/duty.rs`).
#[test]
fn a_vote_that_decides_nothing_is_charged_its_own_path() {
	use pallet_challenges::WeightInfo;
	run_test(|| {
		final_round();
		jurors(&[6, 7], 1_000);
		let (id, _) = challenge(2, 0, 1, 1);
		let booked = pallet_challenges::Call::<Test>::vote { challenge_id: id, guilty: true }
			.get_dispatch_info()
			.call_weight;
		let undecided = <() as WeightInfo>::vote_undecided();
		assert!(undecided.all_lte(booked) && undecided.ref_time() < booked.ref_time());
		// The jurors with the fewest seats first: the most votes before the one that decides.
		let mut jury = OpenChallenges::<Test>::get(id).expect("drawn").jury.into_inner();
		jury.sort_by_key(|s| s.seats);
		let mut charged = Vec::new();
		for s in jury {
			if OpenChallenges::<Test>::get(id).is_none_or(|c| c.votes.decided().is_some()) {
				break;
			}
			let post = Challenges::vote(RuntimeOrigin::signed(s.who), id, true)
				.expect("a seated juror votes");
			charged.push(post.actual_weight);
		}
		let (deciding, before) = charged.split_last().expect("votes were cast");
		assert!(!before.is_empty(), "the committee needs several votes: {charged:?}");
		assert!(before.iter().all(|w| *w == Some(undecided)), "{charged:?}");
		assert_eq!(*deciding, None, "the deciding vote is charged as booked");
	});
}
