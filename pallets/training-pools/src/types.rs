//! Pool specification, pool state and membership records.

use crate::{
	pallet::{BalanceOf, Config},
	PoolKind,
};
use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use frame_support::{BoundedVec, CloneNoBound, DebugNoBound, EqNoBound, PartialEqNoBound};
use frame_system::pallet_prelude::BlockNumberFor;
use scale_info::TypeInfo;
use sp_runtime::Perbill;
use synod_primitives::{MemberIndex, PoolStatus, RoundIndex};

/// Length of an ML-DSA-65 public key in bytes (FIPS 204, table 2; defined once in
/// [`synod_primitives::protocol::evidence::PUBLIC_KEY_LEN`]).
pub const ML_DSA_65_PUBLIC_KEY_LEN: usize = synod_primitives::protocol::evidence::PUBLIC_KEY_LEN;
/// An ML-DSA-65 public key: the key that signs a member's off-chain messages
/// (`/synod/pseudograd/2` announcements).
pub type MlDsaPublicKey = [u8; ML_DSA_65_PUBLIC_KEY_LEN];
/// The Ed25519 signature (64 bytes) by which a joiner proves it holds the key of the peer id it
/// registers ([`synod_primitives::protocol::peer`]).
pub type PeerIdProof = [u8; synod_primitives::protocol::peer::PEER_ID_PROOF_LEN];

/// A training job as submitted to `create_pool`: the terms every kind of pool shares, and the
/// kind (what is trained, and how).
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
pub struct PoolSpec<T: Config> {
	/// Membership, stake, rewards and round timing.
	pub terms: PoolTerms<T>,
	/// The job ([`PoolKind`]).
	pub kind: PoolKind<T>,
}

/// The terms of a pool, the same for every kind: membership, stake, rewards and the round
/// protocol's timing (`docs/architecture.md`).
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
pub struct PoolTerms<T: Config> {
	/// Number of outer rounds (1..=`MaxRounds`).
	pub rounds: RoundIndex,
	/// Members needed before training starts (≥ 1).
	pub min_trainers: u32,
	/// Member cap (min_trainers..=`MaxMembers`).
	pub max_trainers: u32,
	/// Smallest stake a member may commit, in planck.
	pub min_stake: BalanceOf<T>,
	/// Reward of one final round, in planck, split over its contributors pro rata to their
	/// snapshot stake (`synod_protocol::rewards`).
	pub reward_per_round: BalanceOf<T>,
	/// Share of the round's participant-snapshot stake that must commit the same checkpoint and
	/// included set (> 50 %; `synod_protocol::quorum`).
	pub quorum: Perbill,
	/// Blocks after a round starts before it is voided if not final (≥ 1).
	pub round_timeout: BlockNumberFor<T>,
	/// `W`: blocks after finality during which late commits are accepted; a contribution can be
	/// challenged for `2W` blocks (`synod_protocol::timeline`).
	pub challenge_window: BlockNumberFor<T>,
	/// Blocks after a round opens before a commit to it is accepted (so before it can be
	/// final): the shortest round the creator allows, at least the kind's floor
	/// (`synod_protocol::KindView::check`; DiLoCo:
	/// `⌈inner_steps / SpecLimits::max_inner_steps_per_block⌉`) and at most half of
	/// `round_timeout`. With 0 (only on a chain whose rate is 0, no floor), members may also
	/// commit ahead of a round's opening.
	pub min_round_length: BlockNumberFor<T>,
	/// Accounts allowed to join (at least `min_trainers` of them); empty: anyone may join.
	pub allowed_trainers: BoundedVec<T::AccountId, T::MaxMembers>,
}

