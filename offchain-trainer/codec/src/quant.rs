//! Per-chunk absmax int8 quantization (the kernel of [`crate::Mode::Int8Absmax`]).

/// Adding then subtracting 1.5·2²³ rounds an f32 of magnitude < 2²² to the nearest integer,
/// ties to even, with plain SSE2 arithmetic (no libm call, vectorizes).
const ROUND_MAGIC: f32 = 12_582_912.0;

/// Quantizes `x` chunk by chunk: for each chunk of `chunk` elements (the last may be shorter)
/// appends its f32 scale (little-endian) to `scales` and its `i8` codes to `codes`.
/// `x` must be finite (checked by the caller).
pub(crate) fn quantize(x: &[f32], chunk: usize, scales: &mut Vec<u8>, codes: &mut Vec<u8>) {
    for c in x.chunks(chunk) {
        let absmax = c.iter().fold(0f32, |m, v| m.max(v.abs()));
        let scale = absmax / 127.0;
        scales.extend_from_slice(&scale.to_le_bytes());
        let inv = if absmax > 0.0 { 127.0 / absmax } else { 0.0 };
        codes.extend(c.iter().map(|v| {
            let r = ((v * inv).clamp(-127.0, 127.0) + ROUND_MAGIC) - ROUND_MAGIC;
            (r as i8) as u8
        }));
    }
}

/// Inverse of [`quantize`]: writes `codes[i] · scale(chunk of i)` into `out`
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

    #[test]
    fn rounds_half_to_even_and_saturates() {
        let x = [127.0f32, -127.0, 0.5, 1.5, 2.5, -0.5, 63.49, 0.0];
        let (mut s, mut q) = (Vec::new(), Vec::new());
        quantize(&x, 8, &mut s, &mut q);
        let codes: Vec<i8> = q.iter().map(|b| *b as i8).collect();
        assert_eq!(codes, vec![127, -127, 0, 2, 2, 0, 63, 0]);
        assert_eq!(f32::from_le_bytes([s[0], s[1], s[2], s[3]]), 1.0);
    }

    #[test]
    fn zero_chunk_decodes_to_zero() {
        let (mut s, mut q) = (Vec::new(), Vec::new());
        quantize(&[0.0; 5], 4, &mut s, &mut q);
        assert_eq!(s.len(), 8);
        let scales: Vec<f32> = s.chunks(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        let mut out = [1.0f32; 5];
        dequantize(&scales, &q, 4, &mut out);
        assert_eq!(out, [0.0; 5]);
    }
}
