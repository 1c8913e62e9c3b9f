//! Opening, voting, verdicts, expiry and `try_state`.

use crate::{pallet::*, Event};
use alloc::vec::Vec;
use frame_support::{
	pallet_prelude::*,
	traits::{
		fungible::{Balanced, BalancedHold, MutateHold},
		tokens::{Imbalance, Precision},
		OnUnbalanced,
	},
};
use frame_system::pallet_prelude::BlockNumberFor;
use sp_runtime::{
	traits::{SaturatedConversion, Saturating, Zero},
	Perbill,
};
use synod_primitives::{
	protocol::{self, JuryVotes},
	ChallengesInspect, CheckpointsInspect, MemberIndex, PoolId, PoolsInterface, RoundIndex,
	TrainerStake,
};

/// `n` as the protocol's block number.
pub(crate) fn block<T: Config>(n: BlockNumberFor<T>) -> protocol::Block {
	n.saturated_into()
}

/// A step of an open challenge that is due ([`Pallet::due`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Step {
	/// Draw the first committee.
	Draw,
	/// End the vote of the committee drawn (the first one's, or the appeal's).
	Expire,
	/// Execute the first committee's unappealed ruling.
	Execute(protocol::Verdict),
	/// Draw the appeal committee.
	DrawAppeal,
}

impl<T: Config> Pallet<T> {
	pub(crate) fn bond_reason() -> T::RuntimeHoldReason {
		HoldReason::ChallengeBond.into()
	}

	pub(crate) fn do_open_challenge(
		challenger: T::AccountId,
		pool_id: PoolId,
		round: RoundIndex,
		accused: T::AccountId,
		evidence: &[u8],
		dispute: protocol::Dispute,
	) -> DispatchResult {
		ensure!(dispute.is_valid(), Error::<T>::DisputeOutOfRange);
		let params = T::Pools::round_params(pool_id).ok_or(Error::<T>::PoolNotFound)?;
		let fin =
			T::Checkpoints::final_checkpoint(pool_id, round).ok_or(Error::<T>::RoundNotFinal)?;
		let now = frame_system::Pallet::<T>::block_number();
		let final_at = block::<T>(fin.finalized_at);
		ensure!(
			block::<T>(now) <= params.timeline.challenges_until(final_at),
			Error::<T>::ChallengeWindowClosed
		);
		// The committee's eligible jurors are frozen below from the round's contributors,
		// which late commits still add to: a challenge opened before they close would keep
		// members that commit late (honest ones held back by a split included set) off every
		// committee of it, its appeal's included.
		ensure!(
			block::<T>(now) >= params.timeline.challenges_from(final_at),
			Error::<T>::ChallengeTooEarly
		);
		// Any member whose payload was aggregated answers for it, whether or not it committed
		// the final hash: a member that stays silent after the exchange still moved the model.
		let (accused_index, accused_stake) = fin
			.included
			.iter()
			.find(|p| p.who == accused)
			.map(|p| (p.index, p.stake))
			.ok_or(Error::<T>::NotIncluded)?;
		ensure!(challenger != accused, Error::<T>::SelfChallenge);
		let key = (pool_id, round, accused.clone());
		// One offence, one slash: a convicted contribution cannot be challenged again.
		ensure!(
			Verdicts::<T>::get(&key) != Some(protocol::Verdict::Guilty),
			Error::<T>::AlreadyConvicted
		);
		let open = OpenAgainst::<T>::get(&key);
		let by = (pool_id, round, accused.clone(), challenger.clone());
		ensure!(OpenBy::<T>::get(&by) == 0, Error::<T>::AlreadyChallenged);
		let payload_digest =
			Self::check_evidence(pool_id, round, &accused, accused_index, evidence)?.digest;
		let eligible = Self::eligible_among(pool_id, round, &fin.contributors);
		let challenge_id = NextChallengeId::<T>::get();
		let next = challenge_id.checked_add(1).ok_or(Error::<T>::Overflow)?;
		let (draw_at, expires_at, expiry_at) = Self::schedule_blocks(now, &params.timeline)?;
		let appeal = Self::appeal_blocks(now, expiry_at, &params.timeline)?;
		let bond = T::ChallengeBond::get();
		T::Currency::hold(&Self::bond_reason(), &challenger, bond)
			.map_err(|_| Error::<T>::InsufficientBond)?;
		OpenChallenges::<T>::insert(
			challenge_id,
			Challenge {
				pool_id,
				round,
				accused: accused.clone(),
				accused_stake,
				challenger: challenger.clone(),
				bond,
				payload_digest,
				opened_at: now,
				draw_at,
				expires_at,
				jury: BoundedVec::new(),
				votes: JuryVotes::default(),
			},
		);
		EligibleJurors::<T>::insert(challenge_id, eligible);
		if dispute != protocol::Dispute::Phase {
			Disputes::<T>::insert(challenge_id, dispute);
		}
		OpenBy::<T>::insert(&by, 1);
		OpenAgainst::<T>::insert(&key, open.saturating_add(1));
		NextChallengeId::<T>::put(next);
		Self::schedule(draw_at, challenge_id);
		Self::schedule(expiry_at, challenge_id);
		if let Some(a) = appeal {
			Self::schedule(a.ruling_by, challenge_id);
			Self::schedule(a.appeal_expiry_by, challenge_id);
			Appeals::<T>::insert(challenge_id, a);
		}
		Self::deposit_event(Event::ChallengeOpened {
			challenge_id,
			pool_id,
			round,
			accused,
			challenger,
			payload_digest,
			draw_at,
			dispute,
		});
		Ok(())
	}

