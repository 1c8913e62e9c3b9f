#![doc = include_str!("design.md")]
#![cfg_attr(not(feature = "std"), no_std)]
#![deny(missing_docs)]
#![cfg_attr(
	not(test),
	deny(clippy::arithmetic_side_effects, clippy::unwrap_used, clippy::indexing_slicing)
)]

extern crate alloc;

pub use appeal::SCHEDULE_PROBES;
pub use pallet::*;
pub use synod_primitives::protocol::{Dispute, Seated, Verdict};
pub use weights::WeightInfo;

pub mod appeal;
#[cfg(feature = "runtime-benchmarks")]
mod benchmarking;
mod dispatchable_impls;
mod equivocation;
mod events;
mod jury;
mod schedule;
// The one test runtime of all pallets (`pallets/tests/src/mock.rs`), with this crate as itself.
#[cfg(test)]
extern crate self as pallet_challenges;
#[cfg(test)]
#[path = "../../tests/src/mock.rs"]
mod mock;
#[cfg(test)]
mod tests;
mod try_state;
mod types;
mod verdict;
pub mod weights;

use frame_support::pallet_macros::import_section;

/// The storage bound of one block's schedule ([`Expiries`]): the most entries it holds.
/// `MaxExpiriesPerBlock`, the room new entries get, is at most this.
pub const MAX_SCHEDULED_PER_BLOCK: u32 = 16;

/// The most open challenges kept per contribution as candidates for its challenger share
/// ([`ShareCandidates`]), the earliest opened. The share follows the first that does not stand
/// ruled innocent; a later one matters only once every candidate before it has closed, so a
/// challenge opened while the list is full is not kept (it is still judged), nor is any
/// opened after it while it is open. A conviction with no candidate left pays its own
/// challenger, even while an earlier challenge that was not kept is open.
pub const MAX_SHARE_CANDIDATES: u32 = 8;

#[import_section(events::events_and_errors)]
#[frame_support::pallet]
pub mod pallet {
	use super::*;
	pub use crate::types::*;
	use frame_support::{
		pallet_prelude::*,
		traits::{fungible, OnUnbalanced},
	};
	use frame_system::pallet_prelude::*;
	use sp_runtime::Perbill;
	use synod_primitives::{
		CheckpointsInspect, Hash32, PoolId, PoolsInterface, RoundIndex, TrainerStake,
	};

	/// Reasons for which this pallet holds funds.
	#[pallet::composite_enum]
	pub enum HoldReason {
		/// A challenger's bond.
		#[codec(index = 0)]
		ChallengeBond,
		/// An appellant's bond.
		#[codec(index = 1)]
		AppealBond,
	}

	/// The in-code storage version. A chain starts from the current genesis
	/// (`chain-specs/`): no migration brings older layouts to it.
	const STORAGE_VERSION: StorageVersion = StorageVersion::new(8);

