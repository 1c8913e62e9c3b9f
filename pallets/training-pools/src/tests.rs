//! Unit tests: every call's success path and each of its errors, lifecycle, budget
//! conservation, the member bound. `try_state` runs after every test.

use crate::{mock, mock::*, pallet::*, Error, Event};
use frame_support::{assert_noop, assert_ok, traits::fungible::InspectHold};
use sp_runtime::{DispatchError, Perbill};
use synod_primitives::{PoolStatus, PoolsInterface, StakeCommitments};

/// Min stake 500, 2 to 3 trainers, 3 rounds, ⅔ quorum.
fn spec() -> crate::PoolSpec<Test> {
	let mut s = mock::spec(3, 2, two_thirds());
	s.terms.min_stake = 500;
	s.terms.max_trainers = 3;
	s
}

fn key(who: AccountId) -> Box<crate::MlDsaPublicKey> {
	ml_dsa_key(who)
}

fn events() -> Vec<Event<Test>> {
	pools_events()
}

/// Pools that started training, in order.
fn started() -> Vec<u32> {
	events()
		.into_iter()
		.filter_map(|e| match e {
			Event::TrainingStarted { pool_id } => Some(pool_id),
			_ => None,
		})
		.collect()
}

fn budget_held(who: AccountId) -> Balance {
	Balances::balance_on_hold(&RuntimeHoldReason::TrainingPools(HoldReason::PoolBudget), &who)
}

fn pool_deposit_held(who: AccountId) -> Balance {
	Balances::balance_on_hold(&RuntimeHoldReason::TrainingPools(HoldReason::PoolDeposit), &who)
}

fn member_deposit_held(who: AccountId) -> Balance {
	Balances::balance_on_hold(&RuntimeHoldReason::TrainingPools(HoldReason::MemberDeposit), &who)
}

/// The deposit of a pool of [`spec`] (3 rounds).
const SPEC_DEPOSIT: Balance = POOL_DEPOSIT + 3 * ROUND_DEPOSIT;

#[test]
fn create_pool_holds_the_budget() {
	run_test(|| {
		assert_ok!(TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), spec()));
		assert_eq!(budget_held(CREATOR), 3_000);
		assert_eq!(pool_deposit_held(CREATOR), SPEC_DEPOSIT);
		let pool = Pools::<Test>::get(0).unwrap();
		assert_eq!(pool.status, PoolStatus::Open);
		assert_eq!(pool.budget_held, 3_000);
		assert_eq!((pool.deposit, pool.ended_at), (SPEC_DEPOSIT, None));
		assert_eq!(NextPoolId::<Test>::get(), 1);
		assert_eq!(
			events(),
			vec![Event::PoolCreated { pool_id: 0, creator: CREATOR, budget: 3_000 }]
		);
		assert_ok!(TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), spec()));
		assert_eq!(budget_held(CREATOR), 6_000);
	});
}

#[test]
fn create_pool_rejects_bad_specs() {
	run_test(|| {
		let o = || RuntimeOrigin::signed(CREATOR);
		type Edit = Box<dyn Fn(&mut crate::PoolSpec<Test>)>;
		let cases: Vec<(Edit, Error<Test>)> = vec![
			(Box::new(|s| s.terms.rounds = 0), Error::InvalidRounds),
			(Box::new(|s| s.terms.rounds = 101), Error::InvalidRounds),
			(Box::new(|s| s.terms.min_trainers = 0), Error::InvalidTrainerBounds),
			(Box::new(|s| s.terms.max_trainers = 1), Error::InvalidTrainerBounds),
			(Box::new(|s| s.terms.max_trainers = 6), Error::InvalidTrainerBounds),
			(Box::new(|s| s.terms.quorum = Perbill::from_percent(50)), Error::InvalidQuorum),
			(Box::new(|s| s.terms.round_timeout = 0), Error::InvalidRoundTimeout),
			(Box::new(|s| diloco(s).inner_steps = 0), Error::InvalidInnerSteps),
			(Box::new(|s| s.terms.reward_per_round = u128::MAX), Error::InvalidRewardPerRound),
			(Box::new(|s| s.terms.min_stake = 99), Error::InvalidMinStake),
			(Box::new(|s| s.terms.challenge_window = 0), Error::InvalidChallengeWindow),
		];
		for (edit, err) in cases {
			let mut s = spec();
			edit(&mut s);
			assert_noop!(TrainingPools::create_pool(o(), s), err);
		}
		assert_noop!(
			TrainingPools::create_pool(RuntimeOrigin::signed(POOR), spec()),
			Error::<Test>::InsufficientBudget
		);
		assert_noop!(
			TrainingPools::create_pool(RuntimeOrigin::none(), spec()),
			DispatchError::BadOrigin
		);
	});
}

