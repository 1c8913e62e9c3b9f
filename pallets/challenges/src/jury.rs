//! Opting in and out of juries, the eligible jurors, the jury draw and the draws and expiries
//! due in a block.

use crate::{pallet::*, Event, WeightInfo};
use alloc::vec::Vec;
use codec::Encode;
use frame_support::pallet_prelude::*;
use frame_system::pallet_prelude::BlockNumberFor;
use sp_runtime::traits::{One, Saturating, Zero};
use synod_primitives::{protocol, CheckpointsInspect, RandomnessAt, TrainerStake};

impl<T: Config> Pallet<T> {
	pub(crate) fn do_register_juror(who: T::AccountId) -> DispatchResult {
		ensure!(!T::Staking::active_stake(&who).is_zero(), Error::<T>::NotBonded);
		ensure!(OptedOut::<T>::take(&who).is_some(), Error::<T>::AlreadyJuror);
		Self::deposit_event(Event::JurorOptedIn { who });
		Ok(())
	}

	pub(crate) fn do_unregister_juror(who: T::AccountId) -> DispatchResult {
		// Stake that is unbonding is still slashable and seated for the rounds it backed: its
		// owner may still opt out of challenges opened from now on.
		ensure!(!T::Staking::held_stake(&who).is_zero(), Error::<T>::NotBonded);
		ensure!(!OptedOut::<T>::contains_key(&who), Error::<T>::NotAJuror);
		Self::opt_out(who);
		Ok(())
	}

	/// Records that `who` is no longer seated on challenges opened from now on.
	pub(crate) fn opt_out(who: T::AccountId) {
		OptedOut::<T>::insert(&who, ());
		Self::deposit_event(Event::JurorOptedOut { who });
	}

	/// The jurors eligible for a challenge of round `round` of `pool_id` whose final checkpoint
	/// lists `contributors`, in the contributors' order: those that have not opted out
	/// ([`OptedOut`], read now) and can replay the round (contributors of round `round − 1`
	/// when that round is final; [`protocol::eligible_jurors`]). A challenge's
	/// [`EligibleJurors`], frozen at opening.
	pub(crate) fn eligible_among(
		pool_id: synod_primitives::PoolId,
		round: synod_primitives::RoundIndex,
		contributors: &[protocol::Participant<T::AccountId>],
	) -> BoundedVec<T::AccountId, T::MaxPoolMembers> {
		// A final round has contributors: none read means its snapshot is no longer kept (it
		// was settled), and the rule is not applied rather than seat nobody.
		let previous = round
			.checked_sub(1)
			.and_then(|r| T::Checkpoints::final_checkpoint(pool_id, r))
			.map(|f| f.contributors)
			.filter(|c| !c.is_empty());
		let eligible = protocol::eligible_jurors(contributors, previous.as_deref(), |who| {
			OptedOut::<T>::contains_key(who)
		});
		BoundedVec::truncate_from(eligible.map(|p| p.who.clone()).collect())
	}

	/// The randomness of a draw at `draw_at`: that of block `draw_at − 1` ([`Config::Randomness`],
	/// its author's VRF), which did not exist when the challenge was opened; `None` once it is
	/// no longer kept (a caller must not be able to pick the seed by choosing when to draw).
	fn draw_seed(draw_at: BlockNumberFor<T>) -> Option<[u8; 32]> {
		T::Randomness::randomness_at(draw_at.saturating_sub(One::one()))
	}

	/// Draws the committee of `c`: `seats` seats (`JurySize`, or `AppealJurySize` for an appeal),
	/// each drawn with replacement ∝ snapshot
	/// stake from the challenged round's contributors that were eligible when the challenge
	/// opened ([`EligibleJurors`]) — the accused and the challenger included, each
	/// with its stake — so the committee holds what a replay needs (θ_{r−1} and every included
	/// payload), its weights were fixed when the round opened and its members when the
	/// challenge did, both before the seed block existed. Returns the committee; an empty one
	/// if the seed is no longer kept.
	pub(crate) fn draw(id: ChallengeId, c: &Challenge<T>, seats: u32) -> JuryOf<T> {
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
		let jury =
			protocol::draw_committee(&eligible, seats, |j| Self::seat_randomness(seed, id, j));
		BoundedVec::truncate_from(jury)
	}

	/// `on_initialize` of block `n`: draws or expires every challenge scheduled at `n`
	/// ([`Expiries`]). Returns the weight used.
	pub(crate) fn advance_due(n: BlockNumberFor<T>) -> Weight {
		let due = Self::take_schedule(n);
		let count = due.len() as u32;
		for id in due {
			Self::advance(id, n);
		}
		Self::due_weight(count)
	}

	/// The most weight `on_initialize` takes for `count` items due in its block. The draws of
	/// first committees are what `on_initialize_expire(count)` measures; besides, each item does
	/// one of: an expiry (the end of a vote), a ruling's execution (a verdict, bounded by
	/// `vote`'s worst case: the appeal committee's deciding vote) or an appeal committee's draw
	/// (a draw is scheduled before the end of its committee's vote, so one block never does both
	/// for one item), plus what closing a challenge touches beyond those, the no-shows'
	/// records ([`Self::no_show_weight`]) and the scheduling of a later block
	/// ([`Self::schedule_weight`]).
	pub fn due_weight(count: u32) -> Weight {
		let item = T::WeightInfo::expire()
			.max(T::WeightInfo::vote())
			.max(T::WeightInfo::draw_appeal())
			.saturating_add(Self::close_weight())
			.saturating_add(Self::no_show_weight())
			.saturating_add(Self::schedule_weight());
		T::WeightInfo::on_initialize_expire(count).saturating_add(item.saturating_mul(count.into()))
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
