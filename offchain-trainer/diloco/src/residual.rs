//! Error-feedback commitments: how a sparse payload stays verifiable by replay in a pool.
//!
//! With error feedback (Stich et al. 2018, Algorithm 1; [`crate::ErrorFeedback`]) member i
//! sends `P_r = Q(u_r)` with `u_r = Δ_r + β·e_{r−1}` and keeps `e_r = u_r − decode(P_r)`.
//! `Δ_r` is a pure function of θ_{r−1} and i's batches (a verifier replays it), `e_{r−1}` is
//! not: it is i's private memory. So a pool's sparse payload commits to it. Between its trace
//! (if any) and the encoded pseudo-gradient it carries two blake3 hashes, signed with the
//! payload's digest:
//!
//! - `carried_in`: of `e_{r−1}`, the residual the payload was encoded with, which must be
//!   [`carried_in_rule`]: `carried_out` of i's round r − 1 payload if i is in round r − 1's
//!   final included set, else [`NO_RESIDUAL`] (zero memory: round 1, a member that missed
//!   round r − 1 or was left out of it, a voided round r − 1, which has no included set);
//! - `carried_out`: of `e_r`, the residual it leaves for round r + 1.
//!
//! Both residuals are `synod-checkpoint` bytes (f32, the model's tensor names and shapes,
//! [`residual_bytes`]) that the member stores and serves by hash, as it serves its trace's
//! states. A verifier of round r
//! 1. checks `carried_in` against the rule, from i's round r − 1 payload and the final included
//!    set of round r − 1;
//! 2. fetches `e_{r−1}` (unless [`NO_RESIDUAL`]) and `e_r` and checks their hashes;
//! 3. replays Δ_r, encodes `Δ_r + β·e_{r−1}` and compares it with `P_r` ([`crate::verify`]'s
//!    distance and tolerance);
//! 4. checks `e_r` with [`carried_distance`]: the replayed `u_r` minus the decoded *claimed*
//!    payload must be within the same tolerance of the served `e_r`.
//!
//! A member that lies about `e_r` is caught in round r (step 4) with the probability that a
//! lie about `P_r` is; one that starts round r + 1 from another residual is caught by step 1.
//!
//! Wire form: `"SYEF"`, `carried_in` (32 bytes), `carried_out` (32 bytes), then the
//! `synod-codec` payload, behind the trace if any ([`crate::payload`]). Dense payloads (int8, fp32) carry no commitments.

use synod_checkpoint::{NamedTensor, ParamSet};

use crate::{decode_pseudo_gradient, DilocoError, PseudoGradient};

/// First four bytes of a payload's commitments.
pub const RESIDUAL_MAGIC: [u8; 4] = *b"SYEF";
/// Bytes the commitments add in front of the encoded pseudo-gradient.
pub const COMMITMENT_BYTES: usize = 4 + 64;
/// The hash that stands for a zero (empty) residual: nothing is fetched for it.
pub const NO_RESIDUAL: [u8; 32] = [0; 32];

/// A sparse payload's error-feedback commitments (blake3 of [`residual_bytes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Commitments {
    /// The residual the payload was encoded with (`e_{r−1}`), or [`NO_RESIDUAL`].
    pub carried_in: [u8; 32],
    /// The residual it leaves for the next round (`e_r`), or [`NO_RESIDUAL`].
    pub carried_out: [u8; 32],
}

/// Why a payload's commitments are malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResidualError {
    /// Fewer than [`COMMITMENT_BYTES`] after the magic.
    #[error("the error-feedback commitments are truncated")]
    Truncated,
}

/// `codec` (an encoded pseudo-gradient) with `commitments` in front.
pub(crate) fn with_commitments(commitments: &Commitments, codec: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(COMMITMENT_BYTES + codec.len());
    out.extend_from_slice(&RESIDUAL_MAGIC);
    out.extend_from_slice(&commitments.carried_in);
    out.extend_from_slice(&commitments.carried_out);
    out.extend_from_slice(codec);
    out
}

