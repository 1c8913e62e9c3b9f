//! `commit_checkpoint`.

use crate::{finality::block, pallet::*, Event, WeightInfo};
use frame_support::pallet_prelude::*;
use sp_runtime::traits::{CheckedAdd, SaturatedConversion, Saturating};
use synod_primitives::{
	protocol::{self, RoundPhase},
	Hash32, OnRoundFinalized, PoolId, PoolStatus, PoolsInterface, RoundIndex,
};

impl<T: Config> Pallet<T> {
	/// Whether `who`'s `commit_checkpoint(pool_id, round, hash, included)` would succeed at the
	/// current state: the commit is run in a storage layer that is then discarded. The
	/// runtime's transaction extension admits a commit (an `Operational` call, which may use
	/// block space that ordinary transactions cannot) only if it passes, so that neither an
	/// outsider nor a member repeating a failing commit can take that space.
	///
	/// Errors: those of [`Pallet::commit_checkpoint`].
	pub fn check_commit(
		who: T::AccountId,
		pool_id: PoolId,
		round: RoundIndex,
		hash: Hash32,
		included: IncludedSet<T>,
	) -> DispatchResult {
		synod_primitives::dry_run(|| Self::do_commit(who, pool_id, round, hash, included))
	}

	/// Whether `void_expired_round(pool_id)` would succeed at the current state and is needed:
	/// the void is run in a storage layer that is then discarded, and the round is in no
	/// deadline queue of this block or a later one. The runtime's transaction extension admits
	/// a void (an `Operational` call) only if it passes, so that nobody takes that block space
	/// with voids that fail or that the queue does for free. (The transaction pool checks a
	/// call at the next block's number without running its `on_initialize`: at block
	/// `scheduled_at − 1` a void would pass the dry run, then find the round voided by the
	/// queue and fail unpaid.)
	///
	/// Errors: those of [`Pallet::void_expired_round`]; [`Error::VoidScheduled`].
	pub fn check_void(pool_id: PoolId) -> DispatchResult {
		// Checked before the dry run, which would run the whole void.
		let now = frame_system::Pallet::<T>::block_number();
		let queued = OpenRounds::<T>::get(pool_id)
			.filter(|open| open.deadline <= now)
			.and_then(|open| open.scheduled_at)
			.is_some_and(|at| at >= now);
		ensure!(!queued, Error::<T>::VoidScheduled);
		synod_primitives::dry_run(|| Self::do_void_expired_round(pool_id).map(|_| ()))
	}

	/// Voids `pool_id`'s open round if its deadline has passed. Returns the weight used: the
	/// void at the larger of the round's participants and the pool's members
	/// ([`Self::void_weight_at`]) and, when the void ends the pool, the pool's end.
	///
	/// Errors: [`Error::NoOpenRound`], [`Error::DeadlineNotReached`], or the void's own.
	pub(crate) fn do_void_expired_round(pool_id: PoolId) -> Result<Weight, DispatchError> {
		let open = OpenRounds::<T>::get(pool_id).ok_or(Error::<T>::NoOpenRound)?;
		let now = frame_system::Pallet::<T>::block_number();
		let voided = T::Pools::round_params(pool_id)
			.is_none_or(|p| Self::round_state(&open, &p, now).status().is_voided());
		ensure!(voided, Error::<T>::DeadlineNotReached);
		let participants = Snapshots::<T>::decode_len((pool_id, open.round))
			.map_or(0, |n| n.saturated_into::<u32>());
		let m = participants.max(T::Pools::member_count(pool_id));
		let (result, end) = Self::void_and_end(pool_id, open.round, now);
		result?;
		Ok(Self::void_weight_at(m).saturating_add(end))
	}

	/// The weight charged for one void by `void_expired_round` of a round whose snapshot, and
	/// whose pool's next one, hold at most `m` participants (at least 1, at most `MaxMembers`;
	/// the reads of its size are measured with it): [`mix_weight`] of the two benchmarked
	/// voids, one whose pool goes on to its next round ([`WeightInfo::void_expired_round`])
	/// and one that drops every participant ([`WeightInfo::void_expired_round_dropping`], the
	/// pool's end charged apart). A void that keeps some participants and drops the others
	/// does each one's part of one path and the fixed part of one: the larger fixed part plus
	/// `m` times the larger part per participant covers every such mix, whatever the fits'
	/// figures (test `a_void_of_dropped_and_staying_participants_is_charged_enough` in
	/// `runtime/src/configs/worst_case.rs`).
	pub fn void_weight_at(m: u32) -> Weight {
		let m = m.clamp(1, T::MaxMembers::get().max(1));
		mix_weight(T::WeightInfo::void_expired_round, T::WeightInfo::void_expired_round_dropping, m)
	}

