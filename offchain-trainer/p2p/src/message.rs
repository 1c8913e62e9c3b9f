//! Signed gossip messages (announcements, heartbeats, leaves) and their validation.
//!
//! The types and the wire form live in `synod_protocol::evidence` (the runtime checks the same
//! signed announcements as challenge evidence): SCALE-encoded [`Signed`], whose signature covers
//! `"synod/pseudograd/1" ‖ SCALE(Envelope)` — (pool, round, member, peer id, body); for an
//! announcement, the payload's blake3 digest and size (`docs/architecture.md`, step 3). This module adds
//! what only a trainer needs: signing with its [`MemberKey`] and opening a message against the
//! pool's [`MemberSet`] and round window.

use libp2p::PeerId;
use synod_protocol::evidence::EvidenceError;
pub use synod_protocol::evidence::{Body, Envelope, PayloadRef, Signed, DOMAIN, MAX_MESSAGE_BYTES};

use crate::{MemberKey, MemberSet};

/// Why a message was rejected. [`Rejection::penalized`] tells which ones get the sender banned.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Rejection {
    /// Over [`MAX_MESSAGE_BYTES`].
    #[error("message of {0} bytes is too large")]
    TooLarge(usize),
    /// Not a SCALE `Signed`.
    #[error("malformed message")]
    Malformed,
    /// For another pool.
    #[error("message for pool {0}")]
    WrongPool(u64),
    /// The member index is not in the allowed set (yet: registrations may lag; not penalized).
    #[error("sender is not a registered member")]
    NotMember,
    /// The envelope's peer id is not the one registered for its member index (impersonation).
    #[error("peer id does not match the member's registration")]
    PeerMismatch,
    /// The signature does not verify under the member's registered key.
    #[error("bad signature")]
    BadSignature,
    /// For a round that is over (or too far ahead).
    #[error("stale round {0}")]
    Stale(u32),
}

impl Rejection {
    /// Whether the sender provably misbehaved (malformed, forged, impersonating) rather than
    /// being merely early, late or for another pool.
    pub fn penalized(&self) -> bool {
        !matches!(
            self,
            Rejection::Stale(_) | Rejection::NotMember | Rejection::WrongPool(_)
        )
    }
}

/// Signs `envelope` with `key`.
pub fn sign(envelope: Envelope, key: &MemberKey) -> Signed {
    let signature = key.sign(&envelope.signing_bytes());
    Signed {
        envelope,
        signature,
    }
}

/// Decodes and validates a message: size, shape, pool, membership (index and peer id must
/// match the registration), round window `[min_round, min_round + 2]` (callers pass their
/// current round − 1: one round behind to one ahead), then the signature.
///
/// # Errors
/// The [`Rejection`] that applies first.
pub fn open(bytes: &[u8], members: &MemberSet, min_round: u32) -> Result<Envelope, Rejection> {
    let s = precheck(bytes, members, min_round)?;
    verify(&s, members)?;
    Ok(s.envelope)
}

/// Every check of [`open`] but the signature (the costly one: an ML-DSA-65 verification):
/// size, shape, pool, membership and round window. A receiver meters senders between the
/// two ([`verify`] after).
///
/// # Errors
/// The [`Rejection`] that applies first.
pub fn precheck(bytes: &[u8], members: &MemberSet, min_round: u32) -> Result<Signed, Rejection> {
    let s = Signed::decode_wire(bytes).map_err(|e| match e {
        EvidenceError::TooLarge => Rejection::TooLarge(bytes.len()),
        _ => Rejection::Malformed,
    })?;
    let e = &s.envelope;
    if e.pool != members.pool {
        return Err(Rejection::WrongPool(e.pool));
    }
    let m = members.get(e.member).ok_or(Rejection::NotMember)?;
    if PeerId::from_bytes(&e.peer_id).ok() != Some(m.peer_id) {
        return Err(Rejection::PeerMismatch);
    }
    if e.round < min_round || e.round > min_round.saturating_add(2) {
        return Err(Rejection::Stale(e.round));
    }
    Ok(s)
}

