#![doc = include_str!("design.md")]
#![cfg_attr(not(feature = "std"), no_std)]
#![deny(missing_docs)]
#![cfg_attr(
	not(test),
	deny(clippy::arithmetic_side_effects, clippy::unwrap_used, clippy::indexing_slicing)
)]

extern crate alloc;

pub use pallet::*;

/// The most voided rounds per pool whose snapshot is kept for equivocation reports
/// ([`KeptSnapshots`]); a void beyond it deletes the oldest kept one early, which a pool spec
/// accepted by `create_pool` never causes (`Timeline::keeps_voided_snapshots`).
pub use synod_primitives::protocol::KEPT_VOIDED_SNAPSHOTS;
pub use weights::WeightInfo;

#[cfg(feature = "runtime-benchmarks")]
mod benchmarking;
mod dispatchable_impls;
mod finality;
mod leak;
// The one test runtime of all pallets (`pallets/tests/src/mock.rs`), with this crate as itself.
#[cfg(test)]
extern crate self as pallet_checkpoints;
#[cfg(test)]
#[path = "../../tests/src/mock.rs"]
mod mock;
#[cfg(test)]
mod tests;
mod try_state;
mod types;
pub mod weights;

#[frame_support::pallet]
pub mod pallet {
	use super::*;
	pub use crate::types::*;
	use alloc::vec::Vec;
	use frame_support::pallet_prelude::*;
	use frame_system::pallet_prelude::*;
	use sp_runtime::{traits::AtLeast32BitUnsigned, Perbill};
	use synod_primitives::{
		ChallengesInspect, Hash32, MemberIndex, OnRoundFinalized, Participant, PoolId,
		PoolsInterface, RoundIndex, TrainerStake,
	};

	#[pallet::pallet]
	pub struct Pallet<T>(_);

	/// Configuration.
	#[pallet::config]
	pub trait Config: frame_system::Config {
		/// Stake amounts (planck); the pools' balance type.
		type Balance: Parameter + Member + MaxEncodedLen + AtLeast32BitUnsigned + Copy + Default;
		/// The pools (membership, stakes, round progression).
		type Pools: PoolsInterface<Self::AccountId, Self::Balance, BlockNumberFor<Self>>;
		/// Told when a round becomes final (Rewards schedules its settlement).
		type OnRoundFinalized: OnRoundFinalized<BlockNumberFor<Self>>;
		/// Bonded stake: keeps snapshot stake slashable, applies the inactivity leak.
		type Staking: TrainerStake<Self::AccountId, Balance = Self::Balance>;
		/// Proved equivocations: an unmatched commit of a voided round in which one was proved is
		/// not leaked ([`UnmatchedCommits`]).
		type Challenges: ChallengesInspect<Self::AccountId>;
		/// Share of its snapshot stake a participant loses for each voided round in which it
		/// committed nothing, or something other than the checkpoint a majority of the round's
		/// stake committed ([`UnmatchedCommits`]).
		#[pallet::constant]
		type InactivityLeak: Get<Perbill>;
		/// Voided rounds in a row without a commit (or with an unmatched one) after which a
		/// member is dropped (≥ 1).
		#[pallet::constant]
		type DropAfterMissed: Get<u32>;
		/// Maximum members of a pool (bounds included sets, committers and candidates).
		#[pallet::constant]
		type MaxMembers: Get<u32>;
		/// Maximum round deadlines scheduled for one block.
		#[pallet::constant]
		type MaxDeadlinesPerBlock: Get<u32>;
		/// Blocks a committer of another included set needs, from the block that fixes a split
		/// round's agreed set ([`AgreedSets`]), to fetch the agreed payloads it lacks,
		/// aggregate them and have its second commit included. A voided round judges commits
		/// off the agreed set (leaked like silence, [`UnmatchedCommits`]) only if the set was
		/// fixed more than this many blocks before the deadline
		/// (`synod_protocol::leak::agreed_in_time`), or half of the blocks a pool's rounds
		/// accept commits in when that is less (`Timeline::recommit_blocks`).
		#[pallet::constant]
		type RecommitPeriod: Get<BlockNumberFor<Self>>;
		/// Weights of this pallet's calls and hooks.
		type WeightInfo: WeightInfo;
		/// Creates Training pools for benchmarks.
		#[cfg(feature = "runtime-benchmarks")]
		type BenchmarkHelper: synod_primitives::PoolSetup<Self::AccountId>;
	}

