//! Per-chunk top-k with 4-bit values and Rice-coded positions (the kernel of
//! [`crate::Mode::SparseTopK`]).
//!
//! A chunk of `n ≤ chunk_size` elements keeps its `k = min(topk, n)` largest magnitudes
//! (ties: the lower index first, so the selection is a function of the values alone), stored
//! as
//! 1. one f32 scale `s = max|x_sel| / 7` (4 bytes, little-endian);
//! 2. the k codes `q = round_half_even(x / s)` in −7..=7 as nibbles `q + 8` (1..=15; 0 is
//!    invalid), in ascending index order, low nibble first, padded to a byte;
//! 3. the k positions as gaps `g_0 = i_0`, `g_j = i_j − i_{j−1} − 1`, each Rice-coded with
//!    parameter `b =` [`rice_bits`]`(n, k)`: `g >> b` one-bits, a zero-bit, then the low `b`
//!    bits of `g` (LSB first); the bit stream is LSB-first and padded to a byte.
//!
//! Everything not selected decodes to 0. Gaps between the top-k of `n` are close to
//! geometric with mean `n / k`, for which a Rice code with `2^b ≈ n / k` is within ≈ 0.1 bit of
//! the entropy (Golomb, "Run-length encodings", IEEE Trans. IT 1966; Rice 1979): ≈ 6.5 bits per
//! position at k = 128 of 4096 where a fixed-width index costs 12. A chunk is variable-length,
//! at most [`max_chunk_bytes`]; the decoder inflates a block into a buffer of
//! [`max_block_bytes`] and requires the chunks to fill exactly what was inflated.

use crate::DecodeError;

/// Largest code magnitude (4-bit signed, symmetric).
const LEVELS: f32 = 7.0;

/// The Rice parameter for the gaps of `k` positions among `n`: ⌊log₂(n / k)⌋ (0 when
/// `k ≥ n / 2`), so `2^b` is the mean gap rounded down to a power of two.
pub(crate) fn rice_bits(n: usize, k: usize) -> u32 {
    match n.checked_div(k) {
        Some(mean) if mean >= 2 => mean.ilog2(),
        _ => 0,
    }
}

/// Most bytes one chunk of `n` elements can take: scale, `k` nibbles, and `k` Rice codes
/// whose quotients sum to at most `(n − k) >> b` (the gaps sum to at most `n − k`).
pub(crate) fn max_chunk_bytes(n: usize, topk: usize) -> usize {
    let k = topk.min(n);
    let b = rice_bits(n, k) as usize;
    4 + k.div_ceil(2) + (k * (b + 1) + ((n - k) >> b)).div_ceil(8)
}

/// Most bytes a block of `len` elements cut into chunks of `chunk_size` can take.
pub(crate) fn max_block_bytes(len: usize, topk: usize, chunk_size: usize) -> usize {
    let full = len / chunk_size;
    let rest = len % chunk_size;
    full * max_chunk_bytes(chunk_size, topk)
        + if rest > 0 {
            max_chunk_bytes(rest, topk)
        } else {
            0
        }
}

/// Appends bits LSB-first to a byte vector.
struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    bit: u32,
}

impl<'a> BitWriter<'a> {
    fn new(out: &'a mut Vec<u8>) -> Self {
        Self { out, bit: 8 }
    }

    fn put_bit(&mut self, one: bool) {
        if self.bit == 8 {
            self.out.push(0);
            self.bit = 0;
        }
        if one {
            let last = self.out.len() - 1;
            self.out[last] |= 1 << self.bit;
        }
        self.bit += 1;
    }

    fn put(&mut self, value: u32, bits: u32) {
        for b in 0..bits {
            self.put_bit((value >> b) & 1 == 1);
        }
    }
}

/// Reads bits LSB-first; `None` past the end of its bytes.
struct BitReader<'a> {
    bytes: &'a [u8],
    bit: usize,
}

