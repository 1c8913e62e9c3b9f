//! Benchmarks (FRAME benchmarking v2).

use super::*;
use crate::pallet::{Claimable, SettleCursor, Settlements, Unsettled};
use frame_benchmarking::v2::*;
use frame_support::traits::{Get, Hooks};
use frame_system::{pallet_prelude::BlockNumberFor, RawOrigin};
use sp_runtime::Saturating;

#[benchmarks]
mod benchmarks {
	use super::*;

	/// A claim that settles nothing after reading the most unsettled entries it reads
	/// (`2 × MaxSettlementsPerBlock`, none due) from a cursor in their midst (the scan wraps
	/// around and moves the cursor): `claim_rewards`' weight beyond the settlements it makes
	/// ([`Pallet::claim_weight`]).
	#[benchmark]
	fn claim_rewards() -> Result<(), BenchmarkError> {
		let (pool, members) = T::BenchmarkHelper::final_round(T::MaxContributors::get());
		let settle_at = Unsettled::<T>::get(pool, 1).ok_or(BenchmarkError::Weightless)?.settle_at;
		Pallet::<T>::on_initialize(settle_at);
		let scanned = T::MaxSettlementsPerBlock::get().saturating_mul(2);
		let later: BlockNumberFor<T> = settle_at.saturating_add(1_000u32.into());
		for round in 2..scanned.saturating_add(2) {
			let pending =
				PendingRound { reserved: 0u32.into(), settle_at: later, scheduled: false };
			Unsettled::<T>::insert(pool, round, pending);
		}
		let middle = Unsettled::<T>::iter_key_prefix(pool)
			.nth(scanned as usize / 2)
			.ok_or(BenchmarkError::Weightless)?;
		SettleCursor::<T>::insert(pool, middle);
		let who = members.first().cloned().ok_or(BenchmarkError::Weightless)?;
		#[extrinsic_call]
		_(RawOrigin::Signed(who.clone()), pool);
		assert!(Claimable::<T>::get(pool, who) == 0u32.into());
		assert!(SettleCursor::<T>::get(pool).is_some(), "the scan read its whole budget");
		assert_eq!(Unsettled::<T>::iter_prefix(pool).count() as u32, scanned, "none settled");
		let _ = Unsettled::<T>::clear_prefix(pool, scanned, None);
		Ok(())
	}

	/// Paying one credited reward (`do_claim`, no settlement and no scan): what reaping a
	/// pool does per unclaimed record (`PoolRecords::clear`).
	#[benchmark]
	fn pay_claim() -> Result<(), BenchmarkError> {
		let (pool, members) = T::BenchmarkHelper::final_round(T::MaxContributors::get());
		let settle_at = Unsettled::<T>::get(pool, 1).ok_or(BenchmarkError::Weightless)?.settle_at;
		Pallet::<T>::on_initialize(settle_at);
		let who = members.first().cloned().ok_or(BenchmarkError::Weightless)?;
		#[block]
		{
			Pallet::<T>::do_claim(who.clone(), pool)
				.map_err(|_| BenchmarkError::Stop("the claim is paid"))?;
		}
		assert!(Claimable::<T>::get(pool, who) == 0u32.into());
		Ok(())
	}

	#[benchmark]
	fn on_initialize_settle(
		s: Linear<0, { T::MaxSettlementsPerBlock::get() }>,
		c: Linear<1, { T::MaxContributors::get() }>,
	) -> Result<(), BenchmarkError> {
		// Every pool is created in the same block, so their rounds are final in one block and
		// their settlements are due in one.
		let start = frame_system::Pallet::<T>::block_number();
		let mut at = None;
		for _ in 0..s {
			frame_system::Pallet::<T>::set_block_number(start);
			let (pool, _) = T::BenchmarkHelper::final_round(c);
			at = Unsettled::<T>::get(pool, 1).map(|p| p.settle_at);
		}
		let at = at.unwrap_or_else(|| 1_000u32.into());
		assert_eq!(Settlements::<T>::get(at).len() as u32, s, "every settlement is measured");
		#[block]
		{
			Pallet::<T>::on_initialize(at);
		}
		assert!(Settlements::<T>::get(at).is_empty());
		Ok(())
	}

	impl_benchmark_test_suite!(Pallet, crate::mock::new_bench_ext(), crate::mock::Test);
}
