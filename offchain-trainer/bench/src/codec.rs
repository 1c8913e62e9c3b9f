//! `bench codec`: encode/decode throughput against memcpy, error and compression.

use std::time::Instant;

use anyhow::Result;
use clap::Args;
use serde_json::json;
use synod_codec::{decode, encode, rel_l2_error, DecodeLimits, EncodeOptions, TensorRef};

use synod_member::args::WireCodec;

/// Arguments of `bench codec`.
#[derive(Args, Clone, Debug)]
pub struct CodecArgs {
    /// Parameters in the synthetic pseudo-gradient.
    #[arg(long, default_value_t = 25_000_000)]
    pub params: usize,
    /// Repetitions; the best time counts.
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    /// zstd level (default: the codec's default).
    #[arg(long, default_value_t = EncodeOptions::default().zstd_level, allow_hyphen_values = true)]
    pub zstd_level: i32,
    /// Fraction of elements replaced by ±20σ outliers (robustness check; 0 = plain Gaussian).
    #[arg(long, default_value_t = 0.0)]
    pub outliers: f64,
    /// The codec measured (against fp32 + zstd).
    #[command(flatten)]
    pub wire: WireCodec,
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

/// Prints `{"bench":"codec",...}`: per-core (one thread) and all-thread GB/s of f32 input.
pub fn run(a: &CodecArgs, threads: usize) -> Result<()> {
    let x = synthetic(a.params, a.outliers);
    // Shape it like a model: 4 Mi-element matrices and a remainder.
    let mut shapes = Vec::new();
    let mut left = a.params;
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
    let gb = (a.params * 4) as f64 / 1e9;
    let opts = EncodeOptions {
        zstd_level: a.zstd_level,
        ..a.wire.options()
    };
    let limits = DecodeLimits::for_model(a.params as u64, u32::try_from(refs.len())?);

    let mut dst = vec![0f32; a.params];
    let (memcpy, _) = best(a.reps + 2, || {
        dst.copy_from_slice(&x);
        Ok(std::hint::black_box(dst[a.params / 2]))
    })?;
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    let (enc1, payload) = one.install(|| best(a.reps, || Ok(encode(&refs, &opts)?)))?;
    let (dec1, decoded) = one.install(|| best(a.reps, || Ok(decode(&payload, &limits)?)))?;
    let (enc_n, _) = best(a.reps, || Ok(encode(&refs, &opts)?))?;
    let (dec_n, _) = best(a.reps, || Ok(decode(&payload, &limits)?))?;
    let fp32 = encode(
        &refs,
        &EncodeOptions {
            zstd_level: a.zstd_level,
            ..EncodeOptions::fp32()
        },
    )?;
    let y: Vec<f32> = decoded.tensors.concat();
    let memcpy_gbps = gb / memcpy;
    println!(
        "{}",
        json!({
            "bench": "codec",
            "codec": a.wire.codec.name(),
            "sparse_chunk": a.wire.sparse().then_some(a.wire.sparse_chunk),
            "sparse_topk": a.wire.sparse().then_some(a.wire.sparse_topk),
            "params": a.params,
            "zstd_level": a.zstd_level,
            "outliers": a.outliers,
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
            "bytes_ratio_vs_fp32": (a.params * 4) as f64 / payload.len() as f64,
            "bytes_ratio_vs_fp32_zstd": fp32.len() as f64 / payload.len() as f64,
        })
    );
    Ok(())
}
