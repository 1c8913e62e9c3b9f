//! Tests of the calls the chain client builds: their bounds on peer ids and key lengths.

use crate::{calls, ChainError};

#[test]
fn join_pool_rejects_oversized_peer_ids_and_wrong_key_lengths() {
    let key = vec![0u8; calls::ML_DSA_65_PUBLIC_KEY_LEN];
    assert!(calls::join_pool(0, 1, vec![0; calls::MAX_PEER_ID_LEN], &key).is_ok());
    assert!(matches!(
        calls::join_pool(0, 1, vec![0; calls::MAX_PEER_ID_LEN + 1], &key),
        Err(ChainError::Invalid(_))
    ));
    assert!(matches!(
        calls::join_pool(0, 1, vec![0; 38], &key[1..]),
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
