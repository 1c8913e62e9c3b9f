//! Decoding side: every size is checked against [`DecodeLimits`] before allocation.

use rayon::prelude::*;

use crate::format::{read_header, Reader, CHECKSUM_LEN};
use crate::{quant, sparse, DecodeError, Header, Mode};

/// Upper bounds a receiver sets on what it is willing to decode. A payload declaring more is
/// rejected before any buffer proportional to the declared size is allocated, so a decode
/// allocates at most `max_elems · 4` bytes of output plus one block of scratch per thread.
#[derive(Clone, Copy, Debug)]
pub struct DecodeLimits {
    /// Most input bytes accepted.
    pub max_input_bytes: usize,
    /// Most tensors.
    pub max_tensors: u32,
    /// Highest tensor rank.
    pub max_rank: u8,
    /// Most elements over all tensors (so output ≤ 4·max_elems bytes).
    pub max_elems: u64,
    /// Largest block (elements per zstd frame).
    pub max_block_elems: u32,
}

impl DecodeLimits {
    /// Limits for a model of `params` parameters in at most `tensors` tensors.
    pub fn for_model(params: u64, tensors: u32) -> Self {
        Self {
            max_input_bytes: usize::try_from(params.saturating_mul(5).saturating_add(1 << 20))
                .unwrap_or(usize::MAX),
            max_tensors: tensors,
            max_rank: 8,
            max_elems: params,
            max_block_elems: crate::MAX_BLOCK_ELEMS,
        }
    }
}

/// A decoded payload: one row-major f32 vector per tensor, with its shape.
#[derive(Clone, Debug, PartialEq)]
pub struct Decoded {
    /// Header fields and shapes.
    pub header: Header,
    /// Elements of each tensor, in the payload's order.
    pub tensors: Vec<Vec<f32>>,
}

fn split_checksum<'a>(bytes: &'a [u8], limits: &DecodeLimits) -> Result<&'a [u8], DecodeError> {
    if bytes.len() > limits.max_input_bytes {
        return Err(DecodeError::LimitExceeded {
            what: "input bytes",
            value: bytes.len() as u64,
            limit: limits.max_input_bytes as u64,
        });
    }
    if bytes.len() < 4 || bytes[..4] != crate::MAGIC {
        return Err(if bytes.len() < 4 {
            DecodeError::Truncated {
                offset: 0,
                needed: 4 - bytes.len(),
            }
        } else {
            DecodeError::BadMagic
        });
    }
    let split = bytes
        .len()
        .checked_sub(CHECKSUM_LEN)
        .ok_or(DecodeError::Truncated {
            offset: bytes.len(),
            needed: CHECKSUM_LEN,
        })?;
    let (body, sum) = bytes.split_at(split);
    if blake3::hash(body).as_bytes() != sum {
        return Err(DecodeError::ChecksumMismatch);
    }
    Ok(body)
}

/// Reads and validates the header only (after checking size limit and checksum).
///
/// # Errors
/// As [`decode`], for the header part.
pub fn peek_header(bytes: &[u8], limits: &DecodeLimits) -> Result<Header, DecodeError> {
    read_header(split_checksum(bytes, limits)?, limits)
}

struct Frame<'a> {
    len: usize,
    bytes: &'a [u8],
}

/// A checked payload whose tensors decode one at a time: the header and the frame index are
/// parsed (and the checksum verified) once by [`Decoder::new`]; [`Decoder::tensor`] then
/// inflates one tensor, so a caller combining N payloads tensor by tensor holds N tensors at a
/// time, not N models.
pub struct Decoder<'a> {
    header: Header,
    frames: Vec<Frame<'a>>,
    /// Index of each tensor's first frame in `frames` (plus one past the last).
    first: Vec<usize>,
}

impl<'a> Decoder<'a> {
    /// Verifies size, checksum and header of `bytes` against `limits` and indexes its frames.
    ///
    /// # Errors
    /// As [`decode`], except for errors inside a frame (reported by [`Decoder::tensor`]).
    pub fn new(bytes: &'a [u8], limits: &DecodeLimits) -> Result<Self, DecodeError> {
        let body = split_checksum(bytes, limits)?;
        let header = read_header(body, limits)?;
        let mut r = Reader::new(body);
        r.take(header.len)?;
        // Walk the frame prefixes first (cheap, no allocation beyond the frame list).
        let block_elems = header.block_elems as usize;
        let mut frames = Vec::new();
        let mut first = Vec::with_capacity(header.shapes.len() + 1);
        for shape in &header.shapes {
            first.push(frames.len());
            let n: usize = shape.iter().product();
            let mut start = 0;
            while start < n {
                let len = block_elems.min(n - start);
                let flen = r.u32()? as usize;
                let bytes = r.take(flen)?;
                frames.push(Frame { len, bytes });
                start += len;
            }
        }
        first.push(frames.len());
        if r.remaining() != 0 {
            return Err(DecodeError::TrailingBytes(r.remaining()));
        }
        Ok(Self {
            header,
            frames,
            first,
        })
    }