	/// Verifies `evidence` as `accused`'s (member `index`) signed announcement for `(pool_id,
	/// round)` under its registered ML-DSA-65 key; returns the announced payload.
	pub(crate) fn check_evidence(
		pool_id: PoolId,
		round: RoundIndex,
		accused: &T::AccountId,
		index: MemberIndex,
		evidence: &[u8],
	) -> Result<protocol::evidence::PayloadRef, DispatchError> {
		let key =
			T::Pools::member_key(pool_id, index, accused).ok_or(Error::<T>::AccusedKeyUnknown)?;
		let a = protocol::verify_announcement(evidence, &key.ml_dsa_key)
			.map_err(Self::evidence_error)?;
		Self::check_context(&a, pool_id, round, index, &key)?;
		Ok(a.payload)
	}

	/// The error of a piece of evidence that did not verify.
	pub(crate) fn evidence_error(e: protocol::EvidenceError) -> Error<T> {
		use protocol::EvidenceError as E;
		match e {
			E::BadSignature | E::KeyLength => Error::<T>::EvidenceSignatureInvalid,
			E::NotAnAnnouncement => Error::<T>::EvidenceNotAnAnnouncement,
			E::TooLarge | E::Malformed => Error::<T>::EvidenceMalformed,
			E::NotAnEquivocation => Error::<T>::NotAnEquivocation,
		}
	}

	/// Checks that verified announcement `a` names `(pool_id, round)`, member `index` and the
	/// peer id it registered (`key`).
	pub(crate) fn check_context(
		a: &protocol::Announcement,
		pool_id: PoolId,
		round: RoundIndex,
		index: MemberIndex,
		key: &synod_primitives::MemberKey,
	) -> DispatchResult {
		ensure!(
			a.pool == u64::from(pool_id)
				&& a.round == round
				&& a.member == index
				&& a.peer_id == key.peer_id,
			Error::<T>::EvidenceOfAnotherContribution
		);
		Ok(())
	}

	/// The step of challenge `c` (with its appeal side `a`, in a pool with appeals) due at
	/// `now`, if any: the one rule both [`Self::advance`] and `advance_challenge`'s check
	/// read.
	pub(crate) fn due(
		c: &Challenge<T>,
		a: Option<&Appeal<T>>,
		now: BlockNumberFor<T>,
	) -> Option<Step> {
		match a.map(|a| (a.stage(), a.ruling)) {
			Some((Stage::Ruled, Some((verdict, executes_at)))) => {
				(now >= executes_at).then_some(Step::Execute(verdict))
			},
			Some((Stage::Appealed, _)) => (now >= c.draw_at).then_some(Step::DrawAppeal),
			_ if c.jury.is_empty() && now >= c.draw_at => Some(Step::Draw),
			_ => (now >= c.expires_at).then_some(Step::Expire),
		}
	}

