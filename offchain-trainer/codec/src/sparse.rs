//! Per-chunk top-k with 4-bit values (the kernel of [`crate::Mode::SparseTopK`]).
//!
//! A chunk of `n ≤ chunk_size` elements keeps its `k = min(topk, n)` largest magnitudes
//! (ties: the lower index first, so the selection is a function of the values alone), stored
//! as one f32 scale `s = max|x_sel| / 7`, the k indices in ascending order bit-packed with
//! [`index_bits`]`(chunk_size)` bits each, then the k codes `q = round_half_even(x / s)` in
//! −7..=7 as nibbles `q + 8` (1..=15; 0 is invalid). Both bit streams are LSB-first and padded
//! to a whole byte. Everything not selected decodes to 0.

use crate::DecodeError;

/// Largest code magnitude (4-bit signed, symmetric).
const LEVELS: f32 = 7.0;

/// Bits per index for chunks of `chunk_size` elements: ⌈log₂ chunk_size⌉, at least 1.
pub(crate) fn index_bits(chunk_size: usize) -> u32 {
    (usize::BITS - chunk_size.saturating_sub(1).leading_zeros()).max(1)
}

/// Bytes of one chunk of `n` elements: scale + packed indices + packed codes.
pub(crate) fn chunk_bytes(n: usize, topk: usize, chunk_size: usize) -> usize {
    let k = topk.min(n);
    4 + (k * index_bits(chunk_size) as usize).div_ceil(8) + k.div_ceil(2)
}

/// Bytes of a block of `len` elements cut into chunks of `chunk_size`.
pub(crate) fn block_bytes(len: usize, topk: usize, chunk_size: usize) -> usize {
    let full = len / chunk_size;
    let rest = len % chunk_size;
    full * chunk_bytes(chunk_size, topk, chunk_size)
        + if rest > 0 {
            chunk_bytes(rest, topk, chunk_size)
        } else {
            0
        }
}

struct BitWriter<'a> {
    out: &'a mut [u8],
    bit: usize,
}

impl BitWriter<'_> {
    fn put(&mut self, value: u32, bits: u32) {
        for b in 0..bits {
            if (value >> b) & 1 == 1 {
                self.out[self.bit / 8] |= 1 << (self.bit % 8);
            }
            self.bit += 1;
        }
    }
}

struct BitReader<'a> {
    bytes: &'a [u8],
    bit: usize,
}

impl BitReader<'_> {
    fn get(&mut self, bits: u32) -> u32 {
        let mut v = 0;
        for b in 0..bits {
            v |= u32::from((self.bytes[self.bit / 8] >> (self.bit % 8)) & 1) << b;
            self.bit += 1;
        }
        v
    }
}

/// Encodes `x` chunk by chunk into `out`, which must hold exactly
/// [`block_bytes`]`(x.len(), topk, chunk)` zeroed bytes.
///
/// # Errors
/// `Err(())` if `x` holds a NaN or an infinity.
pub(crate) fn encode_into(x: &[f32], chunk: usize, topk: usize, out: &mut [u8]) -> Result<(), ()> {
    if !x.iter().all(|v| v.is_finite()) {
        return Err(());
    }
    let bits = index_bits(chunk);
    let mut pos = 0;
    let mut order: Vec<u32> = Vec::with_capacity(chunk);
    for c in x.chunks(chunk) {
        let k = topk.min(c.len());
        order.clear();
        order.extend(0..c.len() as u32);
        // Strict total order: larger magnitude first, then the lower index.
        let by_rank = |a: &u32, b: &u32| {
            c[*b as usize]
                .abs()
                .total_cmp(&c[*a as usize].abs())
                .then(a.cmp(b))
        };
        if k < c.len() {
            order.select_nth_unstable_by(k, by_rank);
        }
        let sel = &mut order[..k];
        sel.sort_unstable();
        let m = sel.iter().fold(0f32, |m, i| m.max(c[*i as usize].abs()));
        let s = m / LEVELS;
        // In f64: 7 / m overflows f32 for m below ≈ 2·10⁻³⁸ (subnormal chunks).
        let inv = if m > 0.0 {
            f64::from(LEVELS) / f64::from(m)
        } else {
            0.0
        };
        let n = chunk_bytes(c.len(), topk, chunk);
        let (head, rest) = out[pos..pos + n].split_at_mut(4);
        head.copy_from_slice(&s.to_le_bytes());
        let (idx, codes) = rest.split_at_mut((k * bits as usize).div_ceil(8));
        let mut w = BitWriter { out: idx, bit: 0 };
        for i in sel.iter() {
            w.put(*i, bits);
        }
        let mut w = BitWriter { out: codes, bit: 0 };
        for i in sel.iter() {
            let q = (f64::from(c[*i as usize]) * inv)
                .round_ties_even()
                .clamp(-7.0, 7.0);
            w.put((q as i32 + 8) as u32, 4);
        }
        pos += n;
    }
    Ok(())
}