	/// The weight charged for the deadline queue's `v` voids in one block's `on_initialize`,
	/// the ends of the pools they close apart: [`mix_weight`] of the two benchmarked hooks,
	/// voids whose pools go on ([`WeightInfo::on_initialize_void`]) and voids that drop every
	/// participant ([`WeightInfo::on_initialize_void_dropping`]), so that a block whose due
	/// voids are some of each is covered (test
	/// `a_block_of_staying_and_dropping_voids_is_charged_enough`). With no void due both
	/// benchmarks measure the same path (the list's take), so the smaller is charged.
	pub fn on_initialize_void_weight(v: u32) -> Weight {
		if v == 0 {
			T::WeightInfo::on_initialize_void(0).min(T::WeightInfo::on_initialize_void_dropping(0))
		} else {
			mix_weight(
				T::WeightInfo::on_initialize_void,
				T::WeightInfo::on_initialize_void_dropping,
				v,
			)
		}
	}

	/// The weight charged for a commit in a pool whose round snapshots hold at most `m`
	/// participants, the pool's end aside: the benchmarked worst path
	/// ([`WeightInfo::commit_checkpoint`]) at `m` (at least 2, the benchmark's range; at
	/// most `MaxMembers`), plus the reads of [`Self::commit_used_weight`] and the lists a
	/// finalization probes beyond the benchmark's ([`Self::finality_probe_weight`]).
	pub fn commit_weight_at(m: u32) -> Weight {
		let m = m.clamp(2, T::MaxMembers::get().max(2));
		T::WeightInfo::commit_checkpoint(m)
			.saturating_add(T::DbWeight::get().reads(6))
			.saturating_add(Self::finality_probe_weight())
	}

	/// What a finalizing commit may read beyond its benchmark, which found room in the first
	/// deadline and settlement lists it tried: the later lists the next round's deadline
	/// (`MaxDeadlinesPerBlock − 1`) and the round's settlement
	/// (`OnRoundFinalized::probe_weight`) probe when the first ones are full.
	pub fn finality_probe_weight() -> Weight {
		let lists = T::MaxDeadlinesPerBlock::get().saturating_sub(1);
		let max_len =
			BoundedVec::<(PoolId, RoundIndex), T::MaxDeadlinesPerBlock>::max_encoded_len();
		synod_primitives::list_probe_weight::<T::DbWeight>(lists, max_len)
			.saturating_add(<T::OnRoundFinalized as OnRoundFinalized<_>>::probe_weight())
	}

	/// The weight charged for a commit that ends its pool (it finalized the pool's last
	/// round): [`Self::commit_weight_at`] `m` followed by the end of a pool of `members`
	/// members (`PoolsInterface::end_weight`) and the read of their count.
	pub fn ending_commit_weight_at(m: u32, members: u32) -> Weight {
		Self::commit_weight_at(m)
			.saturating_add(T::Pools::end_weight(members))
			.saturating_add(T::DbWeight::get().reads(1))
	}

	/// The weight a commit books: the worst path, a `MaxMembers` pool's finalizing commit
	/// ending the pool ([`Self::ending_commit_weight_at`]); a finalizing commit that opens the
	/// next round instead does less.
	pub fn commit_booked_weight() -> Weight {
		let max = T::MaxMembers::get();
		Self::ending_commit_weight_at(max, max)
	}

	/// The weight a successful commit of `round` of `pool_id` used, at `m` the larger of the
	/// round's snapshot and the next round's (opened by a finalizing commit):
	/// [`Self::commit_weight_at`] `m`, or [`Self::ending_commit_weight_at`] `m` and the pool's
	/// member count when the pool no longer trains after it (its last round final: the pool's
	/// end released every member's commitment). A commit never voids a round
	/// ([`Error::DeadlinePassed`]).
	pub fn commit_used_weight(pool_id: PoolId, round: RoundIndex) -> Weight {
		let participants = |r: RoundIndex| {
			Snapshots::<T>::decode_len((pool_id, r)).map_or(0, |n| n.saturated_into::<u32>())
		};
		let m = participants(round).max(participants(round.saturating_add(1)));
		let training =
			T::Pools::round_params(pool_id).is_some_and(|p| p.status == PoolStatus::Training);
		if training {
			Self::commit_weight_at(m)
		} else {
			Self::ending_commit_weight_at(m, T::Pools::member_count(pool_id))
		}
	}

