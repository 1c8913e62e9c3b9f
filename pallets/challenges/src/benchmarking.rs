//! Benchmarks (FRAME benchmarking v2).

use super::*;
use crate::pallet::{
	Appeals, Disputes, Equivocations, Expiries, OpenChallenges, OptedOut, Verdicts,
};
use alloc::vec::Vec;
use codec::Encode;
use frame_benchmarking::v2::*;
use frame_support::traits::{fungible::Mutate, Get, Hooks};
use frame_system::{pallet_prelude::BlockNumberFor, RawOrigin};
use sp_runtime::traits::{Bounded, SaturatedConversion, Saturating};
use synod_primitives::{CheckpointsInspect, PoolId, PoolsInterface, RoundIndex};

fn funded<T: Config>(name: &'static str, i: u32) -> T::AccountId {
	let who: T::AccountId = account(name, i, 0);
	// Far below `max / accounts`, so that hundreds of funded accounts cannot overflow issuance.
	T::Currency::set_balance(&who, BalanceOf::<T>::max_value() / 1_000_000_000u32.into());
	who
}

/// `accused`'s signed announcement for `round` of `pool`, signed with the key every benchmark
/// member registers ([`synod_primitives::BENCHMARK_KEY_SEED`]).
fn evidence<T: Config>(
	pool: PoolId,
	round: RoundIndex,
	accused: &T::AccountId,
) -> Result<Evidence, BenchmarkError> {
	let fin = T::Checkpoints::final_checkpoint(pool, round).ok_or(BenchmarkError::Weightless)?;
	let index = fin
		.contributors
		.iter()
		.find(|p| p.who == *accused)
		.map(|p| p.index)
		.ok_or(BenchmarkError::Weightless)?;
	announcement::<T>(pool, round, index, accused, [1; 32])
}

/// Member `index`'s (`who`'s) signed announcement of a payload with `digest` for `round` of
/// `pool`, signed with [`synod_primitives::BENCHMARK_KEY_SEED`].
fn announcement<T: Config>(
	pool: PoolId,
	round: RoundIndex,
	index: u32,
	who: &T::AccountId,
	digest: [u8; 32],
) -> Result<Evidence, BenchmarkError> {
	use synod_primitives::protocol::evidence::{signing, Body, Envelope, PayloadRef};
	let key = T::Pools::member_key(pool, index, who).ok_or(BenchmarkError::Weightless)?;
	let envelope = Envelope {
		pool: pool.into(),
		round,
		member: index,
		peer_id: key.peer_id,
		body: Body::Alive { seq: 1, payload: Some(PayloadRef { digest, size: 1 }) },
	};
	Evidence::try_from(signing::sign(&synod_primitives::BENCHMARK_KEY_SEED, envelope).encode())
		.map_err(|_| BenchmarkError::Weightless)
}

/// Makes sure the seed block of a draw at `draw_at` has randomness (benchmark blocks carry no
/// VRF).
fn seed_draw<T: Config>(draw_at: BlockNumberFor<T>) {
	use synod_primitives::RandomnessAt;
	let seed_block = draw_at - 1u32.into();
	if T::Randomness::randomness_at(seed_block).is_none() {
		T::Randomness::set_for_benchmark(seed_block, [7u8; 32]);
	}
}

/// Leaves the chain at the first block in which round 1 of `pool` (final) can be challenged:
/// the one after its late commits close.
fn to_challenges<T: Config>(pool: PoolId) -> Result<(), BenchmarkError> {
	let timeline = T::Pools::round_params(pool).ok_or(BenchmarkError::Weightless)?.timeline;
	let fin = T::Checkpoints::final_checkpoint(pool, 1).ok_or(BenchmarkError::Weightless)?;
	let from = timeline.challenges_from(fin.finalized_at.saturated_into());
	frame_system::Pallet::<T>::set_block_number(from.saturated_into());
	Ok(())
}

