//! The extrinsics a trainer submits, as dynamic payloads (pallet and call names of `pallets/*`;
//! arguments are encoded against the metadata, so a mismatch is a typed error, not a bad call).
//! Every one is checked against the runtime's own metadata by a unit test
//! (`every_call_encodes_against_the_runtimes_metadata`), so a call renamed or reshaped in a
//! pallet fails the tests, not a trainer's first submission to a node.

use subxt::transactions::DynamicPayload;

use crate::types::{AccountId, PoolSpec};
pub use synod_protocol::Dispute;

/// Bound on a stored libp2p peer id (`MaxPeerIdLen`), in bytes; `join_pool` takes Ed25519 peer
/// ids only ([`synod_protocol::peer::ED25519_PEER_ID_LEN`] bytes).
pub const MAX_PEER_ID_LEN: usize = 64;
/// Length of an ML-DSA-65 public key, in bytes (the protocol's
/// [`synod_protocol::evidence::PUBLIC_KEY_LEN`]).
pub use synod_protocol::evidence::PUBLIC_KEY_LEN as ML_DSA_65_PUBLIC_KEY_LEN;

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

/// `TrainingPools.set_allowed_trainers(pool_id, allowed)`: the creator replaces the accounts
/// that may join `pool` (empty: anyone).
pub fn set_allowed_trainers(pool: u32, allowed: Vec<AccountId>) -> Call<(u32, Vec<AccountId>)> {
    subxt::dynamic::tx("TrainingPools", "set_allowed_trainers", (pool, allowed))
}

