//! Benchmarks (FRAME benchmarking v2). They need a runtime whose `Staking` lets an account bond
//! (`T::Staking` is TrainerStaking in Synod's runtime and the mock).

use super::*;
use crate::pallet::{BalanceOf, FormerMembers, Pools};
use frame_benchmarking::v2::*;
use frame_support::{
	traits::{fungible::Mutate, Get},
	BoundedVec,
};
use frame_system::RawOrigin;
use sp_runtime::{
	traits::{Bounded, SaturatedConversion},
	Perbill,
};
use synod_primitives::PoolStatus;

/// Bonds stake for benchmark accounts; implemented by the runtime (or mock).
pub trait BenchmarkHelper<AccountId, Balance> {
	/// Gives `who` `amount` planck of active stake.
	fn bond(who: &AccountId, amount: Balance);
}

fn funded<T: Config>(name: &'static str, i: u32) -> T::AccountId {
	let who: T::AccountId = account(name, i, 0);
	// Far below `max / accounts`, so that hundreds of funded accounts cannot overflow issuance.
	T::Currency::set_balance(&who, BalanceOf::<T>::max_value() / 1_000_000_000u32.into());
	who
}

/// The stake each benchmark member commits: 1 000 × the spec floor, at least 1 000 planck (a
/// committee drawn from a pool's members then holds the stake a verdict needs).
fn stake<T: Config>() -> BalanceOf<T> {
	T::SpecLimits::get()
		.min_stake_floor
		.saturating_mul(1_000)
		.max(1_000)
		.saturated_into()
}

fn spec<T: Config>(min_trainers: u32, max_trainers: u32) -> PoolSpec<T> {
	PoolSpec {
		terms: PoolTerms {
			rounds: 10,
			min_trainers,
			max_trainers,
			min_stake: stake::<T>(),
			reward_per_round: T::SpecLimits::get().max_reward_per_round.min(1_000).saturated_into(),
			quorum: Perbill::from_percent(67),
			round_timeout: 100u32.into(),
			challenge_window: 10u32.into(),
			min_round_length: T::SpecLimits::get().min_round_length_floor(50).saturated_into(),
			allowed_trainers: BoundedVec::new(),
		},
		kind: PoolKind::DiLoCo(DilocoSpec {
			model_config_hash: [1; 32],
			initial_weights_hash: [2; 32],
			dataset_id: BoundedVec::truncate_from(
				alloc::vec![b'd'; T::MaxDatasetIdLen::get() as usize],
			),
			dataset_hash: [3; 32],
			inner_steps: 50,
		}),
	}
}

/// `spec` admitting only the `MaxMembers` accounts `trainer 0, trainer 1, …` with `last` in the
/// last place (a join then scans the whole list).
fn allow_listed<T: Config>(mut spec: PoolSpec<T>, last: T::AccountId) -> PoolSpec<T> {
	let max = T::MaxMembers::get();
	let mut allowed: alloc::vec::Vec<T::AccountId> =
		(0..max.saturating_sub(1)).map(|i| account("trainer", i, 0)).collect();
	allowed.push(last);
	spec.terms.allowed_trainers = BoundedVec::truncate_from(allowed);
	spec
}

/// The ML-DSA-65 key of [`synod_primitives::BENCHMARK_KEY_SEED`].
fn bench_key() -> MlDsaPublicKey {
	let mut key = [0u8; ML_DSA_65_PUBLIC_KEY_LEN];
	let public = synod_primitives::protocol::evidence::signing::public_key(
		&synod_primitives::BENCHMARK_KEY_SEED,
	);
	key.copy_from_slice(&public);
	key
}

fn join<T: Config>(pool: u32, i: u32) -> Result<T::AccountId, BenchmarkError>
where
	T: Config,
	T::BenchmarkHelper: BenchmarkHelper<T::AccountId, BalanceOf<T>>,
{
	let who = funded::<T>("trainer", i);
	T::BenchmarkHelper::bond(&who, stake::<T>());
	let (peer, proof) = peer_id::<T>(i, pool, &who);
	Pallet::<T>::do_join_pool(who.clone(), pool, stake::<T>(), peer, bench_key(), proof)?;
	Ok(who)
}

