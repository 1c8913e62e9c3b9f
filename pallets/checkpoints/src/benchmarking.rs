//! Benchmarks (FRAME benchmarking v2).

use super::*;
use crate::pallet::{
	Deadlines, FinalCheckpoints, KeptSnapshots, MissedRounds, Snapshots, UnmatchedCommits, Voided,
};
use alloc::{vec, vec::Vec};
use frame_benchmarking::v2::*;
use frame_support::{
	traits::{Get, Hooks},
	BoundedVec,
};
use frame_system::{pallet_prelude::BlockNumberFor, RawOrigin};
use sp_runtime::traits::Saturating;
use synod_primitives::{MemberIndex, PoolId, PoolSetup, PoolsInterface, RoundIndex};

fn all_included<T: Config>(m: u32) -> IncludedSet<T> {
	BoundedVec::truncate_from((0..m).collect::<Vec<MemberIndex>>())
}

/// What a benchmarked void does to its round's silent participants.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AtVoid {
	/// Each is leaked and stays (`DropAfterMissed − 2` rounds missed before): the pool goes
	/// on to its next round, whose snapshot holds them all and whose deadline finds room only
	/// in the last list it may probe.
	Stay,
	/// Each is leaked and dropped (`DropAfterMissed − 1` rounds missed before): the pool, left
	/// without members, ends with the void.
	Drop,
}

/// Fills every deadline list a deadline at `at` may probe but the last, which keeps one free
/// slot (`MaxDeadlinesPerBlock` lists read, one written). Returns the last list's block.
fn fill_deadline_lists<T: Config>(mut at: BlockNumberFor<T>) -> BlockNumberFor<T> {
	let lists = T::MaxDeadlinesPerBlock::get().max(1);
	for i in 1..=lists {
		Deadlines::<T>::mutate(at, |d| {
			while d.try_push((PoolId::MAX, 0)).is_ok() {}
			if i == lists {
				d.pop();
			}
		});
		if i < lists {
			at = at.saturating_add(1u32.into());
		}
	}
	at
}

/// Readies `pool`'s open round for the worst void of its kind (`at_void`): every participant
/// is silent, and the pool keeps as many voided rounds' snapshots as it may, each as large as
/// this round's, with unmatched commits never scheduled (the void deletes two). Returns the
/// open round; the void is due at its deadline.
fn silent_round_after_voids<T: Config>(
	pool: PoolId,
	at_void: AtVoid,
) -> Result<OpenRound<T::Balance, BlockNumberFor<T>>, BenchmarkError> {
	let open = crate::pallet::OpenRounds::<T>::get(pool).ok_or(BenchmarkError::Weightless)?;
	let snapshot = Snapshots::<T>::get((pool, open.round)).unwrap_or_default();
	let missed = match at_void {
		AtVoid::Stay => T::DropAfterMissed::get().saturating_sub(2),
		AtVoid::Drop => T::DropAfterMissed::get().saturating_sub(1),
	};
	for p in snapshot.iter() {
		MissedRounds::<T>::insert(pool, &p.who, missed);
	}
	if at_void == AtVoid::Stay {
		// The next round opens in the void's block: its deadline probes every list.
		let params = T::Pools::round_params(pool).ok_or(BenchmarkError::Weightless)?;
		let next = params.timeline.deadline(crate::finality::block::<T>(open.deadline));
		fill_deadline_lists::<T>(crate::finality::runtime_block::<T>(next));
	}
	let old = 1_000..1_000 + crate::KEPT_VOIDED_SNAPSHOTS;
	for round in old.clone() {
		Snapshots::<T>::insert((pool, round), snapshot.clone());
		UnmatchedCommits::<T>::insert((pool, round), snapshot.clone());
		Voided::<T>::insert(pool, round, BlockNumberFor::<T>::from(1u32));
	}
	KeptSnapshots::<T>::insert(
		pool,
		BoundedVec::truncate_from(old.map(|r| (r, 1u32.into())).collect::<Vec<_>>()),
	);
	Ok(open)
}

/// `v` pools of `MaxMembers` members whose round 1 opens in this block, readied by
/// [`silent_round_after_voids`] (`at_void`), so that their voids share one deadline list.
/// Returns the block of that list (the hook runs there: the next rounds open in it, their
/// deadlines later) and the pools.
fn due_voids<T: Config>(
	v: u32,
	at_void: AtVoid,
) -> Result<(BlockNumberFor<T>, Vec<PoolId>), BenchmarkError> {
	let mut due = None;
	let mut pools = Vec::new();
	for _ in 0..v {
		let (pool, _) = T::BenchmarkHelper::training_pool(T::MaxMembers::get());
		let open = silent_round_after_voids::<T>(pool, at_void)?;
		due = Some(open.deadline);
		pools.push(pool);
	}
	let at: BlockNumberFor<T> = due.unwrap_or_else(|| 100u32.into());
	assert_eq!(Deadlines::<T>::get(at).len() as u32, v, "every pool's void is measured");
	frame_system::Pallet::<T>::set_block_number(at);
	Ok((at, pools))
}

