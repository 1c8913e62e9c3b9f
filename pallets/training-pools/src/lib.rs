//! # TrainingPools
//!
//! A pool is a training job ([`PoolSpec`]): its terms ([`PoolTerms`]: a number of outer rounds,
//! membership bounds, a stake requirement, a per-round reward and the
//! quorum/timeout/challenge-window rules of `docs/architecture.md`) and its kind ([`PoolKind`]:
//! for DiLoCo a model config, initial weights, a dataset and the inner steps H).
//!
//! - [`Pallet::create_pool`] holds the creator's whole reward budget
//!   (`reward_per_round × rounds`, [`HoldReason::PoolBudget`]).
//! - [`Pallet::join_pool`] commits part of the caller's bonded stake (TrainerStaking) and
//!   registers its libp2p peer id and ML-DSA-65 public key. When `min_trainers` have joined, the
//!   pool moves `Open → Training` at round 1; later joiners take part from the next round.
//! - [`Pallet::leave_pool`] ends a membership and frees its committed stake, at once unless
//!   the open round's snapshot counts it: then it stays committed until that round is settled
//!   (`Timeline::settled_by` the leaving block: [`LeftCommitments`]).
//! - [`Pallet::cancel_pool`] (creator or root) stops the pool and releases the budget not owed
//!   to final rounds.
//! - [`Pallet::set_allowed_trainers`] (creator) replaces the accounts that may join a live
//!   pool (`PoolTerms::allowed_trainers`); members already in it stay. A non-empty list names
//!   at least `min_trainers` accounts, also after the pool started: list current members to
//!   reach the count.
//! - [`Pallet::reap_pool`] (anyone) deletes an ended pool once every round it ran is settled:
//!   its record, its members' and former members' registrations (their deposits go back to
//!   them) and, through [`Config::Records`], unclaimed rewards (paid out), its round history
//!   and its challenges' verdicts and no-show records; then the creator's storage deposit ([`HoldReason::PoolDeposit`]) is released. A long
//!   history takes several calls of at most [`Config::ReapLimit`] records each.
//!
//! Checkpoints, Challenges and Rewards use the pool through
//! [`synod_primitives::PoolsInterface`]. Trainers read pools with the view functions
//! [`Pallet::pool`] and [`Pallet::pool_members`], or the storage maps directly.
//!
//! Invariants (`try_state`): the creator's budget hold equals the sum of `budget_held` of its
//! pools, its deposit hold the sum of their `deposit`; `budget_reserved ≤ budget_held`; member
//! counts, total stake, commitments and registered peer ids match the member records and
//! [`LeftCommitments`].
#![cfg_attr(not(feature = "std"), no_std)]
#![deny(missing_docs)]
#![cfg_attr(
	not(test),
	deny(clippy::arithmetic_side_effects, clippy::unwrap_used, clippy::indexing_slicing)
)]

extern crate alloc;

pub use kind::*;
pub use pallet::*;
pub use types::*;
pub use weights::WeightInfo;

#[cfg(feature = "runtime-benchmarks")]
pub mod benchmarking;
mod dispatchable_impls;
mod events;
mod interface;
mod kind;
// The one test runtime of all pallets (`pallets/tests/src/mock.rs`), with this crate as itself.
#[cfg(test)]
extern crate self as pallet_training_pools;
#[cfg(test)]
#[path = "../../tests/src/mock.rs"]
mod mock;
#[cfg(test)]
mod tests;
mod try_state;
mod types;
pub mod weights;

use frame_support::pallet_macros::import_section;

#[import_section(events::events_and_errors)]
#[frame_support::pallet]
pub mod pallet {
	use super::*;
	use alloc::{boxed::Box, vec::Vec};
	use frame_support::{
		pallet_prelude::*,
		traits::{fungible, fungible::Inspect},
	};
	use frame_system::pallet_prelude::*;
	use synod_primitives::{
		MemberIndex, OnMemberLeft, OnTrainingStarted, PoolId, RoundIndex, TrainerStake,
	};

	/// Balance type of the currency.
	pub type BalanceOf<T> =
		<<T as Config>::Currency as Inspect<<T as frame_system::Config>::AccountId>>::Balance;

