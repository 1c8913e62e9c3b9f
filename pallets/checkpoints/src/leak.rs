//! The inactivity leak ([`protocol::LeakRule`], [`protocol::leak`]): silent participants of a
//! voided round are leaked when the round is voided; unmatched commits (another hash over the
//! majority candidate's included set, or another set than the majority's agreed set once it
//! left time to commit over it) when the round's equivocation reports close; silent
//! included members of a final round (aggregated, no commit) once the round is settled.

use crate::{
	finality::{block, runtime_block},
	pallet::*,
	Event,
};
use alloc::vec::Vec;
use frame_support::pallet_prelude::*;
use frame_system::pallet_prelude::BlockNumberFor;
use sp_runtime::traits::{One, SaturatedConversion, Saturating};
use synod_primitives::{
	protocol::{self, LeakRule},
	ChallengesInspect, Participant, PoolId, PoolsInterface, RoundIndex, TrainerStake,
};

impl<T: Config> Pallet<T> {
	/// The inactivity leak of a voided round ([`protocol::LeakRule`],
	/// [`protocol::leak::at_void`]): silent participants are leaked now; participants that
	/// committed another hash over the included set of the candidate a strict majority of
	/// `round_stake` committed, or that stayed on another set when that set is `agreed` (the
	/// round's agreed set, fixed in time to commit over it), are kept in [`UnmatchedCommits`]
	/// for the decision on their leak (their counts unchanged until then); the others' counts
	/// reset.
	pub(crate) fn leak_inactive(
		pool_id: PoolId,
		round: RoundIndex,
		round_stake: T::Balance,
		candidates: &[Candidate<T>],
		agreed: Option<&IncludedSet<T>>,
	) {
		use protocol::leak::AtVoid;
		let stakes: Vec<u128> = candidates.iter().map(|c| c.stake.saturated_into()).collect();
		let majority = protocol::leak::majority_candidate(round_stake.saturated_into(), &stakes);
		let majority_set = majority.and_then(|m| candidates.get(m)).map(|c| &c.included);
		let same_set = |i: usize| candidates.get(i).map(|c| &c.included) == majority_set;
		let majority_agreed = majority_set.is_some() && majority_set == agreed;
		let snapshot = Snapshots::<T>::get((pool_id, round)).unwrap_or_default();
		let mut unmatched: SnapshotOf<T> = BoundedVec::new();
		for p in snapshot {
			// Commits made while the round was open (or ahead of it) back a candidate; a commit
			// made after the deadline was not recorded.
			let backed = candidates.iter().position(|c| c.committers.contains(&p.index));
			let committed =
				backed.is_some() || Commits::<T>::contains_key((pool_id, round), &p.who);
			let commit = protocol::leak::voided_commit(
				backed,
				committed,
				majority,
				same_set,
				majority_agreed,
			);
			match protocol::leak::at_void(commit) {
				AtVoid::Present => MissedRounds::<T>::remove(pool_id, &p.who),
				AtVoid::Silent => {
					let (leaked, missed) = Self::leak(pool_id, &p);
					Self::deposit_event(Event::InactivityLeaked {
						pool_id,
						round,
						who: p.who,
						leaked,
						missed,
					});
				},
				AtVoid::Unmatched => {
					// The snapshot is bounded by `MaxMembers`: nothing is cut.
					let _ = unmatched.try_push(p);
				},
			}
		}
		if !unmatched.is_empty() {
			UnmatchedCommits::<T>::insert((pool_id, round), unmatched);
		}
	}

	/// At the settlement of final `round` (before its snapshot is pruned): the participants
	/// whose payload the final checkpoint aggregated and that recorded no commit for the round
	/// ([`protocol::leak::at_settlement`]) are kept in [`UnmatchedCommits`] for their leak,
	/// decided in the next block (or a few later if its list is full) or, with no room, by
	/// [`Pallet::decide_unmatched_commits`]; their stake stays slashable until then.
	pub(crate) fn hold_silent_included(pool_id: PoolId, round: RoundIndex) {
		let (Some(fin), Some(params)) =
			(FinalCheckpoints::<T>::get(pool_id, round), T::Pools::round_params(pool_id))
		else {
			return;
		};
		let silent: Vec<Participant<T::AccountId>> = Snapshots::<T>::get((pool_id, round))
			.unwrap_or_default()
			.into_iter()
			.filter(|p| {
				protocol::leak::at_settlement(
					fin.included.contains(&p.index),
					Commits::<T>::contains_key((pool_id, round), &p.who),
				)
			})
			.collect();
		if silent.is_empty() {
			return;
		}
		let next = frame_system::Pallet::<T>::block_number().saturating_add(One::one());
		Self::schedule_leak_decision(pool_id, round, next, &params.timeline, &silent);
		// A snapshot's participants: never more than `MaxMembers`.
		UnmatchedCommits::<T>::insert((pool_id, round), BoundedVec::truncate_from(silent));
	}

