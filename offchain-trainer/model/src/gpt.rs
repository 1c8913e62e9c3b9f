//! The GPT decoder.

use tch::nn::{Init, Path};
use tch::{Kind, Reduction, Tensor};

use crate::{GptConfig, ModelError};

/// Optimizer group of matrices and embeddings (weight decay applies).
pub(crate) const DECAY_GROUP: usize = 0;
/// Optimizer group of biases and LayerNorm parameters (no weight decay).
pub(crate) const NO_DECAY_GROUP: usize = 1;

struct Linear {
    weight: Tensor,
    bias: Tensor,
}

impl Linear {
    /// `[out, in]` weight ~ N(0, std²), zero bias (nanoGPT `_init_weights`).
    fn new(p: &Path, d_in: i64, d_out: i64, std: f64) -> Self {
        let weight = p.set_group(DECAY_GROUP).var(
            "weight",
            &[d_out, d_in],
            Init::Randn {
                mean: 0.0,
                stdev: std,
            },
        );
        let bias = p
            .set_group(NO_DECAY_GROUP)
            .var("bias", &[d_out], Init::Const(0.0));
        Self { weight, bias }
    }

    fn forward(&self, x: &Tensor) -> Tensor {
        x.linear(&self.weight, Some(&self.bias))
    }
}

struct LayerNorm {
    weight: Tensor,
    bias: Tensor,
    dim: i64,
}

impl LayerNorm {
    fn new(p: &Path, dim: i64) -> Self {
        let p = p.set_group(NO_DECAY_GROUP);
        Self {
            weight: p.var("weight", &[dim], Init::Const(1.0)),
            bias: p.var("bias", &[dim], Init::Const(0.0)),
            dim,
        }
    }

    fn forward(&self, x: &Tensor) -> Tensor {
        x.layer_norm([self.dim], Some(&self.weight), Some(&self.bias), 1e-5, true)
    }
}

struct Block {
    ln_1: LayerNorm,
    c_attn: Linear,
    attn_proj: Linear,
    ln_2: LayerNorm,
    c_fc: Linear,
    mlp_proj: Linear,
    n_head: i64,
}

impl Block {
    fn new(p: &Path, cfg: &GptConfig) -> Self {
        let d = cfg.d_model;
        // GPT-2's scaled init of the residual projections: std 0.02 / sqrt(2 · n_layer).
        let proj_std = 0.02 / ((2 * cfg.n_layer) as f64).sqrt();
        Self {
            ln_1: LayerNorm::new(&(p / "ln_1"), d),
            c_attn: Linear::new(&(p / "attn" / "c_attn"), d, 3 * d, 0.02),
            attn_proj: Linear::new(&(p / "attn" / "c_proj"), d, d, proj_std),
            ln_2: LayerNorm::new(&(p / "ln_2"), d),
            c_fc: Linear::new(&(p / "mlp" / "c_fc"), d, 4 * d, 0.02),
            mlp_proj: Linear::new(&(p / "mlp" / "c_proj"), 4 * d, d, proj_std),
            n_head: cfg.n_head,
        }
    }

    fn forward(&self, x: &Tensor) -> Tensor {
        let (b, t, c) = x.size3().unwrap_or((0, 0, 0));
        let hs = c / self.n_head;
        let qkv = self.c_attn.forward(&self.ln_1.forward(x));
        let parts = qkv.split(c, 2);
        let heads = |t_: &Tensor| t_.view([b, t, self.n_head, hs]).transpose(1, 2);
        let (q, k, v) = (heads(&parts[0]), heads(&parts[1]), heads(&parts[2]));
        let y = Tensor::scaled_dot_product_attention(
            &q,
            &k,
            &v,
            None::<Tensor>,
            0.0,
            true,
            None,
            false,
        );
        let y = y.transpose(1, 2).contiguous().view([b, t, c]);
        let x = x + self.attn_proj.forward(&y);
        let h = self.c_fc.forward(&self.ln_2.forward(&x)).gelu("none");
        &x + self.mlp_proj.forward(&h)
    }
}

/// A GPT-2-style decoder-only transformer with nanoGPT's parameter names
/// (`transformer.wte.weight`, `transformer.h.{i}.attn.c_attn.weight`, ...). The output
/// projection is tied to `transformer.wte.weight` (no separate `lm_head`).
pub struct Gpt {
    wte: Tensor,
    wpe: Tensor,
    blocks: Vec<Block>,
    ln_f: LayerNorm,
    cfg: GptConfig,
}

impl Gpt {
    /// Creates the variables under `p` (normally a `VarStore`'s root) with GPT-2 initialization
    /// drawn from libtorch's generator (seed it with `tch::manual_seed` for reproducibility).
    ///
    /// # Errors
    /// [`ModelError::Config`] for an invalid configuration.
    pub fn new(p: &Path, cfg: GptConfig) -> Result<Self, ModelError> {
        cfg.validate()?;
        let tr = p / "transformer";
        let emb = tr.set_group(DECAY_GROUP);
        let init = Init::Randn {
            mean: 0.0,
            stdev: 0.02,
        };
        Ok(Self {
            wte: (&emb / "wte").var("weight", &[cfg.vocab, cfg.d_model], init),
            wpe: (&emb / "wpe").var("weight", &[cfg.ctx, cfg.d_model], init),
            blocks: (0..cfg.n_layer)
                .map(|i| Block::new(&(&tr / "h" / i), &cfg))
                .collect(),
            ln_f: LayerNorm::new(&(&tr / "ln_f"), cfg.d_model),
            cfg,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &GptConfig {
        &self.cfg
    }

    /// Logits `[B, T, vocab]` (f32) for token ids `idx` `[B, T]` (i64, T ≤ ctx).
    ///
    /// # Errors
    /// [`ModelError::Config`] if T exceeds the context length or `idx` is not 2-D.
    pub fn forward(&self, idx: &Tensor) -> Result<Tensor, ModelError> {
        let (_, t) = idx
            .size2()
            .map_err(|_| ModelError::Config("input must be [batch, time]".into()))?;
        if t > self.cfg.ctx {
            return Err(ModelError::Config(format!(
                "sequence of {t} tokens exceeds context {}",
                self.cfg.ctx
            )));
        }
        let pos = Tensor::arange(t, (Kind::Int64, idx.device()));
        let mut x = Tensor::embedding(&self.wte, idx, -1, false, false)
            + Tensor::embedding(&self.wpe, &pos, -1, false, false);
        for b in &self.blocks {
            x = b.forward(&x);
        }
        Ok(self.ln_f.forward(&x).matmul(&self.wte.tr()))
    }

    /// Mean next-token cross-entropy (nats per token) of `idx` `[B, T]` against `targets` `[B, T]`.
    ///
    /// # Errors
    /// As [`Gpt::forward`].
    pub fn loss(&self, idx: &Tensor, targets: &Tensor) -> Result<Tensor, ModelError> {
        let logits = self.forward(idx)?;
        Ok(logits
            .view([-1, self.cfg.vocab])
            .cross_entropy_loss::<Tensor>(&targets.view([-1]), None, Reduction::Mean, -100, 0.0))
    }
}
