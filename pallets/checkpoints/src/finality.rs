//! Opening rounds, quorum finality, voiding, and the interfaces other pallets use.

use crate::{pallet::*, Event};
use alloc::vec::Vec;
use frame_support::pallet_prelude::*;
use frame_system::pallet_prelude::BlockNumberFor;
use sp_runtime::traits::{One, Saturating, Zero};
use synod_primitives::{
	CheckpointsInspect, FinalView, OnRoundFinalized, OnTrainingStarted, PoolId, PoolsInterface,
	RoundIndex,
};

impl<T: Config> Pallet<T> {
	/// Opens `round` of `pool_id`: freezes its stake, schedules its deadline and counts commits
	/// that arrived early. Then closes rounds for as long as they are final at once.
	pub(crate) fn start_round(pool_id: PoolId, round: RoundIndex) -> DispatchResult {
		let Some(params) = T::Pools::round_params(pool_id) else { return Ok(()) };
		let round_stake = T::Pools::members(pool_id)
			.iter()
			.filter(|m| m.from_round <= round)
			.fold(T::Balance::zero(), |acc, m| acc.saturating_add(m.stake));
		let now = frame_system::Pallet::<T>::block_number();
		let deadline = Self::schedule_deadline(
			now.saturating_add(params.round_timeout),
			pool_id,
			round,
		);
		OpenRounds::<T>::insert(pool_id, OpenRound { round, opened_at: now, deadline, round_stake });
		Self::deposit_event(Event::RoundOpened { pool_id, round, deadline, round_stake });
		Self::try_finalize(pool_id, round)
	}

	/// Puts `(pool, round)` in the first block from `at` whose deadline list has room.
	fn schedule_deadline(
		mut at: BlockNumberFor<T>,
		pool_id: PoolId,
		round: RoundIndex,
	) -> BlockNumberFor<T> {
		for _ in 0..T::MaxDeadlinesPerBlock::get().max(1) {
			if Deadlines::<T>::try_mutate(at, |d| d.try_push((pool_id, round))).is_ok() {
				return at;
			}
			at = at.saturating_add(One::one());
		}
		at
	}

	/// Makes `round` final if a candidate reached quorum; then closes it and opens the next.
	pub(crate) fn try_finalize(pool_id: PoolId, round: RoundIndex) -> DispatchResult {
		let (Some(open), Some(params)) =
			(OpenRounds::<T>::get(pool_id), T::Pools::round_params(pool_id))
		else {
			return Ok(());
		};
		if open.round != round {
			return Ok(());
		}
		let threshold = params.quorum.mul_floor(open.round_stake);
		let candidates = Candidates::<T>::get((pool_id, round));
		let Some(winner) =
			candidates.iter().find(|c| !c.stake.is_zero() && c.stake >= threshold).cloned()
		else {
			return Ok(());
		};
		let parent = LastFinal::<T>::get(pool_id)
			.map(|(_, h)| h)
			.unwrap_or(params.initial_checkpoint);
		let contributors: Vec<T::AccountId> = winner
			.committers
			.iter()
			.filter(|who| {
				T::Pools::member(pool_id, who).is_some_and(|m| winner.included.contains(&m.index))
			})
			.cloned()
			.collect();
		let contributors = BoundedVec::truncate_from(contributors);
		let now = frame_system::Pallet::<T>::block_number();
		for c in candidates.iter().filter(|c| c.hash != winner.hash || c.included != winner.included) {
			for who in c.committers.iter() {
				Self::record_divergent(pool_id, round, who.clone(), c.hash);
			}
		}
		FinalCheckpoints::<T>::insert(
			pool_id,
			round,
			FinalCheckpoint {
				hash: winner.hash,
				parent,
				included: winner.included.clone(),
				contributors: contributors.clone(),
				finalized_at: now,
				committed_stake: winner.stake,
				round_stake: open.round_stake,
			},
		);
		LastFinal::<T>::insert(pool_id, (round, winner.hash));
		Candidates::<T>::remove((pool_id, round));
		Self::deposit_event(Event::CheckpointFinalized {
			pool_id,
			round,
			hash: winner.hash,
			parent,
			contributors,
		});
		T::OnRoundFinalized::round_finalized(pool_id, round, now)?;
		Self::close(pool_id, round)
	}

	/// Closes `round` in the pools pallet and opens the next one, if any.
	fn close(pool_id: PoolId, round: RoundIndex) -> DispatchResult {
		OpenRounds::<T>::remove(pool_id);
		match T::Pools::close_round(pool_id, round) {
			Some(next) if next > round => Self::start_round(pool_id, next),
			_ => Ok(()),
		}
	}

	/// Voids `round` if it is still the open, non-final round of `pool_id`.
	pub(crate) fn void_if_open(pool_id: PoolId, round: RoundIndex, now: BlockNumberFor<T>) {
		let is_open = OpenRounds::<T>::get(pool_id).is_some_and(|o| o.round == round);
		if !is_open || FinalCheckpoints::<T>::contains_key(pool_id, round) {
			return;
		}
		Voided::<T>::insert(pool_id, round, now);
		Candidates::<T>::remove((pool_id, round));
		Self::deposit_event(Event::RoundVoided { pool_id, round });
		// Closing can only fail through `OnRoundFinalized` of a later round finalizing at
		// once; that round then stays open and is voided at its own deadline.
		let _ = Self::close(pool_id, round);
	}

	/// Invariants: every final checkpoint held quorum, its contributors are committers of its
	/// hash, its parent is the previous final hash; open rounds have a scheduled deadline.
	pub fn do_try_state() -> Result<(), sp_runtime::TryRuntimeError> {
		for (pool_id, round, fin) in FinalCheckpoints::<T>::iter() {
			let params = T::Pools::round_params(pool_id).ok_or("final checkpoint of unknown pool")?;
			ensure!(
				!fin.committed_stake.is_zero() &&
					fin.committed_stake >= params.quorum.mul_floor(fin.round_stake),
				"final checkpoint without quorum"
			);
			for who in fin.contributors.iter() {
				ensure!(
					Commits::<T>::get((pool_id, round), who) == Some(fin.hash),
					"contributor did not commit the final hash"
				);
			}
			let previous = (1..round)
				.rev()
				.find_map(|r| FinalCheckpoints::<T>::get(pool_id, r).map(|f| f.hash))
				.unwrap_or(params.initial_checkpoint);
			ensure!(fin.parent == previous, "parent is not the previous final hash");
			ensure!(!Voided::<T>::contains_key(pool_id, round), "round both final and voided");
		}
		for (pool_id, open) in OpenRounds::<T>::iter() {
			ensure!(
				Deadlines::<T>::get(open.deadline).contains(&(pool_id, open.round)),
				"open round without a deadline"
			);
		}
		Ok(())
	}
}

impl<T: Config> OnTrainingStarted for Pallet<T> {
	fn training_started(pool: PoolId) {
		// Round 1 has no commits yet, so opening it cannot finalize anything.
		let _ = Self::start_round(pool, 1);
	}
}

impl<T: Config> CheckpointsInspect<T::AccountId, BlockNumberFor<T>> for Pallet<T> {
	fn final_checkpoint(
		pool: PoolId,
		round: RoundIndex,
	) -> Option<FinalView<T::AccountId, BlockNumberFor<T>>> {
		FinalCheckpoints::<T>::get(pool, round).map(|f| FinalView {
			hash: f.hash,
			finalized_at: f.finalized_at,
			contributors: f.contributors.into_inner(),
		})
	}
}
