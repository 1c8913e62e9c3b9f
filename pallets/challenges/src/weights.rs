//! Weights for `pallet_challenges`.
//!
//! Layout of `frame-benchmarking-cli`'s output. The ref-time figures are placeholders until
//! `scripts/benchmark.sh` regenerates this file from the benchmarks in `benchmarking.rs`; the
//! storage read/write counts are counted from the code.

#![allow(unused_parens)]
#![allow(unused_imports)]
#![allow(missing_docs)]

use core::marker::PhantomData;
use frame_support::{traits::Get, weights::{constants::RocksDbWeight, Weight}};

/// Weight functions needed for `pallet_challenges`.
pub trait WeightInfo {
	fn open_challenge(m: u32) -> Weight;
	fn vote() -> Weight;
	fn on_initialize_expire(e: u32) -> Weight;
}

/// Weights for `pallet_challenges` using the runtime's database weights.
pub struct SubstrateWeight<T>(PhantomData<T>);
impl<T: frame_system::Config> WeightInfo for SubstrateWeight<T> {
	fn open_challenge(m: u32) -> Weight {
		Weight::from_parts(90_000_000, 4_000)
			.saturating_add(Weight::from_parts(2_000_000, 0).saturating_mul(m.into()))
			.saturating_add(T::DbWeight::get().reads(9_u64))
			.saturating_add(T::DbWeight::get().writes(6_u64))
	}
	fn vote() -> Weight {
		Weight::from_parts(60_000_000, 4_000)
			.saturating_add(T::DbWeight::get().reads(3_u64))
			.saturating_add(T::DbWeight::get().writes(4_u64))
	}
	fn on_initialize_expire(e: u32) -> Weight {
		Weight::from_parts(40_000_000, 4_000)
			.saturating_add(Weight::from_parts(2_000_000, 0).saturating_mul(e.into()))
			.saturating_add(T::DbWeight::get().reads(3_u64))
			.saturating_add(T::DbWeight::get().writes(4_u64))
	}
}

// For tests.
impl WeightInfo for () {
	fn open_challenge(m: u32) -> Weight {
		Weight::from_parts(90_000_000, 4_000)
			.saturating_add(Weight::from_parts(2_000_000, 0).saturating_mul(m.into()))
			.saturating_add(RocksDbWeight::get().reads(9_u64))
			.saturating_add(RocksDbWeight::get().writes(6_u64))
	}
	fn vote() -> Weight {
		Weight::from_parts(60_000_000, 4_000)
			.saturating_add(RocksDbWeight::get().reads(3_u64))
			.saturating_add(RocksDbWeight::get().writes(4_u64))
	}
	fn on_initialize_expire(e: u32) -> Weight {
		Weight::from_parts(40_000_000, 4_000)
			.saturating_add(Weight::from_parts(2_000_000, 0).saturating_mul(e.into()))
			.saturating_add(RocksDbWeight::get().reads(3_u64))
			.saturating_add(RocksDbWeight::get().writes(4_u64))
	}
}
