//! Attack 10: unbounded parameters, and a creator who cancels to dodge paying the round in
//! flight.

use crate::mock::*;
use frame_support::{assert_noop, assert_ok};
use pallet_training_pools::{Error, Event, Pools};
use synod_primitives::PoolStatus;

#[test]
fn every_spec_field_is_bounded() {
	run_test(|| {
		// A floor of 100 inner steps per block: the 50 of `spec` need one block.
		Limits::set(&synod_primitives::protocol::SpecLimits {
			max_inner_steps_per_block: 100,
			..Limits::get()
		});
		let ok = edited(spec(3, 3, two_thirds()), |s| s.terms.min_round_length = 1);
		let cases: Vec<(pallet_training_pools::PoolSpec<Test>, Error<Test>)> = vec![
			(edited(ok.clone(), |s| s.terms.rounds = 0), Error::InvalidRounds),
			(edited(ok.clone(), |s| s.terms.rounds = 101), Error::InvalidRounds),
			(edited(ok.clone(), |s| diloco(s).inner_steps = 0), Error::InvalidInnerSteps),
			(edited(ok.clone(), |s| s.terms.max_trainers = 6), Error::InvalidTrainerBounds),
			(edited(ok.clone(), |s| s.terms.min_stake = 99), Error::InvalidMinStake),
			(
				edited(ok.clone(), |s| s.terms.reward_per_round = 1_000_001),
				Error::InvalidRewardPerRound,
			),
			(
				edited(ok.clone(), |s| s.terms.reward_per_round = u128::MAX),
				Error::InvalidRewardPerRound,
			),
			(
				edited(ok.clone(), |s| s.terms.quorum = sp_runtime::Perbill::from_percent(50)),
				Error::InvalidQuorum,
			),
			(edited(ok.clone(), |s| s.terms.round_timeout = 0), Error::InvalidRoundTimeout),
			(edited(ok.clone(), |s| s.terms.round_timeout = u64::MAX), Error::InvalidRoundTimeout),
			(edited(ok.clone(), |s| s.terms.challenge_window = 0), Error::InvalidChallengeWindow),
			(edited(ok.clone(), |s| s.terms.challenge_window = 101), Error::InvalidChallengeWindow),
			// 250 inner steps need 3 blocks.
			(
				edited(ok.clone(), |s| {
					diloco(s).inner_steps = 250;
					s.terms.min_round_length = 2;
				}),
				Error::InvalidMinRoundLength,
			),
			(edited(ok.clone(), |s| s.terms.min_round_length = 6), Error::InvalidMinRoundLength),
			(
				edited(ok.clone(), |s| {
					s.terms.allowed_trainers = frame_support::BoundedVec::truncate_from(vec![1, 2])
				}),
				Error::InvalidAllowedTrainers,
			),
			// Three entries, two accounts: the pool could never start.
			(
				edited(ok.clone(), |s| {
					s.terms.allowed_trainers =
						frame_support::BoundedVec::truncate_from(vec![1, 2, 1])
				}),
				Error::InvalidAllowedTrainers,
			),
		];
		// One inner step still needs a block: a round is never final in the block it opened.
		assert_noop!(
			TrainingPools::create_pool(
				RuntimeOrigin::signed(CREATOR),
				edited(ok.clone(), |s| {
					diloco(s).inner_steps = 1;
					s.terms.min_round_length = 0;
				})
			),
			Error::<Test>::InvalidMinRoundLength
		);
		for (bad, error) in cases {
			assert_noop!(TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), bad), error);
		}
		assert_ok!(TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), ok));
	});
}

#[test]
fn creator_cancel_still_pays_the_round_in_flight() {
	run_test(|| {
		training_pool(3, two_thirds(), &[1_000, 1_000, 1_000]);
		assert_ok!(commit(1, 1, 7, &[0, 1, 2]));
		// The creator cancels while round 1 is being committed…
		assert_ok!(TrainingPools::cancel_pool(RuntimeOrigin::signed(CREATOR), 0));
		assert!(pools_events().contains(&Event::CancelRequested { pool_id: 0, last_round: 1 }));
		assert_eq!(Pools::<Test>::get(0).expect("pool").status, PoolStatus::Training);
		assert_noop!(
			TrainingPools::cancel_pool(RuntimeOrigin::signed(CREATOR), 0),
			Error::<Test>::PoolEnded
		);
		// …the round in flight still becomes final, and then the pool ends.
		assert_ok!(commit(2, 1, 7, &[0, 1, 2]));
		assert_eq!(Pools::<Test>::get(0).expect("pool").status, PoolStatus::Cancelled);
		assert!(pallet_checkpoints::OpenRounds::<Test>::get(0).is_none(), "no round 2");
		run_to_block(34);
		assert_eq!(pallet_rewards::Claimable::<Test>::get(0, 1), 500);
		assert_eq!(pallet_rewards::Claimable::<Test>::get(0, 2), 500);
	});
}
