//! Replaying a member's inner phase (Proof-of-Learning re-execution, Jia et al. 2021, §4).

use std::time::Instant;

use anyhow::{bail, Result};
use synod_diloco::verify::{replay_distance, within_tolerance};
use synod_diloco::OuterState;
use synod_model::TchInnerTrainer;

use crate::chain_args::RecipeArgs;
use crate::pool::recipe::Recipe;

/// The result of one replay.
#[derive(Clone, Copy, Debug)]
pub struct Replay {
    /// Relative L2 distance between the claimed and the replayed pseudo-gradient
    /// ([`replay_distance`]); `f64::INFINITY` for a claimed payload that does not decode.
    pub distance: f64,
    /// Whether the distance is within the protocol's tolerance.
    pub honest: bool,
    /// Wall-clock seconds of the replay.
    pub secs: f64,
}

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

/// Replays inner phases of one pool's recipe, keeping one model replica between replays.
pub struct Replayer {
    inner_steps: u32,
    total_steps: u32,
    replica: Option<TchInnerTrainer>,
}

impl Replayer {
    /// A replayer for a pool of `inner_steps` H and `rounds` rounds.
    pub fn new(inner_steps: u32, rounds: u32) -> Self {
        Self {
            inner_steps,
            total_steps: rounds.saturating_mul(inner_steps),
            replica: None,
        }
    }

    /// Re-runs `member`'s inner phase of `round` from `parent` (the canonical checkpoint bytes
    /// of θ_{round−1} with its outer momentum), encodes it with the recipe's codec and compares
    /// it with `claimed` (the member's signed payload).
    ///
    /// # Errors
    /// A recipe that keeps AdamW moments across rounds (not replayable from θ alone), an
    /// unreadable parent checkpoint, libtorch errors.
    pub fn check(
        &mut self,
        recipe: &Recipe,
        args: &RecipeArgs,
        parent: &[u8],
        round: u32,
        member: u32,
        claimed: &[u8],
    ) -> Result<Replay> {
        if args.model.keep_inner_state {
            bail!("the recipe keeps inner optimizer state across rounds: replay is impossible");
        }
        let t0 = Instant::now();
        let set = synod_checkpoint::from_bytes(parent)?;
        let state = OuterState::from_checkpoint(
            set,
            args.outer.outer_lr,
            args.outer.outer_momentum,
            round.saturating_sub(1),
        )?;
        let replica = match &mut self.replica {
            Some(r) => r,
            None => self.replica.insert(recipe.setup.replica(
                &args.model,
                member,
                self.inner_steps,
                self.total_steps,
            )?),
        };
        replica.worker = member;
        let (replayed, _) = state.contribute(
            replica,
            member,
            &args.outer.encode_options(),
            &mut args.outer.feedback(),
        )?;
        let distance = replay_distance(&state.params, member, claimed, &replayed.payload)
            .unwrap_or(f64::INFINITY);
        Ok(Replay {
            distance,
            honest: within_tolerance(distance),
            secs: t0.elapsed().as_secs_f64(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn honest(_: &[u8]) -> Result<Replay> {
        Ok(Replay {
            distance: 1e-7,
            honest: true,
            secs: 0.0,
        })
    }

    #[test]
    fn accomplice_sham_challenge_with_a_second_signed_payload_convicts_the_cheater() {
        // The cheater gossiped `kept` (honest work) but signed a second payload for the round,
        // which an accomplice uses as evidence: no juror holds those bytes to replay, yet the
        // two digests under one key for one round are proof enough.
        let kept = b"the payload everyone fetched";
        let other = *blake3::hash(b"a payload never gossiped").as_bytes();
        assert!(juror_vote(kept, &other, honest).unwrap().0);
        // The same payload is judged by its replay.
        let same = *blake3::hash(kept).as_bytes();
        assert_eq!(juror_vote(kept, &same, honest).unwrap(), (false, 1e-7));
        let bad = |_: &[u8]| {
            Ok(Replay {
                distance: 0.6,
                honest: false,
                secs: 0.0,
            })
        };
        assert_eq!(juror_vote(kept, &same, bad).unwrap(), (true, 0.6));
    }
}