	/// The round each Training pool is committing now.
	#[pallet::storage]
	pub type OpenRounds<T: Config> =
		StorageMap<_, Twox64Concat, PoolId, OpenRound<T::Balance, BlockNumberFor<T>>>;

	/// Participants of each opened round: kept while the round can be challenged (until
	/// settlement) or, voided, while its stake is slashable ([`KeptSnapshots`]).
	#[pallet::storage]
	pub type Snapshots<T: Config> =
		StorageMap<_, Twox64Concat, (PoolId, RoundIndex), SnapshotOf<T>, OptionQuery>;

	/// Voided rounds in a row in which a member committed nothing (or an unmatched commit that
	/// was leaked), by pool and account; reset when it contributes to a final round or commits
	/// the majority candidate of a voided one.
	#[pallet::storage]
	pub type MissedRounds<T: Config> =
		StorageDoubleMap<_, Twox64Concat, PoolId, Blake2_128Concat, T::AccountId, u32, ValueQuery>;

	/// Candidates of the open round, by `(pool, round)`: one per distinct commit of its
	/// snapshot participants, so never more than the snapshot holds.
	#[pallet::storage]
	pub type Candidates<T: Config> = StorageMap<
		_,
		Twox64Concat,
		(PoolId, RoundIndex),
		BoundedVec<Candidate<T>, T::MaxMembers>,
		ValueQuery,
	>;

	/// The included set fixed for a split open round (`synod_protocol::agreement`): once
	/// participants holding ⅔ of the snapshot's stake have committed and no candidate reaches
	/// quorum, the members attested by more than ⅓ of the stake. A committer whose set differs may
	/// commit once more over it; with the block that fixed it. Removed when the round closes.
	#[pallet::storage]
	pub type AgreedSets<T: Config> =
		StorageMap<_, Twox64Concat, (PoolId, RoundIndex), AgreedSet<T>, OptionQuery>;

	/// Who committed what for `(pool, round)`.
	#[pallet::storage]
	pub type Commits<T: Config> = StorageDoubleMap<
		_,
		Twox64Concat,
		(PoolId, RoundIndex),
		Blake2_128Concat,
		T::AccountId,
		CommitRecord<T>,
	>;

	/// Final checkpoints by pool and round.
	#[pallet::storage]
	pub type FinalCheckpoints<T: Config> =
		StorageDoubleMap<_, Twox64Concat, PoolId, Twox64Concat, RoundIndex, FinalCheckpoint<T>>;

	/// The last final round of each pool and its hash.
	#[pallet::storage]
	pub type LastFinal<T: Config> = StorageMap<_, Twox64Concat, PoolId, (RoundIndex, Hash32)>;

	/// Voided rounds of each pool whose snapshot is still kept, oldest first: `(round, block
	/// after which it is deleted)`; the block is `Timeline::slashable_until` of the round's
	/// deadline. At most [`KEPT_VOIDED_SNAPSHOTS`].
	#[pallet::storage]
	pub type KeptSnapshots<T: Config> = StorageMap<
		_,
		Twox64Concat,
		PoolId,
		BoundedVec<(RoundIndex, BlockNumberFor<T>), ConstU32<KEPT_VOIDED_SNAPSHOTS>>,
		ValueQuery,
	>;

	/// Voided rounds and the block they were voided in.
	#[pallet::storage]
	pub type Voided<T: Config> =
		StorageDoubleMap<_, Twox64Concat, PoolId, Twox64Concat, RoundIndex, BlockNumberFor<T>>;

	/// Members whose commit differs from the final checkpoint, with their hash.
	#[pallet::storage]
	pub type Divergent<T: Config> = StorageMap<
		_,
		Twox64Concat,
		(PoolId, RoundIndex),
		BoundedVec<(T::AccountId, Hash32), T::MaxMembers>,
		ValueQuery,
	>;