	/// Reasons for which this pallet holds funds.
	#[pallet::composite_enum]
	pub enum HoldReason {
		/// A pool creator's reward budget.
		#[codec(index = 0)]
		PoolBudget,
		/// A member's storage deposit: its record and ML-DSA key (kept after it leaves while
		/// challenges of its rounds are possible; see [`Pallet::release_member_deposit`]).
		#[codec(index = 1)]
		MemberDeposit,
		/// A pool creator's storage deposit, until the pool is reaped
		/// ([`Pallet::reap_pool`]).
		#[codec(index = 2)]
		PoolDeposit,
	}

	/// The storage version. A chain starts from the current genesis (`chain-specs/`): no
	/// migration brings older layouts to it.
	pub(crate) const STORAGE_VERSION: StorageVersion = StorageVersion::new(3);

	#[pallet::pallet]
	#[pallet::storage_version(STORAGE_VERSION)]
	pub struct Pallet<T>(_);

	/// Configuration.
	#[pallet::config]
	pub trait Config: frame_system::Config {
		/// The currency; budgets are holds of [`HoldReason::PoolBudget`].
		type Currency: fungible::Mutate<Self::AccountId>
			+ fungible::MutateHold<Self::AccountId, Reason = Self::RuntimeHoldReason>;
		/// The overarching hold reason.
		type RuntimeHoldReason: From<HoldReason>;
		/// Bonded stake (TrainerStaking).
		type Staking: TrainerStake<Self::AccountId, Balance = BalanceOf<Self>>;
		/// Told when a pool starts training (Checkpoints opens round 1).
		type OnTrainingStarted: OnTrainingStarted;
		/// Told when a membership ends (Checkpoints forgets the member's commit ahead).
		type OnMemberLeft: OnMemberLeft<Self::AccountId>;
		/// Maximum members of one pool.
		#[pallet::constant]
		type MaxMembers: Get<u32>;
		/// Maximum number of pools one account can be a member of at once.
		#[pallet::constant]
		type MaxPoolsPerTrainer: Get<u32>;
		/// Maximum length of a libp2p peer id, in bytes.
		#[pallet::constant]
		type MaxPeerIdLen: Get<u32>;
		/// Maximum length of a dataset id, in bytes.
		#[pallet::constant]
		type MaxDatasetIdLen: Get<u32>;
		/// Maximum outer rounds of a pool.
		#[pallet::constant]
		type MaxRounds: Get<u32>;
		/// Bounds on every pool-spec field (`max_rounds` and `max_members` are further capped
		/// by [`Config::MaxRounds`] and [`Config::MaxMembers`]).
		#[pallet::constant]
		type SpecLimits: Get<synod_primitives::protocol::SpecLimits>;
		/// Blocks between opening a challenge and drawing its jury (at least
		/// `synod_primitives::protocol::timeline::MIN_JURY_DELAY`; more than the chain has block
		/// authors, so that an honest author's block comes before the seed).
		#[pallet::constant]
		type JuryDelay: Get<BlockNumberFor<Self>>;
		/// Blocks a jury gets on top of one round timeout to replay and vote
		/// (`voting_period = round_timeout + VoteMargin`).
		#[pallet::constant]
		type VoteMargin: Get<BlockNumberFor<Self>>;
		/// Blocks after a jury's ruling during which the losing party may appeal it to a larger
		/// committee (0: no appeals; see `synod_primitives::protocol::Timeline::appeal_period`).
		#[pallet::constant]
		type AppealPeriod: Get<BlockNumberFor<Self>>;
		/// Storage deposit a member holds at `join_pool`, in planck: it pays for its record and
		/// its 1952-byte ML-DSA key (~2.1 KB) until the key is no longer needed as challenge
		/// evidence.
		#[pallet::constant]
		type MemberDeposit: Get<BalanceOf<Self>>;
		/// Storage deposit a creator holds at `create_pool` for the pool's own records, in
		/// planck ([`synod_primitives::protocol::pool_deposit`]'s base).
		#[pallet::constant]
		type PoolDeposit: Get<BalanceOf<Self>>;
		/// Storage deposit per round of a pool, in planck: each round leaves a final or voided
		/// record until the pool is reaped.
		#[pallet::constant]
		type RoundDeposit: Get<BalanceOf<Self>>;
		/// Records (former members, other pallets' round history) one `reap_pool` call deletes
		/// at most; current members (≤ `MaxMembers`) are always deleted in the first call.
		#[pallet::constant]
		type ReapLimit: Get<u32>;
		/// Other pallets' records of a pool (Rewards, Checkpoints, Challenges): a pool is
		/// reaped only when none is in use, and reaping clears them (unclaimed rewards are paid
		/// out).
		type Records: synod_primitives::PoolRecords;
		/// Weights of this pallet's calls.
		type WeightInfo: WeightInfo;
		/// Gives benchmark accounts bonded stake.
		#[cfg(feature = "runtime-benchmarks")]
		type BenchmarkHelper: crate::benchmarking::BenchmarkHelper<Self::AccountId, BalanceOf<Self>>;
	}

