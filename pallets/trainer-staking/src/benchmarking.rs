//! Benchmarks (FRAME benchmarking v2).

use super::*;
use crate::pallet::{BalanceOf, Ledger};
use frame_benchmarking::v2::*;
use frame_support::traits::{fungible::Mutate, Get};
use frame_system::RawOrigin;
use sp_runtime::traits::{Bounded, One, Saturating};

fn funded<T: Config>(name: &'static str) -> T::AccountId {
	let who: T::AccountId = account(name, 0, 0);
	T::Currency::set_balance(&who, BalanceOf::<T>::max_value() / 4u32.into());
	who
}

#[benchmarks]
mod benchmarks {
	use super::*;

	#[benchmark]
	fn bond() {
		let who = funded::<T>("trainer");
		let value = T::MinBond::get();
		#[extrinsic_call]
		_(RawOrigin::Signed(who.clone()), value);
		assert!(Ledger::<T>::get(&who).is_some());
	}

	#[benchmark]
	fn unbond() -> Result<(), BenchmarkError> {
		let who = funded::<T>("trainer");
		let min = T::MinBond::get();
		Pallet::<T>::do_bond(&who, min.saturating_add(min))?;
		#[extrinsic_call]
		_(RawOrigin::Signed(who.clone()), min);
		assert_eq!(Ledger::<T>::get(&who).map(|l| l.unlocking.len()), Some(1));
		Ok(())
	}

	#[benchmark]
	fn withdraw_unbonded(
		c: Linear<1, { T::MaxUnlockingChunks::get() }>,
	) -> Result<(), BenchmarkError> {
		let who = funded::<T>("trainer");
		let min = T::MinBond::get();
		Pallet::<T>::do_bond(&who, min.saturating_mul((c + 1).into()))?;
		for _ in 0..c {
			Pallet::<T>::do_unbond(&who, min)?;
		}
		let later = frame_system::Pallet::<T>::block_number()
			.saturating_add(T::UnbondingPeriod::get())
			.saturating_add(One::one());
		frame_system::Pallet::<T>::set_block_number(later);
		#[extrinsic_call]
		_(RawOrigin::Signed(who.clone()));
		assert_eq!(Ledger::<T>::get(&who).map(|l| l.unlocking.len()), Some(0));
		Ok(())
	}

	impl_benchmark_test_suite!(Pallet, crate::mock::new_bench_ext(), crate::mock::Test);
}
