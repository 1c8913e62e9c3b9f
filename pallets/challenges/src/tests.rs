//! Unit tests: opening (and each error), the later draw of a committee of seats, votes counted
//! by seats, guilty and innocent verdicts with their slashing and juror pay, deterministic expiry,
//! the lazy path when a block's schedule is full, opting in and out of juries. `try_state` and the
//! issuance check run after every test. The attacks on juries are in `synod-pallet-tests`.

use crate::{mock::*, pallet::*, Error, Event};
use frame_support::{assert_noop, assert_ok, traits::fungible::InspectHold, BoundedVec};
use synod_primitives::{protocol::Verdict, ChallengesInspect, TrainerStake};

fn open(challenger: AccountId, accused: AccountId) -> sp_runtime::DispatchResult {
	open_challenge(challenger, 0, 1, accused, [0xEE; 32])
}

fn events() -> Vec<Event<Test>> {
	challenges_events()
}

fn bond_held(who: AccountId) -> Balance {
	Balances::balance_on_hold(&RuntimeHoldReason::Challenges(HoldReason::ChallengeBond), &who)
}

/// Round 1 of pool 0 final at block 1 with members 1..=5 (1 000 snapshot stake each); members
/// 1, 2 and 4 bond 1 000 more each (which does not change their seats' weight), 3 and 5 opted
/// out of juries; the chain at block 7, the first that takes challenges (late commits close at
/// 1 + 5).
fn setup() {
	final_round();
	jurors(&[1, 2, 4], 1_000);
	opt_out(&[3, 5]);
	run_to_challenges(0, 1);
}

/// Seats of each juror of challenge `id` (drawn), in committee order.
fn seats(id: u32) -> Vec<u128> {
	let c = OpenChallenges::<Test>::get(id).expect("drawn");
	c.jury.iter().map(|s| u128::from(s.seats)).collect()
}

/// Seats of challenge `id`'s committee that are paid when their holder votes with the verdict:
/// all but the parties' (`protocol::split_per_seat`).
fn paid_seats(id: u32) -> u128 {
	let c = OpenChallenges::<Test>::get(id).expect("drawn");
	c.jury
		.iter()
		.filter(|s| s.who != c.accused && s.who != c.challenger)
		.map(|s| u128::from(s.seats))
		.sum()
}

/// The jurors of challenge `id` with their stake, after running to its draw.
fn drawn(id: u32) -> Vec<(AccountId, u128)> {
	let c = OpenChallenges::<Test>::get(id).expect("open");
	run_to_block(c.draw_at);
	OpenChallenges::<Test>::get(id)
		.expect("drawn")
		.jury
		.iter()
		.map(|s| (s.who, s.stake))
		.collect()
}

#[test]
fn open_challenge_holds_bond_and_draws_the_jury_later() {
	run_test(|| {
		setup();
		assert_ok!(open(OUTSIDER, 3));
		assert_eq!(bond_held(OUTSIDER), BOND);
		let c = OpenChallenges::<Test>::get(0).expect("open");
		assert_eq!(
			(c.pool_id, c.round, c.accused, c.challenger, c.accused_stake),
			(0, 1, 3, OUTSIDER, 1_000)
		);
		assert!(c.jury.is_empty());
		// Drawn at 7 + JURY_DELAY; expires after one round timeout (10) + VOTE_MARGIN (10).
		assert_eq!((c.draw_at, c.expires_at), (9, 29));
		assert!(matches!(
			events().last(),
			Some(Event::ChallengeOpened { challenge_id: 0, accused: 3, draw_at: 9, .. })
		));
		let jury = drawn(0);
		let mut who: Vec<AccountId> = jury.iter().map(|(j, _)| *j).collect();
		who.sort();
		assert_eq!(who, vec![1, 2, 4], "the round's contributors that did not opt out");
		assert!(jury.iter().all(|(_, stake)| *stake == 1_000), "weighted by snapshot stake");
		assert_eq!(OpenChallenges::<Test>::get(0).expect("open").votes.seats, JURY_SEATS);
		assert!(events().iter().any(|e| matches!(e, Event::JuryDrawn { challenge_id: 0, .. })));
	});
}

