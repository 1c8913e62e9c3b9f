//! The logic behind the calls.

use crate::{
	pallet::*, Event, FormerMember, LeftCommitment, MemberInfo, MlDsaPublicKey, PeerIdProof,
	PoolInfo, PoolSpec, WeightInfo,
};
use frame_support::{
	pallet_prelude::*,
	traits::{fungible::MutateHold, tokens::Precision},
};
use frame_system::pallet_prelude::BlockNumberFor;
use sp_runtime::traits::{CheckedAdd, CheckedMul, SaturatedConversion, Saturating, Zero};
use synod_primitives::{
	protocol, MemberIndex, OnMemberLeft, OnTrainingStarted, PoolId, PoolRecords, PoolStatus,
	StakeCommitments, Timeline, TrainerStake,
};

impl<T: Config> Pallet<T> {
	pub(crate) fn budget_reason() -> T::RuntimeHoldReason {
		HoldReason::PoolBudget.into()
	}

	/// Checks every spec field against `SpecLimits` (capped by `MaxRounds` / `MaxMembers`), and
	/// the challenge window against the round timeout (`Timeline::keeps_voided_snapshots`).
	fn validate_spec(spec: &PoolSpec<T>) -> DispatchResult {
		use synod_primitives::protocol::{check_spec, SpecField, SpecView};
		let mut limits = T::SpecLimits::get();
		limits.max_rounds = limits.max_rounds.min(T::MaxRounds::get());
		limits.max_members = limits.max_members.min(T::MaxMembers::get());
		let terms = &spec.terms;
		let view = SpecView {
			rounds: terms.rounds,
			kind: spec.kind.view(),
			min_trainers: terms.min_trainers,
			max_trainers: terms.max_trainers,
			min_stake: terms.min_stake.saturated_into(),
			reward_per_round: terms.reward_per_round.saturated_into(),
			quorum_ppb: terms.quorum.deconstruct(),
			round_timeout: terms.round_timeout.saturated_into(),
			challenge_window: terms.challenge_window.saturated_into(),
			min_round_length: terms.min_round_length.saturated_into(),
			allowed_trainers: terms.allowed_trainers.len() as u32,
		};
		Self::check_distinct(&terms.allowed_trainers)?;
		check_spec(&view, &limits).map_err(|field| match field {
			SpecField::Rounds => Error::<T>::InvalidRounds,
			SpecField::InnerSteps => Error::<T>::InvalidInnerSteps,
			SpecField::TrainerBounds => Error::<T>::InvalidTrainerBounds,
			SpecField::MinStake => Error::<T>::InvalidMinStake,
			SpecField::RewardPerRound => Error::<T>::InvalidRewardPerRound,
			SpecField::Quorum => Error::<T>::InvalidQuorum,
			SpecField::RoundTimeout => Error::<T>::InvalidRoundTimeout,
			SpecField::ChallengeWindow => Error::<T>::InvalidChallengeWindow,
			SpecField::MinRoundLength => Error::<T>::InvalidMinRoundLength,
			SpecField::AllowedTrainers => Error::<T>::InvalidAllowedTrainers,
		})?;
		// A voided round's snapshot must outlive its slashable window (equivocation reports).
		let timeline = Timeline::of_pool(
			view.round_timeout,
			view.challenge_window,
			view.min_round_length,
			Self::jury_timing(),
		);
		ensure!(timeline.keeps_voided_snapshots(), Error::<T>::InvalidChallengeWindow);
		Ok(())
	}

