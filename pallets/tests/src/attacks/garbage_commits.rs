//! A garbage-committing blocking minority: members holding more than 1 − quorum of the stake
//! commit random hashes, so no candidate reaches quorum and every round is voided, yet they are
//! not silent. A commit of another hash over the included set of the candidate a strict
//! majority of the snapshot stake committed counts as a missed round at the void and is leaked
//! like silence once the round's equivocation reports close, unless an equivocation was proved
//! in the round (then honest members split over an equivocator's two payloads committed two
//! hashes, and none of them is leaked). A commit over another included set is judged the same
//! way once that majority's set is the round's agreed set and was fixed the pool's recommit
//! period (`RecommitPeriod`, at most half of the commit span) before the deadline (every committer could commit over it); before that it is not:
//! an honest member that was denied a payload commits a smaller set.

use super::split;
use crate::mock::*;
use frame_support::{assert_noop, assert_ok};
use pallet_checkpoints::{AgreedSets, Event, FinalCheckpoints, UnmatchedCommits, Voided};
use sp_runtime::Perbill;
use synod_primitives::PoolsInterface;

const ATTACKER: AccountId = 4;
const GARBAGE: u8 = 99;

/// Runs pool 0's rounds from 1, the honest members (1..=3) committing one hash per round over
/// the round's snapshot and the attacker (while in the snapshot) committing garbage over the
/// same set, until a round is final. Returns the rounds voided before it.
fn garbage_until_final(max_rounds: u32) -> u32 {
	for round in 1..=max_rounds {
		let snapshot = Checkpoints::round_snapshot(0, round);
		let set: Vec<u32> = snapshot.iter().map(|p| p.index).collect();
		if snapshot.iter().any(|p| p.who == ATTACKER) {
			assert_ok!(commit(ATTACKER, round, GARBAGE, &set));
		}
		for who in 1..=3 {
			assert_ok!(commit(who, round, 10 + round as u8, &set));
		}
		if FinalCheckpoints::<Test>::get(0, round).is_some() {
			return round - 1;
		}
		let open = Checkpoints::open_round(0).expect("open round");
		run_to_block(open.deadline);
		assert!(Voided::<Test>::get(0, round).is_some(), "round {round} is voided");
	}
	panic!("no round of {max_rounds} became final: the garbage committer blocks the pool");
}

#[test]
fn garbage_committing_minority_is_leaked_and_dropped() {
	run_test(|| {
		// The attacker holds 1 600 of 4 600 (35 %): without it no round reaches ⅔, and the
		// honest 65 % commit one candidate, a strict majority.
		training_pool(12, two_thirds(), &[1_000, 1_000, 1_000, 1_600]);
		let voided = garbage_until_final(12);
		let leaks: Vec<_> = checkpoints_events()
			.into_iter()
			.filter_map(|e| match e {
				Event::UnmatchedCommitLeaked { round, who, leaked, missed, .. } => {
					Some((round, who, leaked, missed))
				},
				_ => None,
			})
			.collect();
		let leaked: u128 = leaks.iter().map(|(_, _, l, _)| *l).sum();
		println!(
			"{{\"voided_rounds\":{voided},\"attacker_leaks\":{},\"attacker_leaked\":{leaked}}}",
			leaks.len()
		);
		assert!(leaks.iter().all(|(_, who, _, _)| *who == ATTACKER), "only the attacker");
		// Its first two unmatched rounds leak 1 % each of its snapshot stake and drop it
		// (`DropAfterMissed` = 2) once round 2's reports close (block 54): rounds 1..=6 were
		// voided, round 7's snapshot is the honest members' alone.
		assert_eq!(leaks[..2], [(1, ATTACKER, 16, 1), (2, ATTACKER, 16, 2)]);
		assert!(pools_events().iter().any(|e| matches!(
			e,
			pallet_training_pools::Event::MemberDropped { pool_id: 0, who: ATTACKER }
		)));
		assert_eq!(voided, 6);
		// The honest members finish the pool; the rounds it voided after round 2 are leaked
		// too, as their reports close.
		for round in 8..=12 {
			let set: Vec<u32> =
				Checkpoints::round_snapshot(0, round).iter().map(|p| p.index).collect();
			for who in 1..=3 {
				assert_ok!(commit(who, round, 10 + round as u8, &set));
			}
			assert!(FinalCheckpoints::<Test>::get(0, round).is_some());
		}
		let last_until = TrainingPools::round_params(0).expect("pool").timeline.slashable_until(61);
		run_to_block(last_until);
		assert_eq!(
			checkpoints_events()
				.iter()
				.filter(|e| matches!(e, Event::UnmatchedCommitLeaked { who: ATTACKER, .. }))
				.count(),
			6
		);
		assert!(staked(ATTACKER) <= 1_600 - 6 * 15);
		assert!(UnmatchedCommits::<Test>::iter().next().is_none());
		// Nobody honest lost anything.
		assert_eq!((staked(1), staked(2), staked(3)), (1_000, 1_000, 1_000));
	});
}

