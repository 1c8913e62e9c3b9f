//! The one test runtime of Synod's pallets: System, Balances, all five training pallets, Session
//! and ValidatorSet, wired as in the real runtime but with small bounds so that every limit is
//! reachable.
//!
//! Each pallet's unit tests and benchmark tests include this file (`#[path]`, with
//! `extern crate self as pallet_…` so that the pallet under test is itself), and the
//! cross-pallet attack and property tests of `synod-pallet-tests` use it directly: one runtime,
//! not one per pallet. Helpers run every pallet's `try_state` and the issuance check after
//! each test.
#![allow(dead_code)]

use codec::Encode;
use frame_support::{
	assert_ok, derive_impl, parameter_types,
	traits::{ConstU128, ConstU32, ConstU64, Hooks},
};
use pallet_challenges::Evidence;
use pallet_training_pools::{DilocoSpec, PoolKind, PoolSpec, PoolTerms, ML_DSA_65_PUBLIC_KEY_LEN};
use sp_runtime::{BuildStorage, Perbill};

/// Accounts are small integers.
pub type AccountId = u64;
/// Balances in planck.
pub type Balance = u128;
type Block = frame_system::mocking::MockBlock<Test>;

#[frame_support::runtime]
mod runtime {
	#[runtime::runtime]
	#[runtime::derive(
		RuntimeCall,
		RuntimeEvent,
		RuntimeError,
		RuntimeOrigin,
		RuntimeHoldReason,
		RuntimeFreezeReason,
		RuntimeTask,
		RuntimeViewFunction
	)]
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
	#[runtime::pallet_index(6)]
	pub type Rewards = pallet_rewards;
	#[runtime::pallet_index(7)]
	pub type ValidatorSet = pallet_validator_set;
	#[runtime::pallet_index(8)]
	pub type Session = pallet_session;
	#[runtime::pallet_index(9)]
	pub type Randomness = pallet_randomness;
}

/// Block authors of the mock: [`AUTHORS`] sr25519 keys in turn, the slot of block `n` being `n`.
pub const AUTHORS: u8 = 4;

/// The key of the author of `slot` (`authorities[slot % AUTHORS]`, as Aura picks).
pub fn slot_author(slot: u64) -> sp_core::sr25519::Pair {
	use sp_core::Pair as _;
	let seed = (slot % u64::from(AUTHORS)) as u8 + 1;
	memo(&AUTHOR_KEYS, seed, || sp_core::sr25519::Pair::from_seed(&[seed; 32]))
}

type Memo<K, V> = std::cell::RefCell<std::collections::HashMap<K, V>>;

thread_local! {
	/// The authors' key pairs, by seed byte.
	static AUTHOR_KEYS: Memo<u8, sp_core::sr25519::Pair> = Memo::default();
	/// VRF proofs by (previous randomness, slot): every test starts from the same genesis, so
	/// its blocks repeat the same proofs (each is still verified by the pallet).
	static VRF_PROOFS: Memo<([u8; 32], u64), pallet_randomness::VrfProof> = Memo::default();
	/// ML-DSA public keys by account.
	static PUBLIC_KEYS: Memo<AccountId, Box<[u8; ML_DSA_65_PUBLIC_KEY_LEN]>> = Memo::default();
	/// libp2p (Ed25519) key pairs by account.
	static PEER_KEYS: Memo<AccountId, sp_core::ed25519::Pair> = Memo::default();
	/// Peer-id proofs by (key owner, signed message).
	static PEER_PROOFS: Memo<(AccountId, Vec<u8>), [u8; 64]> = Memo::default();
	/// Signed announcements by (pool, round, member index, account, digest).
	static ANNOUNCEMENTS: Memo<(u32, u32, u32, AccountId, [u8; 32]), Evidence> = Memo::default();
}

/// `make()`'s value for `key`, computed once per thread: key generation and signing are
/// deterministic functions of their inputs, and the property tests repeat them thousands of
/// times (the pallets still verify every signature and proof they are given).
fn memo<K: core::hash::Hash + Eq, V: Clone>(
	cache: &'static std::thread::LocalKey<Memo<K, V>>,
	key: K,
	make: impl FnOnce() -> V,
) -> V {
	if let Some(v) = cache.with(|c| c.borrow().get(&key).cloned()) {
		return v;
	}
	let v = make();
	cache.with(|c| c.borrow_mut().insert(key, v.clone()));
	v
}

thread_local! {
	/// Slots skipped so far: block `n` is authored at slot `n + SKIPPED`.
	static SKIPPED: core::cell::Cell<u64> = const { core::cell::Cell::new(0) };
}

