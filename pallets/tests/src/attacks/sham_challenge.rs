//! Sham challenges. If one challenge per (pool, round, accused) were allowed, a friend of the
//! cheater would open a bogus one first, let it fail, and the real one would be refused; with a
//! few shared slots, friends that open them first hold every one. Each challenger holds at most
//! one open challenge per contribution, and nobody else's. And since that lets many accounts
//! challenge one member, a seated juror answers for missed votes once per round.

use super::{all_vote, challenge};
use crate::mock::*;
use frame_support::{assert_noop, assert_ok};
use pallet_challenges::{Error, Verdict, Verdicts};

#[test]
fn sham_challenge_does_not_shield_the_cheater() {
	run_test(|| {
		final_round();
		jurors(&[4, 5], 1_000);
		// Member 2, a friend of cheater 1, opens a sham challenge first…
		assert_ok!(open_challenge(2, 0, 1, 1, [0; 32]));
		// …the real challenge is still accepted, and convicts.
		let (real, jury) = challenge(3, 0, 1, 1);
		all_vote(real, &jury, true);
		assert_eq!(Verdicts::<Test>::get((0, 1, 1)), Some(Verdict::Guilty));
		assert_eq!(staked(1), 500);
		// The sham (opened at block 7, when late commits closed) ends undecided, so acquitted,
		// at 7 + 2 + 20: the guilty verdict stands.
		run_to_block(29);
		assert!(!pallet_challenges::OpenChallenges::<Test>::contains_key(0));
		assert_eq!(Verdicts::<Test>::get((0, 1, 1)), Some(Verdict::Guilty));
		// The cheater is not paid for the round; the others keep their own share (its share
		// returns to the budget).
		run_to_block(34);
		assert_eq!(pallet_rewards::Claimable::<Test>::get(0, 1), 0);
		assert_eq!(pallet_rewards::Claimable::<Test>::get(0, 2), 200);
	});
}

/// Attack: sham challenges that cost nothing while honest jurors cannot keep up. A committee
/// that had not reached a verdict when its vote ended (its honest jurors busy replaying the
/// adversary's other shams, or crashed) ended `Expired`, the challenger's bond came back and
/// nothing could be appealed: shams against honest members cost fees only, however many
/// replays they forced. Absent seats count for acquittal: the sham is ruled innocent and its
/// bond is slashed (to `Slash`: an undecided committee's votes are not paid,
/// `blind_acquittal.rs`).
#[test]
fn a_sham_challenge_its_committee_leaves_undecided_costs_its_bond() {
	run_test(|| {
		final_round();
		let before = Balances::free_balance(OUTSIDER);
		// The sham against honest member 2; one juror replays in time and votes innocent, the
		// others are busy.
		let (id, jury) = challenge(OUTSIDER, 0, 1, 2);
		let (voter, _) = *jury.iter().find(|(j, _)| *j != 2).expect("a juror besides the accused");
		assert_ok!(Challenges::vote(RuntimeOrigin::signed(voter), id, false));
		let c = pallet_challenges::OpenChallenges::<Test>::get(id).expect("undecided");
		run_to_block(c.expires_at);
		assert_eq!(verdict_of(0, 1, 2), Some(Verdict::Innocent), "was Expired, bond back");
		assert_eq!(Balances::free_balance(OUTSIDER), before - BOND);
		assert!(challenges_events().contains(&pallet_challenges::Event::AccusedFoundInnocent {
			challenge_id: id,
			accused: 2,
			bond_slashed: BOND,
			jurors_paid: 0
		}));
	});
}

#[test]
fn sham_challenges_cannot_hold_the_slots_of_a_contribution() {
	run_test(|| {
		final_round();
		// Friends of cheater 1 open challenges against it first, from every account they have
		// (before, the first `MaxChallengesPerContribution` = 2 took every slot)…
		assert_ok!(open_challenge(2, 0, 1, 1, [0; 32]));
		assert_ok!(open_challenge(4, 0, 1, 1, [0; 32]));
		assert_ok!(open_challenge(5, 0, 1, 1, [0; 32]));
		// …the honest challenger's own is still accepted: each account holds one slot.
		assert_ok!(open_challenge(3, 0, 1, 1, [0; 32]));
		assert_noop!(open_challenge(3, 0, 1, 1, [0; 32]), Error::<Test>::AlreadyChallenged);
		assert_eq!(pallet_challenges::OpenAgainst::<Test>::get((0, 1, 1)), 4);
	});
}

#[test]
fn repeated_challenges_cannot_slash_twice() {
	run_test(|| {
		final_round();
		jurors(&[4, 5], 1_000);
		// Two challenges against the same contribution, both convicting.
		assert_ok!(open_challenge(2, 0, 1, 1, [0; 32]));
		let (second, jury) = challenge(3, 0, 1, 1);
		all_vote(0, &jury, true);
		assert_eq!(staked(1), 500);
		all_vote(second, &jury, true);
		assert_eq!(staked(1), 500, "one offence, one slash");
		assert!(challenges_events().contains(&pallet_challenges::Event::AccusedFoundGuilty {
			challenge_id: second,
			accused: 1,
			slashed: 0
		}));
		assert_noop!(open_challenge(4, 0, 1, 1, [0; 32]), Error::<Test>::AlreadyConvicted);
	});
}

#[test]
fn a_flood_of_challenges_costs_an_absent_juror_one_no_show_slash() {
	run_test(|| {
		final_round();
		// The attacker opens one challenge against honest member 1 from each of many accounts,
		// as fast as the schedule takes them, hoping the seated jurors cannot vote on them all.
		let attackers: Vec<AccountId> = (300..310).collect();
		for a in &attackers {
			mint(*a, 10 * BOND);
		}
		let mut opened = 0;
		for a in &attackers {
			loop {
				match open_challenge(*a, 0, 1, 1, [0x44; 32]) {
					Ok(()) => break opened += 1,
					Err(e) if e == pallet_challenges::Error::<Test>::ScheduleFull.into() => {
						run_to_block(System::block_number() + 1)
					},
					Err(e) => panic!("{e:?}"),
				}
			}
		}
		assert!(opened >= 8, "{opened} challenges opened");
		// Nobody votes; every challenge expires.
		run_to_block(System::block_number() + 60);
		assert_eq!(pallet_challenges::OpenChallenges::<Test>::iter().count(), 0);
		// Each absent juror answers once for the round: 10 % of its 1 000 snapshot stake, not
		// once per challenge.
		for juror in [2u64, 3, 4, 5] {
			let slashed: Vec<Balance> = challenges_events()
				.into_iter()
				.filter_map(|e| match e {
					pallet_challenges::Event::JurorNoShow { juror: j, slashed, .. }
						if j == juror =>
					{
						Some(slashed)
					},
					_ => None,
				})
				.collect();
			assert!(slashed.len() >= 2, "juror {juror} sat on several challenges");
			assert_eq!(slashed.iter().sum::<Balance>(), 100, "juror {juror}: {slashed:?}");
		}
	});
}
