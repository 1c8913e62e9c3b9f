//! Attacks 6 and 8: chain-wide stalls and non-transactional hooks. Before, one pool filling a
//! block's deadline slots left another pool's round unscheduled for ever (the scheduler gave up
//! without inserting), a full settlement queue made the finalizing commit fail, and a void in
//! `on_initialize` whose follow-up failed left the pool half-closed.

use crate::mock::*;
use frame_support::{assert_noop, assert_ok};
use pallet_checkpoints::{Error, FinalCheckpoints, OpenRounds, Voided};
use pallet_rewards::Unsettled;

/// A one-round pool whose only member is `member` (100 stake): it is Training at once.
fn single_member_pool(member: AccountId) -> u32 {
	let pool = pallet_training_pools::NextPoolId::<Test>::get();
	assert_ok!(TrainingPools::create_pool(
		RuntimeOrigin::signed(CREATOR),
		spec(1, 1, two_thirds())
	));
	bond_and_join(member, pool, 100);
	pool
}

#[test]
fn one_pool_cannot_stall_another() {
	run_test(|| {
		// Four attacker pools open in block 1 and fill the deadline slots of blocks 11 and 12
		// (MaxDeadlinesPerBlock = 2, two blocks tried).
		for attacker in 4..=7 {
			single_member_pool(attacker);
		}
		let honest = training_pool(3, two_thirds(), &[1_000, 1_000, 1_000]);
		let open = OpenRounds::<Test>::get(honest).expect("open");
		assert_eq!((open.deadline, open.scheduled_at), (11, None));
		run_to_block(10);
		assert_noop!(
			Checkpoints::void_expired_round(RuntimeOrigin::signed(OUTSIDER), honest),
			Error::<Test>::DeadlineNotReached
		);
		run_to_block(11);
		// Not in any queue, yet past its deadline: anyone voids it, and the pool moves on.
		assert_eq!(OpenRounds::<Test>::get(honest).expect("still open").round, 1);
		assert_ok!(Checkpoints::void_expired_round(RuntimeOrigin::signed(OUTSIDER), honest));
		assert_eq!(Voided::<Test>::get(honest, 1), Some(11));
		assert_eq!(OpenRounds::<Test>::get(honest).expect("round 2").round, 2);
	});
}

/// Attack: the attacker's pools fill a victim round's deadline slots, so that no deadline
/// queue holds the round, then the attacker stuffs the normal class of every block (any tip)
/// so that nobody's `void_expired_round` is included: the round stalls and its silent members
/// are never leaked. The void is an `Operational` duty, taking the space ordinary calls cannot,
/// that the runtime admits exactly when it would succeed (`check_void`, a dry run that keeps
/// nothing): before its deadline it is refused and takes no block space.
#[test]
fn stuffing_cannot_keep_an_unscheduled_round_from_its_void() {
	use frame_support::dispatch::{DispatchClass, GetDispatchInfo};
	run_test(|| {
		for attacker in 4..=7 {
			single_member_pool(attacker);
		}
		let honest = training_pool(3, two_thirds(), &[1_000, 1_000, 1_000]);
		assert_eq!(OpenRounds::<Test>::get(honest).expect("open").scheduled_at, None);
		let void = pallet_checkpoints::Call::<Test>::void_expired_round { pool_id: honest };
		assert_eq!(void.get_dispatch_info().class, DispatchClass::Operational);
		run_to_block(10);
		assert_noop!(Checkpoints::check_void(honest), Error::<Test>::DeadlineNotReached);
		run_to_block(11);
		assert_ok!(Checkpoints::check_void(honest));
		assert_eq!(OpenRounds::<Test>::get(honest).expect("the check keeps nothing").round, 1);
		assert_eq!(Voided::<Test>::get(honest, 1), None);
		// Booked as the void of a full pool that ends it; charged the void of 3 participants,
		// so that the attacker's voids of its own small pools take little of the duty space.
		let booked = void.get_dispatch_info().call_weight;
		let post = Checkpoints::void_expired_round(RuntimeOrigin::signed(OUTSIDER), honest)
			.expect("the void");
		let used = post.actual_weight.expect("reported");
		assert!(used.all_gte(Checkpoints::void_weight_at(3)), "charged {used}");
		assert!(used.ref_time() < booked.ref_time(), "charged {used} of {booked} booked");
		assert_eq!(Voided::<Test>::get(honest, 1), Some(11));
		// Round 2 is open with its own deadline ahead: a second void is refused.
		assert_noop!(Checkpoints::check_void(honest), Error::<Test>::DeadlineNotReached);
	});
}