/// The slot of block `n`: `n` plus the slots skipped before it ([`skip_slots`]).
pub fn slot_of(n: u64) -> u64 {
	n.wrapping_add(SKIPPED.with(|s| s.get()))
}

/// Lets the next `count` slots pass without a block (their authors withhold them): later
/// blocks are authored at later slots, by other keys.
pub fn skip_slots(count: u64) {
	SKIPPED.with(|s| s.set(s.get().wrapping_add(count)));
}

/// The slot of the block being built and its author's key.
pub struct MockSlotAuthor;
impl frame_support::traits::Get<Option<(u64, sp_core::sr25519::Public)>> for MockSlotAuthor {
	fn get() -> Option<(u64, sp_core::sr25519::Public)> {
		use sp_core::Pair as _;
		let slot = slot_of(System::block_number());
		Some((slot, slot_author(slot).public()))
	}
}

impl pallet_randomness::Config for Test {
	type SlotAuthor = MockSlotAuthor;
	type KeptBlocks = ConstU64<250>;
	type WeightInfo = ();
}

/// The VRF proof the author of `slot` makes for the block being built (what the node's
/// keystore signs).
pub fn block_vrf(slot: u64) -> pallet_randomness::VrfProof {
	let previous = pallet_randomness::Current::<Test>::get();
	memo(&VRF_PROOFS, (previous, slot), || {
		pallet_randomness::prove(&slot_author(slot), &previous, slot)
	})
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

/// Where slashed stake and failed challengers' bonds go.
pub const TREASURY: AccountId = 999;
/// Creates the pools of the helpers.
pub const CREATOR: AccountId = 100;
/// Funded, never a member unless a test makes it one.
pub const OUTSIDER: AccountId = 50;
/// Owns 10 planck only.
pub const POOR: AccountId = 60;
/// Trainers `1..=TRAINERS` are funded with [`FUNDS`] each.
pub const TRAINERS: u64 = 8;
/// Free balance of each trainer at genesis, planck.
pub const FUNDS: Balance = 10_000;
/// Members a pool may have (and the size of included sets).
pub const MAX_MEMBERS: u32 = 5;
/// The challenge bond, planck.
pub const BOND: Balance = 300;
/// Jury draws happen this many blocks after a challenge is opened (unless a test sets
/// [`JuryDelay`]).
pub const JURY_DELAY: u64 = 2;
/// Seats of a committee: the runtime's, sized by the ⅓-adversary bound.
pub const JURY_SEATS: u32 = synod_primitives::protocol::COMMITTEE_SEATS;
/// Seats of an appeal committee: the runtime's.
pub const APPEAL_SEATS: u32 = synod_primitives::protocol::APPEAL_SEATS;
/// The appeal bond, planck.
pub const APPEAL_BOND: Balance = 600;
/// Voting period = round timeout + this.
pub const VOTE_MARGIN: u64 = 10;
/// Blocks a committer of another set gets to commit over a split round's agreed set before
/// commits off it are judged (`RecommitPeriod` of Checkpoints; a pool's is at most half of its
/// commit span).
pub const RECOMMIT_PERIOD: u64 = 3;
/// A member's storage deposit, planck.
pub const MEMBER_DEPOSIT: Balance = 5;
/// A pool's storage deposit: this plus [`ROUND_DEPOSIT`] per round.
pub const POOL_DEPOSIT: Balance = 20;
/// A pool's storage deposit per round.
pub const ROUND_DEPOSIT: Balance = 2;
/// Records one `reap_pool` call deletes at most (small, so reaping takes several calls).
pub const REAP_LIMIT: u32 = 3;
/// Active stake a validator candidate needs, planck.
pub const MIN_VALIDATOR_BOND: Balance = 200;
/// Size of the active validator set.
pub const MAX_VALIDATORS: u32 = 3;
/// Bound on the validator candidate list.
pub const MAX_CANDIDATES: u32 = 4;
/// Held when an account first sets session keys, planck.
pub const KEY_DEPOSIT: Balance = 2;
/// Blocks per session.
pub const SESSION_LENGTH: u32 = 5;

parameter_types! {
	pub const Treasury: AccountId = TREASURY;
	pub const SlashFraction: Perbill = Perbill::from_percent(50);
	pub const ChallengerShare: Perbill = Perbill::from_percent(20);
	pub const JurorShare: Perbill = Perbill::from_percent(30);
	pub const NoShowSlash: Perbill = Perbill::from_percent(10);
	pub const InactivityLeak: Perbill = Perbill::from_percent(1);
	/// Blocks a ruling waits for an appeal: 0 (no appeals) unless a test sets it.
	pub storage AppealPeriod: u64 = 0;
	/// Checkpoints' `RecommitPeriod`: [`RECOMMIT_PERIOD`] unless a test sets it.
	pub storage RecommitPeriod: u64 = RECOMMIT_PERIOD;
	/// A pool's share of a block's schedule: all of it (4) unless a test sets it.
	pub storage MaxExpiriesPerPool: u32 = 4;
	/// Blocks between opening a challenge and drawing its jury: [`JURY_DELAY`] unless a test
	/// sets it.
	pub storage JuryDelay: u64 = JURY_DELAY;
	/// The spec bounds; no floor on `min_round_length` (rate 0), which a test may set.
	pub storage Limits: synod_primitives::protocol::SpecLimits = synod_primitives::protocol::SpecLimits {
		max_rounds: 100,
		max_inner_steps: 10_000,
		max_members: MAX_MEMBERS,
		min_stake_floor: 100,
		max_reward_per_round: 1_000_000,
		max_round_timeout: 1_000,
		min_challenge_window: 1,
		max_challenge_window: 100,
		max_inner_steps_per_block: 0,
	};
}
type ToTreasury = frame_support::traits::tokens::imbalance::ResolveTo<Treasury, Balances>;

impl pallet_trainer_staking::Config for Test {
	type Currency = Balances;
	type RuntimeHoldReason = RuntimeHoldReason;
	type MinBond = ConstU128<100>;
	type UnbondingPeriod = ConstU64<10>;
	type MaxUnlockingChunks = ConstU32<4>;
	type Commitments = (TrainingPools, ValidatorSet);
	type Slash = ToTreasury;
	type WeightInfo = ();
}

impl pallet_validator_set::Config for Test {
	type Balance = Balance;
	type Staking = TrainerStaking;
	type SessionKeys = Session;
	type MinValidatorBond = ConstU128<MIN_VALIDATOR_BOND>;
	type MaxValidators = ConstU32<MAX_VALIDATORS>;
	type MaxCandidates = ConstU32<MAX_CANDIDATES>;
	type WeightInfo = ();
	#[cfg(feature = "runtime-benchmarks")]
	type BenchmarkHelper = BenchHelper;
}

/// Session keys of the mock: one dummy key, the account id.
pub type MockKeys = sp_runtime::testing::UintAuthorityId;

/// Hands nothing to consensus (the mock has none); the active set is `Session::validators()`.
pub struct NoConsensus;
impl pallet_session::SessionHandler<AccountId> for NoConsensus {
	const KEY_TYPE_IDS: &'static [sp_runtime::KeyTypeId] = &[sp_runtime::key_types::DUMMY];
	fn on_genesis_session<Ks: sp_runtime::traits::OpaqueKeys>(_: &[(AccountId, Ks)]) {}
	fn on_new_session<Ks: sp_runtime::traits::OpaqueKeys>(
		_: bool,
		_: &[(AccountId, Ks)],
		_: &[(AccountId, Ks)],
	) {
	}
	fn on_disabled(_: u32) {}
}

type Sessions = pallet_session::PeriodicSessions<
	pallet_validator_set::election::SessionLengthOf<Test>,
	ConstU64<0>,
>;

impl pallet_session::Config for Test {
	type RuntimeEvent = RuntimeEvent;
	type ValidatorId = AccountId;
	type ValidatorIdOf = sp_runtime::traits::ConvertInto;
	type ShouldEndSession = Sessions;
	type NextSessionRotation = Sessions;
	type SessionManager = ValidatorSet;
	type SessionHandler = NoConsensus;
	type Keys = MockKeys;
	type DisablingStrategy = ();
	type WeightInfo = ();
	type Currency = Balances;
	type KeyDeposit = ConstU128<KEY_DEPOSIT>;
}

impl pallet_training_pools::Config for Test {
	type Currency = Balances;
	type RuntimeHoldReason = RuntimeHoldReason;
	type Staking = TrainerStaking;
	type OnTrainingStarted = Checkpoints;
	type OnMemberLeft = Checkpoints;
	type MaxMembers = ConstU32<MAX_MEMBERS>;
	type MaxPoolsPerTrainer = ConstU32<2>;
	type MaxPeerIdLen = ConstU32<64>;
	type MaxDatasetIdLen = ConstU32<32>;
	type MaxRounds = ConstU32<100>;
	type SpecLimits = Limits;
	type JuryDelay = JuryDelay;
	type VoteMargin = ConstU64<VOTE_MARGIN>;
	type AppealPeriod = AppealPeriod;
	type MemberDeposit = ConstU128<MEMBER_DEPOSIT>;
	type PoolDeposit = ConstU128<POOL_DEPOSIT>;
	type RoundDeposit = ConstU128<ROUND_DEPOSIT>;
	type ReapLimit = ConstU32<REAP_LIMIT>;
	type Records = (Rewards, (Checkpoints, Challenges));
	type WeightInfo = ();
	#[cfg(feature = "runtime-benchmarks")]
	type BenchmarkHelper = BenchHelper;
}

impl pallet_checkpoints::Config for Test {
	type Balance = Balance;
	type Pools = TrainingPools;
	type OnRoundFinalized = Rewards;
	type Staking = TrainerStaking;
	type Challenges = Challenges;
	type InactivityLeak = InactivityLeak;
	type DropAfterMissed = ConstU32<2>;
	type MaxMembers = ConstU32<MAX_MEMBERS>;
	type MaxDeadlinesPerBlock = ConstU32<2>;
	type RecommitPeriod = RecommitPeriod;
	type WeightInfo = ();
	#[cfg(feature = "runtime-benchmarks")]
	type BenchmarkHelper = TrainingPools;
}

impl pallet_challenges::Config for Test {
	type Currency = Balances;
	type RuntimeHoldReason = RuntimeHoldReason;
	type Staking = TrainerStaking;
	type Pools = TrainingPools;
	type Checkpoints = Checkpoints;
	type Randomness = Randomness;
	type ChallengeBond = ConstU128<BOND>;
	type JurySize = ConstU32<JURY_SEATS>;
	type AppealJurySize = ConstU32<APPEAL_SEATS>;
	type AppealBond = ConstU128<APPEAL_BOND>;
	type SlashFraction = SlashFraction;
	type ChallengerShare = ChallengerShare;
	type JurorShare = JurorShare;
	type NoShowSlash = NoShowSlash;
	type MaxPoolMembers = ConstU32<MAX_MEMBERS>;
	type MaxExpiriesPerBlock = ConstU32<4>;
	type MaxExpiriesPerPool = MaxExpiriesPerPool;
	type MinJuryStake = ConstU128<500>;
	type Slash = ToTreasury;
	type WeightInfo = ();
	#[cfg(feature = "runtime-benchmarks")]
	type BenchmarkHelper = BenchHelper;
}

impl pallet_rewards::Config for Test {
	type Balance = Balance;
	type Pools = TrainingPools;
	type Checkpoints = Checkpoints;
	type Challenges = Challenges;
	type OnRoundSettled = Checkpoints;
	type MaxSettlementsPerBlock = ConstU32<2>;
	type MaxContributors = ConstU32<MAX_MEMBERS>;
	type WeightInfo = ();
	#[cfg(feature = "runtime-benchmarks")]
	type BenchmarkHelper = BenchHelper;
}

/// Bonds stake and builds pools with a final round for the benchmarks.
#[cfg(feature = "runtime-benchmarks")]
pub struct BenchHelper;

#[cfg(feature = "runtime-benchmarks")]
fn bench_final_round(members: u32) -> (u32, Vec<AccountId>) {
	use synod_primitives::PoolSetup;
	let (pool, who) = TrainingPools::training_pool(members);
	System::set_block_number(Checkpoints::commits_from(pool).expect("round 1 is open"));
	let all: Vec<u32> = (0..who.len() as u32).collect();
	for w in &who {
		let _ = Checkpoints::commit_checkpoint(
			RuntimeOrigin::signed(*w),
			pool,
			1,
			[1; 32],
			all.clone().try_into().expect("at most MaxMembers"),
		);
	}
	(pool, who)
}

#[cfg(feature = "runtime-benchmarks")]
fn bench_voided_round(members: u32) -> (u32, Vec<AccountId>) {
	use synod_primitives::PoolSetup;
	let (pool, who) = TrainingPools::training_pool(members);
	let deadline = Checkpoints::open_round(pool).expect("round 1 is open").deadline;
	System::set_block_number(deadline);
	assert_ok!(Checkpoints::void_expired_round(RuntimeOrigin::signed(OUTSIDER), pool));
	(pool, who)
}

#[cfg(feature = "runtime-benchmarks")]
impl pallet_training_pools::benchmarking::BenchmarkHelper<AccountId, Balance> for BenchHelper {
	fn bond(who: &AccountId, amount: Balance) {
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(*who), amount.max(100)));
	}
}

