//! Unit tests: commits, quorum edge cases (exactly at quorum, split vote, timeout), optimistic
//! next-round commits, late contributors, divergence, every error. `try_state` runs after each.

use crate::{mock::*, pallet::*, Error, Event};
use frame_support::{assert_noop, assert_ok};
use sp_runtime::Perbill;
use synod_primitives::{CheckpointsInspect, PoolStatus};

fn events() -> Vec<Event<Test>> {
	checkpoints_events()
}

/// `(pool, round, finalized_at)` of every finalization so far.
fn finalized() -> Vec<(u32, u32, u64)> {
	events()
		.into_iter()
		.filter_map(|e| match e {
			Event::CheckpointFinalized { pool_id, round, .. } => {
				FinalCheckpoints::<Test>::get(pool_id, round)
					.map(|f| (pool_id, round, f.finalized_at))
			},
			_ => None,
		})
		.collect()
}

#[test]
fn training_start_opens_round_one() {
	run_test(|| {
		training_pool(3, two_thirds(), &[1_000, 1_000, 1_000]);
		let open = OpenRounds::<Test>::get(0).unwrap();
		assert_eq!((open.round, open.deadline, open.round_stake), (1, 11, 3_000));
		assert_eq!(Deadlines::<Test>::get(11).to_vec(), vec![(0, 1)]);
	});
}

#[test]
fn exactly_at_quorum_finalizes() {
	run_test(|| {
		training_pool(3, two_thirds(), &[1_000, 1_000, 1_000]);
		assert_ok!(commit(1, 1, 7, &[0, 1, 2]));
		assert!(FinalCheckpoints::<Test>::get(0, 1).is_none(), "1/3 is below quorum");
		System::set_block_number(3);
		assert_ok!(commit(2, 1, 7, &[0, 1, 2]));
		let fin = FinalCheckpoints::<Test>::get(0, 1).expect("2/3 of the stake is exactly quorum");
		assert_eq!(fin.hash, [7; 32]);
		assert_eq!(fin.parent, [0xAA; 32], "round 1's parent is the initial weights");
		assert_eq!(fin.contributors.to_vec(), vec![1, 2]);
		assert_eq!((fin.finalized_at, fin.committed_stake, fin.round_stake), (3, 2_000, 3_000));
		assert_eq!(LastFinal::<Test>::get(0), Some((1, [7; 32])));
		assert_eq!(finalized(), vec![(0, 1, 3)]);
		assert!(events().contains(&Event::CheckpointFinalized {
			pool_id: 0,
			round: 1,
			hash: [7; 32],
			parent: [0xAA; 32],
			contributors: vec![1, 2].try_into().unwrap(),
		}));
		// The pool moved on.
		assert_eq!(OpenRounds::<Test>::get(0).unwrap().round, 2);
		assert_eq!(pallet_training_pools::Pools::<Test>::get(0).unwrap().current_round, 2);
		let view = <Checkpoints as CheckpointsInspect<_, _>>::final_checkpoint(0, 1).unwrap();
		let who: Vec<(u32, u64, u128)> =
			view.contributors.iter().map(|p| (p.index, p.who, p.stake)).collect();
		assert_eq!(who, vec![(0, 1, 1_000), (1, 2, 1_000)], "with their snapshot stake");
		assert_eq!(Checkpoints::last_final_checkpoint(0).unwrap().0, 1);
	});
}

#[test]
fn just_below_quorum_waits_for_more_stake() {
	run_test(|| {
		// Quorum 3/4 of 3_000: 2_000 is not enough.
		training_pool(3, Perbill::from_percent(75), &[1_000, 1_000, 1_000]);
		assert_ok!(commit(1, 1, 7, &[0, 1, 2]));
		assert_ok!(commit(2, 1, 7, &[0, 1, 2]));
		assert!(FinalCheckpoints::<Test>::get(0, 1).is_none());
		assert_ok!(commit(3, 1, 7, &[0, 1, 2]));
		assert!(FinalCheckpoints::<Test>::get(0, 1).is_some());
	});
}

#[test]
fn stake_weights_the_vote() {
	run_test(|| {
		training_pool(3, two_thirds(), &[4_000, 1_000, 1_000]);
		// Two small members agreeing are a third of the stake.
		assert_ok!(commit(2, 1, 9, &[0, 1, 2]));
		assert_ok!(commit(3, 1, 9, &[0, 1, 2]));
		assert!(FinalCheckpoints::<Test>::get(0, 1).is_none());
		// The big member alone (2/3 of the stake) is quorum.
		assert_ok!(commit(1, 1, 7, &[0, 1, 2]));
		let fin = FinalCheckpoints::<Test>::get(0, 1).unwrap();
		assert_eq!(fin.hash, [7; 32]);
		assert_eq!(fin.contributors.to_vec(), vec![1]);
		let divergent = Divergent::<Test>::get((0, 1)).to_vec();
		assert_eq!(divergent, vec![(2, [9; 32]), (3, [9; 32])]);
	});
}

