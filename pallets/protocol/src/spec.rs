//! Bounds on every field of a pool spec. A spec outside them is refused at `create_pool` with an
//! error naming the field, so no pool can be created that the chain cannot run to completion at
//! bounded cost.
//!
//! A spec is the pool's *terms* (membership, stake, rewards, round timing: the same for every
//! kind of pool) and its *kind* (what is trained, and how). [`KindView`] is the kind's part as
//! the bounds see it: a new kind of pool adds a variant there and its own checks in
//! [`KindView::check`], which also returns how short a round of it may be.

use crate::{Block, Planck, PPB};
use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use scale_info::TypeInfo;

/// The field of a pool spec that is out of bounds.
#[derive(
	Clone,
	Copy,
	PartialEq,
	Eq,
	Encode,
	Decode,
	DecodeWithMemTracking,
	MaxEncodedLen,
	TypeInfo,
	Debug,
)]
pub enum SpecField {
	/// `rounds` is 0 or above `max_rounds`.
	Rounds,
	/// `inner_steps` is 0 or above `max_inner_steps`.
	InnerSteps,
	/// `min_trainers` is 0, `max_trainers` below it or above `max_members`.
	TrainerBounds,
	/// `min_stake` is below `min_stake_floor`.
	MinStake,
	/// `reward_per_round` is above `max_reward_per_round`, or the budget overflows.
	RewardPerRound,
	/// `quorum` is not above 50 % (or above 100 %).
	Quorum,
	/// `round_timeout` is 0 or above `max_round_timeout`.
	RoundTimeout,
	/// `challenge_window` is below `min_challenge_window` or above `max_challenge_window`.
	ChallengeWindow,
	/// `min_round_length` is below the kind's floor ([`KindView::check`]; DiLoCo:
	/// `⌈inner_steps / max_inner_steps_per_block⌉`), or above half of `round_timeout` (at least half of a round's blocks are left to commit in, so that
	/// a creator cannot leave its members a window one stuffed block closes).
	MinRoundLength,
	/// `allowed_trainers` is not empty but lists fewer than `min_trainers` accounts (the pool
	/// could never start).
	AllowedTrainers,
}

/// The chain's limits (runtime constants).
#[derive(Clone, Copy, PartialEq, Eq, Encode, Decode, MaxEncodedLen, TypeInfo, Debug)]
pub struct SpecLimits {
	/// Most outer rounds of a pool.
	pub max_rounds: u32,
	/// Most inner steps per round.
	pub max_inner_steps: u32,
	/// Most members of a pool.
	pub max_members: u32,
	/// Least `min_stake` a pool may ask, in planck (at least the staking pallet's `MinBond`).
	pub min_stake_floor: Planck,
	/// Most reward per round, in planck.
	pub max_reward_per_round: Planck,
	/// Most blocks of a round timeout.
	pub max_round_timeout: Block,
	/// Least challenge window, in blocks.
	pub min_challenge_window: Block,
	/// Most challenge window, in blocks.
	pub max_challenge_window: Block,
	/// Most inner steps the chain assumes the fastest member runs in one block: a pool's
	/// `min_round_length` is at least `⌈inner_steps / max_inner_steps_per_block⌉` blocks (so at
	/// least one: no round is final in the block it opened, and no commit ahead of a round),
	/// so no round of H inner steps is final faster than its inner phase could run.
	pub max_inner_steps_per_block: u32,
}

/// The kind-specific fields of a pool spec that have bounds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum KindView {
	/// DiLoCo (Douillard et al. 2023, "DiLoCo: Distributed Low-Communication Training of
	/// Language Models", algorithm 1): H inner AdamW steps per round, then an outer Nesterov
	/// step on the aggregated pseudo-gradient.
	DiLoCo {
		/// Inner steps H per outer round.
		inner_steps: u32,
	},
}

