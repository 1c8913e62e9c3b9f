//! Weights for `pallet_rewards`.
//!
//! Layout of `frame-benchmarking-cli`'s output. The ref-time figures are placeholders until
//! `scripts/benchmark.sh` regenerates this file from the benchmarks in `benchmarking.rs`; the
//! storage read/write counts are counted from the code.

#![allow(unused_parens)]
#![allow(unused_imports)]
#![allow(missing_docs)]

use core::marker::PhantomData;
use frame_support::{traits::Get, weights::{constants::RocksDbWeight, Weight}};

/// Weight functions needed for `pallet_rewards`.
pub trait WeightInfo {
	fn claim_rewards() -> Weight;
	fn on_initialize_settle(s: u32, c: u32) -> Weight;
}

/// Weights for `pallet_rewards` using the runtime's database weights.
pub struct SubstrateWeight<T>(PhantomData<T>);
impl<T: frame_system::Config> WeightInfo for SubstrateWeight<T> {
	fn claim_rewards() -> Weight {
		Weight::from_parts(60_000_000, 4_000)
			.saturating_add(T::DbWeight::get().reads(4_u64))
			.saturating_add(T::DbWeight::get().writes(4_u64))
	}
	fn on_initialize_settle(s: u32, c: u32) -> Weight {
		Weight::from_parts(20_000_000, 4_000)
			.saturating_add(Weight::from_parts(2_000_000, 0).saturating_mul(s.into()))
			.saturating_add(Weight::from_parts(300_000, 0).saturating_mul(s.saturating_mul(c).into()))
			.saturating_add(T::DbWeight::get().reads(6_u64))
			.saturating_add(T::DbWeight::get().writes(6_u64))
	}
}

// For tests.
impl WeightInfo for () {
	fn claim_rewards() -> Weight {
		Weight::from_parts(60_000_000, 4_000)
			.saturating_add(RocksDbWeight::get().reads(4_u64))
			.saturating_add(RocksDbWeight::get().writes(4_u64))
	}
	fn on_initialize_settle(s: u32, c: u32) -> Weight {
		Weight::from_parts(20_000_000, 4_000)
			.saturating_add(Weight::from_parts(2_000_000, 0).saturating_mul(s.into()))
			.saturating_add(Weight::from_parts(300_000, 0).saturating_mul(s.saturating_mul(c).into()))
			.saturating_add(RocksDbWeight::get().reads(6_u64))
			.saturating_add(RocksDbWeight::get().writes(6_u64))
	}
}