#[test]
fn open_challenge_errors() {
	run_test(|| {
		assert_noop!(open(OUTSIDER, 3), Error::<Test>::PoolNotFound);
		training_pool(3, two_thirds(), &[1_000; 5]);
		assert_noop!(open(OUTSIDER, 3), Error::<Test>::RoundNotFinal);
		for who in 1..=4 {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2, 3]));
		}
		// Final at block 1: late commits are taken through block 1 + 5, challenges after.
		assert_noop!(
			Challenges::open_challenge(
				RuntimeOrigin::signed(OUTSIDER),
				0,
				1,
				3,
				announcement(0, 1, 3, [0xEE; 32])
			),
			Error::<Test>::ChallengeTooEarly
		);
		run_to_challenges(0, 1);
		// Trainer 5 was not included: not a contributor.
		assert_noop!(open(OUTSIDER, 5), Error::<Test>::NotIncluded);
		assert_noop!(open(3, 3), Error::<Test>::SelfChallenge);
		assert_noop!(open(POOR, 3), Error::<Test>::InsufficientBond);
		assert_ok!(open(OUTSIDER, 3));
		assert_ok!(open(1, 3));
		// One open challenge per challenger and contribution.
		assert_noop!(open(OUTSIDER, 3), Error::<Test>::AlreadyChallenged);
		// Finalized at 1, window 5: challenges until 1 + 2·5.
		System::set_block_number(12);
		assert_noop!(open(OUTSIDER, 1), Error::<Test>::ChallengeWindowClosed);
	});
}

#[test]
fn guilty_verdict_slashes_snapshot_stake_and_pays_challenger() {
	run_test(|| {
		setup();
		assert_ok!(open(OUTSIDER, 3));
		let jury = drawn(0);
		let before = Balances::free_balance(OUTSIDER);
		let jurors_before: Vec<Balance> =
			jury.iter().map(|(j, _)| Balances::free_balance(j)).collect();
		let (seats, paid_seats) = (seats(0), paid_seats(0));
		assert_ok!(Challenges::vote(RuntimeOrigin::signed(jury[0].0), 0, true));
		assert!(OpenChallenges::<Test>::get(0).is_some(), "⅓ of the seats is not enough");
		assert_ok!(Challenges::vote(RuntimeOrigin::signed(jury[1].0), 0, true));
		// 50 % of 1 000 slashed: 30 % of it (150) to the two guilty voters per seat of the
		// committee, 20 % (100) and its bond back to the challenger, the rest (250, the part of
		// the seats that did not vote guilty and the rounding dust) to the treasury.
		let paid = |i: usize| 150 * seats[i] / paid_seats;
		assert!(paid(0) + paid(1) < 150, "a seat that did not vote is not paid for");
		assert_eq!(TrainerStaking::active_stake(&3), 500);
		assert_eq!(Balances::free_balance(OUTSIDER), before + BOND + 100);
		assert_eq!(Balances::free_balance(jury[0].0), jurors_before[0] + paid(0));
		assert_eq!(Balances::free_balance(jury[1].0), jurors_before[1] + paid(1));
		assert_eq!(Balances::free_balance(jury[2].0), jurors_before[2], "did not vote guilty");
		assert_eq!(Balances::free_balance(TREASURY), 1 + 400 - paid(0) - paid(1));
		assert_eq!(bond_held(OUTSIDER), 0);
		assert!(OpenChallenges::<Test>::get(0).is_none());
		assert_eq!(Verdicts::<Test>::get((0, 1, 3)), Some(Verdict::Guilty));
		assert!(<Challenges as ChallengesInspect<_>>::is_guilty(0, 1, &3));
		assert!(!<Challenges as ChallengesInspect<_>>::is_guilty(0, 1, &2));
		assert!(events().contains(&Event::AccusedFoundGuilty {
			challenge_id: 0,
			accused: 3,
			slashed: 500
		}));
		assert_noop!(
			Challenges::vote(RuntimeOrigin::signed(jury[2].0), 0, true),
			Error::<Test>::ChallengeNotFound
		);
	});
}

#[test]
fn innocent_verdict_pays_the_bond_to_the_jurors() {
	run_test(|| {
		setup();
		assert_ok!(open(OUTSIDER, 3));
		let jury = drawn(0);
		let before = Balances::free_balance(OUTSIDER);
		let juror_free: Vec<Balance> =
			jury.iter().map(|(j, _)| Balances::free_balance(j)).collect();
		let (seats, paid_seats) = (seats(0), paid_seats(0));
		assert_ok!(Challenges::vote(RuntimeOrigin::signed(jury[0].0), 0, true));
		assert_ok!(Challenges::vote(RuntimeOrigin::signed(jury[1].0), 0, false));
		assert!(OpenChallenges::<Test>::get(0).is_some());
		assert_ok!(Challenges::vote(RuntimeOrigin::signed(jury[2].0), 0, false));
		assert_eq!(Balances::free_balance(OUTSIDER), before, "bond not returned");
		assert_eq!(bond_held(OUTSIDER), 0);
		// The two innocent voters are paid the bond per seat of the committee (the guilty
		// voter's part and the dust go to `Slash`).
		let paid = |i: usize| BOND * seats[i] / paid_seats;
		assert_eq!(Balances::free_balance(jury[1].0), juror_free[1] + paid(1));
		assert_eq!(Balances::free_balance(jury[2].0), juror_free[2] + paid(2));
		assert_eq!(Balances::free_balance(jury[0].0), juror_free[0]);
		assert_eq!(TrainerStaking::active_stake(&3), 1_000, "the accused keeps its stake");
		assert_eq!(verdict_of(0, 1, 3), Some(Verdict::Innocent));
		assert!(events().contains(&Event::AccusedFoundInnocent {
			challenge_id: 0,
			accused: 3,
			bond_slashed: BOND,
			jurors_paid: paid(1) + paid(2)
		}));
	});
}

