//! # synod-data
//!
//! Turns a local text file into token batches that anyone can replay.
//!
//! * Tokenization is byte-level (vocabulary 256, token = byte value): no vocabulary file to
//!   distribute or agree on, and on ASCII text such as tinyshakespeare it is exactly
//!   character-level, so losses compare with nanoGPT's `shakespeare_char`.
//! * [`Corpus::split`] keeps the first 90 % of tokens for training and the last 10 % for
//!   validation (nanoGPT's `prepare.py` split).
//! * [`BatchPlan::train_batch`] draws the `step`-th batch of worker `worker` in outer round
//!   `round` from a ChaCha8 stream keyed by `blake3("synod/batch/v1", seed, worker, round, step)`:
//!   a pure function of its arguments, which is what lets a verifier replay a worker's inner
//!   phase (`docs/architecture.md`, step 2).
#![deny(missing_docs)]

use std::path::Path;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Vocabulary size of the byte-level tokenizer.
pub const BYTE_VOCAB: usize = 256;

/// Errors of corpus loading and batch planning.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The corpus file could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// File path.
        path: String,
        /// Underlying error.
        source: std::io::Error,
    },
    /// A split is too short to hold one sequence of `seq_len + 1` tokens.
    #[error("{split} split has {tokens} tokens, fewer than one sequence of {needed}")]
    TooShort {
        /// "train" or "validation".
        split: &'static str,
        /// Tokens in the split.
        tokens: usize,
        /// Tokens needed.
        needed: usize,
    },
}

/// A tokenized text corpus (byte-level tokens).
#[derive(Clone, Debug)]
pub struct Corpus {
    tokens: Vec<u8>,
    /// blake3 of the raw file bytes: the dataset hash a pool spec refers to.
    pub hash: [u8; 32],
}

