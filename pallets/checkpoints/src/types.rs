//! The records this pallet stores: open rounds, candidates, commits, snapshots and final
//! checkpoints.

use crate::Config;
use frame_support::pallet_prelude::*;
use frame_system::pallet_prelude::BlockNumberFor;
use synod_primitives::{Hash32, MemberIndex, Participant, RoundIndex};

/// The included set of a commit: member indices, strictly increasing.
pub type IncludedSet<T> = BoundedVec<MemberIndex, <T as Config>::MaxMembers>;

/// The round a pool is committing now.
#[derive(
	Clone, PartialEq, Eq, Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Debug,
)]
pub struct OpenRound<Balance, BlockNumber> {
	/// Round number.
	pub round: RoundIndex,
	/// Block it opened.
	pub opened_at: BlockNumber,
	/// Block at which it is voided unless final.
	pub deadline: BlockNumber,
	/// Stake of the snapshot participants, in planck (quorum denominator).
	pub round_stake: Balance,
	/// Block whose `on_initialize` voids it, if the per-block queue had room (otherwise it
	/// is voided by the deadline queue or by `void_expired_round` at or after `deadline`).
	pub scheduled_at: Option<BlockNumber>,
}

/// A distinct `(hash, included)` pair committed for a round, with its support.
#[derive(
	CloneNoBound, PartialEqNoBound, EqNoBound, Encode, Decode, MaxEncodedLen, TypeInfo, DebugNoBound,
)]
#[scale_info(skip_type_params(T))]
pub struct Candidate<T: Config> {
	/// Checkpoint hash (blake3 of the file).
	pub hash: Hash32,
	/// Included set.
	pub included: IncludedSet<T>,
	/// Snapshot stake of its committers, in planck.
	pub stake: T::Balance,
	/// Its committers' member indices, in commit order.
	pub committers: BoundedVec<MemberIndex, T::MaxMembers>,
}

/// What one account committed for a round.
#[derive(
	CloneNoBound, PartialEqNoBound, EqNoBound, Encode, Decode, MaxEncodedLen, TypeInfo, DebugNoBound,
)]
#[scale_info(skip_type_params(T))]
pub struct CommitRecord<T: Config> {
	/// Checkpoint hash.
	pub hash: Hash32,
	/// Included set.
	pub included: IncludedSet<T>,
}

/// A round's participants, frozen when it opened.
pub type SnapshotOf<T> =
	BoundedVec<Participant<<T as frame_system::Config>::AccountId>, <T as Config>::MaxMembers>;

/// The included set fixed for a split open round (`synod_protocol::agreement`) and when.
#[derive(
	CloneNoBound, PartialEqNoBound, EqNoBound, Encode, Decode, MaxEncodedLen, TypeInfo, DebugNoBound,
)]
#[scale_info(skip_type_params(T))]
pub struct AgreedSet<T: Config> {
	/// The members attested by more than ⅓ of the snapshot's stake, ascending.
	pub included: IncludedSet<T>,
	/// Block in which it was fixed: commits off it are judged at a void only if it left the
	/// pool's recommit period before the deadline (`synod_protocol::leak::agreed_in_time`).
	pub fixed_at: BlockNumberFor<T>,
}

impl<T: Config> AgreedSet<T> {
	/// Whether it was fixed in time to judge commits off it in a round of a pool with
	/// `timeline` whose deadline is block `deadline`: more than the pool's recommit period
	/// ([`Config::RecommitPeriod`], at most half of the blocks its rounds accept commits in:
	/// `Timeline::recommit_blocks`) before it (`synod_protocol::leak::agreed_in_time`).
	/// Only then must a first commit be over it (`NotTheAgreedSet`), and only then is a
	/// commit over another set leaked at a void.
	pub fn in_time(
		&self,
		deadline: BlockNumberFor<T>,
		timeline: &synod_primitives::protocol::Timeline,
	) -> bool {
		let most = crate::finality::block::<T>(T::RecommitPeriod::get());
		synod_primitives::protocol::leak::agreed_in_time(
			crate::finality::block::<T>(self.fixed_at),
			crate::finality::block::<T>(deadline),
			timeline.recommit_blocks(most),
		)
	}
}

/// A final checkpoint.
#[derive(
	CloneNoBound, PartialEqNoBound, EqNoBound, Encode, Decode, MaxEncodedLen, TypeInfo, DebugNoBound,
)]
#[scale_info(skip_type_params(T))]
pub struct FinalCheckpoint<T: Config> {
	/// blake3 of the checkpoint file.
	pub hash: Hash32,
	/// The previous final hash (the initial weights' hash for the first final round).
	pub parent: Hash32,
	/// Included set agreed on.
	pub included: IncludedSet<T>,
	/// Members in `included` that committed this checkpoint.
	pub contributors: BoundedVec<T::AccountId, T::MaxMembers>,
	/// Block in which the round became final.
	pub finalized_at: BlockNumberFor<T>,
	/// Stake that had committed it at finality, in planck.
	pub committed_stake: T::Balance,
	/// The round's stake (quorum denominator), in planck.
	pub round_stake: T::Balance,
}
