//! Attack 2: jury capture. Minimum-stake sybils (as challenger and jurors) cannot outvote honest
//! stake: seats follow snapshot stake, not accounts, and only the round's contributors sit.

use super::{all_vote, challenge};
use crate::mock::*;
use frame_support::{assert_noop, assert_ok};
use pallet_challenges::{Error, Event, OpenChallenges, Verdict, Verdicts};

/// Pool 0: honest members 1, 4 and 5 (1 000 each) and sybils 2, 3 (100 each); round 1 final
/// with all five contributing.
fn sybil_pool() {
	training_pool(3, two_thirds(), &[1_000, 100, 100, 1_000, 1_000]);
	for who in 1..=5 {
		assert_ok!(commit(who, 1, 7, &[0, 1, 2, 3, 4]));
	}
	assert!(pallet_checkpoints::FinalCheckpoints::<Test>::get(0, 1).is_some());
}

#[test]
fn jury_cannot_be_captured_by_sybils() {
	run_test(|| {
		sybil_pool();
		// Every member opts in, the sybils too; an outsider with a large bond as well (it did
		// not contribute, so it is never drawn).
		register_jurors(&[1, 2, 3, 4, 5]);
		jurors(&[6], 5_000);
		let (free_2, free_4) = (free(2), free(4));
		// Sybil 2 accuses honest member 1.
		let (id, jury) = challenge(2, 0, 1, 1);
		assert!(jury.iter().all(|(j, _)| *j != 6), "only the round's contributors sit");
		assert!(jury.iter().all(|(j, s)| *s == if *j == 2 || *j == 3 { 100 } else { 1_000 }));
		let c = OpenChallenges::<Test>::get(id).expect("drawn");
		let sybil_seats: u32 =
			c.jury.iter().filter(|s| s.who == 2 || s.who == 3).map(|s| s.seats).sum();
		assert!(
			sybil_seats < c.votes.conviction_threshold(),
			"seats ∝ stake: the sybils (6 % of the stake) hold {sybil_seats} of {JURY_SEATS}"
		);
		// The sybils vote guilty; the honest jurors (the accused among them) vote innocent.
		for sybil in [2, 3] {
			if jury.iter().any(|(j, _)| *j == sybil) {
				assert_ok!(Challenges::vote(RuntimeOrigin::signed(sybil), id, true));
			}
		}
		let honest: Vec<(AccountId, u128)> =
			jury.iter().filter(|(j, _)| *j != 2 && *j != 3).cloned().collect();
		all_vote(id, &honest, false);
		assert_eq!(Verdicts::<Test>::get((0, 1, 1)), Some(Verdict::Innocent));
		assert!(!challenges_events()
			.iter()
			.any(|e| matches!(e, Event::AccusedFoundGuilty { .. })));
		// Nothing lost by the honest member; the challenger lost its bond to the jurors.
		assert_eq!(staked(1), 1_000);
		assert_eq!(free(2), free_2 - BOND);
		assert!(free(4) > free_4, "jurors who voted innocent share the bond");
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
		register_jurors(&[1, 3, 4, 5]);
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
		// The draw uses the randomness of block draw_at − 1 (its author's VRF): other randomness,
		// (usually) another jury.
		let seeded = |h: sp_core::H256| {
			let mut ext = new_test_ext();
			ext.execute_with(|| {
				sybil_pool();
				register_jurors(&[1, 3, 4, 5]);
				assert_ok!(open_challenge(2, 0, 1, 1, [0x44; 32]));
				let c = OpenChallenges::<Test>::get(0).expect("open");
				run_to_block(c.draw_at - 1);
				pallet_randomness::History::<Test>::insert(c.draw_at - 1, h.0);
				System::set_block_number(c.draw_at);
				assert_ok!(Challenges::advance_challenge(RuntimeOrigin::signed(OUTSIDER), 0));
				OpenChallenges::<Test>::get(0).expect("drawn").jury.into_inner()
			})
		};
		let juries: std::collections::BTreeSet<Vec<pallet_challenges::Seated<AccountId>>> =
			(1u8..9).map(|b| seeded(sp_core::H256::repeat_byte(b))).collect();
		assert!(juries.len() > 1, "the jury depends on the later block's randomness");
	});
}