	/// Runs the step of challenge `id` due at `now` ([`Self::due`]), if any.
	pub(crate) fn advance(id: ChallengeId, now: BlockNumberFor<T>) {
		let Some(c) = OpenChallenges::<T>::get(id) else {
			return;
		};
		let a = Appeals::<T>::get(id);
		match (Self::due(&c, a.as_ref(), now), a) {
			(Some(Step::Draw), _) => Self::draw_first(id, c, now),
			(Some(Step::Expire), _) => Self::expire(id),
			(Some(Step::Execute(verdict)), _) => Self::execute(id, c, verdict),
			(Some(Step::DrawAppeal), Some(a)) => Self::draw_appeal(id, c, a, now),
			_ => {},
		}
	}

	/// Draws the first committee of `c` (challenge `id`): `JurySize` seats from the frozen
	/// eligible jurors. A committee whose jurors other than the parties hold less than
	/// `MinJuryStake` gives no verdict: the bond is released and the challenge closed. A
	/// committee drawn so late that its vote is over (an unscheduled draw caught up on by
	/// `advance_challenge`) ends at once.
	fn draw_first(id: ChallengeId, mut c: Challenge<T>, now: BlockNumberFor<T>) {
		let jury = Self::draw(id, &c, T::JurySize::get());
		if !Appeals::<T>::contains_key(id) {
			// Kept for an appeal committee where appeals exist.
			EligibleJurors::<T>::remove(id);
		}
		// Stake that is neither party's: a committee the parties dominate decides nothing.
		let jury_stake = jury
			.iter()
			.filter(|s| !Self::is_party(&c, &s.who))
			.fold(0u128, |a, s| a.saturating_add(s.stake));
		if jury_stake < T::MinJuryStake::get().saturated_into::<u128>().max(1) {
			Self::release_bond(&c);
			Self::close(id, &c, protocol::Verdict::NoJury);
			Self::deposit_event(Event::NoJuryDrawn { challenge_id: id, jury_stake });
			return;
		}
		if now > c.draw_at {
			// Drawn later than scheduled: the jurors do not get the whole voting period,
			// so no juror answers for not voting ([`Self::penalize_no_shows`]).
			c.draw_at = now;
		}
		let seats = jury.iter().fold(0u32, |a, s| a.saturating_add(s.seats));
		c.votes = JuryVotes { seats, ..JuryVotes::default() };
		c.jury = jury.clone();
		OpenChallenges::<T>::insert(id, &c);
		Self::deposit_event(Event::JuryDrawn { challenge_id: id, jury, expires_at: c.expires_at });
		if now >= c.expires_at {
			Self::expire(id);
		}
	}

	/// Whether `juror`'s `vote(challenge_id, guilty)` would succeed at the current state: the
	/// vote (and the verdict it may reach) is run in a storage layer that is then discarded.
	/// The runtime's transaction extension admits a vote (an `Operational` call) only if it
	/// passes.
	///
	/// Errors: those of [`Pallet::vote`].
	pub fn check_vote(
		juror: T::AccountId,
		challenge_id: ChallengeId,
		guilty: bool,
	) -> DispatchResult {
		synod_primitives::dry_run(|| Self::do_vote(juror, challenge_id, guilty))
	}

	pub(crate) fn do_vote(
		juror: T::AccountId,
		challenge_id: ChallengeId,
		guilty: bool,
	) -> DispatchResult {
		let mut c = OpenChallenges::<T>::get(challenge_id).ok_or(Error::<T>::ChallengeNotFound)?;
		ensure!(!c.jury.is_empty(), Error::<T>::JuryNotDrawn);
		let now = frame_system::Pallet::<T>::block_number();
		ensure!(now < c.expires_at, Error::<T>::VotingClosed);
		// A ruling closes the first committee's vote; an appeal committee votes anew.
		ensure!(
			Appeals::<T>::get(challenge_id)
				.is_none_or(|a| matches!(a.stage(), Stage::FirstVote | Stage::AppealVote)),
			Error::<T>::VotingClosed
		);
		let seats = c
			.jury
			.iter()
			.find(|s| s.who == juror)
			.map(|s| s.seats)
			.ok_or(Error::<T>::NotJuror)?;
		ensure!(!Votes::<T>::contains_key(challenge_id, &juror), Error::<T>::AlreadyVoted);
		Votes::<T>::insert(challenge_id, &juror, guilty);
		if guilty {
			c.votes.guilty = c.votes.guilty.saturating_add(seats);
		} else {
			c.votes.innocent = c.votes.innocent.saturating_add(seats);
		}
		Self::deposit_event(Event::Voted { challenge_id, juror, guilty });
		match c.votes.decided() {
			Some(verdict) => Self::decide(challenge_id, c, verdict, now),
			None => OpenChallenges::<T>::insert(challenge_id, c),
		}
		Ok(())
	}

