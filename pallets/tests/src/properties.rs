//! Property test: random call sequences from ten accounts over (at least) two pools, with
//! boundary and overflowing amounts, interleaved with blocks, and the adversary's sequences:
//! filler challenges that take a block's schedule before a target, challenges narrowed to
//! boundary segments, advances at a vote's last block and at its expiry, appeals. After every call and every block,
//! every pallet's `try_state` holds and Σ (free + held) over all accounts equals the total
//! issuance, to the planck (`mock::check_invariants`). No call may panic.

use crate::mock::*;
use frame_support::traits::ConstU32;
use proptest::prelude::*;
use sp_runtime::Perbill;

/// Accounts that act: the eight trainers, the creator and the outsider.
const ACCOUNTS: [AccountId; 10] = [1, 2, 3, 4, 5, 6, 7, 8, CREATOR, OUTSIDER];

#[derive(Clone, Debug)]
enum Op {
	Bond(usize, u128),
	Unbond(usize, u128),
	Withdraw(usize),
	/// A pool spec drawn with boundary values ([`pool_spec`]).
	CreatePool(usize, Box<pallet_training_pools::PoolSpec<Test>>),
	Join(usize, u32, u128),
	Leave(usize, u32),
	ReleaseDeposit(usize, u32, u32),
	Cancel(usize, u32),
	Reap(usize, u32),
	Commit {
		who: usize,
		pool: u32,
		ahead: u32,
		hash: u8,
		mask: u8,
	},
	VoidExpired(usize, u32),
	Decide(usize, u32, u32),
	SetAllowed(usize, u32, u8),
	Challenge {
		who: usize,
		pool: u32,
		round: u32,
		accused: usize,
	},
	/// A challenge naming the part of the trace it disputes (a segment index at and past the
	/// protocol's bound, the encoding, or the whole phase).
	OpenNarrowed {
		who: usize,
		pool: u32,
		round: u32,
		accused: usize,
		dispute: pallet_challenges::Dispute,
	},
	Equivocation {
		who: usize,
		pool: u32,
		round: u32,
		accused: usize,
	},
	/// `count` challenges of `round` of `pool` opened in one block by pairs of accounts from
	/// `from` on: fillers that take the schedule's room before a target.
	Fillers {
		from: usize,
		pool: u32,
		round: u32,
		count: u8,
	},
	/// Challenge `c` advanced by `who` at the worst blocks: the last one of its vote, then the
	/// one it expires at (a no-show ambush).
	Ambush(usize, u32),
	Vote(usize, u32, bool),
	RegisterJuror(usize),
	UnregisterJuror(usize),
	Advance(usize, u32),
	Appeal(usize, u32),
	Settle(usize, u32, u32),
	Claim(usize, u32),
	Blocks(u64),
}

fn amount() -> impl Strategy<Value = u128> {
	prop_oneof![
		Just(0u128),
		Just(1),
		Just(99),
		Just(100),
		Just(101),
		Just(1_000),
		Just(5_000),
		Just(FUNDS),
		Just(u128::MAX),
		0..20_000u128,
	]
}

/// Pool specs with boundary values of every bounded field (rounds, trainers, quorum, reward,
/// minimum stake, round timeout, challenge window, minimum round length) and allow-lists from a
/// bit mask over the accounts.
fn pool_spec() -> impl Strategy<Value = pallet_training_pools::PoolSpec<Test>> {
	(
		0..4u32,
		0..7u32,
		prop_oneof![
			Just(0u32),
			Just(500_000_000),
			Just(500_000_001),
			Just(666_666_667),
			Just(1_000_000_000),
			Just(u32::MAX)
		],
		(amount(), amount()),
		prop_oneof![Just(0u64), Just(1), Just(10), Just(1_000), Just(u64::MAX)],
		prop_oneof![Just(0u64), Just(1), Just(5), Just(100), Just(u64::MAX)],
		(prop_oneof![Just(0u64), Just(1), Just(3), Just(500), Just(u64::MAX)], any::<u8>()),
	)
		.prop_map(
			|(rounds, trainers, quorum, (reward, min_stake), timeout, window, (length, mask))| {
				let mut s = spec(rounds, trainers, Perbill::from_parts(quorum));
				s.terms.max_trainers = trainers.max(1);
				s.terms.reward_per_round = reward;
				s.terms.min_stake = min_stake;
				s.terms.round_timeout = timeout;
				s.terms.challenge_window = window;
				s.terms.min_round_length = length;
				s.terms.allowed_trainers = allow_list(mask);
				s
			},
		)
}

