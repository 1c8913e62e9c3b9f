//! The inner optimizer: AdamW (Loshchilov & Hutter 2019, Algorithm 2, decoupled weight decay)
//! written on tensor operations so that its state — the first and second moments and the step
//! count — can be read and restored. libtorch's own optimizer behind `tch::nn::Optimizer`
//! exposes neither, and Proof-of-Learning segments (Jia et al. 2021, §4.2) need both: a
//! verifier replays steps `j..j+k` of a member's inner phase from the member's full state at
//! step `j` ([`crate::segment`]).
//!
//! The update is PyTorch's single-tensor `torch.optim.AdamW` (`_single_tensor_adamw`): per
//! parameter p with gradient g, at step t ≥ 1 and learning rate η,
//! p ← p·(1 − η·λ) (matrices and embeddings only), m ← β₁m + (1 − β₁)g,
//! v ← β₂v + (1 − β₂)g², p ← p − (η / (1 − β₁ᵗ)) · m / (√v / √(1 − β₂ᵗ) + ε).

use synod_checkpoint::{NamedTensor, ParamSet};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use crate::gpt::DECAY_GROUP;
use crate::ModelError;

/// Name prefix of the first moments in a state set ([`AdamW::state`]).
pub const FIRST_MOMENT_PREFIX: &str = "adamw.m.";
/// Name prefix of the second moments in a state set.
pub const SECOND_MOMENT_PREFIX: &str = "adamw.v.";
/// Name of the step counter in a state set (one f32 element: exact up to 2²⁴ steps).
pub const STEP_NAME: &str = "adamw.step";

/// ε of the update (PyTorch's default).
const EPS: f64 = 1e-8;

/// One parameter with its moments.
struct Slot {
    name: String,
    var: Tensor,
    decays: bool,
    m: Tensor,
    v: Tensor,
}

/// AdamW over every variable of a [`VarStore`], in canonical (name) order.
pub struct AdamW {
    beta1: f64,
    beta2: f64,
    weight_decay: f64,
    slots: Vec<Slot>,
    step: u64,
}

impl AdamW {
    /// An optimizer for the variables of `vs` with zero moments. Weight decay λ applies to the
    /// variables of the model's decay group (matrices, embeddings), not to biases and norms.
    ///
    /// # Errors
    /// [`ModelError::Torch`] if the moments cannot be allocated.
    pub fn new(
        vs: &VarStore,
        beta1: f64,
        beta2: f64,
        weight_decay: f64,
    ) -> Result<Self, ModelError> {
        let decaying: Vec<usize> = {
            let vars = vs
                .variables_
                .lock()
                .map_err(|_| ModelError::Config("variable store lock poisoned".into()))?;
            vars.trainable_variables
                .iter()
                .filter(|v| v.group == DECAY_GROUP)
                .map(|v| v.tensor.data_ptr() as usize)
                .collect()
        };
        let mut named: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
        named.sort_by(|a, b| a.0.cmp(&b.0));
        let mut slots = Vec::with_capacity(named.len());
        for (name, var) in named {
            let decays = decaying.contains(&(var.data_ptr() as usize));
            let m = var.f_zeros_like()?;
            let v = var.f_zeros_like()?;
            slots.push(Slot {
                name,
                var,
                decays,
                m,
                v,
            });
        }
        Ok(Self {
            beta1,
            beta2,
            weight_decay,
            slots,
            step: 0,
        })
    }

    /// Steps taken since creation or the last [`AdamW::reset`].
    pub fn steps(&self) -> u64 {
        self.step
    }

    /// Zeroes the moments and the step count (a fresh optimizer).
    ///
    /// # Errors
    /// [`ModelError::Torch`] on libtorch errors.
    pub fn reset(&mut self) -> Result<(), ModelError> {
        tch::no_grad(|| {
            for s in &mut self.slots {
                let _ = s.m.f_zero_()?;
                let _ = s.v.f_zero_()?;
            }
            Ok::<_, ModelError>(())
        })?;
        self.step = 0;
        Ok(())
    }

    /// Clears every variable's gradient.
    pub fn zero_grad(&mut self) {
        for s in &mut self.slots {
            s.var.zero_grad();
        }
    }

    /// Scales the gradients so that their global L2 norm is at most `max` (PyTorch's
    /// `clip_grad_norm_`: factor `max / (norm + 10⁻⁶)` when below 1). Returns the norm before
    /// clipping.
    ///
    /// # Errors
    /// [`ModelError::Torch`] on libtorch errors.
    pub fn clip_grad_norm(&mut self, max: f64) -> Result<f64, ModelError> {
        tch::no_grad(|| {
            let norms: Vec<Tensor> = self
                .slots
                .iter()
                .map(|s| s.var.grad())
                .filter(Tensor::defined)
                .map(|g| g.f_norm())
                .collect::<Result<_, _>>()?;
            if norms.is_empty() {
                return Ok(0.0);
            }
            let total = f64::try_from(Tensor::f_stack(&norms, 0)?.f_norm()?)?;
            let coef = max / (total + 1e-6);
            if coef < 1.0 {
                for s in &self.slots {
                    let mut g = s.var.grad();
                    if g.defined() {
                        let _ = g.f_mul_scalar_(coef)?;
                    }
                }
            }
            Ok(total)
        })
    }