#[test]
fn vote_errors() {
	run_test(|| {
		assert_noop!(
			Challenges::vote(RuntimeOrigin::signed(1), 0, true),
			Error::<Test>::ChallengeNotFound
		);
		setup();
		assert_ok!(open(OUTSIDER, 3));
		assert_noop!(
			Challenges::vote(RuntimeOrigin::signed(6), 0, true),
			Error::<Test>::JuryNotDrawn
		);
		let jury = drawn(0);
		assert_noop!(Challenges::vote(RuntimeOrigin::signed(5), 0, true), Error::<Test>::NotJuror);
		assert_ok!(Challenges::vote(RuntimeOrigin::signed(jury[0].0), 0, true));
		assert_noop!(
			Challenges::vote(RuntimeOrigin::signed(jury[0].0), 0, false),
			Error::<Test>::AlreadyVoted
		);
		System::set_block_number(29);
		assert_noop!(
			Challenges::vote(RuntimeOrigin::signed(jury[1].0), 0, true),
			Error::<Test>::VotingClosed
		);
	});
}

#[test]
fn an_undecided_committee_acquits_at_the_end_of_its_vote() {
	run_test(|| {
		// The jurors are the round's contributors, the accused among them: they could have
		// replayed the round.
		final_round();
		jurors(&[1, 2, 4, 5], 1_000);
		assert_ok!(open(OUTSIDER, 3));
		let jury = drawn(0);
		assert_eq!(jury.len(), 5, "203 seats over 5 equal jurors seat them all");
		assert_ok!(Challenges::vote(RuntimeOrigin::signed(jury[0].0), 0, true));
		run_to_block(28);
		assert!(OpenChallenges::<Test>::get(0).is_some());
		// (Rounds 2 and 3 were voided meanwhile: stakes leaked; compare with just before.)
		let before: Vec<Balance> =
			jury.iter().map(|(j, _)| TrainerStaking::active_stake(j)).collect();
		run_to_block(29);
		assert!(OpenChallenges::<Test>::get(0).is_none());
		// One guilty vote, the other seats absent: they count for acquittal. The bond is
		// slashed; nobody voted innocent, so none of it is paid.
		assert_eq!(verdict_of(0, 1, 3), Some(Verdict::Innocent));
		assert_eq!(bond_held(OUTSIDER), 0);
		assert_eq!(Balances::free_balance(OUTSIDER), 10_000 - BOND);
		assert!(!<Challenges as ChallengesInspect<_>>::is_guilty(0, 1, &3));
		assert_eq!(
			events().last(),
			Some(&Event::AccusedFoundInnocent {
				challenge_id: 0,
				accused: 3,
				bond_slashed: BOND,
				jurors_paid: 0
			})
		);
		// The jurors that did not vote lose 10 % of their drawn stake (the 1 000 of the round's
		// snapshot) and stay jurors.
		assert_eq!(TrainerStaking::active_stake(&jury[0].0), before[0]);
		for (i, (j, _)) in jury.iter().enumerate().skip(1) {
			assert_eq!(TrainerStaking::active_stake(j), before[i] - 100);
			assert!(!OptedOut::<Test>::contains_key(j));
			assert!(!events().contains(&Event::JurorOptedOut { who: *j }));
			assert!(events().contains(&Event::JurorNoShow {
				challenge_id: 0,
				juror: *j,
				slashed: 100
			}));
		}
		assert_eq!(Votes::<Test>::iter_prefix(0).count(), 0, "votes cleared");
		assert!(OpenAgainst::<Test>::get((0, 1, 3)) == 0);
	});
}

#[test]
fn a_block_scheduled_under_a_larger_room_keeps_every_entry_and_takes_no_more() {
	run_test(|| {
		setup();
		// A runtime that lowered `MaxExpiriesPerBlock` (4 here) finds blocks scheduled under a
		// larger value: their entries stay readable, up to the storage bound.
		let ids: Vec<ChallengeId> = (100..100 + crate::MAX_SCHEDULED_PER_BLOCK).collect();
		Expiries::<Test>::insert(9, BoundedVec::truncate_from(ids.clone()));
		assert_eq!(Expiries::<Test>::get(9).into_inner(), ids, "nothing dropped");
		// No new entry goes there: the next challenge's draw (block 9) is refused.
		assert_noop!(open(OUTSIDER, 1), Error::<Test>::ScheduleFull);
		Expiries::<Test>::remove(9);
	});
}