	/// Releases the challenger's bond of `c`.
	pub(crate) fn release_bond(c: &Challenge<T>) {
		let _ = T::Currency::release(
			&Self::bond_reason(),
			&c.challenger,
			c.bond,
			Precision::BestEffort,
		);
	}

	/// Whether `who` is the accused or the challenger of `c` (they sit and vote, but are not
	/// paid as jurors of their own dispute, and do not count toward `MinJuryStake`).
	pub(crate) fn is_party(c: &Challenge<T>, who: &T::AccountId) -> bool {
		*who == c.accused || *who == c.challenger
	}

	/// The jurors of `c` other than the parties who voted `guilty`, with their seats (the
	/// weights they are paid by).
	pub(crate) fn voters(
		challenge_id: ChallengeId,
		c: &Challenge<T>,
		guilty: bool,
	) -> Vec<(T::AccountId, u128)> {
		c.jury
			.iter()
			.filter(|s| !Self::is_party(c, &s.who))
			.filter(|s| Votes::<T>::get(challenge_id, &s.who) == Some(guilty))
			.map(|s| (s.who.clone(), u128::from(s.seats)))
			.collect()
	}

	/// Removes challenge `challenge_id` (`c`) and everything it holds (its eligible jurors,
	/// appeal side, narrowed dispute, votes, counts and later schedule slots) and emits
	/// `ChallengeClosed` with `verdict`; a `Guilty` one is also stored in `Verdicts` (a
	/// conviction is final).
	pub(crate) fn close(challenge_id: ChallengeId, c: &Challenge<T>, verdict: protocol::Verdict) {
		Self::unschedule(challenge_id);
		OpenChallenges::<T>::remove(challenge_id);
		EligibleJurors::<T>::remove(challenge_id);
		Appeals::<T>::remove(challenge_id);
		Disputes::<T>::remove(challenge_id);
		OpenBy::<T>::mutate_exists((c.pool_id, c.round, &c.accused, &c.challenger), |n| {
			*n = n.and_then(|n| n.checked_sub(1)).filter(|n| *n > 0);
		});
		let _ = Votes::<T>::clear_prefix(challenge_id, T::AppealJurySize::get(), None);
		let key = (c.pool_id, c.round, c.accused.clone());
		if FirstGuiltyRuling::<T>::get(&key).is_some_and(|(id, _)| id == challenge_id) {
			FirstGuiltyRuling::<T>::remove(&key);
		}
		OpenAgainst::<T>::mutate_exists(&key, |n| {
			*n = n.and_then(|n| n.checked_sub(1)).filter(|n| *n > 0);
		});
		// Only a conviction is stored: it is final (a later failed or expired challenge does
		// not undo it) and bars a second slash. Any other verdict leaves the contribution
		// challengeable, so it is told by the event alone and takes no storage until the pool
		// is reaped.
		if verdict == protocol::Verdict::Guilty {
			Verdicts::<T>::insert(&key, verdict);
		}
		let (pool_id, round, accused) = key;
		Self::deposit_event(Event::ChallengeClosed {
			challenge_id,
			pool_id,
			round,
			accused,
			verdict,
		});
	}

