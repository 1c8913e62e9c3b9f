//! The validator set: candidacy, election by stake, session timing, and the attacks on it.

use crate::{mock::*, pallet::*, DropReason, Event};
use frame_support::{assert_noop, assert_ok};
use synod_primitives::TrainerStake;

/// Bonds `stake` for `who`, registers its session keys and declares it a candidate.
fn candidate(who: AccountId, stake: Balance) {
	assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(who), stake));
	assert_ok!(Session::set_keys(RuntimeOrigin::signed(who), MockKeys::from(who), vec![]));
	assert_ok!(ValidatorSet::validate(RuntimeOrigin::signed(who)));
}

/// Runs to the first block of session `s` (sessions start every [`SESSION_LENGTH`] blocks).
fn run_to_session(s: u32) {
	run_to_block(u64::from(s * SESSION_LENGTH));
	assert_eq!(Session::current_index(), s);
}

fn events() -> Vec<Event<Test>> {
	System::events()
		.into_iter()
		.filter_map(|r| match r.event {
			RuntimeEvent::ValidatorSet(e) => Some(e),
			_ => None,
		})
		.collect()
}

#[test]
fn validate_needs_bond_and_session_keys() {
	run_test(|| {
		let who = RuntimeOrigin::signed(1);
		assert_noop!(ValidatorSet::validate(who.clone()), Error::<Test>::BondTooLow);
		assert_ok!(TrainerStaking::bond(who.clone(), MIN_VALIDATOR_BOND - 1));
		assert_noop!(ValidatorSet::validate(who.clone()), Error::<Test>::BondTooLow);
		assert_ok!(TrainerStaking::bond(who.clone(), 1));
		assert_noop!(ValidatorSet::validate(who.clone()), Error::<Test>::NoSessionKeys);
		assert_ok!(Session::set_keys(who.clone(), MockKeys::from(1), vec![]));
		assert_ok!(ValidatorSet::validate(who.clone()));
		assert_noop!(ValidatorSet::validate(who.clone()), Error::<Test>::AlreadyCandidate);
		assert_noop!(ValidatorSet::chill(RuntimeOrigin::signed(2)), Error::<Test>::NotCandidate);
		assert_eq!(Candidates::<Test>::get().into_inner(), vec![1]);
		assert!(events().contains(&Event::Validating { who: 1, stake: MIN_VALIDATOR_BOND }));
	});
}

#[test]
fn a_candidate_authors_from_the_session_after_next() {
	run_test(|| {
		candidate(2, 300);
		candidate(1, 300);
		run_to_session(1);
		assert!(Session::validators().is_empty(), "session 1 was queued at genesis");
		run_to_session(2);
		assert_eq!(Session::validators(), vec![1, 2], "ordered by account id");
		assert_eq!(Active::<Test>::get().into_inner(), vec![(1, 300), (2, 300)]);
	});
}

#[test]
fn the_largest_bonds_are_elected() {
	run_test(|| {
		candidate(1, 250);
		candidate(2, 400);
		candidate(3, 300);
		candidate(4, 500);
		run_to_session(2);
		assert_eq!(Session::validators(), vec![2, 3, 4], "MAX_VALIDATORS = 3, 1 has the least");
		// 1 bonds more than 3: it takes 3's seat at the next election.
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(1), 200));
		run_to_session(4);
		assert_eq!(Session::validators(), vec![1, 2, 4]);
		assert_eq!(Candidates::<Test>::get().len(), 4, "3 stays a candidate");
	});
}

#[test]
fn chill_leaves_at_the_session_after_next() {
	run_test(|| {
		candidate(1, 300);
		candidate(2, 300);
		run_to_session(2);
		assert_ok!(ValidatorSet::chill(RuntimeOrigin::signed(2)));
		assert!(events().contains(&Event::Chilled { who: 2 }));
		run_to_session(3);
		assert_eq!(Session::validators(), vec![1, 2], "session 3 was queued before the chill");
		run_to_session(4);
		assert_eq!(Session::validators(), vec![1]);
	});
}