/// What a challenger opening a challenge in the worst case holds: round 1 of a pool of `m`
/// members final (every one a contributor), its last member accused, a funded challenger and
/// the accused's signed announcement. Returns (pool, challenger, accused, evidence).
fn opened_setup<T: Config>(
	m: u32,
) -> Result<(PoolId, T::AccountId, T::AccountId, Evidence), BenchmarkError> {
	let (pool, members) = T::BenchmarkHelper::final_round(m);
	to_challenges::<T>(pool)?;
	let accused = members.last().cloned().ok_or(BenchmarkError::Weightless)?;
	let who = funded::<T>("challenger", 0);
	let evidence = evidence::<T>(pool, 1, &accused)?;
	Ok((pool, who, accused, evidence))
}

/// A final round of a full pool (every member a contributor and, by default, a juror, each
/// bonding [`juror_stake`] more), and challenge 0 against its first member opened and its
/// committee drawn (as many distinct jurors as the pool has members: the worst case of paying
/// voters and of slashing no-shows); returns the pool and the accused.
fn drawn_challenge<T: Config>() -> Result<(PoolId, T::AccountId), BenchmarkError> {
	drawn_challenge_of::<T>(false)
}

/// [`drawn_challenge`]; with `skewed`, from unequal snapshot stakes: one member holds a little
/// more than all the others together, every other one the same (the accused first), so that
/// most members hold a seat or a few and one holds most: the committee in which the most
/// voters vote before a verdict ([`vote_until_decided`] votes the fewest seats first).
fn drawn_challenge_of<T: Config>(skewed: bool) -> Result<(PoolId, T::AccountId), BenchmarkError> {
	let (pool, members) = T::BenchmarkHelper::final_round(T::MaxPoolMembers::get());
	let accused = members.first().cloned().ok_or(BenchmarkError::Weightless)?;
	if skewed {
		let small = juror_stake::<T>();
		let others = small.saturating_mul(members.len().saturating_sub(1) as u128);
		let large = others.saturating_add(others / 3);
		let stakes: Vec<u128> = (0..members.len())
			.map(|i| if i == members.len() - 1 { large } else { small })
			.collect();
		T::BenchmarkHelper::set_snapshot_stakes(pool, 1, &stakes);
	}
	to_challenges::<T>(pool)?;
	for who in &members {
		T::BenchmarkHelper::bond(who, juror_stake::<T>());
	}
	Pallet::<T>::do_open_challenge(
		funded::<T>("challenger", 0),
		pool,
		1,
		accused.clone(),
		&evidence::<T>(pool, 1, &accused)?,
		// Narrowed: closing it deletes its `Disputes` record too (the worst close path).
		Dispute::Segment(0),
	)?;
	let draw_at = OpenChallenges::<T>::get(0).ok_or(BenchmarkError::Weightless)?.draw_at;
	seed_draw::<T>(draw_at);
	frame_system::Pallet::<T>::set_block_number(draw_at);
	Pallet::<T>::advance(0, draw_at);
	assert!(
		OpenChallenges::<T>::get(0)
			.is_some_and(|c| c.votes.seats == T::JurySize::get() && c.jury.len() > 1),
		"a full committee of several jurors is drawn"
	);
	Ok((pool, accused))
}

/// Votes `guilty` on challenge 0 from its committee, the jurors with the fewest seats first
/// (the most voters before the verdict), until the committee decides.
fn vote_until_decided<T: Config>(guilty: bool) -> Result<(), BenchmarkError> {
	let mut jury = OpenChallenges::<T>::get(0).ok_or(BenchmarkError::Weightless)?.jury;
	jury.sort_by_key(|s| s.seats);
	for s in jury.iter() {
		if OpenChallenges::<T>::get(0).is_none_or(|c| c.votes.decided().is_some()) {
			break;
		}
		Pallet::<T>::do_vote(s.who.clone(), 0, guilty)?;
	}
	Ok(())
}

/// Fills the schedule of the [`crate::SCHEDULE_PROBES`] blocks from `from` for a challenge of
/// `pool`: each holds all but one entry (of no challenge) and, but the last, `pool`'s whole
/// share ([`crate::PoolSlots`]), so that scheduling an earlier block searches them all, reading
/// both the block's schedule and the pool's count at each, and writes into the last one (its
/// schedule, the pool's count and the challenge's [`crate::ScheduledAt`]): the worst case.
fn fill_probes<T: Config>(from: BlockNumberFor<T>, pool: PoolId) {
	let room = T::MaxExpiriesPerBlock::get() as usize;
	for i in 0..crate::SCHEDULE_PROBES {
		let at = from + i.into();
		Expiries::<T>::mutate(at, |e| {
			while e.len() < room.saturating_sub(1) && e.try_push(ChallengeId::MAX).is_ok() {}
		});
		if i < crate::SCHEDULE_PROBES.saturating_sub(1) {
			crate::PoolSlots::<T>::insert(at, pool, T::MaxExpiriesPerPool::get());
		}
	}
}

