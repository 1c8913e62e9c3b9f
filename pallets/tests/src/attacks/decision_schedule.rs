//! Buying a garbage committer out of the leak through the schedule. The unmatched commits of
//! a voided round (another hash over the majority's included set) are decided when its
//! equivocation reports close, in `on_initialize` of that block, from a per-block list shared
//! by every pool (`Deadlines`). An attacker that fills those lists with other pools' deadlines
//! (a pool and a member cost deposits that come back) left its garbage commits undecided, and
//! a later void of the same pool deleted them with the round's kept snapshot. Now undecided
//! unmatched commits stay until decided, and anyone decides them with
//! `decide_unmatched_commits` once the reports close.

use super::split;
use crate::mock::*;
use frame_support::{assert_noop, assert_ok, traits::Get, BoundedVec};
use pallet_checkpoints::{Deadlines, Error, Event, Snapshots, UnmatchedCommits};
use synod_primitives::PoolsInterface;

/// Every participant of pool 0 commits `[hash; 32]` for its open round, over all five.
fn all_commit(round: u32, hash: u8) {
	for who in 1..=5 {
		assert_ok!(commit(who, round, hash, &[0, 1, 2, 3, 4]));
	}
}

#[test]
fn filling_the_decision_schedule_cannot_buy_garbage_commits_out_of_the_leak() {
	run_test(|| {
		training_pool(5, two_thirds(), &[1_000; 5]);
		let until = TrainingPools::round_params(0).expect("pool").timeline.slashable_until(11);
		// Before round 1 is voided, the attacker fills the lists of `until` and of every block
		// a decision may spill to (in a real attack with its own pools' deadlines; here with
		// entries of a pool that does not exist, which cost the chain nothing to run).
		let per_block: u32 = <Test as pallet_checkpoints::Config>::MaxDeadlinesPerBlock::get();
		for at in until..until + u64::from(per_block) {
			let full = vec![(99, 1); per_block as usize];
			Deadlines::<Test>::insert(at, BoundedVec::truncate_from(full));
		}
		// Members 1 and 2 commit another hash over the majority's set; the round is voided.
		split(1);
		assert!(UnmatchedCommits::<Test>::contains_key((0, 1)), "kept, though not scheduled");
		assert_noop!(
			Checkpoints::decide_unmatched_commits(RuntimeOrigin::signed(OUTSIDER), 0, 1),
			Error::<Test>::EquivocationReportsOpen
		);
		// Rounds 2..=4 become final late in their windows; round 5, opened before `until`, is
		// voided after it (nobody commits) and deletes round 1's expired snapshot.
		for round in 2..=4 {
			let open = Checkpoints::open_round(0).expect("open");
			assert_eq!(open.round, round);
			run_to_block(open.deadline - 1);
			all_commit(round, 20 + round as u8);
		}
		let last = Checkpoints::open_round(0).expect("round 5 is open");
		assert!(last.opened_at < until && last.deadline > until);
		run_to_block(last.deadline);
		assert!(!Snapshots::<Test>::contains_key((0, 1)), "round 1's snapshot is gone");
		assert!(UnmatchedCommits::<Test>::contains_key((0, 1)), "its decision is not");
		let before = [staked(1), staked(2), staked(3)];
		// Anyone decides it, once, without a fee.
		let decided = Checkpoints::decide_unmatched_commits(RuntimeOrigin::signed(OUTSIDER), 0, 1);
		assert_eq!(decided.map(|i| i.pays_fee), Ok(frame_support::dispatch::Pays::No));
		assert_eq!(
			[staked(1), staked(2), staked(3)],
			[before[0] - 10, before[1] - 10, before[2]],
			"1 % of each garbage committer's round-1 snapshot stake; the honest keep theirs"
		);
		for who in [1, 2] {
			assert!(checkpoints_events().iter().any(|e| matches!(
				e,
				Event::UnmatchedCommitLeaked { round: 1, who: w, leaked: 10, .. } if *w == who
			)));
		}
		assert_noop!(
			Checkpoints::decide_unmatched_commits(RuntimeOrigin::signed(OUTSIDER), 0, 1),
			Error::<Test>::NoUnmatchedCommits
		);
	});
}

#[test]
fn a_late_void_schedules_its_leak_decision_in_a_block_still_to_come() {
	run_test(|| {
		// The deadline lists of round 1's deadline and of every block it may spill to are full
		// when the round opens: it is voided lazily, by whoever calls, and nobody calls until
		// after its equivocation reports close.
		let per_block: u32 = <Test as pallet_checkpoints::Config>::MaxDeadlinesPerBlock::get();
		for at in 11..11 + u64::from(per_block) {
			let full = vec![(99, 1); per_block as usize];
			Deadlines::<Test>::insert(at, BoundedVec::truncate_from(full));
		}
		training_pool(5, two_thirds(), &[1_000; 5]);
		assert_eq!(Checkpoints::open_round(0).expect("open").scheduled_at, None);
		// Members 1 and 2 commit another hash over the majority's set.
		for who in [1, 2] {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2, 3, 4]));
		}
		for who in [3, 4, 5] {
			assert_ok!(commit(who, 1, 8, &[0, 1, 2, 3, 4]));
		}
		let until = TrainingPools::round_params(0).expect("pool").timeline.slashable_until(11);
		run_to_block(until + 1);
		assert_ok!(Checkpoints::void_expired_round(RuntimeOrigin::signed(OUTSIDER), 0));
		let now = System::block_number();
		assert!(Deadlines::<Test>::iter_keys().all(|at| at > now), "no list of a past block");
		// Decided in the next block, without a call: the garbage committers are leaked.
		let before = [staked(1), staked(2), staked(3)];
		run_to_block(now + 1);
		assert_eq!([staked(1), staked(2), staked(3)], [before[0] - 10, before[1] - 10, before[2]]);
		assert!(!UnmatchedCommits::<Test>::contains_key((0, 1)));
	});
}
