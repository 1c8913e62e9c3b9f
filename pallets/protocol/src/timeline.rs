//! The life of one round in blocks (`docs/architecture.md`, steps 5–8); the phase it is in at a
//! block is [`crate::round::RoundState::phase`].
//!
//! ```text
//! opened ──min_round_length──▶ commits accepted ──▶ deadline (opened + round_timeout): voided
//!                                                    unless final
//!   final at f ──W──▶ late commits end ──W──▶ challenges end
//!   challenge opened at c ──jury_delay──▶ jury drawn ──voting_period──▶ votes end
//!   ruling at v ──appeal_period──▶ executed, or (appealed) appeal committee drawn
//!   ──voting_period──▶ appeal votes end
//!   settle_at(f) = f + 2W + jury_delay + voting_period + appeal_period + voting_period + 1
//!   (without appeals, `appeal_period = 0`: f + 2W + jury_delay + voting_period + 1)
//! ```
//!
//! - No commit to a round is accepted in its first `min_round_length` blocks (its inner phase
//!   cannot be over), so no round is final sooner: a party holding a pool's quorum alone
//!   finalizes at most one round per `min_round_length` blocks, not a pool's rounds in one
//!   block. With `min_round_length = 0` a commit may come at once, or ahead of the round's
//!   opening (counted when it opens).
//! - Late commits (a member in the included set whose commit lands after finality) are accepted
//!   for `W` blocks; challenges for `2W`, so even the last late contributor can be challenged for
//!   `W` blocks (a late commit is never a free reward).
//! - The voting period is `round_timeout + vote_margin`: a round's inner phase fits in its
//!   timeout, so a juror with comparable hardware can replay one member's inner phase within it.
//! - A committee's ruling (guilty or innocent) executes `appeal_period` blocks after it is
//!   reached, unless the losing party appeals before; an appeal is judged by a larger committee
//!   within one more voting period, and its verdict is final. So no slash executes before the
//!   party it hurts could appeal.
//! - Stake that backs a round stays slashable until `slashable_until(deadline)` =
//!   `settle_at(deadline)`: finality never comes after the deadline, so every challenge on the
//!   round has a verdict by then.

use crate::Block;

/// The most voided rounds per pool whose participant snapshot the chain keeps for equivocation
/// reports (`pallet-checkpoints::KeptSnapshots`); see [`Timeline::keeps_voided_snapshots`].
pub const KEPT_VOIDED_SNAPSHOTS: u32 = 16;

/// Fewest blocks between opening a challenge and drawing its committee. The draw at `d` is
/// seeded by the randomness of block `d − 1` (its author's VRF), which its author can compute
/// as soon as the parent's randomness is known: `d − 1` must come after the block that
/// includes the challenge, or that block's author would know the committee of every challenge
/// it chooses to include. Colluding authors of consecutive blocks share their VRF outputs, so a
/// runtime draws later than this floor: more blocks after opening than it has block authors
/// (the Synod runtime's `JuryDelay` is `MAX_VALIDATORS + 1`), so that one of them is an honest
/// author's.
pub const MIN_JURY_DELAY: Block = 2;

/// Fewest blocks of a non-zero appeal period: an appeal must be possible in at least one block
/// that still leaves [`MIN_JURY_DELAY`] blocks before the ruling's execution block, in which the
/// appeal committee is drawn at the latest.
pub const MIN_APPEAL_PERIOD: Block = MIN_JURY_DELAY + 1;

/// A pool's timing rules, in blocks.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Timeline {
	/// Blocks after a round opens before it is voided if not final (≥ 1).
	pub round_timeout: Block,
	/// Blocks after a round opens during which no commit to it is accepted: the shortest inner
	/// phase the pool's creator allows (`PoolTerms::min_round_length`). 0: commits at once, and
	/// ahead of the opening.
	pub min_round_length: Block,
	/// `W`: blocks after finality during which late commits are accepted; challenges are
	/// accepted for `2W`.
	pub challenge_window: Block,
	/// Blocks between opening a challenge and drawing its jury (≥ [`MIN_JURY_DELAY`]: the seed
	/// is the randomness of a block after the one that includes the challenge).
	pub jury_delay: Block,
	/// Blocks the jury has to vote once drawn.
	pub voting_period: Block,
	/// Blocks between a committee's ruling and its execution, during which the losing party
	/// may appeal (0: no appeals, a ruling executes at once; else ≥ [`MIN_APPEAL_PERIOD`]).
	pub appeal_period: Block,
}