fn op() -> impl Strategy<Value = Op> {
	let who = 0..ACCOUNTS.len();
	let pool = 0..3u32;
	prop_oneof![
		(who.clone(), amount()).prop_map(|(w, a)| Op::Bond(w, a)),
		(who.clone(), amount()).prop_map(|(w, a)| Op::Unbond(w, a)),
		who.clone().prop_map(Op::Withdraw),
		(who.clone(), pool_spec()).prop_map(|(w, s)| Op::CreatePool(w, Box::new(s))),
		(who.clone(), pool.clone(), amount()).prop_map(|(w, p, a)| Op::Join(w, p, a)),
		(who.clone(), pool.clone()).prop_map(|(w, p)| Op::Leave(w, p)),
		(who.clone(), pool.clone(), 0..6u32).prop_map(|(w, p, i)| Op::ReleaseDeposit(w, p, i)),
		(who.clone(), pool.clone()).prop_map(|(w, p)| Op::Cancel(w, p)),
		(who.clone(), pool.clone()).prop_map(|(w, p)| Op::Reap(w, p)),
		(who.clone(), pool.clone(), 0..3u32, 0..3u8, any::<u8>())
			.prop_map(|(who, pool, ahead, hash, mask)| Op::Commit { who, pool, ahead, hash, mask }),
		(who.clone(), pool.clone()).prop_map(|(w, p)| Op::VoidExpired(w, p)),
		(who.clone(), pool.clone(), 0..5u32).prop_map(|(w, p, r)| Op::Decide(w, p, r)),
		(who.clone(), pool.clone(), any::<u8>()).prop_map(|(w, p, a)| Op::SetAllowed(w, p, a)),
		(who.clone(), pool.clone(), 0..5u32, who.clone())
			.prop_map(|(who, pool, round, accused)| Op::Challenge { who, pool, round, accused }),
		(who.clone(), pool.clone(), 0..5u32, who.clone(), dispute()).prop_map(
			|(who, pool, round, accused, dispute)| Op::OpenNarrowed {
				who,
				pool,
				round,
				accused,
				dispute
			}
		),
		(who.clone(), pool.clone(), 0..5u32, who.clone()).prop_map(
			|(who, pool, round, accused)| { Op::Equivocation { who, pool, round, accused } }
		),
		(who.clone(), pool.clone(), 0..5u32, 0..=24u8)
			.prop_map(|(from, pool, round, count)| Op::Fillers { from, pool, round, count }),
		(who.clone(), 0..24u32).prop_map(|(w, c)| Op::Ambush(w, c)),
		(who.clone(), 0..24u32, any::<bool>()).prop_map(|(w, c, g)| Op::Vote(w, c, g)),
		who.clone().prop_map(Op::RegisterJuror),
		who.clone().prop_map(Op::UnregisterJuror),
		(who.clone(), 0..24u32).prop_map(|(w, c)| Op::Advance(w, c)),
		(who.clone(), 0..24u32).prop_map(|(w, c)| Op::Appeal(w, c)),
		(who.clone(), pool.clone(), 0..5u32).prop_map(|(w, p, r)| Op::Settle(w, p, r)),
		(who.clone(), pool.clone()).prop_map(|(w, p)| Op::Claim(w, p)),
		(1..25u64).prop_map(Op::Blocks),
	]
}

/// Disputes with boundary segment indices: the first, the last the protocol holds, and the
/// first past it (refused).
fn dispute() -> impl Strategy<Value = pallet_challenges::Dispute> {
	use pallet_challenges::Dispute;
	use synod_primitives::protocol::limits::MAX_TRACE_SEGMENTS;
	prop_oneof![
		Just(Dispute::Phase),
		Just(Dispute::Encoding),
		Just(Dispute::Segment(0)),
		Just(Dispute::Segment(MAX_TRACE_SEGMENTS - 1)),
		Just(Dispute::Segment(MAX_TRACE_SEGMENTS)),
		Just(Dispute::Segment(u32::MAX)),
	]
}