/// `TrainingPools.join_pool(pool_id, stake, peer_id, ml_dsa_key, peer_id_proof)`:
/// `peer_id_proof` is the peer id's Ed25519 key's signature over
/// [`synod_protocol::peer::proof_message`]`(genesis hash, pool, account)`
/// ([`crate::Chain::genesis_hash`]).
///
/// # Errors
/// [`crate::ChainError::Invalid`] if `peer_id` is not an Ed25519 peer id
/// ([`synod_protocol::peer::ed25519_key`]: the chain would refuse it, `InvalidPeerId`) or
/// `ml_dsa_key` is not [`ML_DSA_65_PUBLIC_KEY_LEN`] bytes.
#[allow(clippy::type_complexity)]
pub fn join_pool(
    pool: u32,
    stake: u128,
    peer_id: Vec<u8>,
    ml_dsa_key: &[u8],
    peer_id_proof: [u8; synod_protocol::peer::PEER_ID_PROOF_LEN],
) -> Result<Call<(u32, u128, Vec<u8>, Vec<u8>, [u8; 64])>, crate::ChainError> {
    if synod_protocol::peer::ed25519_key(&peer_id).is_none() {
        return Err(crate::ChainError::Invalid(format!(
            "peer id of {} bytes is not an Ed25519 peer id",
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
        (pool, stake, peer_id, ml_dsa_key.to_vec(), peer_id_proof),
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

/// `Challenges.open_challenge(pool_id, round, accused, evidence)`: disputes `accused`'s
/// contribution to final `round`; `evidence` is its signed announcement of the payload, exactly
/// as gossiped (at most `synod_protocol::evidence::MAX_MESSAGE_BYTES`). Holds the runtime's
/// `ChallengeBond` from the caller.
///
/// # Errors
/// [`crate::ChainError::Invalid`] if `evidence` is over the size limit.
#[allow(clippy::type_complexity)]
pub fn open_challenge(
    pool: u32,
    round: u32,
    accused: AccountId,
    evidence: Vec<u8>,
) -> Result<Call<(u32, u32, AccountId, Vec<u8>)>, crate::ChainError> {
    check_evidence_len(&evidence)?;
    Ok(subxt::dynamic::tx(
        "Challenges",
        "open_challenge",
        (pool, round, accused, evidence),
    ))
}

/// Refuses challenge evidence over `synod_protocol::evidence::MAX_MESSAGE_BYTES`.
fn check_evidence_len(evidence: &[u8]) -> Result<(), crate::ChainError> {
    let max = synod_protocol::evidence::MAX_MESSAGE_BYTES;
    if evidence.len() > max {
        return Err(crate::ChainError::Invalid(format!(
            "evidence of {} bytes (max {max})",
            evidence.len()
        )));
    }
    Ok(())
}

/// `Challenges.open_narrowed_challenge(pool_id, round, accused, evidence, dispute)`:
/// [`open_challenge`] narrowed to one part of the accused's Proof-of-Learning trace
/// (`dispute`), which is all its jurors check.
///
/// # Errors
/// [`crate::ChainError::Invalid`] if `evidence` is over the size limit or `dispute` names a
/// segment no trace has ([`Dispute::is_valid`]).
#[allow(clippy::type_complexity)]
pub fn open_narrowed_challenge(
    pool: u32,
    round: u32,
    accused: AccountId,
    evidence: Vec<u8>,
    dispute: Dispute,
) -> Result<Call<(u32, u32, AccountId, Vec<u8>, Dispute)>, crate::ChainError> {
    check_evidence_len(&evidence)?;
    if !dispute.is_valid() {
        return Err(crate::ChainError::Invalid(format!(
            "{dispute:?} names a segment past the longest trace"
        )));
    }
    Ok(subxt::dynamic::tx(
        "Challenges",
        "open_narrowed_challenge",
        (pool, round, accused, evidence, dispute),
    ))
}

/// `Challenges.report_equivocation(pool_id, round, accused, first, second)`: proves that
/// `accused` signed two different payloads for `round` (its two signed announcements, exactly as
/// gossiped); the runtime verifies both and slashes it at once, paying the caller a share.
///
/// # Errors
/// [`crate::ChainError::Invalid`] if either message is over the size limit
/// (`synod_protocol::evidence::MAX_MESSAGE_BYTES`).
#[allow(clippy::type_complexity)]
pub fn report_equivocation(
    pool: u32,
    round: u32,
    accused: AccountId,
    first: Vec<u8>,
    second: Vec<u8>,
) -> Result<Call<(u32, u32, AccountId, Vec<u8>, Vec<u8>)>, crate::ChainError> {
    let max = synod_protocol::evidence::MAX_MESSAGE_BYTES;
    if let Some(len) = [first.len(), second.len()].into_iter().find(|l| *l > max) {
        return Err(crate::ChainError::Invalid(format!(
            "announcement of {len} bytes (max {max})"
        )));
    }
    Ok(subxt::dynamic::tx(
        "Challenges",
        "report_equivocation",
        (pool, round, accused, first, second),
    ))
}

/// `Challenges.vote(challenge_id, guilty)`: a drawn juror's vote.
pub fn vote(challenge: u32, guilty: bool) -> Call<(u32, bool)> {
    subxt::dynamic::tx("Challenges", "vote", (challenge, guilty))
}

/// `Challenges.appeal(challenge_id)`: the losing party of a ruling (the accused of a guilty
/// one, the challenger of an innocent one) appeals it to a larger committee, holding the
/// runtime's `AppealBond`.
pub fn appeal(challenge: u32) -> Call<(u32,)> {
    subxt::dynamic::tx("Challenges", "appeal", (challenge,))
}

/// `Challenges.register_juror()`: opts back in to juries (every bonded trainer is a juror
/// until it opts out).
pub fn register_juror() -> Call<()> {
    subxt::dynamic::tx("Challenges", "register_juror", ())
}

/// `Challenges.unregister_juror()`: opts out of juries (challenges already open keep the
/// caller eligible, juries already drawn keep its seats).
pub fn unregister_juror() -> Call<()> {
    subxt::dynamic::tx("Challenges", "unregister_juror", ())
}

/// `Checkpoints.void_expired_round(pool_id)`: voids the pool's open round once its deadline
/// has passed (a round whose deadline found no room in the chain's per-block queue stays open
/// until this call voids it; commits are refused from the deadline on).
pub fn void_expired_round(pool: u32) -> Call<(u32,)> {
    subxt::dynamic::tx("Checkpoints", "void_expired_round", (pool,))
}

/// `Checkpoints.decide_unmatched_commits(pool_id, round)`: leaks the unmatched commits of a
/// voided round whose equivocation reports have closed, when the chain's per-block queue had no
/// room to decide them (free when it decides).
pub fn decide_unmatched_commits(pool: u32, round: u32) -> Call<(u32, u32)> {
    subxt::dynamic::tx("Checkpoints", "decide_unmatched_commits", (pool, round))
}

/// `Rewards.settle_round(pool_id, round)`: settles `round` once its settlement block has come
/// (any signed account): for a round the chain does not settle itself
/// ([`crate::types::PendingRound::scheduled`] false).
pub fn settle_round(pool: u32, round: u32) -> Call<(u32, u32)> {
    subxt::dynamic::tx("Rewards", "settle_round", (pool, round))
}

/// `Rewards.claim_rewards(pool_id)`: pays out everything settled for the caller.
pub fn claim_rewards(pool: u32) -> Call<(u32,)> {
    subxt::dynamic::tx("Rewards", "claim_rewards", (pool,))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::types::{DilocoSpec, Perbill, PoolKind, PoolTerms};
    use subxt::ext::frame_decode::extrinsics::encode_call_data;
    use subxt::metadata::Metadata;
    use subxt::transactions::Payload;

    /// The runtime's metadata at its latest version (what the node serves and subxt reads).
    pub(crate) fn runtime_metadata() -> Metadata {
        let version = synod_runtime::Runtime::metadata_versions()
            .into_iter()
            .filter(|v| *v != u32::MAX)
            .max()
            .expect("the runtime has metadata");
        let opaque = synod_runtime::Runtime::metadata_at_version(version).expect("that version");
        Metadata::decode_from(&opaque).expect("subxt reads the runtime's metadata")
    }

    /// `call` encoded against `metadata` as a submission would encode it.
    fn encode<C: Payload>(metadata: &Metadata, call: &C) -> Result<Vec<u8>, String> {
        encode_call_data(
            call.pallet_name(),
            call.call_name(),
            call.call_data(),
            metadata,
            metadata.types(),
        )
        .map_err(|e| format!("{}.{}: {e}", call.pallet_name(), call.call_name()))
    }

    /// Every extrinsic the trainer submits names a call of the runtime and its arguments
    /// encode to that call's types, checked against the runtime's own metadata rather than at
    /// a live node's first submission; a call the runtime does not have, or an argument of
    /// another shape, is refused.
    #[test]
    fn every_call_encodes_against_the_runtimes_metadata() {
        let m = runtime_metadata();
        let who = AccountId::from([7; 32]);
        let evidence = vec![1u8; 64];
        let spec = PoolSpec {
            terms: PoolTerms {
                rounds: 10,
                min_trainers: 2,
                max_trainers: 4,
                min_stake: 1_000,
                reward_per_round: 5_000,
                quorum: Perbill(666_666_667),
                round_timeout: 60,
                challenge_window: 20,
                min_round_length: 2,
                allowed_trainers: vec![who],
            },
            kind: PoolKind::DiLoCo(DilocoSpec {
                model_config_hash: [1; 32],
                initial_weights_hash: [2; 32],
                dataset_id: b"tinyshakespeare".to_vec(),
                dataset_hash: [3; 32],
                inner_steps: 50,
            }),
        };
        let peer_id = synod_protocol::peer::ed25519_peer_id(&[9; 32]).to_vec();
        let calls = [
            encode(&m, &bond(1)),
            encode(&m, &create_pool(spec)),
            encode(&m, &set_allowed_trainers(0, vec![who])),
            encode(
                &m,
                &join_pool(0, 1, peer_id, &[0; ML_DSA_65_PUBLIC_KEY_LEN], [0; 64]).expect("valid"),
            ),
            encode(&m, &commit_checkpoint(0, 1, [4; 32], vec![0, 1])),
            encode(
                &m,
                &open_challenge(0, 1, who, evidence.clone()).expect("valid"),
            ),
            encode(
                &m,
                &open_narrowed_challenge(0, 1, who, evidence.clone(), Dispute::Segment(3))
                    .expect("valid"),
            ),
            encode(
                &m,
                &open_narrowed_challenge(0, 1, who, evidence.clone(), Dispute::Encoding)
                    .expect("valid"),
            ),
            encode(
                &m,
                &report_equivocation(0, 1, who, evidence.clone(), evidence).expect("valid"),
            ),
            encode(&m, &vote(3, true)),
            encode(&m, &appeal(3)),
            encode(&m, &register_juror()),
            encode(&m, &unregister_juror()),
            encode(&m, &void_expired_round(0)),
            encode(&m, &decide_unmatched_commits(0, 1)),
            encode(&m, &settle_round(0, 1)),
            encode(&m, &claim_rewards(0)),
        ];
        for call in calls {
            if let Err(e) = call {
                panic!("the runtime refuses the trainer's call {e}");
            }
        }
        // The check can fail: a call the runtime does not have, and an argument of another
        // shape.
        let misnamed: Call<(u32,)> = subxt::dynamic::tx("Checkpoints", "void_round", (0u32,));
        assert!(encode(&m, &misnamed).is_err());
        let misshaped = subxt::dynamic::tx(
            "Checkpoints",
            "commit_checkpoint",
            (0u32, 1u32, [4; 32], vec![0u32], true),
        );
        assert!(encode(&m, &misshaped).is_err());
    }

    /// The runtime constants the client reads (`client.rs`) exist and decode as it reads them.
    #[test]
    fn every_constant_the_client_reads_decodes_from_the_runtimes_metadata() {
        use scale_decode::DecodeAsType;
        let m = runtime_metadata();
        let value = |pallet: &str, name: &str| {
            let c = m
                .pallet_by_name(pallet)
                .and_then(|p| p.constant_by_name(name))
                .unwrap_or_else(|| panic!("the runtime has no constant {pallet}.{name}"));
            (c.ty(), c.value().to_vec())
        };
        let (ty, bytes) = value("Aura", "SlotDuration");
        let slot = u64::decode_as_type(&mut &bytes[..], ty, m.types()).expect("u64");
        assert!(slot > 0);
        for name in ["ChallengeBond", "AppealBond"] {
            let (ty, bytes) = value("Challenges", name);
            u128::decode_as_type(&mut &bytes[..], ty, m.types()).expect("planck");
        }
        for (pallet, name) in [
            ("Checkpoints", "MaxDeadlinesPerBlock"),
            ("TrainingPools", "JuryDelay"),
            ("TrainingPools", "VoteMargin"),
            ("TrainingPools", "AppealPeriod"),
        ] {
            let (ty, bytes) = value(pallet, name);
            u32::decode_as_type(&mut &bytes[..], ty, m.types()).expect("u32");
        }
        let (_, bytes) = value("TrainingPools", "SpecLimits");
        <synod_protocol::SpecLimits as parity_scale_codec::Decode>::decode(&mut &bytes[..])
            .expect("SpecLimits");
    }
}
