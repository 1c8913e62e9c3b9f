//! Attack 4: candidate flooding. Before, sybils that joined, committed distinct hashes for the
//! next round and left filled its bounded candidate list: honest commits were refused and the
//! pool could never finalize again.

use crate::mock::*;
use frame_support::assert_ok;
use pallet_checkpoints::{Candidates, FinalCheckpoints};

#[test]
fn candidate_flooding_cannot_block_finality() {
	run_test(|| {
		training_pool(3, two_thirds(), &[1_000, 1_000, 1_000]);
		// Five sybils (more than MaxMembers candidates) join one after the other, each commits a
		// distinct hash for round 2 and leaves, freeing its seat for the next.
		for sybil in 4..=8u64 {
			bond_and_join(sybil, 0, 100);
			assert_ok!(commit(sybil, 2, sybil as u8, &[0]));
			assert_ok!(TrainingPools::leave_pool(RuntimeOrigin::signed(sybil), 0));
		}
		// Honest members still commit round 2 ahead of time, then finish round 1.
		for who in 1..=3 {
			assert_ok!(commit(who, 2, 9, &[0, 1, 2]));
		}
		for who in 1..=3 {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2]));
		}
		// Round 2 opened, counted only its participants' early commits, and is final at once.
		let fin = FinalCheckpoints::<Test>::get(0, 2).expect("round 2 final when it opened");
		assert_eq!(fin.hash, [9; 32]);
		assert_eq!(fin.contributors.to_vec(), vec![1, 2, 3]);
		// Round 3's candidates can only come from its snapshot.
		assert!(Candidates::<Test>::get((0, 3)).len() <= Checkpoints::round_snapshot(0, 3).len());
	});
}