#[test]
fn honest_members_split_by_a_proved_equivocator_are_not_leaked() {
	run_test(|| {
		training_pool(1, two_thirds(), &[1_000; 5]);
		// Member 3's two payloads split the honest members over hashes 7 and 8.
		split(1);
		assert!(UnmatchedCommits::<Test>::contains_key((0, 1)));
		let (a, b) = (announcement(0, 1, 3, [0x11; 32]), announcement(0, 1, 3, [0x22; 32]));
		assert_ok!(pallet_challenges::Pallet::<Test>::report_equivocation(
			RuntimeOrigin::signed(OUTSIDER),
			0,
			1,
			3,
			a,
			b
		));
		let until = TrainingPools::round_params(0).expect("pool").timeline.slashable_until(11);
		run_to_block(until);
		assert!(checkpoints_events()
			.iter()
			.any(|e| matches!(e, Event::UnmatchedCommitsExcused { pool_id: 0, round: 1 })));
		assert!(!checkpoints_events()
			.iter()
			.any(|e| matches!(e, Event::UnmatchedCommitLeaked { .. })));
		assert_eq!((staked(1), staked(2)), (1_000, 1_000));
	});
}

#[test]
fn unmatched_commits_without_a_proved_equivocation_are_leaked_when_reports_close() {
	run_test(|| {
		training_pool(1, two_thirds(), &[1_000; 5]);
		split(1);
		let until = TrainingPools::round_params(0).expect("pool").timeline.slashable_until(11);
		// Reports stay open until `until`: nothing is decided before.
		run_to_block(until - 1);
		assert_eq!((staked(1), staked(2)), (1_000, 1_000));
		assert!(UnmatchedCommits::<Test>::contains_key((0, 1)));
		run_to_block(until);
		assert_eq!((staked(1), staked(2)), (990, 990));
		assert!(checkpoints_events().iter().any(|e| matches!(
			e,
			Event::UnmatchedCommitLeaked { round: 1, who: 1, leaked: 10, missed: 1, .. }
		)));
		assert_eq!((staked(3), staked(4), staked(5)), (1_000, 1_000, 1_000));
	});
}

#[test]
fn a_blocking_minority_cannot_get_split_honest_members_leaked() {
	run_test(|| {
		// The attacker (member 5, 2 500 of 6 500) commits one garbage hash; its withholding
		// split the honest members over two included sets (31 % each). Its 38 % is the
		// largest candidate, but no candidate holds a strict majority: nobody's commit is
		// judged, the honest ones' included.
		training_pool(1, two_thirds(), &[1_000, 1_000, 1_000, 1_000, 2_500]);
		for who in [1, 2] {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2, 3]));
		}
		for who in [3, 4] {
			assert_ok!(commit(who, 1, 8, &[0, 1, 2, 3, 4]));
		}
		assert_ok!(commit(5, 1, GARBAGE, &[0, 1, 2, 3, 4]));
		run_to_block(11);
		assert!(Voided::<Test>::get(0, 1).is_some());
		assert!(!UnmatchedCommits::<Test>::contains_key((0, 1)));
		let until = TrainingPools::round_params(0).expect("pool").timeline.slashable_until(11);
		run_to_block(until + 1);
		assert_eq!((staked(1), staked(2), staked(3), staked(4)), (1_000, 1_000, 1_000, 1_000));
	});
}

