//! What a pool spec commits to, recomputed locally: the recipe hash, the dataset hash and the
//! initial weights θ₀. A trainer refuses a pool whose hashes it cannot reproduce.

use anyhow::{bail, Result};
use synod_chain::types::DilocoSpec;
use synod_checkpoint::CheckpointHash;
use synod_codec::EncodeOptions;
use synod_diloco::recipe::{PoolRecipe, RecipeCodec, SparseRecipe};
use synod_diloco::{ErrorFeedback, OuterState};
use synod_model::TchInnerTrainer;
use synod_verify::ReplayRecipe;

use crate::args::Codec;
use crate::chain_args::RecipeArgs;
use crate::train::{initial_params, Setup};

/// The recipe, its corpus and θ₀ (as canonical bytes), with their hashes.
pub struct Recipe {
    /// Corpus, device and batch plan.
    pub setup: Setup,
    /// blake3 of the canonical recipe JSON ([`recipe_json`]).
    pub config_hash: CheckpointHash,
    /// blake3 of the corpus file.
    pub dataset_hash: CheckpointHash,
    /// Canonical safetensors bytes of θ₀.
    pub theta0_bytes: Vec<u8>,
    /// blake3 of `theta0_bytes`.
    pub theta0_hash: CheckpointHash,
    /// Largest checkpoint of this model, in bytes ([`synod_diloco::max_checkpoint_bytes`]):
    /// larger offers from peers are refused unread.
    pub max_checkpoint_bytes: u64,
    /// Largest payload of this model with the recipe's codec, in bytes
    /// ([`synod_diloco::max_payload_bytes_for`]): larger announcements are refused unfetched.
    pub max_payload_bytes: u64,
    /// Largest Proof-of-Learning trace state of this model, in bytes
    /// ([`synod_diloco::trace::max_state_bytes`]).
    pub max_state_bytes: u64,
    /// Largest error-feedback residual of this model, in bytes
    /// ([`synod_diloco::residual::max_residual_bytes`]).
    pub max_residual_bytes: u64,
}

/// The recipe of `r` as canonical JSON ([`PoolRecipe::canonical_json`]), whose blake3 is the
/// pool's `model_config_hash`. Device and evaluation settings are not part of it: they do not
/// change the checkpoints.
///
/// # Errors
/// An unknown model preset; a recipe that does not validate.
pub fn recipe_json(r: &RecipeArgs) -> Result<String> {
    Ok(pool_recipe(r)?.canonical_json()?)
}

/// The typed recipe the flags `r` describe.
///
/// # Errors
/// An unknown model preset (its context is the default sequence length).
pub fn pool_recipe(r: &RecipeArgs) -> Result<PoolRecipe> {
    let m = &r.model;
    let wire = &r.outer.wire;
    Ok(PoolRecipe {
        model: m.model.clone(),
        batch: m.batch,
        seq_len: m.seq_len()?,
        lr: m.lr,
        min_lr: m.min_lr,
        warmup: m.warmup,
        round_warmup: m.round_warmup,
        keep_inner_state: m.keep_inner_state,
        seed: m.seed,
        outer_lr: r.outer.outer_lr(),
        outer_momentum: r.outer.outer_momentum(),
        codec: match wire.codec {
            Codec::Int8 => RecipeCodec::Int8,
            Codec::Fp32 => RecipeCodec::Fp32,
            Codec::Sparse => RecipeCodec::Sparse,
        },
        sparse: wire.sparse().then_some(SparseRecipe {
            chunk: wire.sparse_chunk,
            topk: wire.sparse_topk,
            ef_decay: r.outer.ef_decay,
        }),
        aggregation: r.outer.aggregation().rule(),
        overlap: r.outer.overlap,
        trace_segments: r.trace_segments,
    })
}

