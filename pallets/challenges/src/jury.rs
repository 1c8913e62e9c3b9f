//! Juror registration and the jury draw.

use crate::{pallet::*, Event};
use alloc::vec::Vec;
use codec::Encode;
use frame_support::pallet_prelude::*;
use frame_system::pallet_prelude::BlockNumberFor;
use sp_runtime::traits::{One, Saturating};
use synod_primitives::{protocol, CheckpointsInspect, RandomnessAt, TrainerStake};

impl<T: Config> Pallet<T> {
	pub(crate) fn do_register_juror(who: T::AccountId) -> DispatchResult {
		let stake = T::Staking::active_stake(&who);
		ensure!(stake >= T::MinJurorStake::get(), Error::<T>::JurorStakeTooLow);
		let mut jurors = Jurors::<T>::get();
		ensure!(!jurors.contains(&who), Error::<T>::AlreadyJuror);
		if jurors.try_push(who.clone()).is_err() {
			// Full: the registered juror with the least stake gives way to one with more.
			let weakest = jurors
				.iter()
				.enumerate()
				.min_by_key(|(_, j)| T::Staking::active_stake(j))
				.map(|(i, j)| (i, j.clone(), T::Staking::active_stake(j)));
			let Some((i, out, out_stake)) = weakest else {
				return Err(Error::<T>::TooManyJurors.into());
			};
			ensure!(stake > out_stake, Error::<T>::TooManyJurors);
			if let Some(slot) = jurors.get_mut(i) {
				*slot = who.clone();
			}
			Self::deposit_event(Event::JurorRemoved { who: out });
		}
		Jurors::<T>::put(jurors);
		Self::deposit_event(Event::JurorRegistered { who });
		Ok(())
	}

	/// The accounts among `contributors` (a final checkpoint's) that are registered jurors
	/// now, in the contributors' order: a challenge's [`EligibleJurors`], frozen at opening.
	pub(crate) fn registered_among(
		contributors: &[protocol::Participant<T::AccountId>],
	) -> BoundedVec<T::AccountId, T::MaxPoolMembers> {
		let registered = Jurors::<T>::get();
		let eligible = contributors.iter().filter(|p| registered.contains(&p.who));
		BoundedVec::truncate_from(eligible.map(|p| p.who.clone()).collect())
	}

	/// The randomness of a draw at `draw_at`: that of block `draw_at − 1` ([`Config::Randomness`],
	/// its author's VRF), which did not exist when the challenge was opened; `None` once it is
	/// no longer kept (a caller must not be able to pick the seed by choosing when to draw).
	fn draw_seed(draw_at: BlockNumberFor<T>) -> Option<[u8; 32]> {
		T::Randomness::randomness_at(draw_at.saturating_sub(One::one()))
	}

	/// Draws the committee of `c`: `JurySize` seats, each drawn with replacement ∝ snapshot
	/// stake from the challenged round's contributors that were registered jurors when the
	/// challenge opened ([`EligibleJurors`]) — the accused and the challenger included, each
	/// with its stake — so the committee holds what a replay needs (θ_{r−1} and every included
	/// payload), its weights were fixed when the round opened and its members when the
	/// challenge did, both before the seed block existed. Returns the committee; an empty one
	/// if the seed is no longer kept.
	pub(crate) fn draw(id: ChallengeId, c: &Challenge<T>) -> JuryOf<T> {
		let Some(seed) = Self::draw_seed(c.draw_at) else {
			return BoundedVec::new();
		};
		let registered = EligibleJurors::<T>::get(id).unwrap_or_default();
		let eligible: Vec<(T::AccountId, u128)> =
			T::Checkpoints::final_checkpoint(c.pool_id, c.round)
				.map(|f| f.contributors)
				.unwrap_or_default()
				.into_iter()
				.filter(|p| registered.contains(&p.who))
				.map(|p| (p.who, p.stake))
				.collect();
		let jury = protocol::draw_committee(&eligible, T::JurySize::get(), |j| {
			Self::seat_randomness(seed, id, j)
		});
		BoundedVec::truncate_from(jury)
	}

	/// The 128 random bits of seat `seat` of challenge `id`'s committee: the first 16 bytes of
	/// `blake2_256(("synod/jury", seed, id, seat))`, little-endian, where `seed` is the
	/// randomness of the block before the draw.
	pub fn seat_randomness(seed: [u8; 32], id: ChallengeId, seat: u32) -> u128 {
		let h = sp_io::hashing::blake2_256(&(b"synod/jury", seed, id, seat).encode());
		let mut b = [0u8; 16];
		b.copy_from_slice(h.get(..16).unwrap_or(&[0u8; 16]));
		u128::from_le_bytes(b)
	}
}
