//! The inactivity leak (`docs/architecture.md`, "Liveness"): a member of a voided round's snapshot
//! that committed nothing for it loses `penalty_ppb` of its snapshot stake, and after
//! `drop_after` such rounds in a row it is dropped from the pool, so it no longer counts in the
//! next snapshots and the honest stake that remains reaches quorum again.
//!
//! A commit counts as silence when a strict majority of the snapshot stake committed one
//! candidate (one hash on one included set, [`majority_candidate`]), the commit is over that
//! same included set with another hash, and no equivocation was proved in the round by the
//! time its stake stops being slashable ([`at_void`], [`AtVoid::Unmatched`]). Over one included
//! set, honest members compute one hash (they aggregate the same payloads bit for bit), unless
//! an equivocator's two payloads split them: hence the excuse.
//!
//! A commit over another included set is judged the same way only when that majority
//! candidate's set is the round's agreed set ([`crate::agreement`]) and the agreed set was fixed
//! in time ([`agreed_in_time`]): every committer of another set could then commit once more over
//! it, and every payload of it was attested by an honest member that serves it
//! (`docs/architecture.md`, "Liveness"). Before that the chain cannot tell garbage over another
//! set from an honest member that could not fetch a payload (withheld from it) and committed a
//! smaller set: such a commit is present.
//!
//! A final round leaks its silent included members ([`at_settlement`]): a participant whose
//! payload the final checkpoint aggregated but that recorded no commit for the round by the
//! time it is settled. Such a member moved the model without answering for it with a commit, as
//! a withholder does; it is leaked like a silent participant of a voided round (and its missed
//! round counted). A commit of any hash, also one recorded after the late-commit window, makes
//! it present: an honest member that is only slow is not leaked.

use crate::{arith::ppb_floor, Planck};

/// Parameters of the inactivity leak.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct LeakRule {
	/// Share of the snapshot stake slashed per voided round without a commit, in ppb.
	pub penalty_ppb: u32,
	/// Consecutive voided rounds without a commit after which the member is dropped (≥ 1).
	pub drop_after: u32,
}

impl LeakRule {
	/// Planck slashed from a member with `stake` that did not commit in a voided round.
	pub fn penalty(&self, stake: Planck) -> Planck {
		ppb_floor(stake, self.penalty_ppb)
	}

	/// After a voided round: the member's new count of consecutive missed voided rounds, and
	/// whether it is dropped. `committed` resets the count.
	pub fn after_voided_round(&self, missed_before: u32, committed: bool) -> (u32, bool) {
		if committed {
			return (0, false);
		}
		let missed = missed_before.saturating_add(1);
		(missed, missed >= self.drop_after.max(1))
	}
}

/// The candidate (index into `candidate_stakes`, each the planck that committed it) backed by
/// more than half of `round_stake` (planck, the snapshot's total): at most one can be. `None`
/// when no candidate holds a strict majority.
pub fn majority_candidate(round_stake: Planck, candidate_stakes: &[Planck]) -> Option<usize> {
	// 2s > R ⇔ s > ⌊R / 2⌋ for integers, without overflow.
	candidate_stakes.iter().position(|s| *s > round_stake / 2)
}

/// Whether an agreed included set fixed in block `fixed_at` left the committers of other sets
/// `recommit_blocks` blocks in which to commit over it before the round's `deadline` (the first
/// block in which no commit is accepted): `fixed_at + recommit_blocks < deadline`. Without
/// overflow; blocks are block numbers.
pub fn agreed_in_time(fixed_at: u64, deadline: u64, recommit_blocks: u64) -> bool {
	fixed_at.saturating_add(recommit_blocks) < deadline
}

/// The leak's reading ([`VoidedCommit`]) of a participant's commit in a voided round.
///
/// - `backed`: the index (into the round's candidates) of the candidate its commit backs, if
///   it recorded one before the deadline; `committed`: whether it recorded any commit (one
///   that backs no candidate, e.g. ahead of a round it was not in, is still a commit);
/// - `majority`: the candidate a strict majority of the snapshot stake backs
///   ([`majority_candidate`]), if any;
/// - `same_set(i)`: whether candidate `i` is over the majority candidate's included set;
/// - `majority_agreed`: whether the majority candidate's set is the round's agreed set and it
///   was fixed [`agreed_in_time`].
pub fn voided_commit(
	backed: Option<usize>,
	committed: bool,
	majority: Option<usize>,
	same_set: impl Fn(usize) -> bool,
	majority_agreed: bool,
) -> VoidedCommit {
	match (backed, majority) {
		(None, _) if !committed => VoidedCommit::None,
		(Some(i), Some(m)) if i == m => VoidedCommit::Majority,
		(Some(i), Some(_)) if same_set(i) => VoidedCommit::OtherHashSameSet,
		(Some(_), Some(_)) if majority_agreed => VoidedCommit::OffTheAgreedSet,
		_ => VoidedCommit::Other,
	}
}