	#[pallet::pallet]
	#[pallet::storage_version(STORAGE_VERSION)]
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
		/// Bonded stake (slashing the guilty; jurors' weight).
		type Staking: TrainerStake<Self::AccountId, Balance = BalanceOf<Self>>;
		/// Pools (the timeline of each pool).
		type Pools: PoolsInterface<Self::AccountId, BalanceOf<Self>, BlockNumberFor<Self>>;
		/// Final checkpoints, their contributors and snapshot stakes.
		type Checkpoints: CheckpointsInspect<Self::AccountId, BlockNumberFor<Self>>;
		/// Randomness no block author can grind, by block (`pallet-randomness`): the seed of a
		/// draw at `draw_at` is the randomness of block `draw_at − 1`.
		type Randomness: synod_primitives::RandomnessAt<BlockNumberFor<Self>>;
		/// Bond a challenger holds, in planck.
		#[pallet::constant]
		type ChallengeBond: Get<BalanceOf<Self>>;
		/// Seats of a committee, each drawn with replacement ∝ stake (the runtime uses
		/// [`synod_primitives::protocol::COMMITTEE_SEATS`], sized so that an adversary with less
		/// than ⅓ of the eligible stake turns a verdict with probability ≤ 10⁻⁶).
		#[pallet::constant]
		type JurySize: Get<u32>;
		/// Seats of an appeal committee (the runtime uses
		/// [`synod_primitives::protocol::APPEAL_SEATS`], `2 × JurySize + 1`); also bounds the
		/// distinct jurors of any committee. At least `JurySize`.
		#[pallet::constant]
		type AppealJurySize: Get<u32>;
		/// Bond an appellant holds, in planck: released if the appeal reverses the ruling,
		/// slashed to the appeal jurors who voted with the verdict if it confirms it.
		#[pallet::constant]
		type AppealBond: Get<BalanceOf<Self>>;
		/// Share of the guilty member's snapshot stake that is slashed.
		#[pallet::constant]
		type SlashFraction: Get<Perbill>;
		/// Share of the slashed stake paid to a challenger: of the contribution's earliest-opened
		/// challenge still open whose innocent ruling, if any, was appealed ([`ShareCandidates`]).
		#[pallet::constant]
		type ChallengerShare: Get<Perbill>;
		/// Share of the slashed stake paid to the jurors other than the parties who voted guilty,
		/// per seat of the committee (the seats that did not vote guilty leave their part to
		/// `Slash`: [`synod_primitives::protocol::split_per_seat`])
		/// (`ChallengerShare + JurorShare ≤ 100 %`; the rest goes to `Slash`).
		#[pallet::constant]
		type JurorShare: Get<Perbill>;
		/// Share of a drawn juror's stake slashed when it has not voted by the end of the
		/// voting period (once per challenged round: [`NoShows`]; not again while its account
		/// has sent no transaction since its last such slash: [`NoShowNonce`]).
		#[pallet::constant]
		type NoShowSlash: Get<Perbill>;
		/// Maximum members of a pool (bounds contributor lists read at opening).
		#[pallet::constant]
		type MaxPoolMembers: Get<u32>;
		/// Most challenge steps scheduled for one block ([`Expiries`]: draws, ends of votes,
		/// rulings' executions), at most [`MAX_SCHEDULED_PER_BLOCK`] (`integrity_test`). A
		/// challenge is only opened if each block it may need (its draw, its expiry and, with
		/// appeals, its ruling's execution and its appeal's end) finds room within the pool's
		/// timeline (else [`Error::ScheduleFull`]): nothing is left unscheduled. Lowering it
		/// needs no migration: a block scheduled under a larger value keeps its entries (its
		/// `on_initialize` is weighed by the entries it finds).
		#[pallet::constant]
		type MaxExpiriesPerBlock: Get<u32>;
		/// Most of one block's schedule entries ([`Expiries`]) that the challenges of one pool
		/// take, at least 1 and at most `MaxExpiriesPerBlock` (`integrity_test`): fillers opened
		/// in the attacker's own pool, decided by its own jurors for fees, take at most this many
		/// of a block's slots, and denying another pool the block takes fillers in
		/// ⌈`MaxExpiriesPerBlock` / this⌉ pools (fillers in the victim's pool are judged by its
		/// jurors, and cost their bonds when acquitted).
		#[pallet::constant]
		type MaxExpiriesPerPool: Get<u32>;
		/// Least stake, in planck, of a drawn committee's jurors other than the parties; below it
		/// there is no verdict.
		#[pallet::constant]
		type MinJuryStake: Get<BalanceOf<Self>>;
		/// Where the bonds of failed challenges go (after paying the jurors).
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

	/// Number of open challenges against each `(pool, round, accused)`.
	#[pallet::storage]
	pub type OpenAgainst<T: Config> =
		StorageMap<_, Blake2_128Concat, (PoolId, RoundIndex, T::AccountId), u32, ValueQuery>;