/// An Ed25519 peer id distinct for each `i` (peer ids are unique in a pool), and its key's
/// proof that `who` may register it in `pool`, signed by the benchmark's keystore (the
/// benchmarking CLI registers an in-memory one).
fn peer_id<T: Config>(
	i: u32,
	pool: u32,
	who: &T::AccountId,
) -> (BoundedVec<u8, T::MaxPeerIdLen>, PeerIdProof) {
	const PEER_KEY: sp_core::crypto::KeyTypeId = sp_core::crypto::KeyTypeId(*b"sypr");
	let seed = alloc::format!("//synod-peer-{i}").into_bytes();
	let public = sp_io::crypto::ed25519_generate(PEER_KEY, Some(seed));
	let message = Pallet::<T>::peer_id_proof_message(who, pool);
	let proof = sp_io::crypto::ed25519_sign(PEER_KEY, &public, &message)
		.map(|s| s.0)
		.unwrap_or([0; 64]);
	let peer = synod_primitives::protocol::peer::ed25519_peer_id(&public.0);
	(BoundedVec::truncate_from(peer.to_vec()), proof)
}

impl<T: Config> synod_primitives::PoolSetup<T::AccountId> for Pallet<T>
where
	T::BenchmarkHelper: BenchmarkHelper<T::AccountId, BalanceOf<T>>,
{
	fn training_pool(members: u32) -> (synod_primitives::PoolId, alloc::vec::Vec<T::AccountId>) {
		let pool_id = crate::pallet::NextPoolId::<T>::get();
		let n = members.clamp(1, T::MaxMembers::get());
		let creator = funded::<T>("creator", pool_id);
		Pallet::<T>::do_create_pool(creator, spec::<T>(n, n)).expect("benchmark pool is valid");
		let members = (0..n)
			.map(|i| {
				join::<T>(pool_id, pool_id.saturating_mul(1_000).saturating_add(i))
					.expect("member joins")
			})
			.collect();
		(pool_id, members)
	}
}

#[benchmarks]
mod benchmarks {
	use super::*;

	#[benchmark]
	fn create_pool() {
		let creator = funded::<T>("creator", 0);
		let max = T::MaxMembers::get();
		let spec = allow_listed::<T>(spec::<T>(max, max), account("joiner", 0, 0));
		#[extrinsic_call]
		_(RawOrigin::Signed(creator), spec);
		assert!(Pools::<T>::get(0).is_some());
	}

	// Worst case: the joiner is the one that starts training, last on a full allow-list.
	#[benchmark]
	fn join_pool() -> Result<(), BenchmarkError> {
		let creator = funded::<T>("creator", 0);
		let max = T::MaxMembers::get();
		let spec = allow_listed::<T>(spec::<T>(max, max), account("joiner", 0, 0));
		Pallet::<T>::do_create_pool(creator, spec)?;
		for i in 0..max.saturating_sub(1) {
			join::<T>(0, i)?;
		}
		let who = funded::<T>("joiner", 0);
		T::BenchmarkHelper::bond(&who, stake::<T>());
		let (peer, proof) = peer_id::<T>(max, 0, &who);
		#[extrinsic_call]
		_(
			RawOrigin::Signed(who),
			0,
			stake::<T>(),
			peer,
			alloc::boxed::Box::new([9u8; ML_DSA_65_PUBLIC_KEY_LEN]),
			proof,
		);
		assert_eq!(Pools::<T>::get(0).map(|p| p.status), Some(PoolStatus::Training));
		Ok(())
	}

	#[benchmark]
	fn leave_pool() -> Result<(), BenchmarkError> {
		let creator = funded::<T>("creator", 0);
		let max = T::MaxMembers::get();
		Pallet::<T>::do_create_pool(creator, spec::<T>(max, max))?;
		let mut last = None;
		for i in 0..max {
			last = Some(join::<T>(0, i)?);
		}
		let who = last.ok_or(BenchmarkError::Weightless)?;
		#[extrinsic_call]
		_(RawOrigin::Signed(who), 0);
		Ok(())
	}

