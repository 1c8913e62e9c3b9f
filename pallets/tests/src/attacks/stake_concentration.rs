//! Stake concentration buying verdicts. A jury of 5 jurors drawn *without* replacement, the
//! parties kept off it, deciding by ⅔ of the *drawn* stake, let an adversary with a third of
//! the stake decide: accusing the largest honest member took that member's stake off the jury,
//! and the adversary's concentrated stake then held ⅔ of what was left (and one large juror sat
//! beside small ones on almost every jury). Committees of [`JURY_SEATS`] seats drawn with
//! replacement from the round's contributors, the parties included, and a majority of all seats
//! make the adversary's seats Binomial(203, its stake share) whatever it does with its stake
//! and whomever it accuses.
//!
//! The attacker plays its best strategy: every split of its stake (one whale, two equal
//! accounts, mixed), as many tries as the challenge window and the challenge schedule allow
//! against every honest contribution (the largest first), from as many challenger accounts as
//! it needs (each holds one open challenge per contribution), always voting guilty. The
//! probability is computed with the runtime's own draw ([`Challenges::seat_randomness`] and
//! `protocol::draw_committee`), not asserted from one draw.

use crate::mock::*;
use frame_support::assert_ok;
use pallet_challenges::{OpenChallenges, Verdict, Verdicts};
use synod_primitives::protocol::{self, jury::wrong_verdict_probability};

/// The attacker's challenger accounts (outsiders: never on a committee).
const CHALLENGERS: [AccountId; 4] = [400, 401, 402, 403];

/// Snapshot stakes of members 1..=5 and the attacker's members, for the three splits it tries:
/// the attacker holds 840 of 2 540 (33.07 %, just under ⅓); honest member 1 holds 1 400.
fn splits() -> [([Balance; 5], Vec<AccountId>); 3] {
	[
		([1_400, 840, 100, 100, 100], vec![2]),
		([1_400, 420, 420, 150, 150], vec![2, 3]),
		([1_400, 600, 240, 150, 150], vec![2, 3]),
	]
}

/// Pool 0 with `stakes`, round 1 final with all five contributing, every member a registered
/// juror.
fn setup(stakes: &[Balance; 5]) {
	training_pool(3, two_thirds(), stakes);
	for who in 1..=5 {
		assert_ok!(commit(who, 1, 7, &[0, 1, 2, 3, 4]));
	}
	for challenger in CHALLENGERS {
		mint(challenger, 1_000_000);
	}
}

/// Plays the attack: challenges every honest contribution (largest first) as often as it may
/// while the window is open; the attacker's jurors vote guilty, the honest ones innocent.
/// Returns (tries, convictions).
fn try_to_buy_verdicts(stakes: &[Balance; 5], adversary: &[AccountId]) -> (u32, u32) {
	setup(stakes);
	let attacker = |who: AccountId| adversary.contains(&who);
	let mut honest: Vec<AccountId> = (1..=5).filter(|w| !attacker(*w)).collect();
	honest.sort_by_key(|w| std::cmp::Reverse(stakes[*w as usize - 1]));
	let (mut tries, mut convictions) = (0, 0);
	loop {
		let mut opened = 0;
		for accused in &honest {
			for challenger in CHALLENGERS {
				if open_challenge(challenger, 0, 1, *accused, [0x44; 32]).is_ok() {
					opened += 1;
				}
			}
		}
		if opened == 0 && OpenChallenges::<Test>::iter().count() == 0 {
			break (tries, convictions);
		}
		run_to_block(System::block_number() + 1);
		let drawn: Vec<_> =
			OpenChallenges::<Test>::iter().filter(|(_, c)| !c.jury.is_empty()).collect();
		for (id, c) in drawn {
			tries += 1;
			// The attacker votes first (it sees the committee in the same block).
			let mut order: Vec<_> = c.jury.iter().map(|s| s.who).collect();
			order.sort_by_key(|j| !attacker(*j));
			for j in order {
				if OpenChallenges::<Test>::contains_key(id) {
					assert_ok!(Challenges::vote(RuntimeOrigin::signed(j), id, attacker(j)));
				}
			}
			if Verdicts::<Test>::get((c.pool_id, c.round, c.accused)) == Some(Verdict::Guilty) {
				convictions += 1;
			}
		}
	}
}

