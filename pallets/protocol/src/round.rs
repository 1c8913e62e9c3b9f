//! One round's state machine (`docs/architecture.md`, steps 1 and 5–8): what has happened to a
//! round, the phase it is in at a block, and what is to be done next.
//!
//! ```text
//! Upcoming ──Opened──▶ InnerPhase ──min_round_length──▶ Committing ──Supported (quorum)──▶ Final
//!                          │                                  │   ─▶ LateCommits ─▶ Challengeable
//!                          │                                  │   ─▶ Judging ─▶ Settled
//!                          └──────────Block ≥ deadline────────┴──▶ Voided
//! ```
//!
//! [`RoundState::step`] takes one [`Fact`] (a block, the round opening, the stake behind a
//! candidate, the chain's own verdict on the round) and returns the [`Action`]s it makes due,
//! each at most once and in the order of the timeline. It is pure and deterministic: no storage,
//! clock or I/O. `pallet-checkpoints` runs it to decide finality and voiding; a member runs it
//! on the blocks and events it follows to know when to verify, when challenging is over and when
//! to claim. One machine for the chain and its clients, so the two never disagree on a phase
//! (the shape of Nous Psyche's shared coordinator).
//!
//! Invariants (property-tested below): a round is final with at most one checkpoint hash, and
//! never both final and voided; no action once it is settled or voided; every action is legal
//! in the phase the round was in when the fact arrived.

use alloc::vec::Vec;

use crate::{quorum::reaches_quorum, Block, Hash32, Planck, Timeline};

/// What has happened to a round so far.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Status {
	/// Not opened yet (commits ahead of time are stored, counted when it opens).
	Upcoming,
	/// Open since block `opened_at`, its snapshot holding `round_stake` planck.
	Open {
		/// Block in which the round opened.
		opened_at: Block,
		/// Stake of the round's participant snapshot (planck).
		round_stake: Planck,
	},
	/// Final at block `at` with checkpoint `hash`.
	Final {
		/// Block of finality.
		at: Block,
		/// The final checkpoint's blake3.
		hash: Hash32,
	},
	/// Voided at block `at` (no candidate reached quorum by the deadline).
	Voided {
		/// Block in which the round was voided.
		at: Block,
	},
}

impl Status {
	/// Whether the round was voided.
	pub fn is_voided(&self) -> bool {
		matches!(self, Self::Voided { .. })
	}
}

/// The phases of a round: `Upcoming → InnerPhase → Committing → (LateCommits → Challengeable →
/// Judging → Settled) | Voided`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RoundPhase {
	/// Not opened: commits are stored and counted at open against its snapshot (in a pool
	/// without a minimum round length; see [`Timeline::accepts_commits_ahead`]).
	Upcoming,
	/// Open, within its first `min_round_length` blocks: no commit is accepted, no candidate
	/// can become final (the inner phase cannot be over).
	InnerPhase,
	/// Open: snapshot participants commit; final as soon as one candidate reaches quorum.
	Committing,
	/// Final; members of the included set may still commit late; challenges open after it
	/// (the committee is drawn from the contributors, which late commits still add to).
	LateCommits,
	/// Final; challenges can be opened.
	Challengeable,
	/// No new challenges; juries of open ones are still voting.
	Judging,
	/// Rewards credited; backing stake free.
	Settled,
	/// Missed quorum by the deadline.
	Voided,
}

impl RoundPhase {
	/// Whether the round's challenge window is not over: a challenge can be opened now
	/// ([`RoundPhase::opens_challenges`]) or once its late commits close.
	pub fn challenge_window_open(self) -> bool {
		matches!(self, Self::LateCommits | Self::Challengeable)
	}

	/// Whether a challenge against one of the round's contributions can be opened in this
	/// phase.
	pub fn opens_challenges(self) -> bool {
		self == Self::Challengeable
	}

	/// Whether nothing more happens to the round (settled or voided).
	pub fn is_over(self) -> bool {
		matches!(self, Self::Settled | Self::Voided)
	}
}