	/// Participants of a voided round that committed another hash over the included set of the
	/// candidate a strict majority of the round's snapshot stake committed
	/// (`synod_protocol::leak::at_void`), with their snapshot stake. Decided once the round's
	/// equivocation reports close (the block `Timeline::slashable_until` of its deadline):
	/// scheduled in [`Deadlines`], or, if none of the `MaxDeadlinesPerBlock` blocks from it had
	/// room, by [`Pallet::decide_unmatched_commits`] (their stake stays slashable for
	/// `max(round_timeout, 2 × MaxDeadlinesPerBlock + 8)` blocks more). Each is leaked like a silent participant
	/// ([`Event::UnmatchedCommitLeaked`]) unless an equivocation was proved in the round by then
	/// ([`Event::UnmatchedCommitsExcused`]). Kept until decided, also after the round's
	/// snapshot is deleted once its reports closed (deleted with it, never judged, if the
	/// snapshot goes earlier); the pool's reaping deletes what is left.
	///
	/// Also, from a final round's settlement, its silent included members
	/// (`synod_protocol::leak::at_settlement`: aggregated, no commit recorded), decided in the
	/// next block the same way and leaked without excuse ([`Event::SilentIncludedLeaked`]).
	#[pallet::storage]
	pub type UnmatchedCommits<T: Config> =
		StorageMap<_, Twox64Concat, (PoolId, RoundIndex), SnapshotOf<T>, OptionQuery>;

	/// Rounds to void at a block unless final by then, and voided or settled final rounds whose
	/// [`UnmatchedCommits`] are decided at that block.
	#[pallet::storage]
	pub type Deadlines<T: Config> = StorageMap<
		_,
		Twox64Concat,
		BlockNumberFor<T>,
		BoundedVec<(PoolId, RoundIndex), T::MaxDeadlinesPerBlock>,
		ValueQuery,
	>;

	/// Events.
	#[pallet::event]
	#[pallet::generate_deposit(pub(super) fn deposit_event)]
	pub enum Event<T: Config> {
		/// `round` of `pool_id` opened; voided at `deadline` unless final.
		RoundOpened {
			/// Pool.
			pool_id: PoolId,
			/// Round.
			round: RoundIndex,
			/// Block number.
			deadline: BlockNumberFor<T>,
			/// Stake taking part, planck.
			round_stake: T::Balance,
		},
		/// `who` committed `hash` for `round`.
		CheckpointCommitted {
			/// Pool.
			pool_id: PoolId,
			/// Round.
			round: RoundIndex,
			/// Member.
			who: T::AccountId,
			/// Checkpoint hash.
			hash: Hash32,
		},
		/// `round` of `pool_id` is final at `hash`.
		CheckpointFinalized {
			/// Pool.
			pool_id: PoolId,
			/// Round.
			round: RoundIndex,
			/// Final checkpoint hash.
			hash: Hash32,
			/// Previous final hash.
			parent: Hash32,
			/// Contributors (included ∩ committers) at finality.
			contributors: BoundedVec<T::AccountId, T::MaxMembers>,
		},
		/// A member whose payload was included committed the final checkpoint after finality.
		LateContributorAdded {
			/// Pool.
			pool_id: PoolId,
			/// Round.
			round: RoundIndex,
			/// Member.
			who: T::AccountId,
		},
		/// `who` committed a checkpoint other than the final one.
		DivergentCommit {
			/// Pool.
			pool_id: PoolId,
			/// Round.
			round: RoundIndex,
			/// Member.
			who: T::AccountId,
			/// Its hash.
			hash: Hash32,
		},
		/// `round` of `pool_id` missed quorum by its deadline.
		RoundVoided {
			/// Pool.
			pool_id: PoolId,
			/// Round.
			round: RoundIndex,
		},
		/// `who` committed nothing in voided `round` and lost `leaked` planck of stake.
		InactivityLeaked {
			/// Pool.
			pool_id: PoolId,
			/// Round.
			round: RoundIndex,
			/// Member.
			who: T::AccountId,
			/// Planck slashed.
			leaked: T::Balance,
			/// Voided rounds in a row it missed.
			missed: u32,
		},
		/// The members' included sets of open `round` split (⅔ of its stake committed, no
		/// candidate at quorum): `included` is the set fixed for it; committers of another set
		/// may commit once more over this one.
		IncludedSetAgreed {
			/// Pool.
			pool_id: PoolId,
			/// Round.
			round: RoundIndex,
			/// Member indices attested by more than ⅓ of the round's stake, ascending.
			included: IncludedSet<T>,
		},
		/// `who` committed another hash over the included set of the checkpoint a majority of
		/// voided `round`'s stake committed, no equivocation was proved in the round, and it lost
		/// `leaked` planck of stake, as a silent participant does.
		UnmatchedCommitLeaked {
			/// Pool.
			pool_id: PoolId,
			/// Round.
			round: RoundIndex,
			/// The committer.
			who: T::AccountId,
			/// Planck slashed.
			leaked: T::Balance,
			/// Voided rounds in a row it missed or committed unmatched.
			missed: u32,
		},
		/// `who`'s payload was aggregated into final `round` (its index is in the included set)
		/// but it recorded no commit for the round by its settlement: it lost `leaked` planck of
		/// stake, as a silent participant of a voided round does.
		SilentIncludedLeaked {
			/// Pool.
			pool_id: PoolId,
			/// Round.
			round: RoundIndex,
			/// The silent member.
			who: T::AccountId,
			/// Planck slashed.
			leaked: T::Balance,
			/// Rounds in a row it missed (voided rounds without a commit, final rounds it was
			/// silent in).
			missed: u32,
		},
		/// An equivocation was proved in voided `round`: its unmatched commits (honest members
		/// split over an equivocator's two payloads commit two hashes) are not leaked.
		UnmatchedCommitsExcused {
			/// Pool.
			pool_id: PoolId,
			/// Round.
			round: RoundIndex,
		},
	}