/// Attack: in the block before a round's scheduled void, send `void_expired_round` for it (one
/// per pool, tipped): the transaction pool checks it at the next block's number without that
/// block's `on_initialize`, so the dry run passes, the call is kept and gossiped as an
/// `Operational` duty, and it fails unpaid once the queue has voided the round. A void is
/// admitted only for a round that no deadline queue holds at or after the checked block.
#[test]
fn voids_the_deadline_queue_will_do_take_no_duty_space() {
	run_test(|| {
		let honest = training_pool(3, two_thirds(), &[1_000, 1_000, 1_000]);
		let open = OpenRounds::<Test>::get(honest).expect("open");
		assert_eq!(open.scheduled_at, Some(open.deadline));
		run_to_block(open.deadline - 1);
		// The pool's view of the next block: its number, not its hooks.
		System::set_block_number(open.deadline);
		assert_noop!(Checkpoints::check_void(honest), Error::<Test>::VoidScheduled);
		// The queue voids it in that block's `on_initialize`.
		System::set_block_number(open.deadline - 1);
		run_to_block(open.deadline);
		assert_eq!(Voided::<Test>::get(honest, 1), Some(open.deadline));
		// A round whose queue entry is at a later block than its deadline (the lists before it
		// were full) waits for that entry too.
		let next = OpenRounds::<Test>::get(honest).expect("round 2");
		let late = next.deadline + 1;
		let entry = pallet_checkpoints::Deadlines::<Test>::take(next.deadline);
		pallet_checkpoints::Deadlines::<Test>::insert(late, entry);
		OpenRounds::<Test>::mutate(honest, |o| {
			if let Some(o) = o {
				o.scheduled_at = Some(late);
			}
		});
		run_to_block(next.deadline);
		assert_noop!(Checkpoints::check_void(honest), Error::<Test>::VoidScheduled);
		run_to_block(late);
		assert_eq!(Voided::<Test>::get(honest, 2), Some(late));
	});
}

#[test]
fn late_commit_is_refused_and_an_unscheduled_round_is_voided_by_anyone() {
	run_test(|| {
		for attacker in 4..=7 {
			single_member_pool(attacker);
		}
		let honest = training_pool(3, two_thirds(), &[1_000, 1_000, 1_000]);
		run_to_block(11);
		// A commit at the deadline is late, as it is when the queue voids the round first: not
		// recorded, so it cannot copy the majority's pair to escape the leak; and it does not
		// void the round either (a void is not a commit's block space).
		assert_noop!(
			commit_to(honest, 1, 1, 7, &[0, 1, 2]),
			pallet_checkpoints::Error::<Test>::DeadlinePassed
		);
		assert_ok!(Checkpoints::void_expired_round(RuntimeOrigin::signed(OUTSIDER), honest));
		assert_eq!(Voided::<Test>::get(honest, 1), Some(11));
		assert!(FinalCheckpoints::<Test>::get(honest, 1).is_none(), "not counted");
		assert_eq!((staked(1), staked(2), staked(3)), (990, 990, 990));
	});
}

#[test]
fn settlement_queue_full_never_blocks_finality() {
	run_test(|| {
		// Four attacker rounds become final in block 1: settlements at 34 and 35 are full
		// (MaxSettlementsPerBlock = 2).
		for attacker in 4..=7 {
			let pool = single_member_pool(attacker);
			assert_ok!(commit_to(pool, attacker, 1, attacker as u8, &[0]));
		}
		let honest = pallet_training_pools::NextPoolId::<Test>::get();
		assert_ok!(TrainingPools::create_pool(
			RuntimeOrigin::signed(CREATOR),
			spec(1, 3, two_thirds())
		));
		for who in 1..=3 {
			bond_and_join(who, honest, 1_000);
		}
		for who in 1..=3 {
			assert_ok!(commit_to(honest, who, 1, 7, &[0, 1, 2]));
		}
		assert!(
			FinalCheckpoints::<Test>::get(honest, 1).is_some(),
			"finality does not wait for a queue"
		);
		let pending = Unsettled::<Test>::get(honest, 1).expect("reserved");
		assert!(!pending.scheduled);
		run_to_block(40);
		assert!(Unsettled::<Test>::get(honest, 1).is_some());
		// The pool's own claim settles it.
		let before = free(1);
		assert_ok!(Rewards::claim_rewards(RuntimeOrigin::signed(1), honest));
		assert_eq!(free(1), before + 333);
		assert!(Unsettled::<Test>::get(honest, 1).is_none());
		assert_noop!(
			Rewards::settle_round(RuntimeOrigin::signed(OUTSIDER), honest, 1),
			pallet_rewards::Error::<Test>::NotUnsettled
		);
	});
}

