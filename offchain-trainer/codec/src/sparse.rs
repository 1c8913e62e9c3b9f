//! Per-chunk top-k with 4-level values on the kept magnitudes' range and Golomb-coded
//! positions (the kernel of [`crate::Mode::SparseTopK`]).
//!
//! A chunk of `n ≤ chunk_size` elements keeps its `k = min(topk, n)` largest magnitudes
//! (ties: the lower index first, so the selection is a function of the values alone), stored
//! as
//! 1. two bfloat16 (little-endian u16, the high half of an f32's bits, so rounded toward
//!    zero: [`to_bf16`]): `lo = min|x_sel|` and `step = (max|x_sel| − lo) / 3`, the latter
//!    computed from the rounded `lo` (an f32 head would cost 4 bytes more per chunk, 2.7 % of
//!    a top-128 chunk, for levels that move by less than 2⁻⁷ of their value, far below half a
//!    step);
//! 2. one bit stream (LSB-first in each byte, padded with 0 to a byte) holding, per kept
//!    element in ascending index order:
//!    * its position gap (`g_0 = i_0`, `g_j = i_j − i_{j−1} − 1`) Golomb-coded with the
//!      chunk's [`GapCode`] parameter `m`: `⌊g / m⌋` one-bits and a zero-bit, then `g mod m`
//!      in truncated binary, most significant bit first;
//!    * its sign bit (1 = negative);
//!    * its level `j = round_half_even((|x| − lo) / step)` in 0..=3 in truncated unary
//!      (`0`, `10`, `110`, `111`). It decodes to `±(lo + j·step)` ([`level`], in f32).
//!
//! Everything not selected decodes to 0. The kept magnitudes of a chunk sit in a narrow band
//! (the top 3 % of a Gaussian chunk lie between ≈ 2.2σ and 3.6σ), so 4 levels on
//! `[lo, max]` have the step that 8 levels on `[0, max]` had (mode 3's 4-bit codes used about
//! half their levels): relative L2 error of the kept values 0.38 % for both at top-128 of
//! 4096 on Gaussian data. The levels fall off like the tail (Gaussian top-128: 51 %, 38 %,
//! 8 %, 2 %), so unary takes ≈ 1.6 bits where the entropy is 1.4 (heavier tails: 1.2 and
//! 0.9). Gaps between the top-k of `n` are close to geometric with `p = k / n`, for which a
//! Golomb code with `m ≈ ln 2 / p` is the optimal prefix code (Golomb, "Run-length
//! encodings", IEEE Trans. IT 1966; Gallager and Van Voorhis, IEEE Trans. IT 1975): ≈ 6.5 bits
//! per position at k = 128 of 4096 where a fixed-width index costs 12. A chunk is
//! variable-length, at most [`max_chunk_bytes`]; the decoder inflates a block into a buffer
//! of [`max_block_bytes`] and requires the chunks to fill exactly what was inflated.

use crate::DecodeError;

/// The highest level: a kept magnitude decodes to `lo + j·step`, `j ∈ 0..=3`.
const TOP_LEVEL: u32 = 3;
/// Most bits a kept value takes after its gap: its sign and the level `111`.
const MAX_VALUE_BITS: usize = 4;
/// Bytes of a chunk's head: `lo` and `step`, one bfloat16 each.
const HEAD_BYTES: usize = 4;

/// `x` as bfloat16 bits: the high 16 bits of its f32 bits (rounded toward zero; NaN and ±∞
/// stay NaN and ±∞).
fn to_bf16(x: f32) -> u16 {
    (x.to_bits() >> 16) as u16
}

/// A bfloat16 widened to f32 (exact).
fn from_bf16(b: u16) -> f32 {
    f32::from_bits(u32::from(b) << 16)
}

/// A [`DecodeError::BadBlock`] reason: the bit stream ends before the chunk does.
const CUT: &str = "sparse chunk cut short";
/// A [`DecodeError::BadBlock`] reason: a position gap reaches past the chunk.
const PAST: &str = "sparse position past the chunk";