#[cfg(feature = "runtime-benchmarks")]
impl pallet_challenges::BenchmarkHelper<AccountId> for BenchHelper {
	fn final_round(members: u32) -> (u32, Vec<AccountId>) {
		bench_final_round(members)
	}
	fn voided_round(members: u32) -> (u32, Vec<AccountId>) {
		bench_voided_round(members)
	}
	fn bond(who: &AccountId, stake: u128) {
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(*who), stake.max(100)));
	}
	fn set_snapshot_stakes(pool: u32, round: u32, stakes: &[u128]) {
		pallet_checkpoints::Snapshots::<Test>::mutate((pool, round), |s| {
			for (p, stake) in s.iter_mut().flatten().zip(stakes) {
				p.stake = *stake;
			}
		});
	}
}

#[cfg(feature = "runtime-benchmarks")]
impl pallet_validator_set::benchmarking::BenchmarkHelper<AccountId, Balance> for BenchHelper {
	fn bond_with_keys(who: &AccountId, stake: Balance) {
		<Balances as frame_support::traits::fungible::Mutate<_>>::set_balance(
			who,
			stake * 2 + 1_000,
		);
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(*who), stake));
		assert_ok!(Session::set_keys(RuntimeOrigin::signed(*who), MockKeys::from(*who), vec![]));
	}
}

