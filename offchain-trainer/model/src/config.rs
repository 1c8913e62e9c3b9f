//! Model and inner-optimizer configuration.

use serde::{Deserialize, Serialize};

use crate::ModelError;

/// Shape of the GPT. All sizes in elements/tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GptConfig {
    /// Vocabulary size (256 for the byte tokenizer).
    pub vocab: i64,
    /// Context length in tokens (maximum sequence length).
    pub ctx: i64,
    /// Transformer blocks.
    pub n_layer: i64,
    /// Attention heads per block.
    pub n_head: i64,
    /// Residual width (embedding size); a multiple of `n_head`.
    pub d_model: i64,
}

impl GptConfig {
    /// nanoGPT's CPU "baby GPT" for shakespeare_char: 4 layers, 4 heads, width 128, context 64.
    pub fn baby() -> Self {
        Self {
            vocab: 256,
            ctx: 64,
            n_layer: 4,
            n_head: 4,
            d_model: 128,
        }
    }

    /// A very small model for tests: 2 layers, 2 heads, width 32, context 32.
    pub fn tiny() -> Self {
        Self {
            vocab: 256,
            ctx: 32,
            n_layer: 2,
            n_head: 2,
            d_model: 32,
        }
    }

    /// nanoGPT's GPU shakespeare_char model: 6 layers, 6 heads, width 384, context 256.
    pub fn small() -> Self {
        Self {
            vocab: 256,
            ctx: 256,
            n_layer: 6,
            n_head: 6,
            d_model: 384,
        }
    }

    /// A preset by name: `tiny`, `baby` or `small`.
    ///
    /// # Errors
    /// [`ModelError::Config`] for an unknown name.
    pub fn preset(name: &str) -> Result<Self, ModelError> {
        match name {
            "tiny" => Ok(Self::tiny()),
            "baby" => Ok(Self::baby()),
            "small" => Ok(Self::small()),
            _ => Err(ModelError::Config(format!(
                "unknown model preset {name:?} (tiny, baby, small)"
            ))),
        }
    }

    /// Checks divisibility and positivity.
    ///
    /// # Errors
    /// [`ModelError::Config`] describing the first violated constraint.
    pub fn validate(&self) -> Result<(), ModelError> {
        if self.vocab <= 0
            || self.ctx <= 0
            || self.n_layer <= 0
            || self.n_head <= 0
            || self.d_model <= 0
        {
            return Err(ModelError::Config(
                "all model sizes must be positive".into(),
            ));
        }
        if self.d_model % self.n_head != 0 {
            return Err(ModelError::Config(format!(
                "d_model {} is not a multiple of n_head {}",
                self.d_model, self.n_head
            )));
        }
        Ok(())
    }
}

/// The inner optimizer: AdamW (Loshchilov & Hutter 2019) with nanoGPT's schedule.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct InnerConfig {
    /// Peak learning rate.
    pub lr: f64,
    /// Final learning rate of the cosine decay.
    pub min_lr: f64,
    /// Linear warm-up, in inner steps (counted over the whole run).
    pub warmup_steps: u32,
    /// Steps of the cosine decay (the run's total inner steps); constant `min_lr` after.
    pub decay_steps: u32,
    /// AdamW β₁.
    pub beta1: f64,
    /// AdamW β₂.
    pub beta2: f64,
    /// Decoupled weight decay, applied to matrices and embeddings only (not biases, LayerNorm).
    pub weight_decay: f64,
    /// Global gradient-norm clip (0 disables).
    pub grad_clip: f64,
    /// Inner steps per outer round (H).
    pub inner_steps: u32,
    /// Sequences per batch.
    pub batch: usize,
    /// Linear learning-rate ramp over the first inner steps of every outer round (0 = none).
    /// With fresh AdamW moments each round, Adam's bias-corrected first steps move every
    /// coordinate by ≈ lr whatever its gradient; the ramp damps that jolt.
    pub round_warmup_steps: u32,
    /// Keep AdamW moments across outer rounds (DiLoCo paper) instead of resetting them each
    /// round. Resetting makes the inner phase a pure function of (θ_{r-1}, seed, worker, round),
    /// which verifiers need to replay it; keeping converges faster.
    pub keep_state: bool,
}