/// What the leak makes of one participant of a voided round when the round is voided.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum AtVoid {
	/// It committed the majority candidate, over another included set that is not judged, or
	/// there was no majority: present (its count resets).
	Present,
	/// It committed nothing: leaked now.
	Silent,
	/// It committed another hash over the majority candidate's included set, or stayed on
	/// another set than the majority's agreed one: leaked like a silent one (and its missed
	/// round counted) once the round's stake stops being slashable, unless an equivocation was
	/// proved in the round by then; its count is unchanged until that decision.
	Unmatched,
}

/// A participant's commit in a voided round, as the leak sees it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum VoidedCommit {
	/// No commit before the deadline.
	None,
	/// It backs the majority candidate.
	Majority,
	/// Another hash over the majority candidate's included set.
	OtherHashSameSet,
	/// Another included set than the majority candidate's, which is the round's agreed set,
	/// fixed in time to commit over it ([`agreed_in_time`]).
	OffTheAgreedSet,
	/// Another included set, not judged (no agreed set, or one fixed too late or not the
	/// majority's), or no majority candidate.
	Other,
}

/// The leak's reading of a participant's commit in a voided round.
pub fn at_void(commit: VoidedCommit) -> AtVoid {
	match commit {
		VoidedCommit::None => AtVoid::Silent,
		VoidedCommit::OtherHashSameSet | VoidedCommit::OffTheAgreedSet => AtVoid::Unmatched,
		VoidedCommit::Majority | VoidedCommit::Other => AtVoid::Present,
	}
}

/// Whether a participant of a final round is leaked when the round is settled: its payload was
/// aggregated (`included`: its index is in the final checkpoint's included set) and it recorded
/// no commit for the round (`committed`: any hash, over any included set) by then.
pub fn at_settlement(included: bool, committed: bool) -> bool {
	included && !committed
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn only_a_strict_majority_is_a_reference() {
		assert_eq!(majority_candidate(100, &[40, 60]), Some(1));
		assert_eq!(majority_candidate(100, &[50, 50]), None, "a tie is no majority");
		assert_eq!(majority_candidate(100, &[35, 25, 40]), None, "honest split, adversary most");
		assert_eq!(majority_candidate(101, &[51, 50]), Some(0));
		assert_eq!(majority_candidate(0, &[]), None);
		assert_eq!(majority_candidate(Planck::MAX, &[Planck::MAX / 2 + 1]), Some(0));
		assert_eq!(majority_candidate(Planck::MAX, &[Planck::MAX / 2]), None);
		assert_eq!(at_void(VoidedCommit::None), AtVoid::Silent);
		assert_eq!(at_void(VoidedCommit::Majority), AtVoid::Present);
		assert_eq!(at_void(VoidedCommit::OtherHashSameSet), AtVoid::Unmatched);
		assert_eq!(at_void(VoidedCommit::Other), AtVoid::Present, "another set is not judged");
	}

	#[test]
	fn another_set_is_judged_only_against_a_majority_over_an_agreed_set_fixed_in_time() {
		// Candidates 0 (the majority, set A), 1 (set A, another hash), 2 (set B).
		let same_set = |i: usize| i <= 1;
		let read =
			|backed, agreed| voided_commit(backed, backed.is_some(), Some(0), same_set, agreed);
		assert_eq!(read(Some(2), true), VoidedCommit::OffTheAgreedSet);
		assert_eq!(at_void(VoidedCommit::OffTheAgreedSet), AtVoid::Unmatched);
		assert_eq!(read(Some(2), false), VoidedCommit::Other, "no agreed set in time: present");
		assert_eq!(read(Some(1), false), VoidedCommit::OtherHashSameSet);
		assert_eq!(read(Some(0), true), VoidedCommit::Majority);
		assert_eq!(read(None, true), VoidedCommit::None);
		assert_eq!(voided_commit(None, true, Some(0), same_set, true), VoidedCommit::Other);
		assert_eq!(voided_commit(Some(2), true, None, same_set, true), VoidedCommit::Other);
		// The fix must leave `recommit_blocks` blocks before the deadline (commits end at it).
		assert!(agreed_in_time(100, 110, 9));
		assert!(!agreed_in_time(100, 110, 10));
		assert!(!agreed_in_time(u64::MAX, u64::MAX, 0));
		assert!(agreed_in_time(0, u64::MAX, u64::MAX - 1));
	}

	#[test]
	fn only_silent_included_members_are_leaked_at_settlement() {
		assert!(at_settlement(true, false), "aggregated and silent");
		assert!(!at_settlement(true, true), "aggregated and committed");
		assert!(!at_settlement(false, false), "not aggregated: nothing of it reached the model");
		assert!(!at_settlement(false, true));
	}

	#[test]
	fn leaks_then_drops() {
		let rule = LeakRule { penalty_ppb: 10_000_000, drop_after: 3 };
		assert_eq!(rule.penalty(1_000), 10);
		assert_eq!(rule.after_voided_round(0, false), (1, false));
		assert_eq!(rule.after_voided_round(2, false), (3, true));
		assert_eq!(rule.after_voided_round(2, true), (0, false));
		assert_eq!(LeakRule { drop_after: 0, ..rule }.after_voided_round(0, false), (1, true));
	}
}