/// A pool's state.
#[derive(
	CloneNoBound, PartialEqNoBound, EqNoBound, Encode, Decode, MaxEncodedLen, TypeInfo, DebugNoBound,
)]
#[scale_info(skip_type_params(T))]
pub struct PoolInfo<T: Config> {
	/// Creator; pays the rewards from a held budget.
	pub creator: T::AccountId,
	/// The job specification.
	pub spec: PoolSpec<T>,
	/// Lifecycle state.
	pub status: PoolStatus,
	/// The round being committed (0 while `Open`).
	pub current_round: RoundIndex,
	/// Index the next member gets.
	pub next_member_index: MemberIndex,
	/// Current number of members.
	pub member_count: u32,
	/// Sum of the members' committed stake, in planck.
	pub total_stake: BalanceOf<T>,
	/// Budget still on hold for this pool, in planck.
	pub budget_held: BalanceOf<T>,
	/// Part of `budget_held` owed to final rounds (unsettled or credited, unclaimed).
	pub budget_reserved: BalanceOf<T>,
	/// Block of creation.
	pub created_at: BlockNumberFor<T>,
	/// Set when the creator cancelled while training: the pool ends `Cancelled` when this
	/// round closes.
	pub cancel_after: Option<RoundIndex>,
	/// Storage deposit the creator holds until the pool is reaped
	/// ([`crate::HoldReason::PoolDeposit`]: `PoolDeposit + RoundDeposit × rounds`), in planck.
	pub deposit: BalanceOf<T>,
	/// Block at which the pool ended (`Completed` or `Cancelled`); it can be reaped after
	/// `Timeline::settled_by(ended_at)`.
	pub ended_at: Option<BlockNumberFor<T>>,
}

/// A member of a pool.
#[derive(
	CloneNoBound, PartialEqNoBound, EqNoBound, Encode, Decode, MaxEncodedLen, TypeInfo, DebugNoBound,
)]
#[scale_info(skip_type_params(T))]
pub struct MemberInfo<T: Config> {
	/// Position in the pool (aggregation order), never reused.
	pub index: MemberIndex,
	/// libp2p peer id (multihash bytes) of the member's trainer.
	pub peer_id: BoundedVec<u8, T::MaxPeerIdLen>,
	/// ML-DSA-65 public key that signs its off-chain messages.
	pub ml_dsa_key: MlDsaPublicKey,
	/// Stake committed to this pool, in planck (its weight in the quorum).
	pub stake: BalanceOf<T>,
	/// First round it takes part in.
	pub from_round: RoundIndex,
	/// Block of joining.
	pub joined_at: BlockNumberFor<T>,
	/// Storage deposit held ([`crate::HoldReason::MemberDeposit`]), in planck.
	pub deposit: BalanceOf<T>,
}

/// Stake a member committed to a pool it left (or was dropped from) while that pool's open
/// round could count it: it still backs that round's snapshot, so it stays committed
/// (`StakeCommitments::committed`) until that round is settled (`Timeline::settled_by` the
/// leaving block, an upper bound: a round that closes earlier does not free it sooner) and backs
/// no second live snapshot
/// (`docs/architecture.md`, "Stake and snapshots").
#[derive(
	CloneNoBound, PartialEqNoBound, EqNoBound, Encode, Decode, MaxEncodedLen, TypeInfo, DebugNoBound,
)]
#[scale_info(skip_type_params(T))]
pub struct LeftCommitment<T: Config> {
	/// Stake still committed, in planck.
	pub stake: BalanceOf<T>,
	/// Last block at which it is committed: the settlement of the round open when it left or
	/// the pool ended (`Timeline::settled_by` that block: the settlement block of a round
	/// whose deadline is the latest that round's can be).
	pub until: BlockNumberFor<T>,
}

/// The registration of a member that left (or was dropped), kept for challenges of the rounds
/// it was in.
#[derive(
	CloneNoBound, PartialEqNoBound, EqNoBound, Encode, Decode, MaxEncodedLen, TypeInfo, DebugNoBound,
)]
#[scale_info(skip_type_params(T))]
pub struct FormerMember<T: Config> {
	/// Its account.
	pub who: T::AccountId,
	/// libp2p peer id (multihash bytes) it signed its messages with.
	pub peer_id: BoundedVec<u8, T::MaxPeerIdLen>,
	/// ML-DSA-65 public key its announcements are checked against.
	pub ml_dsa_key: MlDsaPublicKey,
	/// Storage deposit still held, in planck.
	pub deposit: BalanceOf<T>,
	/// Last block at which a challenge of a round it was in can be open
	/// (`Timeline::slashable_until` of the latest deadline it could be in); after it the
	/// deposit may be released.
	pub kept_until: BlockNumberFor<T>,
}
