//! Kinds of pool: what a pool trains, and how. The terms every kind shares (membership, stake,
//! rewards, round timing) are [`PoolTerms`](crate::PoolTerms); a kind brings its job's fields,
//! the bounds they must meet ([`synod_primitives::protocol::KindView`]) and round 0's
//! checkpoint. A new kind of pool adds a [`PoolKind`] variant here, its bounds in
//! `synod-protocol` (`spec.rs`, `KindView`) and its program off-chain
//! (`docs/architecture.md`, "Kinds of pool").

use crate::pallet::Config;
use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use frame_support::{BoundedVec, CloneNoBound, DebugNoBound, EqNoBound, PartialEqNoBound};
use scale_info::TypeInfo;
use synod_primitives::{protocol::KindView, Hash32};

/// What a pool trains, and how.
#[derive(
	CloneNoBound,
	PartialEqNoBound,
	EqNoBound,
	Encode,
	Decode,
	DecodeWithMemTracking,
	MaxEncodedLen,
	TypeInfo,
	DebugNoBound,
)]
#[scale_info(skip_type_params(T))]
pub enum PoolKind<T: Config> {
	/// DiLoCo (Douillard et al. 2023, algorithm 1): each round every member runs H inner AdamW
	/// steps from the round's checkpoint θ_{r−1} on its own data shard, the members exchange
	/// and aggregate their pseudo-gradients θ_{r−1} − θ_i, and every member applies the same
	/// outer Nesterov step (`docs/architecture.md`, "One outer round r of pool p").
	#[codec(index = 0)]
	DiLoCo(DilocoSpec<T>),
}

/// A DiLoCo job: the model, its initial weights, the data and H.
#[derive(
	CloneNoBound,
	PartialEqNoBound,
	EqNoBound,
	Encode,
	Decode,
	DecodeWithMemTracking,
	MaxEncodedLen,
	TypeInfo,
	DebugNoBound,
)]
#[scale_info(skip_type_params(T))]
pub struct DilocoSpec<T: Config> {
	/// blake3 of the training recipe (model, optimizer, codec, aggregation: the trainer's
	/// canonical recipe JSON).
	pub model_config_hash: Hash32,
	/// blake3 of the initial weights file (round 0's checkpoint).
	pub initial_weights_hash: Hash32,
	/// Dataset identifier, e.g. `tinyshakespeare` (at most `MaxDatasetIdLen` bytes).
	pub dataset_id: BoundedVec<u8, T::MaxDatasetIdLen>,
	/// blake3 of the dataset bytes.
	pub dataset_hash: Hash32,
	/// Inner (AdamW) steps H per outer round (`1..=SpecLimits::max_inner_steps`).
	pub inner_steps: u32,
}

impl<T: Config> PoolKind<T> {
	/// The kind's fields that have bounds, for `synod_protocol::check_spec`.
	pub fn view(&self) -> KindView {
		match self {
			PoolKind::DiLoCo(d) => KindView::DiLoCo { inner_steps: d.inner_steps },
		}
	}

	/// Round 0's checkpoint: the blake3 hash every member starts from.
	pub fn initial_checkpoint(&self) -> Hash32 {
		match self {
			PoolKind::DiLoCo(d) => d.initial_weights_hash,
		}
	}
}
