//! `bench memory`: the peak memory of aggregating N payloads, decoded all at once (the
//! baseline) against tensor by tensor ([`synod_diloco::aggregate_payloads`]).

use anyhow::{bail, Context, Result};
use serde_json::json;
use synod_checkpoint::{NamedTensor, ParamSet};
use synod_codec::EncodeOptions;
use synod_diloco::{
    aggregate_payloads, decode_pseudo_gradient, encode_pseudo_gradient, AggregationRule,
    Contribution,
};

/// A field of /proc/self/status in bytes (`VmRSS`, `VmHWM`).
fn status(field: &str) -> Result<u64> {
    let s = std::fs::read_to_string("/proc/self/status")?;
    let line = s
        .lines()
        .find(|l| l.starts_with(field))
        .with_context(|| format!("{field} not in /proc/self/status"))?;
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .context("malformed /proc/self/status")?
        .parse()?;
    Ok(kb * 1024)
}

/// Runs `f` and returns its value with the peak resident memory above the resident memory
/// before it (bytes), from the kernel's high-water mark (reset through `clear_refs`).
fn peak<T>(f: impl FnOnce() -> Result<T>) -> Result<(T, u64)> {
    std::fs::write("/proc/self/clear_refs", "5").context("resetting VmHWM (Linux only)")?;
    let before = status("VmRSS")?;
    let v = f()?;
    Ok((v, status("VmHWM")?.saturating_sub(before)))
}

/// Aggregates `peers` int8 payloads of a synthetic model of `params` parameters (tensors of
/// 2²⁰ elements and a remainder) under `rule`, both ways, and prints `{"bench":"memory",...}`:
/// peak MiB of both ways and their ratio.
///
/// # Errors
/// Not on Linux (the peak is read from `/proc/self`); codec and aggregation errors; a streamed
/// aggregate that differs from the decoded one.
pub fn run(peers: u32, params: usize, rule: AggregationRule) -> Result<()> {
    let mut tensors = Vec::new();
    let mut left = params;
    while left > 0 {
        let n = left.min(1 << 20);
        tensors.push(NamedTensor {
            name: format!("t{:05}", tensors.len()),
            shape: vec![n],
            data: vec![0.0; n],
        });
        left -= n;
    }
    let like = ParamSet::new(tensors)?;
    // One Δ, scaled in place for each peer and kept alive, so that no freed model-sized
    // buffer is left in the allocator for the measured runs to reuse unseen.
    let x = super::codec::synthetic(params, 0.0);
    let mut off = 0;
    let mut delta: Vec<Vec<f32>> = like
        .tensors()
        .iter()
        .map(|t| {
            let v = x[off..off + t.data.len()].to_vec();
            off += t.data.len();
            v
        })
        .collect();
    drop(x);
    let mut contributions = Vec::new();
    for m in 0..peers {
        if m > 0 {
            for v in delta.iter_mut().flatten() {
                *v *= 1.1;
            }
        }
        contributions.push(Contribution {
            member: m,
            payload: std::sync::Arc::new(encode_pseudo_gradient(
                &like,
                &delta,
                &EncodeOptions::default(),
            )?),
        });
    }
    let payload_bytes: usize = contributions.iter().map(|c| c.payload.len()).sum();
    let agg = rule.aggregator(None);
    // Streaming first, its result kept: what it frees (N tensors) is all the baseline can
    // reuse unseen, so the baseline's peak is if anything understated.
    let (streamed, stream_peak) =
        peak(|| Ok(aggregate_payloads(&like, 1, &contributions, agg.as_ref())?.gradient))?;
    let (all, all_peak) = peak(|| {
        let decoded = contributions
            .iter()
            .map(|c| decode_pseudo_gradient(&like, c.member, &c.payload))
            .collect::<Result<Vec<_>, _>>()?;
        let refs: Vec<_> = decoded.iter().collect();
        Ok(agg.aggregate(1, &refs)?)
    })?;
    let bits = |g: &Vec<Vec<f32>>| {
        g.iter()
            .flat_map(|t| t.iter().map(|v| v.to_bits()))
            .collect::<Vec<_>>()
    };
    if bits(&all) != bits(&streamed) {
        bail!("the streamed aggregate differs from the decoded one");
    }
    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    println!(
        "{}",
        json!({
            "bench": "memory",
            "peers": peers,
            "params": params,
            "rule": rule.name(),
            "payload_mib": mib(payload_bytes as u64),
            "aggregate_mib": mib(params as u64 * 4),
            "decode_all_peak_mib": mib(all_peak),
            "streaming_peak_mib": mib(stream_peak),
            "peak_ratio": all_peak as f64 / stream_peak.max(1) as f64,
            "bit_identical": true,
        })
    );
    Ok(())
}