/// After the deadline queue's voids at `at` of `pools` readied by [`due_voids`]: each did what
/// `at_void` says, and each pool deleted two of its kept snapshots (their unmatched commits
/// stay for a decision).
fn assert_hook_voided<T: Config>(at: BlockNumberFor<T>, pools: &[PoolId], at_void: AtVoid) {
	assert!(Deadlines::<T>::get(at).is_empty());
	for &pool in pools {
		assert_voided::<T>(pool, 1, T::MaxMembers::get(), at_void);
		assert_eq!(
			KeptSnapshots::<T>::get(pool).len() as u32,
			crate::KEPT_VOIDED_SNAPSHOTS - 1,
			"two kept snapshots deleted, the void's kept"
		);
	}
	assert_eq!(
		UnmatchedCommits::<T>::iter().count() as u32,
		pools.len() as u32 * crate::KEPT_VOIDED_SNAPSHOTS,
		"undecided unmatched commits outlive their round's snapshot"
	);
}

/// After a void of `pool`'s round `round` readied by [`silent_round_after_voids`]: asserts
/// that it did what `at_void` says (the pool's next round open with every member, or the pool
/// ended without members).
fn assert_voided<T: Config>(pool: PoolId, round: RoundIndex, m: u32, at_void: AtVoid) {
	assert!(Voided::<T>::contains_key(pool, round));
	let next = crate::pallet::OpenRounds::<T>::get(pool);
	match at_void {
		AtVoid::Stay => {
			assert_eq!(next.map(|o| o.round), Some(round + 1), "the pool goes on");
			let participants = Snapshots::<T>::decode_len((pool, round + 1)).unwrap_or(0);
			assert_eq!(participants as u32, m, "every member stays");
		},
		AtVoid::Drop => {
			assert!(next.is_none(), "the pool ends");
			assert_eq!(T::Pools::member_count(pool), 0, "every member is dropped");
		},
	}
}

#[benchmarks]
mod benchmarks {
	use super::*;

	// Worst case: `m` members; every earlier member committed: the last member first, over
	// another set than the others, then one short of the quorum one candidate, then the
	// others each their own hash (over the agreed set once the split fixed it: every member),
	// `m − need + 2` candidates for `need` members at quorum. Every member
	// committed round 2 ahead of time (each its own hash), where the
	// chain takes commits ahead (no floor on `min_round_length`). The measured
	// call is the last member's second commit, over the agreed set: its stake moves from its
	// first commit to the largest candidate, which reaches quorum, finalizes the round,
	// schedules its settlement and opens round 2 (snapshot of `m`, `m` slashable horizons, `m`
	// early commits tallied).
	#[benchmark]
	fn commit_checkpoint(m: Linear<2, { T::MaxMembers::get() }>) -> Result<(), BenchmarkError> {
		let (pool, members) = T::BenchmarkHelper::training_pool(m);
		// The test suite plays the runtime's rule at every `m`: no commit before the round's
		// first `min_round_length` blocks, none ahead.
		#[cfg(test)]
		assert!(T::Pools::round_params(pool).is_some_and(|p| !p.timeline.accepts_commits_ahead()));
		let from = Pallet::<T>::commits_from(pool).ok_or(BenchmarkError::Weightless)?;
		frame_system::Pallet::<T>::set_block_number(from);
		let m = members.len() as u32;
		let full = all_included::<T>(m);
		let (last, rest) = members.split_last().ok_or(BenchmarkError::Weightless)?;
		// Members needed for the benchmark pools' 67 % quorum of equal stakes; one short of it
		// agree before the measured commit, every other earlier member adds its own candidate.
		let need = m.saturating_mul(67).div_ceil(100).max(1) as usize;
		// The last member first, over another set than the others: the round splits once ⅔
		// of the stake has committed.
		Pallet::<T>::do_commit(
			last.clone(),
			pool,
			1,
			[0xEE; 32],
			BoundedVec::truncate_from(vec![0]),
		)?;
		let agreed = || crate::pallet::AgreedSets::<T>::get((pool, 1)).map(|a| a.included);
		// Members on the candidate the measured commit completes: `need − 1` of them, the
		// others each their own hash (a first commit after the split is over the agreed set).
		let mut on_it = 0usize;
		for (i, who) in rest.iter().enumerate() {
			// The first of them leaves member 0 out (so that the split cannot fix the last
			// member's set, whatever `m`); the others include every member.
			let set = match agreed() {
				Some(set) => set,
				None if i == 0 => BoundedVec::truncate_from((1..m).collect::<Vec<_>>()),
				None => full.clone(),
			};
			let hash = if on_it + 1 < need { [1; 32] } else { [2u8.saturating_add(i as u8); 32] };
			Pallet::<T>::do_commit(who.clone(), pool, 1, hash, set)?;
			if hash == [1; 32] {
				on_it += 1;
			}
		}
		let agreed = agreed().ok_or(BenchmarkError::Weightless)?;
		// Those of them whose commit is not over the agreed set move there.
		for who in rest.iter().take(need.saturating_sub(1)) {
			let prev = crate::pallet::Commits::<T>::get((pool, 1), who);
			if prev.is_some_and(|c| c.included != agreed) {
				Pallet::<T>::do_commit(who.clone(), pool, 1, [1; 32], agreed.clone())?;
			}
		}
		// Only a chain without a floor on `min_round_length` takes commits ahead of a round.
		let ahead =
			T::Pools::round_params(pool).is_some_and(|p| p.timeline.accepts_commits_ahead());
		if ahead {
			for (i, who) in members.iter().enumerate() {
				Pallet::<T>::do_commit(who.clone(), pool, 2, [i as u8; 32], full.clone())?;
			}
		}
		#[extrinsic_call]
		_(RawOrigin::Signed(last.clone()), pool, 1, [1; 32], agreed);
		assert!(FinalCheckpoints::<T>::get(pool, 1).is_some());
		let early = if ahead { m } else { 0 };
		assert_eq!(crate::pallet::Candidates::<T>::get((pool, 2)).len() as u32, early);
		Ok(())
	}

