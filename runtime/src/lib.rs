//! Synod's FRAME runtime.
//!
//! An Aura + GRANDPA solochain with the standard System, Timestamp, Aura, Grandpa, Balances,
//! TransactionPayment, Sudo and Session pallets, plus Synod's pallets: TrainerStaking,
//! ValidatorSet (validators from stake: `validate`/`chill`, top N by bond at every session),
//! TrainingPools, Checkpoints, Challenges, Rewards. Genesis presets: `development` (Alice
//! authors alone) and `local_testnet` (Alice, Bob, Charlie and Dave validate), both with
//! 10-block sessions, see [`genesis_config_presets`].
#![cfg_attr(not(feature = "std"), no_std)]
// `construct_runtime`'s expansion for many pallets recurses deeply.
#![recursion_limit = "256"]

#[cfg(feature = "std")]
include!(concat!(env!("OUT_DIR"), "/wasm_binary.rs"));

extern crate alloc;

pub mod apis;
#[cfg(feature = "runtime-benchmarks")]
mod benchmarks;
pub mod configs;
pub mod genesis_config_presets;

use alloc::vec::Vec;
use sp_runtime::{
    generic, impl_opaque_keys,
    traits::{BlakeTwo256, IdentifyAccount, Verify},
    MultiAddress, MultiSignature,
};
use sp_version::RuntimeVersion;

pub use frame_system::Call as SystemCall;
pub use pallet_balances::Call as BalancesCall;
pub use pallet_timestamp::Call as TimestampCall;
#[cfg(any(feature = "std", test))]
pub use sp_runtime::BuildStorage;

/// Types the node needs without knowing the runtime's extrinsic format.
pub mod opaque {
    use super::*;
    pub use sp_runtime::OpaqueExtrinsic as UncheckedExtrinsic;
    use sp_runtime::{generic, traits::Hash as HashT};

    /// Opaque block header type.
    pub type Header = generic::Header<BlockNumber, BlakeTwo256>;
    /// Opaque block type.
    pub type Block = generic::Block<Header, UncheckedExtrinsic>;
    /// Opaque block identifier type.
    pub type BlockId = generic::BlockId<Block>;
    /// Opaque block hash type.
    pub type Hash = <BlakeTwo256 as HashT>::Output;
}

impl_opaque_keys! {
    /// Session keys of a validator: Aura (sr25519) and GRANDPA (ed25519).
    pub struct SessionKeys {
        /// Block authoring key.
        pub aura: Aura,
        /// Finality voting key.
        pub grandpa: Grandpa,
    }
}

/// Runtime version; `spec_version` must be bumped on every runtime logic change.
#[sp_version::runtime_version]
pub const VERSION: RuntimeVersion = RuntimeVersion {
    spec_name: alloc::borrow::Cow::Borrowed("synod"),
    impl_name: alloc::borrow::Cow::Borrowed("synod-node"),
    authoring_version: 1,
    spec_version: 167,
    impl_version: 1,
    apis: apis::RUNTIME_API_VERSIONS,
    transaction_version: 1,
    system_version: 1,
};

/// Target block time in milliseconds. Short so that an outer round's commits are included
/// within seconds of the all-reduce.
pub const MILLISECS_PER_BLOCK: u64 = 2000;
/// Aura slot duration (ms). Cannot change after the chain started.
pub const SLOT_DURATION: u64 = MILLISECS_PER_BLOCK;
/// Blocks per minute.
pub const MINUTES: BlockNumber = 60_000 / (MILLISECS_PER_BLOCK as BlockNumber);
/// Blocks per hour.
pub const HOURS: BlockNumber = MINUTES * 60;
/// Blocks per day.
pub const DAYS: BlockNumber = HOURS * 24;

/// 1 SYN in planck (12 decimals).
pub const UNIT: Balance = 1_000_000_000_000;
/// 0.001 SYN.
pub const MILLI_UNIT: Balance = 1_000_000_000;
/// Existential deposit, in planck.
pub const EXISTENTIAL_DEPOSIT: Balance = MILLI_UNIT;

/// Alias to 512-bit hash when used in the context of a transaction signature on the chain.
pub type Signature = MultiSignature;
/// Account id: the public key of the transaction signing scheme.
pub type AccountId = <<Signature as Verify>::Signer as IdentifyAccount>::AccountId;
/// Balance of an account, in planck.
pub type Balance = u128;
/// Index of a transaction in the chain.
pub type Nonce = u32;
/// A hash of some data used by the chain.
pub type Hash = sp_core::H256;
/// Block number.
pub type BlockNumber = u32;
/// The address format for describing accounts.
pub type Address = MultiAddress<AccountId, ()>;
/// Block header type as expected by this runtime.
pub type Header = generic::Header<BlockNumber, BlakeTwo256>;
/// Block type as expected by this runtime.
pub type Block = generic::Block<Header, UncheckedExtrinsic>;
/// Signed block.
pub type SignedBlock = generic::SignedBlock<Block>;
/// Block id.
pub type BlockId = generic::BlockId<Block>;