#[test]
fn split_vote_is_voided_at_the_deadline() {
	run_test(|| {
		training_pool(3, two_thirds(), &[1_000, 1_000, 1_000]);
		// Same hash but a different included set is a different candidate. Once ⅔ committed,
		// the agreed set is {0, 1} (member 2 attested by a third only), so member 2 commits
		// over it.
		assert_ok!(commit(3, 1, 7, &[0, 1]));
		assert_ok!(commit(1, 1, 7, &[0, 1, 2]));
		assert_ok!(commit(2, 1, 8, &[0, 1]));
		run_to_block(10);
		assert!(Voided::<Test>::get(0, 1).is_none());
		run_to_block(11);
		assert_eq!(Voided::<Test>::get(0, 1), Some(11));
		assert!(events().contains(&Event::RoundVoided { pool_id: 0, round: 1 }));
		assert!(finalized().is_empty());
		// Round 2 opened at 11; its parent will still be the initial weights.
		let open = OpenRounds::<Test>::get(0).unwrap();
		assert_eq!((open.round, open.deadline), (2, 21));
		// Its records are pruned; the round is closed.
		assert!(Commits::<Test>::iter_prefix((0, 1)).next().is_none());
		assert_noop!(commit(1, 1, 7, &[0, 1, 2]), Error::<Test>::RoundClosed);
		assert_ok!(commit(1, 2, 5, &[0, 1, 2]));
		assert_ok!(commit(2, 2, 5, &[0, 1, 2]));
		assert_eq!(FinalCheckpoints::<Test>::get(0, 2).unwrap().parent, [0xAA; 32]);
	});
}

#[test]
fn timeout_without_commits_voids_and_last_round_completes_pool() {
	run_test(|| {
		training_pool(2, two_thirds(), &[1_000, 1_000]);
		run_to_block(11);
		run_to_block(21);
		assert!(Voided::<Test>::get(0, 1).is_some() && Voided::<Test>::get(0, 2).is_some());
		assert_eq!(
			pallet_training_pools::Pools::<Test>::get(0).unwrap().status,
			PoolStatus::Completed
		);
		assert!(OpenRounds::<Test>::get(0).is_none());
		assert_noop!(commit(1, 3, 5, &[0, 1]), Error::<Test>::PoolNotTraining);
	});
}

#[test]
fn next_round_commits_count_when_it_opens() {
	run_test(|| {
		training_pool(3, two_thirds(), &[1_000, 1_000, 1_000]);
		// Trainers 1 and 2 finish round 2 before round 1 is final on-chain.
		assert_ok!(commit(1, 1, 7, &[0, 1, 2]));
		assert_ok!(commit(1, 2, 8, &[0, 1, 2]));
		assert_ok!(commit(2, 2, 8, &[0, 1, 2]));
		assert!(FinalCheckpoints::<Test>::get(0, 2).is_none());
		assert_noop!(commit(1, 3, 9, &[0, 1, 2]), Error::<Test>::RoundNotOpen);
		// Round 1 finalizes, round 2 opens and is final at once.
		assert_ok!(commit(2, 1, 7, &[0, 1, 2]));
		let fin2 = FinalCheckpoints::<Test>::get(0, 2).unwrap();
		assert_eq!(fin2.parent, [7; 32]);
		assert_eq!(OpenRounds::<Test>::get(0).unwrap().round, 3);
	});
}

#[test]
fn late_contributor_is_added_within_the_window() {
	run_test(|| {
		training_pool(3, two_thirds(), &[1_000, 1_000, 1_000]);
		assert_ok!(commit(1, 1, 7, &[0, 1, 2]));
		assert_ok!(commit(2, 1, 7, &[0, 1, 2])); // final at block 1
		System::set_block_number(6);
		assert_ok!(commit(3, 1, 7, &[0, 1, 2]));
		assert_eq!(
			FinalCheckpoints::<Test>::get(0, 1).unwrap().contributors.to_vec(),
			vec![1, 2, 3]
		);
		assert!(events().contains(&Event::LateContributorAdded { pool_id: 0, round: 1, who: 3 }));
	});
}

