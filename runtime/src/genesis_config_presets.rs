//! Genesis presets: `development` (Alice is the only authority and sudo) and `local_testnet`
//! (Alice, Bob, Charlie and Dave are Aura + GRANDPA authorities). Both fund the well-known dev
//! accounts (`//Alice` … `//Ferdie` and their `//stash`) with 2^60 planck each.

use crate::{AccountId, BalancesConfig, RuntimeGenesisConfig, SudoConfig};
use alloc::{vec, vec::Vec};
use frame_support::build_struct_json_patch;
use serde_json::Value;
use sp_consensus_aura::sr25519::AuthorityId as AuraId;
use sp_consensus_grandpa::AuthorityId as GrandpaId;
use sp_genesis_builder::{self, PresetId};
use sp_keyring::{Ed25519Keyring, Sr25519Keyring};

/// Balance given to each endowed account, in planck (about 1.15 M SYN).
pub const ENDOWMENT: u128 = 1u128 << 60;

fn testnet_genesis(
    initial_authorities: Vec<(AuraId, GrandpaId)>,
    endowed_accounts: Vec<AccountId>,
    root: AccountId,
) -> Value {
    build_struct_json_patch!(RuntimeGenesisConfig {
        balances: BalancesConfig {
            balances: endowed_accounts
                .iter()
                .cloned()
                .map(|k| (k, ENDOWMENT))
                .collect::<Vec<_>>(),
        },
        aura: pallet_aura::GenesisConfig {
            authorities: initial_authorities
                .iter()
                .map(|x| x.0.clone())
                .collect::<Vec<_>>(),
        },
        grandpa: pallet_grandpa::GenesisConfig {
            authorities: initial_authorities
                .iter()
                .map(|x| (x.1.clone(), 1))
                .collect::<Vec<_>>(),
        },
        sudo: SudoConfig { key: Some(root) },
    })
}

fn authority(aura: Sr25519Keyring, grandpa: Ed25519Keyring) -> (AuraId, GrandpaId) {
    (aura.public().into(), grandpa.public().into())
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