	/// Pools by id.
	#[pallet::storage]
	pub type Pools<T: Config> = StorageMap<_, Twox64Concat, PoolId, PoolInfo<T>>;

	/// The id the next pool gets.
	#[pallet::storage]
	pub type NextPoolId<T: Config> = StorageValue<_, PoolId, ValueQuery>;

	/// Member records by pool and account.
	#[pallet::storage]
	pub type Members<T: Config> =
		StorageDoubleMap<_, Twox64Concat, PoolId, Blake2_128Concat, T::AccountId, MemberInfo<T>>;

	/// Current members of each pool, in index order.
	#[pallet::storage]
	pub type MemberList<T: Config> =
		StorageMap<_, Twox64Concat, PoolId, BoundedVec<T::AccountId, T::MaxMembers>, ValueQuery>;

	/// Registrations of members that left or were dropped, by pool and member index, kept (with
	/// their deposit) until no challenge of a round they were in can be opened or decided:
	/// challenge evidence is checked against the key registered for that index.
	#[pallet::storage]
	pub type FormerMembers<T: Config> =
		StorageDoubleMap<_, Twox64Concat, PoolId, Twox64Concat, MemberIndex, FormerMember<T>>;

	/// Accounts a pool dropped for missing rounds (the inactivity leak, `DropAfterMissed` voided
	/// rounds in a row): they cannot join that pool again, so silence costs a withholder its
	/// place rather than a pause. Deleted with the pool ([`Pallet::reap_pool`]).
	#[pallet::storage]
	pub type Dropped<T: Config> =
		StorageDoubleMap<_, Twox64Concat, PoolId, Blake2_128Concat, T::AccountId, ()>;

	/// The current member that registered each libp2p peer id in a pool: peers are told apart
	/// by peer id, so no two members of a pool share one.
	#[pallet::storage]
	pub type PeerIds<T: Config> = StorageDoubleMap<
		_,
		Twox64Concat,
		PoolId,
		Blake2_128Concat,
		BoundedVec<u8, T::MaxPeerIdLen>,
		T::AccountId,
	>;

	/// Pools whose stake each account has committed: the Open or Training pools it is a member
	/// of, and the pools it left (or that ended) while their open round could count it (see
	/// [`LeftCommitments`]). At most `MaxPoolsPerTrainer`.
	#[pallet::storage]
	pub type TrainerPools<T: Config> = StorageMap<
		_,
		Blake2_128Concat,
		T::AccountId,
		BoundedVec<PoolId, T::MaxPoolsPerTrainer>,
		ValueQuery,
	>;

	/// Stake an account committed to a pool it left (or was dropped from) during a round that
	/// can count it, or that ended (completed or cancelled) with it in a round's snapshot, by
	/// account and pool: committed until that round is settled (its stake slashable until
	/// then), so one stake backs at most one live snapshot. Pruned when the account joins a pool, releases its
	/// deposit or the pool is reaped; each entry's pool stays in [`TrainerPools`] meanwhile.
	#[pallet::storage]
	pub type LeftCommitments<T: Config> = StorageDoubleMap<
		_,
		Blake2_128Concat,
		T::AccountId,
		Twox64Concat,
		PoolId,
		LeftCommitment<T>,
	>;

	#[pallet::call]
	impl<T: Config> Pallet<T> {
		/// Creates a pool from `spec` and holds `reward_per_round × rounds` planck of the
		/// caller's balance as its reward budget. Emits [`Event::PoolCreated`].
		///
		/// Every spec field is bounded (`SpecLimits`); the error names the field out of bounds.
		///
		/// It also holds the pool's storage deposit, `PoolDeposit + RoundDeposit × rounds`
		/// planck ([`HoldReason::PoolDeposit`]), returned by [`Pallet::reap_pool`].
		///
		/// Errors: [`Error::InvalidRounds`], [`Error::InvalidTrainerBounds`],
		/// [`Error::InvalidQuorum`], [`Error::InvalidRoundTimeout`],
		/// [`Error::InvalidInnerSteps`], [`Error::InvalidMinStake`],
		/// [`Error::InvalidRewardPerRound`], [`Error::InvalidChallengeWindow`],
		/// [`Error::InvalidMinRoundLength`], [`Error::InvalidAllowedTrainers`],
		/// [`Error::InsufficientBudget`], [`Error::InsufficientDeposit`], [`Error::Overflow`].
		#[pallet::call_index(0)]
		#[pallet::weight(T::WeightInfo::create_pool())]
		pub fn create_pool(origin: OriginFor<T>, spec: PoolSpec<T>) -> DispatchResult {
			let who = ensure_signed(origin)?;
			Self::do_create_pool(who, spec)
		}

