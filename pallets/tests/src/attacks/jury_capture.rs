//! Attack 2: jury capture. Before, the jury was ≤ 5 members of the pool ranked by a public hash
//! known before the challenge, counted per account: two minimum-stake sybils in a 3-member pool
//! were challenger and whole jury, and convicted an honest member at a profit.

use super::{all_vote, challenge};
use crate::mock::*;
use frame_support::{assert_noop, assert_ok};
use pallet_challenges::{Error, Event, OpenChallenges, Verdict, Verdicts};

/// Pool 0: honest member 1 (1 000) and sybils 2, 3 (100 each); round 1 final with all three
/// contributing.
fn sybil_pool() {
	training_pool(3, two_thirds(), &[1_000, 100, 100]);
	for who in 1..=3 {
		assert_ok!(commit(who, 1, 7, &[0, 1, 2]));
	}
	assert!(pallet_checkpoints::FinalCheckpoints::<Test>::get(0, 1).is_some());
}

#[test]
fn jury_cannot_be_captured_by_sybils() {
	run_test(|| {
		sybil_pool();
		// Honest jurors from other pools, and the sybil, opt in.
		jurors(&[5, 6, 7], 1_000);
		assert_ok!(Challenges::register_juror(RuntimeOrigin::signed(3)));
		let (free_2, free_5) = (free(2), free(5));
		// Sybil 2 accuses honest member 1.
		let (id, jury) = challenge(2, 0, 1, 1);
		assert_eq!(jury.len(), 3);
		assert!(jury.iter().all(|(j, _)| *j != 1 && *j != 2), "the parties never sit");
		let honest_stake: u128 = jury.iter().filter(|(j, _)| *j != 3).map(|(_, s)| s).sum();
		assert!(honest_stake >= 2_000, "stake-weighted: at least two honest jurors sit");
		// The sybil votes guilty if it sits; the honest jurors vote innocent.
		if jury.iter().any(|(j, _)| *j == 3) {
			assert_ok!(Challenges::vote(RuntimeOrigin::signed(3), id, true));
		}
		let honest: Vec<(AccountId, u128)> =
			jury.iter().filter(|(j, _)| *j != 3).cloned().collect();
		all_vote(id, &honest, false);
		assert_eq!(Verdicts::<Test>::get((0, 1, 1)), Some(Verdict::Innocent));
		assert!(!challenges_events()
			.iter()
			.any(|e| matches!(e, Event::AccusedFoundGuilty { .. })));
		// Nothing lost by the honest member; the challenger lost its bond to the jurors.
		assert_eq!(staked(1), 1_000);
		assert_eq!(free(2), free_2 - BOND);
		if jury.iter().any(|(j, _)| *j == 5) && !OpenChallenges::<Test>::contains_key(id) {
			assert!(free(5) >= free_5, "jurors who voted innocent share the bond");
		}
	});
}

#[test]
fn sybil_jury_below_minimum_stake_gives_no_verdict() {
	run_test(|| {
		sybil_pool();
		// Only the sybil (100) opted in: below MinJuryStake (500), no verdict is possible.
		assert_ok!(Challenges::register_juror(RuntimeOrigin::signed(3)));
		let free_2 = free(2);
		let (id, jury) = challenge(2, 0, 1, 1);
		assert!(jury.is_empty());
		assert!(!OpenChallenges::<Test>::contains_key(id));
		assert_eq!(Verdicts::<Test>::get((0, 1, 1)), Some(Verdict::NoJury));
		assert_eq!(staked(1), 1_000, "nobody slashed");
		assert_eq!(free(2), free_2, "bond returned");
		assert!(challenges_events()
			.iter()
			.any(|e| matches!(e, Event::NoJuryDrawn { challenge_id, .. } if *challenge_id == id)));
	});
}

