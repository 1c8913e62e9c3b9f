//! Unit tests: reservation, settlement after the challenge window, the reward split and its
//! dust, guilty contributors, missed rounds, claims, budget conservation over a whole pool.
//! Settlement is due at `finalized_at + 2·W + jury delay + voting period + 1` = `f + 33` here.
//! `try_state` of all five pallets runs after every test.

use crate::{mock::*, pallet::*, Error, Event};
use frame_support::{assert_noop, assert_ok, traits::fungible::InspectHold};
use sp_runtime::Perbill;
use synod_primitives::PoolStatus;

fn events() -> Vec<Event<Test>> {
	rewards_events()
}

fn budget_held() -> Balance {
	Balances::balance_on_hold(
		&RuntimeHoldReason::TrainingPools(pallet_training_pools::HoldReason::PoolBudget),
		&CREATOR,
	)
}

fn three_trainers() {
	training_pool(3, Perbill::from_rational(2u32, 3u32), &[1_000; 3]);
}

#[test]
fn finality_reserves_and_schedules_settlement() {
	run_test(|| {
		three_trainers();
		System::set_block_number(4);
		assert_ok!(commit(1, 1, 7, &[0, 1, 2]));
		assert_ok!(commit(2, 1, 7, &[0, 1, 2]));
		// 4 + 2·5 + 2 + (10 + 10) + 1.
		assert_eq!(
			Unsettled::<Test>::get(0, 1),
			Some(PendingRound { reserved: 1_000, settle_at: 37, scheduled: true })
		);
		assert_eq!(Settlements::<Test>::get(37).to_vec(), vec![(0, 1)]);
		assert_eq!(pallet_training_pools::Pools::<Test>::get(0).unwrap().budget_reserved, 1_000);
		assert!(events().contains(&Event::RewardReserved {
			pool_id: 0,
			round: 1,
			reserved: 1_000,
			settle_at: 37
		}));
	});
}

#[test]
fn settlement_splits_equally_and_returns_dust() {
	run_test(|| {
		three_trainers();
		for who in 1..=3 {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2]));
		}
		run_to_block(33);
		assert_eq!(Claimable::<Test>::get(0, 1), 0, "not before the challenge window and votes");
		run_to_block(34);
		for who in 1..=3 {
			assert_eq!(Claimable::<Test>::get(0, who), 333);
			assert_eq!(Rewards::claimable(0, who), 333);
		}
		assert!(events().contains(&Event::RoundSettled {
			pool_id: 0,
			round: 1,
			paid: 999,
			credited: 3,
			returned: 1
		}));
		let before = Balances::free_balance(2);
		assert_ok!(Rewards::claim_rewards(RuntimeOrigin::signed(2), 0));
		assert_eq!(Balances::free_balance(2), before + 333);
		assert_eq!(Claimable::<Test>::get(0, 2), 0);
		assert_eq!(
			events().last(),
			Some(&Event::RewardsClaimed { pool_id: 0, who: 2, amount: 333 })
		);
		assert_noop!(
			Rewards::claim_rewards(RuntimeOrigin::signed(2), 0).map_err(|e| e.error),
			Error::<Test>::NothingToClaim
		);
	});
}

#[test]
fn guilty_contributor_is_not_paid() {
	run_test(|| {
		final_round(); // trainers 1..=5 contribute to round 1 at block 1
		jurors(&[1, 2, 4], 1_000);
		opt_out(&[3, 5]); // the jurors are 1, 2 and 4
		assert_ok!(open_challenge(OUTSIDER, 0, 1, 3, [0; 32])); // at block 7, late commits over
		run_to_block(9); // the jury is drawn
		let jury = pallet_challenges::OpenChallenges::<Test>::get(0).unwrap().jury.to_vec();
		for seated in &jury[..2] {
			assert_ok!(pallet_challenges::Pallet::<Test>::vote(
				RuntimeOrigin::signed(seated.who),
				0,
				true
			));
		}
		run_to_block(34);
		// Shares over all five contributors: the guilty one's 200 returns to the budget.
		assert_eq!(Claimable::<Test>::get(0, 3), 0);
		for who in [1, 2, 4, 5] {
			assert_eq!(Claimable::<Test>::get(0, who), 200);
		}
		assert!(events().contains(&Event::RoundSettled {
			pool_id: 0,
			round: 1,
			paid: 800,
			credited: 4,
			returned: 200
		}));
	});
}

#[test]
fn innocent_or_expired_accused_is_paid() {
	run_test(|| {
		final_round();
		assert_ok!(open_challenge(OUTSIDER, 0, 1, 3, [0; 32]));
		// No juror registered: no verdict at the draw (block 9), long before settlement at 34.
		run_to_block(34);
		assert_eq!(Claimable::<Test>::get(0, 3), 200);
	});
}

