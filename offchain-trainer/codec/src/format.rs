//! The version-1 header: layout constants, writing and bounded parsing.

use crate::{DecodeError, DecodeLimits};

/// First four bytes of every payload.
pub const MAGIC: [u8; 4] = *b"SYNG";
/// The format version this crate writes and reads.
pub const FORMAT_VERSION: u8 = 1;
/// Bytes of the blake3 trailer.
pub(crate) const CHECKSUM_LEN: usize = 32;
/// Bytes of a block's frame-length prefix.
pub(crate) const FRAME_PREFIX: usize = 4;

/// How tensor elements are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Raw little-endian f32 (4 bytes per element before zstd): the uncompressed baseline.
    Fp32,
    /// Per-chunk absmax int8 (1 byte per element + one f32 scale per chunk, before zstd).
    Int8Absmax,
    /// Per-chunk top-k with 4-level values: per chunk two bfloat16 (`lo`, `step`), then per kept
    /// element a Golomb-coded position gap, a sign bit and a truncated-unary level on
    /// `lo + {0, 1, 2, 3}·step`;
    /// the rest decodes to 0. Lossy by design: pair it with error feedback
    /// (`synod_diloco::ErrorFeedback`). Mode byte 4. Mode bytes 2 (fixed-width indices, 4-bit
    /// codes on `[−max, max]`) and 3 (Rice-coded gaps, 4-bit codes) are older sparse formats:
    /// both are refused.
    SparseTopK,
}

impl Mode {
    pub(crate) fn code(self) -> u8 {
        match self {
            Mode::Fp32 => 0,
            Mode::Int8Absmax => 1,
            Mode::SparseTopK => 4,
        }
    }
}

/// The decoded fixed header and shapes of a payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Storage mode.
    pub mode: Mode,
    /// Elements per scale in int8 and sparse mode (0 in fp32 mode).
    pub chunk_size: u32,
    /// Elements kept per chunk in sparse mode (0 otherwise).
    pub topk: u32,
    /// Elements per zstd frame.
    pub block_elems: u32,
    /// Shape of each tensor, outermost dimension first.
    pub shapes: Vec<Vec<usize>>,
    /// Length of the header in bytes (offset of the first block).
    pub len: usize,
}

impl Header {
    /// Total number of elements over all tensors.
    pub fn total_elems(&self) -> u64 {
        self.shapes
            .iter()
            .map(|s| s.iter().product::<usize>() as u64)
            .sum()
    }
}

/// Appends the header for `shapes` to `out`.
pub(crate) fn write_header(
    out: &mut Vec<u8>,
    mode: Mode,
    chunk: u32,
    block: u32,
    topk: u32,
    shapes: &[&[usize]],
) {
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&[FORMAT_VERSION, mode.code(), 0, 0]);
    out.extend_from_slice(&chunk.to_le_bytes());
    out.extend_from_slice(&block.to_le_bytes());
    if mode == Mode::SparseTopK {
        out.extend_from_slice(&topk.to_le_bytes());
    }
    out.extend_from_slice(&(shapes.len() as u32).to_le_bytes());
    for shape in shapes {
        out.push(shape.len() as u8);
        for d in *shape {
            out.extend_from_slice(&(*d as u64).to_le_bytes());
        }
    }
}

