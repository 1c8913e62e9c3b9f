//! Mock runtime: System, Balances, TrainerStaking and TrainingPools.

use crate as pallet_training_pools;
use crate::{MlDsaPublicKey, PoolSpec, ML_DSA_65_PUBLIC_KEY_LEN};
use core::cell::RefCell;
use frame_support::{
	assert_ok, derive_impl, parameter_types,
	traits::{ConstU128, ConstU32, ConstU64},
};
use sp_runtime::{BuildStorage, Perbill};

pub type AccountId = u64;
pub type Balance = u128;
type Block = frame_system::mocking::MockBlock<Test>;

#[frame_support::runtime]
mod runtime {
	#[runtime::runtime]
	#[runtime::derive(RuntimeCall, RuntimeEvent, RuntimeError, RuntimeOrigin, RuntimeHoldReason, RuntimeFreezeReason, RuntimeTask, RuntimeViewFunction)]
	pub struct Test;

	#[runtime::pallet_index(0)]
	pub type System = frame_system;
	#[runtime::pallet_index(1)]
	pub type Balances = pallet_balances;
	#[runtime::pallet_index(2)]
	pub type TrainerStaking = pallet_trainer_staking;
	#[runtime::pallet_index(3)]
	pub type TrainingPools = pallet_training_pools;
}

#[derive_impl(frame_system::config_preludes::TestDefaultConfig)]
impl frame_system::Config for Test {
	type Block = Block;
	type AccountData = pallet_balances::AccountData<Balance>;
}

#[derive_impl(pallet_balances::config_preludes::TestDefaultConfig)]
impl pallet_balances::Config for Test {
	type Balance = Balance;
	type AccountStore = System;
	type RuntimeHoldReason = RuntimeHoldReason;
	type ExistentialDeposit = ConstU128<1>;
}

impl pallet_trainer_staking::Config for Test {
	type Currency = Balances;
	type RuntimeHoldReason = RuntimeHoldReason;
	type MinBond = ConstU128<100>;
	type UnbondingPeriod = ConstU64<10>;
	type MaxUnlockingChunks = ConstU32<4>;
	type Commitments = TrainingPools;
	type Slash = ();
	type WeightInfo = ();
}

thread_local! {
	static STARTED: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}
/// Records the pools that started training.
pub struct RecordStarts;
impl synod_primitives::OnTrainingStarted for RecordStarts {
	fn training_started(pool: u32) {
		STARTED.with(|s| s.borrow_mut().push(pool));
	}
}
pub fn started() -> Vec<u32> {
	STARTED.with(|s| s.borrow().clone())
}

parameter_types! {
	pub const MaxMembers: u32 = 4;
}

impl pallet_training_pools::Config for Test {
	type Currency = Balances;
	type RuntimeHoldReason = RuntimeHoldReason;
	type Staking = TrainerStaking;
	type OnTrainingStarted = RecordStarts;
	type MaxMembers = MaxMembers;
	type MaxPoolsPerTrainer = ConstU32<2>;
	type MaxPeerIdLen = ConstU32<64>;
	type MaxDatasetIdLen = ConstU32<32>;
	type MaxRounds = ConstU32<100>;
	type WeightInfo = ();
	#[cfg(feature = "runtime-benchmarks")]
	type BenchmarkHelper = BondHelper;
}

/// Bonds through TrainerStaking for benchmarks.
#[cfg(feature = "runtime-benchmarks")]
pub struct BondHelper;
#[cfg(feature = "runtime-benchmarks")]
impl crate::benchmarking::BenchmarkHelper<AccountId, Balance> for BondHelper {
	fn bond(who: &AccountId, amount: Balance) {
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(*who), amount));
	}
}

pub const CREATOR: AccountId = 100;
pub const POOR: AccountId = 101;
/// Trainers 1..=6 start with 10_000 planck each.
pub const TRAINERS: [AccountId; 6] = [1, 2, 3, 4, 5, 6];

pub fn new_test_ext() -> sp_io::TestExternalities {
	let mut t = frame_system::GenesisConfig::<Test>::default().build_storage().unwrap();
	let mut balances: Vec<(AccountId, Balance)> = TRAINERS.iter().map(|t| (*t, 10_000)).collect();
	balances.push((CREATOR, 1_000_000));
	balances.push((POOR, 50));
	pallet_balances::GenesisConfig::<Test> { balances, ..Default::default() }
		.assimilate_storage(&mut t)
		.unwrap();
	let mut ext = sp_io::TestExternalities::new(t);
	ext.execute_with(|| {
		System::set_block_number(1);
		STARTED.with(|s| s.borrow_mut().clear());
	});
	ext
}

/// Runs `test`, then checks the pools' and the staking pallet's invariants.
pub fn run_test(test: impl FnOnce()) {
	new_test_ext().execute_with(|| {
		test();
		TrainingPools::do_try_state().expect("pools invariants hold");
		TrainerStaking::do_try_state().expect("staking invariants hold");
	});
}

/// A valid spec: 3 rounds of 1_000 planck, 2..=3 trainers, min stake 500, quorum 2/3.
pub fn spec() -> PoolSpec<Test> {
	PoolSpec {
		model_config_hash: [1; 32],
		initial_weights_hash: [2; 32],
		dataset_id: b"tinyshakespeare".to_vec().try_into().unwrap(),
		dataset_hash: [3; 32],
		inner_steps: 50,
		rounds: 3,
		min_trainers: 2,
		max_trainers: 3,
		min_stake: 500,
		reward_per_round: 1_000,
		quorum: Perbill::from_rational(2u32, 3u32),
		round_timeout: 20,
		challenge_window: 5,
	}
}

pub fn key(who: AccountId) -> Box<MlDsaPublicKey> {
	Box::new([who as u8; ML_DSA_65_PUBLIC_KEY_LEN])
}

pub fn peer(who: AccountId) -> frame_support::BoundedVec<u8, ConstU32<64>> {
	vec![0, 36, who as u8].try_into().unwrap()
}

/// Bonds `stake` for `who` and joins `pool` committing all of it.
pub fn bond_and_join(who: AccountId, pool: u32, stake: Balance) {
	assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(who), stake));
	assert_ok!(TrainingPools::join_pool(RuntimeOrigin::signed(who), pool, stake, peer(who), key(who)));
}

pub fn events() -> Vec<pallet_training_pools::Event<Test>> {
	System::events()
		.into_iter()
		.filter_map(|r| match r.event {
			RuntimeEvent::TrainingPools(e) => Some(e),
			_ => None,
		})
		.collect()
}
