//! Unit tests: every call's success path and each of its errors, slashing arithmetic, the
//! unbonding-chunk bound. `try_state` runs after every test.

use crate::{mock::*, pallet::*, Error, Event};
use frame_support::{assert_noop, assert_ok, traits::fungible::InspectHold};
use sp_runtime::Perbill;
use synod_primitives::TrainerStake;

const ALICE: AccountId = 1;
const BOB: AccountId = 2;
/// Owns 10 planck.
const CHARLIE: AccountId = POOR;

/// Commits `amount` of `who`'s stake to a pool that stays Open (it needs 3 trainers).
fn set_committed(who: AccountId, amount: Balance) {
	assert_ok!(TrainingPools::create_pool(
		RuntimeOrigin::signed(CREATOR),
		spec(3, 3, two_thirds())
	));
	assert_ok!(TrainingPools::join_pool(
		RuntimeOrigin::signed(who),
		0,
		amount,
		peer(who),
		ml_dsa_key(who),
		peer_proof(who, 0),
	));
}

fn held(who: AccountId) -> Balance {
	Balances::balance_on_hold(&RuntimeHoldReason::TrainerStaking(HoldReason::Staking), &who)
}

#[test]
fn bond_holds_and_records_active_stake() {
	run_test(|| {
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(ALICE), 300));
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(ALICE), 200));
		assert_eq!(held(ALICE), 500);
		assert_eq!(Balances::free_balance(ALICE), 9_500);
		assert_eq!(TrainerStaking::active_stake(&ALICE), 500);
		assert_eq!(TotalStake::<Test>::get(), 500);
		assert_eq!(last_event(), Event::Bonded { who: ALICE, amount: 200 }.into());
	});
}

#[test]
fn bond_errors() {
	run_test(|| {
		assert_noop!(
			TrainerStaking::bond(RuntimeOrigin::signed(ALICE), 0),
			Error::<Test>::ZeroAmount
		);
		assert_noop!(
			TrainerStaking::bond(RuntimeOrigin::signed(ALICE), 99),
			Error::<Test>::BelowMinBond
		);
		// Charlie owns 10 planck.
		assert_noop!(
			TrainerStaking::bond(RuntimeOrigin::signed(CHARLIE), 100),
			Error::<Test>::InsufficientBalance
		);
		// The whole balance cannot be held: the account must stay alive.
		assert_noop!(
			TrainerStaking::bond(RuntimeOrigin::signed(ALICE), 10_001),
			Error::<Test>::InsufficientBalance
		);
		assert_noop!(
			TrainerStaking::bond(RuntimeOrigin::none(), 100),
			sp_runtime::DispatchError::BadOrigin
		);
	});
}

#[test]
fn unbond_schedules_a_chunk() {
	run_test(|| {
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(ALICE), 500));
		assert_ok!(TrainerStaking::unbond(RuntimeOrigin::signed(ALICE), 200));
		let ledger = Ledger::<Test>::get(ALICE).unwrap();
		assert_eq!(ledger.active, 300);
		assert_eq!(ledger.unlocking.len(), 1);
		assert_eq!(ledger.unlocking[0].unlock_at, 11);
		// Still held (and slashable) while unbonding.
		assert_eq!(held(ALICE), 500);
		assert_eq!(last_event(), Event::Unbonded { who: ALICE, amount: 200, unlock_at: 11 }.into());
		// Unbonding everything is allowed.
		assert_ok!(TrainerStaking::unbond(RuntimeOrigin::signed(ALICE), 300));
		assert_eq!(TrainerStaking::active_stake(&ALICE), 0);
	});
}

#[test]
fn unbond_errors() {
	run_test(|| {
		assert_noop!(
			TrainerStaking::unbond(RuntimeOrigin::signed(ALICE), 1),
			Error::<Test>::NotBonded
		);
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(ALICE), 500));
		assert_noop!(
			TrainerStaking::unbond(RuntimeOrigin::signed(ALICE), 0),
			Error::<Test>::ZeroAmount
		);
		assert_noop!(
			TrainerStaking::unbond(RuntimeOrigin::signed(ALICE), 501),
			Error::<Test>::UnbondExceedsActive
		);
		// 450 would leave 50 < MinBond.
		assert_noop!(
			TrainerStaking::unbond(RuntimeOrigin::signed(ALICE), 450),
			Error::<Test>::BelowMinBond
		);
		set_committed(ALICE, 400);
		assert_noop!(
			TrainerStaking::unbond(RuntimeOrigin::signed(ALICE), 101),
			Error::<Test>::StakeCommitted
		);
		assert_ok!(TrainerStaking::unbond(RuntimeOrigin::signed(ALICE), 100));
	});
}