impl KindView {
	/// Checks the kind's own fields against `limits` and returns the least `min_round_length`
	/// (blocks) a pool of this kind may set: no round may be final faster than its work could
	/// run. DiLoCo: `inner_steps` in `1..=max_inner_steps`, floor
	/// [`SpecLimits::min_round_length_floor`].
	///
	/// # Errors
	/// [`SpecField::InnerSteps`].
	pub fn check(&self, limits: &SpecLimits) -> Result<Block, SpecField> {
		match *self {
			KindView::DiLoCo { inner_steps } => {
				if inner_steps < 1 || inner_steps > limits.max_inner_steps {
					return Err(SpecField::InnerSteps);
				}
				Ok(limits.min_round_length_floor(inner_steps))
			},
		}
	}
}

/// The fields of a pool spec that have bounds (balances widened to `u128`, blocks to `u64`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SpecView {
	/// Outer rounds.
	pub rounds: u32,
	/// The kind's fields.
	pub kind: KindView,
	/// Members needed to start.
	pub min_trainers: u32,
	/// Member cap.
	pub max_trainers: u32,
	/// Least stake per member, planck.
	pub min_stake: Planck,
	/// Reward per final round, planck.
	pub reward_per_round: Planck,
	/// Quorum, ppb.
	pub quorum_ppb: u32,
	/// Round timeout, blocks.
	pub round_timeout: Block,
	/// Challenge window, blocks.
	pub challenge_window: Block,
	/// Blocks after a round opens before commits to it are accepted.
	pub min_round_length: Block,
	/// Accounts allowed to join (0: anyone may).
	pub allowed_trainers: u32,
}

impl SpecLimits {
	/// The least `min_round_length` of a pool with `inner_steps` inner steps per round, in
	/// blocks: `⌈inner_steps / max_inner_steps_per_block⌉`, at least 1 for a pool that trains;
	/// 0 when the rate is 0 (a chain without a floor).
	pub fn min_round_length_floor(&self, inner_steps: u32) -> Block {
		match self.max_inner_steps_per_block {
			0 => 0,
			rate => inner_steps.div_ceil(rate).into(),
		}
	}
}

/// Checks `spec` against `limits`; the first field out of bounds is returned.
pub fn check_spec(spec: &SpecView, limits: &SpecLimits) -> Result<(), SpecField> {
	let within = |v: u64, lo: u64, hi: u64| v >= lo && v <= hi;
	if !within(spec.rounds.into(), 1, limits.max_rounds.into()) {
		return Err(SpecField::Rounds);
	}
	let round_length_floor = spec.kind.check(limits)?;
	if spec.min_trainers < 1
		|| spec.max_trainers < spec.min_trainers
		|| spec.max_trainers > limits.max_members
	{
		return Err(SpecField::TrainerBounds);
	}
	if spec.min_stake < limits.min_stake_floor.max(1) {
		return Err(SpecField::MinStake);
	}
	if spec.reward_per_round > limits.max_reward_per_round
		|| spec.reward_per_round.checked_mul(spec.rounds.into()).is_none()
	{
		return Err(SpecField::RewardPerRound);
	}
	if spec.quorum_ppb <= PPB / 2 || spec.quorum_ppb > PPB {
		return Err(SpecField::Quorum);
	}
	if !within(spec.round_timeout, 1, limits.max_round_timeout) {
		return Err(SpecField::RoundTimeout);
	}
	if !within(spec.challenge_window, limits.min_challenge_window, limits.max_challenge_window) {
		return Err(SpecField::ChallengeWindow);
	}
	if spec.min_round_length < round_length_floor || spec.min_round_length > spec.round_timeout / 2
	{
		return Err(SpecField::MinRoundLength);
	}
	check_allowed_trainers(spec.allowed_trainers, spec.min_trainers)
}

