//! A pool's recipe: what its `model_config_hash` commits to and every member trains and every
//! verifier replays with (model preset, batch, inner AdamW schedule, seed, outer optimizer,
//! codec, aggregation rule, overlapped rounds, trace segments).
//!
//! [`PoolRecipe`] is the one typed form: command-line flags convert into it, and its
//! canonical JSON ([`PoolRecipe::canonical_json`]: keys sorted, no spaces; the settings a
//! recipe does not use left out) is what the pool's hash is taken of, and what `pool show`
//! prints. [`PoolRecipe::parse`] reads it back. The JSON carries its format's `version`
//! ([`RECIPE_VERSION`]; a recipe without one is version 1). The version names what the rules
//! compute, not only the fields: in version 2 the aggregation rules weigh each payload by its
//! member's snapshot stake (version 1 counted payloads), so members of one pool that ran
//! different versions would compute different checkpoints; a trainer reads its own version
//! only.

use serde::{Deserialize, Serialize};
use synod_codec::EncodeOptions;

use crate::{AggregationRule, DilocoError, ErrorFeedback, OuterState};

/// The recipe format version [`PoolRecipe::canonical_json`] writes and [`PoolRecipe::parse`]
/// reads.
pub const RECIPE_VERSION: u32 = 2;

/// Dense codecs' (int8, fp32) outer learning rate: the best of the int8 sweep
/// (`docs/benchmarks.md`, "Loss parity with DDP"; the DiLoCo paper uses 0.7).
pub const DENSE_OUTER_LR: f32 = 0.8;
/// Dense codecs' outer Nesterov momentum: the best of the int8 sweep (the DiLoCo paper uses
/// 0.9).
pub const DENSE_OUTER_MOMENTUM: f32 = 0.85;
/// The sparse codec's outer learning rate (plain SGD on the mean of the sparse payloads, no
/// outer momentum: the error-feedback memory carries what momentum would; SparseLoCo, Sarfi et
/// al. 2025): the best of the sparse sweep (`docs/benchmarks.md`, "Outer recipe").
pub const SPARSE_OUTER_LR: f32 = 6.0;
/// The error-feedback decay β (SparseLoCo's; the best of the sparse sweep).
pub const SPARSE_EF_DECAY: f32 = 0.95;

/// Trace segments of a recipe that does not name them (`trace_segments` left out of its JSON):
/// [`crate::verify::DEFAULT_SEGMENTS`].
const fn default_segments() -> u32 {
    crate::verify::DEFAULT_SEGMENTS
}

/// The pseudo-gradient codec of a recipe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecipeCodec {
    /// Per-chunk absmax int8 + zstd.
    Int8,
    /// f32 + zstd.
    Fp32,
    /// Per-chunk top-k with error feedback ([`SparseRecipe`]).
    Sparse,
}

/// The sparse codec's settings (SparseLoCo, Sarfi et al. 2025).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SparseRecipe {
    /// Elements per top-k selection.
    pub chunk: u32,
    /// Elements kept per chunk.
    pub topk: u32,
    /// Error-feedback decay β in 0..=1.
    pub ef_decay: f32,
}

/// A pool's recipe. Learning rates are per inner step (AdamW, cosine decay to `min_lr`); step
/// counts are inner steps; the outer learning rate and momentum are those of the outer
/// Nesterov step (DiLoCo, Douillard et al. 2023, Algorithm 1).
#[derive(Clone, Debug, PartialEq)]
pub struct PoolRecipe {
    /// Model preset (`tiny`, `baby`, `small`).
    pub model: String,
    /// Sequences per batch.
    pub batch: usize,
    /// Tokens per sequence.
    pub seq_len: usize,
    /// Peak inner learning rate.
    pub lr: f64,
    /// Final inner learning rate of the cosine decay.
    pub min_lr: f64,
    /// Linear warm-up, inner steps.
    pub warmup: u32,
    /// Linear learning-rate ramp over the first inner steps of every round.
    pub round_warmup: u32,
    /// Each member keeps its AdamW moments across rounds (not replayable by verifiers).
    pub keep_inner_state: bool,
    /// Pool seed: θ₀ and every batch derive from it.
    pub seed: u64,
    /// Outer learning rate η.
    pub outer_lr: f32,
    /// Outer Nesterov momentum μ.
    pub outer_momentum: f32,
    /// Pseudo-gradient codec.
    pub codec: RecipeCodec,
    /// The sparse codec's settings: `Some` exactly when `codec` is [`RecipeCodec::Sparse`].
    pub sparse: Option<SparseRecipe>,
    /// Aggregation rule of the included set's pseudo-gradients.
    pub aggregation: AggregationRule,
    /// Overlapped rounds (one-step-delayed outer update, Streaming DiLoCo).
    pub overlap: bool,
    /// Proof-of-Learning trace segments per inner phase.
    pub trace_segments: u32,
}

