//! The proof that a joiner holds the libp2p key its peer id names (`join_pool`'s
//! `peer_id_proof`): without it anyone could register a victim's peer id in a pool first and
//! keep the victim out (`PeerIdTaken`), or be credited with its messages.
//!
//! A member's libp2p identity is an Ed25519 key; its peer id is the key inlined in an identity
//! multihash ([libp2p peer-id spec], "Peer Ids": keys of at most 42 bytes are inlined): the
//! 6-byte prefix [`ED25519_PEER_ID_PREFIX`] (multihash code 0x00, length 36; the protobuf
//! `PublicKey { Type = Ed25519, Data = 32 bytes }`) and the 32-byte key, [`ED25519_PEER_ID_LEN`]
//! bytes in all. The proof is that key's Ed25519 signature (RFC 8032) over
//! [`proof_message`]`(genesis, pool, account)`, so it cannot be replayed on another chain, in
//! another pool or by another account. The runtime verifies it with the host's
//! `ed25519_verify`; the trainer signs it with its libp2p keypair.
//!
//! [libp2p peer-id spec]: https://github.com/libp2p/specs/blob/master/peer-ids/peer-ids.md

use alloc::vec::Vec;

/// Signing context of [`proof_message`].
pub const PEER_ID_PROOF_CONTEXT: &[u8] = b"synod/peer-id/1";
/// The bytes an Ed25519 peer id starts with: identity multihash (code 0x00, 36 bytes), then the
/// protobuf `PublicKey` header (field 1 `Type` = 1, Ed25519; field 2 `Data`, 32 bytes).
pub const ED25519_PEER_ID_PREFIX: [u8; 6] = [0x00, 0x24, 0x08, 0x01, 0x12, 0x20];
/// Bytes of an Ed25519 peer id: the prefix and the 32-byte public key.
pub const ED25519_PEER_ID_LEN: usize = ED25519_PEER_ID_PREFIX.len() + 32;
/// Bytes of the proof: one Ed25519 signature.
pub const PEER_ID_PROOF_LEN: usize = 64;

/// The Ed25519 public key `peer_id` names, or `None` if it is not an Ed25519 peer id (another
/// key type, a hashed key, or any other bytes).
pub fn ed25519_key(peer_id: &[u8]) -> Option<[u8; 32]> {
	if peer_id.len() != ED25519_PEER_ID_LEN {
		return None;
	}
	let (prefix, key) = peer_id.split_at(ED25519_PEER_ID_PREFIX.len());
	if prefix != ED25519_PEER_ID_PREFIX {
		return None;
	}
	key.try_into().ok()
}

/// The peer id of the Ed25519 public key `key` ([`ED25519_PEER_ID_LEN`] bytes).
pub fn ed25519_peer_id(key: &[u8; 32]) -> [u8; ED25519_PEER_ID_LEN] {
	let mut id = [0u8; ED25519_PEER_ID_LEN];
	let (prefix, rest) = id.split_at_mut(ED25519_PEER_ID_PREFIX.len());
	prefix.copy_from_slice(&ED25519_PEER_ID_PREFIX);
	rest.copy_from_slice(key);
	id
}

/// The bytes a joiner's peer-id key signs: `PEER_ID_PROOF_CONTEXT ‖ genesis ‖ pool (u32
/// little-endian) ‖ account`, where `genesis` is the chain's genesis block hash and `account`
/// the SCALE encoding of the joining account (an `AccountId32`'s 32 bytes).
pub fn proof_message(genesis: &[u8; 32], pool: u32, account: &[u8]) -> Vec<u8> {
	let mut m = Vec::with_capacity(PEER_ID_PROOF_CONTEXT.len() + 32 + 4 + account.len());
	m.extend_from_slice(PEER_ID_PROOF_CONTEXT);
	m.extend_from_slice(genesis);
	m.extend_from_slice(&pool.to_le_bytes());
	m.extend_from_slice(account);
	m
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn an_ed25519_peer_id_names_its_key_and_nothing_else_does() {
		let key = [7u8; 32];
		let id = ed25519_peer_id(&key);
		assert_eq!(ed25519_key(&id), Some(key));
		// Truncated, extended, another key type (secp256k1 = 2), a hashed (sha2-256) peer id.
		assert_eq!(ed25519_key(&id[..37]), None);
		assert_eq!(ed25519_key(&[&id[..], &[0]].concat()), None);
		let mut other_type = id;
		other_type[3] = 2;
		assert_eq!(ed25519_key(&other_type), None);
		let mut hashed = id;
		hashed[0] = 0x12;
		assert_eq!(ed25519_key(&hashed), None);
		assert_eq!(ed25519_key(&[]), None);
	}

	#[test]
	fn the_proof_message_binds_chain_pool_and_account() {
		let m = proof_message(&[1; 32], 7, &[2; 32]);
		assert_eq!(m.len(), PEER_ID_PROOF_CONTEXT.len() + 68);
		assert!(m.starts_with(PEER_ID_PROOF_CONTEXT));
		assert_ne!(m, proof_message(&[3; 32], 7, &[2; 32]));
		assert_ne!(m, proof_message(&[1; 32], 8, &[2; 32]));
		assert_ne!(m, proof_message(&[1; 32], 7, &[4; 32]));
	}

	/// The bytes Polkadot.js signs (`peerProofMessage` in `scripts/polkadot-js/user-path.mjs`,
	/// which checks the same vector) are the bytes the runtime verifies.
	#[test]
	fn the_proof_message_matches_the_known_answer_polkadot_js_checks() {
		assert_eq!(hex(&proof_message(&[1; 32], 7, &[2; 32])), PROOF_MESSAGE_KNOWN_ANSWER,);
	}

	/// `proof_message(&[1; 32], 7, &[2; 32])`, hex: the context, 32 × `01`, `07000000`, 32 × `02`.
	const PROOF_MESSAGE_KNOWN_ANSWER: &str = "73796e6f642f706565722d69642f31\
		0101010101010101010101010101010101010101010101010101010101010101\
		07000000\
		0202020202020202020202020202020202020202020202020202020202020202";

	fn hex(bytes: &[u8]) -> alloc::string::String {
		use core::fmt::Write;
		bytes.iter().fold(alloc::string::String::new(), |mut s, b| {
			let _ = write!(s, "{b:02x}");
			s
		})
	}
}