#[test]
fn a_full_schedule_refuses_a_challenge_rather_than_leave_its_draw_unscheduled() {
	run_test(|| {
		setup();
		// MaxExpiriesPerBlock = 4: four challenges fill block 9's draws; the fifth is refused
		// (block 8's randomness is block 7's author's to know: no draw there).
		for (challenger, accused) in [(OUTSIDER, 1), (6, 1), (OUTSIDER, 2), (6, 2)] {
			assert_ok!(open(challenger, accused));
		}
		assert_eq!(Expiries::<Test>::get(9).len(), 4);
		assert_noop!(open(7, 3), Error::<Test>::ScheduleFull);
		// One block later its draw has a block.
		run_to_block(8);
		assert_ok!(open(7, 3));
		let c = OpenChallenges::<Test>::get(4).expect("open");
		assert_eq!(c.draw_at, 10);
		assert!(Expiries::<Test>::get(10).contains(&4));
		assert_noop!(
			Challenges::advance_challenge(RuntimeOrigin::signed(POOR), 4),
			Error::<Test>::NothingDue
		);
		run_to_block(10);
		assert!(!OpenChallenges::<Test>::get(4).expect("open").jury.is_empty(), "drawn on time");
		assert_noop!(
			Challenges::advance_challenge(RuntimeOrigin::signed(POOR), 4),
			Error::<Test>::NothingDue
		);
		// `advance_challenge` catches up with an expiry not yet run by `on_initialize`.
		System::set_block_number(c.expires_at);
		assert_ok!(Challenges::advance_challenge(RuntimeOrigin::signed(POOR), 4));
		assert_eq!(verdict_of(0, 1, 3), Some(Verdict::Innocent));
	});
}

#[test]
fn bonded_trainers_are_jurors_until_they_opt_out() {
	run_test(|| {
		// Only bonded trainers opt in or out (no entries for accounts without stake).
		assert_noop!(
			Challenges::unregister_juror(RuntimeOrigin::signed(1)),
			Error::<Test>::NotBonded
		);
		assert_noop!(
			Challenges::register_juror(RuntimeOrigin::signed(1)),
			Error::<Test>::NotBonded
		);
		jurors(&[1], 100);
		// A juror by default: opting in again is refused.
		assert_noop!(
			Challenges::register_juror(RuntimeOrigin::signed(1)),
			Error::<Test>::AlreadyJuror
		);
		assert_ok!(Challenges::unregister_juror(RuntimeOrigin::signed(1)));
		assert!(OptedOut::<Test>::contains_key(1));
		assert_noop!(
			Challenges::unregister_juror(RuntimeOrigin::signed(1)),
			Error::<Test>::NotAJuror
		);
		assert_ok!(Challenges::register_juror(RuntimeOrigin::signed(1)));
		assert!(!OptedOut::<Test>::contains_key(1));
		assert_eq!(events(), [Event::JurorOptedOut { who: 1 }, Event::JurorOptedIn { who: 1 }]);
	});
}

#[test]
fn late_draw_without_its_seed_gives_no_verdict() {
	run_test(|| {
		setup();
		assert_ok!(open(OUTSIDER, 3));
		// The seed block's hash is not kept (the mock records hashes only in `run_to_block`):
		// drawing later must not fall back to a hash the caller can choose by timing.
		System::set_block_number(11);
		assert_ok!(Challenges::advance_challenge(RuntimeOrigin::signed(POOR), 0));
		assert_eq!(verdict_of(0, 1, 3), Some(Verdict::NoJury));
		assert_eq!(bond_held(OUTSIDER), 0);
		assert_eq!(TrainerStaking::active_stake(&3), 1_000);
	});
}

#[test]
fn an_unbonding_trainer_can_still_opt_out_of_juries() {
	run_test(|| {
		jurors(&[1], 100);
		assert_ok!(TrainerStaking::unbond(RuntimeOrigin::signed(1), 100));
		// Its stake is all unbonding, still slashable: it may leave juries ...
		assert_ok!(Challenges::unregister_juror(RuntimeOrigin::signed(1)));
		assert!(OptedOut::<Test>::contains_key(1));
		// ... but not join them again without active stake.
		assert_noop!(
			Challenges::register_juror(RuntimeOrigin::signed(1)),
			Error::<Test>::NotBonded
		);
	});
}