	// Worst case of one void by `void_expired_round` whose pool goes on: a round of `m`
	// participants, all silent, each leaked and staying, the pool keeping as many voided
	// rounds' snapshots of `m` as it may (two deleted), its next round opened with all `m`
	// (snapshot, `m` slashable horizons, `m` early commits read) and its deadline probing
	// every list. `void_expired_round_dropping` measures the other path; the call is charged
	// the larger ([`Pallet::void_weight_at`]).
	#[benchmark]
	fn void_expired_round(m: Linear<1, { T::MaxMembers::get() }>) -> Result<(), BenchmarkError> {
		let (pool, _) = T::BenchmarkHelper::training_pool(m);
		let open = silent_round_after_voids::<T>(pool, AtVoid::Stay)?;
		frame_system::Pallet::<T>::set_block_number(open.deadline);
		let caller: T::AccountId = whitelisted_caller();
		#[extrinsic_call]
		void_expired_round(RawOrigin::Signed(caller), pool);
		assert_voided::<T>(pool, open.round, m, AtVoid::Stay);
		Ok(())
	}

	// Worst case of one void by `void_expired_round` that drops its round's `m` participants:
	// all silent, each leaked and dropped, the pool keeping as many voided rounds' snapshots
	// of `m` as it may (two deleted). The pool, left without members, ends: its end is
	// measured here and charged again apart (`void_and_end`).
	#[benchmark]
	fn void_expired_round_dropping(
		m: Linear<1, { T::MaxMembers::get() }>,
	) -> Result<(), BenchmarkError> {
		let (pool, _) = T::BenchmarkHelper::training_pool(m);
		let open = silent_round_after_voids::<T>(pool, AtVoid::Drop)?;
		frame_system::Pallet::<T>::set_block_number(open.deadline);
		let caller: T::AccountId = whitelisted_caller();
		#[extrinsic_call]
		void_expired_round(RawOrigin::Signed(caller), pool);
		assert_voided::<T>(pool, open.round, m, AtVoid::Drop);
		Ok(())
	}

	// Worst case of the deadline queue's `v` voids in one block, each of a `MaxMembers` round
	// whose pool goes on (as `void_expired_round`); `on_initialize_void_dropping` measures
	// voids that drop every participant. The hook is charged the larger
	// ([`Pallet::on_initialize_void_weight`]).
	#[benchmark]
	fn on_initialize_void(
		v: Linear<0, { T::MaxDeadlinesPerBlock::get() }>,
	) -> Result<(), BenchmarkError> {
		let (at, pools) = due_voids::<T>(v, AtVoid::Stay)?;
		#[block]
		{
			Pallet::<T>::on_initialize(at);
		}
		assert_hook_voided::<T>(at, &pools, AtVoid::Stay);
		Ok(())
	}