	pub(crate) fn do_create_pool(creator: T::AccountId, spec: PoolSpec<T>) -> DispatchResult {
		Self::validate_spec(&spec)?;
		let budget = spec
			.terms
			.reward_per_round
			.checked_mul(&spec.terms.rounds.into())
			.ok_or(Error::<T>::Overflow)?;
		let deposit: BalanceOf<T> = protocol::pool_deposit(
			T::PoolDeposit::get().saturated_into(),
			T::RoundDeposit::get().saturated_into(),
			spec.terms.rounds,
		)
		.and_then(|d| d.try_into().ok())
		.ok_or(Error::<T>::Overflow)?;
		let pool_id = NextPoolId::<T>::get();
		let next = pool_id.checked_add(1).ok_or(Error::<T>::Overflow)?;
		T::Currency::hold(&Self::budget_reason(), &creator, budget)
			.map_err(|_| Error::<T>::InsufficientBudget)?;
		T::Currency::hold(&Self::pool_deposit_reason(), &creator, deposit)
			.map_err(|_| Error::<T>::InsufficientDeposit)?;
		Pools::<T>::insert(
			pool_id,
			PoolInfo {
				creator: creator.clone(),
				spec,
				status: PoolStatus::Open,
				current_round: 0,
				next_member_index: 0,
				member_count: 0,
				total_stake: Zero::zero(),
				budget_held: budget,
				budget_reserved: Zero::zero(),
				created_at: frame_system::Pallet::<T>::block_number(),
				cancel_after: None,
				deposit,
				ended_at: None,
			},
		);
		NextPoolId::<T>::put(next);
		Self::deposit_event(Event::PoolCreated { pool_id, creator, budget });
		Ok(())
	}

	/// Checks that `peer_id` is an Ed25519 peer id and `proof` its key's signature of
	/// [`protocol::peer::proof_message`] for this chain (its genesis hash), `pool_id` and `who`.
	///
	/// # Errors
	/// [`Error::InvalidPeerId`] for any other peer id, [`Error::PeerIdNotProved`] for a
	/// signature that does not verify.
	pub(crate) fn check_peer_id_proof(
		who: &T::AccountId,
		pool_id: PoolId,
		peer_id: &[u8],
		proof: &PeerIdProof,
	) -> DispatchResult {
		let key = protocol::peer::ed25519_key(peer_id).ok_or(Error::<T>::InvalidPeerId)?;
		ensure!(
			sp_io::crypto::ed25519_verify(
				&sp_core::ed25519::Signature::from_raw(*proof),
				&Self::peer_id_proof_message(who, pool_id),
				&sp_core::ed25519::Public::from_raw(key),
			),
			Error::<T>::PeerIdNotProved
		);
		Ok(())
	}

	/// What the key of the peer id `who` registers in `pool_id` signs
	/// ([`protocol::peer::proof_message`] with this chain's genesis hash).
	pub fn peer_id_proof_message(who: &T::AccountId, pool_id: PoolId) -> alloc::vec::Vec<u8> {
		let genesis = frame_system::Pallet::<T>::block_hash(BlockNumberFor::<T>::zero());
		let genesis: [u8; 32] = genesis.as_ref().try_into().unwrap_or([0; 32]);
		protocol::peer::proof_message(&genesis, pool_id, &who.encode())
	}