#[test]
fn joining_min_trainers_starts_round_one() {
	run_test(|| {
		assert_ok!(TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), spec()));
		bond_and_join(1, 0, 600);
		assert_eq!(Pools::<Test>::get(0).unwrap().status, PoolStatus::Open);
		assert!(started().is_empty());
		bond_and_join(2, 0, 700);
		let pool = Pools::<Test>::get(0).unwrap();
		assert_eq!(
			(pool.status, pool.current_round, pool.member_count),
			(PoolStatus::Training, 1, 2)
		);
		assert_eq!(pool.total_stake, 1_300);
		assert_eq!(started(), vec![0]);
		let m = Members::<Test>::get(0, 2).unwrap();
		assert_eq!((m.index, m.stake, m.from_round), (1, 700, 1));
		assert_eq!(m.ml_dsa_key, *key(2));
		assert!(events().contains(&Event::TrainingStarted { pool_id: 0 }));
		// A member joining during round 1 takes part from round 2.
		bond_and_join(3, 0, 500);
		assert_eq!(Members::<Test>::get(0, 3).unwrap().from_round, 2);
		assert_eq!(
			TrainingPools::pool_members(0)
				.iter()
				.map(|(w, m)| (*w, m.index))
				.collect::<Vec<_>>(),
			vec![(1, 0), (2, 1), (3, 2)]
		);
		assert_eq!(TrainingPools::pool(0).unwrap().member_count, 3);
	});
}

#[test]
fn join_pool_errors() {
	run_test(|| {
		assert_noop!(join(1, 0, 500), Error::<Test>::PoolNotFound);
		assert_ok!(TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), spec()));
		assert_noop!(join(1, 0, 499), Error::<Test>::StakeBelowMinimum);
		assert_noop!(join(1, 0, 500), Error::<Test>::InsufficientStake);
		assert_noop!(
			TrainingPools::join_pool(
				RuntimeOrigin::signed(1),
				0,
				500,
				Default::default(),
				key(1),
				peer_proof(1, 0)
			),
			Error::<Test>::InvalidPeerId
		);
		bond_and_join(1, 0, 600);
		assert_noop!(join(1, 0, 500), Error::<Test>::AlreadyMember);
		// Stake committed to pool 0 cannot back pool 1 too.
		assert_ok!(TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), spec()));
		assert_noop!(join(1, 1, 500), Error::<Test>::InsufficientStake);
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(1), 2_000));
		assert_ok!(join(1, 1, 500));
		assert_ok!(TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), spec()));
		assert_noop!(join(1, 2, 500), Error::<Test>::TooManyPools);
		bond_and_join(2, 0, 500);
		bond_and_join(3, 0, 500);
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(4), 500));
		assert_noop!(join(4, 0, 500), Error::<Test>::PoolFull);
		assert_ok!(TrainingPools::cancel_pool(RuntimeOrigin::signed(CREATOR), 1));
		assert_noop!(join(4, 1, 500), Error::<Test>::PoolClosed);
	});
}