	/// Errors.
	#[pallet::error]
	pub enum Error<T> {
		/// No pool with this id.
		PoolNotFound,
		/// The pool is not training.
		PoolNotTraining,
		/// The caller is not a member of the pool.
		NotMember,
		/// The caller is not a participant of this round (it joined later, left before it
		/// opened, or its stake was slashed to zero).
		NotInSnapshot,
		/// The round's deadline has not passed yet.
		DeadlineNotReached,
		/// The pool has no open round.
		NoOpenRound,
		/// The caller takes part from a later round.
		NotYetMember,
		/// The round is beyond the next one.
		RoundNotOpen,
		/// The round was voided; or it is final and its late-commit window (`challenge_window`
		/// blocks after finality) has closed for this commit: after it, only a participant
		/// without a commit may record one, until the round is settled.
		RoundClosed,
		/// The caller already committed for this round (another commit is accepted only over
		/// the agreed set of a split round, from a committer of another set, or, once the round
		/// is final, the final pair from a committer of another set or of the final set with
		/// another hash).
		AlreadyCommitted,
		/// The included set is empty or not strictly increasing.
		InvalidIncludedSet,
		/// A stake sum overflowed.
		Overflow,
		/// A commit that is not over the open round's agreed set once it is fixed (a second
		/// commit, or a first one made after the set was fixed more than the pool's recommit
		/// period before the deadline), or a second commit after finality that is not the final
		/// checkpoint with its included set.
		NotTheAgreedSet,
		/// The round opened less than its pool's `min_round_length` blocks ago (or has not
		/// opened, in a pool with a minimum round length): its inner phase cannot be over, so no
		/// commit to it is accepted yet.
		InnerPhaseNotOver,
		/// The round has no undecided unmatched commits or silent included members
		/// ([`UnmatchedCommits`]): none, or already decided.
		NoUnmatchedCommits,
		/// The round's equivocation reports are still open (a voided round's until
		/// `Timeline::slashable_until` of its deadline, a final round's until it is settled):
		/// its unmatched commits are decided after.
		EquivocationReportsOpen,
		/// The open round's deadline has passed: a commit now would not count, and the round
		/// is voided by the deadline queue or by anyone's `void_expired_round`.
		DeadlinePassed,
		/// The open round's void is scheduled in a deadline queue at this block or a later one
		/// ([`OpenRound::scheduled_at`]): the queue voids it in that block's `on_initialize`,
		/// so the transaction pool does not admit a `void_expired_round` of it
		/// ([`Pallet::check_void`]).
		VoidScheduled,
	}

