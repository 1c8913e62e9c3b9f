//! Chain specifications built from the runtime's genesis presets.

use sc_service::ChainType;
use synod_runtime::WASM_BINARY;

/// Chain spec type of this node (no extensions).
pub type ChainSpec = sc_service::GenericChainSpec;

fn wasm() -> Result<&'static [u8], String> {
    WASM_BINARY.ok_or_else(|| "the runtime wasm was not built (SKIP_WASM_BUILD set?)".to_string())
}

fn properties() -> sc_service::Properties {
    let mut p = sc_service::Properties::new();
    p.insert("tokenSymbol".into(), "SYN".into());
    p.insert("tokenDecimals".into(), 12.into());
    p.insert("ss58Format".into(), 42.into());
    p
}

/// `--dev`: one authority (Alice), preset `development`.
pub fn development_chain_spec() -> Result<ChainSpec, String> {
    Ok(ChainSpec::builder(wasm()?, None)
        .with_name("Synod Development")
        .with_id("synod_dev")
        .with_chain_type(ChainType::Development)
        .with_genesis_config_preset_name(sp_genesis_builder::DEV_RUNTIME_PRESET)
        .with_properties(properties())
        .build())
}

/// `--chain local`: Alice, Bob, Charlie and Dave validate, preset `local_testnet`.
pub fn local_chain_spec() -> Result<ChainSpec, String> {
    Ok(ChainSpec::builder(wasm()?, None)
        .with_name("Synod Local Testnet")
        .with_id("synod_local_testnet")
        .with_chain_type(ChainType::Local)
        .with_genesis_config_preset_name(sp_genesis_builder::LOCAL_TESTNET_RUNTIME_PRESET)
        .with_properties(properties())
        .build())
}
