//! Reaping ended pools (`reap_pool`). Pools used to stay in storage forever, with no deposit
//! paying for them; now the creator holds a storage deposit until the pool is reaped. The
//! attacks: reaping early, to erase the records a challenge of a cheater needs (its key, the
//! final checkpoint), or to drop rewards still owed to honest members (reaping pays them).

use crate::mock::*;
use frame_support::{assert_noop, assert_ok, traits::fungible::InspectHold};
use pallet_checkpoints::{FinalCheckpoints, KeptSnapshots, LastFinal, Snapshots, Voided};
use pallet_rewards::Claimable;
use pallet_training_pools::{Error, HoldReason, Members, Pools};
use synod_primitives::{protocol::Verdict, PoolStatus};

/// A pool of one round that trainers 1..=3 (1 000 each) finalized at block 1: it completed.
fn completed_pool() -> (u32, u64) {
	let pool = training_pool(1, two_thirds(), &[1_000; 3]);
	for who in 1..=3 {
		assert_ok!(commit_to(pool, who, 1, 7, &[0, 1, 2]));
	}
	let info = Pools::<Test>::get(pool).expect("pool");
	assert_eq!(info.status, PoolStatus::Completed);
	let settled = TrainingPools::timeline(&info).settled_by(info.ended_at.expect("ended"));
	(pool, settled)
}

/// `reap_pool` by `who`; checks that what the call weighed never exceeds what it declared
/// (the bound a block was charged before it ran).
fn reap(who: AccountId, pool: u32) -> sp_runtime::DispatchResult {
	use frame_support::dispatch::GetDispatchInfo;
	let declared =
		pallet_training_pools::Call::<Test>::reap_pool { pool_id: pool }.get_dispatch_info();
	let post = TrainingPools::reap_pool(RuntimeOrigin::signed(who), pool).map_err(|e| e.error)?;
	let actual = post.actual_weight.expect("reap_pool reports what it deleted");
	assert!(actual.all_lte(declared.call_weight), "{actual:?} over {:?}", declared.call_weight);
	Ok(())
}

#[test]
fn reaping_cannot_erase_a_round_that_can_still_be_challenged() {
	run_test(|| {
		let (pool, settled) = completed_pool();
		// The creator tries to wipe the pool the block it completed…
		assert_noop!(reap(CREATOR, pool), Error::<Test>::PoolNotSettled);
		// …so a challenge of member 3 can still be opened and judged on the pool's records…
		jurors(&[1, 2], 1_000);
		assert_ok!(open_challenge(OUTSIDER, pool, 1, 3, [0x44; 32]));
		// …and even at the last block a verdict could come, the records stay.
		run_to_block(settled);
		assert_noop!(reap(CREATOR, pool), Error::<Test>::PoolNotSettled);
		assert!(FinalCheckpoints::<Test>::get(pool, 1).is_some());
		assert!(Members::<Test>::get(pool, 3).is_some());
	});
}

#[test]
fn reaping_cannot_drop_rewards_still_owed() {
	run_test(|| {
		let (pool, settled) = completed_pool();
		run_to_block(settled + 1);
		assert_eq!(Claimable::<Test>::get(pool, 1), 333, "settled: 1 000 over three");
		// Member 1 claims; 2 and 3 never do. Reaping pays them what they are owed.
		let before: Vec<Balance> = (1..=3).map(free).collect();
		assert_ok!(Rewards::claim_rewards(RuntimeOrigin::signed(1), pool));
		let creator = free(CREATOR);
		// Two claims, the last final hash and the final checkpoint: over REAP_LIMIT (3), so
		// two calls.
		assert_ok!(reap(OUTSIDER, pool));
		assert!(pools_events().contains(&pallet_training_pools::Event::PoolPartlyReaped {
			pool_id: pool,
			records: 3
		}));
		assert!(rewards_events().contains(&pallet_rewards::Event::RewardsClaimed {
			pool_id: pool,
			who: 3,
			amount: 333
		}));
		assert_ok!(reap(OUTSIDER, pool));
		// Everything of the pool is gone; every deposit is back where it came from.
		assert!(Pools::<Test>::get(pool).is_none());
		assert!(Claimable::<Test>::iter_prefix(pool).next().is_none());
		assert!(FinalCheckpoints::<Test>::get(pool, 1).is_none());
		assert!(LastFinal::<Test>::get(pool).is_none());
		assert_eq!(free(CREATOR), creator + POOL_DEPOSIT + ROUND_DEPOSIT);
		let deposit = RuntimeHoldReason::TrainingPools(HoldReason::MemberDeposit);
		let budget = RuntimeHoldReason::TrainingPools(HoldReason::PoolBudget);
		assert_eq!(Balances::balance_on_hold(&budget, &CREATOR), 0);
		for who in 1..=3u64 {
			assert!(Members::<Test>::get(pool, who).is_none());
			assert_eq!(Balances::balance_on_hold(&deposit, &who), 0);
			let i = who as usize - 1;
			assert_eq!(free(who), before[i] + 333 + MEMBER_DEPOSIT, "reward and deposit");
		}
	});
}