/// The magnitude level `j` of a chunk decodes to: `lo + j·step`, in f32 (the one formula the
/// encoder's error feedback and every decoder share).
fn level(lo: f32, step: f32, j: u32) -> f32 {
    lo + j as f32 * step
}

/// The level the encoder gives magnitude `a`: `round_half_even((a − lo) / step)` in
/// 0..=[`TOP_LEVEL`] (0 when `step` is 0), in f64 so a subnormal step loses no precision in
/// the quotient.
fn level_of(a: f32, lo: f32, step: f32) -> u32 {
    if step > 0.0 {
        ((f64::from(a) - f64::from(lo)) / f64::from(step))
            .round_ties_even()
            .clamp(0.0, f64::from(TOP_LEVEL)) as u32
    } else {
        0
    }
}

/// The Golomb code of one chunk's position gaps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct GapCode {
    /// The divisor: a gap `g` is `⌊g / m⌋` in unary, then `g mod m`.
    m: usize,
    /// `⌈log₂ m⌉`: a remainder takes `c − 1` or `c` bits.
    c: u32,
    /// `2^c − m`: remainders below it take `c − 1` bits.
    u: usize,
}

impl GapCode {
    /// The code for `k ≥ 1` positions among `n ≥ k`: `m = max(1, round(0.693 · n / k))`, in
    /// integers ≈ the optimum `⌈log(2 − p) / −log(1 − p)⌉ ≈ ln 2 / p` for geometric gaps with
    /// `p = k / n` (Gallager and Van Voorhis 1975; equal to it at 128 or 64 of 4096: 22, 44;
    /// within one where p is large, e.g. 4 against 3 at 3 of 16).
    fn new(n: usize, k: usize) -> Self {
        let m = ((n * 693 + k * 500) / (k * 1000)).max(1);
        let c = m.next_power_of_two().trailing_zeros();
        Self {
            m,
            c,
            u: (1 << c) - m,
        }
    }

    /// Most bits `k` gaps summing to at most `n − k` take: `(n − k) / m` quotient ones in
    /// all, and per gap a zero-bit and at most `c` remainder bits.
    fn max_bits(&self, n: usize, k: usize) -> usize {
        (n - k) / self.m + k * (1 + self.c as usize)
    }

    fn put(&self, w: &mut BitWriter, g: usize) {
        w.put_unary(g / self.m, usize::MAX);
        let r = g % self.m;
        if r < self.u {
            w.put_msb_first(r, self.c - 1);
        } else if self.c > 0 {
            w.put_msb_first(r + self.u, self.c);
        }
    }

    /// Reads one gap that must be below `room` (the elements left in the chunk).
    ///
    /// # Errors
    /// The reason, if the gap reaches past the chunk (a run of ones is cut there, never at
    /// the buffer's end) or the stream ends first.
    fn get(&self, bits: &mut BitReader, room: usize) -> Result<usize, &'static str> {
        let mut q = 0;
        while bits.get_bit().ok_or(CUT)? {
            q += 1;
            if q * self.m >= room {
                return Err(PAST);
            }
        }
        // Every remainder code is valid: x in u..2^(c−1) extends to 2x + bit − u in u..m.
        let r = match self.c {
            0 => 0,
            c => match bits.get_msb_first(c - 1).ok_or(CUT)? {
                x if x < self.u => x,
                x => ((x << 1) | usize::from(bits.get_bit().ok_or(CUT)?)) - self.u,
            },
        };
        match q * self.m + r {
            g if g < room => Ok(g),
            _ => Err(PAST),
        }
    }
}

