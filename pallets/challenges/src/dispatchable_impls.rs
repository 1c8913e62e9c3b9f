//! Opening, voting, verdicts, expiry, jury selection and `try_state`.

use crate::{pallet::*, Event};
use alloc::vec::Vec;
use codec::Encode;
use frame_support::{
	pallet_prelude::*,
	traits::{
		fungible::{BalancedHold, MutateHold},
		tokens::{Imbalance, Precision},
		OnUnbalanced,
	},
};
use sp_runtime::traits::Saturating;
use synod_primitives::{
	ChallengesInspect, CheckpointsInspect, Hash32, PoolId, PoolsInterface, RoundIndex,
	TrainerStake,
};

impl<T: Config> Pallet<T> {
	fn bond_reason() -> T::RuntimeHoldReason {
		HoldReason::ChallengeBond.into()
	}

	/// The jury for `accused` in a round whose final hash is `final_hash`: eligible members
	/// ranked by `blake2_256(final_hash ‖ accused ‖ member)`, lowest first.
	pub fn select_jury(
		pool_id: PoolId,
		round: RoundIndex,
		final_hash: &Hash32,
		accused: &T::AccountId,
		challenger: &T::AccountId,
	) -> BoundedVec<T::AccountId, T::JurySize> {
		let mut ranked: Vec<([u8; 32], T::AccountId)> = T::Pools::members(pool_id)
			.into_iter()
			.filter(|m| m.from_round <= round && &m.who != accused && &m.who != challenger)
			.map(|m| {
				let key = sp_io::hashing::blake2_256(&(final_hash, accused, &m.who).encode());
				(key, m.who)
			})
			.collect();
		ranked.sort_by_key(|(key, _)| *key);
		BoundedVec::truncate_from(ranked.into_iter().map(|(_, who)| who).collect())
	}

	pub(crate) fn do_open_challenge(
		challenger: T::AccountId,
		pool_id: PoolId,
		round: RoundIndex,
		accused: T::AccountId,
		payload_digest: Hash32,
	) -> DispatchResult {
		let params = T::Pools::round_params(pool_id).ok_or(Error::<T>::PoolNotFound)?;
		let fin = T::Checkpoints::final_checkpoint(pool_id, round).ok_or(Error::<T>::RoundNotFinal)?;
		let now = frame_system::Pallet::<T>::block_number();
		ensure!(
			now <= fin.finalized_at.saturating_add(params.challenge_window),
			Error::<T>::ChallengeWindowClosed
		);
		ensure!(fin.contributors.contains(&accused), Error::<T>::NotAContributor);
		ensure!(challenger != accused, Error::<T>::SelfChallenge);
		let key = (pool_id, round, accused.clone());
		ensure!(!ChallengeOf::<T>::contains_key(&key), Error::<T>::AlreadyChallenged);
		let jury = Self::select_jury(pool_id, round, &fin.hash, &accused, &challenger);
		ensure!(!jury.is_empty(), Error::<T>::NoJurors);
		let challenge_id = NextChallengeId::<T>::get();
		let next = challenge_id.checked_add(1).ok_or(Error::<T>::Overflow)?;
		let expires_at = now.saturating_add(T::VotingPeriod::get());
		Expiries::<T>::try_mutate(expires_at, |e| e.try_push(challenge_id))
			.map_err(|_| Error::<T>::TooManyChallenges)?;
		let bond = T::ChallengeBond::get();
		T::Currency::hold(&Self::bond_reason(), &challenger, bond)
			.map_err(|_| Error::<T>::InsufficientBond)?;
		OpenChallenges::<T>::insert(
			challenge_id,
			Challenge {
				pool_id,
				round,
				accused: accused.clone(),
				challenger: challenger.clone(),
				bond,
				payload_digest,
				jury: jury.clone(),
				guilty_votes: 0,
				innocent_votes: 0,
				expires_at,
			},
		);
		ChallengeOf::<T>::insert(&key, challenge_id);
		NextChallengeId::<T>::put(next);
		Self::deposit_event(Event::ChallengeOpened {
			challenge_id,
			pool_id,
			round,
			accused,
			challenger,
			jury,
		});
		Ok(())
	}

