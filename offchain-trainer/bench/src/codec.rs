//! `bench codec`: encode/decode throughput against memcpy, error and compression.

use std::time::Instant;

use anyhow::Result;
use serde_json::json;
use synod_codec::{decode, encode, rel_l2_error, DecodeLimits, EncodeOptions, Mode, TensorRef};

/// What `bench codec` measures.
#[derive(Clone, Copy, Debug)]
pub struct CodecConfig {
    /// Parameters in the synthetic pseudo-gradient.
    pub params: usize,
    /// Repetitions; the best time counts.
    pub reps: u32,
    /// zstd level of the measured codec (in place of `wire`'s) and of the fp32 + zstd
    /// baseline.
    pub zstd_level: i32,
    /// Fraction of elements replaced by ±20σ outliers (robustness check; 0 = plain Gaussian).
    pub outliers: f64,
    /// The codec measured (against fp32 + zstd): its mode and, for the sparse codec, its
    /// chunk and top-k.
    pub wire: EncodeOptions,
}

/// The codec's name in the recipe JSON (`int8`, `fp32`, `sparse`).
fn codec_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Int8Absmax => "int8",
        Mode::Fp32 => "fp32",
        Mode::SparseTopK => "sparse",
    }
}

/// A pseudo-gradient-like vector: Gaussian, with per-4096-block magnitudes spread over 100×
/// (layers differ) and a fraction `outliers` of elements at ±20σ.
pub(super) fn synthetic(n: usize, outliers: f64) -> Vec<f32> {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut uni = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    let mut out = Vec::with_capacity(n);
    let mut scale = 1e-3;
    for i in 0..n {
        if i % 4096 == 0 {
            scale = 1e-4 * 100f64.powf(uni());
        }
        let g = (-2.0 * uni().ln()).sqrt() * (std::f64::consts::TAU * uni()).cos();
        let v = if uni() < outliers {
            20.0 * g.signum()
        } else {
            g
        };
        out.push((v * scale) as f32);
    }
    out
}

fn best<T>(reps: u32, mut f: impl FnMut() -> Result<T>) -> Result<(f64, T)> {
    let mut best = f64::MAX;
    let mut last = None;
    for _ in 0..reps.max(1) {
        let t0 = Instant::now();
        let v = f()?;
        best = best.min(t0.elapsed().as_secs_f64());
        last = Some(v);
    }
    Ok((best, last.ok_or_else(|| anyhow::anyhow!("no repetition"))?))
}

/// Prints `{"bench":"codec",...}`: per-core (one thread) and all-thread (`threads`, the
/// global rayon pool's) GB/s of f32 input.
///
/// # Errors
/// Encoding or decoding errors, a rayon pool that cannot be built.
pub fn run(c: &CodecConfig, threads: usize) -> Result<()> {
    let x = synthetic(c.params, c.outliers);
    // Shape it like a model: 4 Mi-element matrices and a remainder.
    let mut shapes = Vec::new();
    let mut left = c.params;
    while left > 0 {
        let n = left.min(4 << 20);
        shapes.push([n / 1024, 1024].map(|d| d.max(1)));
        if n < 1024 {
            *shapes.last_mut().ok_or_else(|| anyhow::anyhow!("shape"))? = [1, n];
        } else if !n.is_multiple_of(1024) {
            let rows = n / 1024;
            shapes.pop();
            shapes.push([rows, 1024]);
            shapes.push([1, n - rows * 1024]);
        }
        left -= n;
    }
    let mut tensors = Vec::new();
    let mut off = 0;
    for s in &shapes {
        let n = s[0] * s[1];
        tensors.push((s.to_vec(), &x[off..off + n]));
        off += n;
    }
    let refs: Vec<TensorRef<'_>> = tensors
        .iter()
        .map(|(s, d)| TensorRef { shape: s, data: d })
        .collect();
    let gb = (c.params * 4) as f64 / 1e9;
    let opts = EncodeOptions {
        zstd_level: c.zstd_level,
        ..c.wire
    };
    let limits = DecodeLimits::for_model(c.params as u64, u32::try_from(refs.len())?);

    let mut dst = vec![0f32; c.params];
    let (memcpy, _) = best(c.reps + 2, || {
        dst.copy_from_slice(&x);
        Ok(std::hint::black_box(dst[c.params / 2]))
    })?;
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    let (enc1, payload) = one.install(|| best(c.reps, || Ok(encode(&refs, &opts)?)))?;
    let (dec1, decoded) = one.install(|| best(c.reps, || Ok(decode(&payload, &limits)?)))?;
    let (enc_n, _) = best(c.reps, || Ok(encode(&refs, &opts)?))?;
    let (dec_n, _) = best(c.reps, || Ok(decode(&payload, &limits)?))?;
    let fp32 = encode(
        &refs,
        &EncodeOptions {
            zstd_level: c.zstd_level,
            ..EncodeOptions::fp32()
        },
    )?;
    let y: Vec<f32> = decoded.tensors.concat();
    let sparse = c.wire.mode == Mode::SparseTopK;
    let memcpy_gbps = gb / memcpy;
    println!(
        "{}",
        json!({
            "bench": "codec",
            "codec": codec_name(c.wire.mode),
            "sparse_chunk": sparse.then_some(c.wire.chunk_size),
            "sparse_topk": sparse.then_some(c.wire.topk),
            "params": c.params,
            "zstd_level": c.zstd_level,
            "outliers": c.outliers,
            "memcpy_gbps": memcpy_gbps,
            "encode_gbps": gb / enc1,
            "decode_gbps": gb / dec1,
            "encode_vs_memcpy": gb / enc1 / memcpy_gbps,
            "decode_vs_memcpy": gb / dec1 / memcpy_gbps,
            "threads": threads,
            "encode_gbps_all_threads": gb / enc_n,
            "decode_gbps_all_threads": gb / dec_n,
            "rel_l2_error": rel_l2_error(&x, &y),
            "payload_bytes": payload.len(),
            "fp32_zstd_bytes": fp32.len(),
            "bytes_ratio_vs_fp32": (c.params * 4) as f64 / payload.len() as f64,
            "bytes_ratio_vs_fp32_zstd": fp32.len() as f64 / payload.len() as f64,
        })
    );
    Ok(())
}
