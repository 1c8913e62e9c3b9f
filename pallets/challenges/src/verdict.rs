//! What a verdict does: a conviction's slash and its shares (the challenger share to the
//! contribution's first [`ShareCandidates`] entry), an acquittal's bond to the jurors whose
//! votes decided it (an undecided committee acquits, and its bond goes to `Slash`), the
//! release of a challenge without a committee, the no-show penalty, and closing a challenge
//! with everything it holds.

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
use sp_runtime::{
	traits::{SaturatedConversion, Saturating, Zero},
	Perbill,
};
use synod_primitives::{protocol, PoolsInterface, TrainerStake};

use crate::dispatchable_impls::block;

impl<T: Config> Pallet<T> {
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

	/// `amount` planck split over the jurors of `c`'s committee other than the parties who voted
	/// `guilty`, per seat of the committee without the parties' seats
	/// ([`protocol::split_per_seat`]): each voter's share (the seats that did not vote so, and
	/// the dust, are in no share).
	pub(crate) fn juror_shares(
		challenge_id: ChallengeId,
		c: &Challenge<T>,
		guilty: bool,
		amount: u128,
	) -> Vec<(T::AccountId, u128)> {
		let seated = c.jury.iter().filter(|s| !Self::is_party(c, &s.who));
		let paid_seats =
			seated.clone().fold(0u128, |acc, s| acc.saturating_add(u128::from(s.seats)));
		let voters: Vec<(T::AccountId, u128)> = seated
			.filter(|s| Votes::<T>::get(challenge_id, &s.who) == Some(guilty))
			.map(|s| (s.who.clone(), u128::from(s.seats)))
			.collect();
		protocol::split_per_seat(amount, &voters, paid_seats).0
	}