	pub(crate) fn convict(challenge_id: ChallengeId, c: Challenge<T>) {
		// A share of the stake that backed the round (held until its challenges are over),
		// once per contribution: a second guilty verdict on it slashes nothing more.
		let already = Verdicts::<T>::get((c.pool_id, c.round, c.accused.clone()))
			== Some(protocol::Verdict::Guilty);
		let amount = if already { 0 } else { T::SlashFraction::get().mul_floor(c.accused_stake) };
		// Paid out of it, in this order: `JurorShare` to the jurors who voted guilty (pro rata
		// to their seats), `ChallengerShare` to the challenger of the contribution's earliest
		// guilty ruling still open (`FirstGuiltyRuling`; this challenge's if there is none:
		// an accused that appeals an honest challenger's guilty ruling until an accomplice's
		// later one executes does not hand the share to the accomplice); the rest goes to
		// `Slash`.
		let key = (c.pool_id, c.round, c.accused.clone());
		let rewarded =
			FirstGuiltyRuling::<T>::get(&key).map_or_else(|| c.challenger.clone(), |(_, who)| who);
		let (mut parts, _) = protocol::split_by_stake(
			T::JurorShare::get().mul_floor(amount),
			&Self::voters(challenge_id, &c, true),
		);
		parts.push((rewarded, T::ChallengerShare::get().mul_floor(amount)));
		let mut slashed = BalanceOf::<T>::zero();
		let mut paid = 0u128;
		for (to, part) in &parts {
			paid = paid.saturating_add(*part);
			slashed = slashed.saturating_add(T::Staking::slash(
				&c.accused,
				(*part).saturated_into(),
				Some((to, Perbill::one())),
			));
		}
		slashed = slashed.saturating_add(T::Staking::slash(
			&c.accused,
			amount.saturating_sub(paid).saturated_into(),
			None,
		));
		Self::release_bond(&c);
		Self::close(challenge_id, &c, protocol::Verdict::Guilty);
		Self::deposit_event(Event::AccusedFoundGuilty {
			challenge_id,
			accused: c.accused,
			slashed,
		});
	}

	/// Slashes `amount` planck of `who`'s hold for `reason` and pays it to `voters` pro rata to
	/// their seats (dust and unpayable parts to `Slash`). Returns `(slashed, paid)`, planck.
	pub(crate) fn slash_hold_to_voters(
		reason: &T::RuntimeHoldReason,
		who: &T::AccountId,
		amount: BalanceOf<T>,
		voters: &[(T::AccountId, u128)],
	) -> (BalanceOf<T>, BalanceOf<T>) {
		let (mut credit, _) =
			<T::Currency as BalancedHold<T::AccountId>>::slash(reason, who, amount);
		let slashed = credit.peek();
		let (shares, _) = protocol::split_by_stake(slashed.saturated_into(), voters);
		let mut paid = BalanceOf::<T>::zero();
		for (juror, share) in shares {
			let (part, rest) = credit.split(share.saturated_into());
			credit = rest;
			let offered = part.peek();
			match <T::Currency as Balanced<T::AccountId>>::resolve(&juror, part) {
				Ok(()) => paid = paid.saturating_add(offered),
				Err(back) => credit = credit.merge(back),
			}
		}
		T::Slash::on_unbalanced(credit);
		(slashed, paid)
	}

	pub(crate) fn acquit(challenge_id: ChallengeId, c: Challenge<T>) {
		// Jurors who voted innocent share the bond pro rata to their seats.
		let (bond_slashed, jurors_paid) = Self::slash_hold_to_voters(
			&Self::bond_reason(),
			&c.challenger,
			c.bond,
			&Self::voters(challenge_id, &c, false),
		);
		Self::close(challenge_id, &c, protocol::Verdict::Innocent);
		Self::deposit_event(Event::AccusedFoundInnocent {
			challenge_id,
			accused: c.accused,
			bond_slashed,
			jurors_paid,
		});
	}

	/// The end of a committee's vote (the first one's, or the appeal's): no-shows answer for
	/// it, then its verdict at expiry is decided ([`Self::decide`]).
	pub(crate) fn expire(challenge_id: ChallengeId) {
		let Some(c) = OpenChallenges::<T>::get(challenge_id) else {
			return;
		};
		Self::penalize_no_shows(challenge_id, &c);
		let verdict = c.votes.at_expiry();
		Self::decide(challenge_id, c, verdict, frame_system::Pallet::<T>::block_number());
	}

	/// Executes `verdict` on `c` at once: convicts, acquits, or (undecided) releases the bond.
	pub(crate) fn execute(challenge_id: ChallengeId, c: Challenge<T>, verdict: protocol::Verdict) {
		match verdict {
			protocol::Verdict::Guilty => Self::convict(challenge_id, c),
			protocol::Verdict::Innocent => Self::acquit(challenge_id, c),
			_ => {
				Self::release_bond(&c);
				Self::close(challenge_id, &c, protocol::Verdict::Expired);
				Self::deposit_event(Event::ChallengeExpired { challenge_id });
			},
		}
	}

