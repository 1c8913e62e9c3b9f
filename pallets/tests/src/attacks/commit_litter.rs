//! Commit litter: a commit ahead of a round is stored before the round opens, and the round's
//! commits are pruned when it settles, up to `4 × MaxMembers` records. Accounts that join a
//! pool, commit ahead of the next round and leave in turn (each needs the minimum stake only
//! while it is a member) could leave more commits in one round than that, which no snapshot
//! counts and no pruning removes, every round. A member's commit ahead is forgotten when its
//! membership ends (`OnMemberLeft`), so a round holds at most its snapshot's commits.

use crate::mock::*;
use frame_support::assert_ok;
use pallet_checkpoints::{Commits, FinalCheckpoints, Snapshots};

/// Accounts the attacker cycles through the pool in one round: more than the pruning limit.
const CYCLERS: u64 = 4 * MAX_MEMBERS as u64 + 5;

/// The commits stored for `round` of pool 0.
fn stored(round: u32) -> usize {
	Commits::<Test>::iter_prefix((0, round)).count()
}

#[test]
fn accounts_cycling_through_a_pool_leave_no_commits_behind() {
	run_test(|| {
		// Trainers 1 and 2 train pool 0 (room for 3 more members at a time).
		training_pool(3, two_thirds(), &[1_000, 1_000]);
		// While round 1 is open, each cycler joins (a member from round 2), commits ahead of
		// round 2, and leaves, freeing its place for the next.
		for k in 0..CYCLERS {
			let who = 1_000 + k;
			mint(who, 1_000);
			bond_and_join(who, 0, 100);
			assert_ok!(commit(who, 2, 0x66, &[0, 1]));
			assert_ok!(TrainingPools::leave_pool(RuntimeOrigin::signed(who), 0));
		}
		let litter = stored(2);
		// The honest members train rounds 1 and 2 to finality.
		for round in 1..=2 {
			for who in 1..=2 {
				assert_ok!(commit(who, round, 7 + round as u8, &[0, 1]));
			}
			assert!(FinalCheckpoints::<Test>::get(0, round).is_some(), "round {round} final");
		}
		let at = FinalCheckpoints::<Test>::get(0, 2).expect("final").finalized_at;
		let pool = pallet_training_pools::Pools::<Test>::get(0).expect("pool 0");
		run_to_block(TrainingPools::timeline(&pool).settle_at(at) + 1);
		// Settled on schedule, or now by anyone.
		let _ = Rewards::settle_round(RuntimeOrigin::signed(OUTSIDER), 0, 2);
		assert!(Snapshots::<Test>::get((0, 2)).is_none(), "round 2 is settled and pruned");
		let after_settlement = stored(2);
		println!(
			"{{\"cyclers\":{CYCLERS},\"prune_limit\":{},\"commits_left_by_cyclers\":{litter},\"commits_after_settlement\":{after_settlement}}}",
			4 * MAX_MEMBERS
		);
		assert_eq!(litter, 0, "a former member's commit ahead is forgotten when it leaves");
		assert_eq!(after_settlement, 0, "the settled round keeps no commit");
	});
}

#[test]
fn a_leaver_keeps_its_commit_of_the_open_round_and_loses_only_its_commit_ahead() {
	run_test(|| {
		// Trainers 1..=3 train pool 0; round 1 is open.
		training_pool(3, two_thirds(), &[1_000, 1_000, 1_000]);
		// Trainer 3 commits round 1 (a participant), then leaves: its commit still counts, and
		// the round is final with it once the others commit the same.
		assert_ok!(commit(3, 1, 7, &[0, 1, 2]));
		assert_ok!(TrainingPools::leave_pool(RuntimeOrigin::signed(3), 0));
		assert!(Commits::<Test>::get((0, 1), 3).is_some(), "its commit of the open round stays");
		for who in 1..=2 {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2]));
		}
		let fin = FinalCheckpoints::<Test>::get(0, 1).expect("round 1 final");
		assert!(fin.contributors.contains(&3), "the leaver contributed to round 1");
	});
}

#[test]
fn a_member_dropped_by_the_leak_leaves_no_commit_ahead() {
	run_test(|| {
		// Trainers 1..=3 commit three different hashes every round (present, but no candidate
		// reaches quorum: every round is voided); trainer 4, a member from round 2, stays
		// silent and is dropped at the void of its second silent round (`DropAfterMissed` = 2),
		// after committing ahead of the round that follows.
		training_pool(12, two_thirds(), &[1_000, 1_000, 1_000]);
		bond_and_join(4, 0, 100);
		for round in 1..=3u32 {
			for who in 1..=3 {
				assert_ok!(commit(who, round, who as u8, &[0, 1, 2]));
			}
			if round == 3 {
				assert_ok!(commit(4, 4, 0x66, &[0, 1, 2, 3]));
				assert!(Commits::<Test>::get((0, 4), 4).is_some(), "committed ahead");
			}
			let open = Checkpoints::open_round(0).expect("open round");
			assert_eq!(open.round, round);
			run_to_block(open.deadline);
		}
		assert!(!pallet_training_pools::Members::<Test>::contains_key(0, 4), "dropped");
		assert!(
			Commits::<Test>::get((0, 4), 4).is_none(),
			"a dropped member's commit ahead is forgotten"
		);
	});
}