	#[benchmark]
	fn release_member_deposit() -> Result<(), BenchmarkError> {
		let creator = funded::<T>("creator", 0);
		let max = T::MaxMembers::get();
		Pallet::<T>::do_create_pool(creator, spec::<T>(max, max))?;
		let who = join::<T>(0, 0)?;
		Pallet::<T>::do_leave_pool(who.clone(), 0)?;
		let kept_until = FormerMembers::<T>::get(0, 0).map(|f| f.kept_until).unwrap_or_default();
		frame_system::Pallet::<T>::set_block_number(kept_until + 1u32.into());
		#[extrinsic_call]
		_(RawOrigin::Signed(who), 0, 0);
		assert!(FormerMembers::<T>::get(0, 0).is_none());
		Ok(())
	}

	// Worst case: an Open pool one member short of starting (every commitment is freed at
	// once); cancelling a Training pool only marks it.
	#[benchmark]
	fn cancel_pool(m: Linear<1, { T::MaxMembers::get() }>) -> Result<(), BenchmarkError> {
		let creator = funded::<T>("creator", 0);
		let max = T::MaxMembers::get();
		Pallet::<T>::do_create_pool(creator.clone(), spec::<T>(max, max))?;
		for i in 0..m.min(max.saturating_sub(1)) {
			join::<T>(0, i)?;
		}
		#[extrinsic_call]
		_(RawOrigin::Signed(creator), 0);
		assert_eq!(Pools::<T>::get(0).map(|p| p.status), Some(PoolStatus::Cancelled));
		Ok(())
	}

	// Worst case: a full list of accounts, each checked against the others, replacing a full
	// list (the pool's record read and written whole at its largest).
	#[benchmark]
	fn set_allowed_trainers() -> Result<(), BenchmarkError> {
		let creator = funded::<T>("creator", 0);
		let max = T::MaxMembers::get();
		let spec = allow_listed::<T>(spec::<T>(max, max), account("joiner", 0, 0));
		Pallet::<T>::do_create_pool(creator.clone(), spec)?;
		let list: alloc::vec::Vec<T::AccountId> =
			(0..max).map(|i| account("replacement", i, 0)).collect();
		#[extrinsic_call]
		_(RawOrigin::Signed(creator), 0, BoundedVec::truncate_from(list));
		assert!(
			Pools::<T>::get(0).is_some_and(|p| p.spec.terms.allowed_trainers.len() as u32 == max)
		);
		Ok(())
	}

	// Worst case per record: former members (each a drained record and a released deposit),
	// `r` of them, besides `m` current members of an ended (cancelled) pool.
	#[benchmark]
	fn reap_pool(
		m: Linear<0, { T::MaxMembers::get().saturating_sub(1) }>,
		r: Linear<0, { T::ReapLimit::get() }>,
	) -> Result<(), BenchmarkError> {
		let creator = funded::<T>("creator", 0);
		let max = T::MaxMembers::get();
		Pallet::<T>::do_create_pool(creator.clone(), spec::<T>(max, max))?;
		for i in 0..r {
			let who = join::<T>(0, max.saturating_add(i))?;
			Pallet::<T>::do_leave_pool(who, 0)?;
		}
		for i in 0..m {
			join::<T>(0, i)?;
		}
		Pallet::<T>::do_cancel_pool(Some(creator.clone()), 0)?;
		let pool = Pools::<T>::get(0).ok_or(BenchmarkError::Weightless)?;
		let ended_at: u64 = pool.ended_at.ok_or(BenchmarkError::Weightless)?.saturated_into();
		let after = Pallet::<T>::timeline(&pool).settled_by(ended_at).saturating_add(1);
		frame_system::Pallet::<T>::set_block_number(after.saturated_into());
		#[extrinsic_call]
		_(RawOrigin::Signed(creator), 0);
		assert!(Pools::<T>::get(0).is_none(), "reaped in one call");
		assert!(FormerMembers::<T>::iter_prefix(0).next().is_none());
		Ok(())
	}

	impl_benchmark_test_suite!(Pallet, crate::mock::new_bench_ext(), crate::mock::Test);
}
