//! `try_state`: the invariants of open challenges, their bonds, votes, schedule and appeals.

use crate::pallet::*;
use crate::Dispute;
use frame_support::pallet_prelude::*;
use frame_system::pallet_prelude::BlockNumberFor;
use sp_runtime::traits::Saturating;
use synod_primitives::{CheckpointsInspect, PoolId, RoundIndex};

impl<T: Config> Pallet<T> {
	/// Invariants: each challenger's bond hold equals its open challenges' bonds; the seat
	/// tallies match the recorded votes; committees list each juror once with at least one
	/// seat, and their seats sum to the tally's; open counts match; every eligible juror of an
	/// open challenge contributed to the challenged round; only open challenges have a
	/// recorded [`Disputes`] entry, and it narrows the dispute to a valid part.
	pub fn do_try_state() -> Result<(), sp_runtime::TryRuntimeError> {
		use alloc::{collections::btree_map::BTreeMap, vec::Vec};
		use frame_support::traits::fungible::InspectHold;
		let mut bonds: BTreeMap<T::AccountId, BalanceOf<T>> = BTreeMap::new();
		let mut open: BTreeMap<(PoolId, RoundIndex, T::AccountId), u32> = BTreeMap::new();
		for (id, c) in OpenChallenges::<T>::iter() {
			let e = bonds.entry(c.challenger.clone()).or_default();
			*e = e.saturating_add(c.bond);
			let n = open.entry((c.pool_id, c.round, c.accused.clone())).or_default();
			*n = n.saturating_add(1);
			let (mut guilty, mut innocent) = (0u32, 0u32);
			for (juror, vote) in Votes::<T>::iter_prefix(id) {
				let seats = c
					.jury
					.iter()
					.find(|s| s.who == juror)
					.map(|s| s.seats)
					.ok_or("vote by a non-juror")?;
				if vote {
					guilty = guilty.saturating_add(seats);
				} else {
					innocent = innocent.saturating_add(seats);
				}
			}
			ensure!(
				guilty == c.votes.guilty && innocent == c.votes.innocent,
				"vote tallies differ from recorded votes"
			);
			let stage = Appeals::<T>::get(id).map_or(Stage::FirstVote, |a| a.stage());
			ensure!(
				c.votes.decided().is_none() || matches!(stage, Stage::Ruled | Stage::Appealed),
				"a decided challenge is still open without a ruling"
			);
			ensure!(
				c.jury.iter().all(|s| s.seats > 0)
					&& c.jury.iter().enumerate().all(|(i, s)| {
						c.jury.iter().skip(i.saturating_add(1)).all(|o| o.who != s.who)
					}),
				"a juror without a seat, or listed twice"
			);
			ensure!(
				!c.jury.is_empty()
					|| c.draw_at <= frame_system::Pallet::<T>::block_number()
					|| Expiries::<T>::get(c.draw_at).contains(&id),
				"an undrawn challenge's draw is not scheduled"
			);
			let seats = c.jury.iter().fold(0u32, |a, s| a.saturating_add(s.seats));
			ensure!(c.jury.is_empty() || seats == c.votes.seats, "committee seats differ");
		}
		let mut by: BTreeMap<(PoolId, RoundIndex, T::AccountId, T::AccountId), u32> =
			BTreeMap::new();
		for (_, c) in OpenChallenges::<T>::iter() {
			let n = by.entry((c.pool_id, c.round, c.accused, c.challenger)).or_default();
			*n = n.saturating_add(1);
		}
		for (key, n) in OpenBy::<T>::iter() {
			ensure!(by.get(&key) == Some(&n), "OpenBy differs from the open challenges");
		}
		ensure!(by.len() == OpenBy::<T>::iter().count(), "an open challenge holds no slot");
		// A contribution's share candidates are its earliest-opened open challenges, each with
		// its challenger, in opening order (a prefix of its open challenges by id); an empty
		// list is not stored.
		type Key<T> = (PoolId, RoundIndex, <T as frame_system::Config>::AccountId);
		type Opened<T> = Vec<(ChallengeId, <T as frame_system::Config>::AccountId)>;
		let mut opened: BTreeMap<Key<T>, Opened<T>> = BTreeMap::new();
		for (id, c) in OpenChallenges::<T>::iter() {
			opened
				.entry((c.pool_id, c.round, c.accused))
				.or_default()
				.push((id, c.challenger));
		}
		for (key, candidates) in ShareCandidates::<T>::iter() {
			ensure!(!candidates.is_empty(), "ShareCandidates stores an empty list");
			let mut open = opened.remove(&key).unwrap_or_default();
			open.sort_by_key(|(id, _)| *id);
			ensure!(
				open.get(..candidates.len()) == Some(&candidates[..]),
				"ShareCandidates is not the earliest-opened open challenges"
			);
		}
		for (key, n) in OpenAgainst::<T>::iter() {
			ensure!(open.get(&key) == Some(&n), "open-challenge count differs");
		}
		ensure!(open.len() == OpenAgainst::<T>::iter().count(), "open challenge without a count");
		for (who, bond) in bonds {
			ensure!(
				T::Currency::balance_on_hold(&Self::bond_reason(), &who) == bond,
				"bond hold differs from open challenges"
			);
		}
		Self::appeals_try_state()?;
		Self::schedule_try_state()?;
		for (id, eligible) in EligibleJurors::<T>::iter() {
			let c = OpenChallenges::<T>::get(id).ok_or("eligible jurors of a closed challenge")?;
			let contributors = T::Checkpoints::final_checkpoint(c.pool_id, c.round)
				.map(|f| f.contributors)
				.unwrap_or_default();
			ensure!(
				eligible.iter().all(|j| contributors.iter().any(|p| p.who == *j)),
				"an eligible juror that did not contribute to the round"
			);
		}
		for (id, dispute) in Disputes::<T>::iter() {
			ensure!(OpenChallenges::<T>::contains_key(id), "the dispute of a closed challenge");
			ensure!(
				dispute != Dispute::Phase && dispute.is_valid(),
				"a recorded dispute that narrows nothing, or names no segment a trace can have"
			);
		}
		Ok(())
	}