/// The signature check of a message that passed [`precheck`] against the same `members`.
///
/// # Errors
/// [`Rejection::NotMember`] if the member left the set meanwhile,
/// [`Rejection::BadSignature`].
pub fn verify(s: &Signed, members: &MemberSet) -> Result<(), Rejection> {
    let m = members.get(s.envelope.member).ok_or(Rejection::NotMember)?;
    s.verify(&m.key.0).map_err(|_| Rejection::BadSignature)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Member, MemberKey};
    use parity_scale_codec::Encode;

    fn setup() -> (MemberKey, PeerId, MemberSet) {
        let key = MemberKey::from_seed([1; 32]);
        let peer = libp2p::identity::Keypair::ed25519_from_bytes([1; 32])
            .unwrap()
            .public()
            .to_peer_id();
        let set = MemberSet::new(
            9,
            vec![Member {
                index: 0,
                peer_id: peer,
                key: key.public(),
            }],
        );
        (key, peer, set)
    }

    fn env(peer: PeerId, pool: u64, round: u32, member: u32) -> Envelope {
        Envelope {
            pool,
            round,
            member,
            peer_id: peer.to_bytes(),
            body: Body::Alive {
                seq: 1,
                payload: None,
            },
        }
    }

    #[test]
    fn valid_messages_open_and_every_defect_has_its_rejection() {
        let (key, peer, set) = setup();
        let ok = sign(env(peer, 9, 5, 0), &key).encode();
        assert_eq!(open(&ok, &set, 5).unwrap().round, 5);
        assert_eq!(open(&ok, &set, 4).unwrap().round, 5);
        assert_eq!(open(&ok, &set, 3).unwrap().round, 5);
        assert_eq!(open(&ok, &set, 6), Err(Rejection::Stale(5)));
        assert_eq!(open(&ok, &set, 2), Err(Rejection::Stale(5)));
        assert_eq!(
            open(&ok[..ok.len() - 1], &set, 5),
            Err(Rejection::Malformed)
        );
        assert_eq!(
            open(&[ok.clone(), vec![0]].concat(), &set, 5),
            Err(Rejection::Malformed)
        );
        assert_eq!(
            open(&vec![0; MAX_MESSAGE_BYTES + 1], &set, 5),
            Err(Rejection::TooLarge(MAX_MESSAGE_BYTES + 1))
        );
        let other_pool = sign(env(peer, 8, 5, 0), &key).encode();
        assert_eq!(open(&other_pool, &set, 5), Err(Rejection::WrongPool(8)));
        let unknown = sign(env(peer, 9, 5, 1), &key).encode();
        assert_eq!(open(&unknown, &set, 5), Err(Rejection::NotMember));
        let wrong_peer = libp2p::identity::Keypair::ed25519_from_bytes([2; 32])
            .unwrap()
            .public()
            .to_peer_id();
        let spoofed = sign(env(wrong_peer, 9, 5, 0), &key).encode();
        assert_eq!(open(&spoofed, &set, 5), Err(Rejection::PeerMismatch));
        assert!(
            Rejection::PeerMismatch.penalized()
                && Rejection::BadSignature.penalized()
                && Rejection::Malformed.penalized()
        );
        assert!(
            !Rejection::NotMember.penalized()
                && !Rejection::Stale(1).penalized()
                && !Rejection::WrongPool(1).penalized()
        );
        let forged = sign(env(peer, 9, 5, 0), &MemberKey::from_seed([3; 32])).encode();
        assert_eq!(open(&forged, &set, 5), Err(Rejection::BadSignature));
        let mut flipped = Signed::decode_wire(&ok).unwrap();
        flipped.envelope.round = 6;
        assert_eq!(
            open(&flipped.encode(), &set, 5),
            Err(Rejection::BadSignature)
        );
    }
}