/// [`drawn_challenge`], its committee's guilty ruling, the accused's appeal and (with
/// `drawn`) the appeal committee drawn, both committees from unequal stakes
/// ([`drawn_challenge_of`]): the worst case of the final verdict.
fn appealed_challenge<T: Config>(drawn: bool) -> Result<(PoolId, T::AccountId), BenchmarkError> {
	let (pool, accused) = drawn_challenge_of::<T>(drawn)?;
	vote_until_decided::<T>(true)?;
	assert!(
		Appeals::<T>::get(0).is_some_and(|a| a.ruling.is_some()),
		"the benchmark runtime's rulings wait for appeals"
	);
	T::Currency::mint_into(&accused, T::AppealBond::get().saturating_mul(2u32.into()))
		.map_err(|_| BenchmarkError::Weightless)?;
	Pallet::<T>::do_appeal(accused.clone(), 0)?;
	if drawn {
		let draw_at = OpenChallenges::<T>::get(0).ok_or(BenchmarkError::Weightless)?.draw_at;
		seed_draw::<T>(draw_at);
		frame_system::Pallet::<T>::set_block_number(draw_at);
		Pallet::<T>::advance(0, draw_at);
		assert!(
			OpenChallenges::<T>::get(0).is_some_and(|c| c.votes.seats == T::AppealJurySize::get()),
			"the appeal committee is drawn"
		);
	}
	Ok((pool, accused))
}

/// Stake a benchmark juror bonds, in planck: as much as a verdict needs (`MinJuryStake`).
fn juror_stake<T: Config>() -> u128 {
	T::MinJuryStake::get().saturated_into()
}

/// A bonded trainer outside every pool.
fn bonded<T: Config>() -> T::AccountId {
	let who = funded::<T>("trainer", 0);
	T::BenchmarkHelper::bond(&who, juror_stake::<T>());
	who
}

#[benchmarks]
mod benchmarks {
	use super::*;

	// Worst case measured: `m` contributors, none opted out (each one's `OptedOut` entry read).
	// Round `r − 1`'s final checkpoint, read for the eligible set, is missing in round 1; the
	// call's weight adds its read.
	#[benchmark]
	fn open_challenge(m: Linear<2, { T::MaxPoolMembers::get() }>) -> Result<(), BenchmarkError> {
		let (pool, who, accused, evidence) = opened_setup::<T>(m)?;
		#[extrinsic_call]
		_(RawOrigin::Signed(who), pool, 1, accused, evidence);
		assert!(OpenChallenges::<T>::get(0).is_some());
		Ok(())
	}

	// `open_challenge` narrowed to one trace segment (its `Disputes` record written): the same
	// worst case.
	#[benchmark]
	fn open_narrowed_challenge(
		m: Linear<2, { T::MaxPoolMembers::get() }>,
	) -> Result<(), BenchmarkError> {
		let (pool, who, accused, evidence) = opened_setup::<T>(m)?;
		let dispute = Dispute::Segment(synod_primitives::protocol::limits::MAX_TRACE_SEGMENTS - 1);
		#[extrinsic_call]
		_(RawOrigin::Signed(who), pool, 1, accused, evidence, dispute);
		assert_eq!(Disputes::<T>::get(0), Some(dispute));
		Ok(())
	}