#[test]
fn member_deposit_is_held_until_the_key_is_no_longer_needed() {
	run_test(|| {
		let deposit = |who: AccountId| {
			Balances::balance_on_hold(
				&RuntimeHoldReason::TrainingPools(HoldReason::MemberDeposit),
				&who,
			)
		};
		assert_ok!(TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), spec()));
		// All but 2 planck bonded: the deposit cannot be held.
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(7), FUNDS - 2));
		assert_noop!(join(7, 0, 500), Error::<Test>::InsufficientDeposit);
		bond_and_join(1, 0, 600);
		assert_eq!(deposit(1), MEMBER_DEPOSIT);
		assert_noop!(
			TrainingPools::release_member_deposit(RuntimeOrigin::signed(2), 0, 0),
			Error::<Test>::NoFormerMember
		);
		// Leaving at block 1: rounds it is in have deadlines ≤ 1 + 10; kept until their
		// challenges are over, slashable_until(11).
		assert_ok!(TrainingPools::leave_pool(RuntimeOrigin::signed(1), 0));
		let former = crate::FormerMembers::<Test>::get(0, 0).expect("kept");
		assert_eq!((former.who, former.deposit, former.kept_until), (1, MEMBER_DEPOSIT, 44));
		assert_eq!(former.ml_dsa_key, *key(1));
		assert_eq!(deposit(1), MEMBER_DEPOSIT);
		System::set_block_number(44);
		assert_noop!(
			TrainingPools::release_member_deposit(RuntimeOrigin::signed(2), 0, 0),
			Error::<Test>::DepositStillNeeded
		);
		System::set_block_number(45);
		assert_ok!(TrainingPools::release_member_deposit(RuntimeOrigin::signed(2), 0, 0));
		assert_eq!(deposit(1), 0);
		assert!(events().contains(&Event::MemberDepositReleased {
			pool_id: 0,
			index: 0,
			who: 1,
			amount: MEMBER_DEPOSIT
		}));
		assert!(crate::FormerMembers::<Test>::get(0, 0).is_none());
	});
}

#[test]
fn committed_stake_cannot_be_unbonded_until_leaving() {
	run_test(|| {
		assert_ok!(TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), spec()));
		bond_and_join(1, 0, 600);
		assert_eq!(<TrainingPools as StakeCommitments<_, _>>::committed(&1), 600);
		assert_noop!(
			TrainerStaking::unbond(RuntimeOrigin::signed(1), 100),
			pallet_trainer_staking::Error::<Test>::StakeCommitted
		);
		assert_ok!(TrainingPools::leave_pool(RuntimeOrigin::signed(1), 0));
		assert_eq!(<TrainingPools as StakeCommitments<_, _>>::committed(&1), 0);
		assert_ok!(TrainerStaking::unbond(RuntimeOrigin::signed(1), 600));
		assert_eq!(events().last(), Some(&Event::MemberLeft { pool_id: 0, who: 1 }));
	});
}

#[test]
fn leave_pool_errors() {
	run_test(|| {
		assert_noop!(
			TrainingPools::leave_pool(RuntimeOrigin::signed(1), 0),
			Error::<Test>::PoolNotFound
		);
		assert_ok!(TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), spec()));
		assert_noop!(
			TrainingPools::leave_pool(RuntimeOrigin::signed(1), 0),
			Error::<Test>::NotMember
		);
	});
}

#[test]
fn cancel_releases_unreserved_budget_and_commitments() {
	run_test(|| {
		// Needs three trainers: with two it stays Open, and is cancelled at once.
		let mut s = spec();
		s.terms.min_trainers = 3;
		assert_ok!(TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), s));
		bond_and_join(1, 0, 600);
		bond_and_join(2, 0, 600);
		// One final round's reward is owed to its contributors.
		assert_eq!(<TrainingPools as PoolsInterface<_, _, _>>::reserve_reward(0), 1_000);
		assert_ok!(TrainingPools::cancel_pool(RuntimeOrigin::signed(CREATOR), 0));
		let pool = Pools::<Test>::get(0).unwrap();
		assert_eq!(pool.status, PoolStatus::Cancelled);
		assert_eq!((pool.budget_held, pool.budget_reserved), (1_000, 1_000));
		assert_eq!(budget_held(CREATOR), 1_000);
		assert_eq!(events().last(), Some(&Event::PoolCancelled { pool_id: 0, released: 2_000 }));
		assert_eq!(<TrainingPools as StakeCommitments<_, _>>::committed(&1), 0);
		// The owed reward is paid; the rest of an unreserved amount goes back at once.
		assert_ok!(<TrainingPools as PoolsInterface<_, _, _>>::pay_reserved(0, &1, 600));
		<TrainingPools as PoolsInterface<_, _, _>>::unreserve(0, 400);
		assert_eq!(budget_held(CREATOR), 0);
		assert_eq!(Balances::free_balance(CREATOR), 1_000_000 - 600 - SPEC_DEPOSIT);
	});
}