	pub(crate) fn do_vote(juror: T::AccountId, challenge_id: ChallengeId, guilty: bool) -> DispatchResult {
		let mut c = OpenChallenges::<T>::get(challenge_id).ok_or(Error::<T>::ChallengeNotFound)?;
		ensure!(c.jury.contains(&juror), Error::<T>::NotJuror);
		ensure!(!Votes::<T>::contains_key(challenge_id, &juror), Error::<T>::AlreadyVoted);
		Votes::<T>::insert(challenge_id, &juror, guilty);
		if guilty {
			c.guilty_votes = c.guilty_votes.saturating_add(1);
		} else {
			c.innocent_votes = c.innocent_votes.saturating_add(1);
		}
		Self::deposit_event(Event::Voted { challenge_id, juror, guilty });
		let size = c.jury.len() as u32;
		let majority = (size / 2).saturating_add(1);
		if c.guilty_votes >= majority {
			Self::convict(challenge_id, c);
		} else if c.innocent_votes > size.saturating_sub(majority) {
			Self::acquit(challenge_id, c);
		} else {
			OpenChallenges::<T>::insert(challenge_id, c);
		}
		Ok(())
	}

	fn close(challenge_id: ChallengeId, c: &Challenge<T>, verdict: Verdict) {
		OpenChallenges::<T>::remove(challenge_id);
		let _ = Votes::<T>::clear_prefix(challenge_id, T::JurySize::get(), None);
		Verdicts::<T>::insert((c.pool_id, c.round, c.accused.clone()), verdict);
	}

	fn convict(challenge_id: ChallengeId, c: Challenge<T>) {
		let stake = T::Pools::member(c.pool_id, &c.accused)
			.map(|m| m.stake)
			.unwrap_or_else(|| T::Staking::active_stake(&c.accused));
		let slashed = T::Staking::slash(
			&c.accused,
			T::SlashFraction::get().mul_floor(stake),
			Some((&c.challenger, T::ChallengerShare::get())),
		);
		let _ = T::Currency::release(&Self::bond_reason(), &c.challenger, c.bond, Precision::BestEffort);
		Self::close(challenge_id, &c, Verdict::Guilty);
		Self::deposit_event(Event::AccusedFoundGuilty { challenge_id, accused: c.accused, slashed });
	}

	fn acquit(challenge_id: ChallengeId, c: Challenge<T>) {
		let (credit, _) = <T::Currency as BalancedHold<T::AccountId>>::slash(
			&Self::bond_reason(),
			&c.challenger,
			c.bond,
		);
		let bond_slashed = credit.peek();
		T::Slash::on_unbalanced(credit);
		Self::close(challenge_id, &c, Verdict::Innocent);
		Self::deposit_event(Event::AccusedFoundInnocent {
			challenge_id,
			accused: c.accused,
			bond_slashed,
		});
	}

	pub(crate) fn expire(challenge_id: ChallengeId) {
		let Some(c) = OpenChallenges::<T>::get(challenge_id) else { return };
		let _ = T::Currency::release(&Self::bond_reason(), &c.challenger, c.bond, Precision::BestEffort);
		Self::close(challenge_id, &c, Verdict::Expired);
		Self::deposit_event(Event::ChallengeExpired { challenge_id });
	}

	/// Invariants: each challenger's bond hold equals its open challenges' bonds; vote counts
	/// match the recorded votes; juries exclude the parties; each open challenge is scheduled to
	/// expire.
	pub fn do_try_state() -> Result<(), sp_runtime::TryRuntimeError> {
		use alloc::collections::btree_map::BTreeMap;
		use frame_support::traits::fungible::InspectHold;
		let mut bonds: BTreeMap<T::AccountId, BalanceOf<T>> = BTreeMap::new();
		for (id, c) in OpenChallenges::<T>::iter() {
			let e = bonds.entry(c.challenger.clone()).or_default();
			*e = e.saturating_add(c.bond);
			let votes: Vec<bool> = Votes::<T>::iter_prefix_values(id).collect();
			ensure!(
				votes.iter().filter(|g| **g).count() as u32 == c.guilty_votes &&
					votes.iter().filter(|g| !**g).count() as u32 == c.innocent_votes,
				"vote counts differ from recorded votes"
			);
			ensure!(
				!c.jury.contains(&c.accused) && !c.jury.contains(&c.challenger),
				"a party sits on its own jury"
			);
			ensure!(Expiries::<T>::get(c.expires_at).contains(&id), "open challenge never expires");
		}
		for (who, bond) in bonds {
			ensure!(
				T::Currency::balance_on_hold(&Self::bond_reason(), &who) == bond,
				"bond hold differs from open challenges"
			);
		}
		Ok(())
	}
}

impl<T: Config> ChallengesInspect<T::AccountId> for Pallet<T> {
	fn is_guilty(pool: PoolId, round: RoundIndex, who: &T::AccountId) -> bool {
		Verdicts::<T>::get((pool, round, who.clone())) == Some(Verdict::Guilty)
	}
}