	#[pallet::call]
	impl<T: Config> Pallet<T> {
		/// Commits the caller's checkpoint for `round` of `pool_id`: `checkpoint_hash` is the
		/// blake3 of the canonical safetensors file (32 bytes), `included` the member indices
		/// whose pseudo-gradients were aggregated, strictly increasing. Accepted from snapshot
		/// participants for the open round from `min_round_length` blocks after it opened, from
		/// members for the next one in a pool without a minimum round length (counted when it
		/// opens), and from participants of a final round for `challenge_window` blocks after
		/// finality (after that, until the round is settled, from a participant without a
		/// commit: recorded, not paid, so that it is not leaked as a silent included member). A
		/// commit at or after the open round's deadline is refused ([`Error::DeadlinePassed`]):
		/// the round is voided by the deadline queue or by `void_expired_round`, never by a
		/// commit, so that no commit takes the block space of a void.
		/// If the open round's included sets split ([`AgreedSets`], event
		/// [`Event::IncludedSetAgreed`]), a participant that committed another set may commit
		/// once more, over the agreed set; its stake moves to that commit; a participant that
		/// had not committed yet commits over the agreed set only, if it was fixed more than
		/// the pool's recommit period (`RecommitPeriod`, at most half of the blocks its rounds
		/// accept commits in) before the deadline. After finality, a
		/// participant whose commit differs from the final one (another included set, or the
		/// final set with another hash: an equivocator's two payloads split honest members
		/// over one set) may commit the final `(hash, included)` once (a late contributor if
		/// it is in the set).
		///
		/// Weight: booked for the worst path ([`Pallet::commit_booked_weight`]), a second
		/// commit over the agreed set that finalizes the round and schedules its settlement, then
		/// either opens the next round (snapshot of `MaxMembers`, early commits counted) or ends
		/// the pool (every member's commitment ended). The call reports the weight of the path
		/// it took at its pool's size ([`Pallet::commit_used_weight`]) and the rest is refunded,
		/// so that the commits of small pools (an attacker's own, say), also those that end
		/// their pools, take the block space of their own path, not of a 32-member pool's.
		///
		/// Class: `Operational`, so that block space reserved for it cannot be taken by
		/// ordinary transactions (block stuffing); the runtime admits a commit to the
		/// transaction pool only if it would succeed ([`Pallet::check_commit`]).
		///
		/// Errors: [`Error::PoolNotFound`], [`Error::PoolNotTraining`], [`Error::NotMember`],
		/// [`Error::NotYetMember`], [`Error::NotInSnapshot`], [`Error::RoundNotOpen`],
		/// [`Error::RoundClosed`], [`Error::DeadlinePassed`], [`Error::AlreadyCommitted`],
		/// [`Error::NotTheAgreedSet`], [`Error::InnerPhaseNotOver`],
		/// [`Error::InvalidIncludedSet`], [`Error::Overflow`].
		#[pallet::call_index(0)]
		#[pallet::weight((Pallet::<T>::commit_booked_weight(), DispatchClass::Operational))]
		pub fn commit_checkpoint(
			origin: OriginFor<T>,
			pool_id: PoolId,
			round: RoundIndex,
			checkpoint_hash: Hash32,
			included: IncludedSet<T>,
		) -> DispatchResultWithPostInfo {
			let who = ensure_signed(origin)?;
			Self::do_commit(who, pool_id, round, checkpoint_hash, included)?;
			Ok(Some(Self::commit_used_weight(pool_id, round)).into())
		}