	/// Weight of closing a challenge beyond its benchmarked paths: its challenger's slot
	/// ([`OpenBy`]), the contribution's [`FirstGuiltyRuling`], per absent juror (at most `MaxPoolMembers`) its [`NoShows`] record, its
	/// [`ScheduledAt`] entry with the (at most [`MAX_SCHEDULED`]) blocks whose schedule it
	/// leaves, and its [`Disputes`] entry.
	pub(crate) fn close_weight() -> Weight {
		let n = u64::from(T::MaxPoolMembers::get())
			.saturating_add(1)
			.saturating_add(1)
			.saturating_add(1)
			.saturating_add(u64::from(MAX_SCHEDULED))
			.saturating_add(1);
		T::DbWeight::get().reads_writes(n, n)
	}

	/// Slashes `NoShowSlash` of the drawn (snapshot) stake of every juror of `c` that has not
	/// voted, once per challenged round ([`NoShows`]), and opts it out ([`OptedOut`]). Every
	/// seated juror contributed to the challenged round and was in the previous round's
	/// contributors (when that round is final), so it held what a replay needs.
	fn penalize_no_shows(challenge_id: ChallengeId, c: &Challenge<T>) {
		// Only a jury that had the whole voting period answers for not voting: never one drawn
		// late, whoever advanced it and when.
		let whole_period = T::Pools::round_params(c.pool_id).is_some_and(|p| {
			block::<T>(c.expires_at).saturating_sub(block::<T>(c.draw_at))
				>= p.timeline.voting_period
		});
		if !whole_period {
			return;
		}
		let absent: Vec<(T::AccountId, u128)> = c
			.jury
			.iter()
			.filter(|s| !Votes::<T>::contains_key(challenge_id, &s.who))
			.map(|s| (s.who.clone(), s.stake))
			.collect();
		if absent.is_empty() {
			return;
		}
		for (juror, stake) in absent {
			// Once per round: a flood of challenges does not multiply the penalty.
			let key = (c.pool_id, c.round, juror.clone());
			let slashed = if NoShows::<T>::contains_key(&key) {
				Zero::zero()
			} else {
				NoShows::<T>::insert(&key, ());
				T::Staking::slash(
					&juror,
					T::NoShowSlash::get().mul_floor(stake).saturated_into(),
					None,
				)
			};
			Self::deposit_event(Event::JurorNoShow { challenge_id, juror: juror.clone(), slashed });
			Self::opt_out(juror);
		}
	}
}

impl<T: Config> ChallengesInspect<T::AccountId> for Pallet<T> {
	/// Convicted by a jury, or proved to have equivocated, in `(pool, round)`.
	fn is_guilty(pool: PoolId, round: RoundIndex, who: &T::AccountId) -> bool {
		let key = (pool, round, who.clone());
		Verdicts::<T>::get(&key) == Some(protocol::Verdict::Guilty)
			|| Equivocations::<T>::contains_key(&key)
	}

	/// Some entry of [`Equivocations`] under `(pool, round)`.
	fn equivocation_proved(pool: PoolId, round: RoundIndex) -> bool {
		Equivocations::<T>::iter_prefix((pool, round)).next().is_some()
	}
}

/// A reaped pool's verdicts, proved equivocations and no-show records. A pool is reaped only once every
/// challenge of its rounds is over (`Timeline::settled_by`), so nothing here keeps it in use.
impl<T: Config> synod_primitives::PoolRecords for Pallet<T> {
	fn in_use(_pool: PoolId) -> bool {
		false
	}

	fn clear(pool: PoolId, limit: u32) -> (u32, bool) {
		let v = Verdicts::<T>::clear_prefix((pool,), limit, None);
		if v.maybe_cursor.is_some() {
			return (v.unique, false);
		}
		let left = limit.saturating_sub(v.unique);
		let e = Equivocations::<T>::clear_prefix((pool,), left, None);
		if e.maybe_cursor.is_some() {
			return (v.unique.saturating_add(e.unique), false);
		}
		let n = NoShows::<T>::clear_prefix((pool,), left.saturating_sub(e.unique), None);
		(v.unique.saturating_add(e.unique).saturating_add(n.unique), n.maybe_cursor.is_none())
	}

	fn clear_weight(limit: u32) -> Weight {
		// Per record: the key read by the prefix iteration and its deletion; plus the three
		// emptiness checks.
		T::DbWeight::get().reads_writes(u64::from(limit).saturating_add(3), u64::from(limit))
	}
}
