//! # Rewards
//!
//! Step 8 of the round protocol (`docs/architecture.md`). When a round becomes final, one round's
//! reward is reserved from the pool's held budget. Its **settlement** is due at
//! `Timeline::settle_at(finalized_at)`, the first block after the last challenge that can be
//! opened on the round has expired, so every challenge has a verdict or has expired. It runs in
//! `on_initialize` of that block if the per-block queue had room, and otherwise at the pool's
//! next [`Pallet::claim_rewards`] (or [`Pallet::settle_round`] by anyone): no pool depends on
//! another's queue, and nothing here can stop a round from becoming final.
//!
//! Settlement splits the reward over the round's contributors **pro rata to their snapshot
//! stake** ([`synod_primitives::protocol::split_by_stake`]): splitting one stake over many
//! accounts earns nothing extra. Contributors found guilty are not credited; their shares, the
//! rounding dust (or everything if there are no contributors) return to the pool's unreserved
//! budget — a conviction never raises the co-contributors' pay. Members claim what they were
//! credited with [`Pallet::claim_rewards`], paid from the creator's budget hold.
//!
//! Conservation (`try_state`): for every pool, the budget reserved in TrainingPools equals the
//! reservations of unsettled rounds plus the credited, unclaimed rewards; so the total paid never
//! exceeds the held budget.
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
mod settlement;
// The one test runtime of all pallets (`pallets/tests/src/mock.rs`), with this crate as itself.
#[cfg(test)]
extern crate self as pallet_rewards;
#[cfg(test)]
#[path = "../../tests/src/mock.rs"]
mod mock;
#[cfg(test)]
mod tests;
pub mod weights;

#[frame_support::pallet]
pub mod pallet {
	use super::*;
	use frame_support::pallet_prelude::*;
	use frame_system::pallet_prelude::*;
	use sp_runtime::traits::AtLeast32BitUnsigned;
	use synod_primitives::{
		ChallengesInspect, CheckpointsInspect, PoolId, PoolsInterface, RoundIndex,
	};

