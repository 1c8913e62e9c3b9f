//! # synod-checkpoint
//!
//! A Synod checkpoint is a safetensors file written **canonically**: tensors in ascending name
//! order (safetensors sorts by dtype, then name; all ours are F32), little-endian f32 data,
//! and the single fixed metadata entry `{"format": "pt"}` (what `safetensors.torch` expects).
//! Honest trainers holding equal parameters therefore write byte-identical files, and the
//! checkpoint's identity is [`CheckpointHash`] = blake3 of the file bytes — the 32 bytes that
//! go on-chain (`docs/architecture.md`, steps 4–6).
//!
//! The file holds the model parameters under their PyTorch (nanoGPT) names and, under the
//! [`OUTER_MOMENTUM_PREFIX`], the outer optimizer's momentum, so a trainer that catches up from a
//! checkpoint continues the outer Nesterov sequence bit-identically.
#![deny(missing_docs)]

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensors, TensorView};

/// blake3 of a checkpoint file's bytes.
pub type CheckpointHash = [u8; 32];

/// Name prefix of the outer-optimizer momentum tensors stored beside the parameters.
pub const OUTER_MOMENTUM_PREFIX: &str = "outer_momentum.";

/// Checkpoint errors.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// Reading or writing the file failed.
    #[error("checkpoint i/o on {path}: {source}")]
    Io {
        /// File path.
        path: String,
        /// Underlying error.
        source: std::io::Error,
    },
    /// The bytes are not a valid safetensors file.
    #[error("invalid safetensors: {0}")]
    Format(String),
    /// A tensor is not F32.
    #[error("tensor {name} has dtype {dtype}, only F32 is supported")]
    Dtype {
        /// Tensor name.
        name: String,
        /// Its dtype.
        dtype: String,
    },
    /// Data length does not match the shape, or names repeat.
    #[error("tensor {0}: shape and data disagree, or the name repeats")]
    Shape(String),
    /// The file's blake3 differs from the expected checkpoint hash.
    #[error("checkpoint hash mismatch: expected {expected}, file has {actual}")]
    HashMismatch {
        /// Expected hash (hex).
        expected: String,
        /// Hash of the bytes (hex).
        actual: String,
    },
}

/// One named f32 tensor, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct NamedTensor {
    /// Name (PyTorch state-dict key).
    pub name: String,
    /// Dimensions, outermost first.
    pub shape: Vec<usize>,
    /// `shape.iter().product()` elements.
    pub data: Vec<f32>,
}

impl NamedTensor {
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.data.len()
    }
}

/// A set of named tensors in canonical (ascending name) order — the parameters of a model,
/// optionally with outer-optimizer state.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ParamSet {
    tensors: Vec<NamedTensor>,
}

impl ParamSet {
    /// Builds a set, sorting by name.
    ///
    /// # Errors
    /// [`CheckpointError::Shape`] if a data length differs from its shape or a name repeats.
    pub fn new(mut tensors: Vec<NamedTensor>) -> Result<Self, CheckpointError> {
        tensors.sort_by(|a, b| a.name.cmp(&b.name));
        for (i, t) in tensors.iter().enumerate() {
            if t.shape.iter().product::<usize>() != t.data.len()
                || (i > 0 && tensors[i - 1].name == t.name)
            {
                return Err(CheckpointError::Shape(t.name.clone()));
            }
        }
        Ok(Self { tensors })
    }

    /// The tensors in canonical order.
    pub fn tensors(&self) -> &[NamedTensor] {
        &self.tensors
    }

    /// Mutable access to the tensors' data (names and shapes stay fixed).
    pub fn data_mut(&mut self) -> impl Iterator<Item = &mut Vec<f32>> {
        self.tensors.iter_mut().map(|t| &mut t.data)
    }

    /// Total number of elements.
    pub fn numel(&self) -> usize {
        self.tensors.iter().map(NamedTensor::numel).sum()
    }

    /// Whether `other` has the same names and shapes in the same order.
    pub fn same_layout(&self, other: &ParamSet) -> bool {
        self.tensors.len() == other.tensors.len()
            && self
                .tensors
                .iter()
                .zip(&other.tensors)
                .all(|(a, b)| a.name == b.name && a.shape == b.shape)
    }

    /// Splits off the tensors whose names start with `prefix` (prefix removed), leaving the rest.
    pub fn take_prefixed(&mut self, prefix: &str) -> ParamSet {
        let (taken, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.tensors)
            .into_iter()
            .partition(|t| t.name.starts_with(prefix));
        self.tensors = kept;
        let tensors = taken
            .into_iter()
            .map(|mut t| {
                t.name = t.name[prefix.len()..].to_string();
                t
            })
            .collect();
        ParamSet { tensors }
    }