impl Recipe {
    /// Loads the corpus and builds θ₀.
    ///
    /// # Errors
    /// Unreadable corpus, unknown model preset, or libtorch errors; `--codec sparse` with
    /// `--overlap` (not verifiable yet).
    pub fn load(r: &RecipeArgs) -> Result<Self> {
        if r.outer.wire.sparse() && r.outer.overlap {
            // A sparse payload of round r carries the residual its member was left with by
            // round r − 1, which depends on whether that payload was included; an overlapped
            // round r + 1 is encoded before round r's included set is known.
            bail!(
                "--codec sparse with --overlap: an overlapped round is encoded before the \
                 previous round's included set (which fixes the error-feedback residual it \
                 carries) is known; use one of the two"
            );
        }
        let setup = Setup::new(&r.model, &r.data)?;
        let dataset_hash = synod_checkpoint::hash(&std::fs::read(&r.data)?);
        let config_hash = synod_checkpoint::hash(recipe_json(r)?.as_bytes());
        let theta0 = initial_params(&setup, &r.model, None)?;
        let theta0_bytes = synod_checkpoint::to_bytes(&theta0)?;
        let theta0_hash = synod_checkpoint::hash(&theta0_bytes);
        Ok(Self {
            setup,
            config_hash,
            dataset_hash,
            theta0_bytes,
            theta0_hash,
            max_checkpoint_bytes: synod_diloco::max_checkpoint_bytes(&theta0),
            max_payload_bytes: synod_diloco::max_payload_bytes_for(
                &theta0,
                &r.outer.encode_options(),
            ),
            max_state_bytes: synod_diloco::trace::max_state_bytes(&theta0),
            max_residual_bytes: synod_diloco::residual::max_residual_bytes(&theta0),
        })
    }

    /// Checks that the DiLoCo job `spec` is this recipe, corpus and θ₀.
    ///
    /// # Errors
    /// A message naming the first hash that differs.
    pub fn check(&self, spec: &DilocoSpec, r: &RecipeArgs) -> Result<()> {
        let hex = synod_checkpoint::hex;
        if spec.dataset_hash != self.dataset_hash {
            bail!(
                "--data {} hashes to {}, the pool expects {}",
                r.data.display(),
                hex(&self.dataset_hash),
                hex(&spec.dataset_hash)
            );
        }
        if spec.model_config_hash != self.config_hash {
            bail!(
                "the recipe {} hashes to {}, the pool expects {}: pass the pool's model flags",
                recipe_json(r)?,
                hex(&self.config_hash),
                hex(&spec.model_config_hash)
            );
        }
        if spec.initial_weights_hash != self.theta0_hash {
            bail!(
                "θ₀ from --seed {} hashes to {}, the pool expects {}",
                r.model.seed,
                hex(&self.theta0_hash),
                hex(&spec.initial_weights_hash)
            );
        }
        Ok(())
    }

    /// What a replay needs of this recipe with its flags `args` ([`ReplayRecipe`]: what
    /// `synod_verify::Replayer` checks a member's payload with).
    pub fn replay_view<'a>(&'a self, args: &'a RecipeArgs) -> ReplayView<'a> {
        ReplayView { recipe: self, args }
    }
}

/// A [`Recipe`] with its flags, as the replay sees it ([`Recipe::replay_view`]).
pub struct ReplayView<'a> {
    recipe: &'a Recipe,
    args: &'a RecipeArgs,
}