#[test]
fn a_member_denied_a_payload_commits_a_smaller_set_and_is_not_leaked() {
	run_test(|| {
		// The attacker (member 4, 40 %) sends its payload to members 1 and 2 only (52 %) and
		// never commits; member 3 (8 %) commits the smaller set it could aggregate. 60 % committed
		// is short of ⅔, so no agreed set is fixed and member 3 cannot commit again. Its commit is
		// over another included set than the majority's: not judged.
		training_pool(1, two_thirds(), &[2_600, 2_600, 800, 4_000]);
		for who in [1, 2] {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2, 3]));
		}
		assert_ok!(commit(3, 1, 9, &[0, 1, 2]));
		run_to_block(11);
		assert!(Voided::<Test>::get(0, 1).is_some());
		assert!(!UnmatchedCommits::<Test>::contains_key((0, 1)));
		let until = TrainingPools::round_params(0).expect("pool").timeline.slashable_until(11);
		run_to_block(until + 1);
		assert_eq!((staked(1), staked(2), staked(3)), (2_600, 2_600, 800));
		assert_eq!(staked(4), 4_000 - 40, "the silent attacker is leaked");
	});
}

#[test]
fn a_withholder_copying_the_majority_after_the_deadline_is_leaked() {
	run_test(|| {
		// Member 3 (40 %) withholds. The deadline's queue entry is gone (as when the block's
		// list is full), so the round is still open at block 11: member 3 then tries to commit
		// the majority's pair, read from the chain. A commit after the deadline is refused: it
		// is silent when anyone voids the round.
		training_pool(1, two_thirds(), &[1_500, 1_500, 2_000]);
		for who in [1, 2] {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2]));
		}
		pallet_checkpoints::Deadlines::<Test>::remove(11);
		run_to_block(11);
		assert!(Voided::<Test>::get(0, 1).is_none());
		assert_noop!(
			commit(3, 1, 7, &[0, 1, 2]),
			pallet_checkpoints::Error::<Test>::DeadlinePassed
		);
		assert_ok!(Checkpoints::void_expired_round(RuntimeOrigin::signed(OUTSIDER), 0));
		assert!(Voided::<Test>::get(0, 1).is_some());
		assert_eq!(staked(3), 2_000 - 20);
		assert_eq!((staked(1), staked(2)), (1_500, 1_500));
	});
}

/// The attacker's best play against the leak: garbage over *another* included set than the
/// honest majority's, which an honest member denied a payload would also commit. Each round it
/// picks another set (a subset of the honest set, a superset with its own withheld payload, the
/// honest set less one member and plus its own) and commits before or after the honest members.
/// The honest members (69.8 %) hold ⅔, so their commits fix the agreed set, their own, ten
/// blocks before the deadline; with a quorum of 80 % they cannot finalize without the attacker
/// (30.2 %, under ⅓). After the set is fixed the chain takes a first commit over it only, so
/// the late garbage goes over the agreed set with another hash. Either way it is leaked like
/// silence and dropped, after which the honest members finalize.
#[test]
fn garbage_over_another_included_set_is_leaked_once_the_agreed_set_left_time_to_recommit() {
	run_test(garbage_over_other_sets_is_leaked);
}

/// The same attack in a pool whose round timeout (10 blocks) is shorter than the runtime's
/// `RecommitPeriod` (40 here, as in the runtime): measured against the runtime's period alone,
/// no agreed set was ever in time, so the garbage was never judged and the attacker voided
/// every round for fees. The period is at most half of the blocks a round accepts commits in
/// (`Timeline::recommit_blocks`: 5 here), so the honest set fixed at the opening is in time.
#[test]
fn garbage_over_another_set_is_leaked_in_a_pool_whose_timeout_is_shorter_than_the_recommit_period()
{
	run_test(|| {
		RecommitPeriod::set(&40);
		garbage_over_other_sets_is_leaked();
	});
}

