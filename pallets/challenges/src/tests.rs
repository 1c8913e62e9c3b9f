//! Unit tests: opening (and each error), jury selection, votes, guilty and innocent verdicts
//! with their slashing arithmetic, deterministic expiry. `try_state` runs after every test.

use crate::{mock::*, pallet::*, Error, Event};
use frame_support::{assert_noop, assert_ok, traits::fungible::InspectHold};
use synod_primitives::{ChallengesInspect, TrainerStake};

fn open(challenger: AccountId, accused: AccountId) -> sp_runtime::DispatchResult {
	Challenges::open_challenge(RuntimeOrigin::signed(challenger), 0, 1, accused, [0xEE; 32])
}

fn bond_held(who: AccountId) -> Balance {
	Balances::balance_on_hold(&RuntimeHoldReason::Challenges(HoldReason::ChallengeBond), &who)
}

#[test]
fn open_challenge_holds_bond_and_draws_a_jury() {
	run_test(|| {
		final_round();
		assert_ok!(open(OUTSIDER, 3));
		assert_eq!(bond_held(OUTSIDER), 300);
		let c = OpenChallenges::<Test>::get(0).unwrap();
		assert_eq!((c.pool_id, c.round, c.accused, c.challenger), (0, 1, 3, OUTSIDER));
		assert_eq!(c.jury.len(), 3);
		assert!(!c.jury.contains(&3));
		assert_eq!(c.expires_at, 21);
		// The jury is a pure function of (final hash, accused): the same for any challenger.
		let expected = Challenges::select_jury(0, 1, &[7; 32], &3, &OUTSIDER);
		assert_eq!(c.jury, expected);
		assert_eq!(ChallengeOf::<Test>::get((0, 1, 3)), Some(0));
		assert!(matches!(events().last(), Some(Event::ChallengeOpened { challenge_id: 0, accused: 3, .. })));
	});
}

#[test]
fn a_member_challenger_is_never_its_own_juror() {
	run_test(|| {
		final_round();
		for challenger in [1, 2, 4, 5] {
			let jury = Challenges::select_jury(0, 1, &[7; 32], &3, &challenger);
			assert!(!jury.contains(&challenger) && !jury.contains(&3));
			assert_eq!(jury.len(), 3);
		}
		assert_ok!(open(1, 3));
		assert!(!OpenChallenges::<Test>::get(0).unwrap().jury.contains(&1));
	});
}

#[test]
fn open_challenge_errors() {
	run_test(|| {
		assert_noop!(open(OUTSIDER, 3), Error::<Test>::PoolNotFound);
		training_pool(3, sp_runtime::Perbill::from_rational(2u32, 3u32), &[1_000; 5]);
		assert_noop!(open(OUTSIDER, 3), Error::<Test>::RoundNotFinal);
		for who in 1..=4 {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2, 3]));
		}
		// Trainer 5 was not included: not a contributor.
		assert_noop!(open(OUTSIDER, 5), Error::<Test>::NotAContributor);
		assert_noop!(open(3, 3), Error::<Test>::SelfChallenge);
		assert_noop!(open(CREATOR + 1, 3), Error::<Test>::InsufficientBond);
		assert_ok!(open(OUTSIDER, 3));
		assert_noop!(open(OUTSIDER, 3), Error::<Test>::AlreadyChallenged);
		// MaxExpiriesPerBlock = 2 challenges opened in one block.
		assert_ok!(open(OUTSIDER, 2));
		assert_noop!(open(OUTSIDER, 1), Error::<Test>::TooManyChallenges);
		System::set_block_number(7); // finalized at 1, window 5
		assert_noop!(open(OUTSIDER, 1), Error::<Test>::ChallengeWindowClosed);
	});
}

#[test]
fn no_jurors_when_nobody_else_takes_part() {
	run_test(|| {
		training_pool(3, sp_runtime::Perbill::from_rational(2u32, 3u32), &[1_000, 1_000]);
		assert_ok!(commit(1, 1, 7, &[0, 1]));
		assert_ok!(commit(2, 1, 7, &[0, 1]));
		// Trainer 2 challenges trainer 1: no third member can judge.
		assert_noop!(open(2, 1), Error::<Test>::NoJurors);
	});
}

