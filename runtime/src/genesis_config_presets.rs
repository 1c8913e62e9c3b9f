//! Genesis presets: `development` (Alice is the only validator and sudo) and `local_testnet`
//! (Alice, Bob, Charlie and Dave validate). Both fund the well-known dev accounts (`//Alice` …
//! `//Ferdie` and their `//stash`) with 2^60 planck each. The validators are validators *from
//! stake*: each bonds [`VALIDATOR_BOND`] in TrainerStaking, is a ValidatorSet candidate and has
//! its Aura + GRANDPA session keys (`//Name` sr25519 / ed25519) in `session.keys`. Sessions last
//! [`SESSION_LENGTH`] blocks.

use crate::{
    AccountId, BalancesConfig, RuntimeGenesisConfig, SessionConfig, SessionKeys, SudoConfig,
    TrainerStakingConfig, ValidatorSetConfig, UNIT,
};
use alloc::{vec, vec::Vec};
use frame_support::build_struct_json_patch;
use serde_json::Value;
use sp_consensus_aura::sr25519::AuthorityId as AuraId;
use sp_consensus_grandpa::AuthorityId as GrandpaId;
use sp_genesis_builder::{self, PresetId};
use sp_keyring::{Ed25519Keyring, Sr25519Keyring};

/// Balance given to each endowed account, in planck (about 1.15 M SYN).
pub const ENDOWMENT: u128 = 1u128 << 60;
/// Stake each genesis validator bonds, in planck (1 000 SYN).
pub const VALIDATOR_BOND: u128 = 1_000 * UNIT;
/// Blocks per session on the presets (20 s): a new validator authors within three sessions.
pub const SESSION_LENGTH: u32 = 10;

fn testnet_genesis(
    initial_authorities: Vec<(AccountId, AuraId, GrandpaId)>,
    endowed_accounts: Vec<AccountId>,
    root: AccountId,
) -> Value {
    let validators = || initial_authorities.iter().map(|x| x.0.clone());
    build_struct_json_patch!(RuntimeGenesisConfig {
        balances: BalancesConfig {
            balances: endowed_accounts
                .iter()
                .cloned()
                .map(|k| (k, ENDOWMENT))
                .collect::<Vec<_>>(),
        },
        trainer_staking: TrainerStakingConfig {
            stakers: validators()
                .map(|v| (v, VALIDATOR_BOND))
                .collect::<Vec<_>>(),
        },
        validator_set: ValidatorSetConfig {
            candidates: validators().collect::<Vec<_>>(),
            session_length: SESSION_LENGTH,
        },
        session: SessionConfig {
            keys: initial_authorities
                .iter()
                .map(|(account, aura, grandpa)| {
                    (
                        account.clone(),
                        account.clone(),
                        SessionKeys {
                            aura: aura.clone(),
                            grandpa: grandpa.clone(),
                        },
                    )
                })
                .collect::<Vec<_>>(),
        },
        sudo: SudoConfig { key: Some(root) },
    })
}

fn authority(name: Sr25519Keyring, grandpa: Ed25519Keyring) -> (AccountId, AuraId, GrandpaId) {
    (
        name.to_account_id(),
        name.public().into(),
        grandpa.public().into(),
    )
}

/// The `local_testnet` preset: four validators.
pub fn local_testnet_genesis() -> Value {
    testnet_genesis(
        vec![
            authority(Sr25519Keyring::Alice, Ed25519Keyring::Alice),
            authority(Sr25519Keyring::Bob, Ed25519Keyring::Bob),
            authority(Sr25519Keyring::Charlie, Ed25519Keyring::Charlie),
            authority(Sr25519Keyring::Dave, Ed25519Keyring::Dave),
        ],
        Sr25519Keyring::iter().map(|k| k.to_account_id()).collect(),
        Sr25519Keyring::Alice.to_account_id(),
    )
}

/// The `development` preset: Alice alone.
pub fn development_config_genesis() -> Value {
    testnet_genesis(
        vec![authority(Sr25519Keyring::Alice, Ed25519Keyring::Alice)],
        Sr25519Keyring::iter().map(|k| k.to_account_id()).collect(),
        Sr25519Keyring::Alice.to_account_id(),
    )
}

/// The genesis patch of preset `id`, serialized as JSON; `None` for an unknown preset.
pub fn get_preset(id: &PresetId) -> Option<Vec<u8>> {
    let patch = match id.as_ref() {
        sp_genesis_builder::DEV_RUNTIME_PRESET => development_config_genesis(),
        sp_genesis_builder::LOCAL_TESTNET_RUNTIME_PRESET => local_testnet_genesis(),
        _ => return None,
    };
    Some(
        serde_json::to_string(&patch)
            .expect("serialization to json is expected to work. qed.")
            .into_bytes(),
    )
}

/// Names of the presets this runtime provides.
pub fn preset_names() -> Vec<PresetId> {
    vec![
        PresetId::from(sp_genesis_builder::DEV_RUNTIME_PRESET),
        PresetId::from(sp_genesis_builder::LOCAL_TESTNET_RUNTIME_PRESET),
    ]
}
