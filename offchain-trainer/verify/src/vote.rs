//! A juror's vote: the one verdict function over a replay (`docs/architecture.md`, step 7).

use anyhow::Result;

use super::replay::Replay;

/// A juror's vote on a challenge disputing the payload with blake3 `disputed` (from the
/// on-chain evidence), given `kept`, the accused's payload as this juror fetched it against
/// the accused's own signed announcement: guilty if the two differ (the accused signed two
/// payloads for one round, whatever a replay says), otherwise guilty iff `replay(kept)` is
/// outside the tolerance. Returns (guilty, replay distance; ∞ for two payloads).
///
/// # Errors
/// Those of `replay`.
pub fn juror_vote(
    kept: &[u8],
    disputed: &[u8; 32],
    replay: impl FnOnce(&[u8]) -> Result<Replay>,
) -> Result<(bool, f64)> {
    if blake3::hash(kept).as_bytes() != disputed {
        return Ok((true, f64::INFINITY));
    }
    let r = replay(kept)?;
    Ok((!r.honest, r.distance))
}