	/// Removes challenge `challenge_id` (`c`) and everything it holds (its eligible jurors,
	/// appeal side, narrowed dispute, votes, counts and later schedule slots) and emits
	/// `ChallengeClosed` with `verdict`; a `Guilty` one is also stored in `Verdicts` (a
	/// conviction is final).
	pub(crate) fn close(challenge_id: ChallengeId, c: &Challenge<T>, verdict: protocol::Verdict) {
		Self::unschedule(challenge_id, c.pool_id);
		OpenChallenges::<T>::remove(challenge_id);
		EligibleJurors::<T>::remove(challenge_id);
		Appeals::<T>::remove(challenge_id);
		Disputes::<T>::remove(challenge_id);
		OpenBy::<T>::mutate_exists((c.pool_id, c.round, &c.accused, &c.challenger), |n| {
			*n = n.and_then(|n| n.checked_sub(1)).filter(|n| *n > 0);
		});
		let _ = Votes::<T>::clear_prefix(challenge_id, T::AppealJurySize::get(), None);
		let key = (c.pool_id, c.round, c.accused.clone());
		Self::drop_share_candidate(challenge_id, c);
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

	/// Removes challenge `id` (`c`), which closed, from its contribution's [`ShareCandidates`].
	pub(crate) fn drop_share_candidate(id: ChallengeId, c: &Challenge<T>) {
		ShareCandidates::<T>::mutate_exists((c.pool_id, c.round, &c.accused), |r| {
			if let Some(candidates) = r {
				candidates.retain(|(candidate, _)| *candidate != id);
			}
			r.take_if(|candidates| candidates.is_empty());
		});
	}

	/// Who is paid `ChallengerShare` of a conviction by challenge `c`: the challenger of the
	/// first of the contribution's [`ShareCandidates`] (earliest opened) whose first committee's
	/// innocent ruling does not stand unappealed, or `c`'s own if there is none. An accomplice
	/// that challenged after an honest challenger still open does not take the share by being
	/// decided first, nor by getting the honest challenge's guilty ruling appealed; a challenge
	/// ruled innocent is paid only once its challenger appeals (its appeal claims the guilt
	/// that the conviction confirms: an honest challenger whose captured committee acquitted
	/// keeps its place if it appeals before another conviction executes). Reads at most
	/// [`MAX_SHARE_CANDIDATES`](crate::MAX_SHARE_CANDIDATES) [`Appeals`] entries
	/// ([`Pallet::close_weight`]).
	pub(crate) fn share_recipient(c: &Challenge<T>) -> T::AccountId {
		let standing_innocent = |id: &ChallengeId| {
			Appeals::<T>::get(id).is_some_and(|a| {
				a.appellant.is_none()
					&& a.ruling.is_some_and(|(v, _)| v == protocol::Verdict::Innocent)
			})
		};
		ShareCandidates::<T>::get((c.pool_id, c.round, &c.accused))
			.and_then(|r| r.into_iter().find(|(id, _)| !standing_innocent(id)))
			.map_or_else(|| c.challenger.clone(), |(_, who)| who)
	}

	pub(crate) fn convict(challenge_id: ChallengeId, c: Challenge<T>) {
		// A share of the stake that backed the round (held until its challenges are over),
		// once per contribution: a second guilty verdict on it slashes nothing more.
		let already = Verdicts::<T>::get((c.pool_id, c.round, c.accused.clone()))
			== Some(protocol::Verdict::Guilty);
		let amount = if already { 0 } else { T::SlashFraction::get().mul_floor(c.accused_stake) };
		// Paid out of it, in this order: `JurorShare` to the jurors who voted guilty, per seat
		// of the committee (the seats that did not vote guilty leave their part unpaid:
		// [`protocol::split_per_seat`]), `ChallengerShare` to the challenger of the
		// contribution's earliest-opened challenge still open and not standing ruled innocent
		// ([`Pallet::share_recipient`]); the rest goes to `Slash`.
		let rewarded = Self::share_recipient(&c);
		let mut parts =
			Self::juror_shares(challenge_id, &c, true, T::JurorShare::get().mul_floor(amount));
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

	/// Slashes `amount` planck of `who`'s hold for `reason` and pays it to the jurors of
	/// challenge `challenge_id` (`c`) who voted `guilty`, per seat of the committee
	/// ([`Self::juror_shares`]: the seats that did not vote so, dust and unpayable parts go to
	/// `Slash`), if their votes decided the committee; a committee left undecided at the end
	/// of its vote (its absent seats acquitting, [`protocol::JuryVotes::at_expiry`]) pays
	/// nobody and all of it goes to `Slash`: jurors that vote innocent at once, without a
	/// replay, are not paid for the honest jurors' absence. Returns `(slashed, paid)`, planck.
	pub(crate) fn slash_hold_to_voters(
		reason: &T::RuntimeHoldReason,
		who: &T::AccountId,
		amount: BalanceOf<T>,
		(challenge_id, c, guilty): (ChallengeId, &Challenge<T>, bool),
	) -> (BalanceOf<T>, BalanceOf<T>) {
		let (mut credit, _) =
			<T::Currency as BalancedHold<T::AccountId>>::slash(reason, who, amount);
		let slashed = credit.peek();
		let verdict = if guilty { protocol::Verdict::Guilty } else { protocol::Verdict::Innocent };
		let shares = if c.votes.decided() == Some(verdict) {
			Self::juror_shares(challenge_id, c, guilty, slashed.saturated_into())
		} else {
			Vec::new()
		};
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
		// Jurors who voted innocent are paid the bond per seat of the committee if their votes
		// decided it; an undecided committee's bond goes to `Slash`.
		let (bond_slashed, jurors_paid) = Self::slash_hold_to_voters(
			&Self::bond_reason(),
			&c.challenger,
			c.bond,
			(challenge_id, &c, false),
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

	/// Executes `verdict` on `c` at once: convicts, acquits, or (no committee) releases the bond.
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
	/// ([`OpenBy`]), the contribution's [`ShareCandidates`] with the [`Appeals`] entries of its
	/// candidates ([`Pallet::share_recipient`]), per absent juror (at most `MaxPoolMembers`)
	/// its [`NoShows`] record, its
	/// [`ScheduledAt`] entry with the (at most [`MAX_SCHEDULED`]) blocks whose schedule it
	/// leaves and its pool's [`PoolSlots`] count in each, and its [`Disputes`] entry.
	pub(crate) fn close_weight() -> Weight {
		let n = u64::from(T::MaxPoolMembers::get())
			.saturating_add(1)
			.saturating_add(1)
			.saturating_add(u64::from(crate::MAX_SHARE_CANDIDATES))
			.saturating_add(1)
			.saturating_add(u64::from(MAX_SCHEDULED).saturating_mul(2))
			.saturating_add(1);
		T::DbWeight::get().reads_writes(n, n)
	}

	/// Weight of the end of a vote beyond `expire`'s benchmark: per absent juror (at most
	/// `MaxPoolMembers`) its account's nonce and its [`NoShowNonce`] read, the latter written.
	pub(crate) fn no_show_weight() -> Weight {
		let n = u64::from(T::MaxPoolMembers::get());
		T::DbWeight::get().reads_writes(n.saturating_mul(2), n)
	}

	/// Slashes `NoShowSlash` of the drawn (snapshot) stake of every juror of `c` that has not
	/// voted, once per challenged round ([`NoShows`]), and not while its account has sent no
	/// transaction since its last no-show slash ([`NoShowNonce`]). It stays a juror: opting absent jurors
	/// out let an adversary that made the honest jurors miss a vote (more sham challenges at
	/// once than one voting period's replays) open a challenge right after, before they opted
	/// back in, whose eligible jurors were its own. Every
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
			// Once per round: a flood of challenges does not multiply the penalty. And not
			// again while the juror's account has sent nothing since its last no-show slash:
			// a crashed trainer would otherwise lose `NoShowSlash` for every round it
			// contributed to that an adversary challenges with shams (a bond each, lost when
			// the undecided committee acquits), about a hundred rounds taking its whole stake.
			let key = (c.pool_id, c.round, juror.clone());
			let nonce = frame_system::Pallet::<T>::account_nonce(&juror);
			let idle = NoShowNonce::<T>::get(&juror) == Some(nonce);
			let slashed = if idle || NoShows::<T>::contains_key(&key) {
				Zero::zero()
			} else {
				NoShows::<T>::insert(&key, ());
				NoShowNonce::<T>::insert(&juror, nonce);
				T::Staking::slash(
					&juror,
					T::NoShowSlash::get().mul_floor(stake).saturated_into(),
					None,
				)
			};
			Self::deposit_event(Event::JurorNoShow { challenge_id, juror, slashed });
		}
	}
}