#[test]
fn reaping_deletes_the_snapshots_kept_for_equivocation_reports() {
	run_test(|| {
		// Both rounds split (2 against 3 of five equal stakes, quorum ⅔) and are voided.
		let pool = training_pool(2, two_thirds(), &[1_000; 5]);
		for round in 1..=2u32 {
			for who in 1..=5 {
				let hash = if who <= 2 { 7 } else { 8 };
				assert_ok!(commit_to(pool, who, round, hash, &[0, 1, 2, 3, 4]));
			}
			run_to_block(u64::from(round) * 10 + 1);
			assert!(Voided::<Test>::get(pool, round).is_some());
		}
		assert_eq!(KeptSnapshots::<Test>::get(pool).len(), 2);
		let info = Pools::<Test>::get(pool).expect("pool");
		run_to_block(TrainingPools::timeline(&info).settled_by(info.ended_at.expect("ended")) + 1);
		for _ in 0..10 {
			if Pools::<Test>::get(pool).is_none() {
				break;
			}
			assert_ok!(reap(OUTSIDER, pool));
		}
		assert!(Pools::<Test>::get(pool).is_none());
		assert!(!KeptSnapshots::<Test>::contains_key(pool));
		assert!(!Snapshots::<Test>::contains_key((pool, 1)));
		assert!(!Snapshots::<Test>::contains_key((pool, 2)));
	});
}

#[test]
fn reaping_deletes_the_pools_verdicts_and_equivocations() {
	run_test(|| {
		let (pool, settled) = completed_pool();
		// A verdict and a proved equivocation in this pool, and a verdict in another one.
		jurors(&[1, 2], 1_000);
		let (id, jury) = super::challenge(OUTSIDER, pool, 1, 3);
		super::all_vote(id, &jury, false);
		// An acquittal is told by its event and takes no storage; a conviction is stored (one of
		// an account that is no contributor, so that no settlement reads it).
		assert_eq!(verdict_of(pool, 1, 3), Some(Verdict::Innocent));
		assert!(pallet_challenges::Verdicts::<Test>::get((pool, 1, 3)).is_none());
		pallet_challenges::Verdicts::<Test>::insert((pool, 1, 99), Verdict::Guilty);
		pallet_challenges::Equivocations::<Test>::insert((pool, 1, 2), ([1; 32], [2; 32]));
		pallet_challenges::Verdicts::<Test>::insert((pool + 1, 1, 2), Verdict::Guilty);
		run_to_block(settled + 1);
		for _ in 0..10 {
			if Pools::<Test>::get(pool).is_none() {
				break;
			}
			assert_ok!(reap(OUTSIDER, pool));
		}
		assert!(Pools::<Test>::get(pool).is_none());
		assert_eq!(pallet_challenges::Verdicts::<Test>::iter_prefix((pool,)).count(), 0);
		assert_eq!(pallet_challenges::Equivocations::<Test>::iter_prefix((pool,)).count(), 0);
		// Another pool's records stay.
		assert_eq!(
			pallet_challenges::Verdicts::<Test>::get((pool + 1, 1, 2)),
			Some(Verdict::Guilty)
		);
		pallet_challenges::Verdicts::<Test>::remove((pool + 1, 1, 2));
	});
}
