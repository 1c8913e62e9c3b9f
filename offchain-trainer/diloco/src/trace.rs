//! A payload's Proof-of-Learning trace (Jia et al. 2021, §4.2): the blake3 of the member's
//! full inner state (θ, AdamW moments, step count; canonical `synod-checkpoint` bytes) at each
//! segment boundary of its inner phase ([`crate::verify::segment_boundaries`]), carried in
//! front of the encoded pseudo-gradient so that the member's signature over the payload
//! digest commits to its whole trajectory before any verifier draws which segments to replay.
//!
//! Wire form: `"SYTR"`, the hash count `n` (u32 LE, 2 ≤ n ≤ [`MAX_TRACE_HASHES`]), `n` × 32
//! bytes of blake3, then the rest of the payload ([`crate::payload`]). A payload without the
//! prefix has no trace: it is still a valid payload, and a verifier replays it whole.

/// First four bytes of a traced payload.
pub const TRACE_MAGIC: [u8; 4] = *b"SYTR";
pub use synod_protocol::limits::MAX_TRACE_HASHES;
/// Most bytes a trace adds in front of a payload.
pub const MAX_TRACE_BYTES: usize = 8 + 32 * MAX_TRACE_HASHES;

/// Largest trace state (θ, two AdamW moments and the step count as `synod-checkpoint` bytes)
/// of a model laid out like `like`, in bytes: 12 bytes per parameter, 3 × 2 KiB of header per
/// tensor, and 1 MiB. A peer offering a larger state is refused before a byte is transferred.
pub fn max_state_bytes(like: &synod_checkpoint::ParamSet) -> u64 {
    crate::file_bound(like, 12, 3 * (2 << 10))
}

/// The boundary hashes of a trace, start first.
pub type Trace = Vec<[u8; 32]>;

/// Why a payload's trace prefix is malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    /// Fewer bytes than the prefix announces.
    #[error("the trace is truncated")]
    Truncated,
    /// A count below 2 (start and end) or above [`MAX_TRACE_HASHES`].
    #[error("the trace holds {0} hashes (2..={MAX_TRACE_HASHES} allowed)")]
    Count(u32),
}

/// `codec` (an encoded pseudo-gradient) with `trace` in front; `codec` unchanged for an empty
/// trace.
pub(crate) fn with_trace(trace: &[[u8; 32]], codec: &[u8]) -> Vec<u8> {
    if trace.is_empty() {
        return codec.to_vec();
    }
    let mut out = Vec::with_capacity(8 + 32 * trace.len() + codec.len());
    out.extend_from_slice(&TRACE_MAGIC);
    out.extend_from_slice(&(trace.len() as u32).to_le_bytes());
    for h in trace {
        out.extend_from_slice(h);
    }
    out.extend_from_slice(codec);
    out
}

/// Splits `payload` into its trace (`None` if it has none) and the encoded pseudo-gradient.
/// Reads at most [`MAX_TRACE_BYTES`] and allocates nothing beyond the hashes.
///
/// # Errors
/// [`TraceError`] for a prefix that is truncated or holds a count out of range.
pub(crate) fn split_trace(payload: &[u8]) -> Result<(Option<Trace>, &[u8]), TraceError> {
    let Some(rest) = payload.strip_prefix(&TRACE_MAGIC) else {
        return Ok((None, payload));
    };
    let (count, rest) = rest.split_first_chunk::<4>().ok_or(TraceError::Truncated)?;
    let n = u32::from_le_bytes(*count);
    if !(2..=MAX_TRACE_HASHES as u32).contains(&n) {
        return Err(TraceError::Count(n));
    }
    let len = 32 * n as usize;
    if rest.len() < len {
        return Err(TraceError::Truncated);
    }
    let (hashes, codec) = rest.split_at(len);
    let trace = hashes
        .chunks_exact(32)
        .map(|c| {
            let mut h = [0u8; 32];
            h.copy_from_slice(c);
            h
        })
        .collect();
    Ok((Some(trace), codec))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_round_trips_and_an_untraced_payload_passes_through() {
        let trace = [[1u8; 32], [2u8; 32], [3u8; 32]];
        let p = with_trace(&trace, b"SYNGcodec");
        let (t, codec) = split_trace(&p).unwrap();
        assert_eq!(t.unwrap(), trace);
        assert_eq!(codec, b"SYNGcodec");
        assert_eq!(with_trace(&[], b"SYNGx"), b"SYNGx");
        assert_eq!(split_trace(b"SYNGx").unwrap(), (None, &b"SYNGx"[..]));
    }

    #[test]
    fn every_truncation_and_count_out_of_range_is_a_typed_error() {
        let p = with_trace(&[[7u8; 32]; 4], b"");
        for cut in 4..p.len() {
            assert_eq!(
                split_trace(&p[..cut]),
                Err(TraceError::Truncated),
                "cut at {cut}"
            );
        }
        for n in [0u32, 1, MAX_TRACE_HASHES as u32 + 1, u32::MAX] {
            let mut bad = TRACE_MAGIC.to_vec();
            bad.extend_from_slice(&n.to_le_bytes());
            bad.extend_from_slice(&[0u8; 64]);
            assert_eq!(split_trace(&bad), Err(TraceError::Count(n)));
        }
    }
}
