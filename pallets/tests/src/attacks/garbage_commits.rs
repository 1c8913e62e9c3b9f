//! A garbage-committing blocking minority: members holding more than 1 − quorum of the stake
//! commit random hashes, so no candidate reaches quorum and every round is voided, yet they are
//! not silent. A commit of another hash over the included set of the candidate a strict
//! majority of the snapshot stake committed counts as a missed round at the void and is leaked
//! like silence once the round's equivocation reports close, unless an equivocation was proved
//! in the round (then honest members split over an equivocator's two payloads committed two
//! hashes, and none of them is leaked). A commit over another included set is not judged: an
//! honest member that was denied a payload commits a smaller set.

use super::split;
use crate::mock::*;
use frame_support::assert_ok;
use pallet_checkpoints::{Event, FinalCheckpoints, UnmatchedCommits, Voided};
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
		// list is full), so the round is still open at block 11: member 3 then commits the
		// majority's pair, read from the chain, which voids the round. A commit after the
		// deadline is not recorded: it is silent.
		training_pool(1, two_thirds(), &[1_500, 1_500, 2_000]);
		for who in [1, 2] {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2]));
		}
		pallet_checkpoints::Deadlines::<Test>::remove(11);
		run_to_block(11);
		assert!(Voided::<Test>::get(0, 1).is_none());
		assert_ok!(commit(3, 1, 7, &[0, 1, 2]));
		assert!(Voided::<Test>::get(0, 1).is_some());
		assert_eq!(staked(3), 2_000 - 20);
		assert_eq!((staked(1), staked(2)), (1_500, 1_500));
	});
}