	// Worst case: the appeal committee's deciding vote confirming a guilty ruling (slash, the
	// challenger's bond released, the appellant's bond slashed, the guilty voters paid by seats
	// twice, cleanup) with committees drawn from a full pool's contributors of unequal stakes,
	// the jurors with the fewest seats voting first and the largest one deciding: the most
	// voters paid.
	#[benchmark]
	fn vote() -> Result<(), BenchmarkError> {
		let (pool, accused) = appealed_challenge::<T>(true)?;
		let mut jury = OpenChallenges::<T>::get(0).ok_or(BenchmarkError::Weightless)?.jury;
		jury.sort_by_key(|s| s.seats);
		let mut voters = jury.iter().map(|s| (s.who.clone(), s.seats));
		let (mut last, mut seats) = voters.next().ok_or(BenchmarkError::Weightless)?;
		while OpenChallenges::<T>::get(0)
			.is_some_and(|c| c.votes.guilty.saturating_add(seats) < c.votes.conviction_threshold())
		{
			Pallet::<T>::do_vote(last.clone(), 0, true)?;
			(last, seats) = voters.next().ok_or(BenchmarkError::Weightless)?;
		}
		#[extrinsic_call]
		_(RawOrigin::Signed(last), 0, true);
		assert_eq!(Verdicts::<T>::get((pool, 1, accused)), Some(Verdict::Guilty));
		Ok(())
	}

	// Worst case of a vote that decides nothing: the first vote of an appeal committee drawn
	// from a full pool's contributors (the largest committee to read and write back), by the
	// juror with the fewest seats.
	#[benchmark]
	fn vote_undecided() -> Result<(), BenchmarkError> {
		appealed_challenge::<T>(true)?;
		let jury = OpenChallenges::<T>::get(0).ok_or(BenchmarkError::Weightless)?.jury;
		let juror = jury
			.iter()
			.min_by_key(|s| s.seats)
			.ok_or(BenchmarkError::Weightless)?
			.who
			.clone();
		#[extrinsic_call]
		vote(RawOrigin::Signed(juror), 0, true);
		assert!(
			OpenChallenges::<T>::get(0).is_some_and(|c| c.votes.decided().is_none()),
			"the vote decides nothing"
		);
		Ok(())
	}

	// Worst case: `e` jury draws due in one block, each over a full pool's contributors (every
	// one eligible) and each on a round of a different pool (so every draw reads its own
	// snapshot and final checkpoint: nothing is cached for the next one).
	#[benchmark]
	fn on_initialize_expire(
		e: Linear<0, { T::MaxExpiriesPerBlock::get() }>,
	) -> Result<(), BenchmarkError> {
		// Every pool is created in this block, so every round is final in one block and every
		// challenge opens in one.
		let start = frame_system::Pallet::<T>::block_number();
		let pools: Vec<_> = (0..e)
			.map(|_| {
				frame_system::Pallet::<T>::set_block_number(start);
				T::BenchmarkHelper::final_round(T::MaxPoolMembers::get())
			})
			.collect();
		let challenger = funded::<T>("challenger", 0);
		if let Some((pool, _)) = pools.first() {
			to_challenges::<T>(*pool)?;
		}
		for (pool, members) in &pools {
			let accused = members.first().cloned().ok_or(BenchmarkError::Weightless)?;
			let evidence = evidence::<T>(*pool, 1, &accused)?;
			Pallet::<T>::do_open_challenge(
				challenger.clone(),
				*pool,
				1,
				accused,
				&evidence,
				Dispute::Phase,
			)?;
		}
		let jury_delay = pools
			.first()
			.and_then(|(pool, _)| T::Pools::round_params(*pool))
			.map(|p| p.timeline.jury_delay.saturated_into())
			.unwrap_or_else(|| 1u32.into());
		let at = frame_system::Pallet::<T>::block_number() + jury_delay;
		seed_draw::<T>(at);
		frame_system::Pallet::<T>::set_block_number(at);
		#[block]
		{
			Pallet::<T>::on_initialize(at);
		}
		// Every due draw found its seed and drew a full committee (the worst case).
		assert!((0..e)
			.all(|id| OpenChallenges::<T>::get(id)
				.is_some_and(|c| c.votes.seats == T::JurySize::get())));
		assert!(crate::pallet::Expiries::<T>::get(at).is_empty());
		Ok(())
	}

	// Worst case: the expiry of a challenge whose whole committee did not vote (each
	// juror slashed), no verdict.
	#[benchmark]
	fn expire() -> Result<(), BenchmarkError> {
		let (pool, accused) = drawn_challenge::<T>()?;
		let c = OpenChallenges::<T>::get(0).ok_or(BenchmarkError::Weightless)?;
		frame_system::Pallet::<T>::set_block_number(c.expires_at);
		#[block]
		{
			Pallet::<T>::expire(0);
		}
		assert!(Verdicts::<T>::get((pool, 1, accused)).is_none(), "an expiry is no conviction");
		Ok(())
	}

