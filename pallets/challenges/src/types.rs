//! The types of this pallet's storage, calls and events: challenges, their evidence and juries.

use crate::pallet::Config;
use codec::{Decode, Encode, MaxEncodedLen};
use frame_support::{
	traits::{fungible, fungible::Inspect, ConstU32},
	BoundedVec, CloneNoBound, DebugNoBound, EqNoBound, PartialEqNoBound,
};
use frame_system::pallet_prelude::BlockNumberFor;
use scale_info::TypeInfo;
use synod_primitives::{
	protocol::{JuryVotes, Verdict},
	Hash32, PoolId, RoundIndex,
};

/// Balance type of the currency.
pub type BalanceOf<T> =
	<<T as Config>::Currency as Inspect<<T as frame_system::Config>::AccountId>>::Balance;
/// A slashed bond not yet given to anyone.
pub type CreditOf<T> =
	fungible::Credit<<T as frame_system::Config>::AccountId, <T as Config>::Currency>;
/// Identifier of a challenge, assigned in order from 0.
pub type ChallengeId = u32;
/// Most bytes of challenge evidence: one signed gossip message.
pub const MAX_EVIDENCE_BYTES: u32 = synod_primitives::protocol::evidence::MAX_MESSAGE_BYTES as u32;
/// Challenge evidence: the accused's signed announcement, SCALE wire form
/// (`synod_protocol::evidence::Signed`).
pub type Evidence = BoundedVec<u8, ConstU32<MAX_EVIDENCE_BYTES>>;
/// A committee: each drawn juror once, with its snapshot stake (planck) and its seats
/// (at most `AppealJurySize` jurors, their seats summing to `JurySize`, or to `AppealJurySize`
/// for an appeal committee).
pub type JuryOf<T> = BoundedVec<
	synod_primitives::protocol::Seated<<T as frame_system::Config>::AccountId>,
	<T as Config>::AppealJurySize,
>;

/// Most blocks whose schedule holds one challenge: its draw and its expiry; with appeals, the
/// blocks reserved at opening for its ruling's execution and its appeal's end, and the earlier
/// blocks a ruling's execution and an appeal's end may be moved to.
pub const MAX_SCHEDULED: u32 = 6;
/// The blocks whose schedule ([`crate::Expiries`]) holds one challenge ([`crate::ScheduledAt`]).
pub type ScheduleSlots<T> = BoundedVec<BlockNumberFor<T>, ConstU32<MAX_SCHEDULED>>;

/// Where a challenge of a pool with appeals stands ([`Appeal::stage`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Stage {
	/// The first committee is drawn or votes.
	FirstVote,
	/// The first committee ruled; the ruling executes unless the losing party appeals first.
	Ruled,
	/// Appealed: the appeal committee is drawn at the challenge's `draw_at`.
	Appealed,
	/// The appeal committee votes; its verdict is final.
	AppealVote,
}

/// The appeal side of an open challenge in a pool whose timeline has appeals
/// (`Timeline::appeal_period > 0`): the blocks reserved for it at opening, the first
/// committee's ruling and the appeal.
#[derive(
	CloneNoBound, PartialEqNoBound, EqNoBound, Encode, Decode, MaxEncodedLen, TypeInfo, DebugNoBound,
)]
#[scale_info(skip_type_params(T))]
pub struct Appeal<T: Config> {
	/// Block whose `on_initialize` executes the ruling, or draws the appeal committee, at the
	/// latest (scheduled when the challenge opened).
	pub ruling_by: BlockNumberFor<T>,
	/// Block whose `on_initialize` ends the appeal committee's vote at the latest (scheduled
	/// when the challenge opened).
	pub appeal_expiry_by: BlockNumberFor<T>,
	/// The first committee's ruling (`Guilty` or `Innocent`) and the block at which it executes
	/// unless appealed; `None` before it is reached and once the appeal committee is drawn.
	pub ruling: Option<(Verdict, BlockNumberFor<T>)>,
	/// Who appealed (the losing party) and the bond it holds, planck.
	pub appellant: Option<(T::AccountId, BalanceOf<T>)>,
}

impl<T: Config> Appeal<T> {
	/// The stage of the challenge this belongs to.
	pub fn stage(&self) -> Stage {
		match (&self.ruling, &self.appellant) {
			(None, None) => Stage::FirstVote,
			(Some(_), None) => Stage::Ruled,
			(Some(_), Some(_)) => Stage::Appealed,
			(None, Some(_)) => Stage::AppealVote,
		}
	}
}

/// An open challenge.
#[derive(
	CloneNoBound, PartialEqNoBound, EqNoBound, Encode, Decode, MaxEncodedLen, TypeInfo, DebugNoBound,
)]
#[scale_info(skip_type_params(T))]
pub struct Challenge<T: Config> {
	/// Pool.
	pub pool_id: PoolId,
	/// Final round whose contribution is disputed.
	pub round: RoundIndex,
	/// The accused member (its payload is in the round's included set).
	pub accused: T::AccountId,
	/// The accused's snapshot stake in that round, in planck (what a conviction slashes a
	/// share of).
	pub accused_stake: u128,
	/// Who opened it.
	pub challenger: T::AccountId,
	/// Held bond, planck.
	pub bond: BalanceOf<T>,
	/// blake3 digest of the accused's payload, from its verified signed announcement.
	pub payload_digest: Hash32,
	/// Block in which it was opened.
	pub opened_at: BlockNumberFor<T>,
	/// Block whose parent hash draws the jury.
	pub draw_at: BlockNumberFor<T>,
	/// Block at which it expires without a verdict.
	pub expires_at: BlockNumberFor<T>,
	/// The committee, empty until drawn.
	pub jury: JuryOf<T>,
	/// Votes so far, in seats.
	pub votes: JuryVotes,
}

/// Creates pools with a final or a voided round, for benchmarks.
#[cfg(feature = "runtime-benchmarks")]
pub trait BenchmarkHelper<AccountId> {
	/// A Training pool with `members` members whose round 1 is final with every member a
	/// contributor, created in the current block; leaves the chain at the block of its
	/// finality (the first that accepts commits). Returns the pool id and the members.
	fn final_round(members: u32) -> (synod_primitives::PoolId, alloc::vec::Vec<AccountId>);
	/// A Training pool with `members` members whose round 1 was voided (nobody committed), its
	/// snapshot kept for equivocation reports; returns the pool id and the members.
	fn voided_round(members: u32) -> (synod_primitives::PoolId, alloc::vec::Vec<AccountId>);
	/// Bonds `stake` planck for `who` (a juror candidate).
	fn bond(who: &AccountId, stake: u128);
	/// Sets the snapshot stakes (planck) of `pool`'s `round` to `stakes`, in member order: a
	/// committee drawn from unequal stakes (many small jurors and one large one) is the worst
	/// case of a vote.
	fn set_snapshot_stakes(pool: synod_primitives::PoolId, round: u32, stakes: &[u128]);
}
