//! Builds the runtime's wasm blob (`WASM_BINARY`); `SKIP_WASM_BUILD=1` skips it for native-only
//! builds such as pallet unit tests.
fn main() {
    #[cfg(feature = "std")]
    {
        // The target dir may live outside the workspace (CI keeps it under ~/.cache): tell the
        // wasm builder where Cargo.lock is, so the wasm build uses the locked versions. The
        // manifest dir is read when the script runs, not baked in when it is compiled: one
        // compiled script serves every checkout that shares the target dir.
        if std::env::var_os("WASM_BUILD_WORKSPACE_HINT").is_none() {
            if let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") {
                std::env::set_var(
                    "WASM_BUILD_WORKSPACE_HINT",
                    std::path::Path::new(&dir).join(".."),
                );
            }
        }
        substrate_wasm_builder::WasmBuilder::build_using_defaults();
    }
}
