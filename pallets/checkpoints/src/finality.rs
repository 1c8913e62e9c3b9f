//! Opening rounds (snapshot), quorum finality, voiding (the leak itself is `leak.rs`), and the
//! interfaces other pallets use. The rules themselves are `synod_primitives::protocol`'s.

use crate::{pallet::*, weights::WeightInfo, Event};
use alloc::vec::Vec;
use frame_support::{pallet_prelude::*, storage::with_storage_layer};
use frame_system::pallet_prelude::BlockNumberFor;
use sp_runtime::traits::{One, SaturatedConversion, Saturating};
use synod_primitives::{
	protocol::{self, Action, Fact, RoundState, Timeline},
	CheckpointsInspect, FinalView, MemberIndex, OnMemberLeft, OnRoundFinalized, OnTrainingStarted,
	Participant, PoolId, PoolStatus, PoolsInterface, RoundIndex, RoundParams, TrainerStake,
};

/// A block number as the protocol crate's `u64`.
pub(crate) fn block<T: Config>(n: BlockNumberFor<T>) -> protocol::Block {
	n.saturated_into()
}

/// A protocol block number as the runtime's.
pub(crate) fn runtime_block<T: Config>(n: protocol::Block) -> BlockNumberFor<T> {
	n.saturated_into()
}

impl<T: Config> Pallet<T> {
	/// The protocol's state machine of the open round `open` of a pool with `params`, at block
	/// `now`: finality and voiding are its decisions ([`protocol::round`]).
	pub(crate) fn round_state(
		open: &OpenRound<T::Balance, BlockNumberFor<T>>,
		params: &RoundParams<T::AccountId, T::Balance>,
		now: BlockNumberFor<T>,
	) -> RoundState {
		let mut state = RoundState::open(
			params.timeline,
			params.quorum.deconstruct(),
			block::<T>(open.opened_at),
			open.round_stake.saturated_into(),
		);
		state.step(Fact::Block(block::<T>(now)));
		state
	}

	/// Opens `round` of `pool_id`: freezes its snapshot, keeps the participants' stake slashable
	/// until the round's last challenge is over, counts the participants' early commits,
	/// schedules the deadline. Then closes rounds for as long as they are final at once.
	pub(crate) fn start_round(pool_id: PoolId, round: RoundIndex) -> DispatchResult {
		let Some(params) = T::Pools::round_params(pool_id) else {
			return Ok(());
		};
		let timeline: Timeline = params.timeline;
		// Members are bounded by `MaxMembers`, so nothing is cut.
		let snapshot: SnapshotOf<T> =
			BoundedVec::truncate_from(protocol::snapshot(T::Pools::member_states(pool_id), round));
		let round_stake: T::Balance = protocol::snapshot::total_stake(&snapshot).saturated_into();
		let now = frame_system::Pallet::<T>::block_number();
		let deadline_u64 = timeline.deadline(block::<T>(now));
		let deadline = runtime_block::<T>(deadline_u64);
		for p in snapshot.iter() {
			T::Staking::keep_slashable(&p.who, timeline.slashable_until(deadline_u64));
		}
		let tallied = protocol::tally(&snapshot, |p| Commits::<T>::get((pool_id, round), &p.who));
		let mut candidates: BoundedVec<Candidate<T>, T::MaxMembers> = BoundedVec::new();
		for t in tallied {
			candidates
				.try_push(Candidate {
					hash: t.commit.hash,
					included: t.commit.included,
					stake: t.stake.saturated_into(),
					committers: BoundedVec::truncate_from(t.committers),
				})
				.map_err(|_| Error::<T>::Overflow)?;
		}
		Candidates::<T>::insert((pool_id, round), candidates);
		Snapshots::<T>::insert((pool_id, round), snapshot);
		let scheduled_at = Self::schedule_deadline(deadline, pool_id, round);
		OpenRounds::<T>::insert(
			pool_id,
			OpenRound { round, opened_at: now, deadline, round_stake, scheduled_at },
		);
		Self::deposit_event(Event::RoundOpened { pool_id, round, deadline, round_stake });
		Self::try_finalize(pool_id, round)
	}