	/// A final round waiting for settlement.
	#[derive(
		Clone, PartialEq, Eq, Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Debug,
	)]
	pub struct PendingRound<Balance, BlockNumber> {
		/// Reward reserved for the round, planck.
		pub reserved: Balance,
		/// Block of settlement.
		pub settle_at: BlockNumber,
		/// Whether it is in [`Settlements`] at `settle_at` (otherwise it is settled lazily).
		pub scheduled: bool,
	}

	#[pallet::pallet]
	pub struct Pallet<T>(_);

	/// Configuration.
	#[pallet::config]
	pub trait Config: frame_system::Config {
		/// Reward amounts (planck); the pools' balance type.
		type Balance: Parameter + Member + MaxEncodedLen + AtLeast32BitUnsigned + Copy + Default;
		/// Pools (budget reservation and payment).
		type Pools: PoolsInterface<Self::AccountId, Self::Balance, BlockNumberFor<Self>>;
		/// Final checkpoints and their contributors.
		type Checkpoints: CheckpointsInspect<Self::AccountId, BlockNumberFor<Self>>;
		/// Verdicts of challenges.
		type Challenges: ChallengesInspect<Self::AccountId>;
		/// Told when a round is settled (Checkpoints prunes its snapshot and commits).
		type OnRoundSettled: synod_primitives::OnRoundSettled;
		/// Maximum settlements scheduled for one block.
		#[pallet::constant]
		type MaxSettlementsPerBlock: Get<u32>;
		/// Maximum contributors of a round (a pool's `MaxMembers`).
		#[pallet::constant]
		type MaxContributors: Get<u32>;
		/// Weights of this pallet's calls and hooks.
		type WeightInfo: WeightInfo;
		/// Creates Training pools for benchmarks.
		#[cfg(feature = "runtime-benchmarks")]
		type BenchmarkHelper: crate::BenchmarkHelper<Self::AccountId>;
	}

	/// Final rounds not yet settled, by pool and round.
	#[pallet::storage]
	pub type Unsettled<T: Config> = StorageDoubleMap<
		_,
		Twox64Concat,
		PoolId,
		Twox64Concat,
		RoundIndex,
		PendingRound<T::Balance, BlockNumberFor<T>>,
	>;

	/// Where the next claim's scan of a pool's [`Unsettled`] rounds starts: after this round's
	/// key (in the map's key order), wrapping around, so that successful claims read every
	/// unsettled round of a pool with N of them within about ⌈N / (2 × MaxSettlementsPerBlock)⌉
	/// (a claim that settled its limit stops after the last round it settled, and a claim that
	/// fails, `NothingToClaim`, moves nothing). Absent: from
	/// the first key. One `u32` per pool with unsettled rounds; removed once a scan reads them
	/// all, and when the pool is reaped.
	#[pallet::storage]
	pub type SettleCursor<T: Config> = StorageMap<_, Twox64Concat, PoolId, RoundIndex>;

	/// Rounds to settle at a block.
	#[pallet::storage]
	pub type Settlements<T: Config> = StorageMap<
		_,
		Twox64Concat,
		BlockNumberFor<T>,
		BoundedVec<(PoolId, RoundIndex), T::MaxSettlementsPerBlock>,
		ValueQuery,
	>;

	/// Credited, unclaimed rewards by pool and member, in planck.
	#[pallet::storage]
	pub type Claimable<T: Config> = StorageDoubleMap<
		_,
		Twox64Concat,
		PoolId,
		Blake2_128Concat,
		T::AccountId,
		T::Balance,
		ValueQuery,
	>;

	/// Events.
	#[pallet::event]
	#[pallet::generate_deposit(pub(super) fn deposit_event)]
	pub enum Event<T: Config> {
		/// `reserved` planck were set aside for final `round`; settled at `settle_at`.
		RewardReserved {
			/// Pool.
			pool_id: PoolId,
			/// Round.
			round: RoundIndex,
			/// Planck.
			reserved: T::Balance,
			/// Block number.
			settle_at: BlockNumberFor<T>,
		},
		/// `round` was settled: `paid` planck credited to `credited` contributors pro rata to
		/// their snapshot stake; `returned` planck went back to the pool's budget.
		RoundSettled {
			/// Pool.
			pool_id: PoolId,
			/// Round.
			round: RoundIndex,
			/// Planck credited in total.
			paid: T::Balance,
			/// Contributors credited.
			credited: u32,
			/// Planck returned to the budget.
			returned: T::Balance,
		},
		/// `who` claimed `amount` planck of rewards from `pool_id`.
		RewardsClaimed {
			/// Pool.
			pool_id: PoolId,
			/// Member.
			who: T::AccountId,
			/// Planck.
			amount: T::Balance,
		},
		/// Reaping `pool_id` could not pay `who`'s unclaimed reward (less than the existential
		/// deposit to an account that no longer exists): `amount` planck went back to the
		/// pool's creator.
		RewardForfeited {
			/// Pool.
			pool_id: PoolId,
			/// Member.
			who: T::AccountId,
			/// Planck.
			amount: T::Balance,
		},
	}

	/// Errors.
	#[pallet::error]
	pub enum Error<T> {
		/// Nothing is credited to the caller in this pool.
		NothingToClaim,
		/// The round is not waiting for settlement.
		NotUnsettled,
		/// The round's settlement block has not come yet.
		SettlementNotDue,
	}

	#[pallet::call]
	impl<T: Config> Pallet<T> {
		/// Pays the caller every reward credited to it in `pool_id` (from the pool creator's
		/// budget hold), after settling up to `MaxSettlementsPerBlock` of the pool's rounds whose
		/// settlement is due but was not scheduled. Weighed for that many settlements; the
		/// weight of those it did not make is refunded ([`Pallet::claim_weight`]).
		///
		/// Errors: [`Error::NothingToClaim`]; a failed transfer's `TokenError`.
		#[pallet::call_index(0)]
		#[pallet::weight(Pallet::<T>::claim_weight(T::MaxSettlementsPerBlock::get()))]
		pub fn claim_rewards(origin: OriginFor<T>, pool_id: PoolId) -> DispatchResultWithPostInfo {
			let who = ensure_signed(origin)?;
			let used = Self::claim_weight(Self::settle_due(pool_id));
			Self::do_claim(who, pool_id)
				.map_err(|e| frame_support::dispatch::WithPostDispatchInfo::with_weight(e, used))?;
			Ok(Some(used).into())
		}

		/// Settles `round` of `pool_id` once its settlement block has come (any signed
		/// account): the fallback when the per-block queue was full.
		///
		/// Errors: [`Error::NotUnsettled`], [`Error::SettlementNotDue`].
		#[pallet::call_index(1)]
		#[pallet::weight(T::WeightInfo::on_initialize_settle(1, T::MaxContributors::get())
			.saturating_add(<T::OnRoundSettled as synod_primitives::OnRoundSettled>::weight()))]
		pub fn settle_round(
			origin: OriginFor<T>,
			pool_id: PoolId,
			round: RoundIndex,
		) -> DispatchResult {
			ensure_signed(origin)?;
			let pending = Unsettled::<T>::get(pool_id, round).ok_or(Error::<T>::NotUnsettled)?;
			ensure!(
				frame_system::Pallet::<T>::block_number() >= pending.settle_at,
				Error::<T>::SettlementNotDue
			);
			Self::settle(pool_id, round);
			Ok(())
		}
	}

	#[pallet::view_functions]
	impl<T: Config> Pallet<T> {
		/// Rewards `who` can claim from `pool_id`, in planck.
		pub fn claimable(pool_id: PoolId, who: T::AccountId) -> T::Balance {
			Claimable::<T>::get(pool_id, who)
		}
	}

	#[pallet::hooks]
	impl<T: Config> Hooks<BlockNumberFor<T>> for Pallet<T> {
		fn on_initialize(n: BlockNumberFor<T>) -> Weight {
			let due = Settlements::<T>::take(n);
			let count = due.len() as u32;
			for (pool_id, round) in due {
				Self::settle(pool_id, round);
			}
			T::WeightInfo::on_initialize_settle(count, T::MaxContributors::get()).saturating_add(
				<T::OnRoundSettled as synod_primitives::OnRoundSettled>::weight()
					.saturating_mul(u64::from(count)),
			)
		}

		#[cfg(feature = "try-runtime")]
		fn try_state(_n: BlockNumberFor<T>) -> Result<(), sp_runtime::TryRuntimeError> {
			Self::do_try_state()
		}
	}
}

/// Creates pools with final rounds for benchmarks.
#[cfg(feature = "runtime-benchmarks")]
pub trait BenchmarkHelper<AccountId> {
	/// A pool with `members` members whose round 1 is final (all contributors), created in the
	/// current block; leaves the chain at the block of its finality (the first that accepts
	/// commits). Returns the pool id and the members.
	fn final_round(members: u32) -> (synod_primitives::PoolId, alloc::vec::Vec<AccountId>);
}
