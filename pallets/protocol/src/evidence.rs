//! Signed member messages and their verification: the wire format of the pool's gossip topic,
//! signed under the domain [`DOMAIN`] (`docs/architecture.md`, step 3), and the evidence a challenge carries.
//!
//! A member signs every message with its ML-DSA-65 key (FIPS 204, pure variant with an empty
//! context string), registered on-chain at `join_pool`. The signed bytes are
//! `DOMAIN ‖ SCALE(Envelope)`, so one signature covers (pool, round, member index, libp2p peer
//! id, body). An announcement — a heartbeat whose body carries a [`PayloadRef`] — binds the
//! member to the blake3 digest of the pseudo-gradient payload it served for that round; that
//! signed message, exactly as gossiped, is what `Challenges::open_challenge` takes as evidence and
//! what the runtime checks with [`verify_announcement`] against the registered key.
//!
//! Verification is RustCrypto's pure-Rust `ml-dsa` (no_std, no allocation of secrets), the
//! same code in the runtime and in the trainer.

use alloc::vec::Vec;
use codec::{Decode, DecodeLimit, Encode};
use ml_dsa::{EncodedSignature, EncodedVerifyingKey, MlDsa65, Signature, VerifyingKey};

/// Signing domain (also the protocol name of the payload exchange).
pub const DOMAIN: &[u8] = b"synod/pseudograd/1";
/// Largest accepted signed message in bytes (a signature alone is [`SIGNATURE_LEN`]).
pub const MAX_MESSAGE_BYTES: usize = 8 * 1024;
/// Bytes of an encoded ML-DSA-65 public (verifying) key.
pub const PUBLIC_KEY_LEN: usize = 1952;
/// Bytes of an encoded ML-DSA-65 signature.
pub const SIGNATURE_LEN: usize = 3309;
/// SCALE nesting depth accepted when decoding a [`Signed`].
const DECODE_DEPTH: u32 = 4;

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
	/// envelope's round once it has one: "fetch it from me over `/synod/pseudograd/2`".
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
	/// Pool id (a [`crate::PoolId`], widened on the wire).
	pub pool: u64,
	/// Outer round the message is about.
	pub round: u32,
	/// Sender's member index.
	pub member: u32,
	/// Sender's libp2p peer id (multihash bytes).
	pub peer_id: Vec<u8>,
	/// The statement.
	pub body: Body,
}

impl Envelope {
	/// The bytes a signature covers: `DOMAIN ‖ SCALE(self)`.
	pub fn signing_bytes(&self) -> Vec<u8> {
		let mut m = DOMAIN.to_vec();
		self.encode_to(&mut m);
		m
	}
}

/// An envelope with the sender's ML-DSA-65 signature; SCALE-encoded, the wire form.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub struct Signed {
	/// What is signed.
	pub envelope: Envelope,
	/// ML-DSA-65 signature over [`Envelope::signing_bytes`] ([`SIGNATURE_LEN`] bytes).
	pub signature: Vec<u8>,
}

impl Signed {
	/// Decodes the wire form: at most [`MAX_MESSAGE_BYTES`], a whole `Signed` and nothing
	/// after it. The signature is not checked.
	///
	/// # Errors
	/// [`EvidenceError::TooLarge`], [`EvidenceError::Malformed`].
	pub fn decode_wire(bytes: &[u8]) -> Result<Self, EvidenceError> {
		if bytes.len() > MAX_MESSAGE_BYTES {
			return Err(EvidenceError::TooLarge);
		}
		let mut input = bytes;
		let s = Signed::decode_with_depth_limit(DECODE_DEPTH, &mut input)
			.map_err(|_| EvidenceError::Malformed)?;
		if !input.is_empty() {
			return Err(EvidenceError::Malformed);
		}
		Ok(s)
	}

	/// Checks the signature under `public_key` (an encoded ML-DSA-65 key).
	///
	/// # Errors
	/// [`EvidenceError::KeyLength`], [`EvidenceError::Malformed`] (signature encoding),
	/// [`EvidenceError::BadSignature`].
	pub fn verify(&self, public_key: &[u8]) -> Result<(), EvidenceError> {
		verify_signature(public_key, &self.envelope.signing_bytes(), &self.signature)
	}
}

/// Why a signed message or a piece of evidence was not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvidenceError {
	/// Over [`MAX_MESSAGE_BYTES`].
	TooLarge,
	/// Not a SCALE [`Signed`] (or trailing bytes), or a signature that is not an encoding.
	Malformed,
	/// The public key is not [`PUBLIC_KEY_LEN`] bytes.
	KeyLength,
	/// The signature does not verify under the key.
	BadSignature,
	/// A valid message, but not an announcement (no payload digest in it).
	NotAnAnnouncement,
	/// Two valid announcements that are not an equivocation: they name different pools,
	/// rounds or members, or announce the same payload.
	NotAnEquivocation,
}

