//! One agreed included set when honest members' sets split (`docs/architecture.md`, steps 3 and 6).
//!
//! Members fix their included set locally (what arrived and verified by their deadline). A
//! member that withholds its payload from some peers, or announces it just before their
//! deadlines, makes honest members include different sets; their checkpoints then differ, no
//! `(hash, included)` reaches quorum and, without this rule, the round would be voided: one
//! cheap member could void every round at no cost.
//!
//! The chain breaks the split with the commits it already has: a commit's included set is its
//! committer's attestation that it holds those payloads. Once participants holding at least
//! **⅔** of the snapshot's stake have committed and no candidate reaches quorum, the chain fixes
//!
//! ```text
//! S* = { j ∈ snapshot : stake of committers whose included set contains j > ⅓ of the snapshot }
//! ```
//!
//! and every committer whose set differs may commit once more, over S*. Under the threat model
//! (the adversary holds < ⅓ of the snapshot's stake):
//! - every j ∈ S* is attested by at least one honest committer, who holds j's payload and
//!   serves it, so every honest member can fetch it and aggregate S* bit for bit;
//! - a payload only the adversary attests (< ⅓) never enters S*;
//! - if all honest members agree on S, then S* = S: ⅔ committed means honest committers hold
//!   more than ⅓, so every j ∈ S is attested by more than ⅓, and a j ∉ S only by the adversary. An early
//!   trigger (the adversary commits garbage before the last honest member commits) changes
//!   nothing.
//! - Honest members hold > ⅔ ≥ quorum (for quorum ≤ ⅔): once they recommit over S* the round is
//!   final. It is final as soon as quorum has committed again; a committer of another set may
//!   still commit the final `(hash, S*)` afterwards (within the late-commit window) and is paid
//!   as a late contributor, so no honest member beyond quorum loses its reward.
//!
//! What it does not settle: a member that signed two payloads for one round (equivocation) can
//! still make honest members aggregate different bytes for the same index; that is slashed on
//! its own (`Challenges::report_equivocation`).

use crate::{quorum::reaches_quorum, MemberIndex, Planck};
use alloc::vec::Vec;

/// Whether `committed` planck of a snapshot of `total` planck is at least ⅔ of it, exactly
/// (`3 · committed ≥ 2 · total`, without overflow): the point from which the chain fixes S*.
pub fn split_may_be_fixed(committed: Planck, total: Planck) -> bool {
	// ⌈2T/3⌉ = T − ⌊T/3⌋.
	committed >= total - total / 3
}

/// Whether `attested` planck is more than ⅓ of a snapshot of `total` planck, exactly
/// (`3 · attested > total`): more than an adversary below ⅓ can attest alone.
pub fn attested_by_more_than_a_third(attested: Planck, total: Planck) -> bool {
	attested > total / 3
}

/// The included set S* the chain fixes for a split round, or `None` if there is none to fix.
///
/// - `total`: the snapshot's stake (planck);
/// - `participants`: the snapshot's member indices (only they can enter S*);
/// - `candidates`: every distinct commit so far, as (its included set, its committers' stake
///   in planck);
/// - `quorum_ppb`: the pool's quorum.
///
/// Returns `Some(S*)` (ascending, non-empty) when the committed stake is at least ⅔ of `total`
/// ([`split_may_be_fixed`]), no candidate reaches quorum, and at least one participant is
/// included by commits holding more than ⅓ of `total` ([`attested_by_more_than_a_third`]);
/// `None` otherwise (including `total == 0`). Both thresholds are exact: with an adversary
/// holding `3A < T`, ⅔ committed means the honest committers hold `3H > T`. Never panics.
pub fn split_included_set(
	total: Planck,
	participants: &[MemberIndex],
	candidates: &[(&[MemberIndex], Planck)],
	quorum_ppb: u32,
) -> Option<Vec<MemberIndex>> {
	if total == 0 || candidates.iter().any(|(_, s)| reaches_quorum(*s, total, quorum_ppb)) {
		return None;
	}
	let committed = candidates.iter().fold(0u128, |a, (_, s)| a.saturating_add(*s));
	if !split_may_be_fixed(committed, total) {
		return None;
	}
	let mut agreed: Vec<MemberIndex> = participants
		.iter()
		.copied()
		.filter(|j| {
			let attested = candidates
				.iter()
				.filter(|(included, _)| included.contains(j))
				.fold(0u128, |a, (_, s)| a.saturating_add(*s));
			attested_by_more_than_a_third(attested, total)
		})
		.collect();
	agreed.sort_unstable();
	agreed.dedup();
	(!agreed.is_empty()).then_some(agreed)
}

#[cfg(test)]
mod tests {
	use super::*;
	use proptest::prelude::*;

	const TWO_THIRDS: u32 = 666_666_667;

	#[test]
	fn a_withholder_that_splits_three_honest_members_is_outvoted() {
		// Members 0..=3 hold 25 % each; 3 withholds from 0 and does not commit: 0 saw {0,1,2},
		// 1 and 2 saw {0,1,2,3}. Nothing reaches ⅔, 75 % committed: 3 is attested by 50 %.
		let (a, b) = ([0, 1, 2], [0, 1, 2, 3]);
		let c: [(&[u32], u128); 2] = [(&a, 25), (&b, 50)];
		assert_eq!(split_included_set(100, &[0, 1, 2, 3], &c, TWO_THIRDS), Some(vec![0, 1, 2, 3]));
		// Shown to member 1 only: attested by 25 % < ⅓, left out by everyone.
		let (a, b) = ([0, 1, 2, 3], [0, 1, 2]);
		let c: [(&[u32], u128); 2] = [(&a, 25), (&b, 50)];
		assert_eq!(split_included_set(100, &[0, 1, 2, 3], &c, TWO_THIRDS), Some(vec![0, 1, 2]));
	}

