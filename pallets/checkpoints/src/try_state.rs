//! The pallet's invariants, checked after every test and by `try-runtime`.

use crate::pallet::*;
use alloc::vec::Vec;
use frame_support::pallet_prelude::*;
use sp_runtime::traits::SaturatedConversion;
use synod_primitives::{protocol, PoolId, PoolsInterface, RoundIndex};

impl<T: Config> Pallet<T> {
	/// Invariants: every final checkpoint held quorum (rounded up) of its snapshot, its
	/// contributors are snapshot participants that committed its hash, its parent is the
	/// previous final hash; open rounds have a snapshot whose stake is their `round_stake`,
	/// candidates only of its participants, an agreed set (only while open) of its
	/// participants, and a scheduled deadline when they say so; kept
	/// snapshots are of voided rounds, in round order, and exist; unmatched commits are of
	/// kept rounds' participants; a commit ahead of a round is a current member's, and a round
	/// holds at most `MaxMembers` commits.
	pub fn do_try_state() -> Result<(), sp_runtime::TryRuntimeError> {
		for (pool_id, round, fin) in FinalCheckpoints::<T>::iter() {
			let params =
				T::Pools::round_params(pool_id).ok_or("final checkpoint of unknown pool")?;
			ensure!(
				protocol::reaches_quorum(
					fin.committed_stake.saturated_into(),
					fin.round_stake.saturated_into(),
					params.quorum.deconstruct()
				),
				"final checkpoint without quorum"
			);
			// Until the round is settled and pruned.
			if let Some(snapshot) = Snapshots::<T>::get((pool_id, round)) {
				for who in fin.contributors.iter() {
					ensure!(
						Commits::<T>::get((pool_id, round), who)
							.is_some_and(|c| c.hash == fin.hash),
						"contributor did not commit the final hash"
					);
					ensure!(
						protocol::snapshot::find(&snapshot, who).is_some(),
						"contributor outside the round's snapshot"
					);
				}
			}
			// A pool being reaped has lost `LastFinal` first; its chain is deleted in key order.
			let reaping = params.status.has_ended() && !LastFinal::<T>::contains_key(pool_id);
			let previous = (1..round)
				.rev()
				.find_map(|r| FinalCheckpoints::<T>::get(pool_id, r).map(|f| f.hash))
				.unwrap_or(params.initial_checkpoint);
			ensure!(reaping || fin.parent == previous, "parent is not the previous final hash");
			ensure!(!Voided::<T>::contains_key(pool_id, round), "round both final and voided");
		}
		// A commit ahead of a round that has not opened is a current member's (a member's is
		// forgotten when its membership ends), and no round holds more commits than members.
		let mut per_round: alloc::collections::BTreeMap<(PoolId, RoundIndex), u32> =
			Default::default();
		for ((pool_id, round), who, _) in Commits::<T>::iter() {
			let n = per_round.entry((pool_id, round)).or_default();
			*n = n.saturating_add(1);
			ensure!(*n <= T::MaxMembers::get(), "more commits in a round than members");
			let ahead = T::Pools::round_params(pool_id)
				.is_some_and(|p| !p.status.has_ended() && round > p.current_round);
			ensure!(
				!ahead || T::Pools::member(pool_id, &who).is_some(),
				"a former member's commit ahead of a round"
			);
		}
		for (pool_id, open) in OpenRounds::<T>::iter() {
			let snapshot =
				Snapshots::<T>::get((pool_id, open.round)).ok_or("open round without snapshot")?;
			ensure!(
				protocol::snapshot::total_stake(&snapshot)
					== open.round_stake.saturated_into::<u128>(),
				"round_stake differs from the snapshot"
			);
			for c in Candidates::<T>::get((pool_id, open.round)).iter() {
				let stake = snapshot
					.iter()
					.filter(|p| c.committers.contains(&p.index))
					.fold(0u128, |a, p| a.saturating_add(p.stake));
				ensure!(
					c.committers.iter().all(|i| snapshot.iter().any(|p| p.index == *i)),
					"candidate committer outside the snapshot"
				);
				ensure!(
					stake == c.stake.saturated_into::<u128>(),
					"candidate stake differs from its committers'"
				);
			}
			// Each participant backs at most one candidate: the one equal to its commit.
			for p in snapshot.iter() {
				let backed: Vec<_> = Candidates::<T>::get((pool_id, open.round))
					.into_iter()
					.filter(|c| c.committers.contains(&p.index))
					.collect();
				ensure!(backed.len() <= 1, "a participant backs two candidates");
				if let Some(c) = backed.first() {
					ensure!(
						Commits::<T>::get((pool_id, open.round), &p.who)
							.is_some_and(|r| r.hash == c.hash && r.included == c.included),
						"a candidate's committer committed something else"
					);
				}
			}
			if let Some(AgreedSet { included: agreed, fixed_at }) =
				AgreedSets::<T>::get((pool_id, open.round))
			{
				ensure!(
					open.opened_at <= fixed_at && fixed_at < open.deadline,
					"agreed set fixed outside its round's commit period"
				);
				ensure!(
					protocol::tally::is_valid_included_set(&agreed)
						&& agreed.iter().all(|i| snapshot.iter().any(|p| p.index == *i)),
					"agreed set not an included set of snapshot participants"
				);
			}
			if let Some(at) = open.scheduled_at {
				ensure!(
					at >= open.deadline && Deadlines::<T>::get(at).contains(&(pool_id, open.round)),
					"open round's deadline is not scheduled where it says"
				);
			}
		}
		for ((pool_id, round), _) in AgreedSets::<T>::iter() {
			ensure!(
				OpenRounds::<T>::get(pool_id).is_some_and(|o| o.round == round),
				"agreed set of a round that is not open"
			);
		}
		for ((pool_id, round), _) in Snapshots::<T>::iter() {
			if Voided::<T>::contains_key(pool_id, round) {
				ensure!(
					KeptSnapshots::<T>::get(pool_id).iter().any(|(r, _)| *r == round),
					"snapshot of a voided round outside the kept list"
				);
			}
		}
		for ((pool_id, round), unmatched) in UnmatchedCommits::<T>::iter() {
			ensure!(
				Voided::<T>::contains_key(pool_id, round)
					|| (FinalCheckpoints::<T>::contains_key(pool_id, round)
						&& !Snapshots::<T>::contains_key((pool_id, round))),
				"unmatched commits of a round neither voided nor final and settled"
			);
			if let Some(snapshot) = Snapshots::<T>::get((pool_id, round)) {
				ensure!(
					unmatched.iter().all(|p| snapshot.contains(p)),
					"unmatched committer outside the voided round's snapshot"
				);
			}
		}
		for (pool_id, kept) in KeptSnapshots::<T>::iter() {
			ensure!(
				kept.windows(2).all(|w| matches!(w, [a, b] if a.0 < b.0)),
				"kept snapshots out of round order"
			);
			for (round, _) in kept.iter() {
				ensure!(
					Voided::<T>::contains_key(pool_id, round),
					"kept snapshot of a round not voided"
				);
				ensure!(Snapshots::<T>::contains_key((pool_id, *round)), "kept snapshot missing");
			}
		}
		Ok(())
	}
}
