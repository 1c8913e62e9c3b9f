//! Mock runtime: System, Balances, TrainerStaking, TrainingPools, Checkpoints and Challenges.

use crate as pallet_challenges;
use frame_support::{
	assert_ok, derive_impl,
	traits::{ConstU128, ConstU32, ConstU64, Hooks},
};
use pallet_training_pools::{PoolSpec, ML_DSA_65_PUBLIC_KEY_LEN};
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
	#[runtime::pallet_index(4)]
	pub type Checkpoints = pallet_checkpoints;
	#[runtime::pallet_index(5)]
	pub type Challenges = pallet_challenges;
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
	type Slash = ToTreasury;
	type WeightInfo = ();
}

impl pallet_training_pools::Config for Test {
	type Currency = Balances;
	type RuntimeHoldReason = RuntimeHoldReason;
	type Staking = TrainerStaking;
	type OnTrainingStarted = Checkpoints;
	type MaxMembers = ConstU32<5>;
	type MaxPoolsPerTrainer = ConstU32<2>;
	type MaxPeerIdLen = ConstU32<64>;
	type MaxDatasetIdLen = ConstU32<32>;
	type MaxRounds = ConstU32<100>;
	type WeightInfo = ();
	#[cfg(feature = "runtime-benchmarks")]
	type BenchmarkHelper = BondHelper;
}

#[cfg(feature = "runtime-benchmarks")]
pub struct BondHelper;
#[cfg(feature = "runtime-benchmarks")]
impl pallet_training_pools::benchmarking::BenchmarkHelper<AccountId, Balance> for BondHelper {
	fn bond(who: &AccountId, amount: Balance) {
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(*who), amount));
	}
}

impl pallet_checkpoints::Config for Test {
	type Balance = Balance;
	type Pools = TrainingPools;
	type OnRoundFinalized = ();
	type MaxMembers = ConstU32<5>;
	type MaxDeadlinesPerBlock = ConstU32<8>;
	type WeightInfo = ();
	#[cfg(feature = "runtime-benchmarks")]
	type BenchmarkHelper = TrainingPools;
}

/// Where slashed stake and failed challengers' bonds go.
pub const TREASURY: AccountId = 999;
frame_support::parameter_types! {
	pub const Treasury: AccountId = TREASURY;
	pub const SlashFraction: Perbill = Perbill::from_percent(50);
	pub const ChallengerShare: Perbill = Perbill::from_percent(20);
}
type ToTreasury = frame_support::traits::tokens::imbalance::ResolveTo<Treasury, Balances>;

impl pallet_challenges::Config for Test {
	type Currency = Balances;
	type RuntimeHoldReason = RuntimeHoldReason;
	type Staking = TrainerStaking;
	type Pools = TrainingPools;
	type Checkpoints = Checkpoints;
	type ChallengeBond = ConstU128<300>;
	type JurySize = ConstU32<3>;
	type VotingPeriod = ConstU64<20>;
	type SlashFraction = SlashFraction;
	type ChallengerShare = ChallengerShare;
	type MaxPoolMembers = ConstU32<5>;
	type MaxExpiriesPerBlock = ConstU32<2>;
	type Slash = ToTreasury;
	type WeightInfo = ();
	#[cfg(feature = "runtime-benchmarks")]
	type BenchmarkHelper = FinalRound;
}

/// Builds a pool whose round 1 is final, for benchmarks.
#[cfg(feature = "runtime-benchmarks")]
pub struct FinalRound;
#[cfg(feature = "runtime-benchmarks")]
impl crate::BenchmarkHelper<AccountId> for FinalRound {
	fn final_round(members: u32) -> (u32, Vec<AccountId>) {
		use synod_primitives::PoolSetup;
		let (pool, who) = TrainingPools::training_pool(members);
		let all: Vec<u32> = (0..who.len() as u32).collect();
		for w in &who {
			let _ = Checkpoints::commit_checkpoint(RuntimeOrigin::signed(*w), pool, 1, [1; 32], all.clone().try_into().unwrap());
		}
		(pool, who)
	}
}

pub const CREATOR: AccountId = 100;
/// Funded, not a member of any pool.
pub const OUTSIDER: AccountId = 50;