	#[test]
	fn nothing_is_fixed_before_two_thirds_committed_or_once_a_candidate_has_quorum() {
		let (a, b) = ([0, 1], [0, 1, 2]);
		// 60 % committed: the rest may still agree with one of them.
		let c: [(&[u32], u128); 2] = [(&a, 30), (&b, 30)];
		assert_eq!(split_included_set(100, &[0, 1, 2], &c, TWO_THIRDS), None);
		// A candidate at quorum: the round is final, nothing to fix.
		let c: [(&[u32], u128); 2] = [(&a, 10), (&b, 67)];
		assert_eq!(split_included_set(100, &[0, 1, 2], &c, TWO_THIRDS), None);
		assert_eq!(split_included_set(0, &[], &[], TWO_THIRDS), None);
	}

	#[test]
	fn only_participants_enter_and_the_set_is_never_empty() {
		// Every committer names index 9, outside the snapshot.
		let (a, b) = ([0, 9], [1, 9]);
		let c: [(&[u32], u128); 2] = [(&a, 34), (&b, 33)];
		assert_eq!(split_included_set(100, &[0, 1], &c, TWO_THIRDS), Some(vec![0]));
		let (a, b) = ([9], [8]);
		let c: [(&[u32], u128); 2] = [(&a, 34), (&b, 33)];
		assert_eq!(split_included_set(100, &[0, 1], &c, TWO_THIRDS), None);
	}

	#[test]
	fn thresholds_are_exact_at_large_stakes() {
		// Rounded-up ppb thresholds let this adversary (just below ⅓) drop an honest member's
		// index: ⅔ was reached while the honest committers' stake was below the rounded ⅓.
		let total = 3_000_000_000_000_000u128;
		let adversary = 999_999_999_999_999u128;
		let honest = 1_000_000_001_000_001u128;
		let (s, other) = ([0u32, 1], [1u32, 2]);
		let c: [(&[u32], u128); 2] = [(&s, honest), (&other, adversary)];
		assert!(split_may_be_fixed(honest + adversary, total));
		assert_eq!(split_included_set(total, &[0, 1, 2], &c, TWO_THIRDS), Some(vec![0, 1]));
		assert!(split_may_be_fixed(2, 3) && !split_may_be_fixed(1, 3));
		assert!(attested_by_more_than_a_third(2, 3) && !attested_by_more_than_a_third(1, 3));
		assert!(split_may_be_fixed(u128::MAX, u128::MAX));
	}

	/// Random honest views and an adversary below ⅓ of the stake committing arbitrary sets.
	fn view() -> impl Strategy<Value = Vec<u32>> {
		proptest::collection::btree_set(0u32..8, 0..8).prop_map(|s| s.into_iter().collect())
	}

	proptest! {
		/// If every honest member included the same set S, S* is S (or nothing is fixed),
		/// whatever the adversary commits.
		#[test]
		fn agreeing_honest_members_are_never_overruled(
			honest in proptest::collection::vec(1u128..1u128 << 100, 3..8),
			adversary in proptest::collection::vec((1u128..1u128 << 100, view()), 0..3),
			s in view(), committed in proptest::collection::vec(any::<bool>(), 8),
		) {
			let h: u128 = honest.iter().sum();
			let a: u128 = adversary.iter().map(|(x, _)| x).sum();
			prop_assume!(a * 3 < h + a);
			let total = h + a;
			let participants: Vec<u32> = (0..8).collect();
			let mut cands: Vec<(&[u32], u128)> = Vec::new();
			let honest_committed: u128 = honest
				.iter()
				.zip(&committed)
				.filter(|(_, c)| **c)
				.map(|(x, _)| *x)
				.sum();
			if honest_committed > 0 {
				cands.push((&s, honest_committed));
			}
			for (x, v) in &adversary {
				cands.push((v, *x));
			}
			if let Some(agreed) = split_included_set(total, &participants, &cands, TWO_THIRDS) {
				prop_assert_eq!(agreed, s);
			}
		}

		/// Every member of S* was included by an honest member (so one honest member holds
		/// its payload to serve).
		#[test]
		fn every_agreed_member_has_an_honest_holder(
			honest in proptest::collection::vec((1u128..1u128 << 100, view()), 3..8),
			adversary in proptest::collection::vec((1u128..1u128 << 100, view()), 0..3),
		) {
			let h: u128 = honest.iter().map(|(x, _)| x).sum();
			let a: u128 = adversary.iter().map(|(x, _)| x).sum();
			prop_assume!(a * 3 < h + a);
			let participants: Vec<u32> = (0..8).collect();
			let cands: Vec<(&[u32], u128)> =
				honest.iter().chain(&adversary).map(|(x, v)| (v.as_slice(), *x)).collect();
			if let Some(agreed) = split_included_set(h + a, &participants, &cands, TWO_THIRDS) {
				for j in agreed {
					prop_assert!(honest.iter().any(|(_, v)| v.contains(&j)));
				}
			}
		}
	}
}