/// The transaction extensions, checked in this order. All but `CheckDutyCall` (which encodes
/// to nothing: clients that do not know it treat it as empty) are known to Polkadot.js.
/// `WeightReclaim` comes last so that the block takes back what every extension before it
/// refunds (`CheckDutyCall` refunds the part of its check a duty's path did not use).
pub type TxExtension = (
    frame_system::CheckNonZeroSender<Runtime>,
    frame_system::CheckSpecVersion<Runtime>,
    frame_system::CheckTxVersion<Runtime>,
    frame_system::CheckGenesis<Runtime>,
    frame_system::CheckEra<Runtime>,
    frame_system::CheckNonce<Runtime>,
    frame_system::CheckWeight<Runtime>,
    pallet_transaction_payment::ChargeTransactionPayment<Runtime>,
    configs::duty::CheckDutyCall,
    frame_system::WeightReclaim<Runtime>,
);

/// Unchecked extrinsic type as expected by this runtime.
pub type UncheckedExtrinsic =
    generic::UncheckedExtrinsic<Address, RuntimeCall, Signature, TxExtension>;
/// The payload being signed in transactions.
pub type SignedPayload = generic::SignedPayload<RuntimeCall, TxExtension>;

/// Migrations of the runtime, aside from the ones declared in the pallets: none. A chain
/// starts from the current genesis (`chain-specs/`, regenerated with the runtime).
type Migrations = ();

/// The pallets whose hooks the executive runs, in the order it runs them: the pallet index
/// order (`AllPalletsWithSystem`), except that `Randomness` runs right after `Aura` and before
/// `Session`. `Randomness` reads the slot's author from Aura's authorities in `on_initialize`,
/// which must still be the set the author claimed the slot with; `Session` may rotate them in
/// its own `on_initialize` (a new session).
pub type HookOrder = (
    System,
    Timestamp,
    Aura,
    Randomness,
    Grandpa,
    Balances,
    TransactionPayment,
    Sudo,
    Session,
    TrainerStaking,
    TrainingPools,
    Checkpoints,
    Challenges,
    Rewards,
    ValidatorSet,
);

/// Executive: dispatches to the various pallets.
pub type Executive = frame_executive::Executive<
    Runtime,
    Block,
    frame_system::ChainContext<Runtime>,
    Runtime,
    HookOrder,
    Migrations,
>;

#[frame_support::runtime]
mod runtime {
    #[runtime::runtime]
    #[runtime::derive(
        RuntimeCall,
        RuntimeEvent,
        RuntimeError,
        RuntimeOrigin,
        RuntimeFreezeReason,
        RuntimeHoldReason,
        RuntimeSlashReason,
        RuntimeLockId,
        RuntimeTask,
        RuntimeViewFunction
    )]
    pub struct Runtime;

    #[runtime::pallet_index(0)]
    pub type System = frame_system;
    #[runtime::pallet_index(1)]
    pub type Timestamp = pallet_timestamp;
    #[runtime::pallet_index(2)]
    pub type Aura = pallet_aura;
    // Its hooks run after Aura's and before Session's (`HookOrder`): the VRF of each block is
    // checked against the key that claimed its slot.
    #[runtime::pallet_index(8)]
    pub type Randomness = pallet_randomness;
    #[runtime::pallet_index(3)]
    pub type Grandpa = pallet_grandpa;
    #[runtime::pallet_index(4)]
    pub type Balances = pallet_balances;
    #[runtime::pallet_index(5)]
    pub type TransactionPayment = pallet_transaction_payment;
    #[runtime::pallet_index(6)]
    pub type Sudo = pallet_sudo;

    // Synod: training is consensus.
    #[runtime::pallet_index(10)]
    pub type TrainerStaking = pallet_trainer_staking;
    #[runtime::pallet_index(11)]
    pub type TrainingPools = pallet_training_pools;
    #[runtime::pallet_index(12)]
    pub type Checkpoints = pallet_checkpoints;
    #[runtime::pallet_index(13)]
    pub type Challenges = pallet_challenges;
    #[runtime::pallet_index(14)]
    pub type Rewards = pallet_rewards;
    // Validators from stake. After TrainerStaking: its genesis checks the candidates' bonds.
    #[runtime::pallet_index(15)]
    pub type ValidatorSet = pallet_validator_set;
    #[runtime::pallet_index(7)]
    pub type Session = pallet_session;
}

#[cfg(test)]
mod tests {
    use super::*;
    use frame_support::traits::PalletsInfoAccess;

    /// The executive runs every pallet's hooks once, and `Randomness` reads the slot author
    /// after Aura has read the slot and before Session can rotate the authorities: otherwise
    /// the block that starts a session with a changed set checks its author's VRF against the
    /// wrong key, and no block can be built at that height.
    #[test]
    fn hooks_run_every_pallet_once_with_randomness_between_aura_and_session() {
        let order: Vec<&str> = HookOrder::infos().iter().map(|p| p.name).collect();
        let mut every: Vec<&str> = AllPalletsWithSystem::infos()
            .iter()
            .map(|p| p.name)
            .collect();
        let mut sorted = order.clone();
        sorted.sort_unstable();
        every.sort_unstable();
        assert_eq!(sorted, every, "each pallet exactly once");
        let at = |name: &str| order.iter().position(|p| *p == name);
        assert!(at("Aura") < at("Randomness") && at("Randomness") < at("Session"));
        assert_eq!(at("System"), Some(0));
    }
}