#[cfg(feature = "runtime-benchmarks")]
impl pallet_rewards::BenchmarkHelper<AccountId> for BenchHelper {
	fn final_round(members: u32) -> (u32, Vec<AccountId>) {
		bench_final_round(members)
	}
}

/// [`new_test_ext`] with the runtime's floor on `min_round_length` (256 inner steps per
/// block: every round accepts commits at least one block after it opens, none ahead), for the
/// benchmark suites: their setups must reach the worst path under the runtime's rules.
#[cfg(feature = "runtime-benchmarks")]
pub fn new_bench_ext() -> sp_io::TestExternalities {
	let mut ext = new_test_ext();
	ext.execute_with(|| {
		Limits::set(&synod_primitives::protocol::SpecLimits {
			max_inner_steps_per_block: 256,
			..Limits::get()
		});
		// The runtime's rulings wait for appeals: the benchmarks measure those paths.
		AppealPeriod::set(&6);
	});
	// Into the backend: each benchmark run wipes the uncommitted changes back to it.
	ext.commit_all().expect("benchmark genesis commits");
	// Benchmarks sign peer-id proofs with the keystore, as under the benchmarking CLI.
	ext.register_extension(sp_keystore::KeystoreExt::new(
		sp_keystore::testing::MemoryKeystore::new(),
	));
	ext
}