/// Errors of [`PoolRecipe::parse`] and [`PoolRecipe::canonical_json`].
#[derive(Debug, thiserror::Error)]
pub enum RecipeError {
    /// Not a recipe's JSON (a field missing, unknown or of the wrong type).
    #[error("recipe JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A version this trainer does not read.
    #[error("recipe version {0} is not supported (this trainer reads version {RECIPE_VERSION})")]
    Version(u32),
    /// The fields contradict each other or are out of range.
    #[error("recipe: {0}")]
    Invalid(String),
}

/// The recipe as its JSON spells it: floats of the outer step as their decimal strings, the
/// sparse settings flat, the defaults left out.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    version: Option<u32>,
    model: String,
    batch: usize,
    seq_len: usize,
    lr: f64,
    min_lr: f64,
    warmup: u32,
    round_warmup: u32,
    keep_inner_state: bool,
    seed: u64,
    outer_lr: String,
    outer_momentum: String,
    codec: RecipeCodec,
    aggregation: AggregationRule,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    overlap: bool,
    #[serde(
        default = "default_segments",
        skip_serializing_if = "is_default_segments"
    )]
    trace_segments: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sparse_chunk: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sparse_topk: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ef_decay: Option<String>,
}

fn is_default_segments(s: &u32) -> bool {
    *s == default_segments()
}

fn float(name: &str, s: &str) -> Result<f32, RecipeError> {
    s.parse()
        .map_err(|e| RecipeError::Invalid(format!("{name} {s:?}: {e}")))
}

impl PoolRecipe {
    /// The encoder options of the recipe's codec (and its sparse settings).
    pub fn encode_options(&self) -> EncodeOptions {
        match (self.codec, self.sparse) {
            (RecipeCodec::Sparse, Some(s)) => EncodeOptions::sparse(s.chunk, s.topk),
            // A sparse codec without settings does not validate; its encoder is the default.
            (RecipeCodec::Int8 | RecipeCodec::Sparse, _) => EncodeOptions::default(),
            (RecipeCodec::Fp32, _) => EncodeOptions::fp32(),
        }
    }

    /// Whether the codec is the sparse one (its payloads carry error-feedback residuals).
    pub fn is_sparse(&self) -> bool {
        self.codec == RecipeCodec::Sparse
    }

    /// The error-feedback decay β: the sparse settings', [`SPARSE_EF_DECAY`] for a dense codec
    /// (whose memory stays empty).
    pub fn ef_decay(&self) -> f32 {
        self.sparse.map_or(SPARSE_EF_DECAY, |s| s.ef_decay)
    }

    /// A member's empty error-feedback memory with the recipe's decay (used by the sparse codec
    /// only).
    pub fn feedback(&self) -> ErrorFeedback {
        ErrorFeedback::new(self.ef_decay())
    }

    /// Segment boundaries of the recipe's Proof-of-Learning trace for a phase of `inner_steps`
    /// ([`crate::verify::segment_boundaries`] with `trace_segments`).
    pub fn segment_boundaries(&self, inner_steps: u32) -> Vec<u32> {
        crate::verify::segment_boundaries(inner_steps, self.trace_segments)
    }