impl BitReader<'_> {
    fn get_bit(&mut self) -> Option<bool> {
        let byte = self.bytes.get(self.bit / 8)?;
        let one = (byte >> (self.bit % 8)) & 1 == 1;
        self.bit += 1;
        Some(one)
    }

    fn get(&mut self, bits: u32) -> Option<u32> {
        let mut v = 0;
        for b in 0..bits {
            v |= u32::from(self.get_bit()?) << b;
        }
        Some(v)
    }

    /// Bytes consumed, the last one counted whole, if the padding bits of that byte are 0
    /// (given the scale, positions and codes, the block's bytes are unique; the decoded
    /// values alone do not fix them: code 0, a scale traded against its codes).
    fn finish(&self) -> Option<usize> {
        let used = self.bit.div_ceil(8);
        let pad = (8 - self.bit % 8) % 8;
        match self.bytes.get(self.bit / 8) {
            Some(byte) if pad > 0 && byte >> (8 - pad) != 0 => None,
            _ => Some(used),
        }
    }
}

/// Encodes `x` chunk by chunk, appending to `out` (at most
/// [`max_block_bytes`]`(x.len(), topk, chunk)` bytes).
///
/// # Errors
/// `Err(())` if `x` holds a NaN or an infinity.
pub(crate) fn encode_into(
    x: &[f32],
    chunk: usize,
    topk: usize,
    out: &mut Vec<u8>,
) -> Result<(), ()> {
    if !x.iter().all(|v| v.is_finite()) {
        return Err(());
    }
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
        out.extend_from_slice(&s.to_le_bytes());
        let mut w = BitWriter::new(out);
        for i in sel.iter() {
            let q = (f64::from(c[*i as usize]) * inv)
                .round_ties_even()
                .clamp(-7.0, 7.0);
            w.put((q as i32 + 8) as u32, 4);
        }
        let b = rice_bits(c.len(), k);
        let mut w = BitWriter::new(out);
        let mut next = 0u32;
        for i in sel.iter() {
            let gap = i - next;
            for _ in 0..gap >> b {
                w.put_bit(true);
            }
            w.put_bit(false);
            w.put(gap, b);
            next = i + 1;
        }
    }
    Ok(())
}

