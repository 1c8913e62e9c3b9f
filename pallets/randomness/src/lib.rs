//! # Randomness
//!
//! Randomness that no single block author can grind: the seed of every jury draw
//! (`pallet-challenges`, `docs/architecture.md` step 7).
//!
//! Every block carries one mandatory inherent, [`Pallet::note`]: its author's **sr25519 VRF**
//! (schnorrkel) output and proof, made with the author's Aura key over [`transcript`]`(previous,
//! slot)`, where `previous` is the randomness after the parent block and `slot` the block's Aura
//! slot. The output becomes the new randomness ([`Current`]; the value after each block is kept
//! in [`History`] for [`Config::KeptBlocks`] blocks). This is BABE's construction of epoch
//! randomness from VRF outputs (Burdges et al., "BABE", W3F research, §2–3; David, Gaži,
//! Kiayias, Russell, "Ouroboros Praos", EUROCRYPT 2018, §4), chained block by block.
//!
//! **What an author controls.** A VRF output is unique for a key and an input, and the input
//! is fixed by the parent's randomness and the slot: choosing the block's contents, timestamp or
//! extrinsic order changes nothing (a block hash, the seed this replaces, changes with every
//! byte and so can be ground through millions of candidates per second). The author's only
//! choice is to **publish or skip** its slot (a skipped slot is filled by the next slot's author,
//! whose VRF input differs): at most [`SEED_OPTIONS`] seeds per adversarial author at the seed
//! block, `2^c` for a run of `c` adversarial authors in consecutive slots ending there. Building
//! on an older, unfinalised parent instead adds one option per parent it can choose.
//! `synod_protocol::jury::COMMITTEE_SEATS` is sized for [`SEED_OPTIONS`] options.
//!
//! **Which key.** The author of a slot is `Aura.Authorities[slot % len]` *as the parent left
//! them* (the set the client claimed the slot with): [`Config::SlotAuthor`] is read in
//! `on_initialize`, which the runtime's executive runs before `pallet-session`'s (which can
//! rotate the authorities; `synod_runtime::HookOrder`).
//!
//! **Required.** A block with a slot author and no [`Pallet::note`] is invalid: `on_finalize`
//! panics, as `pallet-timestamp` does for its inherent (and the node refuses it at import,
//! `is_inherent_required`). An author whose keystore cannot sign loses its slot.
#![cfg_attr(not(feature = "std"), no_std)]
#![deny(missing_docs)]
#![cfg_attr(
	not(test),
	deny(clippy::arithmetic_side_effects, clippy::unwrap_used, clippy::indexing_slicing)
)]

extern crate alloc;

pub use pallet::*;
pub use weights::WeightInfo;

#[cfg(feature = "runtime-benchmarks")]
mod benchmarking;
#[cfg(feature = "std")]
mod provider;
#[cfg(test)]
mod tests;
pub mod weights;

#[cfg(feature = "std")]
pub use provider::InherentDataProvider;

use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use scale_info::TypeInfo;
use sp_core::sr25519::{self, vrf::VrfSignature, vrf::VrfTranscript};
use sp_inherents::InherentIdentifier;

/// The inherent's identifier in the block's inherent data.
pub const INHERENT_IDENTIFIER: InherentIdentifier = *b"synodvrf";

/// Seeds an adversarial author of the seed block can choose among: publish its block, or skip
/// its slot (the VRF output is unique for its key and input, so no block contents change it).
/// The committee size is derived from it (`synod_protocol::jury::COMMITTEE_SEATS`).
pub const SEED_OPTIONS: u32 = synod_primitives::protocol::jury::SEED_OPTIONS;

/// Label of the VRF transcript.
pub const TRANSCRIPT_LABEL: &[u8] = b"synod/randomness";

/// Context of the 32 output bytes drawn from a VRF pre-output.
pub const OUTPUT_CONTEXT: &[u8] = b"synod/randomness/output";

/// The VRF input of a block at Aura slot `slot` whose parent left the randomness `previous`.
pub fn transcript(previous: &[u8; 32], slot: u64) -> VrfTranscript {
	VrfTranscript::new(TRANSCRIPT_LABEL, &[(b"previous", previous), (b"slot", &slot.to_le_bytes())])
}

/// An author's VRF output and proof as the inherent carries them (schnorrkel's encodings:
/// 32-byte compressed Ristretto pre-output, 64-byte DLEQ proof).
#[derive(
	Clone, PartialEq, Eq, Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Debug,
)]
pub struct VrfProof {
	/// The VRF pre-output (`VRFPreOut`), 32 bytes.
	pub pre_output: [u8; 32],
	/// The proof that it was made with the author's key (`VRFProof`), 64 bytes.
	pub proof: [u8; 64],
}