/// The runtime's jury timing, in blocks, the same for every pool (`pallet-training-pools`'s
/// `JuryDelay`, `VoteMargin` and `AppealPeriod` constants).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct JuryTiming {
	/// Blocks between opening a challenge and drawing its committee.
	pub jury_delay: Block,
	/// Blocks a committee gets on top of one round timeout to vote.
	pub vote_margin: Block,
	/// Blocks after a ruling during which the losing party may appeal (0: no appeals).
	pub appeal_period: Block,
}

impl Timeline {
	/// The timeline of a pool whose terms set `round_timeout`, `challenge_window` and
	/// `min_round_length`, under the runtime's `jury` timing: the one the chain runs for the
	/// pool and a member follows (`synod_chain::Chain::timeline`).
	pub fn of_pool(
		round_timeout: Block,
		challenge_window: Block,
		min_round_length: Block,
		jury: JuryTiming,
	) -> Self {
		Self::for_pool(round_timeout, challenge_window, jury.jury_delay, jury.vote_margin)
			.with_min_round_length(min_round_length)
			.with_appeal_period(jury.appeal_period)
	}

	/// The timeline of a pool with `round_timeout` and `challenge_window` (from its spec);
	/// `voting_period = round_timeout + vote_margin`.
	pub fn for_pool(
		round_timeout: Block,
		challenge_window: Block,
		jury_delay: Block,
		vote_margin: Block,
	) -> Self {
		Self {
			round_timeout,
			min_round_length: 0,
			challenge_window,
			jury_delay: jury_delay.max(MIN_JURY_DELAY),
			voting_period: round_timeout.saturating_add(vote_margin),
			appeal_period: 0,
		}
	}

	/// This timeline with rulings that the losing party may appeal within `blocks` blocks (0:
	/// no appeals; a shorter non-zero period is raised to [`MIN_APPEAL_PERIOD`]).
	pub fn with_appeal_period(self, blocks: Block) -> Self {
		let appeal_period = if blocks == 0 { 0 } else { blocks.max(MIN_APPEAL_PERIOD) };
		Self { appeal_period, ..self }
	}

	/// Whether a ruling can be appealed (`appeal_period > 0`).
	pub fn appeals(&self) -> bool {
		self.appeal_period > 0
	}

	/// This timeline with rounds that accept commits only `blocks` after they open.
	pub fn with_min_round_length(self, blocks: Block) -> Self {
		Self { min_round_length: blocks, ..self }
	}

	/// First block in which a commit to a round opened at `opened_at` is accepted, and so the
	/// earliest block of its finality.
	pub fn commits_from(&self, opened_at: Block) -> Block {
		opened_at.saturating_add(self.min_round_length)
	}

	/// Blocks an agreed included set must leave before the deadline for commits off it to be
	/// judged (`leak::agreed_in_time`): the runtime's `most` (`RecommitPeriod`), at most half
	/// of the blocks in which a round accepts commits (`round_timeout − min_round_length`), so
	/// that a set fixed by commits in the first half of that span is always in time. With the
	/// runtime's period alone, a pool whose timeout was shorter than it plus its minimum round
	/// length never had a set in time: commits over other sets (a blocking minority's garbage)
	/// were never judged and a first commit was never held to the agreed set. At least one
	/// block (unless `most` is 0): in a pool whose rounds accept commits in one block only, a
	/// set fixed in it leaves no block to commit over it and judges nothing.
	pub fn recommit_blocks(&self, most: Block) -> Block {
		// At least one block: a set fixed in the span's last block leaves none.
		let half = (self.round_timeout.saturating_sub(self.min_round_length) / 2).max(1);
		most.min(half)
	}