/// Inverse of [`encode_into`]: fills `out` (zeroed by the caller, one block of elements) from
/// `raw`, which must hold exactly the block's chunks.
///
/// # Errors
/// [`DecodeError::BadScale`] for a NaN, negative or overflowing scale; [`DecodeError::BadBlock`]
/// for a code nibble of 0, a position past the chunk, a chunk cut short, a padding bit that is
/// not 0, or bytes left over after the last chunk.
pub(crate) fn decode_into(
    raw: &[u8],
    chunk: usize,
    topk: usize,
    block: usize,
    out: &mut [f32],
) -> Result<(), DecodeError> {
    let bad = |reason: &str| DecodeError::BadBlock {
        block,
        reason: reason.into(),
    };
    let cut = || bad("sparse chunk cut short");
    let mut pos = 0;
    for o in out.chunks_mut(chunk) {
        let k = topk.min(o.len());
        let head = raw.get(pos..pos + 4 + k.div_ceil(2)).ok_or_else(cut)?;
        let s = f32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        // A scale above f32::MAX / 7 would decode ±7 to ±∞.
        if !(0.0..=f32::MAX / LEVELS).contains(&s) {
            return Err(DecodeError::BadScale { block });
        }
        pos += head.len();
        let mut codes = BitReader {
            bytes: &head[4..],
            bit: 0,
        };
        let mut gaps = BitReader {
            bytes: &raw[pos..],
            bit: 0,
        };
        let b = rice_bits(o.len(), k);
        let mut next = 0usize;
        for _ in 0..k {
            let mut high = 0usize;
            while gaps.get_bit().ok_or_else(cut)? {
                high += 1;
                // Stops a long run of ones at the chunk's end, not at the buffer's.
                if next + (high << b) >= o.len() {
                    return Err(bad("sparse position past the chunk"));
                }
            }
            let i = next + ((high << b) | gaps.get(b).ok_or_else(cut)? as usize);
            if i >= o.len() {
                return Err(bad("sparse position past the chunk"));
            }
            let q = codes.get(4).ok_or_else(cut)?;
            if q == 0 {
                return Err(bad("sparse code 0 is not a value"));
            }
            o[i] = (q as i32 - 8) as f32 * s;
            next = i + 1;
        }
        let padding = || bad("sparse padding bits are not 0");
        codes.finish().ok_or_else(padding)?;
        pos += gaps.finish().ok_or_else(padding)?;
    }
    if pos != raw.len() {
        return Err(bad("bytes left after the last sparse chunk"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(x: &[f32], chunk: usize, topk: usize) -> Vec<f32> {
        let mut raw = Vec::new();
        encode_into(x, chunk, topk, &mut raw).unwrap();
        assert!(raw.len() <= max_block_bytes(x.len(), topk, chunk));
        let mut out = vec![0f32; x.len()];
        decode_into(&raw, chunk, topk, 0, &mut out).unwrap();
        out
    }

    #[test]
    fn the_rice_parameter_is_the_mean_gap_rounded_down_to_a_power_of_two() {
        assert_eq!(rice_bits(4096, 128), 5);
        assert_eq!(rice_bits(4096, 64), 6);
        assert_eq!(rice_bits(4096, 100), 5);
        assert_eq!(rice_bits(16, 3), 2);
        assert_eq!(rice_bits(3, 2), 0);
        assert_eq!(rice_bits(4, 4), 0);
        assert_eq!(rice_bits(1, 1), 0);
    }

    #[test]
    fn the_worst_placed_positions_fit_the_bound() {
        // The last k positions of the chunk: the one long gap, all in unary quotients.
        for (n, k) in [(4096, 128), (4096, 1), (16, 3), (7, 7), (5, 2)] {
            let x: Vec<f32> = (0..n).map(|i| if i >= n - k { 1.0 } else { 0.0 }).collect();
            let mut raw = Vec::new();
            encode_into(&x, n, k, &mut raw).unwrap();
            assert!(raw.len() <= max_chunk_bytes(n, k), "{n} {k}");
            let mut out = vec![0f32; n];
            decode_into(&raw, n, k, 0, &mut out).unwrap();
            assert_eq!(out, x);
        }
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
    fn corrupt_positions_codes_and_padding_are_typed_errors() {
        let x = [1.0f32, 2.0, 3.0, 4.0];
        let mut raw = Vec::new();
        encode_into(&x, 4, 2, &mut raw).unwrap();
        // Scale 4/7, one byte of codes (3 → +5 = 0xd at index 2, 4 → +7 = 0xf at 3), one byte
        // of gaps with b = 1: gap 2 → quotient 1 ("1", "0"), low bit "0"; gap 0 → "0", "0".
        assert_eq!(raw[4], 0xfd);
        assert_eq!(raw[5], 0b0000_0001);
        let mut out = [0f32; 4];
        decode_into(&raw, 4, 2, 0, &mut out).unwrap();
        // Position 2 + a gap of 2: past the chunk.
        let mut past = raw.clone();
        past[5] = 0b0000_0101;
        assert!(matches!(
            decode_into(&past, 4, 2, 0, &mut out),
            Err(DecodeError::BadBlock { .. })
        ));
        // A run of ones to the end of the buffer: cut short, never a read past it.
        let mut ones = raw.clone();
        ones[5] = 0xff;
        assert!(decode_into(&ones, 4, 2, 0, &mut out).is_err());
        // A padding bit set; a byte after the last chunk.
        let mut padded = raw.clone();
        padded[5] |= 0x80;
        assert!(decode_into(&padded, 4, 2, 0, &mut out).is_err());
        let mut longer = raw.clone();
        longer.push(0);
        assert!(decode_into(&longer, 4, 2, 0, &mut out).is_err());
        let mut zero_code = raw.clone();
        zero_code[4] = 0xf0;
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