	pub(crate) fn do_join_pool(
		who: T::AccountId,
		pool_id: PoolId,
		stake: BalanceOf<T>,
		peer_id: BoundedVec<u8, T::MaxPeerIdLen>,
		ml_dsa_key: MlDsaPublicKey,
		peer_id_proof: PeerIdProof,
	) -> DispatchResult {
		let mut pool = Pools::<T>::get(pool_id).ok_or(Error::<T>::PoolNotFound)?;
		ensure!(
			matches!(pool.status, PoolStatus::Open | PoolStatus::Training)
				&& pool.cancel_after.is_none(),
			Error::<T>::PoolClosed
		);
		ensure!(!Members::<T>::contains_key(pool_id, &who), Error::<T>::AlreadyMember);
		ensure!(!Dropped::<T>::contains_key(pool_id, &who), Error::<T>::DroppedFromPool);
		ensure!(
			pool.spec.terms.allowed_trainers.is_empty()
				|| pool.spec.terms.allowed_trainers.contains(&who),
			Error::<T>::NotAllowedToJoin
		);
		ensure!(pool.member_count < pool.spec.terms.max_trainers, Error::<T>::PoolFull);
		Self::check_peer_id_proof(&who, pool_id, &peer_id, &peer_id_proof)?;
		ensure!(!PeerIds::<T>::contains_key(pool_id, &peer_id), Error::<T>::PeerIdTaken);
		ensure!(
			stake >= pool.spec.terms.min_stake && !stake.is_zero(),
			Error::<T>::StakeBelowMinimum
		);
		let committed = <Self as StakeCommitments<_, _>>::committed(&who);
		let needed = committed.checked_add(&stake).ok_or(Error::<T>::Overflow)?;
		ensure!(T::Staking::active_stake(&who) >= needed, Error::<T>::InsufficientStake);

		let mut list = MemberList::<T>::get(pool_id);
		list.try_push(who.clone()).map_err(|_| Error::<T>::PoolFull)?;
		let mut pools = Self::pruned_pools(&who);
		if !pools.contains(&pool_id) {
			pools.try_push(pool_id).map_err(|_| Error::<T>::TooManyPools)?;
		}

		let deposit = T::MemberDeposit::get();
		T::Currency::hold(&Self::deposit_reason(), &who, deposit)
			.map_err(|_| Error::<T>::InsufficientDeposit)?;

		let index = pool.next_member_index;
		pool.next_member_index = index.checked_add(1).ok_or(Error::<T>::Overflow)?;
		pool.member_count = pool.member_count.checked_add(1).ok_or(Error::<T>::Overflow)?;
		pool.total_stake = pool.total_stake.checked_add(&stake).ok_or(Error::<T>::Overflow)?;
		// A member joining during round r takes part from round r + 1 (`docs/architecture.md`).
		let from_round = match pool.status {
			PoolStatus::Training => pool.current_round.saturating_add(1),
			_ => 1,
		};
		let starts =
			pool.status == PoolStatus::Open && pool.member_count >= pool.spec.terms.min_trainers;
		if starts {
			pool.status = PoolStatus::Training;
			pool.current_round = 1;
		}
		PeerIds::<T>::insert(pool_id, &peer_id, &who);
		Members::<T>::insert(
			pool_id,
			&who,
			MemberInfo {
				index,
				peer_id,
				ml_dsa_key,
				stake,
				from_round,
				joined_at: frame_system::Pallet::<T>::block_number(),
				deposit,
			},
		);
		MemberList::<T>::insert(pool_id, list);
		TrainerPools::<T>::insert(&who, pools);
		Pools::<T>::insert(pool_id, pool);
		Self::deposit_event(Event::MemberJoined { pool_id, who, index, stake, from_round });
		if starts {
			Self::deposit_event(Event::TrainingStarted { pool_id });
			T::OnTrainingStarted::training_started(pool_id);
		}
		Ok(())
	}

	pub(crate) fn do_leave_pool(who: T::AccountId, pool_id: PoolId) -> DispatchResult {
		Self::remove_member(pool_id, &who)?;
		Self::deposit_event(Event::MemberLeft { pool_id, who });
		Ok(())
	}