	pub(crate) fn do_commit(
		who: T::AccountId,
		pool_id: PoolId,
		round: RoundIndex,
		hash: Hash32,
		included: IncludedSet<T>,
	) -> DispatchResult {
		let params = T::Pools::round_params(pool_id).ok_or(Error::<T>::PoolNotFound)?;
		ensure!(protocol::tally::is_valid_included_set(&included), Error::<T>::InvalidIncludedSet);
		let previous = Commits::<T>::get((pool_id, round), &who);
		let final_record = FinalCheckpoints::<T>::get(pool_id, round);
		if let Some(prev) = &previous {
			// Another commit, once per set (its included set is then the agreed or final one),
			// from a committer of another included set: over a split open round's agreed set
			// (`protocol::agreement`), or, once final, the final checkpoint itself (a split round
			// is final as soon as quorum has committed again; the rest are paid late), also from
			// a committer of the final set with another hash.
			let (agreed, expected_hash) = match &final_record {
				Some(fin) => (fin.included.clone(), Some(fin.hash)),
				None => (
					AgreedSets::<T>::get((pool_id, round))
						.ok_or(Error::<T>::AlreadyCommitted)?
						.included,
					None,
				),
			};
			// A participant whose first commit named the final set with another hash may commit
			// the final pair too: an equivocator's two payloads split honest members over one
			// included set (each aggregated the payload it received), and the final checkpoint
			// is the one it can recompute once it holds the other payload. It gains nothing
			// a participant that never committed could not (a late commit of the final pair).
			let other_hash = expected_hash.is_some_and(|h| h != prev.hash);
			ensure!(prev.included != agreed || other_hash, Error::<T>::AlreadyCommitted);
			ensure!(
				included == agreed && expected_hash.is_none_or(|h| h == hash),
				Error::<T>::NotTheAgreedSet
			);
		}
		let now = frame_system::Pallet::<T>::block_number();

		// A final round: late contributors and divergent commits of its participants, for
		// `challenge_window` blocks (challenges stay open for twice that). After that, until the
		// round is settled (its snapshot pruned), a participant that has not committed yet may
		// still record a commit: it is not paid, but it is present, so the leak of silent
		// included members spares it (`protocol::leak::at_settlement`).
		if let Some(mut fin) = final_record {
			let in_window =
				block::<T>(now) <= params.timeline.late_commits_until(block::<T>(fin.finalized_at));
			let snapshot = Snapshots::<T>::get((pool_id, round));
			ensure!(
				in_window || (previous.is_none() && snapshot.is_some()),
				Error::<T>::RoundClosed
			);
			let snapshot = snapshot.unwrap_or_default();
			let index = protocol::snapshot::find(&snapshot, &who)
				.ok_or(Error::<T>::NotInSnapshot)?
				.index;
			Commits::<T>::insert(
				(pool_id, round),
				&who,
				CommitRecord { hash, included: included.clone() },
			);
			Self::deposit_event(Event::CheckpointCommitted {
				pool_id,
				round,
				who: who.clone(),
				hash,
			});
			if fin.hash == hash && fin.included == included {
				if previous.is_some() {
					// Its first commit was recorded as divergent at finality.
					Divergent::<T>::mutate((pool_id, round), |d| d.retain(|(w, _)| *w != who));
				}
				if in_window
					&& fin.included.contains(&index)
					&& fin.contributors.try_push(who.clone()).is_ok()
				{
					MissedRounds::<T>::remove(pool_id, &who);
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

		if round > params.current_round {
			// Ahead of time: stored, counted when the round opens against its snapshot; not in
			// a pool with a minimum round length, which counts from the opening.
			let member = T::Pools::member(pool_id, &who).ok_or(Error::<T>::NotMember)?;
			ensure!(member.from_round <= round, Error::<T>::NotYetMember);
			ensure!(params.timeline.accepts_commits_ahead(), Error::<T>::InnerPhaseNotOver);
			Commits::<T>::insert((pool_id, round), &who, CommitRecord { hash, included });
			Self::deposit_event(Event::CheckpointCommitted { pool_id, round, who, hash });
			return Ok(());
		}

		// Only the round's participants commit.
		let snapshot = Snapshots::<T>::get((pool_id, round)).unwrap_or_default();
		let Some(participant) = protocol::snapshot::find(&snapshot, &who).cloned() else {
			return Err(match T::Pools::member(pool_id, &who) {
				None => Error::<T>::NotMember,
				Some(m) if m.from_round > round => Error::<T>::NotYetMember,
				Some(_) => Error::<T>::NotInSnapshot,
			}
			.into());
		};
		let open = OpenRounds::<T>::get(pool_id).ok_or(Error::<T>::RoundClosed)?;
		let state = Self::round_state(&open, &params, now);
		// The deadline passed and no queue voided the round yet: the commit would not count
		// (a withholder could otherwise copy the majority's commit from the chain and escape
		// the leak), and a commit does not void the round either: a void is the deadline
		// queue's or `void_expired_round`'s, so that no commit takes the block space of a
		// void.
		ensure!(!state.status().is_voided(), Error::<T>::DeadlinePassed);
		// No commit within the round's first `min_round_length` blocks: a party holding the
		// quorum alone cannot finalize rounds faster than their inner phase can run.
		ensure!(
			state.phase(block::<T>(now)) != RoundPhase::InnerPhase,
			Error::<T>::InnerPhaseNotOver
		);
		// Once a split round's agreed set is fixed in time to judge commits off it
		// (`AgreedSet::in_time`), a first commit is over it: a commit off it is then
		// one made before the set was fixed, with the pool's recommit period to commit over it,
		// and garbage over another set cannot come later. A set fixed later judges nothing, and
		// a first commit over another set is taken (its committer may have no time left to
		// fetch the agreed payloads).
		if previous.is_none() {
			if let Some(agreed) = AgreedSets::<T>::get((pool_id, round)) {
				ensure!(
					!agreed.in_time(open.deadline, &params.timeline) || included == agreed.included,
					Error::<T>::NotTheAgreedSet
				);
			}
		}
		let stake: T::Balance = participant.stake.saturated_into();
		let mut candidates = Candidates::<T>::get((pool_id, round));
		if let Some(prev) = previous {
			// Its stake moves from its first commit to this one.
			if let Some(c) = candidates
				.iter_mut()
				.find(|c| c.hash == prev.hash && c.included == prev.included)
			{
				c.committers.retain(|i| *i != participant.index);
				c.stake = c.stake.saturating_sub(stake);
			}
			candidates.retain(|c| !c.committers.is_empty());
		}
		match candidates.iter_mut().find(|c| c.hash == hash && c.included == included) {
			Some(c) => {
				c.stake = c.stake.checked_add(&stake).ok_or(Error::<T>::Overflow)?;
				c.committers.try_push(participant.index).map_err(|_| Error::<T>::Overflow)?;
			},
			None => {
				let mut committers = BoundedVec::new();
				committers.try_push(participant.index).map_err(|_| Error::<T>::Overflow)?;
				// At most one candidate per participant: never more than `MaxMembers`.
				candidates
					.try_push(Candidate { hash, included: included.clone(), stake, committers })
					.map_err(|_| Error::<T>::Overflow)?;
			},
		}
		Candidates::<T>::insert((pool_id, round), candidates);
		// A commit alone does not reset the member's missed rounds: garbage would. The count
		// resets when the round is final with it among the contributors, or voided with its
		// commit counted as present (`leak_inactive`).
		Commits::<T>::insert((pool_id, round), &who, CommitRecord { hash, included });
		Self::deposit_event(Event::CheckpointCommitted { pool_id, round, who, hash });
		Self::try_finalize(pool_id, round)
	}

	pub(crate) fn record_divergent(
		pool_id: PoolId,
		round: RoundIndex,
		who: T::AccountId,
		hash: Hash32,
	) {
		// Bounded by MaxMembers: each snapshot participant commits once per round.
		let _ = Divergent::<T>::try_mutate((pool_id, round), |d| d.try_push((who.clone(), hash)));
		Self::deposit_event(Event::DivergentCommit { pool_id, round, who, hash });
	}
}

/// The weight of `n` items of which each does one of two benchmarked linear paths, `f` or
/// `g` (weights in `n`), and the whole the fixed part of one: the larger fixed part
/// (`f(0)`, `g(0)`) plus `n` times the larger part per item (`f(1) − f(0)`, `g(1) − g(0)`),
/// component-wise (time and proof size). Unlike the larger of `f(n)` and `g(n)`, which is
/// under `f(0) + n·(g(1) − g(0))` when `f` has the larger fixed part and `g` the larger part
/// per item, it covers every mix of the two.
pub fn mix_weight(f: impl Fn(u32) -> Weight, g: impl Fn(u32) -> Weight, n: u32) -> Weight {
	let (f0, g0) = (f(0), g(0));
	let per_item = f(1).saturating_sub(f0).max(g(1).saturating_sub(g0));
	f0.max(g0).saturating_add(per_item.saturating_mul(n.into()))
}
