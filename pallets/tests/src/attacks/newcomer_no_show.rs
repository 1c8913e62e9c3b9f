//! Attack: bleeding newcomers as no-shows. Every contributor is a juror by default, but a
//! member that joined in round `r` (or that missed round `r − 1`'s exchange, crashing after
//! sending its own payload) cannot replay round `r` of a sparse pool: the accused's payload
//! carries in its residual of round `r − 1`, named by its round `r − 1` payload, which only
//! round `r − 1`'s contributors are known to hold. Seated, such a member could only abstain
//! and lose `NoShowSlash` of its stake. An adversary challenges every round in which honest
//! members joined (a bond each, lost when the challenge ends undecided) to bleed them. Only
//! contributors of round `r − 1` sit on round `r`'s committees.

use super::challenge;
use crate::mock::*;
use frame_support::assert_ok;
use pallet_challenges::{Event, Verdict};

#[test]
fn newcomers_are_not_seated_on_a_round_they_cannot_replay() {
	run_test(|| {
		// Members 1..=4 train round 1; 5 joins while it runs, so its first round is 2 (the
		// last: no later round is voided and leaks anyone meanwhile). 4's payload is in round
		// 1's included set, but 4 does not commit it (it crashed after sending its payload).
		training_pool(2, two_thirds(), &[1_000; 4]);
		bond_and_join(5, 0, 1_000);
		for who in 1..=3 {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2, 3]));
		}
		assert!(pallet_checkpoints::FinalCheckpoints::<Test>::get(0, 1).is_some());
		run_to_block(2);
		for who in 1..=5 {
			assert_ok!(commit(who, 2, 8, &[0, 1, 2, 3, 4]));
		}
		let round_2 = pallet_checkpoints::FinalCheckpoints::<Test>::get(0, 2).expect("final");
		assert!(round_2.contributors.contains(&5), "the newcomer contributed");
		let staked_5 = staked(5);
		// The attacker (member 1) challenges member 2's round 2 payload; nobody votes.
		let (id, jury) = challenge(1, 0, 2, 2);
		assert!(!jury.is_empty());
		assert!(jury.iter().all(|(j, _)| *j != 5), "the newcomer is not seated");
		assert!(jury.iter().all(|(j, _)| *j != 4), "nor the member that missed round 1");
		let expires_at =
			pallet_challenges::OpenChallenges::<Test>::get(id).expect("open").expires_at;
		run_to_block(expires_at);
		assert_eq!(verdict_of(0, 2, 2), Some(Verdict::Innocent), "absent seats acquit");
		assert_eq!(staked(5), staked_5, "the newcomer lost nothing");
		// The seated jurors that did not vote answer for it; the newcomer does not.
		let no_shows: Vec<AccountId> = challenges_events()
			.iter()
			.filter_map(|e| match e {
				Event::JurorNoShow { juror, .. } => Some(*juror),
				_ => None,
			})
			.collect();
		assert_eq!(no_shows.len(), jury.len());
		assert!(!no_shows.contains(&5) && !no_shows.contains(&4));
	});
}