	/// Ends `who`'s membership of `pool_id`: its record, its place in the member list and its
	/// commitment. Snapshots already taken keep it (Checkpoints freezes them per round), and
	/// its registration moves to [`FormerMembers`] with its deposit, so that its signed
	/// announcements can still be checked as challenge evidence of the rounds it was in.
	pub(crate) fn remove_member(pool_id: PoolId, who: &T::AccountId) -> DispatchResult {
		let mut pool = Pools::<T>::get(pool_id).ok_or(Error::<T>::PoolNotFound)?;
		let member = Members::<T>::take(pool_id, who).ok_or(Error::<T>::NotMember)?;
		pool.member_count = pool.member_count.saturating_sub(1);
		pool.total_stake = pool.total_stake.saturating_sub(member.stake);
		MemberList::<T>::mutate(pool_id, |l| l.retain(|m| m != who));
		let timeline = Self::timeline(&pool);
		let now = frame_system::Pallet::<T>::block_number();
		if pool.status == PoolStatus::Training && member.from_round <= pool.current_round {
			// The open round's snapshot can count it, and the stake backing that round stays
			// slashable until the round is settled: it stays committed (and the pool in
			// `TrainerPools`) until then, so that it backs no other live snapshot meanwhile.
			let until = timeline.settled_by(now.saturated_into()).saturated_into();
			Self::end_commitment(who, pool_id, Some(member.stake), until);
		} else {
			Self::end_commitment(who, pool_id, None, now);
		}
		// Its commit ahead of the next round (if any) can no longer count: forgotten, so that
		// accounts joining, committing ahead and leaving in turn leave nothing behind.
		T::OnMemberLeft::member_left(pool_id, who, pool.current_round);
		// (A peer id registered before ids were unique may be another member's.)
		if PeerIds::<T>::get(pool_id, &member.peer_id).as_ref() == Some(who) {
			PeerIds::<T>::remove(pool_id, &member.peer_id);
		}
		// Every round it is in opened at or before now: its challenges end by `settled_by(now)`.
		let now: u64 = now.saturated_into();
		FormerMembers::<T>::insert(
			pool_id,
			member.index,
			FormerMember {
				who: who.clone(),
				peer_id: member.peer_id,
				ml_dsa_key: member.ml_dsa_key,
				deposit: member.deposit,
				kept_until: timeline.settled_by(now).saturated_into(),
			},
		);
		Pools::<T>::insert(pool_id, pool);
		Ok(())
	}

	/// The stake `who` has committed as a member of `pool_id`, if that pool has not ended (an
	/// ended pool keeps its members' records, not their commitments).
	pub(crate) fn member_stake(pool_id: PoolId, who: &T::AccountId) -> Option<BalanceOf<T>> {
		Pools::<T>::get(pool_id)
			.filter(|p| !p.status.has_ended())
			.and_then(|_| Members::<T>::get(pool_id, who))
			.map(|m| m.stake)
	}

	/// Weight of [`Self::pruned_pools`] and of `StakeCommitments::committed` beyond the
	/// benchmarked calls that run them: per pool of the list, reads of [`LeftCommitments`],
	/// [`Members`] and [`Pools`] by each, and one delete, plus reading and writing the list
	/// (`MaxPoolsPerTrainer` pools at most).
	pub(crate) fn prune_weight() -> Weight {
		let n = u64::from(T::MaxPoolsPerTrainer::get());
		T::DbWeight::get().reads_writes(n.saturating_mul(6).saturating_add(1), n.saturating_add(1))
	}

	/// `who`'s [`TrainerPools`] without the pools whose [`LeftCommitments`] entry has ended
	/// (those entries are deleted) and that it is not a member of; stores and returns
	/// the list. Reads and writes at most `MaxPoolsPerTrainer` entries.
	pub(crate) fn pruned_pools(who: &T::AccountId) -> BoundedVec<PoolId, T::MaxPoolsPerTrainer> {
		let now = frame_system::Pallet::<T>::block_number();
		let mut pools = TrainerPools::<T>::get(who);
		pools.retain(|pool_id| {
			if LeftCommitments::<T>::get(who, pool_id).is_some_and(|l| now > l.until) {
				LeftCommitments::<T>::remove(who, pool_id);
			}
			LeftCommitments::<T>::contains_key(who, pool_id)
				|| Self::member_stake(*pool_id, who).is_some()
		});
		if pools.is_empty() {
			TrainerPools::<T>::remove(who);
		} else {
			TrainerPools::<T>::insert(who, &pools);
		}
		pools
	}

	/// The pool's timeline (from its terms and the runtime's jury constants).
	pub fn timeline(pool: &PoolInfo<T>) -> Timeline {
		Timeline::of_pool(
			pool.spec.terms.round_timeout.saturated_into(),
			pool.spec.terms.challenge_window.saturated_into(),
			pool.spec.terms.min_round_length.saturated_into(),
			Self::jury_timing(),
		)
	}

