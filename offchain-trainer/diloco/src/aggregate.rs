//! Aggregation rules for the included set's pseudo-gradients.

use crate::{DilocoError, PseudoGradient};

/// Combines the decoded pseudo-gradients of the included set into one outer gradient.
///
/// Implementations must be deterministic functions of their input *in the order given*
/// (member-index order), so that all honest survivors get bit-identical results.
pub trait Aggregator: Send + Sync {
    /// Aggregates `inputs` (one per included member, ascending member index, equal layouts).
    ///
    /// # Errors
    /// [`DilocoError::Empty`] for no input, [`DilocoError::LayoutMismatch`] for unequal layouts.
    fn aggregate(
        &self,
        round: u32,
        inputs: &[&PseudoGradient],
    ) -> Result<PseudoGradient, DilocoError>;
}

/// The arithmetic mean (DiLoCo Algorithm 1, line 12): Σ Δ_i in input order, then × (1/n).
#[derive(Clone, Copy, Debug, Default)]
pub struct Mean;

impl Aggregator for Mean {
    fn aggregate(
        &self,
        round: u32,
        inputs: &[&PseudoGradient],
    ) -> Result<PseudoGradient, DilocoError> {
        let (first, rest) = inputs.split_first().ok_or(DilocoError::Empty(round))?;
        let mut sum: PseudoGradient = (*first).clone();
        for g in rest {
            if g.len() != sum.len() || g.iter().zip(&sum).any(|(a, b)| a.len() != b.len()) {
                return Err(DilocoError::LayoutMismatch);
            }
            for (s, x) in sum.iter_mut().zip(g.iter()) {
                for (a, b) in s.iter_mut().zip(x) {
                    *a += b;
                }
            }
        }
        let inv = 1.0 / inputs.len() as f32;
        for s in &mut sum {
            for a in s.iter_mut() {
                *a *= inv;
            }
        }
        Ok(sum)
    }
}
