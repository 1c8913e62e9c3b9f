//! # Challenges
//!
//! Step 7 of the round protocol (`ARCHITECTURE.md`): during a final round's challenge window,
//! anyone may dispute a contributor's pseudo-gradient with [`Pallet::open_challenge`], holding a
//! `ChallengeBond`. A jury of up to `JurySize` other members of the pool replays the accused's
//! inner phase off-chain and votes with [`Pallet::vote`].
//!
//! **Jury selection** is fixed before the challenge exists and cannot be steered by the
//! challenger: the eligible members (those taking part in the round, other than the accused and
//! the challenger) are ranked by `blake2_256(final checkpoint hash ‖ accused ‖ member)`, and the
//! lowest `JurySize` are the jury. The final hash was agreed before anyone could challenge.
//!
//! **Verdicts**: a strict majority of the jury decides. *Guilty*: the accused loses
//! `SlashFraction` of its committed stake through TrainerStaking (the challenger gets
//! `ChallengerShare` of it) and its bond comes back; Rewards pays the accused nothing for the
//! round. *Innocent* (guilty can no longer reach a majority): the challenger's bond is slashed to
//! `Slash`. A challenge with no verdict after `VotingPeriod` blocks **expires** in
//! `on_initialize`: the bond is released and the accused keeps its reward.
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
mod dispatchable_impls;
#[cfg(test)]
mod mock;
#[cfg(test)]
mod tests;
pub mod weights;

#[frame_support::pallet]
pub mod pallet {
	use super::*;
	use frame_support::{
		pallet_prelude::*,
		traits::{fungible, fungible::Inspect, OnUnbalanced},
	};
	use frame_system::pallet_prelude::*;
	use sp_runtime::Perbill;
	use synod_primitives::{
		CheckpointsInspect, Hash32, PoolId, PoolsInterface, RoundIndex, TrainerStake,
	};

	/// Balance type of the currency.
	pub type BalanceOf<T> =
		<<T as Config>::Currency as Inspect<<T as frame_system::Config>::AccountId>>::Balance;
	/// A slashed bond not yet given to anyone.
	pub type CreditOf<T> =
		fungible::Credit<<T as frame_system::Config>::AccountId, <T as Config>::Currency>;
	/// Identifier of a challenge, assigned in order from 0.
	pub type ChallengeId = u32;

	/// An open challenge.
	#[derive(CloneNoBound, PartialEqNoBound, EqNoBound, Encode, Decode, MaxEncodedLen, TypeInfo, DebugNoBound)]
	#[scale_info(skip_type_params(T))]
	pub struct Challenge<T: Config> {
		/// Pool.
		pub pool_id: PoolId,
		/// Final round whose contribution is disputed.
		pub round: RoundIndex,
		/// The contributor accused.
		pub accused: T::AccountId,
		/// Who opened it.
		pub challenger: T::AccountId,
		/// Held bond, planck.
		pub bond: BalanceOf<T>,
		/// blake3 digest of the accused's signed payload (the evidence).
		pub payload_digest: Hash32,
		/// The jury.
		pub jury: BoundedVec<T::AccountId, T::JurySize>,
		/// Guilty votes so far.
		pub guilty_votes: u32,
		/// Innocent votes so far.
		pub innocent_votes: u32,
		/// Block at which it expires without a verdict.
		pub expires_at: BlockNumberFor<T>,
	}