	/// The runtime's jury timing (`JuryDelay`, `VoteMargin`, `AppealPeriod`).
	fn jury_timing() -> protocol::JuryTiming {
		protocol::JuryTiming {
			jury_delay: T::JuryDelay::get().saturated_into(),
			vote_margin: T::VoteMargin::get().saturated_into(),
			appeal_period: T::AppealPeriod::get().saturated_into(),
		}
	}

	pub(crate) fn deposit_reason() -> T::RuntimeHoldReason {
		HoldReason::MemberDeposit.into()
	}

	pub(crate) fn pool_deposit_reason() -> T::RuntimeHoldReason {
		HoldReason::PoolDeposit.into()
	}

	pub(crate) fn do_release_member_deposit(pool_id: PoolId, index: MemberIndex) -> DispatchResult {
		let former = FormerMembers::<T>::get(pool_id, index).ok_or(Error::<T>::NoFormerMember)?;
		ensure!(
			frame_system::Pallet::<T>::block_number() > former.kept_until,
			Error::<T>::DepositStillNeeded
		);
		FormerMembers::<T>::remove(pool_id, index);
		Self::release_deposit(pool_id, index, &former.who, former.deposit);
		Self::pruned_pools(&former.who);
		Ok(())
	}

	/// Each allowed account at most once: a duplicate would count toward `min_trainers`.
	pub(crate) fn check_distinct(allowed: &[T::AccountId]) -> DispatchResult {
		let mut distinct = allowed.to_vec();
		distinct.sort();
		distinct.dedup();
		ensure!(distinct.len() == allowed.len(), Error::<T>::InvalidAllowedTrainers);
		Ok(())
	}

	/// [`Pallet::set_allowed_trainers`].
	pub(crate) fn do_set_allowed_trainers(
		who: T::AccountId,
		pool_id: PoolId,
		allowed: BoundedVec<T::AccountId, T::MaxMembers>,
	) -> DispatchResult {
		let mut pool = Pools::<T>::get(pool_id).ok_or(Error::<T>::PoolNotFound)?;
		ensure!(who == pool.creator, Error::<T>::NotCreator);
		ensure!(
			matches!(pool.status, PoolStatus::Open | PoolStatus::Training)
				&& pool.cancel_after.is_none(),
			Error::<T>::PoolEnded
		);
		// The allow-list's own rules only: a pool created under older bounds keeps its spec.
		Self::check_distinct(&allowed)?;
		let count = allowed.len() as u32;
		protocol::check_allowed_trainers(count, pool.spec.terms.min_trainers)
			.map_err(|_| Error::<T>::InvalidAllowedTrainers)?;
		pool.spec.terms.allowed_trainers = allowed;
		Pools::<T>::insert(pool_id, pool);
		Self::deposit_event(Event::AllowedTrainersSet { pool_id, allowed: count });
		Ok(())
	}

	pub(crate) fn do_cancel_pool(caller: Option<T::AccountId>, pool_id: PoolId) -> DispatchResult {
		let mut pool = Pools::<T>::get(pool_id).ok_or(Error::<T>::PoolNotFound)?;
		if let Some(c) = &caller {
			ensure!(*c == pool.creator, Error::<T>::NotCreator);
		}
		ensure!(
			matches!(pool.status, PoolStatus::Open | PoolStatus::Training)
				&& pool.cancel_after.is_none(),
			Error::<T>::PoolEnded
		);
		if pool.status == PoolStatus::Training {
			// The round in flight is being trained and committed in good faith: it closes
			// normally (and is paid if final); the pool ends when it closes.
			let last_round = pool.current_round;
			pool.cancel_after = Some(last_round);
			Pools::<T>::insert(pool_id, pool);
			Self::deposit_event(Event::CancelRequested { pool_id, last_round });
			return Ok(());
		}
		pool.status = PoolStatus::Cancelled;
		let released = Self::end_pool(pool_id, &mut pool);
		Pools::<T>::insert(pool_id, pool);
		Self::deposit_event(Event::PoolCancelled { pool_id, released });
		Ok(())
	}

