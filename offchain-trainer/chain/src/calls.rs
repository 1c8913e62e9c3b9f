//! The extrinsics a trainer submits, as dynamic payloads (pallet and call names of `pallets/*`;
//! arguments are encoded against the metadata, so a mismatch is a typed error, not a bad call).

use subxt::transactions::DynamicPayload;

use crate::types::PoolSpec;

/// Largest libp2p peer id the chain accepts (`MaxPeerIdLen`), in bytes.
pub const MAX_PEER_ID_LEN: usize = 64;
/// Length of an ML-DSA-65 public key, in bytes.
pub const ML_DSA_65_PUBLIC_KEY_LEN: usize = 1952;

/// A dynamic call with its arguments.
pub type Call<A> = DynamicPayload<A>;

/// `TrainerStaking.bond(value)`: bonds `value` planck more (held from free balance).
pub fn bond(value: u128) -> Call<(u128,)> {
    subxt::dynamic::tx("TrainerStaking", "bond", (value,))
}

/// `TrainingPools.create_pool(spec)`; the reward budget `rounds × reward_per_round` is held
/// from the creator.
pub fn create_pool(spec: PoolSpec) -> Call<(PoolSpec,)> {
    subxt::dynamic::tx("TrainingPools", "create_pool", (spec,))
}

/// `TrainingPools.join_pool(pool_id, stake, peer_id, ml_dsa_key)`.
///
/// # Errors
/// [`crate::ChainError::Invalid`] if `peer_id` is over [`MAX_PEER_ID_LEN`] bytes or `ml_dsa_key`
/// is not [`ML_DSA_65_PUBLIC_KEY_LEN`] bytes.
#[allow(clippy::type_complexity)]
pub fn join_pool(
    pool: u32,
    stake: u128,
    peer_id: Vec<u8>,
    ml_dsa_key: &[u8],
) -> Result<Call<(u32, u128, Vec<u8>, Vec<u8>)>, crate::ChainError> {
    if peer_id.len() > MAX_PEER_ID_LEN {
        return Err(crate::ChainError::Invalid(format!(
            "peer id of {} bytes (max {MAX_PEER_ID_LEN})",
            peer_id.len()
        )));
    }
    if ml_dsa_key.len() != ML_DSA_65_PUBLIC_KEY_LEN {
        return Err(crate::ChainError::Invalid(format!(
            "ML-DSA-65 key of {} bytes (need {ML_DSA_65_PUBLIC_KEY_LEN})",
            ml_dsa_key.len()
        )));
    }
    Ok(subxt::dynamic::tx(
        "TrainingPools",
        "join_pool",
        (pool, stake, peer_id, ml_dsa_key.to_vec()),
    ))
}

/// `Checkpoints.commit_checkpoint(pool_id, round, checkpoint_hash, included)`; `included` must
/// be strictly increasing member indices.
pub fn commit_checkpoint(
    pool: u32,
    round: u32,
    hash: [u8; 32],
    included: Vec<u32>,
) -> Call<(u32, u32, [u8; 32], Vec<u32>)> {
    subxt::dynamic::tx(
        "Checkpoints",
        "commit_checkpoint",
        (pool, round, hash, included),
    )
}

/// `Rewards.claim_rewards(pool_id)`: pays out everything settled for the caller.
pub fn claim_rewards(pool: u32) -> Call<(u32,)> {
    subxt::dynamic::tx("Rewards", "claim_rewards", (pool,))
}