/// Splits `codec` (a payload after its trace) into its
/// commitments (`None` if it has none) and the encoded pseudo-gradient.
///
/// # Errors
/// [`ResidualError::Truncated`] if the magic is there and the hashes are not.
pub(crate) fn split_commitments(
    codec: &[u8],
) -> Result<(Option<Commitments>, &[u8]), ResidualError> {
    let Some(rest) = codec.strip_prefix(&RESIDUAL_MAGIC) else {
        return Ok((None, codec));
    };
    let (carried_in, rest) = rest
        .split_first_chunk::<32>()
        .ok_or(ResidualError::Truncated)?;
    let (carried_out, rest) = rest
        .split_first_chunk::<32>()
        .ok_or(ResidualError::Truncated)?;
    Ok((
        Some(Commitments {
            carried_in: *carried_in,
            carried_out: *carried_out,
        }),
        rest,
    ))
}

/// The commitments of a whole payload, `None` for a dense one
/// ([`crate::payload::Payload::parse`]).
///
/// # Errors
/// [`DilocoError::Trace`] / [`DilocoError::Residual`] for a malformed prefix of `member`'s
/// payload.
pub fn commitments_of(member: u32, payload: &[u8]) -> Result<Option<Commitments>, DilocoError> {
    crate::payload::Payload::parse(member, payload).map(|p| p.commitments)
}

/// The `carried_in` a member's round-r payload must commit to: `previous_out` (the
/// `carried_out` of its round r − 1 payload; `None` when it sent none) if it is in round
/// r − 1's final included set (`included`; a voided round has none), else [`NO_RESIDUAL`].
/// Error feedback across an exclusion starts over: what the excluded payload carried is
/// lost, never counted twice.
pub fn carried_in_rule(previous_out: Option<[u8; 32]>, included: bool) -> [u8; 32] {
    match previous_out {
        Some(h) if included => h,
        _ => NO_RESIDUAL,
    }
}

/// Largest residual ([`residual_bytes`]) of a model laid out like `like`, in bytes: 4 bytes
/// per parameter, 2 KiB of header per tensor, and 1 MiB. A peer offering a larger one is
/// refused before a byte is transferred.
pub fn max_residual_bytes(like: &ParamSet) -> u64 {
    crate::file_bound(like, 4, 2 << 10)
}

/// A residual as canonical `synod-checkpoint` bytes (f32 LE, 4 bytes per parameter plus the
/// safetensors header), with the tensor names and shapes of `like`, and their blake3.
///
/// # Errors
/// [`DilocoError::LayoutMismatch`] if `residual` does not fit `like`.
pub fn residual_bytes(
    like: &ParamSet,
    residual: &PseudoGradient,
) -> Result<(Vec<u8>, [u8; 32]), DilocoError> {
    if residual.len() != like.tensors().len()
        || residual
            .iter()
            .zip(like.tensors())
            .any(|(r, t)| r.len() != t.numel())
    {
        return Err(DilocoError::LayoutMismatch);
    }
    let set = ParamSet::new(
        like.tensors()
            .iter()
            .zip(residual)
            .map(|(t, r)| NamedTensor {
                name: t.name.clone(),
                shape: t.shape.clone(),
                data: r.clone(),
            })
            .collect(),
    )?;
    let bytes = synod_checkpoint::to_bytes(&set)?;
    let hash = synod_checkpoint::hash(&bytes);
    Ok((bytes, hash))
}

/// Parses served residual bytes ([`residual_bytes`]) against the layout of `like`; non-finite
/// values are refused (an honest residual is finite: its payload encoded).
///
/// # Errors
/// [`DilocoError::Checkpoint`] for bytes that do not parse, [`DilocoError::LayoutMismatch`]
/// for another layout or a non-finite value.
pub fn residual_from_bytes(like: &ParamSet, bytes: &[u8]) -> Result<PseudoGradient, DilocoError> {
    let set = synod_checkpoint::from_bytes(bytes)?;
    if !set.same_layout(like)
        || set
            .tensors()
            .iter()
            .any(|t| t.data.iter().any(|x| !x.is_finite()))
    {
        return Err(DilocoError::LayoutMismatch);
    }
    Ok(set.tensors().iter().map(|t| t.data.clone()).collect())
}

