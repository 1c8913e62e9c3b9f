//! Typed errors of the codec.

/// Why [`crate::encode`] refused its input.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum EncodeError {
    /// A tensor's data length differs from the product of its shape.
    #[error("tensor {index}: shape holds {expected} elements but data has {actual}")]
    ShapeMismatch {
        /// Position of the tensor in the input list.
        index: usize,
        /// Product of the shape.
        expected: usize,
        /// Length of the data slice.
        actual: usize,
    },
    /// A tensor holds NaN or ±∞; a pseudo-gradient must be finite.
    #[error("tensor {index} holds a non-finite value")]
    NonFinite {
        /// Position of the tensor in the input list.
        index: usize,
    },
    /// Options out of range (zero chunk size, block not a multiple of the chunk, rank > 255, ...).
    #[error("invalid encode options: {0}")]
    InvalidOptions(&'static str),
    /// zstd failed (out of memory or an internal error).
    #[error("zstd compression failed: {0}")]
    Compress(String),
}

/// Why [`crate::decode`] rejected a payload. Every malformed input maps to one of these.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DecodeError {
    /// The input ends before a field that the format requires.
    #[error("payload truncated: needed {needed} more bytes at offset {offset}")]
    Truncated {
        /// Offset of the field that did not fit.
        offset: usize,
        /// Bytes missing.
        needed: usize,
    },
    /// The first four bytes are not `SYNG`.
    #[error("bad magic bytes")]
    BadMagic,
    /// A format version this decoder does not know.
    #[error("unsupported format version {0}")]
    UnsupportedVersion(u8),
    /// An unknown mode, dtype or a non-zero reserved byte.
    #[error("unknown {field} value {value}")]
    UnknownField {
        /// Name of the header field.
        field: &'static str,
        /// Its value.
        value: u32,
    },
    /// The blake3 trailer does not match the bytes before it.
    #[error("checksum mismatch")]
    ChecksumMismatch,
    /// A declared size exceeds the caller's [`crate::DecodeLimits`] (checked before allocating).
    #[error("{what} = {value} exceeds the limit {limit}")]
    LimitExceeded {
        /// Which quantity.
        what: &'static str,
        /// The declared value.
        value: u64,
        /// The limit.
        limit: u64,
    },
    /// Header fields that contradict each other (zero chunk size, block not a chunk multiple, ...).
    #[error("inconsistent header: {0}")]
    Inconsistent(&'static str),
    /// A zstd frame is corrupt or decompresses to a size other than the block's.
    #[error("block {block}: {reason}")]
    BadBlock {
        /// Index of the block.
        block: usize,
        /// What was wrong.
        reason: String,
    },
    /// A chunk scale is negative, NaN, or so large that a code could decode to ±∞ (int8: above
    /// `f32::MAX / 128`; sparse: above `f32::MAX / 7`).
    #[error("block {block}: invalid scale")]
    BadScale {
        /// Index of the block.
        block: usize,
    },
    /// Bytes remain between the last block and the checksum.
    #[error("{0} trailing bytes after the last block")]
    TrailingBytes(usize),
}