/// The proof the holder of `pair` makes for a block at Aura slot `slot` whose parent left the
/// randomness `previous`: what the node's keystore signs (`node/src/randomness.rs`), for tests
/// and tools that hold the key pair itself.
#[cfg(feature = "std")]
pub fn prove(pair: &sp_core::sr25519::Pair, previous: &[u8; 32], slot: u64) -> VrfProof {
	use sp_core::crypto::VrfSecret;
	VrfProof::from_signature(&pair.vrf_sign(&transcript(previous, slot).into_sign_data()))
}

impl VrfProof {
	/// The proof of a signature made by a keystore or key pair.
	pub fn from_signature(signature: &VrfSignature) -> Self {
		// `VrfSignature` encodes as `(pre_output, proof)`: 32 + 64 bytes.
		let bytes = signature.encode();
		let mut pre_output = [0u8; 32];
		let mut proof = [0u8; 64];
		if let (Some(p), Some(q)) = (bytes.get(..32), bytes.get(32..96)) {
			pre_output.copy_from_slice(p);
			proof.copy_from_slice(q);
		}
		Self { pre_output, proof }
	}

	/// The schnorrkel signature, or `None` if the bytes are not a valid point and scalar.
	pub fn signature(&self) -> Option<VrfSignature> {
		VrfSignature::decode(&mut &(self.pre_output, self.proof).encode()[..]).ok()
	}
}

/// The randomness after block `previous`'s successor at `slot` was authored by `author` with
/// `proof`, or `None` if the proof is not `author`'s VRF over [`transcript`]`(previous, slot)`.
pub fn verify(
	author: &sr25519::Public,
	previous: &[u8; 32],
	slot: u64,
	proof: &VrfProof,
) -> Option<[u8; 32]> {
	use sp_core::crypto::VrfPublic;
	let signature = proof.signature()?;
	let input = transcript(previous, slot);
	if !author.vrf_verify(&input.clone().into_sign_data(), &signature) {
		return None;
	}
	author.make_bytes::<32>(OUTPUT_CONTEXT, &input, &signature.pre_output).ok()
}

sp_api::decl_runtime_apis! {
	/// What a block author needs to make the block's VRF inherent.
	pub trait RandomnessApi {
		/// The randomness after this block: the `previous` of its child's [`transcript`].
		fn current() -> [u8; 32];
	}
}

#[frame_support::pallet]
pub mod pallet {
	use super::*;
	use frame_support::pallet_prelude::*;
	use frame_system::pallet_prelude::*;
	use sp_runtime::traits::Saturating;

	#[pallet::pallet]
	pub struct Pallet<T>(_);

	/// Configuration.
	#[pallet::config]
	pub trait Config: frame_system::Config {
		/// This block's Aura slot and the key that must author it, as the parent block left the
		/// authorities (read in `on_initialize`, before the session can rotate them); `None`
		/// outside block production (genesis, tests without a slot).
		type SlotAuthor: Get<Option<(u64, sr25519::Public)>>;
		/// Blocks whose randomness [`History`] keeps (at least the longest a draw can wait for
		/// its seed; the runtime uses `BlockHashCount`).
		#[pallet::constant]
		type KeptBlocks: Get<BlockNumberFor<Self>>;
		/// Weights of the inherent and the hooks.
		type WeightInfo: WeightInfo;
	}

	/// The randomness after the last block: the `previous` of the next block's VRF input.
	#[pallet::storage]
	pub type Current<T: Config> = StorageValue<_, [u8; 32], ValueQuery>;

	/// The randomness after each of the last [`Config::KeptBlocks`] blocks.
	#[pallet::storage]
	pub type History<T: Config> = StorageMap<_, Twox64Concat, BlockNumberFor<T>, [u8; 32]>;

	/// This block's slot and expected author (raw sr25519 public key), set in `on_initialize`
	/// and taken by [`Pallet::note`]; never kept past the block.
	#[pallet::storage]
	pub type SlotAuthor<T: Config> = StorageValue<_, (u64, [u8; 32])>;

	/// Errors.
	#[pallet::error]
	pub enum Error<T> {
		/// The block already carries its VRF, or has no slot author to check it against.
		NotExpected,
		/// The proof is not the slot author's VRF over the parent's randomness and the slot.
		BadProof,
	}

	#[pallet::hooks]
	impl<T: Config> Hooks<BlockNumberFor<T>> for Pallet<T> {
		fn on_initialize(_n: BlockNumberFor<T>) -> Weight {
			if let Some((slot, author)) = T::SlotAuthor::get() {
				SlotAuthor::<T>::put((slot, author.0));
			}
			T::WeightInfo::on_initialize_and_finalize()
		}

		fn on_finalize(n: BlockNumberFor<T>) {
			// The block's author must have noted its VRF (taking the slot author).
			assert!(
				SlotAuthor::<T>::take().is_none(),
				"a block with a slot author must carry its VRF randomness inherent"
			);
			History::<T>::insert(n, Current::<T>::get());
			History::<T>::remove(n.saturating_sub(T::KeptBlocks::get()));
		}