/// Genesis: trainers `1..=TRAINERS` with [`FUNDS`], the creator with 1 000 000, the outsider
/// with 10 000, the poor account with 10, the treasury with 1; block 1.
pub fn new_test_ext() -> sp_io::TestExternalities {
	let mut t = frame_system::GenesisConfig::<Test>::default().build_storage().expect("genesis");
	let mut balances: Vec<(AccountId, Balance)> = (1..=TRAINERS).map(|t| (t, FUNDS)).collect();
	balances.push((CREATOR, 1_000_000));
	balances.push((TREASURY, 1));
	balances.push((OUTSIDER, 10_000));
	balances.push((POOR, 10));
	pallet_balances::GenesisConfig::<Test> { balances, ..Default::default() }
		.assimilate_storage(&mut t)
		.expect("balances genesis");
	pallet_validator_set::GenesisConfig::<Test> {
		candidates: vec![],
		session_length: SESSION_LENGTH,
	}
	.assimilate_storage(&mut t)
	.expect("validator set genesis");
	pallet_session::GenesisConfig::<Test>::default()
		.assimilate_storage(&mut t)
		.expect("session genesis");
	let mut ext = sp_io::TestExternalities::new(t);
	ext.execute_with(|| System::set_block_number(1));
	SKIPPED.with(|s| s.set(0));
	ext
}

/// Every pallet's invariants, and conservation: Σ (free + held) over all accounts equals the
/// total issuance, to the planck.
pub fn check_invariants() {
	TrainerStaking::do_try_state().expect("staking invariants hold");
	TrainingPools::do_try_state().expect("pools invariants hold");
	Checkpoints::do_try_state().expect("checkpoints invariants hold");
	Challenges::do_try_state().expect("challenges invariants hold");
	Rewards::do_try_state().expect("rewards invariants hold");
	ValidatorSet::do_try_state().expect("validator set invariants hold");
	Randomness::do_try_state(System::block_number()).expect("randomness invariants hold");
	let sum = frame_system::Account::<Test>::iter()
		.fold(0u128, |acc, (_, a)| acc + a.data.free + a.data.reserved);
	assert_eq!(sum, pallet_balances::TotalIssuance::<Test>::get(), "Σ free + held = issuance");
}

