//! Stake reuse across live snapshots. A round's snapshot freezes its participants' stake when
//! the round opens, and the quorum and the leak are weighed against it. If leaving a pool freed
//! the commitment at once while the open round's snapshot kept counting it, the same stake
//! could back one live snapshot after another, in as many pools as the attacker cared to join
//! and leave, past `MaxPoolsPerTrainer` and past "committed ≤ active". Freeing it at the round's
//! deadline is not enough either: the round stays disputable (its stake slashable) until it is
//! settled, and a stake freed at the deadline would back the next pool's snapshot meanwhile. A
//! leaver's stake stays committed until the round it left is settled, and so does a member's
//! when its pool ends (completed or cancelled) with it in a round's snapshot: the pool's last
//! rounds are still disputable.

use crate::mock::*;
use frame_support::{assert_noop, assert_ok};
use pallet_checkpoints::Snapshots;
use pallet_training_pools::Error;
use synod_primitives::PoolsInterface;

/// A one-member pool (it starts, and its round 1 opens, when `who` joins it with `stake`).
fn solo_pool(who: AccountId, stake: Balance) -> u32 {
	let pool = pallet_training_pools::NextPoolId::<Test>::get();
	assert_ok!(TrainingPools::create_pool(
		RuntimeOrigin::signed(CREATOR),
		spec(3, 1, two_thirds())
	));
	assert_ok!(join(who, pool, stake));
	pool
}

/// Creates a one-member pool and shows that `who`'s `stake`, still committed elsewhere, can
/// neither join it nor be unbonded (not even 1 planck); returns the new pool.
fn second_pool_refuses_the_stake(who: AccountId, stake: Balance) -> u32 {
	let pool = pallet_training_pools::NextPoolId::<Test>::get();
	assert_ok!(TrainingPools::create_pool(
		RuntimeOrigin::signed(CREATOR),
		spec(3, 1, two_thirds())
	));
	assert_noop!(join(who, pool, stake), Error::<Test>::InsufficientStake);
	assert_noop!(
		TrainerStaking::unbond(RuntimeOrigin::signed(who), 1),
		pallet_trainer_staking::Error::<Test>::StakeCommitted
	);
	pool
}

/// The stake `who` holds in round `round`'s snapshot of `pool`.
fn snapshot_stake(pool: u32, round: u32, who: AccountId) -> Balance {
	Snapshots::<Test>::get((pool, round))
		.unwrap_or_default()
		.iter()
		.filter(|p| p.who == who)
		.map(|p| p.stake)
		.sum()
}

/// The block at which the round open when a member left `pool` at block `left_at` is settled:
/// its stake is committed until then.
fn settled(pool: u32, left_at: u64) -> u64 {
	TrainingPools::round_params(pool).expect("pool").timeline.settled_by(left_at)
}

#[test]
fn left_stake_cannot_back_a_second_live_snapshot_before_the_round_it_left_is_settled() {
	run_test(|| {
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(1), 1_000));
		let first = solo_pool(1, 1_000);
		assert_eq!(snapshot_stake(first, 1, 1), 1_000);
		// The attacker leaves while round 1 is open: its snapshot still counts the 1 000…
		assert_ok!(TrainingPools::leave_pool(RuntimeOrigin::signed(1), first));
		assert_eq!(snapshot_stake(first, 1, 1), 1_000);
		// …so the same stake cannot join a second pool's live round, nor be unbonded.
		let second = second_pool_refuses_the_stake(1, 1_000);
		// Round 1 opened at block 1 and its deadline is block 11, but the round stays
		// disputable, its stake slashable, until it is settled: the stake is committed until
		// then, and free after.
		let until = settled(first, 1);
		assert!(until > 11);
		run_to_block(12);
		assert_noop!(join(1, second, 1_000), Error::<Test>::InsufficientStake);
		run_to_block(until);
		assert_noop!(join(1, second, 1_000), Error::<Test>::InsufficientStake);
		run_to_block(until + 1);
		// (The voided round leaked the silent leaver: what is left of its stake is free.)
		let left = staked(1);
		assert!(left < 1_000);
		assert_ok!(join(1, second, left));
		assert_eq!(snapshot_stake(second, 1, 1), left);
		assert!(pallet_training_pools::LeftCommitments::<Test>::get(1, first).is_none());
	});
}