	/// Puts `(pool, round)` in the first block from `at` (of `MaxDeadlinesPerBlock` blocks)
	/// whose deadline list has room; `None` if all are full (the round is then voided lazily).
	pub(crate) fn schedule_deadline(
		mut at: BlockNumberFor<T>,
		pool_id: PoolId,
		round: RoundIndex,
	) -> Option<BlockNumberFor<T>> {
		for _ in 0..T::MaxDeadlinesPerBlock::get().max(1) {
			if Deadlines::<T>::try_mutate(at, |d| d.try_push((pool_id, round))).is_ok() {
				return Some(at);
			}
			at = at.saturating_add(One::one());
		}
		None
	}

	/// Makes `round` final if a candidate reached quorum of the snapshot (rounded up); then
	/// closes it and opens the next.
	pub(crate) fn try_finalize(pool_id: PoolId, round: RoundIndex) -> DispatchResult {
		let (Some(open), Some(params)) =
			(OpenRounds::<T>::get(pool_id), T::Pools::round_params(pool_id))
		else {
			return Ok(());
		};
		if open.round != round {
			return Ok(());
		}
		let total: u128 = open.round_stake.saturated_into();
		let quorum = params.quorum.deconstruct();
		let candidates = Candidates::<T>::get((pool_id, round));
		let now = frame_system::Pallet::<T>::block_number();
		let mut state = Self::round_state(&open, &params, now);
		let Some(winner) = candidates
			.iter()
			.enumerate()
			.find_map(|(i, c)| {
				let fact = Fact::Supported {
					candidate: i as u32,
					hash: c.hash,
					stake: c.stake.saturated_into(),
				};
				state.step(fact).into_iter().find_map(|a| match a {
					Action::Finalize { candidate, .. } => candidates.get(candidate as usize),
					_ => None,
				})
			})
			.cloned()
		else {
			Self::agree_if_split(pool_id, round, total, quorum, &candidates);
			return Ok(());
		};
		let snapshot = Snapshots::<T>::get((pool_id, round)).unwrap_or_default();
		let parent = LastFinal::<T>::get(pool_id)
			.map(|(_, h)| h)
			.unwrap_or(params.initial_checkpoint);
		let contributors: Vec<T::AccountId> =
			protocol::contributors(&snapshot, &winner.committers, &winner.included)
				.into_iter()
				.map(|p| p.who)
				.collect();
		for who in contributors.iter() {
			MissedRounds::<T>::remove(pool_id, who);
		}
		let contributors = BoundedVec::truncate_from(contributors);
		for c in candidates
			.iter()
			.filter(|c| c.hash != winner.hash || c.included != winner.included)
		{
			for p in snapshot.iter().filter(|p| c.committers.contains(&p.index)) {
				Self::record_divergent(pool_id, round, p.who.clone(), c.hash);
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
		AgreedSets::<T>::remove((pool_id, round));
		// Its deadline slot is free again for other pools.
		if let Some(at) = open.scheduled_at {
			Deadlines::<T>::mutate(at, |d| d.retain(|e| *e != (pool_id, round)));
		}
		Self::deposit_event(Event::CheckpointFinalized {
			pool_id,
			round,
			hash: winner.hash,
			parent,
			contributors,
		});
		T::OnRoundFinalized::round_finalized(pool_id, round, now);
		Self::close(pool_id, round)
	}

	/// Fixes the agreed included set of open `round` if its commits split
	/// ([`protocol::agreement::split_included_set`]): once, with [`Event::IncludedSetAgreed`].
	fn agree_if_split(
		pool_id: PoolId,
		round: RoundIndex,
		total: u128,
		quorum: u32,
		candidates: &[Candidate<T>],
	) {
		if AgreedSets::<T>::contains_key((pool_id, round)) {
			return;
		}
		let snapshot = Snapshots::<T>::get((pool_id, round)).unwrap_or_default();
		let participants: Vec<MemberIndex> = snapshot.iter().map(|p| p.index).collect();
		let support: Vec<(&[MemberIndex], u128)> = candidates
			.iter()
			.map(|c| (c.included.as_slice(), c.stake.saturated_into()))
			.collect();
		let Some(agreed) =
			protocol::agreement::split_included_set(total, &participants, &support, quorum)
		else {
			return;
		};
		// Snapshot indices only: never more than `MaxMembers`.
		let included: IncludedSet<T> = BoundedVec::truncate_from(agreed);
		let fixed_at = frame_system::Pallet::<T>::block_number();
		AgreedSets::<T>::insert(
			(pool_id, round),
			AgreedSet { included: included.clone(), fixed_at },
		);
		Self::deposit_event(Event::IncludedSetAgreed { pool_id, round, included });
	}

	/// Closes `round` in the pools pallet and opens the next one, if any.
	fn close(pool_id: PoolId, round: RoundIndex) -> DispatchResult {
		OpenRounds::<T>::remove(pool_id);
		match T::Pools::close_round(pool_id, round) {
			Some(next) if next > round => Self::start_round(pool_id, next),
			_ => Ok(()),
		}
	}

	/// [`Self::void_if_open`], with the weight it takes beyond the void benchmarks
	/// (`on_initialize_void` and `void_expired_round`, whose pools go on to their next round,
	/// and their `_dropping` kinds, whose pools end: the end measured there is charged again
	/// here): the reads of the pool's status around it and, when the void closed the pool's last round, the pool's end at its
	/// member count (`PoolsInterface::end_weight`) and the read of that count.
	pub(crate) fn void_and_end(
		pool_id: PoolId,
		round: RoundIndex,
		now: BlockNumberFor<T>,
	) -> (DispatchResult, Weight) {
		let training =
			|| T::Pools::round_params(pool_id).is_some_and(|p| p.status == PoolStatus::Training);
		let before = training();
		let result = Self::void_if_open(pool_id, round, now);
		let reads = T::DbWeight::get().reads(2);
		if before && !training() {
			let members = T::Pools::member_count(pool_id);
			let end = T::Pools::end_weight(members).saturating_add(T::DbWeight::get().reads(1));
			(result, reads.saturating_add(end))
		} else {
			(result, reads)
		}
	}

	/// The most [`Self::void_and_end`] adds to a void: the end of a `MaxMembers` pool.
	pub fn max_void_end_weight() -> Weight {
		T::DbWeight::get()
			.reads(3)
			.saturating_add(T::Pools::end_weight(T::MaxMembers::get()))
	}

	/// Voids `round` if it is still the open, non-final round of `pool_id`, applies the
	/// inactivity leak to its silent participants, and opens the next round. Runs in its own
	/// storage layer: on error nothing of it remains.
	pub(crate) fn void_if_open(
		pool_id: PoolId,
		round: RoundIndex,
		now: BlockNumberFor<T>,
	) -> DispatchResult {
		with_storage_layer(|| {
			let Some(open) = OpenRounds::<T>::get(pool_id).filter(|o| o.round == round) else {
				return Ok(());
			};
			// Only a round whose deadline has passed is voided (the protocol's rule).
			let params = T::Pools::round_params(pool_id);
			let due = params
				.as_ref()
				.is_none_or(|p| Self::round_state(&open, p, now).status().is_voided());
			if !due {
				return Ok(());
			}
			if FinalCheckpoints::<T>::contains_key(pool_id, round) {
				return Ok(());
			}
			Voided::<T>::insert(pool_id, round, now);
			let candidates = Candidates::<T>::take((pool_id, round));
			// Judged against only if it left the committers of other sets time to commit over it.
			// (A pool whose parameters are gone judges with the runtime's whole period.)
			let agreed = AgreedSets::<T>::take((pool_id, round)).filter(|a| match &params {
				Some(p) => a.in_time(open.deadline, &p.timeline),
				None => synod_primitives::protocol::leak::agreed_in_time(
					block::<T>(a.fixed_at),
					block::<T>(open.deadline),
					block::<T>(T::RecommitPeriod::get()),
				),
			});
			Self::deposit_event(Event::RoundVoided { pool_id, round });
			Self::leak_inactive(
				pool_id,
				round,
				open.round_stake,
				&candidates,
				agreed.as_ref().map(|a| &a.included),
			);
			Self::prune_commits(pool_id, round);
			Self::keep_voided_snapshot(pool_id, round, open.deadline, now);
			Self::close(pool_id, round)
		})
	}

	/// Keeps voided `round`'s snapshot until its stake stops being slashable (the block
	/// `Timeline::slashable_until(deadline)`, excluded), so that an equivocation in it can still
	/// be reported, and schedules the decision on its [`UnmatchedCommits`] for that block; first
	/// deletes at most two kept snapshots of the pool: expired ones, or the oldest if
	/// [`KEPT_VOIDED_SNAPSHOTS`](crate::KEPT_VOIDED_SNAPSHOTS) are kept.
	fn keep_voided_snapshot(
		pool_id: PoolId,
		round: RoundIndex,
		deadline: BlockNumberFor<T>,
		now: BlockNumberFor<T>,
	) {
		let Some(params) = T::Pools::round_params(pool_id) else {
			Snapshots::<T>::remove((pool_id, round));
			UnmatchedCommits::<T>::remove((pool_id, round));
			return;
		};
		let until = runtime_block::<T>(params.timeline.slashable_until(block::<T>(deadline)));
		let mut kept = KeptSnapshots::<T>::get(pool_id);
		let mut closed = Vec::new();
		for _ in 0..2 {
			let expired = kept.first().is_some_and(|(_, u)| *u <= now);
			if !expired && !kept.is_full() {
				break;
			}
			closed.push(kept.remove(0));
		}
		let keeps = kept.try_push((round, until)).is_ok();
		KeptSnapshots::<T>::insert(pool_id, kept);
		for (old, old_until) in closed {
			// Its unmatched commits, if still undecided, stay (they hold their participants
			// and stake): decided at their scheduled block or by `decide_unmatched_commits`.
			// Unless its reports were still open (a kept list full early, which the pool's
			// spec rules out): without the snapshot an equivocation that would excuse them
			// can no longer be proved, so they are not judged.
			if old_until > now {
				UnmatchedCommits::<T>::remove((pool_id, old));
			}
			Snapshots::<T>::remove((pool_id, old));
		}
		if !keeps {
			Snapshots::<T>::remove((pool_id, round));
			UnmatchedCommits::<T>::remove((pool_id, round));
			return;
		}
		let Some(unmatched) = UnmatchedCommits::<T>::get((pool_id, round)) else {
			return;
		};
		// Decided at `until`, when the round's equivocation reports close, or in the next block
		// if they closed already (a round voided lazily that late): a list of a block whose
		// `on_initialize` has run is never read again.
		let at = until.max(now.saturating_add(One::one()));
		Self::schedule_leak_decision(pool_id, round, at, &params.timeline, &unmatched);
	}

	/// The snapshot of `round` while something can still be charged against it: an open round's,
	/// a final round's until it is settled, a voided round's while its stake is slashable.
	pub(crate) fn live_snapshot(pool_id: PoolId, round: RoundIndex) -> Option<SnapshotOf<T>> {
		let snapshot = Snapshots::<T>::get((pool_id, round))?;
		if Voided::<T>::contains_key(pool_id, round) {
			let now = frame_system::Pallet::<T>::block_number();
			let kept = KeptSnapshots::<T>::get(pool_id);
			// From `until` on, the stake may be withdrawn (`TrainerStake::keep_slashable`).
			if !kept.iter().any(|(r, until)| *r == round && now < *until) {
				return None;
			}
		}
		Some(snapshot)
	}

	/// Removes a settled round's per-member records (snapshot, commits, divergent commits):
	/// nothing can challenge it any more. The final record ([`FinalCheckpoints`]) stays: it is
	/// the checkpoint chain.
	pub(crate) fn prune(pool_id: PoolId, round: RoundIndex) {
		Snapshots::<T>::remove((pool_id, round));
		Self::prune_commits(pool_id, round);
	}

	/// Removes a closed round's commits and divergent commits.
	fn prune_commits(pool_id: PoolId, round: RoundIndex) {
		Divergent::<T>::remove((pool_id, round));
		// Commits of the members the round opened with only (a member's commit ahead is
		// forgotten when its membership ends, `OnMemberLeft`): at most `MaxMembers`, within the
		// limit.
		let _ = Commits::<T>::clear_prefix(
			(pool_id, round),
			T::MaxMembers::get().saturating_mul(4),
			None,
		);
	}
}

/// A pool's records here: its open round (in use while it exists) and its round history —
/// the last final hash, voided rounds' kept snapshots, final checkpoints, voided rounds,
/// missed-round counts and commits made ahead for a round that never opened — deleted when the
/// pool is reaped. `LastFinal` goes
/// first: a pool without it whose final checkpoints remain is being reaped (`try_state` no
/// longer checks their parent chain, which is deleted in key order).
impl<T: Config> synod_primitives::PoolRecords for Pallet<T> {
	fn in_use(pool: PoolId) -> bool {
		OpenRounds::<T>::contains_key(pool)
	}

	fn clear(pool: PoolId, limit: u32) -> (u32, bool) {
		// The round after the last one: members may have committed to it ahead of time.
		let unopened = T::Pools::round_params(pool)
			.map(|p| p.current_round.saturating_add(1))
			.unwrap_or(0);
		// Nothing deleted beyond the limit (the reap's weight counts `limit` records).
		if limit == 0 {
			return (0, !LastFinal::<T>::contains_key(pool) && !Self::has_history(pool, unopened));
		}
		let mut removed = u32::from(LastFinal::<T>::take(pool).is_some());
		// Each step deletes up to its limit and returns (records deleted, whether none are left).
		let steps: [&dyn Fn(u32) -> (u32, bool); 5] = [
			&|l| {
				// Voided rounds' kept snapshots: one record each (the list itself goes last).
				let mut kept = KeptSnapshots::<T>::get(pool);
				let n = (l as usize).min(kept.len());
				for (round, _) in kept.drain(..n) {
					Snapshots::<T>::remove((pool, round));
				}
				let none_left = kept.is_empty();
				if none_left {
					KeptSnapshots::<T>::remove(pool);
				} else {
					KeptSnapshots::<T>::insert(pool, kept);
				}
				(n as u32, none_left)
			},
			&|l| {
				// Each final round with its undecided silent included members, if any: two
				// writes.
				let rounds: Vec<RoundIndex> =
					FinalCheckpoints::<T>::iter_key_prefix(pool).take(l as usize).collect();
				for round in rounds.iter() {
					FinalCheckpoints::<T>::remove(pool, round);
					UnmatchedCommits::<T>::remove((pool, *round));
				}
				(rounds.len() as u32, FinalCheckpoints::<T>::iter_key_prefix(pool).next().is_none())
			},
			&|l| {
				// Each voided round with its undecided unmatched commits, if any: two writes.
				let rounds: Vec<RoundIndex> =
					Voided::<T>::iter_key_prefix(pool).take(l as usize).collect();
				for round in rounds.iter() {
					Voided::<T>::remove(pool, round);
					UnmatchedCommits::<T>::remove((pool, *round));
				}
				(rounds.len() as u32, Voided::<T>::iter_key_prefix(pool).next().is_none())
			},
			&|l| {
				let r = MissedRounds::<T>::clear_prefix(pool, l, None);
				(r.unique, r.maybe_cursor.is_none())
			},
			&|l| {
				let r = Commits::<T>::clear_prefix((pool, unopened), l, None);
				(r.unique, r.maybe_cursor.is_none())
			},
		];
		for step in steps {
			let left = limit.saturating_sub(removed);
			if left == 0 {
				return (removed, !Self::has_history(pool, unopened));
			}
			let (n, none_left) = step(left);
			removed = removed.saturating_add(n);
			if !none_left {
				return (removed, false);
			}
		}
		(removed, true)
	}

	fn clear_weight(limit: u32) -> Weight {
		// Per record: the key read by the prefix iteration and its deletion; plus LastFinal,
		// the kept-snapshot list, the pool's parameters and the emptiness checks.
		// A voided or final round's record also deletes its unmatched commits or silent
		// included members: two writes.
		T::DbWeight::get().reads_writes(
			u64::from(limit).saturating_add(7),
			u64::from(limit).saturating_mul(2).saturating_add(2),
		)
	}
}

impl<T: Config> Pallet<T> {
	/// First block in which `pool_id`'s open round accepts commits (`Timeline::commits_from`
	/// its opening: `min_round_length` blocks after it), or `None` without an open round.
	pub fn commits_from(pool_id: PoolId) -> Option<BlockNumberFor<T>> {
		let open = OpenRounds::<T>::get(pool_id)?;
		let timeline = T::Pools::round_params(pool_id)?.timeline;
		Some(runtime_block::<T>(timeline.commits_from(block::<T>(open.opened_at))))
	}

	/// Whether any of `pool`'s round history is left (`unopened`: the round after its last).
	fn has_history(pool: PoolId, unopened: RoundIndex) -> bool {
		KeptSnapshots::<T>::contains_key(pool)
			|| FinalCheckpoints::<T>::iter_prefix(pool).next().is_some()
			|| Voided::<T>::iter_prefix(pool).next().is_some()
			|| MissedRounds::<T>::iter_prefix(pool).next().is_some()
			|| Commits::<T>::iter_prefix((pool, unopened)).next().is_some()
	}
}

impl<T: Config> synod_primitives::OnRoundSettled for Pallet<T> {
	fn round_settled(pool: PoolId, round: RoundIndex) {
		Self::hold_silent_included(pool, round);
		Self::prune(pool, round);
	}

	/// Benchmarked on its worst path ([`crate::weights::WeightInfo::round_settled`]).
	fn weight() -> Weight {
		T::WeightInfo::round_settled()
	}
}

impl<T: Config> OnTrainingStarted for Pallet<T> {
	fn training_started(pool: PoolId) {
		// Round 1 has only early commits of its own snapshot; opening it cannot fail.
		let _ = Self::start_round(pool, 1);
	}
}

impl<T: Config> OnMemberLeft<T::AccountId> for Pallet<T> {
	fn member_left(pool: PoolId, who: &T::AccountId, current: RoundIndex) {
		// The only round a member commits ahead of is the next one; no snapshot of it can
		// count a former member (commits of rounds it was a participant of stay).
		Commits::<T>::remove((pool, current.saturating_add(1)), who);
	}

	fn weight() -> Weight {
		T::DbWeight::get().writes(1)
	}
}

impl<T: Config> CheckpointsInspect<T::AccountId, BlockNumberFor<T>> for Pallet<T> {
	fn final_checkpoint(
		pool: PoolId,
		round: RoundIndex,
	) -> Option<FinalView<T::AccountId, BlockNumberFor<T>>> {
		let fin = FinalCheckpoints::<T>::get(pool, round)?;
		let mut included: Vec<Participant<T::AccountId>> = Snapshots::<T>::get((pool, round))
			.unwrap_or_default()
			.into_iter()
			.filter(|p| fin.included.contains(&p.index))
			.collect();
		included.sort_by_key(|p| p.index);
		let contributors =
			included.iter().filter(|p| fin.contributors.contains(&p.who)).cloned().collect();
		Some(FinalView { hash: fin.hash, finalized_at: fin.finalized_at, contributors, included })
	}

	fn participant(
		pool: PoolId,
		round: RoundIndex,
		who: &T::AccountId,
	) -> Option<Participant<T::AccountId>> {
		Self::live_snapshot(pool, round)?.into_iter().find(|p| p.who == *who)
	}
}
