//! Weights for `pallet_trainer_staking`.
//!
//! Layout of `frame-benchmarking-cli`'s output. The ref-time figures are placeholders sized from
//! comparable upstream calls (`pallet_staking::bond/unbond/withdraw_unbonded`) until
//! `scripts/benchmark.sh` regenerates this file; the storage read/write counts are exact.

#![allow(unused_parens)]
#![allow(unused_imports)]
#![allow(missing_docs)]

use core::marker::PhantomData;
use frame_support::{traits::Get, weights::{constants::RocksDbWeight, Weight}};

/// Weight functions needed for `pallet_trainer_staking`.
pub trait WeightInfo {
	fn bond() -> Weight;
	fn unbond() -> Weight;
	fn withdraw_unbonded(c: u32) -> Weight;
}

/// Weights for `pallet_trainer_staking` using the runtime's database weights.
pub struct SubstrateWeight<T>(PhantomData<T>);
impl<T: frame_system::Config> WeightInfo for SubstrateWeight<T> {
	/// Storage: `TrainerStaking::Ledger` (r:1 w:1), `TrainerStaking::TotalStake` (r:1 w:1),
	/// `Balances::Holds` (r:1 w:1), `System::Account` (r:1 w:1)
	fn bond() -> Weight {
		Weight::from_parts(60_000_000, 3_800)
			.saturating_add(T::DbWeight::get().reads(4_u64))
			.saturating_add(T::DbWeight::get().writes(4_u64))
	}
	/// Storage: `TrainerStaking::Ledger` (r:1 w:1), `TrainingPools::Commitments` (r:1 w:0)
	fn unbond() -> Weight {
		Weight::from_parts(30_000_000, 3_800)
			.saturating_add(T::DbWeight::get().reads(2_u64))
			.saturating_add(T::DbWeight::get().writes(1_u64))
	}
	/// Storage: `TrainerStaking::Ledger` (r:1 w:1), `TrainerStaking::TotalStake` (r:1 w:1),
	/// `Balances::Holds` (r:1 w:1), `System::Account` (r:1 w:1)
	/// The range of component `c` is `[1, 32]`.
	fn withdraw_unbonded(c: u32) -> Weight {
		Weight::from_parts(55_000_000, 3_800)
			.saturating_add(Weight::from_parts(400_000, 0).saturating_mul(c.into()))
			.saturating_add(T::DbWeight::get().reads(4_u64))
			.saturating_add(T::DbWeight::get().writes(4_u64))
	}
}

// For backwards compatibility and tests.
impl WeightInfo for () {
	fn bond() -> Weight {
		Weight::from_parts(60_000_000, 3_800)
			.saturating_add(RocksDbWeight::get().reads(4_u64))
			.saturating_add(RocksDbWeight::get().writes(4_u64))
	}
	fn unbond() -> Weight {
		Weight::from_parts(30_000_000, 3_800)
			.saturating_add(RocksDbWeight::get().reads(2_u64))
			.saturating_add(RocksDbWeight::get().writes(1_u64))
	}
	fn withdraw_unbonded(c: u32) -> Weight {
		Weight::from_parts(55_000_000, 3_800)
			.saturating_add(Weight::from_parts(400_000, 0).saturating_mul(c.into()))
			.saturating_add(RocksDbWeight::get().reads(4_u64))
			.saturating_add(RocksDbWeight::get().writes(4_u64))
	}
}