/// Something that happened, as the chain or a follower of the chain sees it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Fact {
	/// Block `n` is here: the block being built (the chain) or a newly finalized block (a
	/// follower). Blocks never go back: an older number than one already seen changes nothing.
	Block(Block),
	/// The round opened in block `at` with a participant snapshot of `round_stake` planck.
	Opened {
		/// Block in which the round opened.
		at: Block,
		/// Stake of the round's participant snapshot (planck).
		round_stake: Planck,
	},
	/// Snapshot participants holding `stake` planck in all now back candidate `candidate` (one
	/// checkpoint `hash` with one included set; the index is the caller's).
	Supported {
		/// The caller's index of the candidate.
		candidate: u32,
		/// The candidate's checkpoint blake3.
		hash: Hash32,
		/// Snapshot stake behind the candidate (planck).
		stake: Planck,
	},
	/// The chain made the round final in block `at` with `hash` (`CheckpointFinalized`).
	Finalized {
		/// Block of finality.
		at: Block,
		/// The final checkpoint's blake3.
		hash: Hash32,
	},
	/// The chain voided the round in block `at` (`RoundVoided`).
	Voided {
		/// Block in which the round was voided.
		at: Block,
	},
}

/// What a fact makes due.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Action {
	/// Candidate `candidate` reached quorum while the round was open: it is final with `hash`
	/// (the chain records it; a member expects `CheckpointFinalized`).
	Finalize {
		/// The caller's index of the candidate.
		candidate: u32,
		/// The final checkpoint's blake3.
		hash: Hash32,
	},
	/// The deadline passed without quorum: the round is voided (the chain voids it and applies
	/// the inactivity leak; a member discards its optimistic work and re-syncs).
	Void,
	/// The round is final: verify its contributions now; a failed check can be challenged until
	/// block `until` (inclusive).
	Verify {
		/// Last block in which a challenge can be opened.
		until: Block,
	},
	/// Late commits are no longer accepted.
	CloseLateCommits,
	/// No challenge can be opened any more: verification still running is pointless.
	CloseChallenges,
	/// Every challenge is over: the round's rewards are credited (chain) and claimable (member).
	Settle,
}

/// Milestones of a final round, in timeline order; each is announced once (`VERIFY` only if
/// challenges were still open when the round was seen final).
const VERIFY: u8 = 1;
const LATE_COMMITS_CLOSED: u8 = 2;
const CHALLENGES_CLOSED: u8 = 4;
const SETTLED: u8 = 8;

/// The state of one round of one pool.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RoundState {
	timeline: Timeline,
	quorum_ppb: u32,
	status: Status,
	now: Block,
	/// Milestones of a final round already announced ([`VERIFY`] …).
	done: u8,
}

impl RoundState {
	/// A round that has not opened, in a pool with `timeline` and quorum `quorum_ppb` (parts per
	/// billion of the snapshot's stake).
	pub fn new(timeline: Timeline, quorum_ppb: u32) -> Self {
		Self { timeline, quorum_ppb, status: Status::Upcoming, now: 0, done: 0 }
	}

	/// A round that opened in block `opened_at` with `round_stake` planck in its snapshot and has
	/// seen nothing since (what `pallet-checkpoints` keeps of an open round).
	pub fn open(
		timeline: Timeline,
		quorum_ppb: u32,
		opened_at: Block,
		round_stake: Planck,
	) -> Self {
		let mut s = Self::new(timeline, quorum_ppb);
		s.step(Fact::Opened { at: opened_at, round_stake });
		s
	}

	/// A round the chain made final in block `at` with `hash`, whose milestones up to block `at`
	/// are announced (what a member knows of a `FinalCheckpoint` record).
	pub fn finalized(timeline: Timeline, at: Block, hash: Hash32) -> Self {
		let mut s = Self::new(timeline, 0);
		s.step(Fact::Finalized { at, hash });
		s
	}

	/// What has happened to the round.
	pub fn status(&self) -> Status {
		self.status
	}

	/// The latest block seen.
	pub fn now(&self) -> Block {
		self.now
	}

	/// Block at which the open round is voided unless final (`None` unless open).
	pub fn deadline(&self) -> Option<Block> {
		match self.status {
			Status::Open { opened_at, .. } => Some(self.timeline.deadline(opened_at)),
			_ => None,
		}
	}

	/// Whether nothing more happens to the round: voided, or settled and announced so.
	pub fn is_over(&self) -> bool {
		matches!(self.status, Status::Voided { .. }) || self.done & SETTLED != 0
	}

	/// Last block in which a challenge of the final round can be opened (`None` unless final).
	pub fn challenges_until(&self) -> Option<Block> {
		match self.status {
			Status::Final { at, .. } => Some(self.timeline.challenges_until(at)),
			_ => None,
		}
	}