/// Runs `test` in a fresh externality, then checks every invariant.
pub fn run_test(test: impl FnOnce()) {
	new_test_ext().execute_with(|| {
		test();
		check_invariants();
	});
}

/// A block hash for block `n` (the mock's chain has no real headers).
pub fn hash_of(n: u64) -> sp_core::H256 {
	sp_core::H256(sp_io::hashing::blake2_256(&n.to_le_bytes()))
}

/// The hash of block `n` once built: it commits to the block's number, slot and digest, so the
/// author changes it with every byte of contents it chooses (as a real header hash does).
pub fn header_hash(n: u64) -> sp_core::H256 {
	sp_core::H256(sp_io::hashing::blake2_256(&(n, slot_of(n), System::digest()).encode()))
}

/// Advances to block `n` as the executive would: finalises the parent's randomness and records
/// its hash, then runs the pallets' `on_initialize` in pallet order and applies the block's VRF
/// inherent (its slot author's, [`block_vrf`]).
pub fn run_to_block(n: u64) {
	while System::block_number() < n {
		let parent = System::block_number();
		Randomness::on_finalize(parent);
		frame_system::BlockHash::<Test>::insert(parent, header_hash(parent));
		let next = parent + 1;
		System::set_block_number(next);
		Randomness::on_initialize(next);
		assert_ok!(Randomness::note(RuntimeOrigin::none(), block_vrf(slot_of(next))));
		Checkpoints::on_initialize(next);
		Challenges::on_initialize(next);
		Rewards::on_initialize(next);
		Session::on_initialize(next);
	}
}

/// A spec: `rounds` rounds, `trainers` needed (cap [`MAX_MEMBERS`]), quorum, min stake 100,
/// reward 1 000 per round, timeout 10, challenge window 5, H = 50, no minimum round length (the
/// mock's [`Limits`] set no floor), open to all.
pub fn spec(rounds: u32, trainers: u32, quorum: Perbill) -> PoolSpec<Test> {
	PoolSpec {
		terms: PoolTerms {
			rounds,
			min_trainers: trainers,
			max_trainers: MAX_MEMBERS,
			min_stake: 100,
			reward_per_round: 1_000,
			quorum,
			round_timeout: 10,
			challenge_window: 5,
			min_round_length: 0,
			allowed_trainers: Default::default(),
		},
		kind: PoolKind::DiLoCo(DilocoSpec {
			model_config_hash: [1; 32],
			initial_weights_hash: [0xAA; 32],
			dataset_id: b"tinyshakespeare".to_vec().try_into().expect("short"),
			dataset_hash: [3; 32],
			inner_steps: 50,
		}),
	}
}

/// `spec` after `edit`: `edited(spec(3, 3, two_thirds()), |s| s.terms.rounds = 0)`.
pub fn edited(mut spec: PoolSpec<Test>, edit: impl FnOnce(&mut PoolSpec<Test>)) -> PoolSpec<Test> {
	edit(&mut spec);
	spec
}

/// The DiLoCo job of `spec` (the one kind of pool).
pub fn diloco(spec: &mut PoolSpec<Test>) -> &mut DilocoSpec<Test> {
	let PoolKind::DiLoCo(job) = &mut spec.kind;
	job
}

/// ⅔, as the demo uses it.
pub fn two_thirds() -> Perbill {
	Perbill::from_rational(2u32, 3u32)
}

/// The libp2p (Ed25519) key pair of `who`'s trainer.
pub fn peer_pair(who: AccountId) -> sp_core::ed25519::Pair {
	use sp_core::Pair as _;
	memo(&PEER_KEYS, who, || sp_core::ed25519::Pair::from_seed(&[who as u8 ^ 0x5a; 32]))
}

/// The peer id of `who`'s trainer (its Ed25519 key inlined, 38 bytes).
pub fn peer(who: AccountId) -> frame_support::BoundedVec<u8, ConstU32<64>> {
	use sp_core::Pair as _;
	let id = synod_primitives::protocol::peer::ed25519_peer_id(&peer_pair(who).public().0);
	id.to_vec().try_into().expect("38 bytes")
}

/// The proof, by the key of `key_owner`'s peer id, that `who` may register it in `pool`.
pub fn peer_proof_by(key_owner: AccountId, who: AccountId, pool: u32) -> [u8; 64] {
	use sp_core::Pair as _;
	let message = TrainingPools::peer_id_proof_message(&who, pool);
	memo(&PEER_PROOFS, (key_owner, message.clone()), || peer_pair(key_owner).sign(&message).0)
}

