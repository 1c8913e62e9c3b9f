//! ML-DSA-65 member keys (FIPS 204), via RustCrypto's pure-Rust `ml-dsa`.
//!
//! Pure Rust (no C toolchain, `no_std`): verification is `synod_protocol::evidence`'s, the code
//! the runtime runs on challenge evidence — a signed payload digest — on-chain.

use ml_dsa::{KeyExport, MlDsa65, Signature, Signer, SigningKey};
use parity_scale_codec::{Decode, Encode};

pub use synod_protocol::evidence::{
    EvidenceError as SignatureError, PUBLIC_KEY_LEN, SIGNATURE_LEN,
};

/// A member's secret ML-DSA-65 key, derived deterministically from a 32-byte seed.
pub struct MemberKey {
    sk: SigningKey<MlDsa65>,
}

impl MemberKey {
    /// The key for `seed` (FIPS 204 `ML-DSA.KeyGen_internal`).
    pub fn from_seed(seed: [u8; 32]) -> Self {
        Self {
            sk: SigningKey::<MlDsa65>::from_seed(&seed.into()),
        }
    }

    /// A fresh key from the OS random generator.
    pub fn generate() -> Self {
        Self::from_seed(rand::random())
    }

    /// The 32-byte seed (store it to keep the identity across restarts).
    pub fn seed(&self) -> [u8; 32] {
        self.sk.to_bytes().into()
    }

    /// The public key to register on-chain.
    pub fn public(&self) -> PublicKey {
        PublicKey(self.sk.as_ref().encode().to_vec())
    }

    /// Signs `msg` (deterministic ML-DSA variant); returns [`SIGNATURE_LEN`] bytes.
    pub fn sign(&self, msg: &[u8]) -> Vec<u8> {
        let sig: Signature<MlDsa65> = self.sk.sign(msg);
        sig.encode().to_vec()
    }
}

/// An encoded ML-DSA-65 public key ([`PUBLIC_KEY_LEN`] bytes).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Encode, Decode)]
pub struct PublicKey(pub Vec<u8>);

impl PublicKey {
    /// Checks `sig` over `msg` (the same verification the runtime applies to challenge
    /// evidence, `synod_protocol::evidence::verify_signature`).
    ///
    /// # Errors
    /// [`SignatureError`] for a malformed key or signature, or one that does not verify.
    pub fn verify(&self, msg: &[u8], sig: &[u8]) -> Result<(), SignatureError> {
        synod_protocol::evidence::verify_signature(&self.0, msg, sig)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_verify_and_reject() {
        let k = MemberKey::from_seed([7; 32]);
        let pk = k.public();
        assert_eq!(pk.0.len(), PUBLIC_KEY_LEN);
        let sig = k.sign(b"hello");
        assert_eq!(sig.len(), SIGNATURE_LEN);
        pk.verify(b"hello", &sig).unwrap();
        assert_eq!(pk.verify(b"hellp", &sig), Err(SignatureError::BadSignature));
        assert_eq!(
            pk.verify(b"hello", &sig[1..]),
            Err(SignatureError::Malformed)
        );
        let other = MemberKey::from_seed([8; 32]).public();
        assert_eq!(
            other.verify(b"hello", &sig),
            Err(SignatureError::BadSignature)
        );
        assert_eq!(MemberKey::from_seed(k.seed()).public(), pk);
    }
}
