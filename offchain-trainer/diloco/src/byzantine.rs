//! Simulated Byzantine members, for benchmarks and tests of the aggregation rules
//! (`synod-trainer bench byzantine`, `tests/robust_aggregate.rs`).
//!
//! The adversary is omniscient: it sees every honest pseudo-gradient of the round before it
//! crafts its own (the strongest position a member can have, e.g. by announcing last).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use synod_checkpoint::ParamSet;
use synod_codec::EncodeOptions;

use crate::{
    aggregate::l2_norm, decode_pseudo_gradient, encode_pseudo_gradient, Contribution, DilocoError,
    PseudoGradient,
};

/// What a Byzantine member sends instead of its honest Δ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attack {
    /// −Δ_own: pushes the model back up the loss.
    SignFlip,
    /// 100 · Δ_own: one member dominates the mean.
    ScaleX100,
    /// The zero vector: free-riding that dilutes the mean.
    Zeros,
    /// Gaussian noise with 10× the RMS of Δ_own per coordinate.
    Gaussian,
    /// "A little is enough" (Baruch, Baruch & Goldberg 2019, NeurIPS, §3): per coordinate
    /// μ − z·σ of the honest Δs, z = 1, small enough to pass outlier filters.
    Alie,
    /// A copy of another member's Δ (member 0's, or the first honest one): free-riding.
    Copy,
}

impl Attack {
    /// Every attack, in a fixed order.
    pub const ALL: [Attack; 6] = [
        Attack::SignFlip,
        Attack::ScaleX100,
        Attack::Zeros,
        Attack::Gaussian,
        Attack::Alie,
        Attack::Copy,
    ];

    /// snake_case name (JSON key of `bench byzantine`).
    pub fn name(self) -> &'static str {
        match self {
            Attack::SignFlip => "sign_flip",
            Attack::ScaleX100 => "scale_x100",
            Attack::Zeros => "zeros",
            Attack::Gaussian => "gaussian",
            Attack::Alie => "alie",
            Attack::Copy => "copy",
        }
    }

    /// The adversary's Δ, given its own honest Δ (`own`) and the other members' honest Δs
    /// (`others`, same layout). `seed` drives the Gaussian attack.
    pub fn craft(
        self,
        own: &PseudoGradient,
        others: &[&PseudoGradient],
        seed: u64,
    ) -> PseudoGradient {
        let map = |f: &dyn Fn(f32) -> f32| -> PseudoGradient {
            own.iter()
                .map(|t| t.iter().map(|&x| f(x)).collect())
                .collect()
        };
        match self {
            Attack::SignFlip => map(&|x| -x),
            Attack::ScaleX100 => map(&|x| 100.0 * x),
            Attack::Zeros => map(&|_| 0.0),
            Attack::Gaussian => {
                let numel: usize = own.iter().map(Vec::len).sum();
                let sigma = 10.0 * l2_norm(own) / (numel.max(1) as f64).sqrt();
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                own.iter()
                    .map(|t| {
                        t.iter()
                            .map(|_| {
                                // Box–Muller: two uniforms in (0, 1] → one N(0, 1).
                                let u1: f64 = 1.0 - rng.random::<f64>();
                                let u2: f64 = rng.random::<f64>();
                                let z = (-2.0 * u1.ln()).sqrt()
                                    * (2.0 * std::f64::consts::PI * u2).cos();
                                (sigma * z) as f32
                            })
                            .collect()
                    })
                    .collect()
            }
            Attack::Alie => {
                let all: Vec<&PseudoGradient> =
                    std::iter::once(own).chain(others.iter().copied()).collect();
                let n = all.len() as f64;
                own.iter()
                    .enumerate()
                    .map(|(t, tensor)| {
                        (0..tensor.len())
                            .map(|k| {
                                let mean = all.iter().map(|g| f64::from(g[t][k])).sum::<f64>() / n;
                                let var = all
                                    .iter()
                                    .map(|g| (f64::from(g[t][k]) - mean).powi(2))
                                    .sum::<f64>()
                                    / n;
                                (mean - var.sqrt()) as f32
                            })
                            .collect()
                    })
                    .collect()
            }
            Attack::Copy => others.first().map_or_else(|| own.clone(), |g| (*g).clone()),
        }
    }
}

/// A Byzantine member of a local simulation: member `member` sends `attack` instead of its Δ.
#[derive(Clone, Copy, Debug)]
pub struct Adversary {
    /// The attacker's member index.
    pub member: u32,
    /// What it sends.
    pub attack: Attack,
    /// Seed of the attack's randomness (mixed with the round).
    pub seed: u64,
}

impl Adversary {
    /// Replaces the attacker's payload in `contributions` (encoded against the layout of
    /// `like` with `opts`) by its attack on the round's honest Δs, keeping the trace and the
    /// error-feedback commitments of its honest payload in front ([`crate::trace`],
    /// [`crate::residual`]). Contributions of other
    /// members are left untouched; without a contribution of `member` it does nothing.
    ///
    /// # Errors
    /// As [`decode_pseudo_gradient`] for the honest payloads and [`encode_pseudo_gradient`]
    /// for the crafted one.
    pub fn tamper(
        &self,
        like: &ParamSet,
        round: u32,
        contributions: &mut [Contribution],
        opts: &EncodeOptions,
    ) -> Result<(), DilocoError> {
        let mut own = None;
        let mut trace = None;
        let mut commitments = None;
        let mut others = Vec::new();
        for c in contributions.iter() {
            let d = decode_pseudo_gradient(like, c.member, &c.payload)?;
            if c.member == self.member {
                // The cheapest attacker keeps its honest trace and error-feedback commitments
                // in front of the crafted Δ.
                let parts = crate::payload::Payload::parse(c.member, &c.payload)?;
                trace = parts.trace;
                commitments = parts.commitments;
                own = Some(d);
            } else {
                others.push(d);
            }
        }
        let Some(own) = own else { return Ok(()) };
        let refs: Vec<&PseudoGradient> = others.iter().collect();
        let seed = self.seed ^ u64::from(round).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let crafted = self.attack.craft(&own, &refs, seed);
        let body = encode_pseudo_gradient(like, &crafted, opts)?;
        let payload = crate::payload::Payload {
            trace,
            commitments,
            body: &body,
        };
        let payload = std::sync::Arc::new(payload.to_bytes());
        for c in contributions.iter_mut().filter(|c| c.member == self.member) {
            c.payload = payload.clone();
        }
        Ok(())
    }
}