/// `who`'s proof that it holds its peer id's key, for joining `pool`.
pub fn peer_proof(who: AccountId, pool: u32) -> [u8; 64] {
	peer_proof_by(who, who, pool)
}

/// The seed of `who`'s ML-DSA-65 member key.
pub fn key_seed(who: AccountId) -> [u8; 32] {
	[who as u8; 32]
}

/// `who`'s ML-DSA-65 public key (of [`key_seed`]).
pub fn ml_dsa_key(who: AccountId) -> Box<[u8; ML_DSA_65_PUBLIC_KEY_LEN]> {
	memo(&PUBLIC_KEYS, who, || {
		let public = synod_primitives::protocol::evidence::signing::public_key(&key_seed(who));
		Box::new(public.try_into().expect("1952 bytes"))
	})
}

/// `who`'s member index in `pool` (current or former member), if any.
pub fn member_index(pool: u32, who: AccountId) -> Option<u32> {
	pallet_training_pools::Members::<Test>::get(pool, who)
		.map(|m| m.index)
		.or_else(|| {
			pallet_training_pools::FormerMembers::<Test>::iter_prefix(pool)
				.find(|(_, f)| f.who == who)
				.map(|(i, _)| i)
		})
}

/// `who`'s signed announcement of payload `digest` for `round` of `pool`, as gossiped: the
/// evidence `open_challenge` takes (member index `u32::MAX` if `who` never was a member).
pub fn announcement(pool: u32, round: u32, who: AccountId, digest: [u8; 32]) -> Evidence {
	use synod_primitives::protocol::evidence::{signing, Body, Envelope, PayloadRef};
	let member = member_index(pool, who).unwrap_or(u32::MAX);
	memo(&ANNOUNCEMENTS, (pool, round, member, who, digest), || {
		let envelope = Envelope {
			pool: pool.into(),
			round,
			member,
			peer_id: peer(who).into_inner(),
			body: Body::Alive { seq: 1, payload: Some(PayloadRef { digest, size: 1_000 }) },
		};
		signing::sign(&key_seed(who), envelope).encode().try_into().expect("fits")
	})
}

/// Runs to the first block in which round `round` of `pool`, if final, can be challenged (the
/// one after its late commits close); stays where it is if that block has passed.
pub fn run_to_challenges(pool: u32, round: u32) {
	use synod_primitives::{CheckpointsInspect, PoolsInterface};
	let params = <TrainingPools as PoolsInterface<_, _, _>>::round_params(pool);
	let fin = <Checkpoints as CheckpointsInspect<_, _>>::final_checkpoint(pool, round);
	if let (Some(p), Some(f)) = (params, fin) {
		run_to_block(p.timeline.challenges_from(f.finalized_at));
	}
}

/// `challenger` opens a challenge against `accused`'s contribution to `round` of `pool`, with
/// `accused`'s genuine signed announcement of payload `digest` as evidence, from the first
/// block in which the round can be challenged ([`run_to_challenges`]).
pub fn open_challenge(
	challenger: AccountId,
	pool: u32,
	round: u32,
	accused: AccountId,
	digest: [u8; 32],
) -> sp_runtime::DispatchResult {
	run_to_challenges(pool, round);
	Challenges::open_challenge(
		RuntimeOrigin::signed(challenger),
		pool,
		round,
		accused,
		announcement(pool, round, accused, digest),
	)
}

/// `who` (already bonded) joins `pool` committing `stake`, with its peer id and key.
pub fn join(who: AccountId, pool: u32, stake: Balance) -> sp_runtime::DispatchResult {
	TrainingPools::join_pool(
		RuntimeOrigin::signed(who),
		pool,
		stake,
		peer(who),
		ml_dsa_key(who),
		peer_proof(who, pool),
	)
}

/// Bonds `stake` for `who` and joins `pool` with all of it.
pub fn bond_and_join(who: AccountId, pool: u32, stake: Balance) {
	assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(who), stake));
	assert_ok!(join(who, pool, stake));
}

/// Creates the next pool (id returned) and lets trainers `1..=stakes.len()` join with the given
/// stakes; with `stakes.len()` as `min_trainers` it is Training at round 1.
pub fn training_pool(rounds: u32, quorum: Perbill, stakes: &[Balance]) -> u32 {
	let pool = pallet_training_pools::NextPoolId::<Test>::get();
	assert_ok!(TrainingPools::create_pool(
		RuntimeOrigin::signed(CREATOR),
		spec(rounds, stakes.len() as u32, quorum)
	));
	for (i, stake) in stakes.iter().enumerate() {
		bond_and_join(i as u64 + 1, pool, *stake);
	}
	pool
}

