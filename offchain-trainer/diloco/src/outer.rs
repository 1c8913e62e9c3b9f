//! The outer optimizer.

use synod_checkpoint::{NamedTensor, ParamSet};

use crate::{DilocoError, PseudoGradient};

/// SGD with Nesterov momentum, exactly `torch.optim.SGD(lr, momentum, nesterov=True)` with no
/// dampening or weight decay, applied to the outer gradient (DiLoCo §3: outer lr 0.7,
/// momentum 0.9):
///
/// ```text
/// m ← μ·m + g          (m starts at 0, so the first m is g, as in PyTorch)
/// θ ← θ − η·(g + μ·m)
/// ```
/// Plain f32 multiply and add in a fixed order (no fused multiply-add), so the update is
/// bit-reproducible on every machine.
#[derive(Clone, Debug, PartialEq)]
pub struct NesterovSgd {
    /// Outer learning rate η.
    pub lr: f32,
    /// Momentum μ (0 disables momentum: θ ← θ − η·g).
    pub momentum: f32,
    /// Momentum buffer m, one vector per tensor (empty until the first step).
    pub buf: PseudoGradient,
}

impl NesterovSgd {
    /// A fresh optimizer with a zero momentum buffer.
    pub fn new(lr: f32, momentum: f32) -> Self {
        Self {
            lr,
            momentum,
            buf: Vec::new(),
        }
    }

    /// Applies one outer step to `params` with outer gradient `g`.
    ///
    /// # Errors
    /// [`DilocoError::LayoutMismatch`] if `g` (or a restored buffer) does not fit `params`;
    /// [`DilocoError::NonFinite`] if the step would leave a parameter or a momentum value
    /// non-finite (checked before θ or the momentum moves: a refused step leaves both as they
    /// were; a buffer that was empty is left as zeros, which is the same momentum).
    pub fn step(&mut self, params: &mut ParamSet, g: &PseudoGradient) -> Result<(), DilocoError> {
        let fits = |v: &PseudoGradient| {
            v.len() == params.tensors().len()
                && v.iter()
                    .zip(params.tensors())
                    .all(|(a, t)| a.len() == t.numel())
        };
        if !fits(g) {
            return Err(DilocoError::LayoutMismatch);
        }
        if self.buf.is_empty() {
            self.buf = g.iter().map(|t| vec![0.0; t.len()]).collect();
        } else if !fits(&self.buf) {
            return Err(DilocoError::LayoutMismatch);
        }
        let (lr, mu) = (self.lr, self.momentum);
        // (θ, m) after the step, the same f32 operations in the same order for the check and
        // the update.
        let next = |p: f32, gi: f32, mi: f32| {
            let m = mu * mi + gi;
            let d = gi + mu * m;
            (p - lr * d, m)
        };
        let finite = params
            .tensors()
            .iter()
            .zip(g)
            .zip(&self.buf)
            .all(|((t, grad), m)| {
                t.data.iter().zip(grad).zip(m).all(|((p, gi), mi)| {
                    let (p, m) = next(*p, *gi, *mi);
                    p.is_finite() && m.is_finite()
                })
            });
        if !finite {
            return Err(DilocoError::NonFinite);
        }
        for ((theta, grad), m) in params.data_mut().zip(g).zip(&mut self.buf) {
            for ((p, gi), mi) in theta.iter_mut().zip(grad).zip(m.iter_mut()) {
                (*p, *mi) = next(*p, *gi, *mi);
            }
        }
        Ok(())
    }

    /// The momentum buffer as named tensors with the layout of `like` (empty before the first step).
    pub fn state(&self, like: &ParamSet) -> ParamSet {
        let tensors = like
            .tensors()
            .iter()
            .zip(&self.buf)
            .map(|(t, m)| NamedTensor {
                name: t.name.clone(),
                shape: t.shape.clone(),
                data: m.clone(),
            })
            .collect();
        ParamSet::new(tensors).unwrap_or_default()
    }

    /// Restores the buffer from [`NesterovSgd::state`]'s output (an empty set resets it).
    ///
    /// # Errors
    /// [`DilocoError::LayoutMismatch`] if a non-empty `state` differs in layout from `like`.
    pub fn restore(&mut self, like: &ParamSet, state: &ParamSet) -> Result<(), DilocoError> {
        if state.tensors().is_empty() {
            self.buf.clear();
            return Ok(());
        }
        if !state.same_layout(like) {
            return Err(DilocoError::LayoutMismatch);
        }
        self.buf = state.tensors().iter().map(|t| t.data.clone()).collect();
        Ok(())
    }
}
