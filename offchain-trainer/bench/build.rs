//! Embeds libtorch's directory as an rpath (tch-rs's own pattern), so test and bench binaries
//! run without LD_LIBRARY_PATH.
fn main() {
    if let Some(lib) = std::env::var_os("DEP_TCH_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath={}", lib.to_string_lossy());
    }
    println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
    println!("cargo:rustc-link-arg=-ltorch");
}
