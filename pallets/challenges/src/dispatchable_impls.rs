//! Opening, voting and advancing challenges; what the other pallets read of them.

use crate::{pallet::*, Event};
use frame_support::{pallet_prelude::*, traits::fungible::MutateHold};
use frame_system::pallet_prelude::BlockNumberFor;
use sp_runtime::traits::SaturatedConversion;
use synod_primitives::{
	protocol::{self, JuryVotes},
	ChallengesInspect, CheckpointsInspect, MemberIndex, PoolId, PoolsInterface, RoundIndex,
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
		let (draw_at, expires_at, expiry_at) =
			Self::schedule_blocks(now, &params.timeline, pool_id)?;
		let appeal = Self::appeal_blocks(now, expiry_at, &params.timeline, pool_id)?;
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
		// Kept in opening order while every open challenge of the contribution is kept: past
		// `MAX_SHARE_CANDIDATES`, a later one is judged but not kept, nor is any opened after
		// it while it is open, so that no later candidate overtakes it when an earlier
		// candidate closes.
		ShareCandidates::<T>::mutate(&key, |r| {
			let candidates = r.get_or_insert_with(BoundedVec::new);
			if candidates.len() as u32 == open {
				let _ = candidates.try_push((challenge_id, challenger.clone()));
			}
			r.take_if(|candidates| candidates.is_empty());
		});
		NextChallengeId::<T>::put(next);
		Self::schedule(draw_at, challenge_id, pool_id);
		Self::schedule(expiry_at, challenge_id, pool_id);
		if let Some(a) = appeal {
			Self::schedule(a.ruling_by, challenge_id, pool_id);
			Self::schedule(a.appeal_expiry_by, challenge_id, pool_id);
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
		synod_primitives::dry_run(|| Self::do_vote(juror, challenge_id, guilty).map(|_| ()))
	}

	/// Records `juror`'s vote and, once the committee is decided, its verdict. Returns whether
	/// the vote decided the challenge (`false`: only the vote was recorded, the path
	/// `WeightInfo::vote_undecided` measures).
	pub(crate) fn do_vote(
		juror: T::AccountId,
		challenge_id: ChallengeId,
		guilty: bool,
	) -> Result<bool, DispatchError> {
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
		// It is live: its next missed vote counts again (its nonce moved anyway).
		NoShowNonce::<T>::remove(&juror);
		if guilty {
			c.votes.guilty = c.votes.guilty.saturating_add(seats);
		} else {
			c.votes.innocent = c.votes.innocent.saturating_add(seats);
		}
		Self::deposit_event(Event::Voted { challenge_id, juror, guilty });
		match c.votes.decided() {
			Some(verdict) => {
				Self::decide(challenge_id, c, verdict, now);
				Ok(true)
			},
			None => {
				OpenChallenges::<T>::insert(challenge_id, c);
				Ok(false)
			},
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
