//! Configuration of the standard pallets (system, consensus, money). Synod's own pallets are
//! configured in [`synod`].

#[cfg(test)]
mod deposits;
pub mod duty;
pub mod fees;
pub mod synod;
#[cfg(test)]
mod worst_case;

use frame_support::{
    derive_impl,
    dispatch::DispatchClass,
    parameter_types,
    traits::{ConstBool, ConstU128, ConstU32, ConstU64, ConstU8, VariantCountOf},
    weights::{
        constants::{ParityDbWeight, WEIGHT_REF_TIME_PER_SECOND},
        ConstantMultiplier, IdentityFee, Weight,
    },
};
use pallet_transaction_payment::FungibleAdapter;
use sp_consensus_aura::sr25519::AuthorityId as AuraId;
use sp_runtime::Perbill;
use sp_version::RuntimeVersion;

use super::{
    AccountId, Aura, Balance, Balances, Block, BlockNumber, Hash, Nonce, PalletInfo, Runtime,
    RuntimeCall, RuntimeEvent, RuntimeFreezeReason, RuntimeHoldReason, RuntimeOrigin, RuntimeTask,
    SessionKeys, System, ValidatorSet, EXISTENTIAL_DEPOSIT, SLOT_DURATION, UNIT, VERSION,
};

const NORMAL_DISPATCH_RATIO: Perbill = Perbill::from_percent(75);

parameter_types! {
    /// Block hashes kept for mortal transactions.
    pub const BlockHashCount: BlockNumber = 2400;
    /// Runtime version.
    pub const Version: RuntimeVersion = VERSION;
    /// Half a second of compute per 2-second block.
    pub RuntimeBlockWeights: frame_system::limits::BlockWeights =
        frame_system::limits::BlockWeights::with_sensible_defaults(
            Weight::from_parts(WEIGHT_REF_TIME_PER_SECOND / 2, u64::MAX),
            NORMAL_DISPATCH_RATIO,
        );
    /// 5 MiB blocks.
    pub RuntimeBlockLength: frame_system::limits::BlockLength = frame_system::limits::BlockLength
        ::builder()
        .max_length(5 * 1024 * 1024)
        .modify_max_length_for_class(DispatchClass::Normal, |m| *m = NORMAL_DISPATCH_RATIO * *m)
        .build();
    /// Generic Substrate SS58 prefix.
    pub const SS58Prefix: u8 = 42;
}

#[derive_impl(frame_system::config_preludes::SolochainDefaultConfig)]
impl frame_system::Config for Runtime {
    type Block = Block;
    type BlockWeights = RuntimeBlockWeights;
    type BlockLength = RuntimeBlockLength;
    type AccountId = AccountId;
    type Nonce = Nonce;
    type Hash = Hash;
    type BlockHashCount = BlockHashCount;
    /// The node stores state in ParityDB.
    type DbWeight = ParityDbWeight;
    type Version = Version;
    type AccountData = pallet_balances::AccountData<Balance>;
    type SS58Prefix = SS58Prefix;
    type MaxConsumers = ConstU32<16>;
}

/// Bound on Aura and GRANDPA authorities: the validator set's size (`synod::MAX_VALIDATORS`), so
/// that a genesis set cannot be larger either (a jury's draw delay covers one author rotation
/// of at most this many: `synod::JuryDelay`).
pub const MAX_AUTHORITIES: u32 = synod::MAX_VALIDATORS;

impl pallet_aura::Config for Runtime {
    type AuthorityId = AuraId;
    type DisabledValidators = ();
    type MaxAuthorities = ConstU32<MAX_AUTHORITIES>;
    type AllowMultipleBlocksPerSlot = ConstBool<false>;
    type SlotDuration = pallet_aura::MinimumPeriodTimesTwo<Runtime>;
}

/// This block's Aura slot (from its pre-runtime digest; `None` without one) and the key that
/// must author it, as the parent left the authorities: read by `pallet-randomness` in
/// `on_initialize`, which the executive runs before Session's (`crate::HookOrder`: a new
/// session may rotate the authorities within the block).
pub struct AuraSlotAuthor;
impl frame_support::traits::Get<Option<(u64, sp_core::sr25519::Public)>> for AuraSlotAuthor {
    fn get() -> Option<(u64, sp_core::sr25519::Public)> {
        let slot: sp_consensus_aura::Slot = System::digest()
            .logs()
            .iter()
            .find_map(|item| item.pre_runtime_try_to(&sp_consensus_aura::AURA_ENGINE_ID))?;
        let slot = u64::from(slot);
        let authorities = pallet_aura::Authorities::<Runtime>::get();
        let len = u64::try_from(authorities.len()).ok().filter(|l| *l > 0)?;
        let index = usize::try_from(slot % len).ok()?;
        let author: &sp_core::sr25519::Public = authorities.get(index)?.as_ref();
        Some((slot, *author))
    }
}