#[test]
fn joining_and_leaving_cannot_pass_the_pools_per_trainer_bound() {
	run_test(|| {
		// `MaxPoolsPerTrainer` is 2: the attacker joins and leaves pool after pool, 100 each.
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(1), 1_000));
		for _ in 0..2 {
			let pool = solo_pool(1, 100);
			assert_ok!(TrainingPools::leave_pool(RuntimeOrigin::signed(1), pool));
		}
		assert_ok!(TrainingPools::create_pool(
			RuntimeOrigin::signed(CREATOR),
			spec(3, 1, two_thirds())
		));
		let third = pallet_training_pools::NextPoolId::<Test>::get() - 1;
		assert_noop!(join(1, third, 100), Error::<Test>::TooManyPools);
		assert_eq!(<TrainingPools as synod_primitives::StakeCommitments<_, _>>::committed(&1), 200);
		// Once the rounds it left are settled, the places are free again.
		run_to_block(12);
		assert_noop!(join(1, third, 100), Error::<Test>::TooManyPools);
		run_to_block(settled(third - 1, 1) + 1);
		assert_ok!(join(1, third, 100));
		assert_eq!(pallet_training_pools::TrainerPools::<Test>::get(1).into_inner(), vec![third]);
	});
}

#[test]
fn leaving_before_a_round_counts_the_stake_frees_it_at_once() {
	run_test(|| {
		// An Open pool (two trainers needed) has no snapshot: leaving frees the stake.
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(1), 1_000));
		assert_ok!(TrainingPools::create_pool(
			RuntimeOrigin::signed(CREATOR),
			spec(3, 2, two_thirds())
		));
		assert_ok!(join(1, 0, 1_000));
		assert_ok!(TrainingPools::leave_pool(RuntimeOrigin::signed(1), 0));
		assert_eq!(<TrainingPools as synod_primitives::StakeCommitments<_, _>>::committed(&1), 0);
		assert_ok!(TrainerStaking::unbond(RuntimeOrigin::signed(1), 1_000));
	});
}

#[test]
fn stake_of_an_ended_pool_cannot_back_another_live_snapshot_before_its_last_round_is_settled() {
	run_test(|| {
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(1), 1_000));
		// A one-round pool: its round 1 final completes it.
		let first = pallet_training_pools::NextPoolId::<Test>::get();
		assert_ok!(TrainingPools::create_pool(
			RuntimeOrigin::signed(CREATOR),
			spec(1, 1, two_thirds())
		));
		assert_ok!(join(1, first, 1_000));
		assert_ok!(commit_to(first, 1, 1, 7, &[0]));
		let ended_at = System::block_number();
		assert!(TrainingPools::round_params(first).expect("pool").status.has_ended());
		// Round 1 can still be challenged and its stake slashed: the stake joins no other
		// pool's snapshot and is not unbonded until the round is settled.
		let second = second_pool_refuses_the_stake(1, 1_000);
		let until = settled(first, ended_at);
		run_to_block(until);
		assert_noop!(join(1, second, 1_000), Error::<Test>::InsufficientStake);
		run_to_block(until + 1);
		assert_ok!(join(1, second, 1_000));
		assert_eq!(snapshot_stake(second, 1, 1), 1_000);
	});
}

#[test]
fn a_left_commitment_that_expired_is_not_revived_by_a_later_leave() {
	run_test(|| {
		// Member 1 leaves a two-member pool in round 1 (its 1 000 committed until round 1 is
		// settled), joins it again at once with 500, and leaves again after round 1 is
		// settled: only the 500 of the round it left last stay committed.
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(1), 2_000));
		let pool = pallet_training_pools::NextPoolId::<Test>::get();
		assert_ok!(TrainingPools::create_pool(
			RuntimeOrigin::signed(CREATOR),
			spec(20, 2, two_thirds())
		));
		bond_and_join(2, pool, 1_000);
		assert_ok!(join(1, pool, 1_000));
		assert_eq!(snapshot_stake(pool, 1, 1), 1_000);
		assert_ok!(TrainingPools::leave_pool(RuntimeOrigin::signed(1), pool));
		assert_ok!(join(1, pool, 500));
		let first_until = settled(pool, 1);
		// The rounds go on, every one final late in its window, past round 1's settlement.
		while System::block_number() <= first_until {
			let open = Checkpoints::open_round(pool).expect("an open round");
			run_to_block(open.deadline - 1);
			for who in [1, 2] {
				assert_ok!(commit_to(pool, who, open.round, 7, &[0, 1]));
			}
		}
		assert_eq!(
			snapshot_stake(pool, Checkpoints::open_round(pool).expect("open").round, 1),
			500
		);
		assert_ok!(TrainingPools::leave_pool(RuntimeOrigin::signed(1), pool));
		let left = pallet_training_pools::LeftCommitments::<Test>::get(1, pool).expect("left");
		assert_eq!(left.stake, 500, "the settled round's 1 000 is not revived");
		assert_eq!(<TrainingPools as synod_primitives::StakeCommitments<_, _>>::committed(&1), 500);
		assert_ok!(TrainerStaking::unbond(RuntimeOrigin::signed(1), 1_500));
	});
}