impl ReplayRecipe for ReplayView<'_> {
    type Trainer = TchInnerTrainer;

    fn keeps_inner_state(&self) -> bool {
        self.args.model.keep_inner_state
    }

    fn restore(&self, checkpoint: &[u8], round: u32) -> Result<OuterState> {
        self.args.outer.restore(checkpoint, round)
    }

    fn replica(&self, worker: u32, inner_steps: u32, total_steps: u32) -> Result<TchInnerTrainer> {
        self.recipe
            .setup
            .replica(&self.args.model, worker, inner_steps, total_steps)
    }

    fn encode_options(&self) -> EncodeOptions {
        self.args.outer.encode_options()
    }

    fn feedback(&self) -> ErrorFeedback {
        self.args.outer.feedback()
    }

    fn sparse(&self) -> bool {
        self.args.outer.wire.sparse()
    }

    fn ef_decay(&self) -> f32 {
        self.args.outer.ef_decay
    }

    fn segment_boundaries(&self, inner_steps: u32) -> Vec<u32> {
        self.args.segment_boundaries(inner_steps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        recipe: RecipeArgs,
    }

    fn json(extra: &[&str]) -> serde_json::Value {
        let args = Cli::parse_from(["t"].iter().chain(extra)).recipe;
        serde_json::from_str(&recipe_json(&args).unwrap()).unwrap()
    }

    #[test]
    fn a_sparse_recipe_defaults_to_error_feedback_as_momentum_and_dense_recipes_keep_theirs() {
        // A dense recipe written without the outer flags takes the dense defaults: outer
        // learning rate 0.8, momentum 0.85, the clipped trimmed mean.
        let dense = json(&[]);
        assert_eq!(dense["outer_lr"], "0.8");
        assert_eq!(dense["outer_momentum"], "0.85");
        assert_eq!(dense["aggregation"], "clipped_trimmed_mean");
        assert!(dense.get("ef_decay").is_none());
        // `--codec sparse` alone is SparseLoCo's recipe: no outer momentum, the sparse outer
        // learning rate, β = 0.95, and a rule that keeps the coordinates one member sent.
        let sparse = json(&["--codec", "sparse"]);
        assert_eq!(sparse["outer_momentum"], "0");
        assert_eq!(sparse["outer_lr"], crate::args::SPARSE_OUTER_LR.to_string());
        assert_eq!(sparse["aggregation"], "clipped_mean");
        assert_eq!(sparse["ef_decay"], "0.95");
        // A flag still wins over the codec's default, and enters the hash.
        let tuned = json(&[
            "--codec",
            "sparse",
            "--outer-momentum",
            "0.5",
            "--outer-lr",
            "1",
        ]);
        assert_eq!(tuned["outer_momentum"], "0.5");
        assert_eq!(tuned["outer_lr"], "1");
        assert_ne!(tuned, sparse);
        assert_eq!(
            json(&["--aggregation", "mean"])["aggregation"],
            json(&["--codec", "sparse", "--aggregation", "mean"])["aggregation"]
        );
    }

    #[test]
    fn the_flags_convert_into_the_typed_recipe_that_reads_back_from_its_json() {
        // The default recipe's JSON, byte for byte: its blake3 is the pools' hash.
        let args = Cli::parse_from(["t"]).recipe;
        assert_eq!(
            recipe_json(&args).unwrap(),
            r#"{"aggregation":"clipped_trimmed_mean","batch":12,"codec":"int8","keep_inner_state":false,"lr":0.001,"min_lr":0.0001,"model":"baby","outer_lr":"0.8","outer_momentum":"0.85","round_warmup":0,"seed":1337,"seq_len":64,"version":2,"warmup":100}"#
        );
        for flags in [
            &[][..],
            &[
                "--codec",
                "sparse",
                "--sparse-topk",
                "64",
                "--ef-decay",
                "0.9",
            ],
            &[
                "--overlap",
                "--outer-momentum",
                "0.5",
                "--trace-segments",
                "32",
            ],
            &[
                "--codec",
                "fp32",
                "--aggregation",
                "mean",
                "--model",
                "tiny",
            ],
        ] {
            let args = Cli::parse_from(["t"].iter().chain(flags)).recipe;
            let typed = pool_recipe(&args).unwrap();
            let json = recipe_json(&args).unwrap();
            assert_eq!(PoolRecipe::parse(&json).unwrap(), typed, "{flags:?}");
            assert_eq!(
                typed.hash().unwrap(),
                synod_checkpoint::hash(json.as_bytes()),
                "{flags:?}"
            );
        }
        // Flags that make no recipe are refused with the reason.
        let args = Cli::parse_from(["t", "--codec", "sparse", "--sparse-topk", "0"]).recipe;
        assert!(recipe_json(&args)
            .unwrap_err()
            .to_string()
            .contains("top-k"));
    }

    #[test]
    fn the_trace_enters_the_recipe_hash_only_when_it_is_not_the_default() {
        // The default trace leaves the recipe's JSON (and `model_config_hash`) as without it.
        assert!(json(&[]).get("trace_segments").is_none());
        assert_eq!(json(&["--trace-segments", "16"]), json(&[]));
        assert_eq!(json(&["--trace-segments", "64"])["trace_segments"], 64);
        // Out of range: refused by the parser, not clamped into another pool's recipe.
        for bad in ["0", "4097"] {
            assert!(Cli::try_parse_from(["t", "--trace-segments", bad]).is_err());
        }
    }
}