impl core::fmt::Display for EvidenceError {
	fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
		f.write_str(match self {
			Self::TooLarge => "signed message too large",
			Self::Malformed => "malformed signed message",
			Self::KeyLength => "ML-DSA-65 public key must be 1952 bytes",
			Self::BadSignature => "signature does not verify",
			Self::NotAnAnnouncement => "message announces no payload",
			Self::NotAnEquivocation => {
				"not two different payloads announced by one member for one round"
			},
		})
	}
}

impl core::error::Error for EvidenceError {}

/// Checks an ML-DSA-65 signature `sig` over `msg` under the encoded key `public_key`.
///
/// # Errors
/// [`EvidenceError::KeyLength`], [`EvidenceError::Malformed`] (signature of the wrong length or
/// not a valid encoding), [`EvidenceError::BadSignature`].
pub fn verify_signature(public_key: &[u8], msg: &[u8], sig: &[u8]) -> Result<(), EvidenceError> {
	let enc = EncodedVerifyingKey::<MlDsa65>::try_from(public_key)
		.map_err(|_| EvidenceError::KeyLength)?;
	let vk = VerifyingKey::<MlDsa65>::decode(&enc);
	let enc_sig =
		EncodedSignature::<MlDsa65>::try_from(sig).map_err(|_| EvidenceError::Malformed)?;
	let sig = Signature::<MlDsa65>::decode(&enc_sig).ok_or(EvidenceError::Malformed)?;
	// FIPS 204 ML-DSA.Verify with an empty context string.
	if vk.verify_with_context(msg, &[], &sig) {
		Ok(())
	} else {
		Err(EvidenceError::BadSignature)
	}
}

/// A verified announcement: member `member` of `pool` served `payload` for `round` from
/// `peer_id`, signed with its registered key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Announcement {
	/// Pool id.
	pub pool: u64,
	/// Round.
	pub round: u32,
	/// Member index.
	pub member: u32,
	/// libp2p peer id bytes in the envelope.
	pub peer_id: Vec<u8>,
	/// The announced payload.
	pub payload: PayloadRef,
}

/// Decodes signed message `bytes` (the wire form), checks its signature under `public_key` and
/// that it announces a payload. The caller checks pool, round, member and peer id against what
/// it expects.
///
/// Cost: one ML-DSA-65 verification (the runtime benchmarks it in `open_challenge`).
///
/// # Errors
/// Any [`EvidenceError`].
pub fn verify_announcement(bytes: &[u8], public_key: &[u8]) -> Result<Announcement, EvidenceError> {
	let s = Signed::decode_wire(bytes)?;
	s.verify(public_key)?;
	let Envelope { pool, round, member, peer_id, body } = s.envelope;
	match body {
		Body::Alive { payload: Some(payload), .. } => {
			Ok(Announcement { pool, round, member, peer_id, payload })
		},
		_ => Err(EvidenceError::NotAnAnnouncement),
	}
}

/// Checks an **equivocation**: `first` and `second` (signed messages, wire form) are both
/// announcements signed under `public_key` by one member for one pool and round, of two
/// different payloads (digest or size). An honest member signs one payload per round (it keeps
/// it across restarts), so the pair proves misbehaviour without any replay; the caller checks
/// pool, round, member and peer id against what it expects, as for one announcement.
///
/// Cost: two ML-DSA-65 verifications.
///
/// # Errors
/// Any [`EvidenceError`] of [`verify_announcement`] for either message;
/// [`EvidenceError::NotAnEquivocation`] if they differ in pool, round, member index or peer id,
/// or announce the same [`PayloadRef`].
pub fn verify_equivocation(
	first: &[u8],
	second: &[u8],
	public_key: &[u8],
) -> Result<(Announcement, Announcement), EvidenceError> {
	let a = verify_announcement(first, public_key)?;
	let b = verify_announcement(second, public_key)?;
	let same_contribution =
		a.pool == b.pool && a.round == b.round && a.member == b.member && a.peer_id == b.peer_id;
	if !same_contribution || a.payload == b.payload {
		return Err(EvidenceError::NotAnEquivocation);
	}
	Ok((a, b))
}

/// Signing with a key derived from a 32-byte seed (FIPS 204 `ML-DSA.KeyGen_internal`),
/// deterministic variant: for tests, benchmarks and tools. Trainers keep an expanded key.
pub mod signing {
	use super::*;
	use ml_dsa::ExpandedSigningKey;

	fn key(seed: &[u8; 32]) -> ExpandedSigningKey<MlDsa65> {
		ExpandedSigningKey::<MlDsa65>::from_seed(&(*seed).into())
	}

	/// The encoded public key ([`PUBLIC_KEY_LEN`] bytes) of the key derived from `seed`.
	pub fn public_key(seed: &[u8; 32]) -> Vec<u8> {
		key(seed).verifying_key().encode().to_vec()
	}