/// The accounts whose bit is set in `mask` (none set: anyone may join).
fn allow_list(mask: u8) -> frame_support::BoundedVec<AccountId, ConstU32<MAX_MEMBERS>> {
	let list: Vec<AccountId> = (0..ACCOUNTS.len().min(8))
		.filter(|i| mask & (1 << i) != 0)
		.map(|i| ACCOUNTS[i])
		.collect();
	list.try_into().unwrap_or_default()
}

fn apply(op: &Op) {
	// A signed extrinsic moves its account's nonce whatever its outcome.
	let o = |i: usize| {
		System::inc_account_nonce(ACCOUNTS[i]);
		RuntimeOrigin::signed(ACCOUNTS[i])
	};
	// Errors are expected (most random calls are invalid); panics are not.
	let _ = match op.clone() {
		Op::Bond(w, a) => TrainerStaking::bond(o(w), a),
		Op::Unbond(w, a) => TrainerStaking::unbond(o(w), a),
		Op::Withdraw(w) => TrainerStaking::withdraw_unbonded(o(w)),
		Op::CreatePool(who, spec) => TrainingPools::create_pool(o(who), *spec),
		Op::Join(w, p, a) => {
			let who = ACCOUNTS[w];
			TrainingPools::join_pool(o(w), p, a, peer(who), ml_dsa_key(who), peer_proof(who, p))
		},
		Op::ReleaseDeposit(w, p, i) => TrainingPools::release_member_deposit(o(w), p, i),
		Op::Leave(w, p) => TrainingPools::leave_pool(o(w), p),
		Op::Cancel(w, p) => TrainingPools::cancel_pool(o(w), p),
		Op::Reap(w, p) => TrainingPools::reap_pool(o(w), p).map(|_| ()).map_err(|e| e.error),
		Op::Commit { who, pool, ahead, hash, mask } => {
			let current = pallet_training_pools::Pools::<Test>::get(pool)
				.map(|p| p.current_round)
				.unwrap_or(1);
			let ix: Vec<u32> = (0..8u32).filter(|i| mask & (1 << i) != 0).collect();
			let ix: Vec<u32> = ix.into_iter().take(MAX_MEMBERS as usize).collect();
			Checkpoints::commit_checkpoint(
				o(who),
				pool,
				current.saturating_add(ahead).saturating_sub(1).max(1),
				[hash; 32],
				ix.try_into().expect("at most MaxMembers"),
			)
			.map(|_| ())
			.map_err(|e| e.error)
		},
		Op::VoidExpired(w, p) => {
			Checkpoints::void_expired_round(o(w), p).map(|_| ()).map_err(|e| e.error)
		},
		Op::SetAllowed(w, p, a) => TrainingPools::set_allowed_trainers(o(w), p, allow_list(a)),
		Op::Decide(w, p, r) => Checkpoints::decide_unmatched_commits(o(w), p, r)
			.map(|_| ())
			.map_err(|e| e.error),
		Op::Challenge { who, pool, round, accused } => {
			open_now(ACCOUNTS[who], pool, round, ACCOUNTS[accused])
		},
		Op::OpenNarrowed { who, pool, round, accused, dispute } => {
			Challenges::open_narrowed_challenge(
				o(who),
				pool,
				round,
				ACCOUNTS[accused],
				announcement(pool, round, ACCOUNTS[accused], [9; 32]),
				dispute,
			)
		},
		Op::Equivocation { who, pool, round, accused } => Challenges::report_equivocation(
			o(who),
			pool,
			round,
			ACCOUNTS[accused],
			announcement(pool, round, ACCOUNTS[accused], [1; 32]),
			announcement(pool, round, ACCOUNTS[accused], [2; 32]),
		),
		Op::Fillers { from, pool, round, count } => {
			let n = ACCOUNTS.len();
			for i in 0..usize::from(count) {
				// Each account against the next ones, lap after lap (never itself).
				let (challenger, accused) =
					(ACCOUNTS[(from + i) % n], ACCOUNTS[(from + i + 1 + i / n) % n]);
				let _ = open_now(challenger, pool, round, accused);
			}
			Ok(())
		},
		Op::Ambush(w, c) => {
			if let Some(ch) = pallet_challenges::OpenChallenges::<Test>::get(c) {
				for at in [ch.expires_at.saturating_sub(1), ch.expires_at] {
					blocks_to(at);
					let _ = Challenges::advance_challenge(o(w), c);
					check_invariants();
				}
			}
			Ok(())
		},
		Op::Vote(w, c, g) => Challenges::vote(o(w), c, g).map(|_| ()).map_err(|e| e.error),
		Op::RegisterJuror(w) => Challenges::register_juror(o(w)),
		Op::UnregisterJuror(w) => Challenges::unregister_juror(o(w)),
		Op::Advance(w, c) => Challenges::advance_challenge(o(w), c),
		Op::Appeal(w, c) => Challenges::appeal(o(w), c),
		Op::Settle(w, p, r) => Rewards::settle_round(o(w), p, r),
		Op::Claim(w, p) => Rewards::claim_rewards(o(w), p).map(drop).map_err(|e| e.error),
		Op::Blocks(n) => {
			blocks_to(System::block_number() + n);
			Ok(())
		},
	};
}

