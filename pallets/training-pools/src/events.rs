//! The pallet's events and errors, imported into the pallet module
//! (`frame_support::pallet_macros::pallet_section`).

use frame_support::pallet_macros::pallet_section;

/// Events and errors of the pallet.
#[pallet_section]
mod events_and_errors {
	/// Events.
	#[pallet::event]
	#[pallet::generate_deposit(pub(super) fn deposit_event)]
	pub enum Event<T: Config> {
		/// A pool was created and `budget` planck of its creator's balance held.
		PoolCreated {
			/// New pool.
			pool_id: PoolId,
			/// Creator.
			creator: T::AccountId,
			/// Held budget, planck.
			budget: BalanceOf<T>,
		},
		/// `who` joined `pool_id` as member `index`, committing `stake` planck.
		MemberJoined {
			/// Pool.
			pool_id: PoolId,
			/// Trainer.
			who: T::AccountId,
			/// Member index.
			index: u32,
			/// Committed stake, planck.
			stake: BalanceOf<T>,
			/// First round it takes part in.
			from_round: RoundIndex,
		},
		/// `who` left `pool_id`.
		MemberLeft {
			/// Pool.
			pool_id: PoolId,
			/// Trainer.
			who: T::AccountId,
		},
		/// `pool_id` reached `min_trainers` and started round 1.
		TrainingStarted {
			/// Pool.
			pool_id: PoolId,
		},
		/// `pool_id` moved to round `round`.
		RoundStarted {
			/// Pool.
			pool_id: PoolId,
			/// New current round.
			round: RoundIndex,
		},
		/// Every round of `pool_id` closed; `released` planck of unused budget went back.
		PoolCompleted {
			/// Pool.
			pool_id: PoolId,
			/// Planck released to the creator.
			released: BalanceOf<T>,
		},
		/// The creator asked to cancel `pool_id` while it trains: `last_round` is the last round
		/// it runs.
		CancelRequested {
			/// Pool.
			pool_id: PoolId,
			/// The round in flight, which still closes normally.
			last_round: RoundIndex,
		},
		/// The storage deposit of former member `index` of `pool_id` went back to `who`.
		MemberDepositReleased {
			/// Pool.
			pool_id: PoolId,
			/// Member index.
			index: MemberIndex,
			/// Former member.
			who: T::AccountId,
			/// Planck released.
			amount: BalanceOf<T>,
		},
		/// `who` was dropped from `pool_id` by the inactivity leak (it committed nothing, or an
		/// unmatched hash, in several voided rounds in a row); it is in no later snapshot.
		MemberDropped {
			/// Pool.
			pool_id: PoolId,
			/// Trainer.
			who: T::AccountId,
		},
		/// `pool_id` was reaped: its records are gone and its creator's storage deposit
		/// (`released` planck) went back.
		PoolReaped {
			/// Pool.
			pool_id: PoolId,
			/// Creator.
			creator: T::AccountId,
			/// Planck released to the creator.
			released: BalanceOf<T>,
		},
		/// `reap_pool` deleted `records` records of `pool_id` and stopped at `ReapLimit`; the
		/// next call goes on.
		PoolPartlyReaped {
			/// Pool.
			pool_id: PoolId,
			/// Records deleted by this call.
			records: u32,
		},
		/// `pool_id` was cancelled (by its creator or root, after the round under way; or when
		/// a round closed with no member left); `released` planck of unreserved budget went
		/// back.
		PoolCancelled {
			/// Pool.
			pool_id: PoolId,
			/// Planck released to the creator.
			released: BalanceOf<T>,
		},
		/// The creator of `pool_id` replaced the accounts that may join it: `allowed` accounts
		/// (0: anyone may join).
		AllowedTrainersSet {
			/// Pool.
			pool_id: PoolId,
			/// Accounts on the new list.
			allowed: u32,
		},
	}

	/// Errors.
	#[pallet::error]
	pub enum Error<T> {
		/// No pool with this id.
		PoolNotFound,
		/// `rounds` is 0 or above `MaxRounds`.
		InvalidRounds,
		/// `min_trainers` is 0, or `max_trainers` is below it or above `MaxMembers`.
		InvalidTrainerBounds,
		/// `quorum` must be more than 50 %.
		InvalidQuorum,
		/// `round_timeout` must be at least one block and at most the chain's limit.
		InvalidRoundTimeout,
		/// `inner_steps` must be at least 1 and at most the chain's limit.
		InvalidInnerSteps,
		/// `min_stake` is below the chain's floor (`SpecLimits::min_stake_floor`).
		InvalidMinStake,
		/// `reward_per_round` is above the chain's limit, or the budget overflows.
		InvalidRewardPerRound,
		/// `challenge_window` is outside the chain's bounds, or too long for `round_timeout`:
		/// more than `KEPT_VOIDED_SNAPSHOTS` rounds could be voided while one voided round's
		/// stake is slashable (`Timeline::keeps_voided_snapshots`).
		InvalidChallengeWindow,
		/// The creator's free balance cannot hold `reward_per_round × rounds`.
		InsufficientBudget,
		/// A budget or stake sum overflowed.
		Overflow,
		/// The pool no longer accepts members (completed or cancelled).
		PoolClosed,
		/// The pool has `max_trainers` members.
		PoolFull,
		/// The caller is already a member.
		AlreadyMember,
		/// The caller is not a member.
		NotMember,
		/// The committed stake is below the pool's `min_stake`.
		StakeBelowMinimum,
		/// Active stake not committed to other pools is below the stake offered.
		InsufficientStake,
		/// The caller is in `MaxPoolsPerTrainer` pools already.
		TooManyPools,
		/// The peer id is not an Ed25519 libp2p peer id (38 bytes,
		/// [`synod_primitives::protocol::peer::ed25519_key`]).
		InvalidPeerId,
		/// Only the creator or root may cancel.
		NotCreator,
		/// The caller's free balance cannot hold the storage deposit (`MemberDeposit` at
		/// `join_pool`, `PoolDeposit + RoundDeposit × rounds` at `create_pool`).
		InsufficientDeposit,
		/// Another member of the pool registered this peer id.
		PeerIdTaken,
		/// The pool has not ended (it is `Open` or `Training`).
		PoolNotEnded,
		/// A round of the pool may still be challenged or judged (until
		/// `Timeline::settled_by` of the block it ended in).
		PoolNotSettled,
		/// A round of the pool is still open or unsettled (`settle_round` settles it).
		PoolRecordsInUse,
		/// No former member with this index in this pool.
		NoFormerMember,
		/// The former member's key may still be needed as challenge evidence (see
		/// `FormerMember::kept_until`).
		DepositStillNeeded,
		/// The pool has already completed or been cancelled.
		PoolEnded,
		/// The pool dropped the caller for missing rounds: it cannot join that pool again.
		DroppedFromPool,
		/// `min_round_length` is below the kind's floor (DiLoCo:
		/// `⌈inner_steps / SpecLimits::max_inner_steps_per_block⌉`: a round could be final
		/// faster than its inner phase can run), or above half of
		/// `round_timeout` (too few blocks left to commit in).
		InvalidMinRoundLength,
		/// `allowed_trainers` lists an account twice, or fewer than `min_trainers` accounts: the
		/// pool could never start.
		InvalidAllowedTrainers,
		/// The pool admits only the accounts in its `allowed_trainers`, and the caller is not
		/// one of them.
		NotAllowedToJoin,
		/// The peer-id proof is not the peer id's key's signature of this chain, pool and
		/// caller ([`synod_primitives::protocol::peer::proof_message`]).
		PeerIdNotProved,
	}
}