impl Corpus {
    /// Reads and tokenizes a text file.
    ///
    /// # Errors
    /// [`DataError::Io`] if the file cannot be read.
    pub fn from_file(path: &Path) -> Result<Self, DataError> {
        let bytes = std::fs::read(path).map_err(|source| DataError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Ok(Self::from_bytes(bytes))
    }

    /// Tokenizes bytes already in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        let hash = *blake3::hash(&bytes).as_bytes();
        Self {
            tokens: bytes,
            hash,
        }
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether the corpus is empty.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Splits into (train, validation): the first 90 % and the last 10 % of tokens.
    pub fn split(&self) -> (&[u8], &[u8]) {
        self.tokens.split_at(self.tokens.len() * 9 / 10)
    }

    /// Decodes tokens back to text (lossy for non-UTF-8 byte runs).
    pub fn decode(tokens: &[i64]) -> String {
        let bytes: Vec<u8> = tokens.iter().map(|t| *t as u8).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// A batch of `batch` sequences of `seq_len` tokens: `inputs[b][t]` predicts `targets[b][t]`
/// (= `inputs[b][t+1]`). Both are row-major `[batch, seq_len]` i64, ready for a tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    /// Input token ids, `[batch, seq_len]` row-major.
    pub inputs: Vec<i64>,
    /// Next-token targets, `[batch, seq_len]` row-major.
    pub targets: Vec<i64>,
    /// Sequences in the batch.
    pub batch: usize,
    /// Tokens per sequence.
    pub seq_len: usize,
}

/// The deterministic schedule of batches for a pool: which tokens every (worker, round, step)
/// trains on and which fixed batches measure validation loss.
#[derive(Clone, Debug)]
pub struct BatchPlan {
    corpus: Arc<Corpus>,
    /// Pool seed.
    pub seed: u64,
    /// Sequences per batch.
    pub batch: usize,
    /// Tokens per sequence (the model's context length).
    pub seq_len: usize,
}

impl BatchPlan {
    /// Plans batches over `corpus` (split 90/10).
    ///
    /// # Errors
    /// [`DataError::TooShort`] if either split holds fewer than `seq_len + 2` tokens.
    pub fn new(
        corpus: Arc<Corpus>,
        seed: u64,
        batch: usize,
        seq_len: usize,
    ) -> Result<Self, DataError> {
        let (train, val) = corpus.split();
        for (split, s) in [("train", train), ("validation", val)] {
            if s.len() <= seq_len + 1 {
                return Err(DataError::TooShort {
                    split,
                    tokens: s.len(),
                    needed: seq_len + 2,
                });
            }
        }
        Ok(Self {
            corpus,
            seed,
            batch,
            seq_len,
        })
    }

    /// The corpus this plan draws from.
    pub fn corpus(&self) -> &Corpus {
        &self.corpus
    }

    fn rng(&self, domain: &str, a: u64, b: u64, c: u64) -> ChaCha8Rng {
        let mut h = blake3::Hasher::new_derive_key(domain);
        for v in [self.seed, a, b, c] {
            h.update(&v.to_le_bytes());
        }
        ChaCha8Rng::from_seed(*h.finalize().as_bytes())
    }

    fn draw(&self, tokens: &[u8], mut rng: ChaCha8Rng) -> Batch {
        let (b, t) = (self.batch, self.seq_len);
        let mut inputs = Vec::with_capacity(b * t);
        let mut targets = Vec::with_capacity(b * t);
        for _ in 0..b {
            let start = rng.random_range(0..tokens.len() - t - 1);
            let window = &tokens[start..start + t + 1];
            inputs.extend(window[..t].iter().map(|v| i64::from(*v)));
            targets.extend(window[1..].iter().map(|v| i64::from(*v)));
        }
        Batch {
            inputs,
            targets,
            batch: b,
            seq_len: t,
        }
    }

    /// The `step`-th training batch (0-based) of `worker` in outer round `round`
    /// (a pure function of `(seed, worker, round, step)`).
    pub fn train_batch(&self, worker: u32, round: u32, step: u32) -> Batch {
        self.draw(
            self.corpus.split().0,
            self.rng("synod/batch/v1", worker.into(), round.into(), step.into()),
        )
    }

    /// The `i`-th fixed validation batch (the same for every worker and round).
    pub fn val_batch(&self, i: u32) -> Batch {
        self.draw(
            self.corpus.split().1,
            self.rng("synod/val/v1", i.into(), 0, 0),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus() -> Arc<Corpus> {
        Arc::new(Corpus::from_bytes(
            (0..5000u32).map(|i| (i % 251) as u8).collect(),
        ))
    }

    #[test]
    fn batches_are_pure_functions_of_their_coordinates() {
        let c = corpus();
        let p = BatchPlan::new(c.clone(), 7, 4, 16).unwrap();
        assert_eq!(p.train_batch(1, 2, 3), p.train_batch(1, 2, 3));
        assert_ne!(p.train_batch(1, 2, 3), p.train_batch(2, 2, 3));
        assert_ne!(p.train_batch(1, 2, 3), p.train_batch(1, 3, 3));
        assert_ne!(p.train_batch(1, 2, 3), p.train_batch(1, 2, 4));
        let q = BatchPlan::new(c.clone(), 8, 4, 16).unwrap();
        assert_ne!(p.train_batch(1, 2, 3), q.train_batch(1, 2, 3));
    }

    #[test]
    fn targets_are_inputs_shifted_by_one_and_stay_in_their_split() {
        let c = corpus();
        let (train, _) = c.split();
        let p = BatchPlan::new(c.clone(), 1, 3, 8).unwrap();
        for step in 0..50 {
            let b = p.train_batch(0, 1, step);
            assert_eq!(b.inputs.len(), 24);
            for s in 0..3 {
                let (x, y) = (&b.inputs[s * 8..s * 8 + 8], &b.targets[s * 8..s * 8 + 8]);
                assert_eq!(&x[1..], &y[..7]);
                // Byte pattern i % 251: the successor of v is v+1 mod 251 within the train split.
                assert_eq!(y[7], (x[7] + 1) % 251);
            }
        }
        let v = p.val_batch(0);
        assert!(v.inputs.iter().all(|t| *t < 251));
        assert_eq!(train.len(), 4500);
    }

    #[test]
    fn too_short_corpus_is_a_typed_error() {
        let c = Arc::new(Corpus::from_bytes(vec![b'a'; 50]));
        assert!(matches!(
            BatchPlan::new(c.clone(), 0, 1, 16),
            Err(DataError::TooShort {
                split: "validation",
                ..
            })
        ));
    }
}
