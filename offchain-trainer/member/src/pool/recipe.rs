//! What a pool spec commits to, recomputed locally: the recipe hash, the dataset hash and the
//! initial weights θ₀. A trainer refuses a pool whose hashes it cannot reproduce.

use std::path::PathBuf;

use anyhow::{bail, Result};
use synod_chain::types::DilocoSpec;
use synod_checkpoint::CheckpointHash;
use synod_codec::EncodeOptions;
use synod_diloco::recipe::PoolRecipe;
use synod_diloco::{ErrorFeedback, OuterState};
use synod_model::TchInnerTrainer;
use synod_verify::ReplayRecipe;

use crate::config::RecipeConfig;
use crate::train::{initial_params, Setup};

/// The recipe, its corpus and θ₀ (as canonical bytes), with their hashes.
pub struct Recipe {
    /// The recipe.
    pub pool: PoolRecipe,
    /// The corpus file.
    pub data: PathBuf,
    /// Corpus, device and batch plan.
    pub setup: Setup,
    /// blake3 of the recipe's canonical JSON ([`PoolRecipe::canonical_json`]).
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

impl Recipe {
    /// Loads the corpus and builds θ₀.
    ///
    /// # Errors
    /// Unreadable corpus, unknown model preset, or libtorch errors; a sparse codec with
    /// `PoolRecipe::overlap` (not verifiable).
    pub fn load(c: &RecipeConfig) -> Result<Self> {
        let r = &c.recipe;
        if r.is_sparse() && r.overlap {
            // A sparse payload of round r carries the residual its member was left with by
            // round r − 1, which depends on whether that payload was included; an overlapped
            // round r + 1 is encoded before round r's included set is known.
            bail!(
                "--codec sparse with --overlap: an overlapped round is encoded before the \
                 previous round's included set (which fixes the error-feedback residual it \
                 carries) is known; use one of the two"
            );
        }
        let setup = Setup::new(c)?;
        let dataset_hash = synod_checkpoint::hash(&std::fs::read(&c.data)?);
        let config_hash = r.hash()?;
        let theta0 = initial_params(&setup, r, None)?;
        let theta0_bytes = synod_checkpoint::to_bytes(&theta0)?;
        let theta0_hash = synod_checkpoint::hash(&theta0_bytes);
        Ok(Self {
            pool: r.clone(),
            data: c.data.clone(),
            setup,
            config_hash,
            dataset_hash,
            theta0_bytes,
            theta0_hash,
            max_checkpoint_bytes: synod_diloco::max_checkpoint_bytes(&theta0),
            max_payload_bytes: synod_diloco::max_payload_bytes_for(&theta0, &r.encode_options()),
            max_state_bytes: synod_diloco::trace::max_state_bytes(&theta0),
            max_residual_bytes: synod_diloco::residual::max_residual_bytes(&theta0),
        })
    }

    /// Checks that the DiLoCo job `spec` is this recipe, corpus and θ₀.
    ///
    /// # Errors
    /// A message naming the first hash that differs.
    pub fn check(&self, spec: &DilocoSpec) -> Result<()> {
        let hex = synod_checkpoint::hex;
        if spec.dataset_hash != self.dataset_hash {
            bail!(
                "--data {} hashes to {}, the pool expects {}",
                self.data.display(),
                hex(&self.dataset_hash),
                hex(&spec.dataset_hash)
            );
        }
        if spec.model_config_hash != self.config_hash {
            bail!(
                "the recipe {} hashes to {}, the pool expects {}: pass the pool's model flags",
                self.pool.canonical_json()?,
                hex(&self.config_hash),
                hex(&spec.model_config_hash)
            );
        }
        if spec.initial_weights_hash != self.theta0_hash {
            bail!(
                "θ₀ from --seed {} hashes to {}, the pool expects {}",
                self.pool.seed,
                hex(&self.theta0_hash),
                hex(&spec.initial_weights_hash)
            );
        }
        Ok(())
    }

    /// The outer state after `round` from `checkpoint` ([`PoolRecipe::restore`]).
    ///
    /// # Errors
    /// A checkpoint that does not parse, or whose momentum does not fit θ.
    pub fn restore(&self, checkpoint: &[u8], round: u32) -> Result<OuterState> {
        Ok(self.pool.restore(checkpoint, round)?)
    }

    /// What a replay needs of this recipe ([`ReplayRecipe`]: what `synod_verify::Replayer`
    /// checks a member's payload with).
    pub fn replay_view(&self) -> ReplayView<'_> {
        ReplayView { recipe: self }
    }
}

/// A [`Recipe`] as the replay sees it ([`Recipe::replay_view`]).
pub struct ReplayView<'a> {
    recipe: &'a Recipe,
}

impl ReplayRecipe for ReplayView<'_> {
    type Trainer = TchInnerTrainer;

    fn keeps_inner_state(&self) -> bool {
        self.recipe.pool.keep_inner_state
    }

    fn restore(&self, checkpoint: &[u8], round: u32) -> Result<OuterState> {
        self.recipe.restore(checkpoint, round)
    }

    fn replica(&self, worker: u32, inner_steps: u32, total_steps: u32) -> Result<TchInnerTrainer> {
        self.recipe
            .setup
            .replica(&self.recipe.pool, worker, inner_steps, total_steps)
    }

    fn encode_options(&self) -> EncodeOptions {
        self.recipe.pool.encode_options()
    }

    fn feedback(&self) -> ErrorFeedback {
        self.recipe.pool.feedback()
    }

    fn sparse(&self) -> bool {
        self.recipe.pool.is_sparse()
    }

    fn ef_decay(&self) -> f32 {
        self.recipe.pool.ef_decay()
    }

    fn segment_boundaries(&self, inner_steps: u32) -> Vec<u32> {
        self.recipe.pool.segment_boundaries(inner_steps)
    }
}