	/// Ends the members' commitments and releases the unreserved budget of an ended pool;
	/// records when it ended. A member in the snapshot of a round the pool opened keeps its
	/// stake committed until that round is settled ([`LeftCommitments`], as a leaver's): the
	/// pool's last rounds can still be challenged and their stake slashed, so it backs no other
	/// live snapshot meanwhile. Member records stay (challenges and rewards of past rounds
	/// still read them) until the pool is reaped.
	pub(crate) fn end_pool(pool_id: PoolId, pool: &mut PoolInfo<T>) -> BalanceOf<T> {
		let now = frame_system::Pallet::<T>::block_number();
		let until = Self::timeline(pool).settled_by(now.saturated_into()).saturated_into();
		for who in MemberList::<T>::get(pool_id) {
			let backs_a_round = (pool.current_round > 0)
				.then(|| Members::<T>::get(pool_id, &who))
				.flatten()
				.filter(|m| m.from_round <= pool.current_round);
			Self::end_commitment(&who, pool_id, backs_a_round.map(|m| m.stake), until);
		}
		pool.ended_at = Some(now);
		Self::release_unreserved(pool)
	}

	/// Ends `who`'s membership commitment to `pool_id`. `backing`: its stake (planck) when it
	/// is in the snapshot of a round the pool opened, which stays committed
	/// ([`LeftCommitments`], added to what an earlier leave left there while that is still
	/// committed; an expired one is replaced) until block `until`, the settlement of that
	/// round; with `None` the pool leaves `who`'s [`TrainerPools`] unless an earlier leave
	/// still holds stake committed to it (`until` is then unused).
	fn end_commitment(
		who: &T::AccountId,
		pool_id: PoolId,
		backing: Option<BalanceOf<T>>,
		until: BlockNumberFor<T>,
	) {
		match backing {
			Some(stake) => LeftCommitments::<T>::mutate(who, pool_id, |l| {
				// An earlier leave's stake whose round is settled is free: not revived.
				let now = frame_system::Pallet::<T>::block_number();
				l.take_if(|l| now > l.until);
				let l = l.get_or_insert(LeftCommitment { stake: Zero::zero(), until });
				l.stake = l.stake.saturating_add(stake);
				l.until = l.until.max(until);
			}),
			None if !LeftCommitments::<T>::contains_key(who, pool_id) => {
				TrainerPools::<T>::mutate(who, |p| p.retain(|id| *id != pool_id))
			},
			None => {},
		}
	}

	/// Weight of `reap_pool` deleting `members` current members, `formers` former members
	/// (benchmarked) and `others` records of other pallets ([`PoolRecords::clear_weight`]).
	pub(crate) fn reap_weight(members: u32, formers: u32, others: u32) -> Weight {
		T::WeightInfo::reap_pool(members, formers)
			.saturating_add(T::Records::clear_weight(others))
			.saturating_add(
				Self::prune_weight().saturating_mul(members.saturating_add(formers).into()),
			)
	}

	/// The most one `reap_pool` call can weigh: every current member, and `ReapLimit` records
	/// split between former members and other pallets' records as the heavier split makes it
	/// (the weight is linear in both counts and their sum is at most `ReapLimit`, so the
	/// heaviest split is all of one kind).
	pub(crate) fn max_reap_weight() -> Weight {
		let (members, limit) = (T::MaxMembers::get(), T::ReapLimit::get());
		Self::reap_weight(members, limit, 0).max(Self::reap_weight(members, 0, limit))
	}

