//! Rulings and appeals: in a pool whose timeline has appeals (`Timeline::appeal_period > 0`), a
//! committee's guilty or innocent verdict is a *ruling* that executes `appeal_period` blocks
//! later unless the losing party appeals; the appeal committee (`AppealJurySize` seats, drawn
//! from the same frozen eligible jurors with a later seed) gives the final verdict.
//!
//! Every block this can need is scheduled when the challenge opens ([`Appeal::ruling_by`],
//! [`Appeal::appeal_expiry_by`]), so nothing is left for someone to advance at a time of its
//! choosing; a ruling reached early executes in an earlier block when one of the next
//! [`SCHEDULE_PROBES`] has room. An appeal committee is drawn in the ruling's execution block,
//! fixed when the ruling was reached.

use crate::{pallet::*, Event};
use frame_support::{
	pallet_prelude::*,
	traits::{fungible::MutateHold, tokens::Precision},
};
use frame_system::pallet_prelude::BlockNumberFor;
use sp_runtime::traits::{SaturatedConversion, Saturating, Zero};
use synod_primitives::{
	protocol::{self, JuryVotes, Verdict},
	PoolsInterface,
};

/// Most blocks searched for room when a ruling or an appeal is scheduled earlier than the block
/// reserved for it at opening (bounds the reads of `vote` and `appeal`).
pub const SCHEDULE_PROBES: u32 = 8;

fn block<T: Config>(n: BlockNumberFor<T>) -> protocol::Block {
	n.saturated_into()
}

impl<T: Config> Pallet<T> {
	pub(crate) fn appeal_bond_reason() -> T::RuntimeHoldReason {
		HoldReason::AppealBond.into()
	}

	/// The blocks reserved for the appeal side of a challenge opened at `now`, whose first
	/// vote ends in `expiry_at`'s `on_initialize`: the ruling's
	/// execution (or the appeal's draw) by the first block of `expiry_at + appeal_period ..=
	/// rulings_until(now)` with room, and the appeal's end by the first of `ruling_by +
	/// voting_period ..= appeal_votes_until(now)` with room. `None` in a pool without appeals.
	///
	/// # Errors
	/// [`Error::ScheduleFull`] if either span has no room.
	pub(crate) fn appeal_blocks(
		now: BlockNumberFor<T>,
		expiry_at: BlockNumberFor<T>,
		timeline: &protocol::Timeline,
		pool: synod_primitives::PoolId,
	) -> Result<Option<Appeal<T>>, Error<T>> {
		if !timeline.appeals() {
			return Ok(None);
		}
		let opened = block::<T>(now);
		let from = block::<T>(expiry_at).saturating_add(timeline.appeal_period);
		let ruling_by = Self::free_block(from..=timeline.rulings_until(opened).max(from), pool)
			.ok_or(Error::<T>::ScheduleFull)?;
		let from = block::<T>(ruling_by).saturating_add(timeline.voting_period);
		let appeal_expiry_by =
			Self::free_block(from..=timeline.appeal_votes_until(opened).max(from), pool)
				.ok_or(Error::<T>::ScheduleFull)?;
		Ok(Some(Appeal { ruling_by, appeal_expiry_by, ruling: None, appellant: None }))
	}

	/// `id`'s (a challenge of `pool`) entry in the first block of `from ..` (at most
	/// [`SCHEDULE_PROBES`] blocks, all after the current one and before `reserved`) with room;
	/// else `reserved`, where it is scheduled already.
	fn schedule_by(
		id: ChallengeId,
		pool: synod_primitives::PoolId,
		from: BlockNumberFor<T>,
		reserved: BlockNumberFor<T>,
	) -> BlockNumberFor<T> {
		// The current block's schedule was taken by its `on_initialize`: never into it.
		let next = block::<T>(frame_system::Pallet::<T>::block_number()).saturating_add(1);
		let (from, reserved) = (block::<T>(from).max(next), block::<T>(reserved));
		let until = from.saturating_add(u64::from(SCHEDULE_PROBES)).min(reserved);
		match Self::free_block(from..until, pool) {
			Some(at) => {
				Self::schedule(at, id, pool);
				at
			},
			None => reserved.saturated_into(),
		}
	}