#[test]
fn nobody_eligible_keeps_the_current_set() {
	run_test(|| {
		candidate(1, 300);
		run_to_session(2);
		assert_ok!(ValidatorSet::chill(RuntimeOrigin::signed(1)));
		run_to_session(5);
		assert_eq!(Session::validators(), vec![1], "the chain never loses all its authors");
		assert!(events().contains(&Event::ValidatorSetKept { session: 4 }));
	});
}

#[test]
fn a_slashed_validator_drops_out() {
	run_test(|| {
		candidate(1, 300);
		candidate(2, 300);
		run_to_session(2);
		assert_eq!(TrainerStaking::slash(&2, 150, None), 150);
		run_to_session(4);
		assert_eq!(Session::validators(), vec![1]);
		assert!(events()
			.contains(&Event::CandidateDropped { who: 2, reason: DropReason::BelowMinBond }));
		assert!(!Candidates::<Test>::get().contains(&2));
	});
}

#[test]
fn purged_keys_drop_the_candidate() {
	run_test(|| {
		candidate(1, 300);
		candidate(2, 300);
		assert_ok!(Session::purge_keys(RuntimeOrigin::signed(2)));
		run_to_session(2);
		assert_eq!(Session::validators(), vec![1]);
		assert!(events()
			.contains(&Event::CandidateDropped { who: 2, reason: DropReason::NoSessionKeys }));
	});
}

/// Attack: a validator unbonds and withdraws its stake while it still authors blocks.
#[test]
fn a_validator_cannot_unbond_the_stake_it_validates_with() {
	run_test(|| {
		candidate(1, 300);
		candidate(2, 300);
		run_to_session(2);
		let unbond = |v| TrainerStaking::unbond(RuntimeOrigin::signed(2), v);
		assert_noop!(unbond(1), pallet_trainer_staking::Error::<Test>::StakeCommitted);
		assert_ok!(ValidatorSet::chill(RuntimeOrigin::signed(2)));
		// Still queued for session 3, then active in it: the elected stake stays committed.
		assert_noop!(unbond(1), pallet_trainer_staking::Error::<Test>::StakeCommitted);
		run_to_session(3);
		assert_noop!(unbond(1), pallet_trainer_staking::Error::<Test>::StakeCommitted);
		run_to_session(4);
		assert_eq!(Session::validators(), vec![1]);
		assert_ok!(unbond(300));
		assert_eq!(TrainerStaking::active_stake(&2), 0);
	});
}

/// Attack: bond a large stake just before an election to take a seat, then unbond all above
/// the minimum (and withdraw it after the unbonding period) before the seat even starts, and
/// recycle the same capital for the next election.
#[test]
fn a_seat_cannot_be_bought_with_stake_withdrawn_before_it_starts() {
	run_test(|| {
		candidate(1, 300);
		candidate(2, 300);
		candidate(3, 300);
		candidate(4, MIN_VALIDATOR_BOND);
		// 4 outranks 3 with a flash bond just before the rotation into session 1.
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(4), 1_000));
		run_to_session(1);
		assert_eq!(Queued::<Test>::get().into_inner(), vec![(1, 300), (2, 300), (4, 1_200)]);
		assert_noop!(
			TrainerStaking::unbond(RuntimeOrigin::signed(4), 1),
			pallet_trainer_staking::Error::<Test>::StakeCommitted
		);
		run_to_session(2);
		assert_eq!(Session::validators(), vec![1, 2, 4]);
		assert_noop!(
			TrainerStaking::unbond(RuntimeOrigin::signed(4), 1),
			pallet_trainer_staking::Error::<Test>::StakeCommitted
		);
	});
}

/// Attack: a genesis validator (in `pallet-session`'s genesis keys, never elected here) chills
/// or is no candidate at all, unbonds and withdraws, and keeps authoring with no stake.
#[test]
fn a_genesis_validator_cannot_withdraw_while_it_authors() {
	run_test(|| {
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(1), 300));
		pallet_session::Validators::<Test>::put(vec![1]);
		assert!(Active::<Test>::get().is_empty());
		assert_noop!(
			TrainerStaking::unbond(RuntimeOrigin::signed(1), 101),
			pallet_trainer_staking::Error::<Test>::StakeCommitted
		);
		assert_ok!(TrainerStaking::unbond(RuntimeOrigin::signed(1), 100));
	});
}