	/// [`Pallet::reap_pool`]: returns how many current members, former members and other
	/// pallets' records it deleted.
	pub(crate) fn do_reap_pool(pool_id: PoolId) -> Result<(u32, u32, u32), DispatchError> {
		let mut pool = Pools::<T>::get(pool_id).ok_or(Error::<T>::PoolNotFound)?;
		let ended_at = pool.ended_at.filter(|_| pool.status.has_ended());
		let ended_at: u64 = ended_at.ok_or(Error::<T>::PoolNotEnded)?.saturated_into();
		let now: u64 = frame_system::Pallet::<T>::block_number().saturated_into();
		ensure!(now > Self::timeline(&pool).settled_by(ended_at), Error::<T>::PoolNotSettled);
		ensure!(!T::Records::in_use(pool_id), Error::<T>::PoolRecordsInUse);
		// Current members (≤ MaxMembers): their commitments ended with the pool, or at the
		// settlement of its last round (now past: their `LeftCommitments` are pruned here).
		let members = MemberList::<T>::take(pool_id);
		for who in members.iter() {
			if let Some(m) = Members::<T>::take(pool_id, who) {
				PeerIds::<T>::remove(pool_id, &m.peer_id);
				Self::release_deposit(pool_id, m.index, who, m.deposit);
				Self::pruned_pools(who);
			}
		}
		pool.member_count = 0;
		pool.total_stake = Zero::zero();
		// Former members, the dropped accounts, then the other pallets' records (unclaimed
		// rewards are paid out of the budget, the round history deleted), up to `ReapLimit`.
		let limit = T::ReapLimit::get();
		let mut formers = 0u32;
		for (index, former) in FormerMembers::<T>::drain_prefix(pool_id).take(limit as usize) {
			Self::release_deposit(pool_id, index, &former.who, former.deposit);
			Self::pruned_pools(&former.who);
			formers = formers.saturating_add(1);
		}
		// The dropped-account marks (each weighed as a former member's record, a heavier one).
		for _ in Dropped::<T>::drain_prefix(pool_id).take(limit.saturating_sub(formers) as usize) {
			formers = formers.saturating_add(1);
		}
		let (others, done) = if FormerMembers::<T>::iter_prefix(pool_id).next().is_some()
			|| Dropped::<T>::iter_prefix(pool_id).next().is_some()
		{
			(0, false)
		} else {
			T::Records::clear(pool_id, limit.saturating_sub(formers))
		};
		let records = formers.saturating_add(others);
		let members = members.len() as u32;
		// Paying rewards changed the budget in storage.
		let budget = Pools::<T>::get(pool_id).map(|p| (p.budget_held, p.budget_reserved));
		(pool.budget_held, pool.budget_reserved) = budget.unwrap_or_default();
		if !done {
			Pools::<T>::insert(pool_id, pool);
			Self::deposit_event(Event::PoolPartlyReaped { pool_id, records });
			return Ok((members, formers, others));
		}
		Pools::<T>::remove(pool_id);
		// Every reward is paid: nothing of the budget is owed (released if anything is left).
		pool.budget_reserved = Zero::zero();
		Self::release_unreserved(&mut pool);
		let released = T::Currency::release(
			&Self::pool_deposit_reason(),
			&pool.creator,
			pool.deposit,
			Precision::BestEffort,
		)
		.unwrap_or_default();
		Self::deposit_event(Event::PoolReaped { pool_id, creator: pool.creator, released });
		Ok((members, formers, others))
	}

	/// Releases a (former) member's storage deposit and says so.
	fn release_deposit(
		pool_id: PoolId,
		index: MemberIndex,
		who: &T::AccountId,
		deposit: BalanceOf<T>,
	) {
		let amount =
			T::Currency::release(&Self::deposit_reason(), who, deposit, Precision::BestEffort)
				.unwrap_or_default();
		Self::deposit_event(Event::MemberDepositReleased {
			pool_id,
			index,
			who: who.clone(),
			amount,
		});
	}

	/// Releases `budget_held − budget_reserved` to the creator; returns the amount released.
	pub(crate) fn release_unreserved(pool: &mut PoolInfo<T>) -> BalanceOf<T> {
		let free = pool.budget_held.saturating_sub(pool.budget_reserved);
		if free.is_zero() {
			return free;
		}
		let released = T::Currency::release(
			&Self::budget_reason(),
			&pool.creator,
			free,
			Precision::BestEffort,
		)
		.unwrap_or_default();
		pool.budget_held = pool.budget_held.saturating_sub(released);
		released
	}
}
