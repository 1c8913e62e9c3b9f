//! Attack: challenging at finality to keep late contributors off the committee. A committee is
//! drawn from the challenged round's contributors frozen when the challenge opens, and members
//! of the included set may still commit the final hash for `challenge_window` blocks after
//! finality (honest members held back by a split included set, or merely slow, do). An
//! adversary with just under ⅓ of the stake that finalizes a round with a third of the honest
//! stake (withholding its payload from the other third, which then commits late) and opens a
//! challenge in the block of finality held half of the frozen eligible stake instead of a
//! third: a majority of 203 seats with probability ≈ 0.5 per challenge, not ≈ 5 × 10⁻⁷.
//! Challenges open only once the late commits close (`ChallengeTooEarly` before), when the
//! contributors are final.

use crate::mock::*;
use frame_support::{assert_noop, assert_ok};
use pallet_challenges::{EligibleJurors, Error, NextChallengeId};
use synod_primitives::protocol::{self, jury::wrong_verdict_probability};

/// The attacker's member (a third of the stake) and the two honest thirds: A commits at once,
/// B late.
const ATTACKER: AccountId = 5;
const A: [AccountId; 2] = [1, 2];
const B: [AccountId; 2] = [3, 4];
/// Snapshot stakes of members 1..=5.
const STAKES: [Balance; 5] = [1_000, 1_000, 1_000, 1_000, 2_000];

/// The attacker's share of the eligible jurors' snapshot stake.
fn attacker_share(eligible: &[AccountId]) -> f64 {
	let stake = |w: &AccountId| STAKES[(*w - 1) as usize] as f64;
	let total: f64 = eligible.iter().map(stake).sum();
	eligible.iter().filter(|w| **w == ATTACKER).map(stake).sum::<f64>() / total
}

#[test]
fn challenging_at_finality_cannot_keep_late_contributors_off_the_committee() {
	run_test(|| {
		training_pool(3, two_thirds(), &STAKES);
		let all = [0, 1, 2, 3, 4];
		// The attacker and A hold ⅔: final in this block over every payload, B not yet
		// committed (the attacker's payload withheld from it).
		for who in A.into_iter().chain([ATTACKER]) {
			assert_ok!(commit(who, 1, 7, &all));
		}
		assert!(pallet_checkpoints::FinalCheckpoints::<Test>::get(0, 1).is_some());
		let at_finality: Vec<AccountId> = A.into_iter().chain([ATTACKER]).collect();
		let frozen_share = attacker_share(&at_finality);
		// The attacker's best move: accuse an honest B member at once, from its own account.
		let evidence = announcement(0, 1, B[0], [0x44; 32]);
		assert_noop!(
			pallet_challenges::Pallet::<Test>::open_challenge(
				RuntimeOrigin::signed(ATTACKER),
				0,
				1,
				B[0],
				evidence.clone()
			),
			Error::<Test>::ChallengeTooEarly
		);
		// B fetches the withheld payload and commits the final hash late.
		for who in B {
			assert_ok!(commit(who, 1, 7, &all));
		}
		let id = NextChallengeId::<Test>::get();
		assert_ok!(open_challenge(ATTACKER, 0, 1, B[0], [0x44; 32]));
		let eligible: Vec<AccountId> =
			EligibleJurors::<Test>::get(id).expect("frozen").into_inner();
		for who in B {
			assert!(eligible.contains(&who), "late contributor {who} is eligible: {eligible:?}");
		}
		let share = attacker_share(&eligible);
		let seats = protocol::COMMITTEE_SEATS;
		let frozen_p = wrong_verdict_probability(seats, frozen_share);
		let p = wrong_verdict_probability(seats, share);
		println!(
			"attacker's share of the eligible stake: {share:.3} (frozen at finality: \
			 {frozen_share:.3}); P(majority of {seats} seats) = {p:.2e} (frozen at finality: \
			 {frozen_p:.2})"
		);
		assert!(share <= 1.0 / 3.0 + 1e-9, "{share}");
		assert!(p <= protocol::jury::MAX_WRONG_VERDICT, "{p:e}");
		assert!(frozen_p > 0.4, "what the attack got before: {frozen_p}");
	});
}
