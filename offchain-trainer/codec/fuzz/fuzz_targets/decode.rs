//! Fuzzes the pseudo-gradient decoder: any input must yield Ok or a typed error, never a
//! panic, and never more memory than the limits allow (libFuzzer's -rss_limit_mb enforces it).
//!
//! Run: `cargo fuzz run decode -- -max_total_time=60 -rss_limit_mb=512` from `offchain-trainer/codec`
//! (cargo-fuzz needs a nightly compiler, or `RUSTC_BOOTSTRAP=1` on stable).
#![no_main]

use libfuzzer_sys::fuzz_target;
use synod_codec::{decode, encode, DecodeLimits, EncodeOptions, TensorRef};

fuzz_target!(|data: &[u8]| {
    // 4 M elements (16 MiB of output) at most.
    let limits = DecodeLimits::for_model(1 << 22, 256);
    // Half the inputs get a valid blake3 trailer appended, so the fuzzer explores the header
    // and block parsing behind the checksum instead of stopping at it.
    let sealed;
    let input = if data.first().is_some_and(|b| b & 1 == 1) {
        sealed = [data, blake3::hash(data).as_bytes()].concat();
        &sealed[..]
    } else {
        data
    };
    if let Ok(d) = decode(input, &limits) {
        // Whatever decodes re-encodes and decodes to the same shapes.
        let refs: Vec<TensorRef<'_>> =
            d.header.shapes.iter().zip(&d.tensors).map(|(s, t)| TensorRef { shape: s, data: t }).collect();
        let again = encode(&refs, &EncodeOptions::fp32()).expect("decoded tensors are finite and well-shaped");
        assert_eq!(decode(&again, &limits).expect("own encoding decodes").header.shapes, d.header.shapes);
    }
});
