//! Blind acquittals. An undecided committee acquits (absent seats count for acquittal), and its
//! bond went to the jurors who voted innocent: a cheater's allies seated on the committee voted
//! innocent at once, without a replay, and were paid whenever the honest jurors could not reach
//! a majority in time (busy with other replays, or crashed). Only votes that decide a committee
//! are paid: an undecided committee's bond goes to `Slash`.

use super::challenge;
use crate::mock::*;
use frame_support::assert_ok;
use pallet_challenges::{Event, OpenChallenges, Verdict};

#[test]
fn allies_voting_innocent_without_a_replay_are_not_paid_when_the_committee_is_undecided() {
	run_test(|| {
		final_round();
		// Honest member 3 challenges cheater 1; a juror allied with the cheater votes innocent
		// at once, the honest jurors are still replaying when the vote ends.
		let (id, jury) = challenge(3, 0, 1, 1);
		let (ally, _) = *jury.iter().find(|(j, _)| ![1, 3].contains(j)).expect("a third juror");
		assert_ok!(Challenges::vote(RuntimeOrigin::signed(ally), id, false));
		let c = OpenChallenges::<Test>::get(id).expect("open");
		assert_eq!(c.votes.decided(), None, "one juror's seats do not decide the committee");
		let ally_free = Balances::free_balance(ally);
		run_to_block(c.expires_at);
		// The absent seats acquit and the challenger loses its bond (its ruling can be
		// appealed), but the blind vote is not paid: the whole bond goes to `Slash` (it was the
		// ally's seats' part of it).
		assert_eq!(verdict_of(0, 1, 1), Some(Verdict::Innocent));
		assert_eq!(Balances::free_balance(ally), ally_free, "the blind vote is paid nothing");
		assert!(challenges_events().contains(&Event::AccusedFoundInnocent {
			challenge_id: id,
			accused: 1,
			bond_slashed: BOND,
			jurors_paid: 0
		}));
	});
}

/// Votes that decide a committee are still paid: a majority of seats voting innocent takes the
/// challenger's bond, per seat of the committee.
#[test]
fn jurors_whose_votes_decide_an_acquittal_are_paid_the_bond() {
	run_test(|| {
		final_round();
		let (id, jury) = challenge(3, 0, 1, 1);
		let voters: Vec<AccountId> =
			jury.iter().map(|(j, _)| *j).filter(|j| ![1, 3].contains(j)).collect();
		let before: Vec<Balance> = voters.iter().map(|v| Balances::free_balance(*v)).collect();
		for v in &voters {
			if OpenChallenges::<Test>::contains_key(id) {
				assert_ok!(Challenges::vote(RuntimeOrigin::signed(*v), id, false));
			}
		}
		assert_eq!(verdict_of(0, 1, 1), Some(Verdict::Innocent), "decided before expiry");
		let paid: Balance =
			voters.iter().zip(&before).map(|(v, b)| Balances::free_balance(*v) - b).sum();
		assert!(paid > 0 && paid <= BOND, "paid {paid} of {BOND}");
		assert!(challenges_events().iter().any(|e| matches!(
			e,
			Event::AccusedFoundInnocent { challenge_id, jurors_paid, .. }
				if *challenge_id == id && *jurors_paid == paid
		)));
	});
}
