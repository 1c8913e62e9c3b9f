//! Tests of the calls the chain client builds: the peer ids and key lengths they take.

use crate::{calls, ChainError};

#[test]
fn join_pool_rejects_oversized_peer_ids_and_wrong_key_lengths() {
    let key = vec![0u8; calls::ML_DSA_65_PUBLIC_KEY_LEN];
    let proof = [0u8; 64];
    let peer = synod_protocol::peer::ed25519_peer_id(&[5; 32]).to_vec();
    assert!(calls::join_pool(0, 1, peer.clone(), &key, proof).is_ok());
    // Not an Ed25519 peer id: too long, another key type.
    assert!(matches!(
        calls::join_pool(0, 1, vec![0; calls::MAX_PEER_ID_LEN + 1], &key, proof),
        Err(ChainError::Invalid(_))
    ));
    let mut secp = peer.clone();
    secp[3] = 2;
    assert!(matches!(
        calls::join_pool(0, 1, secp, &key, proof),
        Err(ChainError::Invalid(_))
    ));
    assert!(matches!(
        calls::join_pool(0, 1, peer, &key[1..], proof),
        Err(ChainError::Invalid(_))
    ));
}

#[test]
fn module_errors_are_matched_by_pallet_and_name() {
    let e = ChainError::Module {
        pallet: "Checkpoints".into(),
        error: "AlreadyCommitted".into(),
        docs: String::new(),
    };
    assert!(e.is_module("Checkpoints", "AlreadyCommitted"));
    assert!(!e.is_module("Checkpoints", "RoundClosed"));
    assert!(!ChainError::Rpc("x".into()).is_module("Checkpoints", "AlreadyCommitted"));
}
