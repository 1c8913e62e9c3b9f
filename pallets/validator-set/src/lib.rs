//! # ValidatorSet
//!
//! Validators from stake: the [`pallet_session`] `SessionManager` of Synod. Block authors (Aura)
//! and finality voters (GRANDPA) are the accounts that bonded stake in `pallet-trainer-staking`,
//! set their session keys (`session.setKeys`) and declared the intention to validate.
//!
//! - [`Pallet::validate`]: a bonded account (active stake ≥ `MinValidatorBond`) whose session
//!   keys are registered becomes a **candidate**. When the candidate list is full
//!   (`MaxCandidates`), a newcomer with more stake than the weakest candidate takes its place:
//!   minimum-bond sybils cannot squat the list.
//! - [`Pallet::chill`]: the candidate leaves the list; it stops validating from the session after
//!   next.
//! - **Election** ([`election::elect`]), at every session rotation: the candidates that still have
//!   keys and `MinValidatorBond` of active stake, the `MaxValidators` largest bonds (ties: the
//!   smaller account id), ordered by account id. A candidate that fell below the minimum bond
//!   (slashed, unbonded) or purged its keys is dropped from the list. If nobody is eligible the
//!   set is kept ([`Event::ValidatorSetKept`]): the chain never loses all its authors.
//! - `pallet-session` queues each elected set one session ahead: a `validate` (or `chill`) during
//!   session `s` takes effect at the start of session `s + 2`. Sessions last [`SessionLength`]
//!   blocks, a genesis parameter (short on the dev and local presets).
//! - Stake is **committed** (`StakeCommitments`) while it may still author: the stake an active
//!   or queued validator was elected with, and `MinValidatorBond` of a candidate or of a
//!   validator of the current session (genesis validators, a kept set). `unbond` cannot take it,
//!   so nobody ranks on stake it withdraws before its seat starts.
//! - An election that yields the current set again returns `None` to `pallet-session`: GRANDPA
//!   sees no authority-set change (key rotations are still picked up by `pallet-session`).
//!
//! The same stake may also back pool memberships (it is one bond per account); slashes of
//! `pallet-challenges` reduce it, and the next election drops a validator left below the minimum.
//!
//! Invariants (`try_state`): candidates are unique and bounded; active and queued sets are no
//! larger than `MaxValidators`; the session length is non-zero.
#![cfg_attr(not(feature = "std"), no_std)]
#![deny(missing_docs)]
#![cfg_attr(
	not(test),
	deny(clippy::arithmetic_side_effects, clippy::unwrap_used, clippy::indexing_slicing)
)]

extern crate alloc;

pub use pallet::*;

/// Blocks per session when genesis gives none (20 minutes of 2-second blocks).
pub const DEFAULT_SESSION_LENGTH: u32 = 600;
pub use weights::WeightInfo;

#[cfg(feature = "runtime-benchmarks")]
pub mod benchmarking;
pub mod election;
mod impls;
// The one test runtime of all pallets (`pallets/tests/src/mock.rs`), with this crate as itself.
#[cfg(test)]
extern crate self as pallet_validator_set;
#[cfg(test)]
#[path = "../../tests/src/mock.rs"]
mod mock;
#[cfg(test)]
mod tests;
pub mod weights;

#[frame_support::pallet]
pub mod pallet {
	use super::*;
	use frame_support::{
		pallet_prelude::*,
		traits::{ValidatorRegistration, ValidatorSet},
	};
	use frame_system::pallet_prelude::*;
	use sp_runtime::traits::AtLeast32BitUnsigned;
	use synod_primitives::TrainerStake;