#[test]
fn guilty_verdict_slashes_and_pays_challenger() {
	run_test(|| {
		final_round();
		assert_ok!(open(OUTSIDER, 3));
		let jury = OpenChallenges::<Test>::get(0).unwrap().jury.to_vec();
		let before = Balances::free_balance(OUTSIDER);
		assert_ok!(Challenges::vote(RuntimeOrigin::signed(jury[0]), 0, true));
		assert!(OpenChallenges::<Test>::get(0).is_some(), "one vote is not a majority");
		assert_ok!(Challenges::vote(RuntimeOrigin::signed(jury[1]), 0, true));
		// 50 % of 1_000 slashed; the challenger gets 20 % of it and its bond back.
		assert_eq!(TrainerStaking::active_stake(&3), 500);
		assert_eq!(Balances::free_balance(OUTSIDER), before + 300 + 100);
		assert_eq!(Balances::free_balance(TREASURY), 1 + 400);
		assert_eq!(bond_held(OUTSIDER), 0);
		assert!(OpenChallenges::<Test>::get(0).is_none());
		assert_eq!(Verdicts::<Test>::get((0, 1, 3)), Some(Verdict::Guilty));
		assert!(<Challenges as ChallengesInspect<_>>::is_guilty(0, 1, &3));
		assert!(!<Challenges as ChallengesInspect<_>>::is_guilty(0, 1, &2));
		assert!(events().contains(&Event::AccusedFoundGuilty { challenge_id: 0, accused: 3, slashed: 500 }));
		assert_noop!(Challenges::vote(RuntimeOrigin::signed(jury[2]), 0, true), Error::<Test>::ChallengeNotFound);
	});
}

#[test]
fn innocent_verdict_slashes_the_bond() {
	run_test(|| {
		final_round();
		assert_ok!(open(OUTSIDER, 3));
		let jury = OpenChallenges::<Test>::get(0).unwrap().jury.to_vec();
		let before = Balances::free_balance(OUTSIDER);
		assert_ok!(Challenges::vote(RuntimeOrigin::signed(jury[0]), 0, true));
		assert_ok!(Challenges::vote(RuntimeOrigin::signed(jury[1]), 0, false));
		assert!(OpenChallenges::<Test>::get(0).is_some());
		assert_ok!(Challenges::vote(RuntimeOrigin::signed(jury[2]), 0, false));
		assert_eq!(Balances::free_balance(OUTSIDER), before, "bond not returned");
		assert_eq!(bond_held(OUTSIDER), 0);
		assert_eq!(Balances::free_balance(TREASURY), 1 + 300);
		assert_eq!(TrainerStaking::active_stake(&3), 1_000, "the accused keeps its stake");
		assert_eq!(Verdicts::<Test>::get((0, 1, 3)), Some(Verdict::Innocent));
		assert!(events().contains(&Event::AccusedFoundInnocent { challenge_id: 0, accused: 3, bond_slashed: 300 }));
	});
}

#[test]
fn vote_errors() {
	run_test(|| {
		assert_noop!(Challenges::vote(RuntimeOrigin::signed(1), 0, true), Error::<Test>::ChallengeNotFound);
		final_round();
		assert_ok!(open(OUTSIDER, 3));
		let c = OpenChallenges::<Test>::get(0).unwrap();
		let outsider_juror = (1..=5).find(|w| !c.jury.contains(w)).unwrap();
		assert_noop!(Challenges::vote(RuntimeOrigin::signed(outsider_juror), 0, true), Error::<Test>::NotJuror);
		assert_ok!(Challenges::vote(RuntimeOrigin::signed(c.jury[0]), 0, true));
		assert_noop!(Challenges::vote(RuntimeOrigin::signed(c.jury[0]), 0, false), Error::<Test>::AlreadyVoted);
	});
}

#[test]
fn unresolved_challenge_expires_at_its_block() {
	run_test(|| {
		final_round();
		assert_ok!(open(OUTSIDER, 3));
		let jury = OpenChallenges::<Test>::get(0).unwrap().jury.to_vec();
		assert_ok!(Challenges::vote(RuntimeOrigin::signed(jury[0]), 0, true));
		run_to_block(20);
		assert!(OpenChallenges::<Test>::get(0).is_some());
		run_to_block(21);
		assert!(OpenChallenges::<Test>::get(0).is_none());
		assert_eq!(Verdicts::<Test>::get((0, 1, 3)), Some(Verdict::Expired));
		assert_eq!(bond_held(OUTSIDER), 0);
		assert_eq!(Balances::free_balance(OUTSIDER), 10_000);
		assert_eq!(TrainerStaking::active_stake(&3), 1_000);
		assert!(!<Challenges as ChallengesInspect<_>>::is_guilty(0, 1, &3));
		assert_eq!(events().last(), Some(&Event::ChallengeExpired { challenge_id: 0 }));
		// Votes were cleared.
		assert_eq!(Votes::<Test>::iter_prefix(0).count(), 0);
	});
}