#[test]
fn conviction_needs_a_majority_of_seats() {
	run_test(|| {
		// Unequal jurors: members 3 (2 000), 4 and 5 (500 each); 2 accuses 1.
		training_pool(3, two_thirds(), &[1_000, 100, 2_000, 500, 500]);
		for who in 1..=5 {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2, 3, 4]));
		}
		register_jurors(&[3, 4, 5]);
		let (free_2, treasury) = (free(2), free(TREASURY));
		let (free_3, free_4) = (free(3), free(4));
		let (id, jury) = challenge(2, 0, 1, 1);
		assert_eq!(jury.iter().map(|(_, s)| s).sum::<u128>(), 3_000);
		let seats = |who| {
			let c = OpenChallenges::<Test>::get(id).expect("open");
			c.jury.iter().find(|s| s.who == who).map_or(0, |s| u128::from(s.seats))
		};
		let (s3, s4, s5) = (seats(3), seats(4), seats(5));
		assert_eq!(s3 + s4 + s5, u128::from(JURY_SEATS));
		// Two of three jurors by count (about a third of the seats) cannot convict…
		assert_ok!(Challenges::vote(RuntimeOrigin::signed(4), id, true));
		assert_ok!(Challenges::vote(RuntimeOrigin::signed(5), id, true));
		assert!(OpenChallenges::<Test>::contains_key(id), "a head count would have convicted");
		// …the juror holding ⅔ of the stake (about ⅔ of the seats) decides.
		assert_ok!(Challenges::vote(RuntimeOrigin::signed(3), id, true));
		assert_eq!(Verdicts::<Test>::get((0, 1, 1)), Some(Verdict::Guilty));
		// 50 % of the snapshot stake (1 000): 30 % of it (150) to the guilty voters by seats,
		// 20 % to the challenger, the rest and the rounding dust to the treasury; the bond is
		// back.
		let paid = |s: u128| 150 * s / u128::from(JURY_SEATS);
		assert_eq!(staked(1), 500);
		assert_eq!(free(2), free_2 + 100);
		assert_eq!((free(3), free(4)), (free_3 + paid(s3), free_4 + paid(s4)));
		assert_eq!(free(TREASURY), treasury + 400 - paid(s3) - paid(s4) - paid(s5));
	});
}

#[test]
fn juror_list_cannot_be_flooded_with_minimum_stake() {
	run_test(|| {
		// MAX_JURORS minimum-stake jurors fill the list…
		let flood: Vec<AccountId> = (0..u64::from(MAX_JURORS)).map(|i| 1_000 + i).collect();
		for who in &flood {
			mint(*who, 1_000);
		}
		jurors(&flood, 100);
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(7), 100));
		assert_noop!(
			Challenges::register_juror(RuntimeOrigin::signed(7)),
			Error::<Test>::TooManyJurors
		);
		// …but a juror with more stake replaces the weakest.
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(8), 1_000));
		assert_ok!(Challenges::register_juror(RuntimeOrigin::signed(8)));
		assert!(pallet_challenges::Jurors::<Test>::get().contains(&8));
		assert_eq!(pallet_challenges::Jurors::<Test>::get().len(), MAX_JURORS as usize);
		assert_noop!(
			Challenges::register_juror(RuntimeOrigin::signed(OUTSIDER)),
			Error::<Test>::JurorStakeTooLow
		);
	});
}

#[test]
fn an_accused_alone_on_its_committee_cannot_acquit_itself() {
	run_test(|| {
		final_round();
		// Only the accused registered: a committee of its own seats would acquit it and pay it
		// the challenger's bond. The parties' stake does not count toward `MinJuryStake`.
		register_jurors(&[3]);
		let free_outsider = free(OUTSIDER);
		let (id, jury) = challenge(OUTSIDER, 0, 1, 3);
		assert!(jury.is_empty(), "no verdict");
		assert_eq!(Verdicts::<Test>::get((0, 1, 3)), Some(Verdict::NoJury));
		assert_eq!(free(OUTSIDER), free_outsider, "the bond is back");
		assert!(challenges_events().iter().any(
			|e| matches!(e, Event::NoJuryDrawn { challenge_id, jury_stake: 0 } if *challenge_id == id)
		));
	});
}
