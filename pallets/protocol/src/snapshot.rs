//! The participant snapshot of a round (`docs/architecture.md`, step 1): frozen when the round opens,
//! it alone decides who may move the round and with what weight. Members who join later, leave,
//! or commit ahead of time and leave, do not change it.

use crate::{MemberIndex, Planck, RoundIndex};
use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use scale_info::TypeInfo;

/// One participant of a round: its member index, account and weight.
#[derive(
	Clone, PartialEq, Eq, Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Debug,
)]
pub struct Participant<AccountId> {
	/// Member index in the pool (aggregation order).
	pub index: MemberIndex,
	/// The member's account.
	pub who: AccountId,
	/// Weight in the quorum, in planck: its committed stake, capped by its bonded stake at
	/// snapshot time (a slashed member loses weight).
	pub stake: Planck,
}

/// What the snapshot needs to know about a pool member when a round opens.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct MemberState<AccountId> {
	/// Member index.
	pub index: MemberIndex,
	/// Account.
	pub who: AccountId,
	/// Stake committed to the pool at join, in planck.
	pub committed: Planck,
	/// The account's bonded (active) stake now, in planck.
	pub bonded: Planck,
	/// First round it takes part in.
	pub from_round: RoundIndex,
}

/// The participants of `round`: members with `from_round ≤ round` and non-zero weight
/// `min(committed, bonded)`, in member-index order.
pub fn snapshot<AccountId>(
	members: impl IntoIterator<Item = MemberState<AccountId>>,
	round: RoundIndex,
) -> alloc::vec::Vec<Participant<AccountId>> {
	let mut out: alloc::vec::Vec<_> = members
		.into_iter()
		.filter(|m| m.from_round <= round)
		.map(|m| Participant { index: m.index, who: m.who, stake: m.committed.min(m.bonded) })
		.filter(|p| p.stake > 0)
		.collect();
	out.sort_by_key(|p| p.index);
	out
}

/// Sum of the participants' stakes, in planck (saturating).
pub fn total_stake<AccountId>(participants: &[Participant<AccountId>]) -> Planck {
	participants.iter().fold(0u128, |acc, p| acc.saturating_add(p.stake))
}

/// The participant `who`, if it is in the snapshot.
pub fn find<'a, AccountId: PartialEq>(
	participants: &'a [Participant<AccountId>],
	who: &AccountId,
) -> Option<&'a Participant<AccountId>> {
	participants.iter().find(|p| &p.who == who)
}

#[cfg(test)]
mod tests {
	use super::*;

	fn m(index: u32, committed: u128, bonded: u128, from_round: u32) -> MemberState<u64> {
		MemberState { index, who: u64::from(index) + 10, committed, bonded, from_round }
	}

	#[test]
	fn later_joiners_and_slashed_stake() {
		let s =
			snapshot([m(2, 100, 100, 1), m(0, 100, 40, 1), m(1, 100, 100, 3), m(3, 50, 0, 1)], 2);
		assert_eq!(
			s,
			vec![
				Participant { index: 0, who: 10, stake: 40 },
				Participant { index: 2, who: 12, stake: 100 },
			]
		);
		assert_eq!(total_stake(&s), 140);
		assert_eq!(find(&s, &12).map(|p| p.index), Some(2));
		assert!(find(&s, &11).is_none(), "joined for round 3");
	}
}