		/// Joins `pool_id`, committing `stake` planck of bonded stake and registering the
		/// trainer's libp2p `peer_id` (an Ed25519 peer id, 38 bytes:
		/// [`synod_primitives::protocol::peer`]) and ML-DSA-65 public key (`ml_dsa_key`, 1952
		/// bytes; boxed to keep `RuntimeCall` small).
		///
		/// `peer_id_proof` is the peer id's key's Ed25519 signature over
		/// [`synod_primitives::protocol::peer::proof_message`]`(genesis hash, pool_id, caller)`:
		/// only the holder of a libp2p key registers its peer id ([`Error::PeerIdNotProved`]).
		/// The peer id must not be another current member's ([`Error::PeerIdTaken`]): trainers
		/// tell members apart by peer id. Holds `MemberDeposit` ([`HoldReason::MemberDeposit`]).
		/// A pool with a non-empty `allowed_trainers` admits only those accounts.
		///
		/// Errors: [`Error::PoolNotFound`], [`Error::PoolClosed`], [`Error::PoolFull`],
		/// [`Error::AlreadyMember`], [`Error::DroppedFromPool`], [`Error::NotAllowedToJoin`],
		/// [`Error::StakeBelowMinimum`],
		/// [`Error::InsufficientStake`], [`Error::TooManyPools`], [`Error::InvalidPeerId`],
		/// [`Error::PeerIdNotProved`], [`Error::PeerIdTaken`], [`Error::InsufficientDeposit`],
		/// [`Error::Overflow`].
		#[pallet::call_index(1)]
		#[pallet::weight(T::WeightInfo::join_pool().saturating_add(Pallet::<T>::prune_weight()))]
		pub fn join_pool(
			origin: OriginFor<T>,
			pool_id: PoolId,
			stake: BalanceOf<T>,
			peer_id: BoundedVec<u8, T::MaxPeerIdLen>,
			ml_dsa_key: Box<MlDsaPublicKey>,
			peer_id_proof: PeerIdProof,
		) -> DispatchResult {
			let who = ensure_signed(origin)?;
			Self::do_join_pool(who, pool_id, stake, peer_id, *ml_dsa_key, peer_id_proof)
		}

