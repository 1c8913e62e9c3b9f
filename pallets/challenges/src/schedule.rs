//! The schedule ([`Expiries`], [`ScheduledAt`], [`PoolSlots`]): the blocks in whose
//! `on_initialize` each open challenge's next step is due, bounded per block and per pool in a
//! block, reserved when a challenge opens and freed when it closes.

use crate::dispatchable_impls::block;
use crate::pallet::*;
use frame_support::pallet_prelude::*;
use frame_system::pallet_prelude::BlockNumberFor;
use sp_runtime::traits::SaturatedConversion;
use synod_primitives::{protocol, PoolId};

/// A new challenge's blocks: its draw, the end of its voting period, and its expiry's block.
pub(crate) type ScheduledBlocks<T> = (BlockNumberFor<T>, BlockNumberFor<T>, BlockNumberFor<T>);

impl<T: Config> Pallet<T> {
	/// The first block of `blocks` whose schedule ([`Expiries`]) has room for a challenge of
	/// `pool`, if any.
	pub(crate) fn free_block(
		blocks: impl Iterator<Item = protocol::Block>,
		pool: PoolId,
	) -> Option<BlockNumberFor<T>> {
		blocks.map(|b| b.saturated_into()).find(|at| Self::has_room(*at, pool))
	}

	/// Whether block `at`'s schedule ([`Expiries`]) holds fewer than `MaxExpiriesPerBlock`
	/// entries, of which fewer than `MaxExpiriesPerPool` of `pool`'s challenges
	/// ([`PoolSlots`]).
	pub(crate) fn has_room(at: BlockNumberFor<T>, pool: PoolId) -> bool {
		Expiries::<T>::decode_len(at).unwrap_or(0) < T::MaxExpiriesPerBlock::get() as usize
			&& PoolSlots::<T>::get(at, pool) < T::MaxExpiriesPerPool::get()
	}

	/// The blocks of a challenge opened at `now` with `timeline`: its draw, the end of its
	/// voting period, and the block whose `on_initialize` expires it. The draw is block
	/// `jury_drawn_at(now)` (`jury_delay` blocks after opening), never earlier: its seed, the
	/// randomness of the block before it, chains the VRF outputs of every block after `now`, and
	/// the runtime's `jury_delay` exceeds its number of block authors, so one of those blocks is
	/// an honest author's and nobody can compute the committee when the challenge is included
	/// (a draw that fillers could pull earlier would be seeded by blocks that the colluding
	/// authors of the opening block and the next ones produce). The voting period is the whole
	/// `voting_period` from the draw; the expiry is the first block from there to
	/// `votes_until(now)` with room. Both stay within the pool's timeline, so every challenge
	/// is over before its round settles.
	///
	/// # Errors
	/// [`Error::ScheduleFull`] if the draw block or every block of the expiry's span is full:
	/// the challenge is refused rather than opened without a scheduled draw or expiry (which
	/// anyone could then advance at a time of its choosing) or with an earlier draw.
	pub(crate) fn schedule_blocks(
		now: BlockNumberFor<T>,
		timeline: &protocol::Timeline,
		pool: PoolId,
	) -> Result<ScheduledBlocks<T>, Error<T>> {
		let now = block::<T>(now);
		let draw_at: BlockNumberFor<T> = timeline.jury_drawn_at(now).saturated_into();
		ensure!(Self::has_room(draw_at, pool), Error::<T>::ScheduleFull);
		let expires_at = block::<T>(draw_at).saturating_add(timeline.voting_period);
		let expiry_at =
			Self::free_block(expires_at..=timeline.votes_until(now).max(expires_at), pool)
				.ok_or(Error::<T>::ScheduleFull)?;
		Ok((draw_at, expires_at.saturated_into(), expiry_at))
	}

	/// Adds `id`, a challenge of `pool`, to the schedule of block `at` (checked to have room by
	/// the caller: a draw and its expiry never share a block, the voting period being at least
	/// one block), counts it in [`PoolSlots`] and records `at` in [`ScheduledAt`], so that
	/// closing `id` frees the slot.
	pub(crate) fn schedule(at: BlockNumberFor<T>, id: ChallengeId, pool: PoolId) {
		if Expiries::<T>::try_mutate(at, |e| e.try_push(id)).is_ok() {
			PoolSlots::<T>::mutate(at, pool, |n| *n = n.saturating_add(1));
			ScheduledAt::<T>::mutate(id, |s| {
				if s.try_push(at).is_err() {
					frame_support::defensive!("scheduled in more than MAX_SCHEDULED blocks");
				}
			});
		}
	}

	/// Weight of one [`Self::schedule`] beyond the block's schedule that a benchmark measured:
	/// the challenge's [`ScheduledAt`] record, the pool's [`PoolSlots`] count, and the schedule
	/// itself where the search found room (an appeal committee's draw scheduling the end of its
	/// vote).
	pub(crate) fn schedule_weight() -> Weight {
		T::DbWeight::get().reads_writes(3, 3)
	}

	/// Frees every slot `id`, a challenge of `pool`, holds in the schedule of a block after the
	/// current one: a closed challenge has nothing due there, and a slot it kept would deny
	/// another challenge that block for nothing. (The current block's schedule was taken by
	/// its `on_initialize`.)
	pub(crate) fn unschedule(id: ChallengeId, pool: PoolId) {
		let now = frame_system::Pallet::<T>::block_number();
		for at in ScheduledAt::<T>::take(id).into_iter().filter(|at| *at > now) {
			// A ruling's execution moved early may share a block with the challenge's expiry:
			// every entry of `id` there goes, and is uncounted.
			let mut removed = 0u32;
			Expiries::<T>::mutate_exists(at, |e| {
				if let Some(ids) = e {
					let before = ids.len();
					ids.retain(|x| *x != id);
					removed = before.saturating_sub(ids.len()) as u32;
					if ids.is_empty() {
						*e = None;
					}
				}
			});
			if removed > 0 {
				PoolSlots::<T>::mutate_exists(at, pool, |n| {
					*n = n.map(|n| n.saturating_sub(removed)).filter(|n| *n > 0);
				});
			}
		}
	}

	/// Takes block `n`'s schedule ([`Expiries`]) and deletes its [`PoolSlots`] counts (at most
	/// [`crate::MAX_SCHEDULED_PER_BLOCK`], one per pool scheduled in it).
	pub(crate) fn take_schedule(
		n: BlockNumberFor<T>,
	) -> BoundedVec<ChallengeId, ConstU32<{ crate::MAX_SCHEDULED_PER_BLOCK }>> {
		let _ = PoolSlots::<T>::clear_prefix(n, crate::MAX_SCHEDULED_PER_BLOCK, None);
		Expiries::<T>::take(n)
	}
}