    /// The outer state after `round` from `checkpoint` (canonical bytes of θ with its outer
    /// momentum, or θ₀ without), with the recipe's outer learning rate and momentum.
    ///
    /// # Errors
    /// [`DilocoError::Checkpoint`] for bytes that do not parse; a momentum that does not fit θ
    /// ([`OuterState::from_checkpoint`]).
    pub fn restore(&self, checkpoint: &[u8], round: u32) -> Result<OuterState, DilocoError> {
        OuterState::from_checkpoint(
            synod_checkpoint::from_bytes(checkpoint)?,
            self.outer_lr,
            self.outer_momentum,
            round,
        )
    }

    /// Checks that the fields agree: sparse settings exactly with the sparse codec (chunk ≥
    /// topk ≥ 1, β in 0..=1), finite learning rates, trace segments in
    /// 1..=[`crate::verify::MAX_SEGMENTS`].
    ///
    /// # Errors
    /// [`RecipeError::Invalid`] naming the first field that does not.
    pub fn validate(&self) -> Result<(), RecipeError> {
        let bad = |m: String| Err(RecipeError::Invalid(m));
        match (self.codec, &self.sparse) {
            (RecipeCodec::Sparse, None) => return bad("the sparse codec needs its settings".into()),
            (RecipeCodec::Int8 | RecipeCodec::Fp32, Some(_)) => {
                return bad(format!("sparse settings with codec {:?}", self.codec))
            }
            (_, Some(s)) if s.topk == 0 || s.topk > s.chunk => {
                return bad(format!("sparse top-k {} of chunks of {}", s.topk, s.chunk))
            }
            (_, Some(s)) if !(0.0..=1.0).contains(&s.ef_decay) => {
                return bad(format!("error-feedback decay {} outside 0..=1", s.ef_decay))
            }
            _ => {}
        }
        let rates = [
            ("lr", self.lr),
            ("min_lr", self.min_lr),
            ("outer_lr", f64::from(self.outer_lr)),
            ("outer_momentum", f64::from(self.outer_momentum)),
        ];
        if let Some((name, v)) = rates.iter().find(|(_, v)| !v.is_finite()) {
            return bad(format!("{name} {v} is not finite"));
        }
        if !(1..=crate::verify::MAX_SEGMENTS).contains(&self.trace_segments) {
            return bad(format!("{} trace segments", self.trace_segments));
        }
        Ok(())
    }

    /// The canonical JSON the pool's `model_config_hash` is the blake3 of: keys sorted, no
    /// spaces, the outer learning rate, momentum and error-feedback decay as decimal strings,
    /// the sparse settings only with the sparse codec, `overlap` only when set,
    /// `trace_segments` only when not the default, and `version` only after version 1.
    ///
    /// # Errors
    /// [`RecipeError::Invalid`] if the recipe does not [`validate`](Self::validate).
    pub fn canonical_json(&self) -> Result<String, RecipeError> {
        self.validate()?;
        let wire = Wire {
            version: (RECIPE_VERSION != 1).then_some(RECIPE_VERSION),
            model: self.model.clone(),
            batch: self.batch,
            seq_len: self.seq_len,
            lr: self.lr,
            min_lr: self.min_lr,
            warmup: self.warmup,
            round_warmup: self.round_warmup,
            keep_inner_state: self.keep_inner_state,
            seed: self.seed,
            outer_lr: self.outer_lr.to_string(),
            outer_momentum: self.outer_momentum.to_string(),
            codec: self.codec,
            aggregation: self.aggregation,
            overlap: self.overlap,
            trace_segments: self.trace_segments,
            sparse_chunk: self.sparse.map(|s| s.chunk),
            sparse_topk: self.sparse.map(|s| s.topk),
            ef_decay: self.sparse.map(|s| s.ef_decay.to_string()),
        };
        // Through a `Value`, whose maps are sorted: the keys come out in one order.
        Ok(serde_json::to_string(&serde_json::to_value(wire)?)?)
    }

    /// blake3 of [`canonical_json`](Self::canonical_json): the pool's `model_config_hash`.
    ///
    /// # Errors
    /// As [`canonical_json`](Self::canonical_json).
    pub fn hash(&self) -> Result<[u8; 32], RecipeError> {
        Ok(*blake3::hash(self.canonical_json()?.as_bytes()).as_bytes())
    }

