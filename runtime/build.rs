//! Builds the runtime's wasm blob (`WASM_BINARY`); `SKIP_WASM_BUILD=1` skips it for native-only
//! builds such as pallet unit tests.
fn main() {
	#[cfg(feature = "std")]
	substrate_wasm_builder::WasmBuilder::build_using_defaults();
}