/// Inverse of [`encode_into`]: fills `out` (zeroed by the caller, one block of elements) from
/// `raw`, which holds exactly [`block_bytes`]`(out.len(), topk, chunk)` bytes.
///
/// # Errors
/// [`DecodeError::BadScale`] for a NaN, negative or overflowing scale; [`DecodeError::BadBlock`]
/// for indices not strictly ascending or past the chunk, or a code nibble of 0.
pub(crate) fn decode_into(
    raw: &[u8],
    chunk: usize,
    topk: usize,
    block: usize,
    out: &mut [f32],
) -> Result<(), DecodeError> {
    let bits = index_bits(chunk);
    let bad = |reason: &str| DecodeError::BadBlock {
        block,
        reason: reason.into(),
    };
    let mut pos = 0;
    for o in out.chunks_mut(chunk) {
        let k = topk.min(o.len());
        let n = chunk_bytes(o.len(), topk, chunk);
        let c = &raw[pos..pos + n];
        let s = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        // A scale above f32::MAX / 7 would decode ±7 to ±∞.
        if !(0.0..=f32::MAX / LEVELS).contains(&s) {
            return Err(DecodeError::BadScale { block });
        }
        let (idx, codes) = c[4..].split_at((k * bits as usize).div_ceil(8));
        let mut ri = BitReader { bytes: idx, bit: 0 };
        let mut rc = BitReader {
            bytes: codes,
            bit: 0,
        };
        let mut next = 0usize;
        for _ in 0..k {
            let i = ri.get(bits) as usize;
            if i < next || i >= o.len() {
                return Err(bad(
                    "sparse indices not strictly ascending within the chunk",
                ));
            }
            let q = rc.get(4);
            if q == 0 {
                return Err(bad("sparse code 0 is not a value"));
            }
            o[i] = (q as i32 - 8) as f32 * s;
            next = i + 1;
        }
        pos += n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(x: &[f32], chunk: usize, topk: usize) -> Vec<f32> {
        let mut raw = vec![0u8; block_bytes(x.len(), topk, chunk)];
        encode_into(x, chunk, topk, &mut raw).unwrap();
        let mut out = vec![0f32; x.len()];
        decode_into(&raw, chunk, topk, 0, &mut out).unwrap();
        out
    }

    #[test]
    fn index_bits_cover_the_chunk() {
        assert_eq!(index_bits(1), 1);
        assert_eq!(index_bits(2), 1);
        assert_eq!(index_bits(3), 2);
        assert_eq!(index_bits(4096), 12);
        assert_eq!(index_bits(4097), 13);
    }

    #[test]
    fn keeps_the_largest_magnitudes_and_breaks_ties_by_index() {
        let x = [0.1f32, -7.0, 0.5, 3.5, -3.5, 0.0, 7.0, 1.0];
        // Top 3: |−7| at 1, |7| at 6 (tie: index 1 first), then |3.5| at 3 (before 4).
        assert_eq!(
            roundtrip(&x, 8, 3),
            vec![0.0, -7.0, 0.0, 4.0, 0.0, 0.0, 7.0, 0.0]
        );
    }

    #[test]
    fn a_short_last_chunk_and_k_above_the_chunk_keep_everything() {
        let x: Vec<f32> = (0..10).map(|i| i as f32 - 3.0).collect();
        // chunk 4, topk 8: every element is kept, each within half a step of its chunk.
        let y = roundtrip(&x, 4, 8);
        for (cx, cy) in x.chunks(4).zip(y.chunks(4)) {
            let s = cx.iter().fold(0f32, |m, v| m.max(v.abs())) / 7.0;
            for (a, b) in cx.iter().zip(cy) {
                assert!((a - b).abs() <= s * 0.5 + 1e-6, "{a} vs {b}");
            }
        }
    }

    #[test]
    fn subnormal_chunks_keep_their_values() {
        // 7 / 3e-39 overflows f32: computed in f32, every code saturated to ±7.
        let x = [1e-39f32, -2e-39, 0.0, 3e-39];
        let y = roundtrip(&x, 4, 4);
        let s = 3e-39f32 / 7.0;
        for (a, b) in x.iter().zip(&y) {
            assert!((a - b).abs() <= s * 0.51, "{a:e} vs {b:e}");
        }
    }

    #[test]
    fn corrupt_indices_and_codes_are_typed_errors() {
        let x = [1.0f32, 2.0, 3.0, 4.0];
        let mut raw = vec![0u8; block_bytes(4, 2, 4)];
        encode_into(&x, 4, 2, &mut raw).unwrap();
        // Indices 2, 3 (2 bits each) in byte 4; swap them to 3, 2.
        let mut swapped = raw.clone();
        swapped[4] = 0b10_11;
        let mut out = [0f32; 4];
        assert!(matches!(
            decode_into(&swapped, 4, 2, 0, &mut out),
            Err(DecodeError::BadBlock { .. })
        ));
        let mut zero_code = raw.clone();
        zero_code[5] = 0;
        assert!(matches!(
            decode_into(&zero_code, 4, 2, 0, &mut [0f32; 4]),
            Err(DecodeError::BadBlock { .. })
        ));
        let mut nan = raw;
        nan[..4].copy_from_slice(&f32::NAN.to_le_bytes());
        assert_eq!(
            decode_into(&nan, 4, 2, 0, &mut [0f32; 4]),
            Err(DecodeError::BadScale { block: 0 })
        );
    }
}