	// Worst case of the deadline queue's `v` voids in one block, each of a `MaxMembers` round
	// whose participants are all dropped (as `void_expired_round_dropping`): the pools end.
	#[benchmark]
	fn on_initialize_void_dropping(
		v: Linear<0, { T::MaxDeadlinesPerBlock::get() }>,
	) -> Result<(), BenchmarkError> {
		let (at, pools) = due_voids::<T>(v, AtVoid::Drop)?;
		#[block]
		{
			Pallet::<T>::on_initialize(at);
		}
		assert_hook_voided::<T>(at, &pools, AtVoid::Drop);
		Ok(())
	}

	// Worst case: `MaxMembers` unmatched committers, none excused, each at `DropAfterMissed − 1`
	// missed rounds, so every one is slashed and dropped from the pool; the round's snapshot
	// was deleted by a later void (nothing kept), so the decision is due.
	#[benchmark]
	fn decide_unmatched_commits() -> Result<(), BenchmarkError> {
		let (pool, _) = T::BenchmarkHelper::training_pool(T::MaxMembers::get());
		let open = crate::pallet::OpenRounds::<T>::get(pool).ok_or(BenchmarkError::Weightless)?;
		let snapshot = Snapshots::<T>::get((pool, open.round)).unwrap_or_default();
		for p in snapshot.iter() {
			MissedRounds::<T>::insert(pool, &p.who, T::DropAfterMissed::get().saturating_sub(1));
		}
		let round = 1_000;
		UnmatchedCommits::<T>::insert((pool, round), snapshot);
		Voided::<T>::insert(pool, round, BlockNumberFor::<T>::from(1u32));
		let caller: T::AccountId = whitelisted_caller();
		#[extrinsic_call]
		_(RawOrigin::Signed(caller), pool, round);
		assert!(!UnmatchedCommits::<T>::contains_key((pool, round)));
		Ok(())
	}

	// Worst case of settling a final round (`OnRoundSettled::round_settled`, which Rewards
	// calls once per settlement): `MaxMembers` participants, every one in the final included
	// set, and one commit among them, as when a single stake holds the quorum: a silent member
	// costs more (its stake kept slashable, an entry held) than a commit (one deletion), and
	// at least one member committed. The benchmark pools' stakes are equal, so the round is
	// made final by quorum and every commit but the first is then deleted. Every deadline list
	// the decision may take is full but the last (`MaxDeadlinesPerBlock` lists read, one
	// written, a write more than when none has room), and each silent member's stake is kept
	// slashable until then. Then the round's snapshot and its commit are deleted.
	#[benchmark]
	fn round_settled() -> Result<(), BenchmarkError> {
		let (pool, members) = T::BenchmarkHelper::training_pool(T::MaxMembers::get());
		let from = Pallet::<T>::commits_from(pool).ok_or(BenchmarkError::Weightless)?;
		frame_system::Pallet::<T>::set_block_number(from);
		let m = members.len() as u32;
		let full = all_included::<T>(m);
		let need = m.saturating_mul(67).div_ceil(100).max(1);
		for who in members.iter().take(need as usize) {
			Pallet::<T>::do_commit(who.clone(), pool, 1, [1; 32], full.clone())?;
		}
		assert!(FinalCheckpoints::<T>::get(pool, 1).is_some(), "quorum committed");
		for who in members.iter().take(need as usize).skip(1) {
			crate::pallet::Commits::<T>::remove((pool, 1), who);
		}
		// Every list the decision may take is full but the last, which has one free slot.
		let at = fill_deadline_lists::<T>(
			frame_system::Pallet::<T>::block_number().saturating_add(1u32.into()),
		);
		#[block]
		{
			<Pallet<T> as synod_primitives::OnRoundSettled>::round_settled(pool, 1);
		}
		let held = UnmatchedCommits::<T>::get((pool, 1)).map_or(0, |h| h.len() as u32);
		assert_eq!(held, m.saturating_sub(1), "every silent included member is held");
		assert!(Snapshots::<T>::get((pool, 1)).is_none(), "the snapshot is pruned");
		assert!(Deadlines::<T>::get(at).contains(&(pool, 1)), "decided in the last list");
		Ok(())
	}

	impl_benchmark_test_suite!(Pallet, crate::mock::new_bench_ext(), crate::mock::Test);
}