#[test]
fn unlocking_chunks_are_bounded() {
	run_test(|| {
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(ALICE), 1_000));
		for _ in 0..4 {
			assert_ok!(TrainerStaking::unbond(RuntimeOrigin::signed(ALICE), 100));
		}
		assert_noop!(
			TrainerStaking::unbond(RuntimeOrigin::signed(ALICE), 100),
			Error::<Test>::TooManyUnlockingChunks
		);
		System::set_block_number(11);
		assert_ok!(TrainerStaking::withdraw_unbonded(RuntimeOrigin::signed(ALICE)));
		assert_ok!(TrainerStaking::unbond(RuntimeOrigin::signed(ALICE), 100));
	});
}

#[test]
fn withdraw_releases_only_matured_chunks() {
	run_test(|| {
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(ALICE), 500));
		assert_ok!(TrainerStaking::unbond(RuntimeOrigin::signed(ALICE), 200)); // at 11
		System::set_block_number(5);
		assert_ok!(TrainerStaking::unbond(RuntimeOrigin::signed(ALICE), 300)); // at 15
		System::set_block_number(10);
		assert_noop!(
			TrainerStaking::withdraw_unbonded(RuntimeOrigin::signed(ALICE)),
			Error::<Test>::NothingToWithdraw
		);
		System::set_block_number(11);
		assert_ok!(TrainerStaking::withdraw_unbonded(RuntimeOrigin::signed(ALICE)));
		assert_eq!(held(ALICE), 300);
		assert_eq!(Balances::free_balance(ALICE), 9_700);
		assert_eq!(last_event(), Event::Withdrawn { who: ALICE, amount: 200 }.into());
		System::set_block_number(15);
		assert_ok!(TrainerStaking::withdraw_unbonded(RuntimeOrigin::signed(ALICE)));
		assert!(Ledger::<Test>::get(ALICE).is_none(), "empty ledger is removed");
		assert_eq!(Balances::free_balance(ALICE), 10_000);
		assert_noop!(
			TrainerStaking::withdraw_unbonded(RuntimeOrigin::signed(ALICE)),
			Error::<Test>::NotBonded
		);
	});
}

#[test]
fn slash_pays_reporter_share_and_rest_to_destination() {
	run_test(|| {
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(ALICE), 1_000));
		let issuance = Balances::total_issuance();
		let slashed = <TrainerStaking as TrainerStake<_>>::slash(
			&ALICE,
			400,
			Some((&BOB, Perbill::from_percent(25))),
		);
		assert_eq!(slashed, 400);
		assert_eq!(held(ALICE), 600);
		assert_eq!(TrainerStaking::active_stake(&ALICE), 600);
		assert_eq!(Balances::free_balance(BOB), 10_100);
		assert_eq!(Balances::free_balance(TREASURY), 1 + 300);
		assert_eq!(Balances::total_issuance(), issuance, "slashing moves funds, mints none");
		assert_eq!(
			last_event(),
			Event::Slashed { who: ALICE, amount: 400, reporter: Some(BOB), reporter_amount: 100 }
				.into()
		);
	});
}

#[test]
fn slash_reaches_unbonding_chunks_and_caps_at_total() {
	run_test(|| {
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(ALICE), 500));
		assert_ok!(TrainerStaking::unbond(RuntimeOrigin::signed(ALICE), 200));
		assert_ok!(TrainerStaking::unbond(RuntimeOrigin::signed(ALICE), 300));
		// 700 asked, 500 exist: all of it goes; the newest chunk is cut first.
		assert_eq!(<TrainerStaking as TrainerStake<_>>::slash(&ALICE, 700, None), 500);
		assert!(Ledger::<Test>::get(ALICE).is_none());
		assert_eq!(held(ALICE), 0);
		assert_eq!(Balances::free_balance(TREASURY), 501);
		// Nothing left: a second slash is a no-op.
		assert_eq!(<TrainerStaking as TrainerStake<_>>::slash(&ALICE, 1, None), 0);
	});
}

#[test]
fn partial_slash_cuts_newest_chunk_first() {
	run_test(|| {
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(ALICE), 600));
		assert_ok!(TrainerStaking::unbond(RuntimeOrigin::signed(ALICE), 200));
		assert_ok!(TrainerStaking::unbond(RuntimeOrigin::signed(ALICE), 300));
		assert_eq!(<TrainerStaking as TrainerStake<_>>::slash(&ALICE, 250, None), 250);
		let ledger = Ledger::<Test>::get(ALICE).unwrap();
		assert_eq!(ledger.active, 0);
		assert_eq!(ledger.unlocking.iter().map(|c| c.value).collect::<Vec<_>>(), vec![200, 150]);
	});
}