/// How far a served `e_r` (`claimed_out`) is from the residual an honest member would keep
/// after sending the claimed payload: ‖claimed_out − (u′ − decode(claimed))‖ / ‖u′ −
/// decode(claimed)‖, with the replayed `u′ = replay_residual + decode(replayed)` (what
/// [`crate::ErrorFeedback::encode`] leaves after encoding the replay: `u′ − decode(replayed)`).
/// Against the claimed payload, not the replayed one, so a top-k selection that a rounding
/// difference changed does not count. Sums in f64 in tensor order.
///
/// # Errors
/// [`DilocoError::Decode`] / [`DilocoError::Layout`] if a payload does not decode against
/// `like`, [`DilocoError::LayoutMismatch`] if a residual does not fit.
pub fn carried_distance(
    like: &ParamSet,
    member: u32,
    replay_residual: &PseudoGradient,
    replayed: &[u8],
    claimed: &[u8],
    claimed_out: &PseudoGradient,
) -> Result<f64, DilocoError> {
    let sent_replay = decode_pseudo_gradient(like, member, replayed)?;
    let sent_claim = decode_pseudo_gradient(like, member, claimed)?;
    let fits = |g: &PseudoGradient| {
        g.len() == like.tensors().len()
            && g.iter()
                .zip(like.tensors())
                .all(|(v, t)| v.len() == t.numel())
    };
    if !fits(replay_residual) || !fits(claimed_out) {
        return Err(DilocoError::LayoutMismatch);
    }
    let (mut diff, mut norm) = (0f64, 0f64);
    for (((e, a), b), c) in replay_residual
        .iter()
        .zip(&sent_replay)
        .zip(&sent_claim)
        .zip(claimed_out)
    {
        for (((e, a), b), c) in e.iter().zip(a).zip(b).zip(c) {
            let honest = f64::from(*e) + f64::from(*a) - f64::from(*b);
            let d = f64::from(*c) - honest;
            diff += d * d;
            norm += honest * honest;
        }
    }
    let diff = diff.sqrt();
    Ok(if norm > 0.0 { diff / norm.sqrt() } else { diff })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commitments_round_trip_and_a_dense_payload_passes_through() {
        let c = Commitments {
            carried_in: [1; 32],
            carried_out: [2; 32],
        };
        let p = with_commitments(&c, b"SYNGcodec");
        assert_eq!(p.len(), COMMITMENT_BYTES + 9);
        assert_eq!(split_commitments(&p).unwrap(), (Some(c), &b"SYNGcodec"[..]));
        assert_eq!(split_commitments(b"SYNGx").unwrap(), (None, &b"SYNGx"[..]));
    }

    #[test]
    fn every_truncation_of_the_commitments_is_a_typed_error() {
        let c = Commitments {
            carried_in: [3; 32],
            carried_out: [4; 32],
        };
        let p = with_commitments(&c, b"");
        for cut in 4..p.len() {
            assert_eq!(
                split_commitments(&p[..cut]),
                Err(ResidualError::Truncated),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn the_carried_in_rule_starts_over_after_an_exclusion() {
        assert_eq!(carried_in_rule(Some([5; 32]), true), [5; 32]);
        assert_eq!(carried_in_rule(Some([5; 32]), false), NO_RESIDUAL);
        assert_eq!(carried_in_rule(None, true), NO_RESIDUAL);
    }

    #[test]
    fn residual_bytes_round_trip_and_refuse_another_layout_or_non_finite_values() {
        let like = ParamSet::new(vec![
            NamedTensor {
                name: "a".into(),
                shape: vec![2, 2],
                data: vec![0.0; 4],
            },
            NamedTensor {
                name: "b".into(),
                shape: vec![3],
                data: vec![0.0; 3],
            },
        ])
        .unwrap();
        let e = vec![vec![1.0, -2.0, 3.5, 0.0], vec![0.25, 0.5, -0.75]];
        let (bytes, hash) = residual_bytes(&like, &e).unwrap();
        assert!(bytes.len() as u64 <= max_residual_bytes(&like));
        assert_eq!(hash, synod_checkpoint::hash(&bytes));
        assert_eq!(residual_from_bytes(&like, &bytes).unwrap(), e);
        assert!(matches!(
            residual_bytes(&like, &vec![vec![1.0; 4]]),
            Err(DilocoError::LayoutMismatch)
        ));
        let (nan, _) = residual_bytes(&like, &vec![vec![f32::NAN; 4], vec![0.0; 3]]).unwrap();
        assert!(matches!(
            residual_from_bytes(&like, &nan),
            Err(DilocoError::LayoutMismatch)
        ));
        let other = ParamSet::new(vec![NamedTensor {
            name: "a".into(),
            shape: vec![4],
            data: vec![0.0; 4],
        }])
        .unwrap();
        assert!(residual_from_bytes(&other, &bytes).is_err());
        assert!(residual_from_bytes(&like, &bytes[..bytes.len() - 1]).is_err());
    }
}
