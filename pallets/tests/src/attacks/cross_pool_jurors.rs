//! Attack: bleeding honest jurors through another pool. Only a round's contributors hold what a
//! replay needs (θ_{r−1} and every included payload); a juror of another pool drawn for a
//! challenge it cannot judge could only abstain and be slashed `NoShowSlash` as a no-show.
//! Whoever runs a pool could then open challenges there against its own sybil (the bond comes
//! back when the challenge expires) and drain the honest jurors of every other pool out of the
//! juries, for the price of the transaction fees. Committees are drawn from the challenged
//! round's contributors only.

use super::challenge;
use crate::mock::*;
use frame_support::assert_ok;
use pallet_challenges::{Event, Verdict};

#[test]
fn cross_pool_challenges_cannot_bleed_honest_jurors() {
	run_test(|| {
		// Pool 0 is the attacker's: 1 and its sybil 2, round 1 final with both contributing.
		training_pool(3, two_thirds(), &[1_000, 1_000]);
		for who in 1..=2 {
			assert_ok!(commit(who, 1, 7, &[0, 1]));
		}
		// Pool 1 is elsewhere (still forming: 3 of its 4 trainers); its members 5, 6, 7 verify
		// as jurors.
		assert_ok!(TrainingPools::create_pool(
			RuntimeOrigin::signed(CREATOR),
			spec(3, 4, two_thirds())
		));
		for who in 5..=7 {
			bond_and_join(who, 1, 1_000);
		}
		jurors(&[5, 6, 7], 1_000);
		let free_1 = free(1);
		// The attacker accuses its own sybil with the sybil's genuine announcement.
		let (id, jury) = challenge(1, 0, 1, 2);
		assert!(jury.is_empty(), "pool 1's jurors are never drawn for pool 0's round");
		assert_eq!(verdict_of(0, 1, 2), Some(Verdict::NoJury));
		assert!(challenges_events()
			.iter()
			.any(|e| matches!(e, Event::NoJuryDrawn { challenge_id, .. } if *challenge_id == id)));
		for who in 5..=7 {
			assert_eq!(staked(who), 2_000, "juror {who} lost nothing");
		}
		assert!(!challenges_events().iter().any(|e| matches!(e, Event::JurorNoShow { .. })));
		// The attacker gains nothing either: its bond is back, nobody was slashed.
		assert_eq!(free(1), free_1);
	});
}
