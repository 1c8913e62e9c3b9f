//! Benchmarks (FRAME benchmarking v2).

use super::*;
use crate::pallet::{Expiries, OpenChallenges, Verdicts};
use frame_benchmarking::v2::*;
use frame_support::traits::{fungible::Mutate, Get, Hooks};
use frame_system::RawOrigin;
use sp_runtime::traits::Bounded;

fn challenger<T: Config>() -> T::AccountId {
	let who: T::AccountId = account("challenger", 0, 0);
	// Far below `max / accounts`, so that hundreds of funded accounts cannot overflow issuance.
	T::Currency::set_balance(&who, BalanceOf::<T>::max_value() / 1_000_000_000u32.into());
	who
}

#[benchmarks]
mod benchmarks {
	use super::*;

	#[benchmark]
	fn open_challenge(m: Linear<2, { T::MaxPoolMembers::get() }>) -> Result<(), BenchmarkError> {
		let (pool, members) = T::BenchmarkHelper::final_round(m);
		let accused = members.first().cloned().ok_or(BenchmarkError::Weightless)?;
		let who = challenger::<T>();
		#[extrinsic_call]
		_(RawOrigin::Signed(who), pool, 1, accused, [1; 32]);
		assert!(OpenChallenges::<T>::get(0).is_some());
		Ok(())
	}

	// Worst case: the deciding vote of a guilty verdict (slash, bond release, cleanup).
	#[benchmark]
	fn vote() -> Result<(), BenchmarkError> {
		let (pool, members) = T::BenchmarkHelper::final_round(T::MaxPoolMembers::get());
		let accused = members.first().cloned().ok_or(BenchmarkError::Weightless)?;
		Pallet::<T>::do_open_challenge(challenger::<T>(), pool, 1, accused.clone(), [1; 32])?;
		let jury = OpenChallenges::<T>::get(0).ok_or(BenchmarkError::Weightless)?.jury;
		let majority = jury.len() / 2 + 1;
		for juror in jury.iter().take(majority - 1) {
			Pallet::<T>::do_vote(juror.clone(), 0, true)?;
		}
		let last = jury.get(majority - 1).cloned().ok_or(BenchmarkError::Weightless)?;
		#[extrinsic_call]
		_(RawOrigin::Signed(last), 0, true);
		assert_eq!(Verdicts::<T>::get((pool, 1, accused)), Some(Verdict::Guilty));
		Ok(())
	}

	#[benchmark]
	fn on_initialize_expire(e: Linear<0, { T::MaxExpiriesPerBlock::get() }>) -> Result<(), BenchmarkError> {
		let (pool, members) = T::BenchmarkHelper::final_round(T::MaxPoolMembers::get());
		for accused in members.iter().take(e as usize) {
			Pallet::<T>::do_open_challenge(challenger::<T>(), pool, 1, accused.clone(), [1; 32])?;
		}
		let at = frame_system::Pallet::<T>::block_number() + T::VotingPeriod::get();
		#[block]
		{
			Pallet::<T>::on_initialize(at);
		}
		assert!(Expiries::<T>::get(at).is_empty());
		Ok(())
	}

	impl_benchmark_test_suite!(Pallet, crate::mock::new_test_ext(), crate::mock::Test);
}