#[test]
fn cancel_pool_errors() {
	run_test(|| {
		assert_noop!(
			TrainingPools::cancel_pool(RuntimeOrigin::root(), 0),
			Error::<Test>::PoolNotFound
		);
		assert_ok!(TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), spec()));
		assert_noop!(
			TrainingPools::cancel_pool(RuntimeOrigin::signed(1), 0),
			Error::<Test>::NotCreator
		);
		assert_ok!(TrainingPools::cancel_pool(RuntimeOrigin::root(), 0));
		assert_noop!(
			TrainingPools::cancel_pool(RuntimeOrigin::root(), 0),
			Error::<Test>::PoolEnded
		);
	});
}

#[test]
fn close_round_advances_and_completes() {
	run_test(|| {
		assert_ok!(TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), spec()));
		bond_and_join(1, 0, 600);
		bond_and_join(2, 0, 600);
		type P = TrainingPools;
		// Closing a round other than the current one changes nothing.
		assert_eq!(<P as PoolsInterface<_, _, _>>::close_round(0, 2), Some(1));
		assert_eq!(<P as PoolsInterface<_, _, _>>::close_round(0, 1), Some(2));
		assert_eq!(<P as PoolsInterface<_, _, _>>::reserve_reward(0), 1_000);
		assert_eq!(<P as PoolsInterface<_, _, _>>::close_round(0, 2), Some(3));
		assert_eq!(<P as PoolsInterface<_, _, _>>::close_round(0, 3), None);
		let pool = Pools::<Test>::get(0).unwrap();
		assert_eq!(pool.status, PoolStatus::Completed);
		assert_eq!(budget_held(CREATOR), 1_000, "only the reserved reward stays held");
		assert!(events().contains(&Event::PoolCompleted { pool_id: 0, released: 2_000 }));
		// Members of a completed pool keep their stake committed until its last round is
		// settled (that round can still be challenged), then have no commitments left.
		assert_noop!(
			TrainerStaking::unbond(RuntimeOrigin::signed(1), 600),
			pallet_trainer_staking::Error::<Test>::StakeCommitted
		);
		let now = System::block_number();
		let settled = <P as PoolsInterface<_, _, _>>::round_params(0)
			.unwrap()
			.timeline
			.settled_by(now);
		System::set_block_number(settled + 1);
		assert_ok!(TrainerStaking::unbond(RuntimeOrigin::signed(1), 600));
	});
}

#[test]
fn reserve_never_exceeds_budget() {
	run_test(|| {
		assert_ok!(TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), spec()));
		type P = TrainingPools;
		for _ in 0..3 {
			assert_eq!(<P as PoolsInterface<_, _, _>>::reserve_reward(0), 1_000);
		}
		assert_eq!(<P as PoolsInterface<_, _, _>>::reserve_reward(0), 0);
		assert!(<P as PoolsInterface<_, _, _>>::pay_reserved(0, &1, 3_001).is_err());
	});
}

#[test]
fn pool_at_member_bound() {
	run_test(|| {
		let mut s = spec();
		s.terms.min_trainers = 5;
		s.terms.max_trainers = 5; // MaxMembers
		assert_ok!(TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), s));
		for who in 1..=5 {
			bond_and_join(who, 0, 500);
		}
		assert_eq!(MemberList::<Test>::get(0).len(), 5);
		assert_eq!(Pools::<Test>::get(0).unwrap().status, PoolStatus::Training);
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(6), 500));
		assert_noop!(join(6, 0, 500), Error::<Test>::PoolFull);
		// Indices are never reused.
		assert_ok!(TrainingPools::leave_pool(RuntimeOrigin::signed(2), 0));
		assert_ok!(join(6, 0, 500));
		assert_eq!(Members::<Test>::get(0, 6).unwrap().index, 5);
	});
}

