//! Attack 1: a party below quorum finalizes a checkpoint nobody trained, by committing for the
//! next round ahead of time with stake it then withdraws from the pool.

use crate::mock::*;
use frame_support::{assert_noop, assert_ok};
use pallet_checkpoints::{Error, FinalCheckpoints, OpenRounds};

#[test]
fn below_quorum_party_cannot_finalize() {
	run_test(|| {
		// Three honest members of 1 000; quorum ⅔.
		training_pool(3, two_thirds(), &[1_000, 1_000, 1_000]);
		// The attacker joins during round 1 with 5 000 (member from round 2), commits a hash
		// nobody trained for round 2, and leaves before round 2 opens.
		bond_and_join(4, 0, 5_000);
		assert_ok!(commit(4, 2, 0xEE, &[3]));
		assert_ok!(TrainingPools::leave_pool(RuntimeOrigin::signed(4), 0));
		// Round 1 becomes final; round 2 opens with the honest snapshot only.
		for who in 1..=3 {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2]));
		}
		let open = OpenRounds::<Test>::get(0).expect("round 2 open");
		assert_eq!((open.round, open.round_stake), (2, 3_000));
		assert!(
			FinalCheckpoints::<Test>::get(0, 2).is_none(),
			"the leaver's early commit does not count: it is not in round 2's snapshot"
		);
		assert_eq!(
			Checkpoints::round_snapshot(0, 2).iter().map(|p| p.who).collect::<Vec<_>>(),
			vec![1, 2, 3]
		);
		// The honest members finalize their own checkpoint; the attacker is no contributor.
		assert_ok!(commit(1, 2, 8, &[0, 1, 2]));
		assert_ok!(commit(2, 2, 8, &[0, 1, 2]));
		let fin = FinalCheckpoints::<Test>::get(0, 2).expect("final");
		assert_eq!(fin.hash, [8; 32]);
		assert_eq!(fin.contributors.to_vec(), vec![1, 2]);
	});
}

#[test]
fn only_snapshot_participants_move_the_open_round() {
	run_test(|| {
		training_pool(3, two_thirds(), &[1_000, 1_000, 1_000]);
		// Joins during round 1: may commit for round 2 ahead of time, not for round 1.
		bond_and_join(4, 0, 5_000);
		assert_noop!(commit(4, 1, 0xEE, &[0, 1, 2, 3]), Error::<Test>::NotYetMember);
		assert_noop!(commit(OUTSIDER, 1, 0xEE, &[0]), Error::<Test>::NotMember);
		// A member that leaves mid-round stays in the round's snapshot: its commit still counts
		// for the round it trained, with the stake it had when the round opened.
		assert_ok!(TrainingPools::leave_pool(RuntimeOrigin::signed(3), 0));
		assert_ok!(commit(3, 1, 7, &[0, 1, 2]));
		assert_ok!(commit(1, 1, 7, &[0, 1, 2]));
		let fin = FinalCheckpoints::<Test>::get(0, 1).expect("2 000 of 3 000");
		assert_eq!(fin.contributors.to_vec(), vec![1, 3]);
	});
}

#[test]
fn quorum_threshold_rounds_up_so_dust_cannot_decide() {
	run_test(|| {
		// ⅔ + 1 ppb of 3 000 is 2 000.000001: two of three equal stakes are not enough.
		training_pool(3, sp_runtime::Perbill::from_parts(666_666_667), &[1_000, 1_000, 1_000]);
		assert_ok!(commit(1, 1, 7, &[0, 1, 2]));
		assert_ok!(commit(2, 1, 7, &[0, 1, 2]));
		assert!(
			FinalCheckpoints::<Test>::get(0, 1).is_none(),
			"mul_floor would have said 2 000 ≥ 2 000"
		);
		assert_ok!(commit(3, 1, 7, &[0, 1, 2]));
		assert!(FinalCheckpoints::<Test>::get(0, 1).is_some());
	});
}

#[test]
fn slashed_member_loses_quorum_weight() {
	run_test(|| {
		training_pool(4, two_thirds(), &[1_000, 1_000, 1_000]);
		// Member 3 is slashed down to 100 of bonded stake (e.g. convicted elsewhere).
		use synod_primitives::TrainerStake;
		assert_eq!(<TrainerStaking as TrainerStake<_>>::slash(&3, 900, None), 900);
		for who in 1..=3 {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2]));
		}
		// Round 2's snapshot weighs it by what it still has bonded.
		assert_eq!(OpenRounds::<Test>::get(0).expect("open").round_stake, 2_100);
		let weights: Vec<u128> =
			Checkpoints::round_snapshot(0, 2).iter().map(|p| p.stake).collect();
		assert_eq!(weights, vec![1_000, 1_000, 100]);
	});
}