	/// The round's phase at block `now` (which may be later than any block seen: a follower
	/// asks about the block it is at).
	pub fn phase(&self, now: Block) -> RoundPhase {
		let t = &self.timeline;
		match self.status {
			Status::Upcoming => RoundPhase::Upcoming,
			Status::Open { opened_at, .. }
				if now < t.deadline(opened_at) && now < t.commits_from(opened_at) =>
			{
				RoundPhase::InnerPhase
			},
			Status::Open { opened_at, .. } if now < t.deadline(opened_at) => RoundPhase::Committing,
			Status::Open { .. } | Status::Voided { .. } => RoundPhase::Voided,
			Status::Final { at, .. } if now <= t.late_commits_until(at) => RoundPhase::LateCommits,
			Status::Final { at, .. } if now <= t.challenges_until(at) => RoundPhase::Challengeable,
			Status::Final { at, .. } if now < t.settle_at(at) => RoundPhase::Judging,
			Status::Final { .. } => RoundPhase::Settled,
		}
	}

	/// Applies `fact` and returns the actions it makes due, in timeline order. A fact that does
	/// not fit the round's state (a second opening, support for an unopened or closed round, a
	/// finality that contradicts the recorded one) changes nothing and returns nothing.
	pub fn step(&mut self, fact: Fact) -> Vec<Action> {
		let mut out = Vec::new();
		if self.is_over() {
			self.now = self.now.max(fact_block(&fact));
			return out;
		}
		match fact {
			Fact::Block(n) => self.now = self.now.max(n),
			Fact::Opened { at, round_stake } => {
				if self.status == Status::Upcoming {
					self.status = Status::Open { opened_at: at, round_stake };
					self.now = self.now.max(at);
				}
			},
			Fact::Supported { candidate, hash, stake } => {
				if let Status::Open { round_stake, .. } = self.status {
					if self.phase(self.now) == RoundPhase::Committing
						&& reaches_quorum(stake, round_stake, self.quorum_ppb)
					{
						self.status = Status::Final { at: self.now, hash };
						out.push(Action::Finalize { candidate, hash });
					}
				}
			},
			Fact::Finalized { at, hash } => {
				if matches!(self.status, Status::Upcoming | Status::Open { .. }) {
					self.status = Status::Final { at, hash };
					self.now = self.now.max(at);
				}
			},
			Fact::Voided { at } => {
				if matches!(self.status, Status::Upcoming | Status::Open { .. }) {
					self.status = Status::Voided { at };
					self.now = self.now.max(at);
					out.push(Action::Void);
					return out;
				}
			},
		}
		self.advance(&mut out);
		out
	}

	/// Announces what the latest block makes due: the void of an open round past its deadline,
	/// the milestones of a final one.
	fn advance(&mut self, out: &mut Vec<Action>) {
		let phase = self.phase(self.now);
		match self.status {
			Status::Open { .. } if phase == RoundPhase::Voided => {
				self.status = Status::Voided { at: self.now };
				out.push(Action::Void);
			},
			Status::Final { at, .. } => {
				let until = self.timeline.challenges_until(at);
				// A round whose challenges closed before it was seen final has nothing left to
				// verify: its `Verify` is never announced.
				if self.done & VERIFY == 0 {
					self.done |= VERIFY;
					if phase.challenge_window_open() {
						out.push(Action::Verify { until });
					}
				}
				let due = [
					(
						LATE_COMMITS_CLOSED,
						phase != RoundPhase::LateCommits,
						Action::CloseLateCommits,
					),
					(CHALLENGES_CLOSED, !phase.challenge_window_open(), Action::CloseChallenges),
					(SETTLED, phase == RoundPhase::Settled, Action::Settle),
				];
				for (bit, reached, action) in due {
					if reached && self.done & bit == 0 {
						self.done |= bit;
						out.push(action);
					}
				}
			},
			_ => {},
		}
	}
}

/// The block a fact names, if any (0 for facts without one).
fn fact_block(fact: &Fact) -> Block {
	match *fact {
		Fact::Block(n) => n,
		Fact::Opened { at, .. } | Fact::Finalized { at, .. } | Fact::Voided { at } => at,
		Fact::Supported { .. } => 0,
	}
}

#[cfg(test)]
mod tests {
	use super::*;
	use crate::PPB;
	use proptest::prelude::*;

	const TWO_THIRDS: u32 = 666_666_666;

	fn timeline() -> Timeline {
		Timeline::for_pool(10, 5, 2, 20)
	}