    /// One AdamW update of every variable that has a gradient, at learning rate `lr`.
    ///
    /// # Errors
    /// [`ModelError::Torch`] on libtorch errors.
    pub fn step(&mut self, lr: f64) -> Result<(), ModelError> {
        self.step += 1;
        let t = self.step as i32;
        let (b1, b2) = (self.beta1, self.beta2);
        let bias1 = 1.0 - b1.powi(t);
        let bias2_sqrt = (1.0 - b2.powi(t)).sqrt();
        let decay = 1.0 - lr * self.weight_decay;
        tch::no_grad(|| {
            for s in &mut self.slots {
                let g = s.var.grad();
                if !g.defined() {
                    continue;
                }
                if s.decays && self.weight_decay != 0.0 {
                    let _ = s.var.f_mul_scalar_(decay)?;
                }
                let _ = s.m.f_mul_scalar_(b1)?;
                let _ = s.m.f_add_(&g.f_mul_scalar(1.0 - b1)?)?;
                let _ = s.v.f_mul_scalar_(b2)?;
                let _ = s.v.f_add_(&g.f_square()?.f_mul_scalar(1.0 - b2)?)?;
                let denom = s.v.f_sqrt()?.f_div_scalar(bias2_sqrt)?.f_add_scalar(EPS)?;
                let update = s.m.f_div(&denom)?.f_mul_scalar(lr / bias1)?;
                let _ = s.var.f_sub_(&update)?;
            }
            Ok(())
        })
    }

    /// The optimizer's state as named host tensors: the first moments under
    /// [`FIRST_MOMENT_PREFIX`], the second under [`SECOND_MOMENT_PREFIX`] (each named after
    /// its parameter, same shape, f32) and the step count as [`STEP_NAME`].
    ///
    /// # Errors
    /// [`ModelError::Torch`] if a copy fails.
    pub fn state(&self) -> Result<Vec<NamedTensor>, ModelError> {
        let mut out = Vec::with_capacity(2 * self.slots.len() + 1);
        for s in &self.slots {
            let shape: Vec<usize> = s.var.size().iter().map(|d| *d as usize).collect();
            for (prefix, t) in [(FIRST_MOMENT_PREFIX, &s.m), (SECOND_MOMENT_PREFIX, &s.v)] {
                let flat = t.to_device(Device::Cpu).to_kind(Kind::Float).flatten(0, -1);
                out.push(NamedTensor {
                    name: format!("{prefix}{}", s.name),
                    shape: shape.clone(),
                    data: Vec::<f32>::try_from(&flat)?,
                });
            }
        }
        out.push(NamedTensor {
            name: STEP_NAME.into(),
            shape: vec![1],
            data: vec![self.step as f32],
        });
        Ok(out)
    }

    /// Restores the state from `set` (the tensors of [`AdamW::state`]; other tensors in `set`
    /// are ignored).
    ///
    /// # Errors
    /// [`ModelError::Layout`] for a missing or misshaped moment or step counter;
    /// [`ModelError::Torch`] on copy failure.
    pub fn restore(&mut self, set: &ParamSet) -> Result<(), ModelError> {
        let find = |name: &str| set.tensors().iter().find(|t| t.name == name);
        let step = find(STEP_NAME)
            .and_then(|t| t.data.first().copied())
            .filter(|s| s.is_finite() && *s >= 0.0 && s.fract() == 0.0)
            .ok_or_else(|| ModelError::Layout(STEP_NAME.into()))?;
        tch::no_grad(|| {
            for s in &mut self.slots {
                let shape = s.var.size();
                for (prefix, dst) in [
                    (FIRST_MOMENT_PREFIX, &mut s.m),
                    (SECOND_MOMENT_PREFIX, &mut s.v),
                ] {
                    let name = format!("{prefix}{}", s.name);
                    let t = find(&name)
                        .filter(|t| t.shape.iter().map(|d| *d as i64).eq(shape.iter().copied()))
                        .ok_or(ModelError::Layout(name))?;
                    let src = Tensor::from_slice(&t.data)
                        .view(shape.as_slice())
                        .to_device(dst.device());
                    dst.f_copy_(&src)?;
                }
            }
            Ok::<_, ModelError>(())
        })?;
        self.step = step as u64;
        Ok(())
    }
}