/// A bounds-checked little-endian reader over a byte slice.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, pos: 0 }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.bytes.len());
        match end {
            Some(end) => {
                let s = &self.bytes[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(DecodeError::Truncated {
                offset: self.pos,
                needed: n.saturating_sub(self.remaining()),
            }),
        }
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
}

fn limit(what: &'static str, value: u64, limit: u64) -> Result<(), DecodeError> {
    if value > limit {
        Err(DecodeError::LimitExceeded { what, value, limit })
    } else {
        Ok(())
    }
}

/// Parses the header of `body` (payload without its checksum trailer), enforcing `limits`
/// before anything proportional to a declared size is allocated.
pub(crate) fn read_header(body: &[u8], limits: &DecodeLimits) -> Result<Header, DecodeError> {
    let mut r = Reader::new(body);
    if r.take(4)? != MAGIC {
        return Err(DecodeError::BadMagic);
    }
    let version = r.u8()?;
    if version != FORMAT_VERSION {
        return Err(DecodeError::UnsupportedVersion(version));
    }
    let mode = match r.u8()? {
        0 => Mode::Fp32,
        1 => Mode::Int8Absmax,
        4 => Mode::SparseTopK,
        v => {
            return Err(DecodeError::UnknownField {
                field: "mode",
                value: v.into(),
            })
        }
    };
    let dtype = r.u8()?;
    if dtype != 0 {
        return Err(DecodeError::UnknownField {
            field: "dtype",
            value: dtype.into(),
        });
    }
    let reserved = r.u8()?;
    if reserved != 0 {
        return Err(DecodeError::UnknownField {
            field: "reserved",
            value: reserved.into(),
        });
    }
    let chunk_size = r.u32()?;
    let block_elems = r.u32()?;
    let topk = if mode == Mode::SparseTopK {
        r.u32()?
    } else {
        0
    };
    match mode {
        Mode::SparseTopK => {
            if chunk_size == 0 || block_elems == 0 || block_elems % chunk_size != 0 {
                return Err(DecodeError::Inconsistent(
                    "block_elems must be a non-zero multiple of chunk_size",
                ));
            }
            if topk == 0 || topk > chunk_size {
                return Err(DecodeError::Inconsistent(
                    "topk must be within 1..=chunk_size",
                ));
            }
        }
        Mode::Int8Absmax => {
            if chunk_size == 0 || block_elems == 0 || block_elems % chunk_size != 0 {
                return Err(DecodeError::Inconsistent(
                    "block_elems must be a non-zero multiple of chunk_size",
                ));
            }
        }
        Mode::Fp32 => {
            if chunk_size != 0 || block_elems == 0 {
                return Err(DecodeError::Inconsistent(
                    "fp32 mode needs chunk_size 0 and block_elems > 0",
                ));
            }
        }
    }
    limit(
        "block_elems",
        block_elems.into(),
        limits.max_block_elems.into(),
    )?;
    let n_tensors = r.u32()?;
    limit("n_tensors", n_tensors.into(), limits.max_tensors.into())?;
    let mut shapes = Vec::with_capacity(n_tensors as usize);
    let mut total: u64 = 0;
    let mut frames: u64 = 0;
    for _ in 0..n_tensors {
        let rank = r.u8()?;
        limit("rank", rank.into(), limits.max_rank.into())?;
        let mut shape = Vec::with_capacity(rank as usize);
        let mut elems: u64 = 1;
        for _ in 0..rank {
            let d = r.u64()?;
            elems = elems
                .checked_mul(d)
                .ok_or(DecodeError::Inconsistent("shape overflows u64"))?;
            limit("tensor elements", elems, limits.max_elems)?;
            shape.push(
                usize::try_from(d)
                    .map_err(|_| DecodeError::Inconsistent("dimension exceeds usize"))?,
            );
        }
        total = total
            .checked_add(elems)
            .ok_or(DecodeError::Inconsistent("total elements overflow u64"))?;
        limit("total elements", total, limits.max_elems)?;
        frames = frames.saturating_add(elems.div_ceil(u64::from(block_elems)));
        shapes.push(shape);
    }
    // Every frame costs the decoder a list entry before it is inflated: tiny blocks must not
    // turn a few input bytes per frame into more memory than the output itself.
    limit(
        "frames",
        frames,
        (limits.max_elems / 1024)
            .saturating_add(u64::from(n_tensors))
            .max(1 << 16),
    )?;
    Ok(Header {
        mode,
        chunk_size,
        topk,
        block_elems,
        shapes,
        len: r.pos(),
    })
}
