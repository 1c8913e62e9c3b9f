//! Equivocation: two payloads signed by one member for one round, proved on-chain by the two
//! signed announcements and slashed at once, without a jury.

use crate::{pallet::*, Event};
use frame_support::pallet_prelude::*;
use sp_runtime::traits::SaturatedConversion;
use synod_primitives::{
	protocol, CheckpointsInspect, PoolId, PoolsInterface, RoundIndex, TrainerStake,
};

impl<T: Config> Pallet<T> {
	pub(crate) fn do_report_equivocation(
		reporter: T::AccountId,
		pool_id: PoolId,
		round: RoundIndex,
		accused: T::AccountId,
		first: &[u8],
		second: &[u8],
	) -> DispatchResult {
		T::Pools::round_params(pool_id).ok_or(Error::<T>::PoolNotFound)?;
		// The snapshot says which registration signed for this round and what stake backed it
		// (kept slashable by Checkpoints until the round's last challenge is over).
		let participant = T::Checkpoints::participant(pool_id, round, &accused)
			.ok_or(Error::<T>::NotAParticipant)?;
		ensure!(reporter != accused, Error::<T>::SelfChallenge);
		let offence = (pool_id, round, accused.clone());
		// One offence, one slash: a second pair of the same round slashes nothing more.
		ensure!(!Equivocations::<T>::contains_key(&offence), Error::<T>::AlreadyReported);
		let key = T::Pools::member_key(pool_id, participant.index, &accused)
			.ok_or(Error::<T>::AccusedKeyUnknown)?;
		let (a, b) = protocol::verify_equivocation(first, second, &key.ml_dsa_key)
			.map_err(Self::evidence_error)?;
		// Both name the same contribution (`verify_equivocation`): check it is this one.
		Self::check_context(&a, pool_id, round, participant.index, &key)?;
		let amount = T::SlashFraction::get().mul_floor(participant.stake);
		let slashed = T::Staking::slash(
			&accused,
			amount.saturated_into(),
			Some((&reporter, T::ChallengerShare::get())),
		);
		Equivocations::<T>::insert(&offence, (a.payload.digest, b.payload.digest));
		Self::deposit_event(Event::EquivocationSlashed {
			pool_id,
			round,
			accused,
			reporter,
			digests: (a.payload.digest, b.payload.digest),
			slashed,
		});
		Ok(())
	}
}