	/// Whether a member may commit to a round before it opens (counted when it opens): only
	/// in a pool without a minimum round length, since a round's length counts from its
	/// opening.
	pub fn accepts_commits_ahead(&self) -> bool {
		self.min_round_length == 0
	}

	/// Block at which a round opened at `opened_at` is voided unless final.
	pub fn deadline(&self, opened_at: Block) -> Block {
		opened_at.saturating_add(self.round_timeout.max(1))
	}

	/// Last block in which a late commit to a round final at `finalized_at` is accepted.
	pub fn late_commits_until(&self, finalized_at: Block) -> Block {
		finalized_at.saturating_add(self.challenge_window)
	}

	/// First block in which a challenge against a round final at `finalized_at` can be opened:
	/// the one after its late commits close, when its contributors (from whom committees are
	/// drawn) are final.
	pub fn challenges_from(&self, finalized_at: Block) -> Block {
		self.late_commits_until(finalized_at).saturating_add(1)
	}

	/// Last block in which a challenge against a round final at `finalized_at` can be opened.
	pub fn challenges_until(&self, finalized_at: Block) -> Block {
		finalized_at.saturating_add(self.challenge_window.saturating_mul(2))
	}

	/// Block whose `on_initialize` draws the jury of a challenge opened at `opened_at`, from the
	/// randomness of its parent block.
	pub fn jury_drawn_at(&self, opened_at: Block) -> Block {
		opened_at.saturating_add(self.jury_delay.max(MIN_JURY_DELAY))
	}

	/// Block at which a challenge opened at `opened_at` expires if undecided.
	pub fn votes_until(&self, opened_at: Block) -> Block {
		self.jury_drawn_at(opened_at).saturating_add(self.voting_period)
	}

	/// Block by which the ruling of a challenge opened at `opened_at` is executed, or its appeal
	/// committee drawn: `appeal_period` after the latest end of its first vote.
	pub fn rulings_until(&self, opened_at: Block) -> Block {
		self.votes_until(opened_at).saturating_add(self.appeal_period)
	}

	/// Block at which a challenge opened at `opened_at` is over at the latest: its appeal
	/// committee's vote ends (`votes_until` without appeals).
	pub fn appeal_votes_until(&self, opened_at: Block) -> Block {
		if self.appeals() {
			self.rulings_until(opened_at).saturating_add(self.voting_period)
		} else {
			self.votes_until(opened_at)
		}
	}

	/// Block at which a round final at `finalized_at` is settled: after the last challenge that
	/// can be opened on it is over, appeal included.
	pub fn settle_at(&self, finalized_at: Block) -> Block {
		self.appeal_votes_until(self.challenges_until(finalized_at)).saturating_add(1)
	}

	/// Block until which the stake backing a round with `deadline` must stay held (and
	/// slashable).
	pub fn slashable_until(&self, deadline: Block) -> Block {
		self.settle_at(deadline)
	}

	/// Whether a voided round's snapshot outlives the window in which its stake is slashable
	/// although a pool keeps only [`KEPT_VOIDED_SNAPSHOTS`] of them (`pallet-checkpoints`): rounds
	/// are voided at most once per `round_timeout` blocks, and a kept snapshot is displaced only
	/// by the `KEPT_VOIDED_SNAPSHOTS`-th void after its own, so the window
	/// (`slashable_until(d) − d`, blocks) must not exceed `KEPT_VOIDED_SNAPSHOTS × round_timeout`.
	/// A pool spec for which this is false is refused.
	pub fn keeps_voided_snapshots(&self) -> bool {
		self.slashable_until(0)
			<= self.round_timeout.max(1).saturating_mul(u64::from(KEPT_VOIDED_SNAPSHOTS))
	}