    /// Reads a recipe's JSON (as [`canonical_json`](Self::canonical_json) writes it; key order
    /// and spacing free).
    ///
    /// # Errors
    /// [`RecipeError::Json`] for an unknown, missing or mistyped field;
    /// [`RecipeError::Version`] for a version other than [`RECIPE_VERSION`];
    /// [`RecipeError::Invalid`] if it does not [`validate`](Self::validate).
    pub fn parse(json: &str) -> Result<Self, RecipeError> {
        let w: Wire = serde_json::from_str(json)?;
        let version = w.version.unwrap_or(1);
        if version != RECIPE_VERSION {
            return Err(RecipeError::Version(version));
        }
        let sparse = match (w.sparse_chunk, w.sparse_topk, &w.ef_decay) {
            (None, None, None) => None,
            (Some(chunk), Some(topk), Some(beta)) => Some(SparseRecipe {
                chunk,
                topk,
                ef_decay: float("ef_decay", beta)?,
            }),
            _ => {
                return Err(RecipeError::Invalid(
                    "sparse_chunk, sparse_topk and ef_decay go together".into(),
                ))
            }
        };
        let recipe = Self {
            model: w.model,
            batch: w.batch,
            seq_len: w.seq_len,
            lr: w.lr,
            min_lr: w.min_lr,
            warmup: w.warmup,
            round_warmup: w.round_warmup,
            keep_inner_state: w.keep_inner_state,
            seed: w.seed,
            outer_lr: float("outer_lr", &w.outer_lr)?,
            outer_momentum: float("outer_momentum", &w.outer_momentum)?,
            codec: w.codec,
            sparse,
            aggregation: w.aggregation,
            overlap: w.overlap,
            trace_segments: w.trace_segments,
        };
        recipe.validate()?;
        Ok(recipe)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dense() -> PoolRecipe {
        PoolRecipe {
            model: "baby".into(),
            batch: 12,
            seq_len: 64,
            lr: 1e-3,
            min_lr: 1e-4,
            warmup: 100,
            round_warmup: 0,
            keep_inner_state: false,
            seed: 1337,
            outer_lr: 0.8,
            outer_momentum: 0.85,
            codec: RecipeCodec::Int8,
            sparse: None,
            aggregation: AggregationRule::ClippedTrimmedMean,
            overlap: false,
            trace_segments: crate::verify::DEFAULT_SEGMENTS,
        }
    }

    fn sparse() -> PoolRecipe {
        PoolRecipe {
            outer_lr: 6.0,
            outer_momentum: 0.0,
            codec: RecipeCodec::Sparse,
            sparse: Some(SparseRecipe {
                chunk: 4096,
                topk: 128,
                ef_decay: 0.95,
            }),
            aggregation: AggregationRule::ClippedMean,
            ..dense()
        }
    }

    #[test]
    fn the_canonical_json_is_sorted_and_leaves_out_what_a_recipe_does_not_use() {
        assert_eq!(
            dense().canonical_json().unwrap(),
            r#"{"aggregation":"clipped_trimmed_mean","batch":12,"codec":"int8","keep_inner_state":false,"lr":0.001,"min_lr":0.0001,"model":"baby","outer_lr":"0.8","outer_momentum":"0.85","round_warmup":0,"seed":1337,"seq_len":64,"version":2,"warmup":100}"#
        );
        let overlapped = PoolRecipe {
            overlap: true,
            trace_segments: 8,
            ..dense()
        };
        let json = overlapped.canonical_json().unwrap();
        assert!(json.contains(r#""overlap":true"#) && json.contains(r#""trace_segments":8"#));
        let json = sparse().canonical_json().unwrap();
        assert!(
            json.contains(r#""ef_decay":"0.95","keep_inner_state""#),
            "{json}"
        );
        assert!(
            json.contains(r#""sparse_chunk":4096,"sparse_topk":128"#),
            "{json}"
        );
        assert!(
            json.starts_with(r#"{"aggregation":"clipped_mean","#),
            "{json}"
        );
        assert!(json.ends_with(r#""version":2,"warmup":100}"#), "{json}");
    }

    #[test]
    fn a_recipes_codec_settings_make_its_encoder_feedback_and_trace() {
        let d = dense();
        assert_eq!(d.encode_options().mode, EncodeOptions::default().mode);
        assert!(!d.is_sparse());
        let fp32 = PoolRecipe {
            codec: RecipeCodec::Fp32,
            ..dense()
        };
        assert_eq!(fp32.encode_options().mode, EncodeOptions::fp32().mode);
        let s = PoolRecipe {
            sparse: Some(SparseRecipe {
                chunk: 2048,
                topk: 64,
                ef_decay: 0.9,
            }),
            ..sparse()
        };
        let opts = s.encode_options();
        assert_eq!(opts.mode, EncodeOptions::sparse(2048, 64).mode);
        assert_eq!((opts.chunk_size, opts.topk), (2048, 64));
        assert!(s.is_sparse());
        assert_eq!(s.feedback().decay, 0.9);
        assert_eq!(d.feedback().decay, SPARSE_EF_DECAY);
        let traced = PoolRecipe {
            trace_segments: 5,
            ..dense()
        };
        assert_eq!(traced.segment_boundaries(50), vec![0, 10, 20, 30, 40, 50]);
    }

    #[test]
    fn an_aggregation_rule_is_spelled_by_its_name() {
        for rule in [
            AggregationRule::Mean,
            AggregationRule::ClippedTrimmedMean,
            AggregationRule::ClippedMean,
        ] {
            assert_eq!(serde_json::to_value(rule).unwrap(), rule.name());
        }
    }

    #[test]
    fn a_recipe_reads_back_from_its_json_in_any_key_order() {
        for r in [
            dense(),
            sparse(),
            PoolRecipe {
                overlap: true,
                trace_segments: 8,
                aggregation: AggregationRule::Mean,
                codec: RecipeCodec::Fp32,
                ..dense()
            },
        ] {
            let json = r.canonical_json().unwrap();
            assert_eq!(PoolRecipe::parse(&json).unwrap(), r);
            let v: serde_json::Value = serde_json::from_str(&json).unwrap();
            let pretty = serde_json::to_string_pretty(&v).unwrap();
            assert_eq!(
                PoolRecipe::parse(&pretty).unwrap().hash().unwrap(),
                r.hash().unwrap()
            );
        }
    }

    #[test]
    fn a_recipe_that_is_not_one_is_a_typed_error() {
        let json = dense().canonical_json().unwrap();
        let with = |k: &str, v: &str| json.replacen('{', &format!("{{\"{k}\":{v},"), 1);
        // Version 1 recipes named count-based aggregation rules: refused, as any other.
        let version = |v: &str| json.replace(r#""version":2"#, &format!(r#""version":{v}"#));
        assert!(matches!(
            PoolRecipe::parse(&version("1")),
            Err(RecipeError::Version(1))
        ));
        assert!(matches!(
            PoolRecipe::parse(&json.replace(r#","version":2"#, "")),
            Err(RecipeError::Version(1))
        ));
        assert!(matches!(
            PoolRecipe::parse(&version("3")),
            Err(RecipeError::Version(3))
        ));
        assert!(PoolRecipe::parse(&version("2")).is_ok());
        assert!(matches!(
            PoolRecipe::parse(&with("dropout", "0.1")),
            Err(RecipeError::Json(_))
        ));
        assert!(matches!(
            PoolRecipe::parse(&json.replace(r#""codec":"int8""#, r#""codec":"int4""#)),
            Err(RecipeError::Json(_))
        ));
        assert!(matches!(
            PoolRecipe::parse(&with("sparse_topk", "64")),
            Err(RecipeError::Invalid(_))
        ));
        assert!(matches!(
            PoolRecipe::parse(&json.replace(r#""outer_lr":"0.8""#, r#""outer_lr":"fast""#)),
            Err(RecipeError::Invalid(_))
        ));
        let no_settings = PoolRecipe {
            sparse: None,
            ..sparse()
        };
        assert!(matches!(
            no_settings.canonical_json(),
            Err(RecipeError::Invalid(_))
        ));
        let nan = PoolRecipe {
            lr: f64::NAN,
            ..dense()
        };
        assert!(matches!(nan.hash(), Err(RecipeError::Invalid(_))));
    }
}