#[test]
fn member_missing_rounds_is_paid_only_for_its_rounds() {
	run_test(|| {
		three_trainers();
		for who in 1..=3 {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2]));
		}
		// Trainer 3 died after round 1: the others exclude it and keep quorum (2/3).
		run_to_block(3);
		assert_ok!(commit(1, 2, 8, &[0, 1]));
		assert_ok!(commit(2, 2, 8, &[0, 1]));
		run_to_block(5);
		assert_ok!(commit(1, 3, 9, &[0, 1]));
		assert_ok!(commit(2, 3, 9, &[0, 1]));
		assert_eq!(
			pallet_training_pools::Pools::<Test>::get(0).unwrap().status,
			PoolStatus::Completed
		);
		run_to_block(40);
		assert_eq!(Claimable::<Test>::get(0, 3), 333);
		assert_eq!(Claimable::<Test>::get(0, 1), 333 + 500 + 500);
		// Being slow is not slashable.
		assert_eq!(pallet_trainer_staking::Ledger::<Test>::get(3).unwrap().active, 1_000);
	});
}

#[test]
fn whole_pool_conserves_the_budget() {
	run_test(|| {
		three_trainers();
		let creator_before = Balances::free_balance(CREATOR) + budget_held();
		// Round 1 final, round 2 voided, round 3 final with two contributors.
		for who in 1..=3 {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2]));
		}
		run_to_block(11); // round 2 opened at 1, deadline 11
		assert!(pallet_checkpoints::Voided::<Test>::get(0, 2).is_some());
		assert_ok!(commit(1, 3, 9, &[0, 1]));
		assert_ok!(commit(2, 3, 9, &[0, 1]));
		assert_eq!(
			pallet_training_pools::Pools::<Test>::get(0).unwrap().status,
			PoolStatus::Completed
		);
		run_to_block(60);
		let mut paid = 0;
		for who in 1..=3 {
			let before = Balances::free_balance(who);
			if Claimable::<Test>::get(0, who) > 0 {
				assert_ok!(Rewards::claim_rewards(RuntimeOrigin::signed(who), 0));
			}
			paid += Balances::free_balance(who) - before;
		}
		assert_eq!(paid, 999 + 1_000);
		assert_eq!(budget_held(), 0, "nothing stays on hold once all is settled and claimed");
		assert_eq!(Balances::free_balance(CREATOR), creator_before - paid);
	});
}

#[test]
fn settlements_per_block_are_bounded() {
	run_test(|| {
		for pool in 0..3u32 {
			assert_ok!(TrainingPools::create_pool(
				RuntimeOrigin::signed(CREATOR),
				spec(1, 1, Perbill::from_percent(60))
			));
			let who = pool as u64 + 1;
			assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(who), 1_000));
			assert_ok!(join(who, pool, 1_000));
		}
		let c = |who: u64, pool: u32| {
			pallet_checkpoints::Pallet::<Test>::commit_checkpoint(
				RuntimeOrigin::signed(who),
				pool,
				1,
				[1; 32],
				included(&[0]),
			)
		};
		// Four pools finalizing in one block: two settle at 34, two spill to 35.
		assert_ok!(TrainingPools::create_pool(
			RuntimeOrigin::signed(CREATOR),
			spec(1, 1, Perbill::from_percent(60))
		));
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(4), 1_000));
		assert_ok!(join(4, 3, 1_000));
		for (who, pool) in [(1, 0), (2, 1), (3, 2), (4, 3)] {
			assert_ok!(c(who, pool));
		}
		assert_eq!(Settlements::<Test>::get(34).to_vec(), vec![(0, 1), (1, 1)]);
		assert_eq!(Settlements::<Test>::get(35).to_vec(), vec![(2, 1), (3, 1)]);
		run_to_block(35);
		assert!((1..=4).all(|who| Claimable::<Test>::get(who as u32 - 1, who) == 1_000));
	});
}

#[test]
fn a_claim_settles_no_more_rounds_than_it_is_weighed_for() {
	run_test(|| {
		// One member commits rounds 1..=10 ahead: all final in block 1, settlement due at 34.
		// The queue takes `MaxSettlementsPerBlock` (2) at 34 and 2 at 35; 6 are left unscheduled.
		training_pool(10, Perbill::from_percent(60), &[1_000]);
		for round in 1..=10 {
			assert_ok!(commit(1, round, round as u8, &[0]));
		}
		assert_eq!(Unsettled::<Test>::iter_prefix(0).filter(|(_, p)| !p.scheduled).count(), 6);
		run_to_block(35);
		assert_eq!(Unsettled::<Test>::iter_prefix(0).count(), 6);
		// `claim_rewards` is weighed for `MaxSettlementsPerBlock` settlements: it settles 2,
		// and is charged for 2.
		let post = Rewards::claim_rewards(RuntimeOrigin::signed(1), 0).expect("claimed");
		assert_eq!(Unsettled::<Test>::iter_prefix(0).count(), 4);
		assert_eq!(post.actual_weight, Some(Rewards::claim_weight(2)));
	});
}