	#[test]
	fn phases_in_order() {
		let t = timeline();
		assert_eq!(t.voting_period, 30);
		let open = RoundState::open(t, TWO_THIRDS, 100, 3);
		assert_eq!(open.deadline(), Some(110));
		assert_eq!(open.phase(109), RoundPhase::Committing);
		assert_eq!(open.phase(110), RoundPhase::Voided);
		let f = RoundState::finalized(t, 105, [1; 32]);
		assert_eq!(f.phase(110), RoundPhase::LateCommits);
		assert_eq!(f.phase(111), RoundPhase::Challengeable);
		assert_eq!(f.phase(115), RoundPhase::Challengeable);
		assert_eq!(f.phase(116), RoundPhase::Judging);
		assert_eq!(f.phase(t.settle_at(105)), RoundPhase::Settled);
		assert!(f.phase(115).challenge_window_open() && !f.phase(116).challenge_window_open());
	}

	#[test]
	fn a_round_walks_its_timeline_once() {
		let t = timeline();
		let mut s = RoundState::new(t, TWO_THIRDS);
		assert_eq!(s.step(Fact::Supported { candidate: 0, hash: [1; 32], stake: 3 }), []);
		assert_eq!(s.step(Fact::Opened { at: 100, round_stake: 3 }), []);
		assert_eq!(s.step(Fact::Block(101)), []);
		assert_eq!(s.step(Fact::Supported { candidate: 0, hash: [1; 32], stake: 1 }), []);
		assert_eq!(
			s.step(Fact::Supported { candidate: 1, hash: [2; 32], stake: 2 }),
			[Action::Finalize { candidate: 1, hash: [2; 32] }, Action::Verify { until: 111 }]
		);
		assert_eq!(s.status(), Status::Final { at: 101, hash: [2; 32] });
		// A second candidate reaching quorum changes nothing: one final hash.
		assert_eq!(s.step(Fact::Supported { candidate: 0, hash: [1; 32], stake: 3 }), []);
		assert_eq!(s.step(Fact::Block(106)), []);
		assert_eq!(s.step(Fact::Block(107)), [Action::CloseLateCommits]);
		assert_eq!(s.step(Fact::Block(112)), [Action::CloseChallenges]);
		assert_eq!(s.step(Fact::Block(t.settle_at(101))), [Action::Settle]);
		assert_eq!(s.step(Fact::Block(u64::MAX)), []);
		assert_eq!(s.step(Fact::Voided { at: 200 }), []);
	}

	#[test]
	fn no_candidate_is_final_within_the_minimum_round_length() {
		let t = timeline().with_min_round_length(4);
		let mut s = RoundState::open(t, TWO_THIRDS, 100, 3);
		assert_eq!(s.phase(100), RoundPhase::InnerPhase);
		assert_eq!(s.phase(103), RoundPhase::InnerPhase);
		assert_eq!(s.phase(104), RoundPhase::Committing);
		assert_eq!(s.step(Fact::Block(103)), []);
		assert_eq!(s.step(Fact::Supported { candidate: 0, hash: [1; 32], stake: 3 }), []);
		assert!(matches!(s.status(), Status::Open { .. }));
		assert_eq!(s.step(Fact::Block(104)), []);
		assert_eq!(
			s.step(Fact::Supported { candidate: 0, hash: [1; 32], stake: 3 }),
			[Action::Finalize { candidate: 0, hash: [1; 32] }, Action::Verify { until: 114 }]
		);
		// A length past the timeout: the round can only be voided.
		let never = RoundState::open(timeline().with_min_round_length(10), TWO_THIRDS, 100, 3);
		assert_eq!(never.phase(109), RoundPhase::InnerPhase);
		assert_eq!(never.phase(110), RoundPhase::Voided);
	}

	#[test]
	fn the_deadline_voids_an_open_round_and_support_after_it_is_too_late() {
		let mut s = RoundState::open(timeline(), TWO_THIRDS, 100, 3);
		assert_eq!(s.step(Fact::Block(110)), [Action::Void]);
		assert_eq!(s.status(), Status::Voided { at: 110 });
		assert_eq!(s.step(Fact::Supported { candidate: 0, hash: [1; 32], stake: 3 }), []);
		// Support that arrives in the deadline block itself does not finalize either.
		let mut late = RoundState::open(timeline(), TWO_THIRDS, 100, 3);
		late.now = 110;
		assert_eq!(
			late.step(Fact::Supported { candidate: 0, hash: [1; 32], stake: 3 }),
			[Action::Void]
		);
	}