	/// Signs `envelope` with the key derived from `seed` (ML-DSA.Sign, deterministic variant,
	/// empty context).
	pub fn sign(seed: &[u8; 32], envelope: Envelope) -> Signed {
		let signature = key(seed)
			.sign_deterministic(&envelope.signing_bytes(), &[])
			.map(|s| s.encode().to_vec())
			.unwrap_or_default();
		Signed { envelope, signature }
	}
}

#[cfg(test)]
mod tests {
	use super::{signing::*, *};

	fn announcement(round: u32) -> Envelope {
		Envelope {
			pool: 3,
			round,
			member: 1,
			peer_id: alloc::vec![0, 36, 8, 1],
			body: Body::Alive { seq: 9, payload: Some(PayloadRef { digest: [5; 32], size: 77 }) },
		}
	}

	#[test]
	fn announcement_verifies_under_its_key_only() {
		let key = public_key(&[1; 32]);
		assert_eq!(key.len(), PUBLIC_KEY_LEN);
		let s = sign(&[1; 32], announcement(4));
		assert_eq!(s.signature.len(), SIGNATURE_LEN);
		let bytes = s.encode();
		let a = verify_announcement(&bytes, &key).unwrap();
		assert_eq!((a.pool, a.round, a.member), (3, 4, 1));
		assert_eq!(a.payload.digest, [5; 32]);
		assert_eq!(
			verify_announcement(&bytes, &public_key(&[2; 32])),
			Err(EvidenceError::BadSignature)
		);
		assert_eq!(verify_announcement(&bytes, &key[1..]), Err(EvidenceError::KeyLength));
	}

	#[test]
	fn tampered_or_truncated_evidence_is_refused() {
		let key = public_key(&[1; 32]);
		let mut s = sign(&[1; 32], announcement(4));
		s.envelope.round = 5;
		assert_eq!(verify_announcement(&s.encode(), &key), Err(EvidenceError::BadSignature));
		let bytes = sign(&[1; 32], announcement(4)).encode();
		assert_eq!(
			verify_announcement(&bytes[..bytes.len() - 1], &key),
			Err(EvidenceError::Malformed)
		);
		let mut long = bytes.clone();
		long.push(0);
		assert_eq!(verify_announcement(&long, &key), Err(EvidenceError::Malformed));
		assert_eq!(
			verify_announcement(&[0u8; MAX_MESSAGE_BYTES + 1], &key),
			Err(EvidenceError::TooLarge)
		);
		assert_eq!(verify_announcement(&[], &key), Err(EvidenceError::Malformed));
	}

	#[test]
	fn two_payloads_signed_for_one_round_are_an_equivocation_and_nothing_else_is() {
		let key = public_key(&[1; 32]);
		let with = |round: u32, digest: u8, size: u64| {
			let mut e = announcement(round);
			e.body =
				Body::Alive { seq: 1, payload: Some(PayloadRef { digest: [digest; 32], size }) };
			sign(&[1; 32], e).encode()
		};
		let (a, b) = verify_equivocation(&with(4, 5, 77), &with(4, 6, 77), &key).unwrap();
		assert_eq!((a.round, a.payload.digest, b.payload.digest), (4, [5; 32], [6; 32]));
		// The same digest with another size is a second payload too.
		assert!(verify_equivocation(&with(4, 5, 77), &with(4, 5, 78), &key).is_ok());
		// The same announcement twice (two heartbeats of one payload) is not.
		assert_eq!(
			verify_equivocation(&with(4, 5, 77), &with(4, 5, 77), &key),
			Err(EvidenceError::NotAnEquivocation)
		);
		// Two rounds, one payload each: honest.
		assert_eq!(
			verify_equivocation(&with(4, 5, 77), &with(5, 6, 77), &key),
			Err(EvidenceError::NotAnEquivocation)
		);
		// Either message forged or not an announcement: that message's error.
		let forged = sign(&[2; 32], announcement(4)).encode();
		assert_eq!(
			verify_equivocation(&with(4, 5, 77), &forged, &key),
			Err(EvidenceError::BadSignature)
		);
		let mut e = announcement(4);
		e.body = Body::Leave;
		assert_eq!(
			verify_equivocation(&sign(&[1; 32], e).encode(), &with(4, 5, 77), &key),
			Err(EvidenceError::NotAnAnnouncement)
		);
	}

	#[test]
	fn heartbeat_without_payload_is_not_an_announcement() {
		let mut e = announcement(4);
		e.body = Body::Alive { seq: 1, payload: None };
		let key = public_key(&[1; 32]);
		assert_eq!(
			verify_announcement(&sign(&[1; 32], e).encode(), &key),
			Err(EvidenceError::NotAnAnnouncement)
		);
		let mut e = announcement(4);
		e.body = Body::Leave;
		assert_eq!(
			verify_announcement(&sign(&[1; 32], e).encode(), &key),
			Err(EvidenceError::NotAnAnnouncement)
		);
	}
}