	/// The earliest-opened open challenges of each `(pool, round, accused)` (id and
	/// challenger), in opening order: every open challenge of the contribution opened before
	/// the last one kept is kept (at most [`MAX_SHARE_CANDIDATES`]); each is removed when its
	/// challenge closes. A conviction of the contribution, by whichever challenge, pays the
	/// challenger share to the first candidate whose first committee's innocent ruling does not
	/// stand unappealed (`Pallet::share_recipient`): an accused cannot hand the share to an
	/// accomplice that challenged after an honest challenger that is still open, whether the
	/// accomplice's committee decides first (a narrower dispute, the accused's own seats voting
	/// at once) or the accused appeals the honest ruling until the accomplice's executes. When
	/// the honest challenge closes without a conviction, the next candidate takes its place,
	/// whoever's it is.
	#[pallet::storage]
	pub type ShareCandidates<T: Config> = StorageMap<
		_,
		Blake2_128Concat,
		(PoolId, RoundIndex, T::AccountId),
		BoundedVec<(ChallengeId, T::AccountId), ConstU32<MAX_SHARE_CANDIDATES>>,
	>;

	/// Open challenges each challenger holds against a contribution, by `(pool, round,
	/// accused, challenger)`: a challenger may open one only while it holds none, so no
	/// account's challenges take another's place.
	#[pallet::storage]
	pub type OpenBy<T: Config> = StorageNMap<
		_,
		(
			NMapKey<Twox64Concat, PoolId>,
			NMapKey<Twox64Concat, RoundIndex>,
			NMapKey<Blake2_128Concat, T::AccountId>,
			NMapKey<Blake2_128Concat, T::AccountId>,
		),
		u32,
		ValueQuery,
	>;

	/// Jurors already slashed for not voting on a challenge of `(pool, round)`: a juror answers
	/// for its missed votes once per round, however many challenges of the round it sat on, so
	/// a flood of challenges cannot multiply the penalty. Deleted when the pool is reaped.
	#[pallet::storage]
	pub type NoShows<T: Config> = StorageNMap<
		_,
		(
			NMapKey<Twox64Concat, PoolId>,
			NMapKey<Twox64Concat, RoundIndex>,
			NMapKey<Blake2_128Concat, T::AccountId>,
		),
		(),
	>;

	/// The nonce of each juror's account at its latest no-show slash
	/// ([`Pallet::penalize_no_shows`]): while the account has sent no transaction since (its
	/// nonce unchanged: a crashed trainer), it is not slashed again for missing votes, however
	/// many challenges of the rounds it contributed to expire; one that sent any (a live
	/// trainer's commits and votes) is, once per round. Removed when the juror votes; at most
	/// one per account that was ever seated (each written by a slash of its stake). An account
	/// reaped and created again counts its nonce from zero: its entry may then name a nonce it
	/// has not reached (it is spared once if it reaches it at a no-show).
	#[pallet::storage]
	pub type NoShowNonce<T: Config> =
		StorageMap<_, Blake2_128Concat, T::AccountId, <T as frame_system::Config>::Nonce>;

	/// Convictions by `(pool, round, accused)`: `Guilty` only, written once and final (every
	/// verdict is told by `ChallengeClosed`).
	/// Keyed pool first, so that a reaped pool's verdicts are deleted by prefix.
	#[pallet::storage]
	pub type Verdicts<T: Config> = StorageNMap<
		_,
		(
			NMapKey<Twox64Concat, PoolId>,
			NMapKey<Twox64Concat, RoundIndex>,
			NMapKey<Blake2_128Concat, T::AccountId>,
		),
		Verdict,
	>;

	/// Equivocations proved by `(pool, round, accused)`: the two payload digests it signed.
	/// The accused is unpaid for the round; a jury can still convict it of a wrong payload
	/// (a separate offence, slashed separately). Keyed pool first (deleted by prefix when the
	/// pool is reaped).
	#[pallet::storage]
	pub type Equivocations<T: Config> = StorageNMap<
		_,
		(
			NMapKey<Twox64Concat, PoolId>,
			NMapKey<Twox64Concat, RoundIndex>,
			NMapKey<Blake2_128Concat, T::AccountId>,
		),
		(Hash32, Hash32),
	>;

