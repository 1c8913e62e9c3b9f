//! Benchmarks (FRAME benchmarking v2).

use super::*;
use frame_benchmarking::v2::*;
use frame_support::traits::{Get, Hooks};
use frame_system::RawOrigin;
use sp_runtime::traits::Saturating;

#[benchmarks]
mod benchmarks {
	use super::*;

	/// The inherent's whole path: decode, VRF verification, output bytes, storage.
	#[benchmark]
	fn note() -> Result<(), BenchmarkError> {
		let (public, previous, slot, proof) = crate::benchmarking_vector();
		SlotAuthor::<T>::put((slot, public));
		Current::<T>::put(previous);
		#[extrinsic_call]
		_(RawOrigin::None, proof);
		assert!(Current::<T>::get() != previous && SlotAuthor::<T>::get().is_none());
		Ok(())
	}

	/// `on_initialize` (the slot author read from Aura) and `on_finalize` (history written
	/// and pruned) of one block.
	#[benchmark]
	fn on_initialize_and_finalize() -> Result<(), BenchmarkError> {
		let n = T::KeptBlocks::get().saturating_add(10u32.into());
		History::<T>::insert(n.saturating_sub(T::KeptBlocks::get()), [1u8; 32]);
		#[block]
		{
			Pallet::<T>::on_initialize(n);
			Pallet::<T>::on_finalize(n);
		}
		assert!(History::<T>::get(n).is_some());
		Ok(())
	}

	impl_benchmark_test_suite!(Pallet, crate::tests::new_test_ext(1), crate::tests::Test);
}