		/// Leaves `pool_id`: the member is not in the snapshot of any round opened after this
		/// (the snapshot of the round now open keeps it and its stake). If that snapshot can
		/// count it, its stake stays committed until that round is settled
		/// ([`LeftCommitments`]: one stake backs one live snapshot); otherwise its commitment ends at once. Stake
		/// backing past rounds stays slashable until their challenges are over
		/// (TrainerStaking's `SlashableUntil`). Rewards already credited stay claimable.
		///
		/// Errors: [`Error::PoolNotFound`], [`Error::NotMember`].
		#[pallet::call_index(2)]
		#[pallet::weight(T::WeightInfo::leave_pool()
			.saturating_add(T::DbWeight::get().reads_writes(1, 1))
			.saturating_add(T::OnMemberLeft::weight()))]
		pub fn leave_pool(origin: OriginFor<T>, pool_id: PoolId) -> DispatchResult {
			let who = ensure_signed(origin)?;
			Self::do_leave_pool(who, pool_id)
		}

		/// Cancels `pool_id` (its creator, or root). An `Open` pool is cancelled at once and its
		/// budget released. A `Training` pool finishes the round in flight first (members
		/// already training it are paid if it becomes final), then no further round starts and
		/// the budget not owed to final rounds is released ([`Event::CancelRequested`], then
		/// [`Event::PoolCancelled`]).
		///
		/// Errors: [`Error::PoolNotFound`], [`Error::NotCreator`], [`Error::PoolEnded`].
		#[pallet::call_index(3)]
		#[pallet::weight(T::WeightInfo::cancel_pool(T::MaxMembers::get()))]
		pub fn cancel_pool(origin: OriginFor<T>, pool_id: PoolId) -> DispatchResult {
			let caller = match ensure_root(origin.clone()) {
				Ok(()) => None,
				Err(_) => Some(ensure_signed(origin)?),
			};
			Self::do_cancel_pool(caller, pool_id)
		}

		/// Releases the storage deposit of former member `index` of `pool_id` to its account
		/// and deletes its registration (any signed account may call it) once no challenge of a
		/// round it was in can still use its key (`FormerMember::kept_until` has passed).
		///
		/// Errors: [`Error::NoFormerMember`], [`Error::DepositStillNeeded`].
		#[pallet::call_index(4)]
		#[pallet::weight(T::WeightInfo::release_member_deposit().saturating_add(Pallet::<T>::prune_weight()))]
		pub fn release_member_deposit(
			origin: OriginFor<T>,
			pool_id: PoolId,
			index: MemberIndex,
		) -> DispatchResult {
			ensure_signed(origin)?;
			Self::do_release_member_deposit(pool_id, index)
		}

		/// Reaps the ended pool `pool_id` (any signed account may call it): deletes its current
		/// members' and former members' registrations, releasing their storage deposits to
		/// them, and its other records ([`Config::Records`]: the round history, verdicts, equivocation proofs and no-show records), at most
		/// [`Config::ReapLimit`] records per call besides the current members
		/// ([`Event::PoolPartlyReaped`]; call again). The call that deletes the last record
		/// deletes the pool and releases its creator's storage deposit ([`Event::PoolReaped`]).
		///
		/// Possible once the pool has ended and every round it ran is settled (after
		/// `Timeline::settled_by` of the block it ended in: no challenge can be opened,
		/// judged or slashed; a round left unsettled by a full queue needs `settle_round`
		/// first). Rewards not yet claimed are paid out to their members on the way.
		///
		/// Errors: [`Error::PoolNotFound`], [`Error::PoolNotEnded`], [`Error::PoolNotSettled`],
		/// [`Error::PoolRecordsInUse`].
		#[pallet::call_index(5)]
		#[pallet::weight(Pallet::<T>::max_reap_weight())]
		pub fn reap_pool(origin: OriginFor<T>, pool_id: PoolId) -> DispatchResultWithPostInfo {
			ensure_signed(origin)?;
			let (members, formers, others) = Self::do_reap_pool(pool_id)?;
			Ok(Some(Self::reap_weight(members, formers, others)).into())
		}

		/// Replaces the accounts that may join `pool_id` (its creator only, while the pool is
		/// open or training): `allowed` empty admits anyone; otherwise each account at most
		/// once and at least `min_trainers` of them, as in `create_pool`. Members already in
		/// the pool stay; the list decides later joins only ([`Event::AllowedTrainersSet`]).
		///
		/// Errors: [`Error::PoolNotFound`], [`Error::NotCreator`], [`Error::PoolEnded`],
		/// [`Error::InvalidAllowedTrainers`].
		#[pallet::call_index(6)]
		#[pallet::weight(T::WeightInfo::set_allowed_trainers())]
		pub fn set_allowed_trainers(
			origin: OriginFor<T>,
			pool_id: PoolId,
			allowed: BoundedVec<T::AccountId, T::MaxMembers>,
		) -> DispatchResult {
			let who = ensure_signed(origin)?;
			Self::do_set_allowed_trainers(who, pool_id, allowed)
		}
	}

	#[pallet::view_functions]
	impl<T: Config> Pallet<T> {
		/// The pool `pool_id`, if it exists.
		pub fn pool(pool_id: PoolId) -> Option<PoolInfo<T>> {
			Pools::<T>::get(pool_id)
		}

		/// The current members of `pool_id` with their records, in index order.
		pub fn pool_members(pool_id: PoolId) -> Vec<(T::AccountId, MemberInfo<T>)> {
			MemberList::<T>::get(pool_id)
				.into_iter()
				.filter_map(|who| Members::<T>::get(pool_id, &who).map(|m| (who, m)))
				.collect()
		}
	}

	#[pallet::hooks]
	impl<T: Config> Hooks<BlockNumberFor<T>> for Pallet<T> {
		fn integrity_test() {
			assert!(T::ReapLimit::get() >= 1, "reap_pool must delete at least one record a call");
		}

		#[cfg(feature = "try-runtime")]
		fn try_state(_n: BlockNumberFor<T>) -> Result<(), sp_runtime::TryRuntimeError> {
			Self::do_try_state()
		}
	}
}