	/// How a challenge ended.
	#[derive(
		Clone, Copy, PartialEq, Eq, Encode, Decode, DecodeWithMemTracking, MaxEncodedLen,
		TypeInfo, Debug,
	)]
	pub enum Verdict {
		/// The jury found the contribution dishonest.
		Guilty,
		/// The jury found it honest.
		Innocent,
		/// No majority within the voting period.
		Expired,
	}

	/// Reasons for which this pallet holds funds.
	#[pallet::composite_enum]
	pub enum HoldReason {
		/// A challenger's bond.
		#[codec(index = 0)]
		ChallengeBond,
	}

	#[pallet::pallet]
	pub struct Pallet<T>(_);

	/// Configuration.
	#[pallet::config]
	pub trait Config: frame_system::Config {
		/// The currency; bonds are holds of [`HoldReason::ChallengeBond`].
		type Currency: fungible::Mutate<Self::AccountId>
			+ fungible::MutateHold<Self::AccountId, Reason = Self::RuntimeHoldReason>
			+ fungible::BalancedHold<Self::AccountId>;
		/// The overarching hold reason.
		type RuntimeHoldReason: From<HoldReason>;
		/// Bonded stake (slashing the guilty).
		type Staking: TrainerStake<Self::AccountId, Balance = BalanceOf<Self>>;
		/// Pools (members, their stakes, the challenge window).
		type Pools: PoolsInterface<Self::AccountId, BalanceOf<Self>, BlockNumberFor<Self>>;
		/// Final checkpoints and their contributors.
		type Checkpoints: CheckpointsInspect<Self::AccountId, BlockNumberFor<Self>>;
		/// Bond a challenger holds, in planck.
		#[pallet::constant]
		type ChallengeBond: Get<BalanceOf<Self>>;
		/// Maximum jurors per challenge.
		#[pallet::constant]
		type JurySize: Get<u32>;
		/// Blocks a challenge stays open for votes.
		#[pallet::constant]
		type VotingPeriod: Get<BlockNumberFor<Self>>;
		/// Share of the guilty member's committed stake that is slashed.
		#[pallet::constant]
		type SlashFraction: Get<Perbill>;
		/// Share of the slashed stake paid to the challenger.
		#[pallet::constant]
		type ChallengerShare: Get<Perbill>;
		/// Maximum members of a pool (the jury is drawn from them).
		#[pallet::constant]
		type MaxPoolMembers: Get<u32>;
		/// Maximum challenges expiring in one block.
		#[pallet::constant]
		type MaxExpiriesPerBlock: Get<u32>;
		/// Where the bonds of failed challenges go.
		type Slash: OnUnbalanced<CreditOf<Self>>;
		/// Weights of this pallet's calls and hooks.
		type WeightInfo: WeightInfo;
		/// Creates Training pools with a final round for benchmarks.
		#[cfg(feature = "runtime-benchmarks")]
		type BenchmarkHelper: crate::BenchmarkHelper<Self::AccountId>;
	}

	/// The id the next challenge gets.
	#[pallet::storage]
	pub type NextChallengeId<T: Config> = StorageValue<_, ChallengeId, ValueQuery>;

	/// Open challenges.
	#[pallet::storage]
	pub type OpenChallenges<T: Config> = StorageMap<_, Twox64Concat, ChallengeId, Challenge<T>>;

	/// Votes cast on open challenges (`true` = guilty).
	#[pallet::storage]
	pub type Votes<T: Config> =
		StorageDoubleMap<_, Twox64Concat, ChallengeId, Blake2_128Concat, T::AccountId, bool>;

	/// The challenge of each `(pool, round, accused)`; at most one, ever.
	#[pallet::storage]
	pub type ChallengeOf<T: Config> =
		StorageMap<_, Blake2_128Concat, (PoolId, RoundIndex, T::AccountId), ChallengeId>;

	/// Verdicts by `(pool, round, accused)`.
	#[pallet::storage]
	pub type Verdicts<T: Config> =
		StorageMap<_, Blake2_128Concat, (PoolId, RoundIndex, T::AccountId), Verdict>;

	/// Challenges that expire at a block unless resolved.
	#[pallet::storage]
	pub type Expiries<T: Config> = StorageMap<
		_,
		Twox64Concat,
		BlockNumberFor<T>,
		BoundedVec<ChallengeId, T::MaxExpiriesPerBlock>,
		ValueQuery,
	>;

	/// Events.
	#[pallet::event]
	#[pallet::generate_deposit(pub(super) fn deposit_event)]
	pub enum Event<T: Config> {
		/// A challenge was opened against `accused`'s contribution to `round`.
		ChallengeOpened {
			/// Challenge.
			challenge_id: ChallengeId,
			/// Pool.
			pool_id: PoolId,
			/// Round.
			round: RoundIndex,
			/// Accused contributor.
			accused: T::AccountId,
			/// Challenger.
			challenger: T::AccountId,
			/// Selected jurors.
			jury: BoundedVec<T::AccountId, T::JurySize>,
		},
		/// A juror voted.
		Voted {
			/// Challenge.
			challenge_id: ChallengeId,
			/// Juror.
			juror: T::AccountId,
			/// `true` = guilty.
			guilty: bool,
		},
		/// The jury found the accused guilty; `slashed` planck of its stake were slashed.
		AccusedFoundGuilty {
			/// Challenge.
			challenge_id: ChallengeId,
			/// Accused.
			accused: T::AccountId,
			/// Planck slashed.
			slashed: BalanceOf<T>,
		},
		/// The jury found the accused innocent; the challenger's bond was slashed.
		AccusedFoundInnocent {
			/// Challenge.
			challenge_id: ChallengeId,
			/// Accused.
			accused: T::AccountId,
			/// Planck of bond slashed.
			bond_slashed: BalanceOf<T>,
		},
		/// No verdict within the voting period; the bond was released.
		ChallengeExpired {
			/// Challenge.
			challenge_id: ChallengeId,
		},
	}

	/// Errors.
	#[pallet::error]
	pub enum Error<T> {
		/// No pool with this id.
		PoolNotFound,
		/// The round is not final (or does not exist).
		RoundNotFinal,
		/// The round's challenge window has closed.
		ChallengeWindowClosed,
		/// The accused is not a contributor of the round.
		NotAContributor,
		/// A challenger cannot accuse itself.
		SelfChallenge,
		/// This contribution has already been challenged.
		AlreadyChallenged,
		/// No member of the pool can sit on the jury.
		NoJurors,
		/// The challenger cannot hold the bond.
		InsufficientBond,
		/// Too many challenges expire in the same block; try again in the next one.
		TooManyChallenges,
		/// No open challenge with this id.
		ChallengeNotFound,
		/// The caller is not on this challenge's jury.
		NotJuror,
		/// The caller already voted.
		AlreadyVoted,
		/// The challenge id space is exhausted.
		Overflow,
	}

	#[pallet::call]
	impl<T: Config> Pallet<T> {
		/// Disputes `accused`'s contribution to final `round` of `pool_id`;
		/// `payload_digest` is the blake3 digest of its signed pseudo-gradient payload. Holds
		/// `ChallengeBond` and selects the jury.
		///
		/// Errors: [`Error::PoolNotFound`], [`Error::RoundNotFinal`],
		/// [`Error::ChallengeWindowClosed`], [`Error::NotAContributor`],
		/// [`Error::SelfChallenge`], [`Error::AlreadyChallenged`], [`Error::NoJurors`],
		/// [`Error::InsufficientBond`], [`Error::TooManyChallenges`], [`Error::Overflow`].
		#[pallet::call_index(0)]
		#[pallet::weight(T::WeightInfo::open_challenge(T::MaxPoolMembers::get()))]
		pub fn open_challenge(
			origin: OriginFor<T>,
			pool_id: PoolId,
			round: RoundIndex,
			accused: T::AccountId,
			payload_digest: Hash32,
		) -> DispatchResult {
			let challenger = ensure_signed(origin)?;
			Self::do_open_challenge(challenger, pool_id, round, accused, payload_digest)
		}

		/// Votes on `challenge_id` as a juror (`guilty = true`: the contribution is not within
		/// the tolerance of an honest replay). Resolves the challenge once a majority is certain.
		///
		/// Errors: [`Error::ChallengeNotFound`], [`Error::NotJuror`], [`Error::AlreadyVoted`].
		#[pallet::call_index(1)]
		#[pallet::weight(T::WeightInfo::vote())]
		pub fn vote(origin: OriginFor<T>, challenge_id: ChallengeId, guilty: bool) -> DispatchResult {
			let juror = ensure_signed(origin)?;
			Self::do_vote(juror, challenge_id, guilty)
		}
	}

	#[pallet::hooks]
	impl<T: Config> Hooks<BlockNumberFor<T>> for Pallet<T> {
		fn on_initialize(n: BlockNumberFor<T>) -> Weight {
			let due = Expiries::<T>::take(n);
			let count = due.len() as u32;
			for id in due {
				Self::expire(id);
			}
			T::WeightInfo::on_initialize_expire(count)
		}

		#[cfg(feature = "try-runtime")]
		fn try_state(_n: BlockNumberFor<T>) -> Result<(), sp_runtime::TryRuntimeError> {
			Self::do_try_state()
		}
	}
}

/// Creates a pool with a final round and its contributors, for benchmarks.
#[cfg(feature = "runtime-benchmarks")]
pub trait BenchmarkHelper<AccountId> {
	/// A Training pool with `members` members whose round 1 is final with every member a
	/// contributor; returns the pool id and the members.
	fn final_round(members: u32) -> (synod_primitives::PoolId, alloc::vec::Vec<AccountId>);
}
