//! Attack: split the honest members' included sets to void rounds. A member that withholds
//! its payload from some peers, or announces it just before their deadlines, makes honest
//! members aggregate different sets; no checkpoint reaches quorum and, before the agreed set
//! (`synod_protocol::agreement`), the round was voided: the attacker lost only the round's
//! reward, honest members lost theirs, and it could do so every round.

use crate::mock::*;
use frame_support::{assert_noop, assert_ok};
use pallet_checkpoints::{AgreedSets, Error, Event, FinalCheckpoints, Voided};

#[test]
fn withholder_cannot_void_a_round_by_splitting_the_included_set() {
	run_test(|| {
		// Trainers 1..=4, a quarter of the stake each. Trainer 4 (index 3) delivered its payload
		// to trainers 2 and 3 only, and commits nothing.
		training_pool(3, two_thirds(), &[1_000; 4]);
		assert_ok!(commit(1, 1, 7, &[0, 1, 2]));
		assert_ok!(commit(2, 1, 8, &[0, 1, 2, 3]));
		assert!(AgreedSets::<Test>::get((0, 1)).is_none(), "half the stake: not split yet");
		assert_ok!(commit(3, 1, 8, &[0, 1, 2, 3]));
		// ¾ committed, nothing at ⅔: index 3 is attested by half the stake.
		assert_eq!(
			AgreedSets::<Test>::get((0, 1)).map(|s| s.included.into_inner()),
			Some(vec![0, 1, 2, 3])
		);
		assert!(checkpoints_events().iter().any(|e| matches!(
			e,
			Event::IncludedSetAgreed { pool_id: 0, round: 1, included } if included[..] == [0, 1, 2, 3]
		)));
		// Trainer 1 fetches index 3's payload from 2 or 3 and commits once more, over the
		// agreed set only.
		assert_noop!(commit(1, 1, 9, &[0, 1, 2]), Error::<Test>::NotTheAgreedSet);
		assert_noop!(commit(2, 1, 9, &[0, 1, 2, 3]), Error::<Test>::AlreadyCommitted);
		assert_ok!(commit(1, 1, 8, &[0, 1, 2, 3]));
		let fin = FinalCheckpoints::<Test>::get(0, 1).expect("final, not voided");
		assert_eq!(fin.hash, [8; 32]);
		assert_eq!(fin.included.into_inner(), vec![0, 1, 2, 3]);
		assert_eq!(fin.contributors.into_inner(), vec![1, 2, 3]);
		assert!(Voided::<Test>::get(0, 1).is_none());
		assert!(AgreedSets::<Test>::get((0, 1)).is_none(), "removed when the round closed");
		assert_noop!(commit(1, 1, 8, &[0, 1, 2, 3]), Error::<Test>::AlreadyCommitted);
		// Nobody honest was leaked or marked divergent.
		assert_eq!((staked(1), staked(2), staked(3)), (1_000, 1_000, 1_000));
		assert!(!checkpoints_events().iter().any(|e| matches!(e, Event::DivergentCommit { .. })));
	});
}

#[test]
fn a_payload_only_the_attacker_attests_stays_out_of_the_agreed_set() {
	run_test(|| {
		// Honest 1..=3 (3 000), attackers 4 and 5 (1 200 of 4 200: below ⅓). Index 3's payload
		// reached honest trainer 1 only; both attackers commit garbage naming themselves.
		training_pool(3, two_thirds(), &[1_000, 1_000, 1_000, 600, 600]);
		assert_ok!(commit(1, 1, 7, &[0, 1, 2, 3]));
		assert_ok!(commit(2, 1, 8, &[0, 1, 2]));
		assert_ok!(commit(4, 1, 9, &[0, 1, 2, 3, 4]));
		assert!(AgreedSets::<Test>::get((0, 1)).is_none(), "2 600 of 4 200 is below ⅔");
		assert_ok!(commit(5, 1, 9, &[0, 1, 2, 3, 4]));
		// Index 3: trainer 1 and the attackers (2 200 ≥ 1 401); index 4: the attackers only.
		assert_eq!(
			AgreedSets::<Test>::get((0, 1)).map(|s| s.included.into_inner()),
			Some(vec![0, 1, 2, 3])
		);
		// Trainer 3, not committed yet, commits over the agreed set; trainer 2 once more.
		assert_ok!(commit(3, 1, 7, &[0, 1, 2, 3]));
		assert!(FinalCheckpoints::<Test>::get(0, 1).is_none(), "2 000 of 4 200");
		assert_ok!(commit(2, 1, 7, &[0, 1, 2, 3]));
		let fin = FinalCheckpoints::<Test>::get(0, 1).expect("final");
		assert_eq!(fin.included.into_inner(), vec![0, 1, 2, 3]);
		assert_eq!(fin.contributors.into_inner(), vec![1, 2, 3]);
	});
}