/// An included set.
pub fn included(ix: &[u32]) -> pallet_checkpoints::IncludedSet<Test> {
	ix.to_vec().try_into().expect("at most MaxMembers")
}

/// `who` commits `[hash; 32]` with included set `ix` for `round` of pool 0.
pub fn commit(who: AccountId, round: u32, hash: u8, ix: &[u32]) -> sp_runtime::DispatchResult {
	commit_to(0, who, round, hash, ix)
}

/// `who` commits `[hash; 32]` with included set `ix` for `round` of `pool`; a commit that
/// succeeds moves its account's nonce, as its extrinsic would (a live account, for the no-show
/// rule's `NoShowNonce`; a failed one leaves storage as it was, for `assert_noop!`).
pub fn commit_to(
	pool: u32,
	who: AccountId,
	round: u32,
	hash: u8,
	ix: &[u32],
) -> sp_runtime::DispatchResult {
	Checkpoints::commit_checkpoint(
		RuntimeOrigin::signed(who),
		pool,
		round,
		[hash; 32],
		included(ix),
	)
	.map(|_| System::inc_account_nonce(who))
	.map_err(|e| e.error)
}

/// Pool 0 with trainers 1..=5 (1 000 stake each, ⅔ quorum, 3 rounds), round 1 final at block 1
/// with all five contributing (hash `[7; 32]`).
pub fn final_round() {
	training_pool(3, two_thirds(), &[1_000; 5]);
	for who in 1..=5 {
		assert_ok!(commit(who, 1, 7, &[0, 1, 2, 3, 4]));
	}
	assert!(pallet_checkpoints::FinalCheckpoints::<Test>::get(0, 1).is_some());
}

/// Mints `amount` planck to `who` (accounts outside the genesis set).
pub fn mint(who: AccountId, amount: Balance) {
	use frame_support::traits::fungible::Mutate;
	assert_ok!(<Balances as Mutate<_>>::mint_into(&who, amount));
}

/// Bonds `stake` more for each of `who` (every bonded contributor is a juror by default).
pub fn jurors(who: &[AccountId], stake: Balance) {
	for j in who {
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(*j), stake));
	}
}

/// Opts each of `who` (bonded) out of juries.
pub fn opt_out(who: &[AccountId]) {
	for j in who {
		assert_ok!(Challenges::unregister_juror(RuntimeOrigin::signed(*j)));
	}
}

/// Events of one pallet, in order.
macro_rules! pallet_events {
	($name:ident, $variant:ident, $pallet:ident) => {
		/// This pallet's events so far.
		pub fn $name() -> Vec<$pallet::Event<Test>> {
			System::events()
				.into_iter()
				.filter_map(|r| match r.event {
					RuntimeEvent::$variant(e) => Some(e),
					_ => None,
				})
				.collect()
		}
	};
}
pallet_events!(staking_events, TrainerStaking, pallet_trainer_staking);
pallet_events!(pools_events, TrainingPools, pallet_training_pools);
pallet_events!(checkpoints_events, Checkpoints, pallet_checkpoints);
pallet_events!(challenges_events, Challenges, pallet_challenges);
pallet_events!(rewards_events, Rewards, pallet_rewards);

/// The verdict the last challenge of `accused`'s contribution to `round` of `pool` ended with,
/// as its `ChallengeClosed` event tells it (`Challenges::Verdicts` keeps `Guilty` only, and
/// keeps it when a later challenge of the same contribution is acquitted).
pub fn verdict_of(
	pool: u32,
	round: u32,
	accused: AccountId,
) -> Option<synod_primitives::protocol::Verdict> {
	challenges_events().into_iter().rev().find_map(|e| match e {
		pallet_challenges::Event::ChallengeClosed {
			pool_id,
			round: r,
			accused: a,
			verdict,
			..
		} if (pool_id, r, a) == (pool, round, accused) => Some(verdict),
		_ => None,
	})
}

/// The last event of any pallet.
pub fn last_event() -> RuntimeEvent {
	System::events().last().expect("an event").event.clone()
}

/// Free balance of `who`.
pub fn free(who: AccountId) -> Balance {
	pallet_balances::Pallet::<Test>::free_balance(who)
}

/// Bonded stake of `who` (active + unbonding), planck.
pub fn staked(who: AccountId) -> Balance {
	pallet_trainer_staking::Ledger::<Test>::get(who).map(|l| l.total()).unwrap_or(0)
}
