//! Types and traits shared by Synod's pallets.
//!
//! The on-chain half of the round protocol (`docs/architecture.md`) is split over five pallets; they
//! talk only through the traits below, and the runtime wires them together:
//!
//! ```text
//! TrainerStaking ──TrainerStake──▶ TrainingPools ──PoolsInterface──▶ Checkpoints
//!        ▲                              │                               │ OnRoundFinalized
//!        └────────── slash ─────── Challenges ◀──CheckpointsInspect──────┤
//!                                      │ ChallengesInspect               ▼
//!                                      └──────────────────────────────▶ Rewards
//! ```
#![cfg_attr(not(feature = "std"), no_std)]
#![deny(missing_docs)]

extern crate alloc;

use alloc::vec::Vec;
use frame_support::{pallet_prelude::DispatchResult, weights::Weight};
use sp_runtime::Perbill;

pub use synod_protocol as protocol;
pub use synod_protocol::{
	Hash32, MemberIndex, Participant, PoolId, PoolStatus, RoundIndex, Timeline,
};

/// What the checkpoint, challenge and reward logic needs to know about a pool.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RoundParams<AccountId, Balance> {
	/// Creator, whose held budget pays rewards.
	pub creator: AccountId,
	/// Lifecycle state.
	pub status: PoolStatus,
	/// blake3 of the initial weights: the parent of round 1's checkpoint.
	pub initial_checkpoint: Hash32,
	/// The round being committed now (0 while `Open`).
	pub current_round: RoundIndex,
	/// Total number of outer rounds.
	pub rounds: RoundIndex,
	/// Share of the round's committed stake that must commit the same checkpoint.
	pub quorum: Perbill,
	/// The pool's timeline (deadline, late commits, challenges, jury, settlement), in blocks.
	pub timeline: Timeline,
	/// Reward of one final round, in planck, split over its contributors.
	pub reward_per_round: Balance,
	/// Budget owed to final rounds (unsettled or credited and unclaimed), in planck.
	pub budget_reserved: Balance,
}

/// A pool member as seen by other pallets.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct MemberView<AccountId, Balance> {
	/// The member's account.
	pub who: AccountId,
	/// Its index in the pool.
	pub index: MemberIndex,
	/// Stake committed at join, in planck (counted toward quorum).
	pub stake: Balance,
	/// First round the member takes part in.
	pub from_round: RoundIndex,
}

/// The off-chain identity a member registered at `join_pool`: what its signed messages are
/// checked against.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct MemberKey {
	/// libp2p peer id (multihash bytes).
	pub peer_id: Vec<u8>,
	/// ML-DSA-65 public key ([`protocol::evidence::PUBLIC_KEY_LEN`] bytes).
	pub ml_dsa_key: Vec<u8>,
}

/// Bonded stake, implemented by `pallet-trainer-staking`.
pub trait TrainerStake<AccountId> {
	/// Balance type (planck).
	type Balance;
	/// Active (bonded, not unbonding) stake of `who`.
	fn active_stake(who: &AccountId) -> Self::Balance;
	/// Stake `who` still holds, active and unbonding (planck): what a slash can still reach.
	fn held_stake(who: &AccountId) -> Self::Balance;
	/// Slashes up to `amount` of `who`'s held stake (active first, then unbonding chunks).
	/// `reporter`, if any, receives the given share of what was slashed; the rest goes to the
	/// staking pallet's slash destination. Returns the amount actually slashed.
	fn slash(
		who: &AccountId,
		amount: Self::Balance,
		reporter: Option<(&AccountId, Perbill)>,
	) -> Self::Balance;
	/// Keeps all of `who`'s held stake (active and unbonding) slashable until block `until`:
	/// nothing can be withdrawn before it. Later calls only extend the horizon.
	fn keep_slashable(who: &AccountId, until: protocol::Block);
}

/// Stake that must stay bonded because another pallet relies on it (pool memberships).
/// `pallet-trainer-staking` refuses an `unbond` that would take active stake below it.
pub trait StakeCommitments<AccountId, Balance> {
	/// Stake `who` has committed, in planck.
	fn committed(who: &AccountId) -> Balance;
	/// The most one [`StakeCommitments::committed`] call can weigh (its reads for an account
	/// at every bound), which a caller adds to its own benchmarked weight.
	fn committed_weight() -> Weight;
}