#[test]
fn jury_is_drawn_after_the_challenge_from_a_later_block() {
	run_test(|| {
		sybil_pool();
		jurors(&[4, 5, 6, 7, 8], 1_000);
		assert_ok!(open_challenge(2, 0, 1, 1, [0x44; 32]));
		let c = OpenChallenges::<Test>::get(0).expect("open");
		assert!(c.jury.is_empty() && c.draw_at > System::block_number());
		// Nobody can vote before the draw.
		assert_noop!(
			Challenges::vote(RuntimeOrigin::signed(4), 0, true),
			Error::<Test>::JuryNotDrawn
		);
		assert_noop!(
			Challenges::advance_challenge(RuntimeOrigin::signed(OUTSIDER), 0),
			Error::<Test>::NothingDue
		);
		// The draw uses the hash of block draw_at − 1: another hash, (usually) another jury.
		let seeded = |h: sp_core::H256| {
			let mut ext = new_test_ext();
			ext.execute_with(|| {
				sybil_pool();
				jurors(&[4, 5, 6, 7, 8], 1_000);
				assert_ok!(open_challenge(2, 0, 1, 1, [0x44; 32]));
				let c = OpenChallenges::<Test>::get(0).expect("open");
				run_to_block(c.draw_at - 1);
				frame_system::BlockHash::<Test>::insert(c.draw_at - 1, h);
				System::set_block_number(c.draw_at);
				assert_ok!(Challenges::advance_challenge(RuntimeOrigin::signed(OUTSIDER), 0));
				OpenChallenges::<Test>::get(0).expect("drawn").jury.into_inner()
			})
		};
		let juries: std::collections::BTreeSet<Vec<(AccountId, u128)>> =
			(1u8..9).map(|b| seeded(sp_core::H256::repeat_byte(b))).collect();
		assert!(juries.len() > 1, "the jury depends on the later block's hash");
	});
}

#[test]
fn conviction_needs_two_thirds_of_jury_stake() {
	run_test(|| {
		sybil_pool();
		// Unequal jurors: 5 holds 2 000, 6 and 7 hold 500 each.
		jurors(&[5], 2_000);
		jurors(&[6, 7], 500);
		let (free_2, treasury) = (free(2), free(TREASURY));
		let (free_5, free_6) = (free(5), free(6));
		let (id, jury) = challenge(2, 0, 1, 1);
		assert_eq!(jury.iter().map(|(_, s)| s).sum::<u128>(), 3_000);
		// Two of three jurors by count (1 000, a third of the stake) cannot convict…
		assert_ok!(Challenges::vote(RuntimeOrigin::signed(6), id, true));
		assert_ok!(Challenges::vote(RuntimeOrigin::signed(7), id, true));
		assert!(OpenChallenges::<Test>::contains_key(id), "a head count would have convicted");
		// …the juror holding ⅔ of the stake decides.
		assert_ok!(Challenges::vote(RuntimeOrigin::signed(5), id, true));
		assert_eq!(Verdicts::<Test>::get((0, 1, 1)), Some(Verdict::Guilty));
		// 50 % of the snapshot stake (1 000): 30 % of it (150) to the guilty voters by stake
		// (100, 25, 25), 20 % to the challenger, the rest to the treasury; the bond is back.
		assert_eq!(staked(1), 500);
		assert_eq!(free(2), free_2 + 100);
		assert_eq!((free(5), free(6)), (free_5 + 100, free_6 + 25));
		assert_eq!(free(TREASURY), treasury + 250);
	});
}

#[test]
fn juror_list_cannot_be_flooded_with_minimum_stake() {
	run_test(|| {
		// MaxJurors is 6: six minimum-stake jurors fill the list…
		jurors(&[1, 2, 3, 4, 5, 6], 100);
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(7), 100));
		assert_noop!(
			Challenges::register_juror(RuntimeOrigin::signed(7)),
			Error::<Test>::TooManyJurors
		);
		// …but a juror with more stake replaces the weakest.
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(8), 1_000));
		assert_ok!(Challenges::register_juror(RuntimeOrigin::signed(8)));
		assert!(pallet_challenges::Jurors::<Test>::get().contains(&8));
		assert_eq!(pallet_challenges::Jurors::<Test>::get().len(), 6);
		assert_noop!(
			Challenges::register_juror(RuntimeOrigin::signed(OUTSIDER)),
			Error::<Test>::JurorStakeTooLow
		);
	});
}
