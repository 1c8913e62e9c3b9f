//! Per-chunk absmax int8 quantization (the kernel of [`crate::Mode::Int8Absmax`]).
//!
//! Written for the autovectorizer on baseline x86-64 (SSE2) and aarch64: fixed-width lanes,
//! `if a > b` maxima (maxps), and the float-to-int conversion done by the rounding constant
//! itself, so no saturating-cast fix-ups stay in the loop.

/// Adding 1.5·2²³ to an f32 of magnitude < 2²² rounds it to the nearest integer (ties to even)
/// and leaves that integer, in two's complement, in the low mantissa bits.
const ROUND_MAGIC: f32 = 12_582_912.0;
const LANES: usize = 16;

/// max |x| over a slice, or `None` if it holds a NaN or an infinity (one pass for both).
fn absmax(x: &[f32]) -> Option<f32> {
    let mut acc = [0f32; LANES];
    // v − v is 0 for finite v and NaN for NaN or ±∞; NaN survives the sum.
    let mut poison = [0f32; LANES];
    let mut it = x.chunks_exact(LANES);
    for c in &mut it {
        for ((a, p), v) in acc.iter_mut().zip(poison.iter_mut()).zip(c) {
            #[allow(clippy::eq_op, reason = "v − v flags NaN and ±∞ without a branch")]
            {
                *p += v - v;
            }
            let v = v.abs();
            *a = if v > *a { v } else { *a };
        }
    }
    let mut m = 0f32;
    let mut p = poison.iter().sum::<f32>();
    for v in it.remainder().iter().chain(&acc) {
        #[allow(clippy::eq_op, reason = "v − v flags NaN and ±∞ without a branch")]
        {
            p += v - v;
        }
        m = if v.abs() > m { v.abs() } else { m };
    }
    (p == 0.0).then_some(m)
}

/// Quantizes `x` chunk by chunk into `out`, which must hold exactly `n_chunks · 4 + x.len()`
/// bytes: first every chunk's f32 scale (little-endian), then the `i8` codes.
///
/// # Errors
/// `Err(())` if `x` holds a NaN or an infinity (`out` is then partly written).
pub(crate) fn quantize_into(x: &[f32], chunk: usize, out: &mut [u8]) -> Result<(), ()> {
    let n_chunks = x.len().div_ceil(chunk);
    let (scales, codes) = out.split_at_mut(n_chunks * 4);
    for ((c, s), q) in x
        .chunks(chunk)
        .zip(scales.chunks_exact_mut(4))
        .zip(codes.chunks_mut(chunk))
    {
        let m = absmax(c).ok_or(())?;
        s.copy_from_slice(&(m / 127.0).to_le_bytes());
        let inv = if m > 0.0 { 127.0 / m } else { 0.0 };
        for (o, v) in q.iter_mut().zip(c) {
            // |v · inv| ≤ 127 (up to one rounding); the clamp keeps it so.
            let t = v * inv;
            #[allow(
                clippy::manual_clamp,
                reason = "branch-free min/max that the compiler vectorizes"
            )]
            let t = if t > 127.0 {
                127.0
            } else if t < -127.0 {
                -127.0
            } else {
                t
            };
            *o = (t + ROUND_MAGIC).to_bits() as u8;
        }
    }
    Ok(())
}

/// Inverse of [`quantize_into`]: writes `codes[i] · scale(chunk of i)` into `out`
/// (`out.len() == codes.len()`, `scales` one f32 per chunk).
pub(crate) fn dequantize(scales: &[f32], codes: &[u8], chunk: usize, out: &mut [f32]) {
    for ((o, q), s) in out.chunks_mut(chunk).zip(codes.chunks(chunk)).zip(scales) {
        for (y, c) in o.iter_mut().zip(q) {
            *y = f32::from(*c as i8) * s;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quantize(x: &[f32], chunk: usize) -> (Vec<f32>, Vec<i8>) {
        let n = x.len().div_ceil(chunk);
        let mut out = vec![0u8; n * 4 + x.len()];
        quantize_into(x, chunk, &mut out).unwrap();
        let (s, q) = out.split_at(n * 4);
        (
            s.chunks(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            q.iter().map(|b| *b as i8).collect(),
        )
    }

    #[test]
    fn rounds_half_to_even_and_saturates() {
        let x = [
            127.0f32, -127.0, 0.5, 1.5, 2.5, -0.5, 63.49, 0.0, -1.5, -2.5,
        ];
        let (s, q) = quantize(&x, 16);
        assert_eq!(q, vec![127, -127, 0, 2, 2, 0, 63, 0, -2, -2]);
        assert_eq!(s, vec![1.0]);
    }

    #[test]
    fn absmax_matches_the_scalar_definition_on_every_length() {
        for n in 0..70usize {
            let x: Vec<f32> = (0..n)
                .map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.5)
                .collect();
            let want = x.iter().fold(0f32, |m, v| m.max(v.abs()));
            assert_eq!(absmax(&x), Some(want), "n = {n}");
            for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
                for at in [0, n / 2, n.saturating_sub(1)] {
                    if n > 0 {
                        let mut y = x.clone();
                        y[at] = bad;
                        assert_eq!(absmax(&y), None, "n = {n}, {bad} at {at}");
                    }
                }
            }
        }
    }

    #[test]
    fn zero_chunk_decodes_to_zero() {
        let (s, q) = quantize(&[0.0; 5], 4);
        assert_eq!(s.len(), 2);
        let mut out = [1.0f32; 5];
        let codes: Vec<u8> = q.iter().map(|c| *c as u8).collect();
        dequantize(&s, &codes, 4, &mut out);
        assert_eq!(out, [0.0; 5]);
    }
}