#[test]
fn late_divergent_commit_is_recorded_and_window_closes() {
	run_test(|| {
		training_pool(3, two_thirds(), &[1_000, 1_000, 1_000]);
		assert_ok!(commit(1, 1, 7, &[0, 1, 2]));
		assert_ok!(commit(2, 1, 7, &[0, 1, 2]));
		assert_ok!(commit(3, 1, 9, &[0, 1, 2]));
		assert_eq!(Divergent::<Test>::get((0, 1)).to_vec(), vec![(3, [9; 32])]);
		assert_eq!(FinalCheckpoints::<Test>::get(0, 1).unwrap().contributors.len(), 2);
	});
	run_test(|| {
		training_pool(3, two_thirds(), &[1_000, 1_000, 1_000]);
		assert_ok!(commit(1, 1, 7, &[0, 1, 2]));
		assert_ok!(commit(2, 1, 7, &[0, 1, 2]));
		System::set_block_number(7); // finalized at 1, window 5
							   // Past the window, until settlement: recorded (the member is present), not paid.
		assert_ok!(commit(3, 1, 7, &[0, 1, 2]));
		assert_eq!(FinalCheckpoints::<Test>::get(0, 1).unwrap().contributors.len(), 2);
		assert!(!events().iter().any(|e| matches!(e, Event::LateContributorAdded { .. })));
		assert!(Commits::<Test>::contains_key((0, 1), 3));
	});
	run_test(|| {
		training_pool(3, two_thirds(), &[1_000, 1_000, 1_000]);
		assert_ok!(commit(1, 1, 7, &[0, 1, 2]));
		assert_ok!(commit(2, 1, 7, &[0, 1, 2]));
		System::set_block_number(7);
		// Once the round is settled (its snapshot pruned), nothing is recorded any more.
		<Checkpoints as synod_primitives::OnRoundSettled>::round_settled(0, 1);
		assert_noop!(commit(3, 1, 7, &[0, 1, 2]), Error::<Test>::RoundClosed);
	});
}

#[test]
fn excluded_committer_is_not_a_contributor() {
	run_test(|| {
		training_pool(3, two_thirds(), &[1_000, 1_000, 1_000]);
		// Member 2 (trainer 3) was not included by the others: it agrees but is not paid.
		assert_ok!(commit(1, 1, 7, &[0, 1]));
		assert_ok!(commit(3, 1, 7, &[0, 1]));
		let fin = FinalCheckpoints::<Test>::get(0, 1).unwrap();
		assert_eq!(fin.contributors.to_vec(), vec![1]);
	});
}

#[test]
fn commit_errors() {
	run_test(|| {
		assert_noop!(commit(1, 1, 7, &[0]), Error::<Test>::PoolNotFound);
		training_pool(3, two_thirds(), &[1_000, 1_000]);
		assert_noop!(commit(5, 1, 7, &[0]), Error::<Test>::NotMember);
		assert_noop!(commit(1, 1, 7, &[]), Error::<Test>::InvalidIncludedSet);
		assert_noop!(commit(1, 1, 7, &[1, 0]), Error::<Test>::InvalidIncludedSet);
		assert_noop!(commit(1, 1, 7, &[1, 1]), Error::<Test>::InvalidIncludedSet);
		assert_noop!(commit(1, 3, 7, &[0]), Error::<Test>::RoundNotOpen);
		assert_ok!(commit(1, 1, 7, &[0, 1]));
		assert_noop!(commit(1, 1, 7, &[0, 1]), Error::<Test>::AlreadyCommitted);
		// Trainer 3 joins during round 1: a member from round 2.
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(3), 1_000));
		assert_ok!(join(3, 0, 1_000));
		assert_noop!(commit(3, 1, 7, &[0, 1]), Error::<Test>::NotYetMember);
		run_to_block(11); // round 1 voided
		assert_noop!(commit(2, 1, 7, &[0, 1]), Error::<Test>::RoundClosed);
		assert_noop!(
			Checkpoints::commit_checkpoint(RuntimeOrigin::none(), 0, 2, [0; 32], included(&[0])),
			sp_runtime::DispatchError::BadOrigin
		);
	});
}

#[test]
fn open_round_counts_only_participating_members() {
	run_test(|| {
		training_pool(3, two_thirds(), &[1_000, 1_000]);
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(3), 4_000));
		assert_ok!(join(3, 0, 4_000));
		assert_eq!(OpenRounds::<Test>::get(0).unwrap().round_stake, 2_000);
		assert_ok!(commit(1, 1, 7, &[0, 1]));
		assert_ok!(commit(2, 1, 7, &[0, 1]));
		assert_eq!(OpenRounds::<Test>::get(0).unwrap().round_stake, 6_000);
	});
}

#[test]
fn deadlines_spill_to_the_next_block_when_full() {
	run_test(|| {
		// MaxDeadlinesPerBlock is 2: the third pool opening in the same block is due one later.
		for pool in 0..3u32 {
			assert_ok!(TrainingPools::create_pool(
				RuntimeOrigin::signed(CREATOR),
				spec(1, 1, two_thirds())
			));
			let who = pool as u64 + 1;
			assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(who), 1_000));
			assert_ok!(join(who, pool, 1_000));
		}
		assert_eq!(Deadlines::<Test>::get(11).len(), 2);
		assert_eq!(Deadlines::<Test>::get(12).to_vec(), vec![(2, 1)]);
		run_to_block(12);
		assert!((0..3).all(|p| Voided::<Test>::get(p, 1).is_some()));
	});
}