#[test]
fn garbage_commits_cannot_overrule_agreeing_honest_members() {
	run_test(|| {
		// Honest 1..=3 agree on {0, 1, 2}; attacker 4 (a quarter) commits early with itself in
		// the set, so that ⅔ have committed before honest trainer 3 does.
		training_pool(3, two_thirds(), &[1_000; 4]);
		assert_ok!(commit(1, 1, 7, &[0, 1, 2]));
		assert_ok!(commit(4, 1, 9, &[0, 1, 2, 3]));
		assert_ok!(commit(2, 1, 7, &[0, 1, 2]));
		// Fixed early, and exactly the honest set: the attacker alone attests index 3.
		assert_eq!(
			AgreedSets::<Test>::get((0, 1)).map(|s| s.included.into_inner()),
			Some(vec![0, 1, 2])
		);
		assert_noop!(commit(1, 1, 9, &[0, 1, 2]), Error::<Test>::AlreadyCommitted);
		assert_ok!(commit(3, 1, 7, &[0, 1, 2]));
		let fin = FinalCheckpoints::<Test>::get(0, 1).expect("final");
		assert_eq!((fin.hash, fin.contributors.into_inner()), ([7; 32], vec![1, 2, 3]));
	});
}

#[test]
fn honest_members_that_recommit_after_finality_are_still_paid() {
	run_test(|| {
		// Honest 1..=4, attacker 5 (a fifth). 5 announced late: 1 and 2 included it, 3 and 4 did
		// not; 5 commits with 1 and 2 so that their candidate is closer to quorum.
		training_pool(3, two_thirds(), &[1_000; 5]);
		assert_ok!(commit(1, 1, 8, &[0, 1, 2, 3, 4]));
		assert_ok!(commit(2, 1, 8, &[0, 1, 2, 3, 4]));
		assert_ok!(commit(5, 1, 8, &[0, 1, 2, 3, 4]));
		assert_ok!(commit(4, 1, 7, &[0, 1, 2, 3]));
		assert_eq!(
			AgreedSets::<Test>::get((0, 1)).map(|s| s.included.into_inner()),
			Some(vec![0, 1, 2, 3, 4])
		);
		// The set is fixed: trainer 3, which had not committed yet, commits over it only, and
		// that brings the agreed candidate to quorum before trainer 4's second commit.
		assert_noop!(commit(3, 1, 7, &[0, 1, 2, 3]), Error::<Test>::NotTheAgreedSet);
		assert_ok!(commit(3, 1, 8, &[0, 1, 2, 3, 4]));
		let fin = FinalCheckpoints::<Test>::get(0, 1).expect("final");
		assert_eq!(fin.contributors.into_inner(), vec![1, 2, 3, 5]);
		// Trainer 4 commits the final checkpoint after finality: a late contributor, no longer
		// divergent. Anything else stays refused.
		assert_noop!(commit(4, 1, 9, &[0, 1, 2, 3, 4]), Error::<Test>::NotTheAgreedSet);
		assert_ok!(commit(4, 1, 8, &[0, 1, 2, 3, 4]));
		let fin = FinalCheckpoints::<Test>::get(0, 1).expect("final");
		assert_eq!(fin.contributors.into_inner(), vec![1, 2, 3, 5, 4]);
		assert!(pallet_checkpoints::Divergent::<Test>::get((0, 1)).is_empty());
		assert_noop!(commit(4, 1, 8, &[0, 1, 2, 3, 4]), Error::<Test>::AlreadyCommitted);
		// A member whose commit already was the final pair cannot commit again.
		assert_noop!(commit(1, 1, 8, &[0, 1, 2, 3, 4]), Error::<Test>::AlreadyCommitted);
	});
}