#[test]
fn voided_round_with_full_queues_never_freezes_the_pool() {
	run_test(|| {
		// Block 1: four attacker pools fill the deadline slots of blocks 11 and 12.
		for attacker in 4..=7 {
			single_member_pool(attacker);
		}
		let honest = pallet_training_pools::NextPoolId::<Test>::get();
		assert_ok!(TrainingPools::create_pool(
			RuntimeOrigin::signed(CREATOR),
			spec(2, 3, two_thirds())
		));
		for who in 1..=3 {
			bond_and_join(who, honest, 1_000);
		}
		// Round 1 splits (no quorum, nobody silent); members 1 and 2 commit round 2 early.
		for (who, hash) in [(1, 7), (2, 8), (3, 9)] {
			assert_ok!(commit_to(honest, who, 1, hash, &[0, 1, 2]));
		}
		assert_ok!(commit_to(honest, 1, 2, 5, &[0, 1]));
		assert_ok!(commit_to(honest, 2, 2, 5, &[0, 1]));
		// Block 11: the attacker pools were voided (they completed); four new ones become final
		// and fill the settlement slots of blocks 44 and 45.
		run_to_block(11);
		for attacker in 4..=7 {
			// (The stake of its first pool stays committed until that pool's round is
			// settled: it bonds fresh stake.)
			assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(attacker), 100));
			let pool = single_member_pool(attacker);
			assert_ok!(commit_to(pool, attacker, 1, attacker as u8, &[0]));
		}
		// Voiding round 1 opens round 2, which is final at once, with no settlement slot left:
		// all of it happens, in one storage layer.
		assert_ok!(Checkpoints::void_expired_round(RuntimeOrigin::signed(OUTSIDER), honest));
		assert_eq!(Voided::<Test>::get(honest, 1), Some(11));
		let fin = FinalCheckpoints::<Test>::get(honest, 2).expect("round 2 final");
		assert_eq!(fin.contributors.to_vec(), vec![1, 2]);
		assert_eq!(
			pallet_training_pools::Pools::<Test>::get(honest).expect("pool").status,
			synod_primitives::PoolStatus::Completed
		);
		assert!(!Unsettled::<Test>::get(honest, 2).expect("reserved").scheduled);
		check_invariants();
		run_to_block(44);
		assert_ok!(Rewards::claim_rewards(RuntimeOrigin::signed(1), honest));
		assert_eq!(pallet_rewards::Claimable::<Test>::get(honest, 2), 500);
	});
}

/// A pool every member has left opened a round with an empty snapshot after each void: a void
/// (its hook weight and a deadline slot) every `round_timeout` blocks, for nothing but the
/// creator's deposit. It is cancelled when its round in flight closes instead.
#[test]
fn a_memberless_pool_is_cancelled_instead_of_voiding_every_round() {
	run_test(|| {
		// The attacker's pool: its one member starts round 1 and leaves in the same block.
		let pool = pallet_training_pools::NextPoolId::<Test>::get();
		assert_ok!(TrainingPools::create_pool(
			RuntimeOrigin::signed(CREATOR),
			spec(5, 1, two_thirds())
		));
		bond_and_join(4, pool, 100);
		let open = OpenRounds::<Test>::get(pool).expect("round 1 open");
		assert_ok!(TrainingPools::leave_pool(RuntimeOrigin::signed(4), pool));
		// Round 1 is voided at its deadline (its one participant is silent)…
		run_to_block(open.deadline + 1);
		assert!(Voided::<Test>::contains_key(pool, 1));
		// …and no round opens after it: the pool is cancelled, its unreserved budget back.
		assert_eq!(OpenRounds::<Test>::get(pool), None);
		let info = pallet_training_pools::Pools::<Test>::get(pool).expect("pool");
		assert_eq!(info.status, synod_primitives::PoolStatus::Cancelled);
		assert!(pools_events().iter().any(|e| matches!(
			e,
			pallet_training_pools::Event::PoolCancelled { pool_id, .. } if *pool_id == pool
		)));
		run_to_block(open.deadline + 60);
		assert_eq!(OpenRounds::<Test>::get(pool), None, "no round opened since");
		assert_eq!(pallet_training_pools::Pools::<Test>::get(pool).expect("pool").current_round, 1);
	});
}