impl pallet_randomness::Config for Runtime {
    type SlotAuthor = AuraSlotAuthor;
    // A draw's seed is kept as long as a block hash: a draw later than that gives no verdict.
    type KeptBlocks = BlockHashCount;
    type WeightInfo = pallet_randomness::weights::SubstrateWeight<Runtime>;
}

impl pallet_grandpa::Config for Runtime {
    type RuntimeEvent = RuntimeEvent;
    type WeightInfo = ();
    type MaxAuthorities = ConstU32<MAX_AUTHORITIES>;
    type MaxNominators = ConstU32<0>;
    type MaxSetIdSessionEntries = ConstU64<0>;
    type KeyOwnerProof = sp_core::Void;
    type EquivocationReportSystem = ();
}

/// Sessions rotate every `ValidatorSet::SessionLength` blocks (a genesis parameter).
type Sessions = pallet_session::PeriodicSessions<
    pallet_validator_set::election::SessionLengthOf<Runtime>,
    ConstU32<0>,
>;

parameter_types! {
    /// Held while an account has session keys registered: 1 SYN.
    pub const SessionKeyDeposit: Balance = UNIT;
}

/// Validators are accounts; the validator set comes from stake (`ValidatorSet`), its keys are
/// handed to Aura (authoring) and GRANDPA (finality).
impl pallet_session::Config for Runtime {
    type RuntimeEvent = RuntimeEvent;
    type ValidatorId = AccountId;
    type ValidatorIdOf = sp_runtime::traits::ConvertInto;
    type ShouldEndSession = Sessions;
    type NextSessionRotation = Sessions;
    type SessionManager = ValidatorSet;
    type SessionHandler = <SessionKeys as sp_runtime::traits::OpaqueKeys>::KeyTypeIdProviders;
    type Keys = SessionKeys;
    type DisablingStrategy = ();
    type WeightInfo = pallet_session::weights::SubstrateWeight<Runtime>;
    type Currency = Balances;
    type KeyDeposit = SessionKeyDeposit;
}

impl pallet_timestamp::Config for Runtime {
    /// Milliseconds since the unix epoch.
    type Moment = u64;
    type OnTimestampSet = Aura;
    type MinimumPeriod = ConstU64<{ SLOT_DURATION / 2 }>;
    type WeightInfo = ();
}

impl pallet_balances::Config for Runtime {
    type MaxLocks = ConstU32<50>;
    type MaxReserves = ();
    type ReserveIdentifier = [u8; 8];
    type Balance = Balance;
    type RuntimeEvent = RuntimeEvent;
    type DustRemoval = ();
    type ExistentialDeposit = ConstU128<EXISTENTIAL_DEPOSIT>;
    type AccountStore = System;
    type WeightInfo = pallet_balances::weights::SubstrateWeight<Runtime>;
    type FreezeIdentifier = RuntimeFreezeReason;
    type MaxFreezes = VariantCountOf<RuntimeFreezeReason>;
    type RuntimeHoldReason = RuntimeHoldReason;
    type RuntimeFreezeReason = RuntimeFreezeReason;
    type DoneSlashHandler = ();
}

impl pallet_transaction_payment::Config for Runtime {
    type RuntimeEvent = RuntimeEvent;
    type OnChargeTransaction = FungibleAdapter<Balances, ()>;
    type OperationalFeeMultiplier = ConstU8<5>;
    type WeightToFee = IdentityFee<Balance>;
    type LengthToFee = ConstantMultiplier<Balance, fees::TransactionByteFee>;
    type FeeMultiplierUpdate = fees::FeeMultiplierUpdate;
    type WeightInfo = pallet_transaction_payment::weights::SubstrateWeight<Runtime>;
}

impl pallet_sudo::Config for Runtime {
    type RuntimeEvent = RuntimeEvent;
    type RuntimeCall = RuntimeCall;
    type WeightInfo = pallet_sudo::weights::SubstrateWeight<Runtime>;
}