	/// A committee of `c` decided `verdict` at `now` (a majority of its seats, or at the end of
	/// its vote): the first committee's guilty or innocent verdict in a pool with appeals is a
	/// ruling ([`Event::Ruled`]); every other verdict executes at once, the appellant's bond
	/// settled first.
	pub(crate) fn decide(
		id: ChallengeId,
		c: Challenge<T>,
		verdict: Verdict,
		now: BlockNumberFor<T>,
	) {
		let Some(mut a) = Appeals::<T>::get(id) else {
			return Self::execute(id, c, verdict);
		};
		match a.stage() {
			Stage::FirstVote if matches!(verdict, Verdict::Guilty | Verdict::Innocent) => {
				let period: BlockNumberFor<T> = T::Pools::round_params(c.pool_id)
					.map_or(0, |p| p.timeline.appeal_period)
					.saturated_into();
				let executes_at =
					Self::schedule_by(id, c.pool_id, now.saturating_add(period), a.ruling_by);
				a.ruling = Some((verdict, executes_at));
				Appeals::<T>::insert(id, a);
				OpenChallenges::<T>::insert(id, c);
				Self::deposit_event(Event::Ruled { challenge_id: id, verdict, executes_at });
			},
			Stage::AppealVote => {
				Self::settle_appellant(id, &c, &a, verdict);
				Self::execute(id, c, verdict);
			},
			_ => Self::execute(id, c, verdict),
		}
	}

	/// The loser of `verdict` on `c`: the accused of a guilty one, the challenger of an
	/// innocent one.
	fn loser(c: &Challenge<T>, verdict: Verdict) -> Option<&T::AccountId> {
		match verdict {
			Verdict::Guilty => Some(&c.accused),
			Verdict::Innocent => Some(&c.challenger),
			_ => None,
		}
	}

	/// Whether `who`'s `appeal(id)` would succeed at the current state: run in a storage layer
	/// that is then discarded. The runtime's transaction extension admits an appeal (an
	/// `Operational` call) only if it passes.
	///
	/// Errors: those of [`Pallet::appeal`].
	pub fn check_appeal(who: T::AccountId, id: ChallengeId) -> DispatchResult {
		synod_primitives::dry_run(|| Self::do_appeal(who, id))
	}

	pub(crate) fn do_appeal(who: T::AccountId, id: ChallengeId) -> DispatchResult {
		let mut c = OpenChallenges::<T>::get(id).ok_or(Error::<T>::ChallengeNotFound)?;
		let mut a = Appeals::<T>::get(id).ok_or(Error::<T>::NoRuling)?;
		let (verdict, executes_at) = match (a.stage(), a.ruling) {
			(Stage::Ruled, Some(r)) => r,
			_ => return Err(Error::<T>::NoRuling.into()),
		};
		let now = frame_system::Pallet::<T>::block_number();
		// The appeal committee is drawn in the ruling's execution block, fixed when the ruling
		// was reached, from the randomness of the block before it: a block after this one, so
		// that not even this block's author knows the committee when it includes the appeal, and
		// the appellant cannot pick the seed by choosing when to appeal.
		let earliest_draw = now.saturating_add(protocol::timeline::MIN_JURY_DELAY.saturated_into());
		ensure!(earliest_draw <= executes_at, Error::<T>::AppealClosed);
		ensure!(Self::loser(&c, verdict) == Some(&who), Error::<T>::NotAppellant);
		let bond = T::AppealBond::get();
		T::Currency::hold(&Self::appeal_bond_reason(), &who, bond)
			.map_err(|_| Error::<T>::InsufficientAppealBond)?;
		c.draw_at = executes_at;
		a.appellant = Some((who.clone(), bond));
		Appeals::<T>::insert(id, a);
		OpenChallenges::<T>::insert(id, &c);
		Self::deposit_event(Event::Appealed {
			challenge_id: id,
			appellant: who,
			bond,
			draw_at: c.draw_at,
		});
		Ok(())
	}