impl<AccountId, Balance: Default> StakeCommitments<AccountId, Balance> for () {
	fn committed(_: &AccountId) -> Balance {
		Balance::default()
	}
	fn committed_weight() -> Weight {
		Weight::zero()
	}
}

/// Stake committed to both `A` and `B` (e.g. pool memberships and validation): the sum, so that
/// `unbond` leaves what each of them relies on.
impl<AccountId, Balance, A, B> StakeCommitments<AccountId, Balance> for (A, B)
where
	Balance: sp_runtime::traits::Saturating,
	A: StakeCommitments<AccountId, Balance>,
	B: StakeCommitments<AccountId, Balance>,
{
	fn committed(who: &AccountId) -> Balance {
		A::committed(who).saturating_add(B::committed(who))
	}
	fn committed_weight() -> Weight {
		A::committed_weight().saturating_add(B::committed_weight())
	}
}

/// Pools as seen by checkpoints, challenges and rewards; implemented by
/// `pallet-training-pools`.
pub trait PoolsInterface<AccountId, Balance, BlockNumber> {
	/// Parameters of `pool`, or `None` if it does not exist.
	fn round_params(pool: PoolId) -> Option<RoundParams<AccountId, Balance>>;
	/// `who`'s membership in `pool`.
	fn member(pool: PoolId, who: &AccountId) -> Option<MemberView<AccountId, Balance>>;
	/// The current members of `pool` with their committed and bonded stake, for a round
	/// snapshot ([`protocol::snapshot`]).
	fn member_states(pool: PoolId) -> Vec<protocol::MemberState<AccountId>>;
	/// Removes `who` from `pool` (inactivity leak); its commitment ends like a `leave_pool`.
	fn drop_member(pool: PoolId, who: &AccountId);
	/// The registration of member `index` of `pool` if it is `who`'s — a current member or
	/// one that left but whose key is still kept for challenges of the rounds it was in.
	fn member_key(pool: PoolId, index: MemberIndex, who: &AccountId) -> Option<MemberKey>;
	/// Closes `round` (final or voided): moves the pool to the next round, completes it, or
	/// cancels it (a cancellation its creator asked for, or no member left). Returns the new
	/// current round, or `None` when the pool ended.
	fn close_round(pool: PoolId, round: RoundIndex) -> Option<RoundIndex>;
	/// The weight `close_round` adds when it ends a pool of `members` members (each member's
	/// commitment ended, the unreserved budget released).
	fn end_weight(members: u32) -> Weight;
	/// How many members `pool` has (its member list's length; 0 for no pool).
	fn member_count(pool: PoolId) -> u32;
	/// Sets aside up to one round's reward from the pool's unreserved budget for a final round;
	/// returns the amount reserved (less than `reward_per_round` only if the budget ran short).
	fn reserve_reward(pool: PoolId) -> Balance;
	/// Pays `amount` of reserved budget to `to` (from the creator's hold).
	fn pay_reserved(pool: PoolId, to: &AccountId, amount: Balance) -> DispatchResult;
	/// Returns `amount` of reserved budget to the unreserved part (a guilty contributor's share,
	/// rounding dust); released to the creator at once if the pool has ended.
	fn unreserve(pool: PoolId, amount: Balance);
}

/// Called by the pools pallet when a pool starts training (its round 1 begins).
pub trait OnTrainingStarted {
	/// `pool` entered `Training` at round 1.
	fn training_started(pool: PoolId);
}

impl OnTrainingStarted for () {
	fn training_started(_: PoolId) {}
}

/// Called by the pools pallet when a member's membership ends (it left, or the inactivity leak
/// dropped it): implemented by `pallet-checkpoints`, which forgets the member's commit ahead
/// of the round that has not opened yet (no snapshot of that round can count a former member,
/// and a commit no snapshot counts would never be pruned with the round's own).
pub trait OnMemberLeft<AccountId> {
	/// `who` is no longer a member of `pool`, whose current round is `current` (0 before
	/// training).
	fn member_left(pool: PoolId, who: &AccountId, current: RoundIndex);
	/// Upper bound of the weight of [`OnMemberLeft::member_left`].
	fn weight() -> Weight;
}

impl<AccountId> OnMemberLeft<AccountId> for () {
	fn member_left(_: PoolId, _: &AccountId, _: RoundIndex) {}
	fn weight() -> Weight {
		Weight::zero()
	}
}