/// A claim pays for the settlements it made, not for the most it may make: weighed for
/// `MaxSettlementsPerBlock` (2) settlements and their reads, it is refunded the rest.
#[test]
fn a_claim_is_refunded_the_settlements_it_did_not_make() {
	use frame_support::dispatch::GetDispatchInfo;
	run_test(|| {
		training_pool(10, Perbill::from_percent(60), &[1_000]);
		for round in 1..=3 {
			assert_ok!(commit(1, round, round as u8, &[0]));
		}
		// Rounds 1 and 2 settle at 34 from the queue, round 3 at 35.
		run_to_block(35);
		let declared = Call::<Test>::claim_rewards { pool_id: 0 }.get_dispatch_info().call_weight;
		assert_eq!(declared, Rewards::claim_weight(2));
		let post = Rewards::claim_rewards(RuntimeOrigin::signed(1), 0).expect("claimed");
		// The queue settled every round: the claim settled none.
		assert_eq!(post.actual_weight, Some(Rewards::claim_weight(0)));
		assert!(Rewards::claim_weight(0).all_lt(declared));
		// A claim with nothing to pay is charged its work too, no more.
		let err = Rewards::claim_rewards(RuntimeOrigin::signed(1), 0).expect_err("paid already");
		assert_eq!(err.post_info.actual_weight, Some(Rewards::claim_weight(0)));
		assert_eq!(err.error, Error::<Test>::NothingToClaim.into());
	});
}

/// Round 1 settled at block 34 (333 claimable by each of three trainers), and rounds 2..=11
/// left to lazy settlement, due far ahead (block 1 000).
fn ten_lazy_rounds() {
	three_trainers();
	for who in 1..=3 {
		assert_ok!(commit(who, 1, 7, &[0, 1, 2]));
	}
	run_to_block(34);
	assert_eq!(Claimable::<Test>::get(0, 1), 333);
	for round in 2..=11 {
		let pending = PendingRound { reserved: 0, settle_at: 1_000, scheduled: false };
		Unsettled::<Test>::insert(0, round, pending);
	}
}

/// Rounds left to lazy settlement that are not due yet must not hide a due one from every
/// claim: each claim reads `2 × MaxSettlementsPerBlock` (4) entries from where the last one
/// stopped, so a due round is reached within ⌈N / 4⌉ claims whatever its place in the map's
/// key order.
#[test]
fn rounds_not_due_cannot_hide_a_due_round_from_every_claim() {
	run_test(|| {
		ten_lazy_rounds();
		// The one last in key order is due.
		let hidden = Unsettled::<Test>::iter_key_prefix(0).last().expect("ten rounds");
		Unsettled::<Test>::mutate(0, hidden, |p| {
			if let Some(p) = p {
				p.settle_at = 34;
			}
		});
		// Three claims (one per trainer: a claim with nothing to pay is reverted whole).
		for who in 1..=3 {
			assert_ok!(Rewards::claim_rewards(RuntimeOrigin::signed(who), 0));
		}
		assert_eq!(Unsettled::<Test>::get(0, hidden), None, "the due round was settled");
		assert_eq!(Unsettled::<Test>::iter_prefix(0).count(), 9);
	});
}

/// Due rounds a claim read but left for its settlement limit are the first the next claim
/// settles, not a whole cycle of the scan later.
#[test]
fn due_rounds_left_for_the_settlement_limit_come_first_in_the_next_claim() {
	run_test(|| {
		ten_lazy_rounds();
		// The first four in key order (one claim's scan) are due.
		let first: Vec<u32> = Unsettled::<Test>::iter_key_prefix(0).take(4).collect();
		for round in &first {
			Unsettled::<Test>::mutate(0, round, |p| {
				if let Some(p) = p {
					p.settle_at = 34;
				}
			});
		}
		// A claim settles two (`MaxSettlementsPerBlock`); the next one the other two.
		assert_ok!(Rewards::claim_rewards(RuntimeOrigin::signed(1), 0));
		assert_eq!(first.iter().filter(|r| Unsettled::<Test>::contains_key(0, **r)).count(), 2);
		assert_ok!(Rewards::claim_rewards(RuntimeOrigin::signed(2), 0));
		assert!(first.iter().all(|r| !Unsettled::<Test>::contains_key(0, r)), "all four settled");
	});
}
