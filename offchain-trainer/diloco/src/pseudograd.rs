//! Pseudo-gradients and their wire encoding.

use synod_checkpoint::ParamSet;
use synod_codec::{DecodeLimits, Decoder, EncodeOptions, Header, TensorRef};

use crate::DilocoError;

/// A pseudo-gradient: one f32 vector per parameter tensor, in the [`ParamSet`]'s canonical order.
pub type PseudoGradient = Vec<Vec<f32>>;

/// Δ = θ_start − θ_local, element-wise (DiLoCo Algorithm 1, line 9).
///
/// # Errors
/// [`DilocoError::LayoutMismatch`] if the two sets differ in names or shapes.
pub fn pseudo_gradient(start: &ParamSet, local: &ParamSet) -> Result<PseudoGradient, DilocoError> {
    if !start.same_layout(local) {
        return Err(DilocoError::LayoutMismatch);
    }
    Ok(start
        .tensors()
        .iter()
        .zip(local.tensors())
        .map(|(a, b)| a.data.iter().zip(&b.data).map(|(x, y)| x - y).collect())
        .collect())
}

/// Encodes Δ with the layout of `like` (shapes only; names are implied by the pool's model).
///
/// # Errors
/// As [`synod_codec::encode`]; [`DilocoError::LayoutMismatch`] if Δ does not fit `like`.
pub fn encode_pseudo_gradient(
    like: &ParamSet,
    delta: &PseudoGradient,
    opts: &EncodeOptions,
) -> Result<Vec<u8>, DilocoError> {
    if delta.len() != like.tensors().len() {
        return Err(DilocoError::LayoutMismatch);
    }
    let refs: Vec<TensorRef<'_>> = like
        .tensors()
        .iter()
        .zip(delta)
        .map(|(t, d)| TensorRef {
            shape: &t.shape,
            data: d,
        })
        .collect();
    Ok(synod_codec::encode(&refs, opts)?)
}

/// The encoded pseudo-gradient inside `payload`, after its trace prefix and its
/// error-feedback commitments, if any.
fn codec_bytes(member: u32, payload: &[u8]) -> Result<&[u8], DilocoError> {
    crate::payload::Payload::parse(member, payload).map(|p| p.body)
}

/// The decoder's limits for payloads of a model laid out like `like`.
fn limits(like: &ParamSet) -> DecodeLimits {
    DecodeLimits::for_model(
        like.numel() as u64,
        u32::try_from(like.tensors().len()).unwrap_or(u32::MAX),
    )
}

/// Largest payload (encoded Δ and its trace) of a model laid out like `like`, in bytes: the
/// decoder's own input limit (5 bytes per parameter + 1 MiB; [`DecodeLimits::for_model`]) plus
/// [`crate::trace::MAX_TRACE_BYTES`] and [`crate::residual::COMMITMENT_BYTES`]. A fetch refuses a larger announced size before a byte is
/// transferred, since no payload of this model decodes.
pub fn max_payload_bytes(like: &ParamSet) -> u64 {
    (limits(like).max_input_bytes
        + crate::trace::MAX_TRACE_BYTES
        + crate::residual::COMMITMENT_BYTES) as u64
}

/// Largest payload of a pool whose codec is `opts`, for a model laid out like `like`, in
/// bytes: [`synod_codec::max_encoded_len`] of its shapes plus the trace and the commitments,
/// never above [`max_payload_bytes`] (what any codec's payload of this model decodes from).
/// A sparse pool's bound is a few percent of a dense one's, so a member cannot make every
/// other member fetch and keep a dense-sized payload in it.
pub fn max_payload_bytes_for(like: &ParamSet, opts: &EncodeOptions) -> u64 {
    let shapes: Vec<&[usize]> = like.tensors().iter().map(|t| t.shape.as_slice()).collect();
    synod_codec::max_encoded_len(&shapes, opts)
        .saturating_add((crate::trace::MAX_TRACE_BYTES + crate::residual::COMMITMENT_BYTES) as u64)
        .min(max_payload_bytes(like))
}

/// Decodes member `member`'s payload (its trace, if any, skipped), checking it against the
/// layout of `like`.
///
/// # Errors
/// [`DilocoError::Trace`] for a malformed trace prefix, [`DilocoError::Decode`] for a malformed payload, [`DilocoError::Layout`] for a payload whose
/// shapes are not the model's.
pub fn decode_pseudo_gradient(
    like: &ParamSet,
    member: u32,
    payload: &[u8],
) -> Result<PseudoGradient, DilocoError> {
    let decoded = synod_codec::decode(codec_bytes(member, payload)?, &limits(like))
        .map_err(|source| DilocoError::Decode { member, source })?;
    check_layout(like, member, &decoded.header)?;
    Ok(decoded.tensors)
}

fn check_layout(like: &ParamSet, member: u32, header: &Header) -> Result<(), DilocoError> {
    let fits = header.shapes.len() == like.tensors().len()
        && header
            .shapes
            .iter()
            .zip(like.tensors())
            .all(|(s, t)| *s == t.shape);
    if fits {
        Ok(())
    } else {
        Err(DilocoError::Layout { member })
    }
}

/// Opens member `member`'s payload for decoding one tensor at a time (after the same checks
/// as [`decode_pseudo_gradient`] on its header and checksum), and returns it with the
/// payload's L2 norm ([`crate::l2_norm`] of the decoded Δ, computed tensor by tensor, which
/// also checks every frame). Holds one decoded tensor at a time.
///
/// # Errors
/// As [`decode_pseudo_gradient`].
pub fn open_pseudo_gradient<'a>(
    like: &ParamSet,
    member: u32,
    payload: &'a [u8],
) -> Result<(Decoder<'a>, f64), DilocoError> {
    let err = |source| DilocoError::Decode { member, source };
    let d = Decoder::new(codec_bytes(member, payload)?, &limits(like)).map_err(err)?;
    check_layout(like, member, d.header())?;
    let mut acc = 0.0;
    for t in 0..like.tensors().len() {
        acc = crate::aggregate::sum_of_squares(acc, &d.tensor(t).map_err(err)?);
    }
    Ok((d, acc.sqrt()))
}
