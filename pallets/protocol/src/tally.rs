//! Counting commits (`docs/architecture.md`, step 6). Only snapshot participants count, each with its
//! snapshot stake, once. Commits made ahead of time for a round are counted when it opens,
//! against that round's snapshot: a committer who is not in it adds nothing.

use crate::{quorum::reaches_quorum, snapshot::total_stake, MemberIndex, Participant, Planck};
use alloc::vec::Vec;

/// A distinct commit with its support.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Tallied<C> {
	/// The commit (checkpoint hash and included set, or anything comparable).
	pub commit: C,
	/// Snapshot stake of its committers, in planck.
	pub stake: Planck,
	/// Its committers' member indices, ascending.
	pub committers: Vec<MemberIndex>,
}

/// Groups the participants' commits (`commit_of`, `None` = no commit) by equality, in order of
/// first appearance by member index.
pub fn tally<AccountId, C: PartialEq>(
	participants: &[Participant<AccountId>],
	mut commit_of: impl FnMut(&Participant<AccountId>) -> Option<C>,
) -> Vec<Tallied<C>> {
	let mut out: Vec<Tallied<C>> = Vec::new();
	for p in participants {
		let Some(c) = commit_of(p) else { continue };
		match out.iter_mut().find(|t| t.commit == c) {
			Some(t) => {
				t.stake = t.stake.saturating_add(p.stake);
				t.committers.push(p.index);
			},
			None => {
				out.push(Tallied { commit: c, stake: p.stake, committers: alloc::vec![p.index] })
			},
		}
	}
	out
}

/// The commit that reaches `quorum_ppb` of the snapshot's stake, if any (with a quorum above
/// 50 % at most one can).
pub fn winner<'a, AccountId, C>(
	participants: &[Participant<AccountId>],
	tallied: &'a [Tallied<C>],
	quorum_ppb: u32,
) -> Option<&'a Tallied<C>> {
	let total = total_stake(participants);
	tallied.iter().find(|t| reaches_quorum(t.stake, total, quorum_ppb))
}

/// The contributors of a final round: participants that are in the agreed `included` set *and*
/// committed the final checkpoint (`committers`), in member-index order.
pub fn contributors<AccountId: Clone>(
	participants: &[Participant<AccountId>],
	committers: &[MemberIndex],
	included: &[MemberIndex],
) -> Vec<Participant<AccountId>> {
	participants
		.iter()
		.filter(|p| committers.contains(&p.index) && included.contains(&p.index))
		.cloned()
		.collect()
}

/// Whether `included` is a valid included set: non-empty and strictly increasing.
pub fn is_valid_included_set(included: &[MemberIndex]) -> bool {
	!included.is_empty() && included.windows(2).all(|w| matches!(w, [a, b] if a < b))
}

#[cfg(test)]
mod tests {
	use super::*;

	fn p(index: u32, stake: u128) -> Participant<u64> {
		Participant { index, who: u64::from(index), stake }
	}

	#[test]
	fn only_participants_count_and_contributors_need_both() {
		let s = [p(0, 1_000), p(1, 1_000), p(2, 1_000)];
		// Index 7 committed too (e.g. a leaver who committed early): it is not a participant,
		// so `commit_of` is never asked about it.
		let commits = [(0, 'a'), (1, 'a'), (2, 'b'), (7, 'a')];
		let t = tally(&s, |p| commits.iter().find(|(i, _)| *i == p.index).map(|(_, c)| *c));
		assert_eq!(t.len(), 2);
		assert_eq!((t[0].stake, t[0].committers.clone()), (2_000, vec![0, 1]));
		let w = winner(&s, &t, 666_666_666).expect("2/3 reached");
		assert_eq!(w.commit, 'a');
		assert!(winner(&s, &t, 666_666_667).is_none(), "rounded up: 2 001 needed");
		let c = contributors(&s, &w.committers, &[1, 2]);
		assert_eq!(c, vec![p(1, 1_000)]);
	}

	#[test]
	fn included_sets() {
		assert!(is_valid_included_set(&[0, 2, 5]));
		assert!(!is_valid_included_set(&[]));
		assert!(!is_valid_included_set(&[1, 1]));
		assert!(!is_valid_included_set(&[2, 1]));
	}
}