	// Worst case: the round was voided (its kept snapshot is checked against the pool's list of
	// kept snapshots), the accused is the last of `m` snapshot participants (the longest scan)
	// and has left the pool (its key is read from the former members after missing the current
	// ones), both announcements verify, the slash pays the reporter.
	#[benchmark]
	fn report_equivocation(
		m: Linear<2, { T::MaxPoolMembers::get() }>,
	) -> Result<(), BenchmarkError> {
		let (pool, members) = T::BenchmarkHelper::voided_round(m);
		let accused = members.last().cloned().ok_or(BenchmarkError::Weightless)?;
		let index = T::Checkpoints::participant(pool, 1, &accused)
			.ok_or(BenchmarkError::Weightless)?
			.index;
		let first = announcement::<T>(pool, 1, index, &accused, [1; 32])?;
		let second = announcement::<T>(pool, 1, index, &accused, [2; 32])?;
		T::Pools::drop_member(pool, &accused);
		assert!(T::Pools::member(pool, &accused).is_none(), "the accused has left");
		let who = funded::<T>("reporter", 0);
		#[extrinsic_call]
		_(RawOrigin::Signed(who), pool, 1, accused.clone(), first, second);
		assert_eq!(Equivocations::<T>::get((pool, 1, accused)), Some(([1; 32], [2; 32])));
		Ok(())
	}

	// The accused appeals a guilty ruling (its committee is drawn in the ruling's execution
	// block, scheduled already: no schedule is searched).
	#[benchmark]
	fn appeal() -> Result<(), BenchmarkError> {
		let (_, accused) = drawn_challenge::<T>()?;
		vote_until_decided::<T>(true)?;
		T::Currency::mint_into(&accused, T::AppealBond::get().saturating_mul(2u32.into()))
			.map_err(|_| BenchmarkError::Weightless)?;
		#[extrinsic_call]
		_(RawOrigin::Signed(accused.clone()), 0);
		assert!(Appeals::<T>::get(0).is_some_and(|a| a.appellant.is_some()));
		Ok(())
	}

	// Worst case: the draw of an appeal committee (`AppealJurySize` seats over a full pool's
	// contributors), the first committee's votes deleted, every earlier block for its end full.
	#[benchmark]
	fn draw_appeal() -> Result<(), BenchmarkError> {
		let _ = appealed_challenge::<T>(false)?;
		let draw_at = OpenChallenges::<T>::get(0).ok_or(BenchmarkError::Weightless)?.draw_at;
		seed_draw::<T>(draw_at);
		frame_system::Pallet::<T>::set_block_number(draw_at);
		let voting_period = OpenChallenges::<T>::get(0)
			.and_then(|c| T::Pools::round_params(c.pool_id))
			.map(|p| p.timeline.voting_period.saturated_into())
			.unwrap_or_else(|| 1u32.into());
		let pool = OpenChallenges::<T>::get(0).ok_or(BenchmarkError::Weightless)?.pool_id;
		fill_probes::<T>(draw_at + voting_period, pool);
		#[block]
		{
			Pallet::<T>::advance(0, draw_at);
		}
		assert!(OpenChallenges::<T>::get(0)
			.is_some_and(|c| c.votes.seats == T::AppealJurySize::get() && c.jury.len() > 1));
		Ok(())
	}

	#[benchmark]
	fn register_juror() -> Result<(), BenchmarkError> {
		let who = bonded::<T>();
		Pallet::<T>::do_unregister_juror(who.clone())?;
		#[extrinsic_call]
		_(RawOrigin::Signed(who.clone()));
		assert!(!OptedOut::<T>::contains_key(&who));
		Ok(())
	}

	#[benchmark]
	fn unregister_juror() -> Result<(), BenchmarkError> {
		let who = bonded::<T>();
		#[extrinsic_call]
		_(RawOrigin::Signed(who.clone()));
		assert!(OptedOut::<T>::contains_key(&who));
		Ok(())
	}

	impl_benchmark_test_suite!(Pallet, crate::mock::new_bench_ext(), crate::mock::Test);
}