	/// Block after which nothing of the rounds opened at or before `at` can be challenged,
	/// judged or slashed any more: `slashable_until(deadline(at))` (a round open at `at` is
	/// final or voided by its deadline). A member that left at `at` and a pool that ended at
	/// `at` keep their records (keys, deposits) until then.
	pub fn settled_by(&self, at: Block) -> Block {
		self.slashable_until(self.deadline(at))
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn blocks_in_order() {
		let t = Timeline::for_pool(10, 5, 2, 20);
		assert_eq!(t.voting_period, 30);
		assert_eq!(t.deadline(100), 110);
		assert_eq!(t.settle_at(105), 105 + 10 + 2 + 30 + 1);
		assert_eq!(t.late_commits_until(105), 110);
		assert_eq!(t.challenges_until(105), 115);
		// The last challenge (opened at 115) expires before settlement.
		assert!(t.votes_until(t.challenges_until(105)) < t.settle_at(105));
		assert!(t.slashable_until(110) >= t.settle_at(110));
		// A voided round's window: 2W + jury delay + voting period + 1 = 10 + 2 + 30 + 1 ≤ 16 × 10.
		assert!(t.keeps_voided_snapshots());
		let long = Timeline::for_pool(20, 200, 1, 10);
		assert!(!long.keeps_voided_snapshots(), "400 + 1 + 30 + 1 > 16 × 20");
		// A round open at 100 is final by its deadline (110) at the latest: everything of it is
		// settled by `settled_by(100)`.
		assert_eq!(t.settled_by(100), t.settle_at(110));
		assert!(t.settled_by(100) >= t.settle_at(105));
		// Commits from the opening block, and ahead of it, unless a round has a length.
		assert_eq!(t.commits_from(100), 100);
		assert!(t.accepts_commits_ahead());
		let paced = t.with_min_round_length(4);
		assert_eq!(paced.commits_from(100), 104);
		assert!(!paced.accepts_commits_ahead());
		assert_eq!(paced.deadline(100), t.deadline(100), "the deadline counts from the opening");
		// The recommit period: the runtime's, at most half of the commit span.
		assert_eq!(t.recommit_blocks(3), 3);
		assert_eq!(t.recommit_blocks(40), 5);
		assert_eq!(paced.recommit_blocks(40), 3);
		// A one-block commit span: a set fixed in it judges nothing.
		let one = Timeline::for_pool(2, 5, 2, 20).with_min_round_length(1);
		assert_eq!(one.recommit_blocks(40), 1);
		assert!(!crate::leak::agreed_in_time(one.commits_from(100), one.deadline(100), 1));
		// A set fixed when the span opens is in time whatever the runtime's period.
		for most in [0, 1, 40, u64::MAX] {
			for p in [t, paced] {
				let opened = 100;
				let fixed = p.commits_from(opened);
				assert!(crate::leak::agreed_in_time(
					fixed,
					p.deadline(opened),
					p.recommit_blocks(most)
				));
			}
		}
	}

	#[test]
	fn an_appeal_is_over_before_the_round_settles() {
		let t = Timeline::for_pool(10, 5, 2, 20).with_appeal_period(6);
		assert!(t.appeals());
		assert_eq!(t.rulings_until(100), 100 + 2 + 30 + 6);
		assert_eq!(t.appeal_votes_until(100), 100 + 2 + 30 + 6 + 30);
		assert_eq!(t.settle_at(105), 115 + 2 + 30 + 6 + 30 + 1);
		assert!(t.appeal_votes_until(t.challenges_until(105)) < t.settle_at(105));
		assert_eq!(Timeline::for_pool(10, 5, 2, 20).with_appeal_period(1).appeal_period, 3);
		let none = Timeline::for_pool(10, 5, 2, 20).with_appeal_period(0);
		assert!(!none.appeals());
		assert_eq!(none.appeal_votes_until(100), none.votes_until(100));
	}

	#[test]
	fn saturates() {
		let t = Timeline::for_pool(u64::MAX, u64::MAX, u64::MAX, u64::MAX);
		assert_eq!(t.settle_at(u64::MAX), u64::MAX);
		assert_eq!(Timeline::for_pool(0, 0, 0, 0).deadline(5), 6, "timeout is at least 1");
	}
}