		#[cfg(feature = "try-runtime")]
		fn try_state(n: BlockNumberFor<T>) -> Result<(), sp_runtime::TryRuntimeError> {
			Self::do_try_state(n)
		}
	}

	#[pallet::call]
	impl<T: Config> Pallet<T> {
		/// Notes this block's VRF (inherent, origin none, once per block): `proof` must be the
		/// slot author's VRF over [`transcript`]`(`[`Current`]`, slot)`; its output becomes
		/// [`Current`].
		///
		/// Errors: [`Error::NotExpected`] (a second note, or no slot author),
		/// [`Error::BadProof`].
		#[pallet::call_index(0)]
		#[pallet::weight((T::WeightInfo::note(), DispatchClass::Mandatory))]
		pub fn note(origin: OriginFor<T>, proof: VrfProof) -> DispatchResult {
			ensure_none(origin)?;
			let (slot, author) = SlotAuthor::<T>::take().ok_or(Error::<T>::NotExpected)?;
			let author = sr25519::Public::from_raw(author);
			let next =
				verify(&author, &Current::<T>::get(), slot, &proof).ok_or(Error::<T>::BadProof)?;
			Current::<T>::put(next);
			Ok(())
		}
	}

	#[pallet::inherent]
	impl<T: Config> ProvideInherent for Pallet<T> {
		type Call = Call<T>;
		type Error = sp_inherents::MakeFatalError<()>;
		const INHERENT_IDENTIFIER: InherentIdentifier = INHERENT_IDENTIFIER;

		fn create_inherent(data: &InherentData) -> Option<Self::Call> {
			let proof: VrfProof = data.get_data(&INHERENT_IDENTIFIER).ok().flatten()?;
			Some(Call::note { proof })
		}

		fn is_inherent_required(_: &InherentData) -> Result<Option<Self::Error>, Self::Error> {
			// Every authored block carries its VRF: a block without one is refused at import.
			Ok(Some(().into()))
		}

		fn is_inherent(call: &Self::Call) -> bool {
			matches!(call, Call::note { .. })
		}
	}

	impl<T: Config> Pallet<T> {
		/// Invariants: no slot author is left once the block's VRF is noted (or after the
		/// block); [`History`] holds nothing older than [`Config::KeptBlocks`] blocks.
		pub fn do_try_state(n: BlockNumberFor<T>) -> Result<(), sp_runtime::TryRuntimeError> {
			ensure!(SlotAuthor::<T>::get().is_none(), "a slot author outlives its VRF note");
			let oldest = n.saturating_sub(T::KeptBlocks::get());
			ensure!(
				History::<T>::iter_keys().all(|b| b >= oldest),
				"History keeps a block older than KeptBlocks"
			);
			Ok(())
		}
	}
}

impl<T: Config> synod_primitives::RandomnessAt<frame_system::pallet_prelude::BlockNumberFor<T>>
	for Pallet<T>
{
	fn randomness_at(n: frame_system::pallet_prelude::BlockNumberFor<T>) -> Option<[u8; 32]> {
		History::<T>::get(n)
	}

	fn set_for_benchmark(n: frame_system::pallet_prelude::BlockNumberFor<T>, randomness: [u8; 32]) {
		History::<T>::insert(n, randomness);
	}
}

/// A fixed VRF proof for the benchmark of [`Pallet::note`] (the runtime cannot sign a VRF):
/// `(author public key, previous randomness, slot, proof)`, made by the sr25519 key of seed
/// `[1; 32]` over zero randomness at slot 0 (`tests.rs`, `the_benchmark_proof_verifies`).
pub fn benchmarking_vector() -> ([u8; 32], [u8; 32], u64, VrfProof) {
	(BENCH_PUBLIC, [0u8; 32], 0, VrfProof { pre_output: BENCH_PRE_OUTPUT, proof: BENCH_PROOF })
}

const BENCH_PUBLIC: [u8; 32] = [
	24, 157, 172, 41, 41, 109, 49, 129, 77, 200, 197, 108, 243, 211, 106, 5, 67, 55, 43, 186, 117,
	56, 250, 50, 42, 74, 235, 254, 188, 57, 224, 86,
];
const BENCH_PRE_OUTPUT: [u8; 32] = [
	194, 240, 15, 116, 184, 50, 165, 128, 39, 159, 14, 176, 86, 56, 146, 148, 231, 39, 99, 198,
	190, 229, 91, 109, 36, 130, 94, 207, 237, 189, 7, 13,
];
const BENCH_PROOF: [u8; 64] = [
	21, 99, 50, 95, 191, 56, 125, 2, 9, 253, 177, 167, 146, 221, 109, 164, 228, 145, 40, 241, 216,
	48, 84, 233, 205, 2, 182, 232, 147, 19, 52, 5, 33, 48, 153, 82, 147, 98, 226, 155, 179, 160,
	209, 80, 35, 70, 75, 118, 20, 161, 245, 48, 105, 189, 238, 178, 92, 231, 246, 124, 157, 58,
	123, 15,
];