/// A final checkpoint as seen by challenges and rewards.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FinalView<AccountId, BlockNumber> {
	/// blake3 of the checkpoint file.
	pub hash: Hash32,
	/// Block in which the round became final.
	pub finalized_at: BlockNumber,
	/// Members whose payload was included and who committed the final hash, with their
	/// snapshot stake (planck), in member-index order.
	pub contributors: Vec<Participant<AccountId>>,
	/// Members whose payload was aggregated (the included set, committed or not), with their
	/// snapshot stake (planck), in member-index order: `contributors` is a subset.
	pub included: Vec<Participant<AccountId>>,
}

/// Final checkpoints, implemented by `pallet-checkpoints`.
pub trait CheckpointsInspect<AccountId, BlockNumber> {
	/// The final checkpoint of `(pool, round)`, if the round is final.
	fn final_checkpoint(
		pool: PoolId,
		round: RoundIndex,
	) -> Option<FinalView<AccountId, BlockNumber>>;
	/// `who`'s entry in the frozen snapshot of `(pool, round)` (member index and snapshot
	/// stake, planck), while something can be charged against the round: from its opening until
	/// it is settled, or, voided, until its stake stops being slashable
	/// (`Timeline::slashable_until` of its deadline).
	fn participant(
		pool: PoolId,
		round: RoundIndex,
		who: &AccountId,
	) -> Option<Participant<AccountId>>;
}

/// Called when a round becomes final. Infallible: nothing another pool did may stop a round
/// from becoming final.
pub trait OnRoundFinalized<BlockNumber> {
	/// `(pool, round)` became final at block `at`.
	fn round_finalized(pool: PoolId, round: RoundIndex, at: BlockNumber);
	/// What `round_finalized` may read beyond a run that finds room at once: the later
	/// per-block lists it probes when the first ones are full. A caller whose benchmark
	/// found room at once adds it.
	fn probe_weight() -> Weight;
}

impl<BlockNumber> OnRoundFinalized<BlockNumber> for () {
	fn round_finalized(_: PoolId, _: RoundIndex, _: BlockNumber) {}
	fn probe_weight() -> Weight {
		Weight::zero()
	}
}

/// The weight of reading `lists` more values of a per-block list storage map (a
/// `Twox64Concat` key) whose value's largest encoding is `max_len` bytes: a database read and
/// the proof of the value and its key each.
pub fn list_probe_weight<
	DbWeight: frame_support::traits::Get<frame_support::weights::RuntimeDbWeight>,
>(
	lists: u32,
	max_len: usize,
) -> Weight {
	// Twox64Concat of a u32/u64 block number: a 32-byte prefix, 8 bytes of hash, ≤ 8 of key.
	let proof = (max_len as u64).saturating_add(48);
	DbWeight::get()
		.reads(lists.into())
		.saturating_add(Weight::from_parts(0, proof.saturating_mul(lists.into())))
}

/// Called when a final round is settled: nothing can challenge it any more, so its per-member
/// records can be pruned.
pub trait OnRoundSettled {
	/// `(pool, round)` was settled.
	fn round_settled(pool: PoolId, round: RoundIndex);
	/// Upper bound of the weight of [`OnRoundSettled::round_settled`] on its worst path, added
	/// to the settlement's own weight (whose benchmark may run part of it too: an overestimate).
	fn weight() -> Weight;
}

impl OnRoundSettled for () {
	fn round_settled(_: PoolId, _: RoundIndex) {}
	fn weight() -> Weight {
		Weight::zero()
	}
}

/// Challenge verdicts, implemented by `pallet-challenges`.
pub trait ChallengesInspect<AccountId> {
	/// Whether `who` was found guilty for `(pool, round)`: convicted by a jury or proved to
	/// have equivocated.
	fn is_guilty(pool: PoolId, round: RoundIndex, who: &AccountId) -> bool;
	/// Whether some participant of `(pool, round)` was proved to have equivocated (two signed
	/// payloads for the round).
	fn equivocation_proved(pool: PoolId, round: RoundIndex) -> bool;
}

impl<AccountId> ChallengesInspect<AccountId> for () {
	fn is_guilty(_: PoolId, _: RoundIndex, _: &AccountId) -> bool {
		false
	}

	fn equivocation_proved(_: PoolId, _: RoundIndex) -> bool {
		false
	}
}

