//! ML-DSA-65 member keys (FIPS 204), via RustCrypto's pure-Rust `ml-dsa`.
//!
//! Pure Rust (no C toolchain, `no_std`-capable) so the same verification can later run inside
//! the runtime, where challenge evidence — a signed payload digest — is checked on-chain.

use ml_dsa::{EncodedSignature, EncodedVerifyingKey, KeyExport, MlDsa65, Signature, Signer, SigningKey, Verifier, VerifyingKey};
use parity_scale_codec::{Decode, Encode};

/// Bytes of an encoded ML-DSA-65 public (verifying) key.
pub const PUBLIC_KEY_LEN: usize = 1952;
/// Bytes of an encoded ML-DSA-65 signature.
pub const SIGNATURE_LEN: usize = 3309;

/// Why a signature was not accepted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SignatureError {
    /// The public key has the wrong length.
    #[error("public key must be {PUBLIC_KEY_LEN} bytes, got {0}")]
    KeyLength(usize),
    /// The signature has the wrong length or is not a valid encoding.
    #[error("malformed signature")]
    Malformed,
    /// The signature does not verify under the key.
    #[error("signature does not verify")]
    Invalid,
}

/// A member's secret ML-DSA-65 key, derived deterministically from a 32-byte seed.
pub struct MemberKey {
    sk: SigningKey<MlDsa65>,
}

impl MemberKey {
    /// The key for `seed` (FIPS 204 `ML-DSA.KeyGen_internal`).
    pub fn from_seed(seed: [u8; 32]) -> Self {
        Self { sk: SigningKey::<MlDsa65>::from_seed(&seed.into()) }
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
    /// Checks `sig` over `msg`.
    ///
    /// # Errors
    /// [`SignatureError`] for a malformed key or signature, or one that does not verify.
    pub fn verify(&self, msg: &[u8], sig: &[u8]) -> Result<(), SignatureError> {
        let enc = EncodedVerifyingKey::<MlDsa65>::try_from(self.0.as_slice()).map_err(|_| SignatureError::KeyLength(self.0.len()))?;
        let vk = VerifyingKey::<MlDsa65>::decode(&enc);
        let enc_sig = EncodedSignature::<MlDsa65>::try_from(sig).map_err(|_| SignatureError::Malformed)?;
        let sig = Signature::<MlDsa65>::decode(&enc_sig).ok_or(SignatureError::Malformed)?;
        vk.verify(msg, &sig).map_err(|_| SignatureError::Invalid)
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
        assert_eq!(pk.verify(b"hellp", &sig), Err(SignatureError::Invalid));
        assert_eq!(pk.verify(b"hello", &sig[1..]), Err(SignatureError::Malformed));
        let other = MemberKey::from_seed([8; 32]).public();
        assert_eq!(other.verify(b"hello", &sig), Err(SignatureError::Invalid));
        assert_eq!(MemberKey::from_seed(k.seed()).public(), pk);
    }
}
