//! # TrainerStaking
//!
//! Trainers bond stake before they can join a training pool. Stake is a `fungible` hold
//! ([`HoldReason::Staking`]) on the trainer's own account: it never leaves the account unless it
//! is slashed.
//!
//! - [`Pallet::bond`] moves free balance to the hold and adds it to the active stake.
//! - [`Pallet::unbond`] schedules active stake for release after `UnbondingPeriod` blocks; the
//!   stake that pool memberships committed (`Config::Commitments`) cannot be unbonded.
//! - [`Pallet::withdraw_unbonded`] releases every matured unbonding chunk, but not while the
//!   stake backs a round still open to challenges ([`SlashableUntil`], set by Checkpoints when a
//!   round's snapshot includes the account): leaving a pool and unbonding cannot dodge a slash.
//!
//! Genesis may bond accounts (`stakers`), e.g. the validators of a preset.
//!
//! Other pallets read active stake and slash through [`synod_primitives::TrainerStake`]; slashed
//! funds go to `Config::Slash`, minus the reporter's (successful challenger's) share.
//!
//! Invariant (checked by `try_state`): for every account, the held balance equals its ledger's
//! total (active + unbonding), and [`TotalStake`] is the sum over all ledgers.
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
mod impls;
// The one test runtime of all pallets (`pallets/tests/src/mock.rs`), with this crate as itself.
#[cfg(test)]
extern crate self as pallet_trainer_staking;
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
		traits::{
			fungible::{self, Inspect},
			OnUnbalanced,
		},
	};
	use frame_system::pallet_prelude::*;
	use synod_primitives::StakeCommitments;

	/// Balance type of the currency.
	pub type BalanceOf<T> =
		<<T as Config>::Currency as Inspect<<T as frame_system::Config>::AccountId>>::Balance;
	/// A slashed amount not yet given to anyone.
	pub type CreditOf<T> =
		fungible::Credit<<T as frame_system::Config>::AccountId, <T as Config>::Currency>;

	/// Stake scheduled for release.
	#[derive(
		Clone, PartialEq, Eq, Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Debug,
	)]
	pub struct UnlockChunk<Balance, BlockNumber> {
		/// Amount in planck.
		pub value: Balance,
		/// First block at which it can be withdrawn.
		pub unlock_at: BlockNumber,
	}

	/// A trainer's stake: `active` counts toward pools; `unlocking` is still held (and
	/// slashable) until withdrawn.
	#[derive(
		CloneNoBound,
		PartialEqNoBound,
		EqNoBound,
		Encode,
		Decode,
		MaxEncodedLen,
		TypeInfo,
		DebugNoBound,
	)]
	#[scale_info(skip_type_params(T))]
	pub struct StakingLedger<T: Config> {
		/// Bonded stake, in planck.
		pub active: BalanceOf<T>,
		/// Unbonding chunks, oldest first.
		pub unlocking:
			BoundedVec<UnlockChunk<BalanceOf<T>, BlockNumberFor<T>>, T::MaxUnlockingChunks>,
	}

	/// Reasons for which this pallet holds funds.
	#[pallet::composite_enum]
	pub enum HoldReason {
		/// Bonded trainer stake (active or unbonding).
		#[codec(index = 0)]
		Staking,
	}

	#[pallet::pallet]
	pub struct Pallet<T>(_);

	/// Configuration.
	#[pallet::config]
	pub trait Config: frame_system::Config {
		/// The currency; stake is a hold of [`HoldReason::Staking`].
		type Currency: fungible::Mutate<Self::AccountId>
			+ fungible::MutateHold<Self::AccountId, Reason = Self::RuntimeHoldReason>
			+ fungible::BalancedHold<Self::AccountId>;
		/// The overarching hold reason.
		type RuntimeHoldReason: From<HoldReason>;
		/// Smallest non-zero active stake, in planck.
		#[pallet::constant]
		type MinBond: Get<BalanceOf<Self>>;
		/// Blocks between `unbond` and the moment the chunk can be withdrawn.
		#[pallet::constant]
		type UnbondingPeriod: Get<BlockNumberFor<Self>>;
		/// Maximum number of unbonding chunks per account.
		#[pallet::constant]
		type MaxUnlockingChunks: Get<u32>;
		/// Stake committed elsewhere (pool memberships, validation) that `unbond` must leave
		/// active.
		type Commitments: StakeCommitments<Self::AccountId, BalanceOf<Self>>;
		/// Where slashed funds go (the reporter's share excepted).
		type Slash: OnUnbalanced<CreditOf<Self>>;
		/// Weights of this pallet's calls.
		type WeightInfo: WeightInfo;
	}

	/// Stake ledger of each bonded account.
	#[pallet::storage]
	pub type Ledger<T: Config> = StorageMap<_, Blake2_128Concat, T::AccountId, StakingLedger<T>>;

	/// Sum of all ledgers' totals (active + unbonding), in planck.
	#[pallet::storage]
	pub type TotalStake<T: Config> = StorageValue<_, BalanceOf<T>, ValueQuery>;

	/// Block until which an account's held stake backs a round (its challenge window or a
	/// challenge on it is not over): nothing is withdrawn before it, so a verdict can still
	/// slash it. Removed with the ledger.
	#[pallet::storage]
	pub type SlashableUntil<T: Config> =
		StorageMap<_, Blake2_128Concat, T::AccountId, BlockNumberFor<T>>;

	/// Genesis: accounts bonded from the start (e.g. the genesis validators).
	#[pallet::genesis_config]
	#[derive(frame_support::DefaultNoBound)]
	pub struct GenesisConfig<T: Config> {
		/// `(account, planck)`: each bonds that much of its genesis balance.
		pub stakers: alloc::vec::Vec<(T::AccountId, BalanceOf<T>)>,
	}

	#[pallet::genesis_build]
	impl<T: Config> BuildGenesisConfig for GenesisConfig<T> {
		fn build(&self) {
			for (who, amount) in &self.stakers {
				Pallet::<T>::do_bond(who, *amount)
					.expect("a genesis staker must afford its bond (≥ MinBond)");
			}
		}
	}

	/// Events.
	#[pallet::event]
	#[pallet::generate_deposit(pub(super) fn deposit_event)]
	pub enum Event<T: Config> {
		/// `amount` planck of `who`'s free balance was bonded.
		Bonded {
			/// Trainer.
			who: T::AccountId,
			/// Planck.
			amount: BalanceOf<T>,
		},
		/// `amount` planck of active stake starts unbonding; withdrawable from `unlock_at`.
		Unbonded {
			/// Trainer.
			who: T::AccountId,
			/// Planck.
			amount: BalanceOf<T>,
			/// Block number.
			unlock_at: BlockNumberFor<T>,
		},
		/// Matured unbonding chunks worth `amount` planck were released to free balance.
		Withdrawn {
			/// Trainer.
			who: T::AccountId,
			/// Planck.
			amount: BalanceOf<T>,
		},
		/// `amount` planck of `who`'s stake was slashed; `reporter` received `reporter_amount`.
		Slashed {
			/// Slashed trainer.
			who: T::AccountId,
			/// Planck slashed in total.
			amount: BalanceOf<T>,
			/// Who reported the offence (a successful challenger), if anyone.
			reporter: Option<T::AccountId>,
			/// Planck paid to the reporter.
			reporter_amount: BalanceOf<T>,
		},
	}

	/// Errors.
	#[pallet::error]
	pub enum Error<T> {
		/// The amount is zero.
		ZeroAmount,
		/// Active stake would be non-zero but below `MinBond`.
		BelowMinBond,
		/// Free balance cannot cover the bond (the account must also stay alive).
		InsufficientBalance,
		/// The account has no stake ledger.
		NotBonded,
		/// More than the active stake was asked to unbond.
		UnbondExceedsActive,
		/// Unbonding would take active stake below what pool memberships and validation committed
		/// (a validator's elected stake, or a candidate's minimum bond, until two sessions after
		/// `chill`).
		StakeCommitted,
		/// `MaxUnlockingChunks` unbonding chunks are pending; withdraw first.
		TooManyUnlockingChunks,
		/// No unbonding chunk has matured yet.
		NothingToWithdraw,
		/// The stake backs a round whose challenges are not over (see [`SlashableUntil`]);
		/// withdraw after that block.
		StakeBacksRound,
		/// An amount overflowed.
		Overflow,
	}

	#[pallet::call]
	impl<T: Config> Pallet<T> {
		/// Bonds `value` planck of the caller's free balance (moved to the staking hold).
		///
		/// Errors: [`Error::ZeroAmount`], [`Error::BelowMinBond`] (resulting active stake below
		/// `MinBond`), [`Error::InsufficientBalance`], [`Error::Overflow`].
		#[pallet::call_index(0)]
		#[pallet::weight(T::WeightInfo::bond())]
		pub fn bond(
			origin: OriginFor<T>,
			#[pallet::compact] value: BalanceOf<T>,
		) -> DispatchResult {
			let who = ensure_signed(origin)?;
			Self::do_bond(&who, value)
		}

		/// Starts unbonding `value` planck of active stake; it stays held (and slashable) for
		/// `UnbondingPeriod` blocks.
		///
		/// Errors: [`Error::ZeroAmount`], [`Error::NotBonded`], [`Error::UnbondExceedsActive`],
		/// [`Error::StakeCommitted`], [`Error::BelowMinBond`] (remaining active stake non-zero
		/// and below `MinBond`), [`Error::TooManyUnlockingChunks`].
		#[pallet::call_index(1)]
		// The benchmark's trainer commits nothing; the check of what it committed is weighed
		// at its bound (every pool of `MaxPoolsPerTrainer`).
		#[pallet::weight(T::WeightInfo::unbond().saturating_add(T::Commitments::committed_weight()))]
		pub fn unbond(
			origin: OriginFor<T>,
			#[pallet::compact] value: BalanceOf<T>,
		) -> DispatchResult {
			let who = ensure_signed(origin)?;
			Self::do_unbond(&who, value)
		}

		/// Releases every unbonding chunk whose `unlock_at` has passed; removes the ledger when
		/// nothing is left. Refused while the stake backs a round whose challenges are not over.
		///
		/// Errors: [`Error::NotBonded`], [`Error::NothingToWithdraw`],
		/// [`Error::StakeBacksRound`].
		#[pallet::call_index(2)]
		#[pallet::weight(T::WeightInfo::withdraw_unbonded(T::MaxUnlockingChunks::get()))]
		pub fn withdraw_unbonded(origin: OriginFor<T>) -> DispatchResult {
			let who = ensure_signed(origin)?;
			Self::do_withdraw_unbonded(&who)
		}
	}

	#[pallet::hooks]
	impl<T: Config> Hooks<BlockNumberFor<T>> for Pallet<T> {
		#[cfg(feature = "try-runtime")]
		fn try_state(_n: BlockNumberFor<T>) -> Result<(), sp_runtime::TryRuntimeError> {
			Self::do_try_state()
		}
	}
}