fn garbage_over_other_sets_is_leaked() {
	{
		training_pool(12, Perbill::from_percent(80), &[1_000, 1_000, 1_000, 1_300]);
		let strategies: [(&[u32], bool); 4] =
			[(&[0, 1], true), (&[0, 1, 2, 3], false), (&[0, 2, 3], true), (&[1, 2], false)];
		let mut voided = 0;
		for round in 1..=12u32 {
			let snapshot = Checkpoints::round_snapshot(0, round);
			let honest: Vec<u32> =
				snapshot.iter().filter(|p| p.who != ATTACKER).map(|p| p.index).collect();
			let attacking = snapshot.iter().any(|p| p.who == ATTACKER);
			let (set, first) = strategies[(round as usize - 1) % strategies.len()];
			if attacking && first {
				assert_ok!(commit(ATTACKER, round, GARBAGE, set));
			}
			for who in 1..=3 {
				assert_ok!(commit(who, round, 10 + round as u8, &honest));
			}
			if attacking && !first {
				assert_noop!(
					commit(ATTACKER, round, GARBAGE, set),
					pallet_checkpoints::Error::<Test>::NotTheAgreedSet
				);
				assert_ok!(commit(ATTACKER, round, GARBAGE, &honest));
			}
			if FinalCheckpoints::<Test>::get(0, round).is_some() {
				break;
			}
			let open = Checkpoints::open_round(0).expect("open round");
			let agreed = AgreedSets::<Test>::get((0, round)).expect("the honest ⅔ fixed a set");
			assert_eq!(agreed.included.into_inner(), honest, "only the honest set is attested");
			let timeline = TrainingPools::round_params(0).expect("pool").timeline;
			assert!(
				agreed.fixed_at + timeline.recommit_blocks(RecommitPeriod::get()) < open.deadline
			);
			run_to_block(open.deadline);
			assert!(Voided::<Test>::get(0, round).is_some());
			voided += 1;
		}
		let leaks: Vec<_> = checkpoints_events()
			.into_iter()
			.filter_map(|e| match e {
				Event::UnmatchedCommitLeaked { round, who, leaked, .. } => {
					Some((round, who, leaked))
				},
				_ => None,
			})
			.collect();
		println!("{{\"voided_rounds\":{voided},\"attacker_leaks\":{}}}", leaks.len());
		// Rounds 1 and 2 (two strategies) leak 1 % of its 1 300 each and drop it
		// (`DropAfterMissed` = 2) once round 2's reports close; the honest members then finalize.
		assert!(leaks.len() >= 2, "its garbage over other sets is leaked: {leaks:?}");
		assert_eq!(leaks[..2], [(1, ATTACKER, 13), (2, ATTACKER, 13)]);
		assert!(leaks.iter().all(|(_, who, _)| *who == ATTACKER), "only the attacker");
		assert!(pools_events().iter().any(|e| matches!(
			e,
			pallet_training_pools::Event::MemberDropped { pool_id: 0, who: ATTACKER }
		)));
		assert!(voided < 12, "the pool finalizes again");
		assert_eq!((staked(1), staked(2), staked(3)), (1_000, 1_000, 1_000));
	}
}