    /// The header (mode, sizes, shapes).
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Decodes tensor `t` (row-major f32, `shapes[t]`'s product of elements), its frames in
    /// parallel on the current rayon pool.
    ///
    /// # Errors
    /// [`DecodeError::BadBlock`] / [`DecodeError::BadScale`] for a frame of this tensor;
    /// [`DecodeError::Inconsistent`] if `t` is not a tensor of the payload.
    pub fn tensor(&self, t: usize) -> Result<Vec<f32>, DecodeError> {
        let shape = self
            .header
            .shapes
            .get(t)
            .ok_or(DecodeError::Inconsistent("no such tensor"))?;
        let mut out = vec![0f32; shape.iter().product::<usize>()];
        let (lo, hi) = (self.first[t], self.first[t + 1]);
        let mut jobs = Vec::with_capacity(hi - lo);
        let mut rest = out.as_mut_slice();
        for (i, f) in self.frames[lo..hi].iter().enumerate() {
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(f.len);
            rest = tail;
            jobs.push((lo + i, f, head));
        }
        jobs.into_par_iter()
            .try_for_each(|(i, f, out)| decode_frame(&self.header, i, f, out))?;
        Ok(out)
    }
}

/// Inflates frame `i` into `out` (exactly its block's elements).
fn decode_frame(
    header: &Header,
    i: usize,
    f: &Frame<'_>,
    out: &mut [f32],
) -> Result<(), DecodeError> {
    let chunk = header.chunk_size as usize;
    let topk = header.topk as usize;
    // (bytes, whether the block has exactly that many): sparse blocks are variable-length
    // (Golomb-coded positions), bounded by their largest size, and the sparse decoder requires
    // its chunks to fill exactly what was inflated.
    let (expected, exact) = match header.mode {
        Mode::Int8Absmax => (f.len.div_ceil(chunk) * 4 + f.len, true),
        Mode::SparseTopK => (sparse::max_block_bytes(f.len, topk, chunk), false),
        Mode::Fp32 => (f.len * 4, true),
    };
    // An output slice of exactly the block's size (at most it, sparse): a frame that inflates
    // to more fails inside zstd instead of allocating (decompression-bomb bound).
    let mut raw = vec![0u8; expected];
    let got = zstd::bulk::decompress_to_buffer(f.bytes, raw.as_mut_slice()).map_err(|e| {
        DecodeError::BadBlock {
            block: i,
            reason: format!("zstd: {e}"),
        }
    })?;
    if exact && got != expected {
        return Err(DecodeError::BadBlock {
            block: i,
            reason: format!("decompressed {got} bytes, expected {expected}"),
        });
    }
    match header.mode {
        Mode::Int8Absmax => {
            let (s, codes) = raw.split_at(expected - f.len);
            let scales: Vec<f32> = s
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            // |code| ≤ 128 (the encoder writes ±127, a forged byte may hold −128): a
            // scale up to f32::MAX / 128 (exact, a power of two) keeps every product
            // finite, where f32::MAX / 127 let 127 · s round to +∞.
            if scales
                .iter()
                .any(|s| !(*s >= 0.0 && *s <= f32::MAX / 128.0))
            {
                return Err(DecodeError::BadScale { block: i });
            }
            quant::dequantize(&scales, codes, chunk, out);
        }
        Mode::SparseTopK => sparse::decode_into(&raw[..got], chunk, topk, i, out)?,
        Mode::Fp32 => {
            for (y, b) in out.iter_mut().zip(raw.chunks_exact(4)) {
                *y = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
            if out.iter().any(|v| !v.is_finite()) {
                return Err(DecodeError::BadBlock {
                    block: i,
                    reason: "non-finite element".into(),
                });
            }
        }
    }
    Ok(())
}

/// Decodes a payload produced by [`crate::encode`].
///
/// # Errors
/// A [`DecodeError`] for: input over `limits.max_input_bytes`, wrong magic/version/mode,
/// checksum mismatch, declared counts over the limits, truncated or trailing bytes, a zstd frame
/// that is corrupt or does not decompress to exactly its block's size (sparse: to at most its
/// largest size, filled exactly by its chunks), or a NaN/∞/negative scale.
pub fn decode(bytes: &[u8], limits: &DecodeLimits) -> Result<Decoded, DecodeError> {
    let d = Decoder::new(bytes, limits)?;
    // Tensors in parallel, each its frames in parallel: every frame of the payload at once.
    let tensors = (0..d.header.shapes.len())
        .into_par_iter()
        .map(|t| d.tensor(t))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Decoded {
        header: d.header,
        tensors,
    })
}