#[test]
fn create_pool_needs_the_storage_deposit() {
	run_test(|| {
		// POOR (10 planck) can hold neither; an account that can hold the budget but not the
		// deposit as well is refused and keeps everything.
		let mut s = spec();
		s.terms.reward_per_round = 1;
		assert_noop!(
			TrainingPools::create_pool(RuntimeOrigin::signed(POOR), s.clone()),
			Error::<Test>::InsufficientDeposit
		);
		assert_eq!((Balances::free_balance(POOR), budget_held(POOR)), (10, 0));
		s.terms.reward_per_round = 1_000;
		assert_noop!(
			TrainingPools::create_pool(RuntimeOrigin::signed(POOR), s),
			Error::<Test>::InsufficientBudget
		);
	});
}

/// Attack: a member registers another member's libp2p peer id, so that peers attribute the
/// victim's messages (announcements, payloads) to the wrong member or drop them as forged.
/// Here the attacker even holds the key (one operator's two accounts): a peer id is still one
/// member's.
#[test]
fn a_member_cannot_register_another_members_peer_id() {
	run_test(|| {
		assert_ok!(TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), spec()));
		bond_and_join(1, 0, 600);
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(2), 600));
		let join_with_1s_key = || {
			TrainingPools::join_pool(
				RuntimeOrigin::signed(2),
				0,
				600,
				peer(1),
				key(2),
				peer_proof_by(1, 2, 0),
			)
		};
		assert_noop!(join_with_1s_key(), Error::<Test>::PeerIdTaken);
		assert_eq!(PeerIds::<Test>::get(0, peer(1)), Some(1));
		// Once member 1 has left, its peer id is free (its former registration keeps it for
		// evidence, by index) to whoever holds its key.
		assert_ok!(TrainingPools::leave_pool(RuntimeOrigin::signed(1), 0));
		assert_ok!(join_with_1s_key());
		assert_eq!(PeerIds::<Test>::get(0, peer(1)), Some(2));
	});
}

/// Attack: squat a victim's peer id. The attacker joins a pool first with the victim's peer id
/// (read from the victim's registration in another pool, or from its `join_pool` waiting in
/// the transaction pool, which it front-runs with a tip), so that the victim's join fails with
/// `PeerIdTaken` and its messages are attributed to the attacker. The peer id's key must sign
/// the chain's genesis, the pool and the joining account: no forged, replayed or other-pool
/// proof registers it.
#[test]
fn a_peer_id_cannot_be_squatted_without_its_key() {
	run_test(|| {
		assert_ok!(TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), spec()));
		assert_ok!(TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), spec()));
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(1), 1_200));
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(2), 600));
		let squat = |proof: [u8; 64]| {
			TrainingPools::join_pool(RuntimeOrigin::signed(2), 0, 600, peer(1), key(2), proof)
		};
		// The victim's own proof (copied from its pending join), its proof for pool 1, the
		// attacker's key's signature, and garbage.
		for proof in [peer_proof(1, 0), peer_proof(1, 1), peer_proof_by(2, 2, 0), [7; 64]] {
			assert_noop!(squat(proof), Error::<Test>::PeerIdNotProved);
		}
		// The victim's own account with its proof for the other pool, or for another chain (a
		// proof made before the genesis hash it signs changed).
		let victim = |pool: u32, proof: [u8; 64]| {
			TrainingPools::join_pool(RuntimeOrigin::signed(1), pool, 600, peer(1), key(1), proof)
		};
		assert_noop!(victim(0, peer_proof(1, 1)), Error::<Test>::PeerIdNotProved);
		let other_chain = peer_proof(1, 0);
		let genesis = frame_system::BlockHash::<Test>::get(0);
		frame_system::BlockHash::<Test>::insert(0, sp_core::H256::repeat_byte(1));
		assert_noop!(victim(0, other_chain), Error::<Test>::PeerIdNotProved);
		frame_system::BlockHash::<Test>::insert(0, genesis);
		// A peer id that names no Ed25519 key proves nothing either.
		let hashed: frame_support::BoundedVec<u8, _> =
			vec![0x12, 0x20, 1, 2, 3].try_into().unwrap();
		assert_noop!(
			TrainingPools::join_pool(RuntimeOrigin::signed(2), 0, 600, hashed, key(2), [7; 64]),
			Error::<Test>::InvalidPeerId
		);
		// The victim joins both pools with its peer id.
		assert_ok!(victim(0, peer_proof(1, 0)));
		assert_ok!(victim(1, peer_proof(1, 1)));
		assert_eq!(PeerIds::<Test>::get(0, peer(1)), Some(1));
	});
}

