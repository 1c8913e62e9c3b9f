//! Benchmarks (FRAME benchmarking v2) of the worst paths: `validate` into a full list (scan of
//! every candidate's stake, the weakest outbid), `chill` of the last candidate, and an election
//! over `MaxCandidates` candidates.

use super::*;
use crate::pallet::{Candidates, Config, Pallet};
use alloc::vec::Vec;
use frame_benchmarking::v2::*;
use frame_support::{traits::Get, BoundedVec};
use frame_system::RawOrigin;
use pallet_session::SessionManager;
use sp_runtime::traits::Saturating;

/// Runtime-specific setup the benchmarks need.
pub trait BenchmarkHelper<AccountId, Balance> {
	/// Funds `who`, bonds `stake` planck in `pallet-trainer-staking` and registers session
	/// keys for it.
	fn bond_with_keys(who: &AccountId, stake: Balance);
}

/// `n` bonded candidates with keys, the `i`-th with `MinValidatorBond + i` planck.
fn candidates<T: Config>(n: u32) -> Vec<T::AccountId> {
	let min = T::MinValidatorBond::get();
	let mut list = Vec::new();
	for i in 0..n {
		let who: T::AccountId = account("candidate", i, 0);
		T::BenchmarkHelper::bond_with_keys(&who, min.saturating_add(i.into()));
		list.push(who);
	}
	Candidates::<T>::put(BoundedVec::truncate_from(list.clone()));
	list
}

#[benchmarks]
mod benchmarks {
	use super::*;

	/// The worst path: a full list, every candidate's stake read to find the weakest, which the
	/// caller outbids.
	#[benchmark]
	fn validate() {
		candidates::<T>(T::MaxCandidates::get());
		let who: T::AccountId = whitelisted_caller();
		let min = T::MinValidatorBond::get();
		T::BenchmarkHelper::bond_with_keys(&who, min.saturating_add(min));
		#[extrinsic_call]
		_(RawOrigin::Signed(who.clone()));
		assert!(Candidates::<T>::get().contains(&who));
	}

	#[benchmark]
	fn chill(c: Linear<1, { T::MaxCandidates::get() }>) {
		let list = candidates::<T>(c);
		let who = list.last().cloned().expect("c ≥ 1");
		#[extrinsic_call]
		_(RawOrigin::Signed(who.clone()));
		assert!(!Candidates::<T>::get().contains(&who));
	}

	#[benchmark]
	fn new_session(c: Linear<1, { T::MaxCandidates::get() }>) {
		candidates::<T>(c);
		let elected;
		#[block]
		{
			elected = <Pallet<T> as SessionManager<T::AccountId>>::new_session(2);
		}
		let expected = c.min(T::MaxValidators::get()) as usize;
		assert_eq!(elected.map(|v| v.len()), Some(expected));
	}

	impl_benchmark_test_suite!(Pallet, crate::mock::new_bench_ext(), crate::mock::Test);
}