	/// Invariants of the schedule: a block to come holds only open challenges, each of which
	/// records it in [`ScheduledAt`] (so that closing frees it); only open challenges have an
	/// entry there; [`PoolSlots`] counts each block's entries by pool (no zero counts).
	fn schedule_try_state() -> Result<(), sp_runtime::TryRuntimeError> {
		use alloc::collections::btree_map::BTreeMap;
		let now = frame_system::Pallet::<T>::block_number();
		let mut counted: BTreeMap<(BlockNumberFor<T>, PoolId), u32> = BTreeMap::new();
		for (at, ids) in Expiries::<T>::iter().filter(|(at, _)| *at > now) {
			for id in ids {
				let c = OpenChallenges::<T>::get(id).ok_or("a closed challenge holds a slot")?;
				ensure!(
					ScheduledAt::<T>::get(id).contains(&at),
					"a slot missing from its challenge's ScheduledAt"
				);
				let n = counted.entry((at, c.pool_id)).or_default();
				*n = n.saturating_add(1);
			}
		}
		let mut slots = 0usize;
		for (at, pool, n) in PoolSlots::<T>::iter().filter(|(at, _, _)| *at > now) {
			ensure!(counted.get(&(at, pool)) == Some(&n), "PoolSlots differs from the schedule");
			slots = slots.saturating_add(1);
		}
		ensure!(counted.len() == slots, "a pool's entries in a block are not counted");
		for id in ScheduledAt::<T>::iter_keys() {
			ensure!(OpenChallenges::<T>::contains_key(id), "ScheduledAt of a closed challenge");
		}
		Ok(())
	}
}
