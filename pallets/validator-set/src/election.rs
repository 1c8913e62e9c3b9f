//! The election rule, as pure functions of the candidates' stakes, and the
//! [`pallet_session::SessionManager`] that applies it at every session rotation.

use crate::{pallet::*, DEFAULT_SESSION_LENGTH};
use alloc::vec::Vec;
use frame_support::{
	pallet_prelude::*,
	traits::{ValidatorRegistration, ValidatorSet},
};
use frame_system::pallet_prelude::BlockNumberFor;
use pallet_session::SessionManager;
use sp_runtime::traits::Zero;
/// Index of a session (`sp_staking::SessionIndex`).
type SessionIndex = u32;
use synod_primitives::TrainerStake;

/// Elects at most `max` validators from `candidates` (account, active stake in planck): those
/// with at least `min_bond`, the largest stakes first (ties: the smaller account id), returned
/// with their stakes, ordered by account id so that the authority order does not change with
/// stake alone.
pub fn elect_with_stakes<AccountId: Ord + Clone, Balance: Ord + Copy>(
	candidates: &[(AccountId, Balance)],
	max: usize,
	min_bond: Balance,
) -> Vec<(AccountId, Balance)> {
	let mut eligible: Vec<(AccountId, Balance)> =
		candidates.iter().filter(|(_, stake)| *stake >= min_bond).cloned().collect();
	eligible.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
	eligible.truncate(max);
	eligible.sort_by(|a, b| a.0.cmp(&b.0));
	eligible.dedup_by(|a, b| a.0 == b.0);
	eligible
}

/// The accounts of [`elect_with_stakes`].
pub fn elect<AccountId: Ord + Clone, Balance: Ord + Copy>(
	candidates: &[(AccountId, Balance)],
	max: usize,
	min_bond: Balance,
) -> Vec<AccountId> {
	elect_with_stakes(candidates, max, min_bond)
		.into_iter()
		.map(|(who, _)| who)
		.collect()
}

/// Index and stake of the candidate with the least stake (ties: the latest arrival, so that
/// earlier candidates keep their place); `None` for an empty list.
pub fn weakest<AccountId, Balance: Ord + Copy>(
	candidates: &[AccountId],
	stake_of: impl Fn(&AccountId) -> Balance,
) -> Option<(usize, Balance)> {
	candidates
		.iter()
		.enumerate()
		.map(|(i, c)| (i, stake_of(c)))
		.min_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
}

impl<T: Config> Pallet<T> {
	/// Drops the candidates that lost their keys or minimum bond, and elects the set for
	/// `session` with each validator's active stake (planck) at election; `None` (and
	/// [`Event::ValidatorSetKept`]) when nobody is eligible.
	///
	/// Cost: one stake read and one keys read per candidate (≤ `MaxCandidates`), one sort.
	pub fn elect_for(session: SessionIndex) -> Option<BoundedVec<Elected<T>, T::MaxValidators>> {
		let min = T::MinValidatorBond::get();
		let mut kept = BoundedVec::<T::AccountId, T::MaxCandidates>::new();
		let mut staked = Vec::new();
		for who in Candidates::<T>::get() {
			let stake = T::Staking::active_stake(&who);
			let reason = if stake < min {
				Some(DropReason::BelowMinBond)
			} else if !T::SessionKeys::is_registered(&who) {
				Some(DropReason::NoSessionKeys)
			} else {
				None
			};
			match reason {
				Some(reason) => Self::deposit_event(Event::CandidateDropped { who, reason }),
				None => {
					staked.push((who.clone(), stake));
					// Cannot fail: a subset of a list with the same bound.
					let _ = kept.try_push(who);
				},
			}
		}
		Candidates::<T>::put(kept);
		let max = T::MaxValidators::get() as usize;
		let elected = elect_with_stakes(&staked, max, min);
		if elected.is_empty() {
			Self::deposit_event(Event::ValidatorSetKept { session });
			return None;
		}
		Some(BoundedVec::truncate_from(elected))
	}

	/// Stake of `who` that backs validation, in planck: the stake it was elected with if it is
	/// in the active or queued set, at least `MinValidatorBond` if it is a candidate or a
	/// validator of the current session; zero otherwise.
	pub fn validating_stake(who: &T::AccountId) -> T::Balance {
		let elected = Active::<T>::get()
			.into_iter()
			.chain(Queued::<T>::get())
			.filter(|(v, _)| v == who)
			.map(|(_, stake)| stake)
			.max()
			.unwrap_or_default();
		let seated =
			Candidates::<T>::get().contains(who) || T::SessionKeys::validators().contains(who);
		if seated {
			elected.max(T::MinValidatorBond::get())
		} else {
			elected
		}
	}
}

impl<T: Config> SessionManager<T::AccountId> for Pallet<T> {
	/// The set for session `new_index`; `None` keeps the current set (nobody eligible, or the
	/// same accounts elected again: no authority-set change for GRANDPA).
	fn new_session(new_index: SessionIndex) -> Option<Vec<T::AccountId>> {
		let Some(elected) = Self::elect_for(new_index) else {
			Queued::<T>::put(Active::<T>::get());
			return None;
		};
		Queued::<T>::put(elected.clone());
		let accounts: Vec<T::AccountId> = elected.into_iter().map(|(v, _)| v).collect();
		let mut current = T::SessionKeys::validators();
		current.sort();
		if current == accounts {
			return None;
		}
		Self::deposit_event(Event::ValidatorsElected {
			session: new_index,
			validators: BoundedVec::truncate_from(accounts.clone()),
		});
		Some(accounts)
	}

	/// The genesis validators are `pallet-session`'s genesis keys.
	fn new_session_genesis(_: SessionIndex) -> Option<Vec<T::AccountId>> {
		None
	}

	fn start_session(_: SessionIndex) {
		Active::<T>::put(Queued::<T>::get());
	}

	fn end_session(_: SessionIndex) {}
}

/// Sessions rotate every [`SessionLength`] blocks (block 0 starts session 0):
/// `pallet_session::PeriodicSessions<SessionLengthOf<Runtime>, ConstU32<0>>`.
pub struct SessionLengthOf<T>(PhantomData<T>);

impl<T: Config> Get<BlockNumberFor<T>> for SessionLengthOf<T> {
	fn get() -> BlockNumberFor<T> {
		let length = SessionLength::<T>::get();
		if length.is_zero() {
			// Not reachable after genesis; never divide by zero.
			BlockNumberFor::<T>::from(DEFAULT_SESSION_LENGTH)
		} else {
			length
		}
	}
}

impl<T: Config> Pallet<T> {
	/// Checks the bounds and uniqueness of the candidate list and the session length.
	pub fn do_try_state() -> Result<(), sp_runtime::TryRuntimeError> {
		let list = Candidates::<T>::get();
		let mut sorted: Vec<_> = list.iter().collect();
		sorted.sort();
		sorted.dedup();
		ensure!(sorted.len() == list.len(), "duplicate candidate");
		ensure!(!SessionLength::<T>::get().is_zero(), "zero session length");
		let active = Active::<T>::get();
		let mut a: Vec<_> = active.iter().map(|(v, _)| v).collect();
		a.sort();
		a.dedup();
		ensure!(a.len() == active.len(), "duplicate active validator");
		Ok(())
	}
}