		/// Voids the open round of `pool_id` if its deadline has passed (any signed account):
		/// the fallback when the per-block deadline queue was full, so no pool depends on
		/// another's queue.
		///
		/// Class: `Operational` (block space ordinary transactions cannot take, so stuffing
		/// the normal class cannot keep a round from its void); the runtime admits it to the
		/// transaction pool only if it would succeed ([`Pallet::check_void`]).
		///
		/// Weight: booked for a void of a `MaxMembers` round that ends its pool; charged the
		/// void at the round's size ([`Pallet::void_weight_at`]) and, when the void ends the
		/// pool, the pool's end at its member count.
		///
		/// Errors: [`Error::NoOpenRound`], [`Error::DeadlineNotReached`]; the transaction
		/// pool also refuses [`Error::VoidScheduled`] ([`Pallet::check_void`]).
		#[pallet::call_index(1)]
		#[pallet::weight((
			Pallet::<T>::void_weight_at(T::MaxMembers::get())
				.saturating_add(Pallet::<T>::max_void_end_weight()),
			DispatchClass::Operational
		))]
		pub fn void_expired_round(
			origin: OriginFor<T>,
			pool_id: PoolId,
		) -> DispatchResultWithPostInfo {
			ensure_signed(origin)?;
			Ok(Some(Self::do_void_expired_round(pool_id)?).into())
		}

		/// Decides the unmatched commits of voided `round` of `pool_id`, or the silent included
		/// members of settled final `round` ([`UnmatchedCommits`]), once its equivocation
		/// reports are closed (any signed account; free when it decides): the fallback when the
		/// per-block queue had no room for the decision, so that filling other pools' deadlines
		/// cannot buy a garbage committer or a silent member out of the leak. Emits
		/// [`Event::UnmatchedCommitLeaked`] or [`Event::SilentIncludedLeaked`] per participant,
		/// or [`Event::UnmatchedCommitsExcused`].
		///
		/// Errors: [`Error::NoUnmatchedCommits`], [`Error::EquivocationReportsOpen`].
		#[pallet::call_index(2)]
		#[pallet::weight(T::WeightInfo::decide_unmatched_commits())]
		pub fn decide_unmatched_commits(
			origin: OriginFor<T>,
			pool_id: PoolId,
			round: RoundIndex,
		) -> DispatchResultWithPostInfo {
			ensure_signed(origin)?;
			ensure!(
				UnmatchedCommits::<T>::contains_key((pool_id, round)),
				Error::<T>::NoUnmatchedCommits
			);
			let now = frame_system::Pallet::<T>::block_number();
			ensure!(!Self::reports_open(pool_id, round, now), Error::<T>::EquivocationReportsOpen);
			Self::leak_unmatched(pool_id, round, now);
			Ok(Pays::No.into())
		}
	}

	#[pallet::view_functions]
	impl<T: Config> Pallet<T> {
		/// The last final round of `pool_id` and its record.
		pub fn last_final_checkpoint(pool_id: PoolId) -> Option<(RoundIndex, FinalCheckpoint<T>)> {
			let (round, _) = LastFinal::<T>::get(pool_id)?;
			FinalCheckpoints::<T>::get(pool_id, round).map(|f| (round, f))
		}

		/// The round `pool_id` is committing now.
		pub fn open_round(pool_id: PoolId) -> Option<OpenRound<T::Balance, BlockNumberFor<T>>> {
			OpenRounds::<T>::get(pool_id)
		}

		/// The included set fixed for open `round` of `pool_id` after its members' sets split,
		/// if any ([`AgreedSets`]).
		pub fn agreed_set(pool_id: PoolId, round: RoundIndex) -> Option<Vec<MemberIndex>> {
			AgreedSets::<T>::get((pool_id, round)).map(|s| s.included.into_inner())
		}

		/// The participants of `round` of `pool_id` (index, account, stake in planck), frozen
		/// when it opened; empty if it has not opened, or was settled, or was voided and its
		/// stake is no longer slashable ([`KeptSnapshots`]).
		pub fn round_snapshot(
			pool_id: PoolId,
			round: RoundIndex,
		) -> Vec<Participant<T::AccountId>> {
			Self::live_snapshot(pool_id, round).map(|s| s.into_inner()).unwrap_or_default()
		}
	}

	#[pallet::hooks]
	impl<T: Config> Hooks<BlockNumberFor<T>> for Pallet<T> {
		fn on_initialize(n: BlockNumberFor<T>) -> Weight {
			let due = Deadlines::<T>::take(n);
			let count = due.len() as u32;
			let mut ends = Weight::zero();
			for (pool_id, round) in due {
				if Voided::<T>::contains_key(pool_id, round)
					|| FinalCheckpoints::<T>::contains_key(pool_id, round)
				{
					// A voided round's unmatched commits, due now that its reports are closed,
					// or a settled final round's silent included members.
					Self::leak_unmatched(pool_id, round, n);
				} else {
					// In its own storage layer: a void that fails half-way leaves nothing
					// behind, and the round, no longer in any queue, is voided by
					// `void_expired_round` (which `check_void` then admits).
					let (result, end) = Self::void_and_end(pool_id, round, n);
					if result.is_err() {
						OpenRounds::<T>::mutate(pool_id, |open| {
							if let Some(open) = open.as_mut().filter(|o| o.round == round) {
								open.scheduled_at = None;
							}
						});
					}
					ends = ends.saturating_add(end);
				}
			}
			Self::on_initialize_void_weight(count).saturating_add(ends)
		}

		#[cfg(feature = "try-runtime")]
		fn try_state(_n: BlockNumberFor<T>) -> Result<(), sp_runtime::TryRuntimeError> {
			Self::do_try_state()
		}
	}
}