/// An honest member denied a payload commits a smaller set; the commits of the others fix the
/// agreed set. It is judged only if the set left it the recommit period to commit over it,
/// one that does commit over it is present, and one that comes after a set fixed that late
/// may still commit its own.
#[test]
fn a_member_denied_a_payload_is_judged_only_if_the_agreed_set_left_it_time_to_recommit() {
	// Members 1 and 2 (55.6 %) commit {0, 1, 2}; member 3 (11.1 %), denied member 1's payload,
	// commits {0, 2}: their ⅔ fixes the agreed set {0, 1, 2} at member 3's commit. The silent
	// attacker (33.3 %) voids the round (quorum 80 %).
	let stakes = [1_500, 1_500, 600, 1_800];
	// Fixed 3 blocks before the deadline (11): no time left, member 3 is present.
	run_test(|| {
		training_pool(1, Perbill::from_percent(80), &stakes);
		for who in [1, 2] {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2]));
		}
		run_to_block(11 - RECOMMIT_PERIOD);
		assert_ok!(commit(3, 1, 9, &[0, 2]));
		let agreed = AgreedSets::<Test>::get((0, 1)).expect("⅔ committed");
		assert_eq!((agreed.included.into_inner(), agreed.fixed_at), (vec![0, 1, 2], 8));
		let until = TrainingPools::round_params(0).expect("pool").timeline.slashable_until(11);
		run_to_block(until + 1);
		assert!(Voided::<Test>::get(0, 1).is_some());
		assert_eq!((staked(1), staked(2), staked(3)), (1_500, 1_500, 600));
		assert_eq!(staked(ATTACKER), 1_800 - 18, "the silent attacker is leaked");
	});
	// Fixed at block 2 and member 3 commits over it: present. Had it stayed on {0, 2}, it
	// would be leaked (`…_is_leaked_once_the_agreed_set_left_time_to_recommit`).
	run_test(|| {
		training_pool(1, Perbill::from_percent(80), &stakes);
		run_to_block(2);
		for who in [1, 2] {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2]));
		}
		assert_ok!(commit(3, 1, 9, &[0, 2]));
		assert_eq!(AgreedSets::<Test>::get((0, 1)).map(|a| a.fixed_at), Some(2));
		run_to_block(10);
		assert_ok!(commit(3, 1, 7, &[0, 1, 2]));
		let until = TrainingPools::round_params(0).expect("pool").timeline.slashable_until(11);
		run_to_block(until + 1);
		assert!(Voided::<Test>::get(0, 1).is_some());
		assert!(!checkpoints_events()
			.iter()
			.any(|e| matches!(e, Event::UnmatchedCommitLeaked { .. })));
		assert_eq!((staked(1), staked(2), staked(3)), (1_500, 1_500, 600));
	});
	// Fixed at block 2 by members 1, 2 and the attacker's garbage; member 3 comes late, after
	// the fix: its own smaller set is refused (it could not be judged fairly, with no time to
	// commit again), and its commit over the agreed set is present.
	run_test(|| {
		training_pool(1, Perbill::from_percent(80), &stakes);
		run_to_block(2);
		for who in [1, 2] {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2]));
		}
		assert_ok!(commit(ATTACKER, 1, GARBAGE, &[0, 1, 2]));
		assert_eq!(AgreedSets::<Test>::get((0, 1)).map(|a| a.fixed_at), Some(2));
		run_to_block(10);
		assert_noop!(commit(3, 1, 9, &[0, 2]), pallet_checkpoints::Error::<Test>::NotTheAgreedSet);
		assert_ok!(commit(3, 1, 7, &[0, 1, 2]));
		let until = TrainingPools::round_params(0).expect("pool").timeline.slashable_until(11);
		run_to_block(until + 1);
		assert!(Voided::<Test>::get(0, 1).is_some());
		assert_eq!((staked(1), staked(2), staked(3)), (1_500, 1_500, 600));
		assert_eq!(staked(ATTACKER), 1_800 - 18, "its garbage over the agreed set is leaked");
	});
	// Fixed at block 8, 3 blocks before the deadline: too late to judge anything, so member
	// 3's first commit at block 9, over its own smaller set, is taken and not judged.
	run_test(|| {
		training_pool(1, Perbill::from_percent(80), &stakes);
		for who in [1, 2] {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2]));
		}
		run_to_block(11 - RECOMMIT_PERIOD);
		assert_ok!(commit(ATTACKER, 1, GARBAGE, &[0, 1, 2]));
		assert_eq!(AgreedSets::<Test>::get((0, 1)).map(|a| a.fixed_at), Some(8));
		run_to_block(9);
		assert_ok!(commit(3, 1, 9, &[0, 2]));
		let until = TrainingPools::round_params(0).expect("pool").timeline.slashable_until(11);
		run_to_block(until + 1);
		assert!(Voided::<Test>::get(0, 1).is_some());
		assert_eq!((staked(1), staked(2), staked(3)), (1_500, 1_500, 600));
	});
}
