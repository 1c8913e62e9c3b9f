//! Error feedback: what a lossy codec dropped this round is sent in a later one.
//!
//! Stich, Cordonnier and Jaggi, "Sparsified SGD with Memory" (NeurIPS 2018), Algorithm 1, and
//! SparseLoCo (2025, DiLoCo with top-k + error feedback): a member encodes `u = Δ_r + β·e` and
//! keeps `e ← u − decode(encode(u))`, so no coordinate's update is lost, only delayed. The
//! residual is taken against the *decoded* payload (what every peer aggregates), so it is
//! exactly what the pool has not yet received from this member.
//!
//! Only [`Mode::SparseTopK`] carries a residual. Int8 and fp32 lose ≤ 1 % per element and
//! keep no state, so their payloads stay a function of θ_{r−1} and the member's data alone
//! (what replay verification reproduces, `docs/architecture.md`).

use synod_checkpoint::ParamSet;
use synod_codec::{EncodeOptions, Mode};

use crate::{decode_pseudo_gradient, encode_pseudo_gradient, DilocoError, PseudoGradient};

/// One member's error-feedback memory (f32, the model's tensor layout; `None` until the first
/// sparse round). Keep one per member across rounds; a fresh one starts from zero.
#[derive(Clone, Debug)]
pub struct ErrorFeedback {
    residual: Option<PseudoGradient>,
    /// Whether sparse payloads commit to the residuals ([`crate::residual`]): a pool's.
    commits: bool,
    /// β: how much of the residual is carried into the next round (1 = classic error
    /// feedback; below 1 forgets stale mass geometrically).
    pub decay: f32,
}

impl Default for ErrorFeedback {
    /// β = 1 (Stich et al. 2018).
    fn default() -> Self {
        Self::new(1.0)
    }
}

impl ErrorFeedback {
    /// An empty memory with decay `decay` (β, 0..=1).
    pub fn new(decay: f32) -> Self {
        Self {
            residual: None,
            commits: false,
            decay,
        }
    }

    /// A pool member's memory for one round: `residual` is `e_{r−1}` as
    /// [`crate::residual::carried_in_rule`] names it (`None`: zero), and the sparse payloads
    /// [`crate::OuterState::contribute_traced`] makes with it carry their error-feedback
    /// commitments ([`crate::residual`]), so that verifiers can replay them.
    pub fn committed(decay: f32, residual: Option<PseudoGradient>) -> Self {
        Self {
            residual,
            commits: true,
            decay,
        }
    }

    /// Whether sparse payloads encoded with this memory carry commitments (a pool's).
    pub fn commits(&self) -> bool {
        self.commits
    }

    /// The residual carried into the next round: one f32 vector per tensor, or `None`.
    pub fn residual(&self) -> Option<&PseudoGradient> {
        self.residual.as_ref()
    }

    /// Encodes Δ with `opts`; in sparse mode encodes `Δ + β·e` and updates `e` to what the
    /// payload dropped. Returns the payload bytes.
    ///
    /// # Errors
    /// As [`encode_pseudo_gradient`] (a non-finite Δ or residual is refused and the memory is
    /// left unchanged); [`DilocoError::LayoutMismatch`] if Δ does not fit `like`.
    pub fn encode(
        &mut self,
        like: &ParamSet,
        mut delta: PseudoGradient,
        opts: &EncodeOptions,
    ) -> Result<Vec<u8>, DilocoError> {
        if opts.mode != Mode::SparseTopK {
            self.residual = None;
            return encode_pseudo_gradient(like, &delta, opts);
        }
        if let Some(e) = &self.residual {
            if e.len() != delta.len() || e.iter().zip(&delta).any(|(a, b)| a.len() != b.len()) {
                return Err(DilocoError::LayoutMismatch);
            }
            for (d, r) in delta.iter_mut().zip(e) {
                for (x, y) in d.iter_mut().zip(r) {
                    *x += self.decay * y;
                }
            }
        }
        let payload = encode_pseudo_gradient(like, &delta, opts)?;
        let sent = decode_pseudo_gradient(like, u32::MAX, &payload)?;
        for (u, s) in delta.iter_mut().zip(&sent) {
            for (x, y) in u.iter_mut().zip(s) {
                *x -= y;
            }
        }
        self.residual = Some(delta);
        Ok(payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use synod_checkpoint::NamedTensor;

    fn like(n: usize) -> ParamSet {
        ParamSet::new(vec![NamedTensor {
            name: "w".into(),
            shape: vec![n],
            data: vec![0.0; n],
        }])
        .unwrap()
    }

    #[test]
    fn nothing_is_lost_only_delayed() {
        // The same Δ every round: after r rounds, the decoded payloads plus the residual sum
        // to r·Δ exactly (up to f32 rounding), although each payload keeps 2 of 16 elements.
        let n = 16;
        let set = like(n);
        let delta: Vec<f32> = (0..n).map(|i| (i as f32 - 7.5) * 0.01).collect();
        let opts = EncodeOptions::sparse(16, 2);
        let mut ef = ErrorFeedback::default();
        let mut sent = vec![0f32; n];
        for _ in 0..5 {
            let p = ef.encode(&set, vec![delta.clone()], &opts).unwrap();
            let d = decode_pseudo_gradient(&set, 0, &p).unwrap();
            assert_eq!(d[0].iter().filter(|v| **v != 0.0).count(), 2);
            for (s, v) in sent.iter_mut().zip(&d[0]) {
                *s += v;
            }
        }
        let e = &ef.residual().unwrap()[0];
        for i in 0..n {
            assert!(
                (sent[i] + e[i] - 5.0 * delta[i]).abs() < 1e-5,
                "element {i}"
            );
        }
        // The memory rotates the selection: more coordinates than one round's 2 were sent.
        assert!(sent.iter().filter(|v| **v != 0.0).count() > 2);
    }

    #[test]
    fn dense_codecs_keep_no_residual() {
        let set = like(8);
        let mut ef = ErrorFeedback::default();
        let a = ef
            .encode(&set, vec![vec![0.5; 8]], &EncodeOptions::default())
            .unwrap();
        assert!(ef.residual().is_none());
        let b =
            encode_pseudo_gradient(&set, &vec![vec![0.5; 8]], &EncodeOptions::default()).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn a_non_finite_delta_leaves_the_memory_unchanged() {
        let set = like(4);
        let opts = EncodeOptions::sparse(4, 1);
        let mut ef = ErrorFeedback::default();
        ef.encode(&set, vec![vec![1.0, 2.0, 3.0, 4.0]], &opts)
            .unwrap();
        let before = ef.residual().cloned();
        assert!(ef
            .encode(&set, vec![vec![f32::NAN, 0.0, 0.0, 0.0]], &opts)
            .is_err());
        assert_eq!(ef.residual().cloned(), before);
    }
}
