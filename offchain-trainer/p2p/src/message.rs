//! Signed gossip messages (announcements, heartbeats, leaves) and their validation.
//!
//! Wire form: SCALE-encoded [`Signed`]; the signed bytes are
//! `"synod/pseudograd/1" ‖ SCALE(Envelope)`, so a signature covers (pool, round, member,
//! peer id, body) — for an announcement, the payload's blake3 digest and size
//! (ARCHITECTURE.md, step 3).

use libp2p::PeerId;
use parity_scale_codec::{Decode, DecodeLimit, Encode};

use crate::{MemberKey, MemberSet};

/// Signing domain (also the protocol name of the payload exchange).
pub const DOMAIN: &[u8] = b"synod/pseudograd/1";
/// Largest accepted gossip message in bytes (a signature is 3309 bytes).
pub const MAX_MESSAGE_BYTES: usize = 8 * 1024;

/// A payload announcement: blake3 digest and size of an encoded pseudo-gradient.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Encode, Decode)]
pub struct PayloadRef {
    /// blake3 of the encoded payload.
    pub digest: [u8; 32],
    /// Payload length in bytes.
    pub size: u64,
}

/// What a member says.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub enum Body {
    /// Heartbeat (every 2 s), carrying the announcement of the sender's payload for the
    /// envelope's round once it has one: "fetch it from me over `/synod/pseudograd/1`".
    /// Repeating the announcement in every heartbeat lets late-connected peers learn it.
    Alive {
        /// Sender's counter, strictly increasing (makes each heartbeat a distinct message).
        seq: u64,
        /// The sender's payload for this round, once encoded.
        payload: Option<PayloadRef>,
    },
    /// "I am leaving the pool; do not wait for me."
    Leave,
}

/// The signed content of a message.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub struct Envelope {
    /// Pool id.
    pub pool: u64,
    /// Outer round the message is about.
    pub round: u32,
    /// Sender's member index.
    pub member: u32,
    /// Sender's libp2p peer id (bytes).
    pub peer_id: Vec<u8>,
    /// The statement.
    pub body: Body,
}

/// An envelope with the sender's ML-DSA-65 signature.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub struct Signed {
    /// What is signed.
    pub envelope: Envelope,
    /// ML-DSA-65 signature over `DOMAIN ‖ SCALE(envelope)`.
    pub signature: Vec<u8>,
}

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
        !matches!(self, Rejection::Stale(_) | Rejection::NotMember | Rejection::WrongPool(_))
    }
}

fn signing_bytes(e: &Envelope) -> Vec<u8> {
    let mut m = DOMAIN.to_vec();
    e.encode_to(&mut m);
    m
}

impl Signed {
    /// Signs `envelope` with `key`.
    pub fn sign(envelope: Envelope, key: &MemberKey) -> Self {
        let signature = key.sign(&signing_bytes(&envelope));
        Self { envelope, signature }
    }

    /// SCALE bytes for the wire.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.encode()
    }

    /// Decodes and validates a message: size, shape, pool, membership (index and peer id must
    /// match the registration), signature, and round window `[min_round, min_round + 2]`
    /// (callers pass their current round − 1: one round behind to one ahead).
    ///
    /// # Errors
    /// The [`Rejection`] that applies first.
    pub fn open(bytes: &[u8], members: &MemberSet, min_round: u32) -> Result<Envelope, Rejection> {
        if bytes.len() > MAX_MESSAGE_BYTES {
            return Err(Rejection::TooLarge(bytes.len()));
        }
        let mut input = bytes;
        let s = Signed::decode_with_depth_limit(4, &mut input).map_err(|_| Rejection::Malformed)?;
        if !input.is_empty() {
            return Err(Rejection::Malformed);
        }
        let e = s.envelope;
        if e.pool != members.pool {
            return Err(Rejection::WrongPool(e.pool));
        }
        let m = members.get(e.member).ok_or(Rejection::NotMember)?;
        if PeerId::from_bytes(&e.peer_id).ok() != Some(m.peer_id) {
            return Err(Rejection::PeerMismatch);
        }
        m.key.verify(&signing_bytes(&e), &s.signature).map_err(|_| Rejection::BadSignature)?;
        if e.round < min_round || e.round > min_round.saturating_add(2) {
            return Err(Rejection::Stale(e.round));
        }
        Ok(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Member, MemberKey};

    fn setup() -> (MemberKey, PeerId, MemberSet) {
        let key = MemberKey::from_seed([1; 32]);
        let peer = libp2p::identity::Keypair::ed25519_from_bytes([1; 32]).unwrap().public().to_peer_id();
        let set = MemberSet::new(9, vec![Member { index: 0, peer_id: peer, key: key.public() }]);
        (key, peer, set)
    }

    fn env(peer: PeerId, pool: u64, round: u32, member: u32) -> Envelope {
        Envelope { pool, round, member, peer_id: peer.to_bytes(), body: Body::Alive { seq: 1, payload: None } }
    }

    #[test]
    fn valid_messages_open_and_every_defect_has_its_rejection() {
        let (key, peer, set) = setup();
        let ok = Signed::sign(env(peer, 9, 5, 0), &key).to_bytes();
        assert_eq!(Signed::open(&ok, &set, 5).unwrap().round, 5);
        assert_eq!(Signed::open(&ok, &set, 4).unwrap().round, 5);
        assert_eq!(Signed::open(&ok, &set, 3).unwrap().round, 5);
        assert_eq!(Signed::open(&ok, &set, 6), Err(Rejection::Stale(5)));
        assert_eq!(Signed::open(&ok, &set, 2), Err(Rejection::Stale(5)));
        assert_eq!(Signed::open(&ok[..ok.len() - 1], &set, 5), Err(Rejection::Malformed));
        assert_eq!(Signed::open(&[ok.clone(), vec![0]].concat(), &set, 5), Err(Rejection::Malformed));
        assert_eq!(Signed::open(&vec![0; MAX_MESSAGE_BYTES + 1], &set, 5), Err(Rejection::TooLarge(MAX_MESSAGE_BYTES + 1)));
        let other_pool = Signed::sign(env(peer, 8, 5, 0), &key).to_bytes();
        assert_eq!(Signed::open(&other_pool, &set, 5), Err(Rejection::WrongPool(8)));
        let unknown = Signed::sign(env(peer, 9, 5, 1), &key).to_bytes();
        assert_eq!(Signed::open(&unknown, &set, 5), Err(Rejection::NotMember));
        let wrong_peer = libp2p::identity::Keypair::ed25519_from_bytes([2; 32]).unwrap().public().to_peer_id();
        let spoofed = Signed::sign(env(wrong_peer, 9, 5, 0), &key).to_bytes();
        assert_eq!(Signed::open(&spoofed, &set, 5), Err(Rejection::PeerMismatch));
        assert!(Rejection::PeerMismatch.penalized() && Rejection::BadSignature.penalized() && Rejection::Malformed.penalized());
        assert!(!Rejection::NotMember.penalized() && !Rejection::Stale(1).penalized() && !Rejection::WrongPool(1).penalized());
        let forged = Signed::sign(env(peer, 9, 5, 0), &MemberKey::from_seed([3; 32])).to_bytes();
        assert_eq!(Signed::open(&forged, &set, 5), Err(Rejection::BadSignature));
        let mut flipped = Signed::decode(&mut ok.as_slice()).unwrap();
        flipped.envelope.round = 6;
        assert_eq!(Signed::open(&flipped.to_bytes(), &set, 5), Err(Rejection::BadSignature));
    }
}