	/// Schedules the decision on `round`'s [`UnmatchedCommits`] (`held`) in [`Deadlines`] at
	/// `from` (or a few blocks later if that block's list is full), before any extrinsic of the
	/// block, and keeps their stake slashable until then. With no room in any of those blocks,
	/// anyone decides them with `decide_unmatched_commits` from `from` on, while their stake is
	/// sure to be there: `round_timeout` blocks, and at least twice the blocks the queue may
	/// spill over plus 8 (members call after the spill).
	pub(crate) fn schedule_leak_decision(
		pool_id: PoolId,
		round: RoundIndex,
		from: BlockNumberFor<T>,
		timeline: &protocol::Timeline,
		held: &[Participant<T::AccountId>],
	) {
		let at = Self::schedule_deadline(from, pool_id, round).unwrap_or_else(|| {
			let spill = u64::from(T::MaxDeadlinesPerBlock::get());
			let grace = timeline.round_timeout.max(spill.saturating_mul(2).saturating_add(8));
			from.saturating_add(runtime_block::<T>(grace))
		});
		for p in held {
			T::Staking::keep_slashable(&p.who, block::<T>(at));
		}
	}

	/// Leaks participant `p` of a voided round (silent, or unmatched and not excused): slashes
	/// `InactivityLeak` of its snapshot stake, counts the missed round and drops it from the
	/// pool after `DropAfterMissed` in a row. Returns the planck slashed and the count.
	fn leak(pool_id: PoolId, p: &Participant<T::AccountId>) -> (T::Balance, u32) {
		let rule = LeakRule {
			penalty_ppb: T::InactivityLeak::get().deconstruct(),
			drop_after: T::DropAfterMissed::get(),
		};
		let (missed, drop) =
			rule.after_voided_round(MissedRounds::<T>::get(pool_id, &p.who), false);
		let leaked = T::Staking::slash(&p.who, rule.penalty(p.stake).saturated_into(), None);
		if drop {
			MissedRounds::<T>::remove(pool_id, &p.who);
			T::Pools::drop_member(pool_id, &p.who);
		} else {
			MissedRounds::<T>::insert(pool_id, &p.who, missed);
		}
		(leaked, missed)
	}

	/// Whether equivocation reports on `round` are still open at `now`: a voided round's
	/// snapshot is kept and not expired, or a final round is not settled yet (its snapshot is
	/// pruned at settlement).
	pub(crate) fn reports_open(pool_id: PoolId, round: RoundIndex, now: BlockNumberFor<T>) -> bool {
		KeptSnapshots::<T>::get(pool_id).iter().any(|(r, u)| *r == round && now < *u)
			|| (FinalCheckpoints::<T>::contains_key(pool_id, round)
				&& Snapshots::<T>::contains_key((pool_id, round)))
	}

	/// Decides `round`'s [`UnmatchedCommits`] (at its scheduled block, or by
	/// [`Pallet::decide_unmatched_commits`]) once its equivocation reports are closed: each is
	/// leaked as a silent participant is (its missed round counted now). A voided round's
	/// unmatched commits are excused if an equivocation was proved in the round; a final
	/// round's silent included members are not (an equivocator splits hashes, not silence).
	/// Nothing happens while reports are still open or when nothing is pending.
	pub(crate) fn leak_unmatched(pool_id: PoolId, round: RoundIndex, now: BlockNumberFor<T>) {
		if Self::reports_open(pool_id, round, now) {
			return;
		}
		let Some(unmatched) = UnmatchedCommits::<T>::take((pool_id, round)) else {
			return;
		};
		let fin = FinalCheckpoints::<T>::contains_key(pool_id, round);
		if !fin && T::Challenges::equivocation_proved(pool_id, round) {
			Self::deposit_event(Event::UnmatchedCommitsExcused { pool_id, round });
			return;
		}
		for p in unmatched {
			let (leaked, missed) = Self::leak(pool_id, &p);
			let who = p.who;
			Self::deposit_event(if fin {
				Event::SilentIncludedLeaked { pool_id, round, who, leaked, missed }
			} else {
				Event::UnmatchedCommitLeaked { pool_id, round, who, leaked, missed }
			});
		}
	}
}
