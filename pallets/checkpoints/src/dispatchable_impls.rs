//! `commit_checkpoint`.

use crate::{pallet::*, Event};
use frame_support::pallet_prelude::*;
use sp_runtime::traits::{CheckedAdd, Saturating};
use synod_primitives::{Hash32, PoolId, PoolStatus, PoolsInterface, RoundIndex};

impl<T: Config> Pallet<T> {
	pub(crate) fn do_commit(
		who: T::AccountId,
		pool_id: PoolId,
		round: RoundIndex,
		hash: Hash32,
		included: IncludedSet<T>,
	) -> DispatchResult {
		let params = T::Pools::round_params(pool_id).ok_or(Error::<T>::PoolNotFound)?;
		let member = T::Pools::member(pool_id, &who).ok_or(Error::<T>::NotMember)?;
		ensure!(member.from_round <= round, Error::<T>::NotYetMember);
		ensure!(
			!included.is_empty() && included.windows(2).all(|w| matches!(w, [a, b] if a < b)),
			Error::<T>::InvalidIncludedSet
		);
		ensure!(!Commits::<T>::contains_key((pool_id, round), &who), Error::<T>::AlreadyCommitted);

		// A final round: late contributors and divergent commits, within the challenge window.
		if let Some(mut fin) = FinalCheckpoints::<T>::get(pool_id, round) {
			let now = frame_system::Pallet::<T>::block_number();
			ensure!(
				now <= fin.finalized_at.saturating_add(params.challenge_window),
				Error::<T>::RoundClosed
			);
			Commits::<T>::insert((pool_id, round), &who, hash);
			Self::deposit_event(Event::CheckpointCommitted {
				pool_id,
				round,
				who: who.clone(),
				hash,
			});
			if fin.hash == hash && fin.included == included {
				if fin.included.contains(&member.index) && fin.contributors.try_push(who.clone()).is_ok() {
					FinalCheckpoints::<T>::insert(pool_id, round, fin);
					Self::deposit_event(Event::LateContributorAdded { pool_id, round, who });
				}
			} else {
				Self::record_divergent(pool_id, round, who, hash);
			}
			return Ok(());
		}
		ensure!(!Voided::<T>::contains_key(pool_id, round), Error::<T>::RoundClosed);
		ensure!(params.status == PoolStatus::Training, Error::<T>::PoolNotTraining);
		ensure!(round >= params.current_round, Error::<T>::RoundClosed);
		ensure!(round <= params.current_round.saturating_add(1), Error::<T>::RoundNotOpen);

		let mut candidates = Candidates::<T>::get((pool_id, round));
		match candidates.iter_mut().find(|c| c.hash == hash && c.included == included) {
			Some(c) => {
				c.stake = c.stake.checked_add(&member.stake).ok_or(Error::<T>::Overflow)?;
				c.committers.try_push(who.clone()).map_err(|_| Error::<T>::Overflow)?;
			},
			None => {
				let mut committers = BoundedVec::new();
				committers.try_push(who.clone()).map_err(|_| Error::<T>::Overflow)?;
				candidates
					.try_push(Candidate { hash, included, stake: member.stake, committers })
					.map_err(|_| Error::<T>::Overflow)?;
			},
		}
		Candidates::<T>::insert((pool_id, round), candidates);
		Commits::<T>::insert((pool_id, round), &who, hash);
		Self::deposit_event(Event::CheckpointCommitted { pool_id, round, who, hash });
		if round == params.current_round {
			Self::try_finalize(pool_id, round)?;
		}
		Ok(())
	}

	pub(crate) fn record_divergent(pool_id: PoolId, round: RoundIndex, who: T::AccountId, hash: Hash32) {
		// Bounded by MaxMembers: each member commits once per round.
		let _ = Divergent::<T>::try_mutate((pool_id, round), |d| d.try_push((who.clone(), hash)));
		Self::deposit_event(Event::DivergentCommit { pool_id, round, who, hash });
	}
}
