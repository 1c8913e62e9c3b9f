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
		/// A challenge was opened against `accused`'s contribution to `round`, disputing
		/// `dispute` (the whole inner phase, or the part of the accused's trace its jurors
		/// check); its jury is drawn at `draw_at`.
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
			/// blake3 digest of the disputed payload (from the verified evidence).
			payload_digest: Hash32,
			/// Block whose parent hash draws the jury.
			draw_at: BlockNumberFor<T>,
			/// What the challenge disputes ([`Disputes`] holds it while it is open, unless it
			/// is the whole phase).
			dispute: Dispute,
		},
		/// The jury of a challenge was drawn; it votes until `expires_at`.
		JuryDrawn {
			/// Challenge.
			challenge_id: ChallengeId,
			/// Jurors with their stake (planck) and seats.
			jury: JuryOf<T>,
			/// Block number.
			expires_at: BlockNumberFor<T>,
		},
		/// Too little juror stake could be drawn: no verdict, the bond was released.
		NoJuryDrawn {
			/// Challenge.
			challenge_id: ChallengeId,
			/// Stake of the drawn jurors other than the parties, planck.
			jury_stake: u128,
		},
		/// The committee reached `verdict`; it executes at `executes_at` unless the losing party
		/// (the accused of a guilty ruling, the challenger of an innocent one) appeals first.
		Ruled {
			/// Challenge.
			challenge_id: ChallengeId,
			/// The ruling.
			verdict: Verdict,
			/// Block at which it executes unless appealed.
			executes_at: BlockNumberFor<T>,
		},
		/// `appellant` appealed the ruling, holding `bond` planck; the appeal committee is drawn
		/// at `draw_at`.
		Appealed {
			/// Challenge.
			challenge_id: ChallengeId,
			/// The losing party.
			appellant: T::AccountId,
			/// Planck held.
			bond: BalanceOf<T>,
			/// Block whose parent's randomness draws the appeal committee.
			draw_at: BlockNumberFor<T>,
		},
		/// The appeal committee of a challenge was drawn; it votes until `expires_at`, and its
		/// verdict is final.
		AppealJuryDrawn {
			/// Challenge.
			challenge_id: ChallengeId,
			/// Jurors with their stake (planck) and seats.
			jury: JuryOf<T>,
			/// Block number.
			expires_at: BlockNumberFor<T>,
		},
		/// An appellant's bond was settled: released (`slashed` = 0) when the appeal reversed
		/// the ruling or gave no verdict, else slashed and paid to the appeal jurors who voted
		/// with the verdict if their votes decided it (`jurors_paid` of it; an appeal committee
		/// left undecided pays nobody).
		AppealBondSettled {
			/// Challenge.
			challenge_id: ChallengeId,
			/// The appellant.
			appellant: T::AccountId,
			/// Planck slashed.
			slashed: BalanceOf<T>,
			/// Planck of it paid to jurors.
			jurors_paid: BalanceOf<T>,
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
		/// The jury found the accused innocent; the challenger's bond was slashed and paid to
		/// the jurors who voted innocent, per seat of the committee, if their votes decided it
		/// (the rest, and the whole bond of a committee left undecided, to `Slash`).
		AccusedFoundInnocent {
			/// Challenge.
			challenge_id: ChallengeId,
			/// Accused.
			accused: T::AccountId,
			/// Planck of bond slashed.
			bond_slashed: BalanceOf<T>,
			/// Planck of it paid to jurors.
			jurors_paid: BalanceOf<T>,
		},
		/// A drawn juror that contributed to the challenged round did not vote within the
		/// voting period: `slashed` planck of its stake were slashed (0 for a further missed
		/// vote in a round it was already slashed for, or while its account has sent no
		/// transaction since its last no-show slash); it stays a juror.
		JurorNoShow {
			/// Challenge.
			challenge_id: ChallengeId,
			/// Juror.
			juror: T::AccountId,
			/// Planck slashed.
			slashed: BalanceOf<T>,
		},
		/// The voting period ended with no committee seated (an undecided committee acquits:
		/// [`Event::AccusedFoundInnocent`]); the bond was released.
		ChallengeExpired {
			/// Challenge.
			challenge_id: ChallengeId,
		},
		/// `accused` signed two different payloads for `round` (equivocation), proved by
		/// `reporter`'s two signed announcements: `slashed` planck of its snapshot stake were
		/// slashed (`ChallengerShare` of it paid to the reporter) and it is unpaid for the
		/// round.
		EquivocationSlashed {
			/// Pool.
			pool_id: PoolId,
			/// Round.
			round: RoundIndex,
			/// The member that equivocated.
			accused: T::AccountId,
			/// Who submitted the proof.
			reporter: T::AccountId,
			/// blake3 digests of the two payloads it announced.
			digests: (Hash32, Hash32),
			/// Planck slashed.
			slashed: BalanceOf<T>,
		},
		/// `who` opted back in to juries: it is eligible again for challenges opened from now on.
		JurorOptedIn {
			/// Juror.
			who: T::AccountId,
		},
		/// `who` opted out of juries: challenges opened from now on do not seat it.
		JurorOptedOut {
			/// Juror.
			who: T::AccountId,
		},
		/// A challenge of `accused`'s contribution to `round` of `pool_id` ended with `verdict`
		/// (after any appeal). Only `Guilty` is kept in storage (`Verdicts`); any other verdict
		/// leaves the contribution challengeable and is recorded by this event alone.
		ChallengeClosed {
			/// Challenge.
			challenge_id: ChallengeId,
			/// Pool.
			pool_id: PoolId,
			/// Round.
			round: RoundIndex,
			/// Accused contributor.
			accused: T::AccountId,
			/// How it ended.
			verdict: Verdict,
		},
	}

	/// Errors.
	#[pallet::error]
	pub enum Error<T> {
		/// No pool with this id.
		PoolNotFound,
		/// The round is not final (or does not exist).
		RoundNotFinal,
		/// The round's challenge window (`2 × challenge_window` after finality) has closed.
		ChallengeWindowClosed,
		/// The accused's payload is not in the round's final included set.
		NotIncluded,
		/// The dispute names a trace segment at or past `MAX_TRACE_SEGMENTS` (no trace has it).
		DisputeOutOfRange,
		/// A challenger cannot accuse itself.
		SelfChallenge,
		/// The caller already holds an open challenge against this contribution.
		AlreadyChallenged,
		/// This contribution was already found guilty (and slashed).
		AlreadyConvicted,
		/// The challenger cannot hold the bond.
		InsufficientBond,
		/// No open challenge with this id.
		ChallengeNotFound,
		/// The jury has not been drawn yet (see `ChallengeOpened::draw_at`).
		JuryNotDrawn,
		/// The voting period is over.
		VotingClosed,
		/// The caller is not on this challenge's jury.
		NotJuror,
		/// The caller already voted.
		AlreadyVoted,
		/// Nothing to advance: the draw and the expiry are not due yet.
		NothingDue,
		/// The caller is a juror already (it has not opted out).
		AlreadyJuror,
		/// The caller has opted out of juries already.
		NotAJuror,
		/// The challenge id space is exhausted.
		Overflow,
		/// The evidence is not a signed message (too large, not SCALE, or trailing bytes).
		EvidenceMalformed,
		/// The evidence's ML-DSA-65 signature does not verify under the accused's registered
		/// key.
		EvidenceSignatureInvalid,
		/// The evidence is a signed message that announces no payload.
		EvidenceNotAnAnnouncement,
		/// The evidence is signed by the accused but for another pool, round, member index or
		/// peer id.
		EvidenceOfAnotherContribution,
		/// The accused's registration (key) is no longer kept.
		AccusedKeyUnknown,
		/// The accused is not a participant of the round's snapshot, or the snapshot is no
		/// longer kept (the round was settled, or voided and its stake is no longer slashable).
		NotAParticipant,
		/// The two announcements are genuine but announce the same payload (or are about
		/// different contributions): no equivocation.
		NotAnEquivocation,
		/// This member's equivocation in this round was already reported (and slashed).
		AlreadyReported,
		/// The block in which this challenge's jury would be drawn (`jury_delay` after opening),
		/// or every block in which its voting period could end, has `MaxExpiriesPerBlock`
		/// events scheduled: try again in a later block.
		ScheduleFull,
		/// Nothing to appeal: the challenge has no ruling (its committee has not decided, or
		/// decided nothing a party loses by), or it was appealed already.
		NoRuling,
		/// The ruling's appeal period is over (an appeal must leave the appeal committee's draw
		/// a block that did not exist when it was submitted).
		AppealClosed,
		/// Only the losing party appeals: the accused of a guilty ruling, the challenger of an
		/// innocent one.
		NotAppellant,
		/// The appellant cannot hold the appeal bond.
		InsufficientAppealBond,
		/// Opting in: the caller has no active stake. Opting out: it holds no stake at all
		/// (active or unbonding). Only trainers with stake opt in or out of juries.
		NotBonded,
		/// The round's late commits are still accepted (through `challenge_window` blocks
		/// after finality): its contributors, from whom the committee is drawn, are not final
		/// yet. Challenges open the block after.
		ChallengeTooEarly,
	}
}
