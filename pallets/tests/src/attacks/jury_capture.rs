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
		// Every member is a juror, the sybils too; an outsider with a large bond as well (it
		// did not contribute, so it is never drawn).
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
		assert_eq!(verdict_of(0, 1, 1), Some(Verdict::Innocent));
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
		// Every member but the sybils opted out: the sybil 3 (100) is below MinJuryStake (500)
		// and the challenger 2 is a party, so no verdict is possible.
		opt_out(&[1, 4, 5]);
		let free_2 = free(2);
		let (id, jury) = challenge(2, 0, 1, 1);
		assert!(jury.is_empty());
		assert!(!OpenChallenges::<Test>::contains_key(id));
		assert_eq!(verdict_of(0, 1, 1), Some(Verdict::NoJury));
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
		// Unequal jurors: members 3 (2 000), 4 and 5 (500 each); 2 accuses 1 (both opted out).
		training_pool(3, two_thirds(), &[1_000, 100, 2_000, 500, 500]);
		for who in 1..=5 {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2, 3, 4]));
		}
		opt_out(&[1, 2]);
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

/// An adversary that is the only one to register as jurors while the honest members (most of
/// the stake) never do: were committees drawn from registered contributors only, its
/// accounts would be the whole committee and convict at will. Every contributor is a juror
/// by default, so the adversary's share of the eligible stake is its share of the round's.
#[test]
fn honest_members_that_never_register_still_sit_on_the_committee() {
	run_test(|| {
		use synod_primitives::protocol::jury::wrong_verdict_probability;
		// Honest 1, 4 and 5 (1 000 each) never call `register_juror`; the adversary's 2
		// (challenger, 100) and 3 (600) hold 19 % of the round's stake.
		training_pool(3, two_thirds(), &[1_000, 100, 600, 1_000, 1_000]);
		for who in 1..=5 {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2, 3, 4]));
		}
		// Registering is not needed (and opting in twice is refused).
		assert_noop!(
			Challenges::register_juror(RuntimeOrigin::signed(3)),
			Error::<Test>::AlreadyJuror
		);
		let (id, jury) = challenge(2, 0, 1, 1);
		// The eligible stake, as the draw weighs it: every contributor's snapshot stake.
		let contributors =
			<Checkpoints as synod_primitives::CheckpointsInspect<_, _>>::final_checkpoint(0, 1)
				.expect("final")
				.contributors;
		assert_eq!(contributors.len(), 5, "all five contributors are eligible");
		let stake: u128 = contributors.iter().map(|p| p.stake).sum();
		let adversary: u128 =
			contributors.iter().filter(|p| p.who == 2 || p.who == 3).map(|p| p.stake).sum();
		assert_eq!(stake, 3_700);
		// The probability that the adversary's seats turn the verdict, by the committee's
		// own binomial (seats drawn with replacement ∝ stake).
		let p = wrong_verdict_probability(JURY_SEATS, adversary as f64 / stake as f64);
		println!(
			"{{\"adversary_share\":{:.3},\"wrong_verdict_probability\":{p:e}}}",
			adversary as f64 / stake as f64
		);
		assert!(p < 1e-12, "P(wrong verdict) = {p:e}");
		// The honest seats acquit.
		let c = OpenChallenges::<Test>::get(id).expect("drawn");
		let honest: Vec<(AccountId, u128)> =
			jury.iter().filter(|(j, _)| *j != 2 && *j != 3).cloned().collect();
		assert!(
			c.jury.iter().filter(|s| s.who != 2 && s.who != 3).map(|s| s.seats).sum::<u32>()
				>= c.votes.conviction_threshold()
		);
		for sybil in [2, 3] {
			assert_ok!(Challenges::vote(RuntimeOrigin::signed(sybil), id, true));
		}
		all_vote(id, &honest, false);
		assert_eq!(verdict_of(0, 1, 1), Some(Verdict::Innocent));
		assert_eq!(staked(1), 1_000);
	});
}

#[test]
fn an_accused_alone_on_its_committee_cannot_acquit_itself() {
	run_test(|| {
		final_round();
		// Every other member opted out: a committee of the accused's own seats would acquit it
		// and pay it the challenger's bond. The parties' stake does not count toward
		// `MinJuryStake`.
		opt_out(&[1, 2, 4, 5]);
		let free_outsider = free(OUTSIDER);
		let (id, jury) = challenge(OUTSIDER, 0, 1, 3);
		assert!(jury.is_empty(), "no verdict");
		assert_eq!(verdict_of(0, 1, 3), Some(Verdict::NoJury));
		assert_eq!(free(OUTSIDER), free_outsider, "the bond is back");
		assert!(challenges_events().iter().any(
			|e| matches!(e, Event::NoJuryDrawn { challenge_id, jury_stake: 0 } if *challenge_id == id)
		));
	});
}