pub fn new_test_ext() -> sp_io::TestExternalities {
	let mut t = frame_system::GenesisConfig::<Test>::default().build_storage().unwrap();
	let mut balances: Vec<(AccountId, Balance)> = (1..=6).map(|t| (t, 10_000)).collect();
	balances.push((CREATOR, 1_000_000));
	balances.push((TREASURY, 1));
	balances.push((OUTSIDER, 10_000));
	pallet_balances::GenesisConfig::<Test> { balances, ..Default::default() }
		.assimilate_storage(&mut t)
		.unwrap();
	let mut ext = sp_io::TestExternalities::new(t);
	ext.execute_with(|| {
		System::set_block_number(1);
	});
	ext
}

/// Runs `test`, then checks every pallet's invariants.
pub fn run_test(test: impl FnOnce()) {
	new_test_ext().execute_with(|| {
		test();
		Challenges::do_try_state().expect("challenges invariants hold");
		Checkpoints::do_try_state().expect("checkpoints invariants hold");
		TrainingPools::do_try_state().expect("pools invariants hold");
		TrainerStaking::do_try_state().expect("staking invariants hold");
	});
}

/// Advances to block `n`, running Checkpoints' `on_initialize` on the way.
pub fn run_to_block(n: u64) {
	while System::block_number() < n {
		let next = System::block_number() + 1;
		System::set_block_number(next);
		Checkpoints::on_initialize(next);
		Challenges::on_initialize(next);
	}
}

/// A spec: `rounds` rounds, `trainers` needed, quorum `quorum_pct`, timeout 10, window 5.
pub fn spec(rounds: u32, trainers: u32, quorum: Perbill) -> PoolSpec<Test> {
	PoolSpec {
		model_config_hash: [1; 32],
		initial_weights_hash: [0xAA; 32],
		dataset_id: b"tinyshakespeare".to_vec().try_into().unwrap(),
		dataset_hash: [3; 32],
		inner_steps: 50,
		rounds,
		min_trainers: trainers,
		max_trainers: 5,
		min_stake: 100,
		reward_per_round: 1_000,
		quorum,
		round_timeout: 10,
		challenge_window: 5,
	}
}

/// Creates pool 0 and lets trainers `1..=stakes.len()` join with the given stakes.
pub fn training_pool(rounds: u32, quorum: Perbill, stakes: &[Balance]) {
	assert_ok!(TrainingPools::create_pool(
		RuntimeOrigin::signed(CREATOR),
		spec(rounds, stakes.len() as u32, quorum)
	));
	for (i, stake) in stakes.iter().enumerate() {
		let who = i as u64 + 1;
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(who), *stake));
		assert_ok!(TrainingPools::join_pool(
			RuntimeOrigin::signed(who),
			0,
			*stake,
			vec![0, 36, who as u8].try_into().unwrap(),
			Box::new([who as u8; ML_DSA_65_PUBLIC_KEY_LEN]),
		));
	}
}

pub fn included(ix: &[u32]) -> pallet_checkpoints::IncludedSet<Test> {
	ix.to_vec().try_into().unwrap()
}

pub fn commit(who: AccountId, round: u32, hash: u8, ix: &[u32]) -> sp_runtime::DispatchResult {
	Checkpoints::commit_checkpoint(RuntimeOrigin::signed(who), 0, round, [hash; 32], included(ix))
}

/// Pool 0 with trainers 1..=5 (1_000 stake each), round 1 final at block 1 with all five
/// contributing (hash `[7; 32]`). Challenge window: 5 blocks.
pub fn final_round() {
	training_pool(3, Perbill::from_rational(2u32, 3u32), &[1_000; 5]);
	for who in 1..=5 {
		assert_ok!(commit(who, 1, 7, &[0, 1, 2, 3, 4]));
	}
	assert!(pallet_checkpoints::FinalCheckpoints::<Test>::get(0, 1).is_some());
}

pub fn events() -> Vec<pallet_challenges::Event<Test>> {
	System::events()
		.into_iter()
		.filter_map(|r| match r.event {
			RuntimeEvent::Challenges(e) => Some(e),
			_ => None,
		})
		.collect()
}