/// Most bytes one chunk of `n` elements can take: the head, the gaps at their longest, and
/// `k` values at their longest.
pub(crate) fn max_chunk_bytes(n: usize, topk: usize) -> usize {
    let k = topk.min(n);
    HEAD_BYTES + (GapCode::new(n, k).max_bits(n, k) + k * MAX_VALUE_BITS).div_ceil(8)
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

    /// `value` one-bits, then a zero-bit unless `value` is `max` (truncated unary).
    fn put_unary(&mut self, value: usize, max: usize) {
        for _ in 0..value {
            self.put_bit(true);
        }
        if value < max {
            self.put_bit(false);
        }
    }

    fn put_msb_first(&mut self, value: usize, bits: u32) {
        for b in (0..bits).rev() {
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

    /// Inverse of [`BitWriter::put_unary`] for values up to `max`.
    fn get_unary(&mut self, max: usize) -> Option<usize> {
        let mut v = 0;
        while v < max && self.get_bit()? {
            v += 1;
        }
        Some(v)
    }

    fn get_msb_first(&mut self, bits: u32) -> Option<usize> {
        let mut v = 0;
        for _ in 0..bits {
            v = (v << 1) | usize::from(self.get_bit()?);
        }
        Some(v)
    }

    /// Bytes consumed, the last one counted whole, if the padding bits of that byte are 0
    /// (given `lo`, `step`, the positions, signs and levels, the block's bytes are unique; the
    /// decoded values alone do not fix them: a negative zero, `lo` traded against `step`).
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
        let (lo, hi) = sel.iter().fold((f32::INFINITY, 0f32), |(lo, hi), i| {
            let a = c[*i as usize].abs();
            (lo.min(a), hi.max(a))
        });
        let lo_bits = to_bf16(lo);
        let lo = from_bf16(lo_bits);
        let mut step_bits = to_bf16((hi - lo) / TOP_LEVEL as f32);
        // The decoder refuses a top level past f32::MAX. Rounded toward zero, the step keeps
        // it at or below the chunk's largest magnitude but for the f32 rounding of
        // (hi − lo) / 3; this guard makes sure that finite input never gives an undecodable
        // payload (no input reaching it is known).
        while !level(lo, from_bf16(step_bits), TOP_LEVEL).is_finite() {
            step_bits -= 1;
        }
        let step = from_bf16(step_bits);
        out.extend_from_slice(&lo_bits.to_le_bytes());
        out.extend_from_slice(&step_bits.to_le_bytes());
        let gaps = GapCode::new(c.len(), k);
        let mut w = BitWriter::new(out);
        let mut next = 0u32;
        for i in sel.iter() {
            gaps.put(&mut w, (i - next) as usize);
            let x = c[*i as usize];
            w.put_bit(x < 0.0);
            w.put_unary(level_of(x.abs(), lo, step) as usize, TOP_LEVEL as usize);
            next = i + 1;
        }
    }
    Ok(())
}

/// Inverse of [`encode_into`]: fills `out` (zeroed by the caller, one block of elements) from
/// `raw`, which must hold exactly the block's chunks.
///
/// # Errors
/// [`DecodeError::BadScale`] for a NaN, negative or infinite `lo` or `step`, or a top level
/// `lo + 3·step` that overflows f32; [`DecodeError::BadBlock`] for a position past the chunk,
/// a chunk cut short, a padding bit that is not 0, or bytes left over after the last chunk.
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
    let cut = || bad(CUT);
    let mut pos = 0;
    for o in out.chunks_mut(chunk) {
        let k = topk.min(o.len());
        let head = raw.get(pos..pos + HEAD_BYTES).ok_or_else(cut)?;
        let lo = from_bf16(u16::from_le_bytes([head[0], head[1]]));
        let step = from_bf16(u16::from_le_bytes([head[2], head[3]]));
        if !(lo >= 0.0 && step >= 0.0 && level(lo, step, TOP_LEVEL).is_finite()) {
            return Err(DecodeError::BadScale { block });
        }
        pos += HEAD_BYTES;
        let mut bits = BitReader {
            bytes: &raw[pos..],
            bit: 0,
        };
        let gaps = GapCode::new(o.len(), k);
        let mut next = 0usize;
        for _ in 0..k {
            let i = next + gaps.get(&mut bits, o.len() - next).map_err(bad)?;
            let negative = bits.get_bit().ok_or_else(cut)?;
            let j = bits.get_unary(TOP_LEVEL as usize).ok_or_else(cut)?;
            let m = level(lo, step, j as u32);
            o[i] = if negative { -m } else { m };
            next = i + 1;
        }
        pos += bits
            .finish()
            .ok_or_else(|| bad("sparse padding bits are not 0"))?;
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
    fn the_golomb_divisor_is_ln_2_times_the_mean_gap() {
        let m = |n, k| GapCode::new(n, k).m;
        // ≈ ⌈log(2 − p) / −log(1 − p)⌉: 22 (p = 1/32), 44 (1/64), 2 (1/3), 1 (p ≥ 0.46).
        assert_eq!((m(4096, 128), m(4096, 64), m(4096, 100)), (22, 44, 28));
        assert_eq!(
            (m(16, 3), m(3, 1), m(3, 2), m(4, 4), m(1, 1)),
            (4, 2, 1, 1, 1)
        );
        assert_eq!(GapCode::new(4096, 128), GapCode { m: 22, c: 5, u: 10 });
        assert_eq!(GapCode::new(16, 3), GapCode { m: 4, c: 2, u: 0 });
    }

    #[test]
    fn every_gap_below_the_room_round_trips_through_its_code() {
        for (n, k) in [(4096, 128), (100, 7), (16, 3), (5, 2), (1, 1)] {
            let code = GapCode::new(n, k);
            let mut raw = Vec::new();
            let mut w = BitWriter::new(&mut raw);
            for g in 0..n {
                code.put(&mut w, g);
            }
            let mut r = BitReader {
                bytes: &raw,
                bit: 0,
            };
            for g in 0..n {
                assert_eq!(code.get(&mut r, n), Ok(g), "{n} {k}");
            }
            assert_eq!(r.finish(), Some(raw.len()));
        }
    }

    #[test]
    fn the_worst_placed_positions_fit_the_bound() {
        // The last k positions of the chunk (the one long gap, all in unary quotients), all
        // but the first at the top level (the longest values).
        for (n, k) in [(4096, 128), (4096, 1), (16, 3), (7, 7), (5, 2), (100, 7)] {
            let x: Vec<f32> = (0..n)
                .map(|i| match i {
                    i if i == n - k => 1.0,
                    i if i > n - k => -4.0,
                    _ => 0.0,
                })
                .collect();
            let mut raw = Vec::new();
            encode_into(&x, n, k, &mut raw).unwrap();
            assert!(raw.len() <= max_chunk_bytes(n, k), "{n} {k}");
            // Where m is a power of two (every remainder c bits), the bound is reached.
            if n <= 16 {
                assert_eq!(raw.len(), max_chunk_bytes(n, k), "{n} {k}");
            }
            let mut out = vec![0f32; n];
            decode_into(&raw, n, k, 0, &mut out).unwrap();
            assert_eq!(out, x);
        }
    }

    #[test]
    fn keeps_the_largest_magnitudes_and_breaks_ties_by_index() {
        let x = [0.1f32, -7.0, 0.5, 4.0, -4.0, 0.0, 7.0, 1.0];
        // Top 3: |−7| at 1, |7| at 6 (tie: index 1 first), then |4| at 3 (before 4); lo 4,
        // step 1.
        assert_eq!(
            roundtrip(&x, 8, 3),
            vec![0.0, -7.0, 0.0, 4.0, 0.0, 0.0, 7.0, 0.0]
        );
    }

    /// Half a step of the kept magnitudes' range, plus what rounding `lo` and `step` toward
    /// zero to bfloat16 (< 2⁻⁷ relative) takes off the top level.
    fn half_step(kept: &[f32]) -> f32 {
        let hi = kept.iter().fold(0f32, |m, v| m.max(v.abs()));
        let lo = kept.iter().fold(f32::INFINITY, |m, v| m.min(v.abs()));
        (hi - lo) / 6.0 + hi / 64.0
    }

    #[test]
    fn a_short_last_chunk_and_k_above_the_chunk_keep_everything() {
        let x: Vec<f32> = (0..10).map(|i| i as f32 * 1.37 - 3.0).collect();
        // chunk 4, topk 8: every element is kept, each within half a step of its chunk.
        let y = roundtrip(&x, 4, 8);
        for (cx, cy) in x.chunks(4).zip(y.chunks(4)) {
            for (a, b) in cx.iter().zip(cy) {
                assert!((a - b).abs() <= half_step(cx), "{a} vs {b}");
                assert_eq!(a.is_sign_negative(), b.is_sign_negative(), "{a} vs {b}");
            }
        }
    }

    #[test]
    fn subnormal_chunks_keep_their_values() {
        // lo 0, step 10⁻³⁹: subnormal levels, each value within half a step.
        let x = [1e-39f32, -2e-39, 0.0, 3e-39];
        let y = roundtrip(&x, 4, 4);
        for (a, b) in x.iter().zip(&y) {
            assert!((a - b).abs() <= 0.51e-39, "{a:e} vs {b:e}");
        }
    }

    #[test]
    fn chunks_near_f32_max_decode_to_finite_values() {
        // The top level stays finite (a BadScale for the decoder otherwise).
        for x in [[f32::MAX, 2f32.powi(105)], [f32::MAX, -1.0]] {
            let y = roundtrip(&x, 2, 2);
            assert!(y.iter().all(|v| v.is_finite()), "{y:?}");
            assert!(
                y[0] > f32::MAX * 0.99 && y[1].signum() == x[1].signum(),
                "{y:?}"
            );
        }
    }

    #[test]
    fn corrupt_positions_levels_and_padding_are_typed_errors() {
        let x = [1.0f32, 2.0, 3.0, 6.0];
        let mut raw = Vec::new();
        encode_into(&x, 4, 2, &mut raw).unwrap();
        // lo 3 (bfloat16 0x4040), step 1 (0x3f80), then with m = 1 (unary gaps): gap 2
        // "110", +, level 0 "0"; gap 0 "0", +, level 3 "111": 10 bits.
        assert_eq!(raw[..4], [0x40, 0x40, 0x80, 0x3f]);
        assert_eq!(raw[4..], [0b1000_0011, 0b0000_0011]);
        let mut out = [0f32; 4];
        decode_into(&raw, 4, 2, 0, &mut out).unwrap();
        assert_eq!(out, [0.0, 0.0, 3.0, 6.0]);
        // A first gap of 4: past the chunk.
        let mut past = raw.clone();
        past[4] = 0b0000_1111;
        assert!(matches!(
            decode_into(&past, 4, 2, 0, &mut out),
            Err(DecodeError::BadBlock { .. })
        ));
        // A run of ones to the end of the buffer: cut at the chunk, never a read past it.
        let mut ones = raw.clone();
        ones[4] = 0xff;
        ones[5] = 0xff;
        let bad_block = |raw: &[u8]| {
            matches!(
                decode_into(raw, 4, 2, 0, &mut [0f32; 4]),
                Err(DecodeError::BadBlock { .. })
            )
        };
        assert!(bad_block(&ones));
        // A padding bit set; a byte after the last chunk; the last byte missing.
        let mut padded = raw.clone();
        padded[5] |= 0x80;
        assert!(bad_block(&padded));
        let mut longer = raw.clone();
        longer.push(0);
        assert!(bad_block(&longer));
        assert!(bad_block(&raw[..5]));
        // lo or step NaN, negative, infinite, or a top level past f32::MAX.
        for (lo, step) in [
            (f32::NAN, 1.0),
            (1.0, f32::NAN),
            (-1.0, 1.0),
            (1.0, -1.0),
            (f32::INFINITY, 0.0),
            (0.0, f32::MAX / 2.0),
        ] {
            let mut head = raw.clone();
            head[..2].copy_from_slice(&to_bf16(lo).to_le_bytes());
            head[2..4].copy_from_slice(&to_bf16(step).to_le_bytes());
            assert_eq!(
                decode_into(&head, 4, 2, 0, &mut [0f32; 4]),
                Err(DecodeError::BadScale { block: 0 }),
                "{lo} {step}"
            );
        }
    }
}