	/// Why a candidate left the list without calling [`Pallet::chill`].
	#[derive(
		Clone,
		Copy,
		PartialEq,
		Eq,
		Encode,
		Decode,
		DecodeWithMemTracking,
		MaxEncodedLen,
		TypeInfo,
		Debug,
	)]
	pub enum DropReason {
		/// Its active stake fell below `MinValidatorBond` (slashed or unbonded).
		BelowMinBond,
		/// It purged its session keys.
		NoSessionKeys,
		/// The list was full and a candidate with more stake took its place.
		Outbid,
	}

	#[pallet::pallet]
	pub struct Pallet<T>(_);

	/// Configuration.
	#[pallet::config]
	pub trait Config: frame_system::Config {
		/// Stake in planck.
		type Balance: Parameter + MaxEncodedLen + AtLeast32BitUnsigned + Copy + Default;
		/// Bonded stake (`pallet-trainer-staking`): `active_stake` decides eligibility and rank.
		type Staking: TrainerStake<Self::AccountId, Balance = Self::Balance>;
		/// `pallet-session` (whose validator id is the account id): whether an account has
		/// session keys, and the validators of the current session.
		type SessionKeys: ValidatorRegistration<Self::AccountId>
			+ ValidatorSet<Self::AccountId, ValidatorId = Self::AccountId>;
		/// Active stake a candidate needs, in planck.
		#[pallet::constant]
		type MinValidatorBond: Get<Self::Balance>;
		/// Size of the active set (top N by stake); at most the consensus pallets'
		/// `MaxAuthorities`.
		#[pallet::constant]
		type MaxValidators: Get<u32>;
		/// Bound on the candidate list.
		#[pallet::constant]
		type MaxCandidates: Get<u32>;
		/// Weights of this pallet's calls.
		type WeightInfo: WeightInfo;
		/// Bonds stake and registers session keys for the benchmarks.
		#[cfg(feature = "runtime-benchmarks")]
		type BenchmarkHelper: benchmarking::BenchmarkHelper<Self::AccountId, Self::Balance>;
	}

	/// Accounts that declared the intention to validate, in arrival order.
	#[pallet::storage]
	pub type Candidates<T: Config> =
		StorageValue<_, BoundedVec<T::AccountId, T::MaxCandidates>, ValueQuery>;

	/// A validator and the active stake (planck) it was elected with.
	pub type Elected<T> = (<T as frame_system::Config>::AccountId, <T as Config>::Balance);

	/// The validators of the current session as elected here, with their stake at election
	/// (empty until the first election: the genesis validators are `pallet-session`'s genesis
	/// keys).
	#[pallet::storage]
	pub type Active<T: Config> =
		StorageValue<_, BoundedVec<Elected<T>, T::MaxValidators>, ValueQuery>;

	/// The validators elected for the next session (queued by `pallet-session`), with their
	/// stake at election.
	#[pallet::storage]
	pub type Queued<T: Config> =
		StorageValue<_, BoundedVec<Elected<T>, T::MaxValidators>, ValueQuery>;

	/// Length of a session, in blocks (set at genesis; never zero).
	#[pallet::storage]
	pub type SessionLength<T: Config> = StorageValue<_, BlockNumberFor<T>, ValueQuery>;

	/// Genesis: the first candidates (each must already have `MinValidatorBond` bonded in
	/// `pallet-trainer-staking`'s genesis) and the session length.
	#[pallet::genesis_config]
	#[derive(frame_support::DefaultNoBound)]
	pub struct GenesisConfig<T: Config> {
		/// Candidates at genesis, normally the same accounts as `session.keys`.
		pub candidates: alloc::vec::Vec<T::AccountId>,
		/// Blocks per session; `0` means [`DEFAULT_SESSION_LENGTH`].
		pub session_length: u32,
	}

	#[pallet::genesis_build]
	impl<T: Config> BuildGenesisConfig for GenesisConfig<T> {
		fn build(&self) {
			let length =
				if self.session_length == 0 { DEFAULT_SESSION_LENGTH } else { self.session_length };
			SessionLength::<T>::put(BlockNumberFor::<T>::from(length));
			let mut list = BoundedVec::<T::AccountId, T::MaxCandidates>::new();
			for who in &self.candidates {
				assert!(!list.contains(who), "duplicate genesis candidate");
				assert!(
					T::Staking::active_stake(who) >= T::MinValidatorBond::get(),
					"a genesis candidate must bond MinValidatorBond in trainerStaking's genesis"
				);
				list.try_push(who.clone()).expect("more genesis candidates than MaxCandidates");
			}
			Candidates::<T>::put(list);
		}
	}

	/// Events.
	#[pallet::event]
	#[pallet::generate_deposit(pub(super) fn deposit_event)]
	pub enum Event<T: Config> {
		/// `who` is a candidate from now on, with `stake` planck of active stake.
		Validating {
			/// Candidate.
			who: T::AccountId,
			/// Active stake, planck.
			stake: T::Balance,
		},
		/// `who` left the candidate list; it validates until the end of the queued session.
		Chilled {
			/// Former candidate.
			who: T::AccountId,
		},
		/// `who` was removed from the candidate list for `reason`.
		CandidateDropped {
			/// Former candidate.
			who: T::AccountId,
			/// Why.
			reason: DropReason,
		},
		/// `validators` will author from session `session` on (emitted when the set changes).
		ValidatorsElected {
			/// Session index.
			session: u32,
			/// The elected set, by account id.
			validators: BoundedVec<T::AccountId, T::MaxValidators>,
		},
		/// No candidate was eligible for session `session`: the current set stays.
		ValidatorSetKept {
			/// Session index.
			session: u32,
		},
	}

	/// Errors.
	#[pallet::error]
	pub enum Error<T> {
		/// The caller is already a candidate.
		AlreadyCandidate,
		/// The caller is not a candidate.
		NotCandidate,
		/// Active stake is below `MinValidatorBond`; bond more in `trainerStaking` first.
		BondTooLow,
		/// No session keys are registered for the caller; call `session.setKeys` first.
		NoSessionKeys,
		/// The candidate list is full and the caller's stake does not exceed the weakest
		/// candidate's.
		TooManyCandidates,
	}

	#[pallet::call]
	impl<T: Config> Pallet<T> {
		/// Declares the intention to validate: the caller becomes a candidate, elected at the
		/// next session rotation if its stake ranks in the top `MaxValidators`.
		///
		/// Errors: [`Error::AlreadyCandidate`], [`Error::BondTooLow`], [`Error::NoSessionKeys`],
		/// [`Error::TooManyCandidates`].
		#[pallet::call_index(0)]
		#[pallet::weight(T::WeightInfo::validate())]
		pub fn validate(origin: OriginFor<T>) -> DispatchResult {
			let who = ensure_signed(origin)?;
			Self::do_validate(who)
		}

		/// Leaves the candidate list; the caller stops validating from the session after next.
		///
		/// Errors: [`Error::NotCandidate`].
		#[pallet::call_index(1)]
		#[pallet::weight(T::WeightInfo::chill(T::MaxCandidates::get()))]
		pub fn chill(origin: OriginFor<T>) -> DispatchResult {
			let who = ensure_signed(origin)?;
			Self::do_chill(who)
		}
	}

	#[pallet::hooks]
	impl<T: Config> Hooks<BlockNumberFor<T>> for Pallet<T> {
		fn integrity_test() {
			assert!(T::MaxValidators::get() > 0, "MaxValidators must be positive");
			assert!(
				T::MaxCandidates::get() >= T::MaxValidators::get(),
				"MaxCandidates must be at least MaxValidators"
			);
			// `pallet-session` charges a full block for a rotation: the election must fit in it.
			let block = <T as frame_system::Config>::BlockWeights::get().max_block;
			assert!(
				T::WeightInfo::new_session(T::MaxCandidates::get()).all_lte(block),
				"an election over MaxCandidates must fit in a block"
			);
		}

		#[cfg(feature = "try-runtime")]
		fn try_state(_n: BlockNumberFor<T>) -> Result<(), sp_runtime::TryRuntimeError> {
			Self::do_try_state()
		}
	}

	impl<T: Config> Pallet<T> {
		pub(crate) fn do_validate(who: T::AccountId) -> DispatchResult {
			let mut list = Candidates::<T>::get();
			ensure!(!list.contains(&who), Error::<T>::AlreadyCandidate);
			let stake = T::Staking::active_stake(&who);
			ensure!(stake >= T::MinValidatorBond::get(), Error::<T>::BondTooLow);
			ensure!(T::SessionKeys::is_registered(&who), Error::<T>::NoSessionKeys);
			if list.is_full() {
				let weakest = election::weakest(&list, T::Staking::active_stake)
					.ok_or(Error::<T>::TooManyCandidates)?;
				let (index, weakest_stake) = weakest;
				ensure!(stake > weakest_stake, Error::<T>::TooManyCandidates);
				let out = list.remove(index);
				Self::deposit_event(Event::CandidateDropped {
					who: out,
					reason: DropReason::Outbid,
				});
			}
			list.try_push(who.clone()).map_err(|_| Error::<T>::TooManyCandidates)?;
			Candidates::<T>::put(list);
			Self::deposit_event(Event::Validating { who, stake });
			Ok(())
		}

		pub(crate) fn do_chill(who: T::AccountId) -> DispatchResult {
			let mut list = Candidates::<T>::get();
			let index = list.iter().position(|c| c == &who).ok_or(Error::<T>::NotCandidate)?;
			list.remove(index);
			Candidates::<T>::put(list);
			Self::deposit_event(Event::Chilled { who });
			Ok(())
		}
	}
}