#[test]
fn reaping_returns_every_deposit_in_bounded_calls() {
	run_test(|| {
		// Needs five trainers: it stays Open while four join and leave, then one joins.
		let mut s = spec();
		(s.terms.min_trainers, s.terms.max_trainers) = (5, 5);
		assert_ok!(TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), s));
		assert_noop!(
			TrainingPools::reap_pool(RuntimeOrigin::signed(OUTSIDER), 0),
			Error::<Test>::PoolNotEnded
		);
		for who in 1..=4 {
			bond_and_join(who, 0, 500);
			assert_ok!(TrainingPools::leave_pool(RuntimeOrigin::signed(who), 0));
		}
		bond_and_join(5, 0, 500);
		assert_ok!(TrainingPools::cancel_pool(RuntimeOrigin::signed(CREATOR), 0));
		let pool = Pools::<Test>::get(0).unwrap();
		let settled = TrainingPools::timeline(&pool).settled_by(pool.ended_at.unwrap());
		// Keys may still be needed as evidence until every round is settled.
		System::set_block_number(settled);
		assert_noop!(
			TrainingPools::reap_pool(RuntimeOrigin::signed(OUTSIDER), 0),
			Error::<Test>::PoolNotSettled
		);
		System::set_block_number(settled + 1);
		// REAP_LIMIT (3) of the four former members; the current member goes at once.
		assert_ok!(TrainingPools::reap_pool(RuntimeOrigin::signed(OUTSIDER), 0));
		assert_eq!(events().last(), Some(&Event::PoolPartlyReaped { pool_id: 0, records: 3 }));
		assert!(MemberList::<Test>::get(0).is_empty() && Members::<Test>::get(0, 5).is_none());
		assert_eq!(FormerMembers::<Test>::iter_prefix(0).count(), 1);
		assert_eq!(pool_deposit_held(CREATOR), SPEC_DEPOSIT);
		assert_ok!(TrainingPools::reap_pool(RuntimeOrigin::signed(OUTSIDER), 0));
		assert_eq!(
			events().last(),
			Some(&Event::PoolReaped { pool_id: 0, creator: CREATOR, released: SPEC_DEPOSIT })
		);
		assert!(Pools::<Test>::get(0).is_none());
		assert_eq!(FormerMembers::<Test>::iter_prefix(0).count(), 0);
		assert_eq!(PeerIds::<Test>::iter_prefix(0).count(), 0);
		for who in 1..=5 {
			assert_eq!(member_deposit_held(who), 0);
			assert_eq!(Balances::free_balance(who), FUNDS - 500, "deposit back; 500 still bonded");
			assert_eq!(<TrainingPools as StakeCommitments<_, _>>::committed(&who), 0);
		}
		assert_eq!((pool_deposit_held(CREATOR), budget_held(CREATOR)), (0, 0));
		assert_eq!(Balances::free_balance(CREATOR), 1_000_000);
		assert_noop!(
			TrainingPools::reap_pool(RuntimeOrigin::signed(OUTSIDER), 0),
			Error::<Test>::PoolNotFound
		);
	});
}