impl InnerConfig {
    /// nanoGPT shakespeare_char settings (lr 1e-3 → 1e-4, warm-up 100, β₂ 0.99, wd 0.1, clip 1).
    pub fn nanogpt(batch: usize, inner_steps: u32, decay_steps: u32) -> Self {
        Self {
            lr: 1e-3,
            min_lr: 1e-4,
            warmup_steps: 100,
            decay_steps,
            beta1: 0.9,
            beta2: 0.99,
            weight_decay: 0.1,
            grad_clip: 1.0,
            inner_steps,
            batch,
            round_warmup_steps: 0,
            keep_state: false,
        }
    }

    /// Learning rate at inner step `inner` (0-based) of a round, `step` being the global step:
    /// [`InnerConfig::lr_at`] times the per-round ramp `(inner + 1) / (round_warmup_steps + 1)`.
    pub fn lr_in_round(&self, step: u64, inner: u32) -> f64 {
        let w = self.round_warmup_steps;
        let ramp = if inner < w {
            f64::from(inner + 1) / f64::from(w + 1)
        } else {
            1.0
        };
        self.lr_at(step) * ramp
    }

    /// Learning rate at global inner step `step` (0-based): linear warm-up to `lr`, cosine
    /// decay to `min_lr` at `decay_steps`, then `min_lr` (nanoGPT `get_lr`).
    pub fn lr_at(&self, step: u64) -> f64 {
        let (w, d) = (u64::from(self.warmup_steps), u64::from(self.decay_steps));
        if step < w {
            return self.lr * (step + 1) as f64 / (w + 1) as f64;
        }
        if step >= d {
            return self.min_lr;
        }
        let ratio = (step - w) as f64 / (d.saturating_sub(w)).max(1) as f64;
        let coeff = 0.5 * (1.0 + (std::f64::consts::PI * ratio).cos());
        self.min_lr + coeff * (self.lr - self.min_lr)
    }
}

/// Parses `cpu`, `cuda`, `cuda:N` or `auto` (CUDA when available, else CPU).
///
/// # Errors
/// [`ModelError::Config`] for anything else, or `cuda` without a CUDA device.
pub fn parse_device(s: &str) -> Result<tch::Device, ModelError> {
    match s {
        "cpu" => Ok(tch::Device::Cpu),
        "auto" => Ok(tch::Device::cuda_if_available()),
        "cuda" if tch::Cuda::is_available() => Ok(tch::Device::Cuda(0)),
        _ => match s.strip_prefix("cuda:").map(str::parse::<usize>) {
            Some(Ok(i)) if tch::Cuda::is_available() && (i as i64) < tch::Cuda::device_count() => {
                Ok(tch::Device::Cuda(i))
            }
            _ => Err(ModelError::Config(format!(
                "device {s:?} is not available (cpu, cuda, cuda:N, auto)"
            ))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_warms_up_then_decays_to_min() {
        let c = InnerConfig::nanogpt(12, 50, 2000);
        assert!((c.lr_at(0) - 1e-3 / 101.0).abs() < 1e-12);
        assert!((c.lr_at(100) - 1e-3).abs() < 1e-12);
        assert!(c.lr_at(1000) < 1e-3 && c.lr_at(1000) > 1e-4);
        assert!((c.lr_at(2000) - 1e-4).abs() < 1e-12);
        assert!((c.lr_at(5000) - 1e-4).abs() < 1e-12);
    }

    #[test]
    fn round_warmup_ramps_the_first_inner_steps_of_each_round() {
        let c = InnerConfig {
            round_warmup_steps: 4,
            ..InnerConfig::nanogpt(12, 50, 2000)
        };
        assert!((c.lr_in_round(500, 0) - c.lr_at(500) / 5.0).abs() < 1e-15);
        assert!((c.lr_in_round(503, 3) - c.lr_at(503) * 4.0 / 5.0).abs() < 1e-15);
        assert_eq!(c.lr_in_round(504, 4), c.lr_at(504));
        let off = InnerConfig::nanogpt(12, 50, 2000);
        assert_eq!(off.lr_in_round(500, 0), off.lr_at(500));
    }

    #[test]
    fn bad_configs_are_rejected() {
        assert!(GptConfig {
            d_model: 33,
            ..GptConfig::tiny()
        }
        .validate()
        .is_err());
        assert!(GptConfig::preset("huge").is_err());
        assert!(parse_device("tpu").is_err());
        assert_eq!(parse_device("cpu").unwrap(), tch::Device::Cpu);
    }
}