	/// Draws the appeal committee of `c` (`AppealJurySize` seats from the frozen eligible
	/// jurors, seeded by the randomness of the block before its `draw_at`); the first
	/// committee's votes are discarded and the appeal votes for a whole voting period. A
	/// committee whose jurors other than the parties hold less than `MinJuryStake` gives no
	/// verdict: both bonds are released.
	pub(crate) fn draw_appeal(
		id: ChallengeId,
		mut c: Challenge<T>,
		mut a: Appeal<T>,
		now: BlockNumberFor<T>,
	) {
		let jury = Self::draw(id, &c, T::AppealJurySize::get());
		EligibleJurors::<T>::remove(id);
		let _ = Votes::<T>::clear_prefix(id, T::AppealJurySize::get(), None);
		let jury_stake = jury
			.iter()
			.filter(|s| !Self::is_party(&c, &s.who))
			.fold(0u128, |acc, s| acc.saturating_add(s.stake));
		if jury_stake < T::MinJuryStake::get().saturated_into::<u128>().max(1) {
			Self::settle_appellant(id, &c, &a, Verdict::NoJury);
			Self::release_bond(&c);
			Self::close(id, &c, Verdict::NoJury);
			Self::deposit_event(Event::NoJuryDrawn { challenge_id: id, jury_stake });
			return;
		}
		let period: BlockNumberFor<T> = T::Pools::round_params(c.pool_id)
			.map_or(0, |p| p.timeline.voting_period)
			.saturated_into();
		// The appeal committee votes a whole voting period from its draw (never drawn late: its
		// block was fixed and scheduled when the ruling was reached).
		c.draw_at = now;
		c.expires_at = now.saturating_add(period);
		let expiry = Self::schedule_by(id, c.pool_id, c.expires_at, a.appeal_expiry_by);
		// The reserved end of the appeal comes no earlier than a whole voting period after the
		// latest draw; an earlier end is what was found with room.
		c.expires_at = c.expires_at.min(expiry);
		let seats = jury.iter().fold(0u32, |acc, s| acc.saturating_add(s.seats));
		c.votes = JuryVotes { seats, ..JuryVotes::default() };
		c.jury = jury.clone();
		a.ruling = None;
		Appeals::<T>::insert(id, a);
		OpenChallenges::<T>::insert(id, &c);
		Self::deposit_event(Event::AppealJuryDrawn {
			challenge_id: id,
			jury,
			expires_at: c.expires_at,
		});
	}

	/// Settles the appellant's bond of `a` under the appeal's `verdict`: slashed when it
	/// confirms the ruling the appellant lost, and paid to the appeal jurors who voted with it
	/// (per seat of the appeal committee, [`protocol::split_per_seat`]) if their votes decided
	/// it, else to `Slash` ([`Self::slash_hold_to_voters`]); released when it reverses the
	/// ruling or gives no verdict.
	fn settle_appellant(id: ChallengeId, c: &Challenge<T>, a: &Appeal<T>, verdict: Verdict) {
		let Some((appellant, bond)) = a.appellant.clone() else {
			return;
		};
		let (slashed, jurors_paid) = if Self::loser(c, verdict) == Some(&appellant) {
			Self::slash_hold_to_voters(
				&Self::appeal_bond_reason(),
				&appellant,
				bond,
				(id, c, verdict == Verdict::Guilty),
			)
		} else {
			let _ = T::Currency::release(
				&Self::appeal_bond_reason(),
				&appellant,
				bond,
				Precision::BestEffort,
			);
			(Zero::zero(), Zero::zero())
		};
		Self::deposit_event(Event::AppealBondSettled {
			challenge_id: id,
			appellant,
			slashed,
			jurors_paid,
		});
	}

	/// Invariants of the appeal side: every entry belongs to an open challenge; a ruling's and
	/// an appeal's blocks still to come are scheduled; each appellant's hold equals its open
	/// appeals' bonds; an appeal committee is drawn from the eligible jurors kept for it.
	pub(crate) fn appeals_try_state() -> Result<(), sp_runtime::TryRuntimeError> {
		use alloc::collections::btree_map::BTreeMap;
		use frame_support::traits::fungible::InspectHold;
		let now = frame_system::Pallet::<T>::block_number();
		let scheduled = |at: BlockNumberFor<T>, id: ChallengeId| {
			at <= now || Expiries::<T>::get(at).contains(&id)
		};
		let mut bonds: BTreeMap<T::AccountId, BalanceOf<T>> = BTreeMap::new();
		for (id, a) in Appeals::<T>::iter() {
			let c = OpenChallenges::<T>::get(id).ok_or("an appeal of a closed challenge")?;
			ensure!(
				scheduled(a.ruling_by, id) && scheduled(a.appeal_expiry_by, id),
				"an appeal's reserved block is not scheduled"
			);
			if let Some((_, executes_at)) = a.ruling {
				ensure!(
					executes_at <= a.ruling_by && scheduled(executes_at, id),
					"a ruling's execution is not scheduled"
				);
			}
			if let Some((who, bond)) = &a.appellant {
				ensure!(
					*who == c.accused || *who == c.challenger,
					"an appellant that is not a party"
				);
				let e = bonds.entry(who.clone()).or_default();
				*e = e.saturating_add(*bond);
			}
			if a.stage() == Stage::Appealed {
				ensure!(
					EligibleJurors::<T>::contains_key(id) && scheduled(c.draw_at, id),
					"an appeal committee with no eligible jurors or no scheduled draw"
				);
			}
		}
		for (who, bond) in bonds {
			ensure!(
				T::Currency::balance_on_hold(&Self::appeal_bond_reason(), &who) == bond,
				"appeal bond hold differs from open appeals"
			);
		}
		Ok(())
	}
}