/// Randomness no single block author can grind, by block: implemented by `pallet-randomness`
/// (each block's author's VRF output, chained over its parent's).
pub trait RandomnessAt<BlockNumber> {
	/// The 32 random bytes fixed once block `n` was finalised by the executive (`on_finalize`),
	/// or `None` if `n` is not yet built or no longer kept.
	fn randomness_at(n: BlockNumber) -> Option<[u8; 32]>;
	/// Sets the randomness of block `n`. For benchmarks only (their blocks carry no VRF); no
	/// pallet calls it otherwise.
	fn set_for_benchmark(n: BlockNumber, randomness: [u8; 32]);
}

/// What other pallets keep of a pool, for reaping (`TrainingPools::reap_pool`); implemented by
/// `pallet-checkpoints` (its open round, its round history) and `pallet-rewards` (unsettled
/// rounds, unclaimed rewards).
pub trait PoolRecords {
	/// Whether records of `pool` still need the pool's own (an open round, an unsettled round,
	/// an unclaimed reward): the pool is not reaped while they do.
	fn in_use(pool: PoolId) -> bool;
	/// Deletes up to `limit` records of `pool` (a reaped pool); returns how many it deleted
	/// and whether none remain.
	fn clear(pool: PoolId, limit: u32) -> (u32, bool);
	/// Upper bound of the weight of `clear` deleting `limit` records.
	fn clear_weight(limit: u32) -> Weight;
}

impl PoolRecords for () {
	fn in_use(_: PoolId) -> bool {
		false
	}
	fn clear(_: PoolId, _: u32) -> (u32, bool) {
		(0, true)
	}
	fn clear_weight(_: u32) -> Weight {
		Weight::zero()
	}
}

/// The records of both `A` and `B`: in use if either's are; cleared `A` first, then `B` with
/// what is left of the limit.
impl<A: PoolRecords, B: PoolRecords> PoolRecords for (A, B) {
	fn in_use(pool: PoolId) -> bool {
		A::in_use(pool) || B::in_use(pool)
	}
	fn clear(pool: PoolId, limit: u32) -> (u32, bool) {
		let (a, a_done) = A::clear(pool, limit);
		if !a_done {
			return (a, false);
		}
		let (b, b_done) = B::clear(pool, limit.saturating_sub(a));
		(a.saturating_add(b), b_done)
	}
	/// The records may all be `A`'s or all `B`'s: the larger bound, plus both emptiness checks.
	fn clear_weight(limit: u32) -> Weight {
		A::clear_weight(limit)
			.max(B::clear_weight(limit))
			.saturating_add(A::clear_weight(0).saturating_add(B::clear_weight(0)))
	}
}

/// Seed of the ML-DSA-65 key benchmark members register
/// ([`protocol::evidence::signing::public_key`]).
pub const BENCHMARK_KEY_SEED: [u8; 32] = [9; 32];

/// Sets up pools for other pallets' benchmarks; implemented by `pallet-training-pools` with
/// the `runtime-benchmarks` feature.
pub trait PoolSetup<AccountId> {
	/// Creates a pool needing `members` trainers (clamped to `1..=MaxMembers`), lets that many
	/// funded, bonded accounts join (so it is `Training` at round 1) and returns its id and the
	/// members in index order. The pool has 10 rounds, quorum 67 %, timeout 100 and a
	/// challenge window of 10 blocks, the chain's least `min_round_length`. Round 1 opens in
	/// the current block, which this leaves as it is: it accepts commits `min_round_length`
	/// blocks later (`pallet_checkpoints::Pallet::commits_from`). Every member registers the ML-DSA-65 key
	/// of [`BENCHMARK_KEY_SEED`], so benchmarks can sign its announcements.
	fn training_pool(members: u32) -> (PoolId, Vec<AccountId>);
}

/// Runs `call` (a dispatchable's body) in a storage layer that is then discarded and returns
/// its result: whether the call would succeed at the current state, with nothing written. The
/// runtime's transaction extension admits an `Operational` duty call (a commit, a vote, an
/// appeal) only if this passes, so that nobody takes the block space reserved for duties with
/// a call that fails.
///
/// Errors: those of `call`.
pub fn dry_run(call: impl FnOnce() -> DispatchResult) -> DispatchResult {
	frame_support::storage::with_transaction(|| {
		frame_support::storage::TransactionOutcome::Rollback(call())
	})
}
