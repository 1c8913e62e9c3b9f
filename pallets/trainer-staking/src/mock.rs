//! Mock runtime: System, Balances and TrainerStaking; pool commitments are set per test.

use crate as pallet_trainer_staking;
use core::cell::RefCell;
use frame_support::{derive_impl, parameter_types, traits::ConstU32};
use sp_runtime::BuildStorage;
use std::collections::BTreeMap;

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
	type ExistentialDeposit = frame_support::traits::ConstU128<1>;
}

thread_local! {
	static COMMITTED: RefCell<BTreeMap<AccountId, Balance>> = const { RefCell::new(BTreeMap::new()) };
}

/// Test double for pool commitments.
pub struct Commitments;
impl synod_primitives::StakeCommitments<AccountId, Balance> for Commitments {
	fn committed(who: &AccountId) -> Balance {
		COMMITTED.with(|c| c.borrow().get(who).copied().unwrap_or_default())
	}
}
pub fn set_committed(who: AccountId, amount: Balance) {
	COMMITTED.with(|c| c.borrow_mut().insert(who, amount));
}

/// Slash destination account in tests.
pub const TREASURY: AccountId = 999;
parameter_types! {
	pub const Treasury: AccountId = TREASURY;
}

impl pallet_trainer_staking::Config for Test {
	type Currency = Balances;
	type RuntimeHoldReason = RuntimeHoldReason;
	type MinBond = frame_support::traits::ConstU128<100>;
	type UnbondingPeriod = frame_support::traits::ConstU64<10>;
	type MaxUnlockingChunks = ConstU32<4>;
	type Commitments = Commitments;
	type Slash = frame_support::traits::tokens::imbalance::ResolveTo<Treasury, Balances>;
	type WeightInfo = ();
}

pub const ALICE: AccountId = 1;
pub const BOB: AccountId = 2;
pub const CHARLIE: AccountId = 3;

pub fn new_test_ext() -> sp_io::TestExternalities {
	let mut t = frame_system::GenesisConfig::<Test>::default().build_storage().unwrap();
	pallet_balances::GenesisConfig::<Test> {
		balances: vec![(ALICE, 10_000), (BOB, 10_000), (CHARLIE, 10), (TREASURY, 1)],
		..Default::default()
	}
	.assimilate_storage(&mut t)
	.unwrap();
	let mut ext = sp_io::TestExternalities::new(t);
	ext.execute_with(|| {
		System::set_block_number(1);
		COMMITTED.with(|c| c.borrow_mut().clear());
	});
	ext
}

/// Runs `test` and checks the pallet's invariants afterwards.
pub fn run_test(test: impl FnOnce()) {
	new_test_ext().execute_with(|| {
		test();
		TrainerStaking::do_try_state().expect("try_state invariants hold");
	});
}

pub fn last_event() -> RuntimeEvent {
	System::events().pop().expect("an event").event
}