	/// The schedule: the challenges with something due at a block (at most
	/// `MaxExpiriesPerBlock` are scheduled into one, and the storage holds up to
	/// [`MAX_SCHEDULED_PER_BLOCK`]): a committee's draw, the end of its vote, a ruling's execution,
	/// an appeal committee's draw or the end of the appeal's vote. Every open challenge's next
	/// step is in it; a closed challenge is in no block after the current one.
	#[pallet::storage]
	pub type Expiries<T: Config> = StorageMap<
		_,
		Twox64Concat,
		BlockNumberFor<T>,
		BoundedVec<ChallengeId, ConstU32<{ crate::MAX_SCHEDULED_PER_BLOCK }>>,
		ValueQuery,
	>;

	/// Entries of each pool's challenges in each block's schedule ([`Expiries`]), by block and
	/// pool (at most `MaxExpiriesPerPool`); deleted with the block's schedule in its
	/// `on_initialize`, and when the count drops to 0.
	#[pallet::storage]
	pub type PoolSlots<T: Config> = StorageDoubleMap<
		_,
		Twox64Concat,
		BlockNumberFor<T>,
		Twox64Concat,
		synod_primitives::PoolId,
		u32,
		ValueQuery,
	>;

	/// The blocks whose schedule ([`Expiries`]) holds each open challenge (at most
	/// [`MAX_SCHEDULED`]): closing a challenge frees its slots in the blocks still to come.
	#[pallet::storage]
	pub type ScheduledAt<T: Config> =
		StorageMap<_, Twox64Concat, ChallengeId, ScheduleSlots<T>, ValueQuery>;

	/// The jurors eligible for each open challenge, frozen when it was opened: the challenged
	/// round's contributors that had not opted out then and can replay the round
	/// ([`synod_primitives::protocol::eligible_jurors`]; their weights are the round's snapshot
	/// stakes). Opting out or back in later changes nothing for it: the eligible set is fixed
	/// before the draw's seed block exists, so its author cannot pick it.
	/// Deleted at the draw (or when the challenge closes undrawn).
	#[pallet::storage]
	pub type EligibleJurors<T: Config> = StorageMap<
		_,
		Twox64Concat,
		ChallengeId,
		BoundedVec<T::AccountId, T::MaxPoolMembers>,
		OptionQuery,
	>;

	/// The appeal side of each open challenge of a pool with appeals (see [`Appeal`]): its
	/// reserved blocks, the first committee's ruling and the appeal. Deleted when the challenge
	/// closes.
	#[pallet::storage]
	pub type Appeals<T: Config> = StorageMap<_, Twox64Concat, ChallengeId, Appeal<T>, OptionQuery>;

	/// What each open challenge disputes when it is narrower than the whole inner phase (absent:
	/// [`Dispute::Phase`]): one part of the accused's signed Proof-of-Learning trace,
	/// which its jurors check instead of replaying the whole phase ([`Pallet::open_narrowed_challenge`]).
	/// Deleted when the challenge closes.
	#[pallet::storage]
	pub type Disputes<T: Config> = StorageMap<_, Twox64Concat, ChallengeId, Dispute, OptionQuery>;

	/// Bonded trainers that opted out of juries ([`Pallet::unregister_juror`]). Every other
	/// contributor is eligible; a no-show stays a juror. One entry per account, written only
	/// by an account with stake, deleted when it opts back in ([`Pallet::register_juror`]).
	#[pallet::storage]
	pub type OptedOut<T: Config> = StorageMap<_, Blake2_128Concat, T::AccountId, ()>;