/// Commits the pool's open round by all five members at each fifth block up to block `until`
/// (rounds of pool 0 go on while the test waits) and returns the last round committed.
fn rounds_go_on_until(until: u64) -> u32 {
	let mut last = 0;
	while System::block_number() < until {
		run_to_block(until.min(System::block_number() + 5));
		let round = pallet_checkpoints::OpenRounds::<Test>::get(0).expect("open").round;
		for who in 1..=5 {
			assert_ok!(commit(who, round, 8, &[0, 1, 2, 3, 4]));
		}
		last = round;
	}
	last
}

/// Attack: an induced no-show takes the honest jurors off a round's committees. The adversary
/// (member 5, a fifth of the stake) makes the honest jurors miss a vote (here they simply do
/// not vote; on a live chain, more challenges at once than one voting period's replays), so
/// that the expiry opted each of them out as a no-show; in that same block, before they
/// opted back in, it opens a challenge against honest member 1's contribution to a round they
/// all backed. Read at that moment, the eligible jurors were the adversary alone, whose seats
/// convicted. A no-show now stays a juror (it loses `NoShowSlash` once per round).
#[test]
fn induced_no_shows_cannot_take_honest_jurors_off_a_rounds_committees() {
	run_test(|| {
		let rounds = edited(spec(50, 5, two_thirds()), |s| s.terms.rounds = 50);
		assert_ok!(TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), rounds));
		for who in 1..=5 {
			bond_and_join(who, 0, 1_000);
		}
		for who in 1..=5 {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2, 3, 4]));
		}
		let timeline =
			<TrainingPools as synod_primitives::PoolsInterface<_, _, _>>::round_params(0)
				.expect("pool")
				.timeline;
		let f1 = pallet_checkpoints::FinalCheckpoints::<Test>::get(0, 1).expect("final");
		rounds_go_on_until(timeline.challenges_from(f1.finalized_at));
		// The adversary's accomplice challenges the adversary's own contribution; only the
		// adversary votes (innocent), the honest jurors miss the vote.
		mint(300, 10 * BOND);
		mint(301, 10 * BOND);
		let sham = pallet_challenges::NextChallengeId::<Test>::get();
		assert_ok!(open_challenge(300, 0, 1, 5, [0x44; 32]));
		let c = OpenChallenges::<Test>::get(sham).expect("open");
		let expires = c.expires_at;
		rounds_go_on_until(c.draw_at);
		let jury: Vec<AccountId> = OpenChallenges::<Test>::get(sham)
			.expect("drawn")
			.jury
			.iter()
			.map(|s| s.who)
			.collect();
		assert!(jury.iter().any(|j| *j != 5), "honest jurors are seated");
		if jury.contains(&5) {
			assert_ok!(Challenges::vote(RuntimeOrigin::signed(5), sham, false));
		}
		// The rounds go on; round `last` becomes final as late as lets its challenges open in
		// the expiry's block.
		let last = rounds_go_on_until(expires - timeline.challenges_from(0));
		let final_last = pallet_checkpoints::FinalCheckpoints::<Test>::get(0, last).expect("final");
		assert_eq!(timeline.challenges_from(final_last.finalized_at), expires);
		run_to_block(expires);
		assert!(!OpenChallenges::<Test>::contains_key(sham), "expired");
		for honest in jury.iter().filter(|j| **j != 5) {
			assert!(
				!pallet_challenges::OptedOut::<Test>::contains_key(honest),
				"a no-show stays a juror"
			);
		}
		// In the expiry's block, before anyone opts back in: a challenge against honest
		// member 1's contribution to round `last`, which every honest juror backed (final
		// before the expiry, its challenges open from the expiry's block).
		let id = pallet_challenges::NextChallengeId::<Test>::get();
		assert_ok!(open_challenge(301, 0, last, 1, [0x44; 32]));
		assert_eq!(System::block_number(), expires);
		let eligible = pallet_challenges::EligibleJurors::<Test>::get(id).expect("frozen");
		assert_eq!(
			eligible.into_inner(),
			vec![1, 2, 3, 4, 5],
			"the round's honest jurors stay eligible"
		);
		let c = OpenChallenges::<Test>::get(id).expect("open");
		run_to_block(c.draw_at);
		let c = OpenChallenges::<Test>::get(id).expect("drawn");
		let adversary: u32 = c.jury.iter().filter(|s| s.who == 5).map(|s| s.seats).sum();
		assert!(adversary < c.votes.conviction_threshold(), "{adversary} of {JURY_SEATS} seats");
		// The adversary votes guilty, the honest jurors innocent: acquitted.
		if c.jury.iter().any(|s| s.who == 5) {
			assert_ok!(Challenges::vote(RuntimeOrigin::signed(5), id, true));
		}
		let honest: Vec<(AccountId, u128)> =
			c.jury.iter().filter(|s| s.who != 5).map(|s| (s.who, s.stake)).collect();
		all_vote(id, &honest, false);
		assert_eq!(verdict_of(0, last, 1), Some(Verdict::Innocent));
		assert_eq!(staked(1), 900, "the honest member loses its no-show slash, nothing more");
	});
}