/// Checks an allow-list of `allowed` accounts (0: anyone may join) for a pool that needs
/// `min_trainers`: a non-empty list must name enough accounts for the pool to start. Also
/// applies when the creator replaces the list of a live pool.
///
/// # Errors
/// [`SpecField::AllowedTrainers`].
pub fn check_allowed_trainers(allowed: u32, min_trainers: u32) -> Result<(), SpecField> {
	if allowed != 0 && allowed < min_trainers {
		return Err(SpecField::AllowedTrainers);
	}
	Ok(())
}

#[cfg(test)]
mod tests {
	use super::*;

	const LIMITS: SpecLimits = SpecLimits {
		max_rounds: 100,
		max_inner_steps: 10_000,
		max_members: 32,
		min_stake_floor: 100,
		max_reward_per_round: 1_000_000,
		max_round_timeout: 1_000,
		min_challenge_window: 1,
		max_challenge_window: 500,
		max_inner_steps_per_block: 20,
	};
	const OK: SpecView = SpecView {
		rounds: 10,
		kind: KindView::DiLoCo { inner_steps: 50 },
		min_trainers: 3,
		max_trainers: 4,
		min_stake: 100,
		reward_per_round: 1_000,
		quorum_ppb: 666_666_666,
		round_timeout: 60,
		challenge_window: 8,
		min_round_length: 3,
		allowed_trainers: 0,
	};

	#[test]
	fn every_field_is_bounded() {
		assert_eq!(check_spec(&OK, &LIMITS), Ok(()));
		let cases = [
			(SpecView { rounds: 0, ..OK }, SpecField::Rounds),
			(SpecView { rounds: 101, ..OK }, SpecField::Rounds),
			(SpecView { kind: KindView::DiLoCo { inner_steps: 0 }, ..OK }, SpecField::InnerSteps),
			(
				SpecView { kind: KindView::DiLoCo { inner_steps: 10_001 }, ..OK },
				SpecField::InnerSteps,
			),
			(SpecView { max_trainers: 33, ..OK }, SpecField::TrainerBounds),
			(SpecView { min_trainers: 5, ..OK }, SpecField::TrainerBounds),
			(SpecView { min_stake: 0, ..OK }, SpecField::MinStake),
			(SpecView { reward_per_round: u128::MAX, ..OK }, SpecField::RewardPerRound),
			(SpecView { quorum_ppb: PPB / 2, ..OK }, SpecField::Quorum),
			(SpecView { quorum_ppb: PPB + 1, ..OK }, SpecField::Quorum),
			(SpecView { round_timeout: 0, ..OK }, SpecField::RoundTimeout),
			(SpecView { round_timeout: u64::MAX, ..OK }, SpecField::RoundTimeout),
			(SpecView { challenge_window: 0, ..OK }, SpecField::ChallengeWindow),
			(SpecView { challenge_window: 501, ..OK }, SpecField::ChallengeWindow),
			// 50 inner steps at 20 per block: at least ⌈2.5⌉ = 3 blocks.
			(SpecView { min_round_length: 2, ..OK }, SpecField::MinRoundLength),
			(SpecView { min_round_length: 31, ..OK }, SpecField::MinRoundLength),
			(SpecView { allowed_trainers: 2, ..OK }, SpecField::AllowedTrainers),
		];
		assert_eq!(check_spec(&SpecView { allowed_trainers: 3, ..OK }, &LIMITS), Ok(()));
		assert_eq!(check_spec(&SpecView { min_round_length: 30, ..OK }, &LIMITS), Ok(()));
		// One inner step still takes a block: nothing is final in the block it opened.
		assert_eq!(LIMITS.min_round_length_floor(1), 1);
		assert_eq!(LIMITS.min_round_length_floor(40), 2);
		let no_floor = SpecLimits { max_inner_steps_per_block: 0, ..LIMITS };
		assert_eq!(check_spec(&SpecView { min_round_length: 0, ..OK }, &no_floor), Ok(()));
		for (spec, field) in cases {
			assert_eq!(check_spec(&spec, &LIMITS), Err(field), "{spec:?}");
		}
	}
}