	#[test]
	fn a_follower_that_learns_of_finality_late_verifies_only_while_challenges_are_open() {
		let t = timeline();
		let mut s = RoundState::new(t, 0);
		s.step(Fact::Block(116));
		assert_eq!(
			s.step(Fact::Finalized { at: 105, hash: [1; 32] }),
			[Action::CloseLateCommits, Action::CloseChallenges]
		);
		let mut s = RoundState::new(t, 0);
		s.step(Fact::Block(108));
		assert_eq!(
			s.step(Fact::Finalized { at: 105, hash: [1; 32] }),
			[Action::Verify { until: 115 }]
		);
	}

	fn fact() -> impl Strategy<Value = Fact> {
		let hash = (0u8..3).prop_map(|h| [h; 32]);
		prop_oneof![
			4 => (0u64..200).prop_map(Fact::Block),
			1 => (0u64..200, 0u128..10).prop_map(|(at, round_stake)| Fact::Opened { at, round_stake }),
			3 => (0u32..3, hash.clone(), 0u128..12)
				.prop_map(|(candidate, hash, stake)| Fact::Supported { candidate, hash, stake }),
			1 => (0u64..200, hash).prop_map(|(at, hash)| Fact::Finalized { at, hash }),
			1 => (0u64..200).prop_map(|at| Fact::Voided { at }),
		]
	}

	proptest! {
		#[test]
		fn random_fact_sequences_keep_the_rounds_invariants(
			facts in proptest::collection::vec(fact(), 0..60),
			quorum in 1..=PPB,
			timeout in 0u64..30, window in 0u64..30, delay in 0u64..5, margin in 0u64..30,
			length in 0u64..10,
		) {
			let t = Timeline::for_pool(timeout, window, delay, margin).with_min_round_length(length);
			let mut s = RoundState::new(t, quorum);
			let (mut finals, mut voids, mut last_milestone) = (0, 0, 0);
			let mut final_hash = None;
			for fact in facts {
				let before = s;
				let phase = before.phase(before.now);
				let actions = s.step(fact);
				prop_assert!(s.now >= before.now, "blocks never go back");
				if before.is_over() {
					prop_assert!(actions.is_empty(), "no action after the round is over");
				}
				if let (Some(h), Status::Final { hash, .. }) = (final_hash, s.status) {
					prop_assert_eq!(h, hash, "one final hash per round");
				}
				for a in &actions {
					match *a {
						Action::Finalize { hash, .. } => {
							finals += 1;
							let Fact::Supported { stake, .. } = fact else {
								return Err(TestCaseError::fail("finalized without support"));
							};
							let Status::Open { round_stake, opened_at } = before.status else {
								return Err(TestCaseError::fail("finalized a round not open"));
							};
							prop_assert_eq!(phase, RoundPhase::Committing);
							prop_assert!(before.now >= opened_at + length, "final within its length");
							prop_assert!(reaches_quorum(stake, round_stake, quorum));
							final_hash = Some(hash);
						},
						Action::Void => {
							voids += 1;
							let was_open =
								matches!(before.status, Status::Upcoming | Status::Open { .. });
							prop_assert!(was_open, "voided a round not open");
						},
						Action::Verify { until } => {
							prop_assert!(last_milestone < 1);
							last_milestone = 1;
							prop_assert!(s.phase(s.now).challenge_window_open());
							prop_assert!(s.now <= until);
						},
						Action::CloseLateCommits => {
							prop_assert!(last_milestone < 2);
							last_milestone = 2;
							prop_assert!(s.phase(s.now) != RoundPhase::LateCommits);
						},
						Action::CloseChallenges => {
							prop_assert!(last_milestone < 3);
							last_milestone = 3;
							prop_assert!(!s.phase(s.now).challenge_window_open());
						},
						Action::Settle => {
							prop_assert!(last_milestone < 4);
							last_milestone = 4;
							prop_assert_eq!(s.phase(s.now), RoundPhase::Settled);
						},
					}
					if !matches!(a, Action::Finalize { .. } | Action::Void) {
						let is_final = matches!(s.status, Status::Final { .. });
						prop_assert!(is_final, "a milestone of a round not final");
					}
				}
				if let Status::Final { hash, .. } = s.status {
					final_hash.get_or_insert(hash);
				}
				prop_assert!(finals <= 1 && voids <= 1 && finals + voids <= 1);
				let is_final = matches!(s.status, Status::Final { .. });
				prop_assert!(!(voids == 1 && is_final), "final and voided");
			}
		}
	}
}
