//! Benchmarks (FRAME benchmarking v2).

use super::*;
use crate::pallet::{Jurors, OpenChallenges, Verdicts};
use frame_benchmarking::v2::*;
use frame_support::traits::{fungible::Mutate, Get, Hooks};
use frame_system::RawOrigin;
use sp_runtime::traits::{Bounded, SaturatedConversion};
use synod_primitives::PoolsInterface;

fn funded<T: Config>(name: &'static str, i: u32) -> T::AccountId {
	let who: T::AccountId = account(name, i, 0);
	// Far below `max / accounts`, so that hundreds of funded accounts cannot overflow issuance.
	T::Currency::set_balance(&who, BalanceOf::<T>::max_value() / 1_000_000_000u32.into());
	who
}

/// Registers `n` jurors, each bonding enough for a jury of one to give a verdict.
fn register_jurors<T: Config>(n: u32) -> Result<(), BenchmarkError> {
	let stake: u128 = T::MinJurorStake::get()
		.saturated_into::<u128>()
		.max(T::MinJuryStake::get().saturated_into());
	for i in 0..n {
		let who = funded::<T>("juror", i);
		T::BenchmarkHelper::bond(&who, stake);
		Pallet::<T>::do_register_juror(who)?;
	}
	Ok(())
}

#[benchmarks]
mod benchmarks {
	use super::*;

	#[benchmark]
	fn open_challenge(m: Linear<2, { T::MaxPoolMembers::get() }>) -> Result<(), BenchmarkError> {
		let (pool, members) = T::BenchmarkHelper::final_round(m);
		let accused = members.last().cloned().ok_or(BenchmarkError::Weightless)?;
		let who = funded::<T>("challenger", 0);
		#[extrinsic_call]
		_(RawOrigin::Signed(who), pool, 1, accused, [1; 32]);
		assert!(OpenChallenges::<T>::get(0).is_some());
		Ok(())
	}

	// Worst case: the deciding vote of a guilty verdict (slash, bond release, cleanup) with a
	// full jury.
	#[benchmark]
	fn vote() -> Result<(), BenchmarkError> {
		let (pool, members) = T::BenchmarkHelper::final_round(T::MaxPoolMembers::get());
		register_jurors::<T>(T::JurySize::get())?;
		let accused = members.first().cloned().ok_or(BenchmarkError::Weightless)?;
		Pallet::<T>::do_open_challenge(
			funded::<T>("challenger", 0),
			pool,
			1,
			accused.clone(),
			[1; 32],
		)?;
		let draw_at = OpenChallenges::<T>::get(0).ok_or(BenchmarkError::Weightless)?.draw_at;
		frame_system::Pallet::<T>::set_block_number(draw_at);
		Pallet::<T>::advance(0, draw_at);
		let jury = OpenChallenges::<T>::get(0).ok_or(BenchmarkError::Weightless)?.jury;
		let mut voters = jury.iter().map(|(j, _)| j.clone());
		let mut last = voters.next().ok_or(BenchmarkError::Weightless)?;
		while OpenChallenges::<T>::get(0).is_some_and(|c| {
			let guilty = c.votes.guilty_stake.saturating_add(
				c.jury.iter().find(|(j, _)| *j == last).map(|(_, s)| *s).unwrap_or_default(),
			);
			guilty < c.votes.conviction_threshold()
		}) {
			Pallet::<T>::do_vote(last.clone(), 0, true)?;
			last = voters.next().ok_or(BenchmarkError::Weightless)?;
		}
		#[extrinsic_call]
		_(RawOrigin::Signed(last), 0, true);
		assert_eq!(Verdicts::<T>::get((pool, 1, accused)), Some(Verdict::Guilty));
		Ok(())
	}

	// Worst case: `e` jury draws due in one block, each over `MaxJurors` registered jurors.
	#[benchmark]
	fn on_initialize_expire(
		e: Linear<0, { T::MaxExpiriesPerBlock::get() }>,
	) -> Result<(), BenchmarkError> {
		let (pool, members) = T::BenchmarkHelper::final_round(T::MaxPoolMembers::get());
		register_jurors::<T>(T::MaxJurors::get())?;
		let challenger = funded::<T>("challenger", 0);
		let per = T::MaxChallengesPerContribution::get().max(1) as usize;
		for i in 0..e as usize {
			let accused = members
				.get((i / per) % members.len())
				.cloned()
				.ok_or(BenchmarkError::Weightless)?;
			Pallet::<T>::do_open_challenge(challenger.clone(), pool, 1, accused, [1; 32])?;
		}
		let at = frame_system::Pallet::<T>::block_number()
			+ T::Pools::round_params(pool)
				.map(|p| p.timeline.jury_delay.saturated_into())
				.unwrap_or_else(|| 1u32.into());
		frame_system::Pallet::<T>::set_block_number(at);
		#[block]
		{
			Pallet::<T>::on_initialize(at);
		}
		assert!(crate::pallet::Expiries::<T>::get(at).is_empty());
		Ok(())
	}

	// Worst case: the list is full and the newcomer replaces the weakest juror.
	#[benchmark]
	fn register_juror(j: Linear<1, { T::MaxJurors::get() }>) -> Result<(), BenchmarkError> {
		register_jurors::<T>(j)?;
		let who = funded::<T>("newcomer", 0);
		let stake: u128 = T::MinJurorStake::get()
			.saturated_into::<u128>()
			.max(T::MinJuryStake::get().saturated_into());
		T::BenchmarkHelper::bond(&who, stake.saturating_mul(2));
		#[extrinsic_call]
		_(RawOrigin::Signed(who.clone()));
		assert!(Jurors::<T>::get().contains(&who));
		Ok(())
	}

	impl_benchmark_test_suite!(Pallet, crate::mock::new_test_ext(), crate::mock::Test);
}