/// A pool whose members leave but one keeps running its rounds.
#[test]
fn a_pool_with_a_member_left_runs_on() {
	run_test(|| {
		training_pool(3, two_thirds(), &[1_000, 1_000]);
		let open = OpenRounds::<Test>::get(0).expect("round 1 open");
		assert_ok!(TrainingPools::leave_pool(RuntimeOrigin::signed(2), 0));
		run_to_block(open.deadline + 1);
		assert_eq!(OpenRounds::<Test>::get(0).expect("round 2 open").round, 2);
	});
}

/// Attack: one-round pools of the attacker's own, each with its full member list, whose only
/// round nobody commits: their voids, in `on_initialize` or by `void_expired_round`, end the
/// pools (every member's commitment ended) beyond what the void benchmark measured (its pools
/// go on to their next round), so the hook reported less weight than it used, block after
/// block. A void that ends its pool now adds the pool's end at its member count.
#[test]
fn voids_that_end_their_pools_are_charged_the_pools_end() {
	use frame_support::traits::Hooks;
	use synod_primitives::PoolsInterface;
	run_test(|| {
		let hooked = training_pool(1, two_thirds(), &[1_000, 1_000, 1_000]);
		let lazy = single_member_pool(4);
		let deadline = Checkpoints::open_round(hooked).expect("open").deadline;
		assert_eq!(Checkpoints::open_round(lazy).map(|o| o.deadline), Some(deadline));
		// The lazy pool's round is left out of the deadline list.
		pallet_checkpoints::Deadlines::<Test>::mutate(deadline, |d| d.retain(|(p, _)| *p != lazy));
		run_to_block(deadline - 1);
		// The hook's report at the deadline, measured once (rolled back), then run for real.
		System::set_block_number(deadline);
		let hook = frame_support::storage::with_transaction(|| {
			let reported = Checkpoints::on_initialize(deadline);
			sp_runtime::TransactionOutcome::Rollback(Ok::<_, sp_runtime::DispatchError>(reported))
		})
		.expect("measured");
		System::set_block_number(deadline - 1);
		run_to_block(deadline);
		let void = Checkpoints::on_initialize_void_weight(1);
		let end = TrainingPools::end_weight(3);
		assert!(Voided::<Test>::contains_key(hooked, 1));
		assert_eq!(
			TrainingPools::pool(hooked).map(|p| p.status),
			Some(synod_primitives::PoolStatus::Completed)
		);
		assert!(hook.all_gte(void.saturating_add(end)), "the hook reported {hook}");
		let post = Checkpoints::void_expired_round(RuntimeOrigin::signed(OUTSIDER), lazy)
			.expect("the lazy void");
		let used = post.actual_weight.expect("reported");
		let one = TrainingPools::end_weight(1);
		let lazy_void = Checkpoints::void_weight_at(1);
		assert!(used.all_gte(lazy_void.saturating_add(one)), "the call reported {used}");
		// A void whose pool goes on is refunded the end.
		let going_on = pallet_training_pools::NextPoolId::<Test>::get();
		assert_ok!(TrainingPools::create_pool(
			RuntimeOrigin::signed(CREATOR),
			spec(2, 1, two_thirds())
		));
		bond_and_join(5, going_on, 100);
		let deadline = Checkpoints::open_round(going_on).expect("open").deadline;
		pallet_checkpoints::Deadlines::<Test>::remove(deadline);
		run_to_block(deadline);
		let post = Checkpoints::void_expired_round(RuntimeOrigin::signed(OUTSIDER), going_on)
			.expect("the lazy void");
		let used = post.actual_weight.expect("reported");
		assert!(used.ref_time() < lazy_void.saturating_add(one).ref_time(), "charged {used}");
	});
}
