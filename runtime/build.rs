//! Builds the runtime's wasm blob (`WASM_BINARY`); `SKIP_WASM_BUILD=1` skips it for native-only
//! builds such as pallet unit tests.
fn main() {
    #[cfg(feature = "std")]
    {
        // The target dir may live outside the workspace (CI keeps it under ~/.cache): tell the
        // wasm builder where Cargo.lock is, so the wasm build uses the locked versions.
        if std::env::var_os("WASM_BUILD_WORKSPACE_HINT").is_none() {
            let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
            std::env::set_var("WASM_BUILD_WORKSPACE_HINT", root);
        }
        substrate_wasm_builder::WasmBuilder::build_using_defaults();
    }
}