#[test]
fn concentrated_or_split_stake_cannot_buy_verdicts() {
	for (stakes, adversary) in splits() {
		new_test_ext().execute_with(|| {
			let (tries, convictions) = try_to_buy_verdicts(&stakes, &adversary);
			println!(
				"{{\"stakes\":{stakes:?},\"adversary\":{adversary:?},\"tries\":{tries},\
				 \"convictions\":{convictions}}}"
			);
			// As often as the W blocks after the late commits allow.
			assert!(tries >= 20, "the attacker had many tries ({tries})");
			assert_eq!(convictions, 0, "an honest member was convicted");
			// (Rounds 2 and 3 are voided meanwhile: 1 % inactivity leak each, no slash.)
			assert!(!challenges_events()
				.iter()
				.any(|e| matches!(e, pallet_challenges::Event::AccusedFoundGuilty { .. })));
			for who in (1..=5).filter(|w| !adversary.contains(w)) {
				let stake = stakes[who as usize - 1];
				assert!(staked(who) >= stake - stake / 50, "honest member {who} was slashed");
			}
			check_invariants();
		});
	}
}

/// The attacker's seats in `draws` committees drawn by the runtime's own function over
/// `candidates`, one per seed block hash.
fn adversary_seats(
	candidates: &[(AccountId, u128)],
	adversary: &[AccountId],
	draws: u64,
) -> Vec<u32> {
	(0..draws)
		.map(|k| {
			let seed = hash_of(k);
			protocol::draw_committee(candidates, JURY_SEATS, |j| {
				Challenges::seat_randomness(seed.0, 0, j)
			})
			.iter()
			.filter(|s| adversary.contains(&s.who))
			.map(|s| s.seats)
			.sum()
		})
		.collect()
}

#[test]
fn committee_bound_holds_for_every_split_of_a_third_of_the_stake() {
	new_test_ext().execute_with(|| {
		let majority = protocol::jury::majority(JURY_SEATS);
		// (adversary split, honest split), each 1/3 − ε against 2/3 + ε of the eligible stake.
		let whale = vec![(500u64, 33_000u128)];
		let sybils: Vec<_> = (0..330).map(|i| (1_000 + i, 100)).collect();
		let mixed: Vec<_> = std::iter::once((500, 20_000))
			.chain((0..130).map(|i| (1_000 + i, 100)))
			.collect();
		let few_large: Vec<_> = (0..3).map(|i| (2_000 + i, 22_334)).collect();
		let many_small: Vec<_> = (0..670).map(|i| (3_000 + i, 100)).collect();
		for (name, adversary) in [("whale", &whale), ("sybils", &sybils), ("mixed", &mixed)] {
			for (honest_name, honest) in [("few large", &few_large), ("many small", &many_small)] {
				// Interleaved, so that no split occupies one contiguous range of the cumulative
				// stake (where its seats would be identical for every split, not just equal in
				// distribution).
				let mut candidates: Vec<_> =
					adversary.iter().chain(honest.iter()).cloned().collect();
				candidates.sort_by_key(|(who, _)| who.wrapping_mul(0x9E37_79B9_7F4A_7C15));
				let a: u128 = adversary.iter().map(|(_, s)| s).sum();
				let total: u128 = candidates.iter().map(|(_, s)| s).sum();
				let share = a as f64 / total as f64;
				assert!(share < 1.0 / 3.0);
				let ids: Vec<AccountId> = adversary.iter().map(|(w, _)| *w).collect();
				let seats = adversary_seats(&candidates, &ids, 2_000);
				let mean = seats.iter().map(|s| f64::from(*s)).sum::<f64>() / seats.len() as f64;
				let max = seats.iter().copied().max().unwrap_or(0);
				let p = wrong_verdict_probability(JURY_SEATS, share);
				println!(
					"{{\"adversary\":\"{name}\",\"honest\":\"{honest_name}\",\"share\":{share:.4},\
					 \"mean_seats\":{mean:.2},\"max_seats\":{max},\"majority\":{majority},\
					 \"p_wrong_verdict\":{p:e}}}"
				);
				// Seats follow stake, not accounts: the mean is 203 × share within 4 standard
				// errors (σ/√2000 ≈ 0.15 seats) for every split.
				assert!((mean - f64::from(JURY_SEATS) * share).abs() < 0.6, "mean {mean}");
				assert!(max < majority, "the adversary held a majority in one of 2 000 draws");
				assert!(p <= protocol::jury::MAX_WRONG_VERDICT);
			}
		}
	});
}