	#[pallet::call]
	impl<T: Config> Pallet<T> {
		/// Disputes `accused`'s contribution to final `round` of `pool_id`. `evidence` is the
		/// accused's signed announcement of its payload for that round (the gossip message's
		/// bytes, at most [`MAX_EVIDENCE_BYTES`]); its ML-DSA-65 signature is verified against
		/// the accused's registered key. Holds `ChallengeBond`; the jury is drawn `jury_delay`
		/// blocks later, never earlier (that block's schedule full: [`Error::ScheduleFull`]).
		///
		/// Challenges open once the round's late commits are over
		/// ([`synod_primitives::protocol::Timeline::challenges_from`]), so that every
		/// contributor, late ones included, is eligible for its committee.
		///
		/// Errors: [`Error::PoolNotFound`], [`Error::RoundNotFinal`],
		/// [`Error::ChallengeWindowClosed`], [`Error::ChallengeTooEarly`], [`Error::NotIncluded`],
		/// [`Error::SelfChallenge`], [`Error::AlreadyChallenged`], [`Error::AlreadyConvicted`],
		/// [`Error::AccusedKeyUnknown`], [`Error::EvidenceMalformed`],
		/// [`Error::EvidenceSignatureInvalid`], [`Error::EvidenceNotAnAnnouncement`],
		/// [`Error::EvidenceOfAnotherContribution`], [`Error::InsufficientBond`],
		/// [`Error::ScheduleFull`], [`Error::Overflow`].
		#[pallet::call_index(0)]
		#[pallet::weight(T::WeightInfo::open_challenge(T::MaxPoolMembers::get())
			// Round `r − 1`'s snapshot (its contributors, for the eligible jurors), missing where
			// measured (round 1).
			.saturating_add(T::DbWeight::get().reads(1)))]
		pub fn open_challenge(
			origin: OriginFor<T>,
			pool_id: PoolId,
			round: RoundIndex,
			accused: T::AccountId,
			evidence: Evidence,
		) -> DispatchResult {
			let challenger = ensure_signed(origin)?;
			Self::do_open_challenge(challenger, pool_id, round, accused, &evidence, Dispute::Phase)
		}

		/// Votes on `challenge_id` as a juror (`guilty = true`: the contribution is not within
		/// the tolerance of an honest replay), counted once per seat the juror holds. Resolves
		/// the challenge once the verdict is certain (a majority of all seats either way).
		///
		/// Weight: booked for the deciding vote (`vote` + closing the challenge); a vote that
		/// decides nothing is charged `vote_undecided` (the rest is refunded), so a committee's
		/// votes take little block space until the one that decides.
		///
		/// Class: `Operational` (block space ordinary transactions cannot take); the runtime
		/// admits a vote to the transaction pool only if it would succeed
		/// ([`Pallet::check_vote`]).
		///
		/// Errors: [`Error::ChallengeNotFound`], [`Error::JuryNotDrawn`],
		/// [`Error::VotingClosed`], [`Error::NotJuror`], [`Error::AlreadyVoted`].
		#[pallet::call_index(1)]
		#[pallet::weight((
			T::WeightInfo::vote()
				.saturating_add(Pallet::<T>::close_weight())
				.saturating_add(T::DbWeight::get().writes(1)),
			DispatchClass::Operational
		))]
		pub fn vote(
			origin: OriginFor<T>,
			challenge_id: ChallengeId,
			guilty: bool,
		) -> DispatchResultWithPostInfo {
			let juror = ensure_signed(origin)?;
			let decided = Self::do_vote(juror, challenge_id, guilty)?;
			Ok((!decided).then(T::WeightInfo::vote_undecided).into())
		}

		/// Opts the caller back in to juries: challenges opened from now on seat it when it
		/// contributed to the challenged round ([`Event::JurorOptedIn`]). Every bonded trainer
		/// is a juror unless it opted out, so this only undoes [`Pallet::unregister_juror`].
		///
		/// Errors: [`Error::NotBonded`], [`Error::AlreadyJuror`].
		#[pallet::call_index(2)]
		#[pallet::weight(T::WeightInfo::register_juror())]
		pub fn register_juror(origin: OriginFor<T>) -> DispatchResult {
			let who = ensure_signed(origin)?;
			Self::do_register_juror(who)
		}

		/// Opts the caller out of juries ([`Event::JurorOptedOut`]): challenges opened from now
		/// on do not seat it; challenges already open keep it eligible, and juries already
		/// drawn keep its seats (it answers for those votes). An account whose whole stake is
		/// unbonding may opt out too.
		///
		/// Errors: [`Error::NotBonded`] (no stake held, active or unbonding),
		/// [`Error::NotAJuror`].
		#[pallet::call_index(3)]
		#[pallet::weight(T::WeightInfo::unregister_juror())]
		pub fn unregister_juror(origin: OriginFor<T>) -> DispatchResult {
			let who = ensure_signed(origin)?;
			Self::do_unregister_juror(who)
		}

		/// Whatever is due for `challenge_id` (any signed account): its committee's draw, the end
		/// of its vote, the execution of an unappealed ruling, the appeal committee's draw or the
		/// end of the appeal's vote. Every step is scheduled in a block's `on_initialize`; this
		/// runs one whose block has passed without it.
		///
		/// Errors: [`Error::ChallengeNotFound`], [`Error::NothingDue`].
		#[pallet::call_index(4)]
		#[pallet::weight(T::WeightInfo::on_initialize_expire(1)
			.saturating_add(T::WeightInfo::expire())
			.saturating_add(T::WeightInfo::draw_appeal())
			.saturating_add(Pallet::<T>::close_weight())
			.saturating_add(Pallet::<T>::no_show_weight())
			.saturating_add(Pallet::<T>::schedule_weight()))]
		pub fn advance_challenge(
			origin: OriginFor<T>,
			challenge_id: ChallengeId,
		) -> DispatchResult {
			ensure_signed(origin)?;
			let c = OpenChallenges::<T>::get(challenge_id).ok_or(Error::<T>::ChallengeNotFound)?;
			let now = frame_system::Pallet::<T>::block_number();
			let appeal = Appeals::<T>::get(challenge_id);
			ensure!(Self::due(&c, appeal.as_ref(), now).is_some(), Error::<T>::NothingDue);
			Self::advance(challenge_id, now);
			Ok(())
		}

		/// Proves that `accused` equivocated in `round` of `pool_id`: `first` and `second` are
		/// two announcements it signed (gossip wire form, at most [`MAX_EVIDENCE_BYTES`] each)
		/// for that round, of two different payloads. Both signatures are verified against the
		/// accused's registered ML-DSA-65 key, so no jury is needed: the accused loses
		/// `SlashFraction` of its snapshot stake at once (`ChallengerShare` of it to the
		/// caller, the rest to the staking pallet's slash destination), is recorded in
		/// [`Equivocations`] (unpaid for the round; reported once) and
		/// [`Event::EquivocationSlashed`] is emitted. A challenge of the same contribution is
		/// judged and slashed on its own: reporting oneself from a second account does not
		/// shield a wrong payload from the jury. Possible while the round's snapshot is kept:
		/// from its opening until it is settled, or, voided (an equivocation may be what voided
		/// it), until its stake may be withdrawn (`Timeline::slashable_until` of its deadline).
		///
		/// Errors: [`Error::PoolNotFound`], [`Error::NotAParticipant`],
		/// [`Error::SelfChallenge`], [`Error::AlreadyReported`],
		/// [`Error::AccusedKeyUnknown`], [`Error::EvidenceMalformed`],
		/// [`Error::EvidenceSignatureInvalid`], [`Error::EvidenceNotAnAnnouncement`],
		/// [`Error::EvidenceOfAnotherContribution`], [`Error::NotAnEquivocation`].
		#[pallet::call_index(5)]
		#[pallet::weight(T::WeightInfo::report_equivocation(T::MaxPoolMembers::get()))]
		pub fn report_equivocation(
			origin: OriginFor<T>,
			pool_id: PoolId,
			round: RoundIndex,
			accused: T::AccountId,
			first: Evidence,
			second: Evidence,
		) -> DispatchResult {
			let reporter = ensure_signed(origin)?;
			Self::do_report_equivocation(reporter, pool_id, round, accused, &first, &second)
		}

		/// Appeals the ruling of `challenge_id` to a committee of `AppealJurySize` seats, drawn
		/// from the same frozen eligible jurors from the randomness of a block after this one:
		/// the caller must be the losing party (the accused of a guilty ruling, the challenger of
		/// an innocent one) and holds `AppealBond` until the appeal's verdict, which is final and
		/// replaces the ruling ([`Event::Appealed`]). Possible until `MIN_JURY_DELAY` blocks
		/// before the ruling executes.
		///
		/// Errors: [`Error::ChallengeNotFound`], [`Error::NoRuling`], [`Error::AppealClosed`],
		/// [`Error::NotAppellant`], [`Error::InsufficientAppealBond`].
		///
		/// Class: `Operational` (an appeal must not be starved by ordinary transactions within
		/// its period); the runtime admits it to the transaction pool only if it would succeed
		/// ([`Pallet::check_appeal`]).
		#[pallet::call_index(6)]
		#[pallet::weight((T::WeightInfo::appeal(), DispatchClass::Operational))]
		pub fn appeal(origin: OriginFor<T>, challenge_id: ChallengeId) -> DispatchResult {
			let who = ensure_signed(origin)?;
			Self::do_appeal(who, challenge_id)
		}

		/// [`Pallet::open_challenge`] narrowed to one part of the accused's signed
		/// Proof-of-Learning trace ([`Dispute`], recorded in [`Disputes`]): its
		/// jurors check only that part (the trace's encoding, or one segment's inner steps)
		/// instead of replaying the whole inner phase, and that check decides the verdict
		/// either way; a part whose states the accused does not serve is judged by a whole
		/// replay. [`Dispute::Phase`] is [`Pallet::open_challenge`].
		///
		/// Errors: those of [`Pallet::open_challenge`], and [`Error::DisputeOutOfRange`] for a
		/// segment at or past `MAX_TRACE_SEGMENTS`.
		#[pallet::call_index(7)]
		#[pallet::weight(T::WeightInfo::open_narrowed_challenge(T::MaxPoolMembers::get())
			// Round `r − 1`'s snapshot, as for `open_challenge`.
			.saturating_add(T::DbWeight::get().reads(1)))]
		pub fn open_narrowed_challenge(
			origin: OriginFor<T>,
			pool_id: PoolId,
			round: RoundIndex,
			accused: T::AccountId,
			evidence: Evidence,
			dispute: Dispute,
		) -> DispatchResult {
			let challenger = ensure_signed(origin)?;
			Self::do_open_challenge(challenger, pool_id, round, accused, &evidence, dispute)
		}
	}

	#[pallet::hooks]
	impl<T: Config> Hooks<BlockNumberFor<T>> for Pallet<T> {
		fn on_initialize(n: BlockNumberFor<T>) -> Weight {
			Self::advance_due(n)
		}

		fn integrity_test() {
			assert!(
				T::MaxExpiriesPerBlock::get() <= MAX_SCHEDULED_PER_BLOCK,
				"a block's schedule is scheduled within its storage bound"
			);
			assert!(
				(1..=T::MaxExpiriesPerBlock::get()).contains(&T::MaxExpiriesPerPool::get()),
				"a pool's share of a block's schedule is at least one entry and at most all"
			);
			assert!(
				T::AppealJurySize::get() >= T::JurySize::get(),
				"an appeal committee is at least as large as a first one"
			);
		}

		#[cfg(feature = "try-runtime")]
		fn try_state(_n: BlockNumberFor<T>) -> Result<(), sp_runtime::TryRuntimeError> {
			Self::do_try_state()
		}
	}
}
