//! Racing to vote. A committee's verdict is reached as soon as it is certain, and voting then
//! closes. An attacker's jurors need no replay to vote, so they can always be among the first
//! voters: if a payout were split over the seats that had voted when the verdict became
//! certain, they would take far more than their seats' part of it: the whole bond of an
//! attacker's own sham challenge (when the honest accused's own seats, voting innocent at once,
//! complete the majority), most of a cheater's `JurorShare`, an appellant's `AppealBond`. Every
//! juror payout is split per seat of the committee, the parties' seats excluded.

use crate::mock::*;
use frame_support::assert_ok;
use pallet_challenges::{OpenChallenges, Verdict};

#[test]
fn racing_to_vote_first_takes_no_more_than_the_racers_seat_share() {
	run_test(|| {
		// Honest member 1 (the accused), sybils 2 and 3 (27 % of the stake: below ⅓), honest
		// members 4 and 5; round 1 final with all five contributing.
		training_pool(3, two_thirds(), &[1_000, 400, 400, 600, 600]);
		for who in 1..=5 {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2, 3, 4]));
		}
		// The attacker's outside account accuses member 1 with its genuine announcement.
		let (free_2, free_3) = (free(2), free(3));
		let treasury = free(TREASURY);
		let (id, _) = super::challenge(OUTSIDER, 0, 1, 1);
		let c = OpenChallenges::<Test>::get(id).expect("drawn");
		let seats_of = |who: AccountId| -> u128 {
			c.jury.iter().filter(|s| s.who == who).map(|s| u128::from(s.seats)).sum()
		};
		let paid_seats: u128 = [2, 3, 4, 5].iter().map(|w| seats_of(*w)).sum();
		assert!(seats_of(2) > 0 && seats_of(3) > 0, "both sybils seated");
		// The sybils vote innocent at once, without a replay; the honest accused votes innocent
		// at once too: together they decide before honest members 4 and 5 have replayed.
		for who in [2, 3, 1] {
			assert_ok!(Challenges::vote(RuntimeOrigin::signed(who), id, false));
		}
		assert!(!OpenChallenges::<Test>::contains_key(id), "decided by the first voters");
		assert_eq!(verdict_of(0, 1, 1), Some(Verdict::Innocent));
		// The sybils get their seats' part of the bond, not all of it: the attacker's sham
		// challenge costs it the honest seats' part, which goes to `Slash`.
		let gained = free(2) + free(3) - free_2 - free_3;
		let share = |who| BOND * seats_of(who) / paid_seats;
		assert_eq!(gained, share(2) + share(3));
		assert!(gained * paid_seats <= BOND * (seats_of(2) + seats_of(3)));
		assert!(gained < BOND * 2 / 3, "the racers took {gained} of the {BOND}-planck bond");
		assert_eq!(
			free(TREASURY),
			treasury + BOND - gained,
			"the seats that did not vote leave their part to Slash"
		);
	});
}