/// `challenger` opens a challenge of `accused`'s contribution to `round` of `pool` in the
/// current block (the mock's `open_challenge` would first run to the block challenges open in,
/// past the invariant checks of every block on the way), with its genuine announcement.
fn open_now(
	challenger: AccountId,
	pool: u32,
	round: u32,
	accused: AccountId,
) -> sp_runtime::DispatchResult {
	System::inc_account_nonce(challenger);
	Challenges::open_challenge(
		RuntimeOrigin::signed(challenger),
		pool,
		round,
		accused,
		announcement(pool, round, accused, [9; 32]),
	)
}

/// Runs block by block up to block `n` (none if it has passed), checking every invariant after
/// each.
fn blocks_to(n: u64) {
	while System::block_number() < n {
		run_to_block(System::block_number() + 1);
		check_invariants();
	}
}

/// Two pools training from the start, so that random calls reach the round logic.
fn two_pools() {
	training_pool(4, two_thirds(), &[1_000, 1_000, 1_000]);
	let p1 = pallet_training_pools::NextPoolId::<Test>::get();
	frame_support::assert_ok!(TrainingPools::create_pool(
		RuntimeOrigin::signed(CREATOR),
		spec(3, 2, two_thirds())
	));
	bond_and_join(4, p1, 500);
	bond_and_join(5, p1, 300);
	// Every member is a juror by default (committees are drawn from a round's contributors).
}

/// One random case: `ops` from two training pools, then every round closes, settles and is
/// claimed; every invariant is checked after each call and each block.
fn random_case(ops: &[Op], appeals: bool) {
	new_test_ext().execute_with(|| {
		// Rulings that wait for appeals, or verdicts that execute at once.
		AppealPeriod::set(&if appeals { 6 } else { 0 });
		two_pools();
		check_invariants();
		for op in ops {
			apply(op);
			check_invariants();
		}
		// Finish: every round closes, settles and is claimable without breaking anything.
		run_to_block(System::block_number() + 120);
		check_invariants();
		for who in ACCOUNTS {
			for p in 0..3 {
				let _ = Rewards::claim_rewards(RuntimeOrigin::signed(who), p);
			}
		}
		check_invariants();
	});
}

// 1 000 random cases in all, half with appeals and half without, as two tests that the test
// harness runs on two cores.
proptest! {
	#![proptest_config(ProptestConfig {
		cases: 500,
		failure_persistence: None,
		..ProptestConfig::default()
	})]

	#[test]
	fn random_calls_keep_every_invariant_when_verdicts_execute_at_once(
		ops in proptest::collection::vec(op(), 1..40),
	) {
		random_case(&ops, false);
	}

	#[test]
	fn random_calls_keep_every_invariant_when_rulings_wait_for_appeals(
		ops in proptest::collection::vec(op(), 1..40),
	) {
		random_case(&ops, true);
	}
}