    /// Adds `other`'s tensors with `prefix` prepended to their names, keeping canonical order.
    ///
    /// # Errors
    /// [`CheckpointError::Shape`] if a resulting name repeats.
    pub fn with_prefixed(
        mut self,
        prefix: &str,
        other: &ParamSet,
    ) -> Result<ParamSet, CheckpointError> {
        self.tensors
            .extend(other.tensors.iter().map(|t| NamedTensor {
                name: format!("{prefix}{}", t.name),
                ..t.clone()
            }));
        ParamSet::new(self.tensors)
    }
}

/// `data` as little-endian bytes: the f32s' own memory on a little-endian machine (no copy), a
/// converted copy elsewhere. A byte loop here cost a verifier 70 ms per 10 MB state.
fn le_bytes(data: &[f32]) -> Cow<'_, [u8]> {
    if cfg!(target_endian = "little") {
        Cow::Borrowed(bytemuck::cast_slice(data))
    } else {
        Cow::Owned(data.iter().flat_map(|v| v.to_le_bytes()).collect())
    }
}

/// f32s from little-endian `bytes` (a whole number of 4-byte values; a trailing partial value
/// is dropped, which safetensors' own length check rules out): one copy, converted in place on
/// a big-endian machine.
fn f32s_from_le(bytes: &[u8]) -> Vec<f32> {
    let n = bytes.len() / 4;
    let mut data = vec![0f32; n];
    bytemuck::cast_slice_mut::<f32, u8>(&mut data).copy_from_slice(&bytes[..n * 4]);
    if cfg!(target_endian = "big") {
        for x in &mut data {
            *x = f32::from_bits(u32::from_le(x.to_bits()));
        }
    }
    data
}

/// Serializes `set` canonically (see the crate docs).
///
/// # Errors
/// [`CheckpointError::Format`] if safetensors refuses the layout (e.g. header over its size limit).
pub fn to_bytes(set: &ParamSet) -> Result<Vec<u8>, CheckpointError> {
    let bytes: Vec<Cow<'_, [u8]>> = set.tensors.iter().map(|t| le_bytes(&t.data)).collect();
    let views = set
        .tensors
        .iter()
        .zip(&bytes)
        .map(|(t, b)| {
            TensorView::new(Dtype::F32, t.shape.clone(), b.as_ref())
                .map(|v| (t.name.as_str(), v))
                .map_err(|e| CheckpointError::Format(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
    safetensors::serialize(views, Some(metadata))
        .map_err(|e| CheckpointError::Format(e.to_string()))
}

/// Parses safetensors bytes holding only F32 tensors.
///
/// # Errors
/// [`CheckpointError::Format`] for invalid safetensors, [`CheckpointError::Dtype`] for a non-F32 tensor.
pub fn from_bytes(bytes: &[u8]) -> Result<ParamSet, CheckpointError> {
    let st = SafeTensors::deserialize(bytes).map_err(|e| CheckpointError::Format(e.to_string()))?;
    let mut tensors = Vec::with_capacity(st.len());
    for (name, view) in st.tensors() {
        if view.dtype() != Dtype::F32 {
            return Err(CheckpointError::Dtype {
                name,
                dtype: format!("{:?}", view.dtype()),
            });
        }
        let data = f32s_from_le(view.data());
        tensors.push(NamedTensor {
            name,
            shape: view.shape().to_vec(),
            data,
        });
    }
    ParamSet::new(tensors)
}

/// blake3 of checkpoint bytes.
pub fn hash(bytes: &[u8]) -> CheckpointHash {
    *blake3::hash(bytes).as_bytes()
}

/// Lower-case hex of a hash.
pub fn hex(hash: &CheckpointHash) -> String {
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CheckpointError + '_ {
    move |source| CheckpointError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Writes `set` canonically to `path` (via a temporary file and rename, so a reader never sees
/// a partial file) and returns its hash.
///
/// # Errors
/// [`CheckpointError::Io`] on file errors, or as [`to_bytes`].
pub fn write(path: &Path, set: &ParamSet) -> Result<CheckpointHash, CheckpointError> {
    let bytes = to_bytes(set)?;
    let tmp = path.with_extension("safetensors.tmp");
    {
        let mut f = std::fs::File::create(&tmp).map_err(io(&tmp))?;
        f.write_all(&bytes).map_err(io(&tmp))?;
        f.sync_all().map_err(io(&tmp))?;
    }
    std::fs::rename(&tmp, path).map_err(io(path))?;
    Ok(hash(&bytes))
}

/// Reads a checkpoint, verifying its hash first when `expected` is given.
///
/// # Errors
/// [`CheckpointError::HashMismatch`] if the bytes do not hash to `expected`; otherwise as
/// [`from_bytes`] and [`CheckpointError::Io`].
pub fn read(
    path: &Path,
    expected: Option<&CheckpointHash>,
) -> Result<(ParamSet, CheckpointHash), CheckpointError> {
    let bytes = std::fs::read(path).map_err(io(path))?;
    let actual = hash(&bytes);
    if let Some(e) = expected {
        if *e != actual {
            return Err(CheckpointError::HashMismatch {
                expected: hex(e),
                actual: hex(&actual),
            });
        }
    }
    Ok((from_bytes(&bytes)?, actual))
}
