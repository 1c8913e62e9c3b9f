//! The Synod events a trainer follows, decoded from finalized blocks.

use scale_decode::DecodeAsType;

use crate::types::{AccountId, Verdict};

/// An event of the Synod pallets that changes what a trainer does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SynodEvent {
    /// `Checkpoints.RoundOpened`: `round` of `pool` is open until block `deadline`.
    RoundOpened {
        /// Pool.
        pool: u32,
        /// Round.
        round: u32,
        /// Block at which it is voided unless final.
        deadline: u32,
    },
    /// `Checkpoints.CheckpointFinalized`: `round` of `pool` is final at `hash`.
    CheckpointFinalized {
        /// Pool.
        pool: u32,
        /// Round.
        round: u32,
        /// blake3 of the final checkpoint.
        hash: [u8; 32],
    },
    /// `Checkpoints.CheckpointCommitted`: the chain recorded `who`'s commit of `hash` for
    /// `round` (a commit from the round's deadline on is refused: `DeadlinePassed`).
    CheckpointCommitted {
        /// Pool.
        pool: u32,
        /// Round.
        round: u32,
        /// Committer.
        who: AccountId,
        /// blake3 of the committed checkpoint.
        hash: [u8; 32],
    },
    /// `Checkpoints.RoundVoided`: `round` closed without a quorum.
    RoundVoided {
        /// Pool.
        pool: u32,
        /// Round.
        round: u32,
    },
    /// `Checkpoints.IncludedSetAgreed`: the members' included sets of open `round` split and
    /// the chain fixed `included` (member indices, ascending); committers of another set may
    /// commit once more over it.
    IncludedSetAgreed {
        /// Pool.
        pool: u32,
        /// Round.
        round: u32,
        /// The included set fixed for the round.
        included: Vec<u32>,
    },
    /// `TrainingPools.PoolCompleted`: no more rounds.
    PoolCompleted {
        /// Pool.
        pool: u32,
    },
    /// `Challenges.Ruled`: a committee's ruling on `challenge`, which executes at block
    /// `executes_at` unless the losing party appeals first (the event names no pool: read the
    /// challenge for it).
    Ruled {
        /// Challenge id.
        challenge: u32,
        /// The ruling (`Guilty` or `Innocent`).
        verdict: Verdict,
        /// Block at which it executes unless appealed.
        executes_at: u32,
    },
    /// `Rewards.RewardsClaimed`: `who` was paid `amount` planck.
    RewardsClaimed {
        /// Pool.
        pool: u32,
        /// Account paid.
        who: AccountId,
        /// Planck.
        amount: u128,
    },
}

impl SynodEvent {
    /// The pool the event is about; `None` for a ruling (its event names only the challenge).
    pub fn pool(&self) -> Option<u32> {
        match self {
            SynodEvent::RoundOpened { pool, .. }
            | SynodEvent::CheckpointFinalized { pool, .. }
            | SynodEvent::CheckpointCommitted { pool, .. }
            | SynodEvent::RoundVoided { pool, .. }
            | SynodEvent::IncludedSetAgreed { pool, .. }
            | SynodEvent::PoolCompleted { pool }
            | SynodEvent::RewardsClaimed { pool, .. } => Some(*pool),
            SynodEvent::Ruled { .. } => None,
        }
    }
}

#[derive(DecodeAsType)]
struct PoolRound {
    pool_id: u32,
    round: u32,
}

#[derive(DecodeAsType)]
struct Opened {
    pool_id: u32,
    round: u32,
    deadline: u32,
}

#[derive(DecodeAsType)]
struct Finalized {
    pool_id: u32,
    round: u32,
    hash: [u8; 32],
}

#[derive(DecodeAsType)]
struct Committed {
    pool_id: u32,
    round: u32,
    who: AccountId,
    hash: [u8; 32],
}

#[derive(DecodeAsType)]
struct Agreed {
    pool_id: u32,
    round: u32,
    included: Vec<u32>,
}

#[derive(DecodeAsType)]
struct PoolOnly {
    pool_id: u32,
}

#[derive(DecodeAsType)]
struct Ruled {
    challenge_id: u32,
    verdict: Verdict,
    executes_at: u32,
}

#[derive(DecodeAsType)]
struct Claimed {
    pool_id: u32,
    who: AccountId,
    amount: u128,
}

/// Decodes one event by pallet and variant name; `None` for events a trainer ignores.
///
/// # Errors
/// [`crate::ChainError::Decode`] if a known event has unexpected fields.
pub fn decode<T: subxt::config::Config>(
    ev: &subxt::events::Event<'_, T>,
) -> Result<Option<SynodEvent>, crate::ChainError> {
    let what = || format!("{}.{}", ev.pallet_name(), ev.event_name());
    let err = |e: subxt::error::EventsError| crate::ChainError::decode(&what(), e);
    Ok(Some(match (ev.pallet_name(), ev.event_name()) {
        ("Checkpoints", "RoundOpened") => {
            let e: Opened = ev.decode_fields_unchecked_as().map_err(err)?;
            SynodEvent::RoundOpened {
                pool: e.pool_id,
                round: e.round,
                deadline: e.deadline,
            }
        }
        ("Checkpoints", "CheckpointFinalized") => {
            let e: Finalized = ev.decode_fields_unchecked_as().map_err(err)?;
            SynodEvent::CheckpointFinalized {
                pool: e.pool_id,
                round: e.round,
                hash: e.hash,
            }
        }
        ("Checkpoints", "CheckpointCommitted") => {
            let e: Committed = ev.decode_fields_unchecked_as().map_err(err)?;
            SynodEvent::CheckpointCommitted {
                pool: e.pool_id,
                round: e.round,
                who: e.who,
                hash: e.hash,
            }
        }
        ("Checkpoints", "RoundVoided") => {
            let e: PoolRound = ev.decode_fields_unchecked_as().map_err(err)?;
            SynodEvent::RoundVoided {
                pool: e.pool_id,
                round: e.round,
            }
        }
        ("Checkpoints", "IncludedSetAgreed") => {
            let e: Agreed = ev.decode_fields_unchecked_as().map_err(err)?;
            SynodEvent::IncludedSetAgreed {
                pool: e.pool_id,
                round: e.round,
                included: e.included,
            }
        }
        (_, "PoolCompleted") => {
            let e: PoolOnly = ev.decode_fields_unchecked_as().map_err(err)?;
            SynodEvent::PoolCompleted { pool: e.pool_id }
        }
        ("Challenges", "Ruled") => {
            let e: Ruled = ev.decode_fields_unchecked_as().map_err(err)?;
            SynodEvent::Ruled {
                challenge: e.challenge_id,
                verdict: e.verdict,
                executes_at: e.executes_at,
            }
        }
        ("Rewards", "RewardsClaimed") => {
            let e: Claimed = ev.decode_fields_unchecked_as().map_err(err)?;
            SynodEvent::RewardsClaimed {
                pool: e.pool_id,
                who: e.who,
                amount: e.amount,
            }
        }
        _ => return Ok(None),
    }))
}