/// The same accounts elected again are no new authority set: `pallet-session` queues nothing new
/// (GRANDPA would otherwise change its set, and its set id, every session).
#[test]
fn an_unchanged_set_is_not_a_new_authority_set() {
	run_test(|| {
		candidate(1, 300);
		candidate(2, 300);
		run_to_session(6);
		assert_eq!(Session::validators(), vec![1, 2]);
		let queued = System::events()
			.iter()
			.filter(|r| matches!(r.event, RuntimeEvent::Session(pallet_session::Event::NewQueued)))
			.count();
		assert_eq!(queued, 1, "one new set (session 2), then the same set kept");
		let elected =
			events().iter().filter(|e| matches!(e, Event::ValidatorsElected { .. })).count();
		assert_eq!(elected, 1);
		// A stake change that does not change the set is still recorded for the commitment.
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(1), 50));
		run_to_session(7);
		assert_eq!(Queued::<Test>::get().into_inner(), vec![(1, 350), (2, 300)]);
	});
}

/// Attack: minimum-bond sybils fill the bounded candidate list so that no honest operator can
/// ever become a candidate.
#[test]
fn minimum_bond_sybils_cannot_squat_the_candidate_list() {
	run_test(|| {
		for sybil in 1..=MAX_CANDIDATES as u64 {
			candidate(sybil, MIN_VALIDATOR_BOND);
		}
		let honest = 7;
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(honest), 1_000));
		assert_ok!(Session::set_keys(
			RuntimeOrigin::signed(honest),
			MockKeys::from(honest),
			vec![]
		));
		assert_ok!(ValidatorSet::validate(RuntimeOrigin::signed(honest)));
		assert!(Candidates::<Test>::get().contains(&honest));
		assert_eq!(Candidates::<Test>::get().len(), MAX_CANDIDATES as usize);
		assert!(events().contains(&Event::CandidateDropped {
			who: MAX_CANDIDATES as u64,
			reason: DropReason::Outbid
		}));
		// A further minimum-bond sybil cannot push anyone out.
		let late = 8;
		assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(late), MIN_VALIDATOR_BOND));
		assert_ok!(Session::set_keys(RuntimeOrigin::signed(late), MockKeys::from(late), vec![]));
		assert_noop!(
			ValidatorSet::validate(RuntimeOrigin::signed(late)),
			Error::<Test>::TooManyCandidates
		);
		run_to_session(2);
		assert!(Session::validators().contains(&honest));
	});
}

mod election_rule {
	use crate::election::{elect, weakest};
	use proptest::prelude::*;

	#[test]
	fn ties_go_to_the_smaller_account() {
		assert_eq!(elect(&[(3u64, 5u128), (1, 5), (2, 5)], 2, 1), vec![1, 2]);
		assert_eq!(weakest(&[1u64, 2, 3], |w| [0u128, 5, 4, 4][*w as usize]), Some((2, 4)));
	}

	proptest! {
		#![proptest_config(ProptestConfig::with_cases(256))]
		/// The elected set is the top `max` eligible stakes, sorted, unique, all ≥ `min`.
		#[test]
		fn elects_the_top_stakes(
			stakes in proptest::collection::btree_map(0u64..50, 0u128..1_000, 0..20),
			max in 1usize..8,
			min in 0u128..600,
		) {
			let candidates: Vec<(u64, u128)> = stakes.into_iter().collect();
			let elected = elect(&candidates, max, min);
			prop_assert!(elected.len() <= max);
			prop_assert!(elected.windows(2).all(|w| w[0] < w[1]));
			let stake = |a: &u64| candidates.iter().find(|c| c.0 == *a).map(|c| c.1).unwrap();
			prop_assert!(elected.iter().all(|a| stake(a) >= min));
			let eligible = candidates.iter().filter(|c| c.1 >= min).count();
			prop_assert_eq!(elected.len(), eligible.min(max));
			for (who, s) in &candidates {
				if *s >= min && !elected.contains(who) {
					prop_assert!(elected.iter().all(|e| stake(e) >= *s));
				}
			}
		}
	}
}
