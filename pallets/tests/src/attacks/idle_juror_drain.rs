//! Attack: draining a crashed trainer's stake with sham challenges. Every contributor of a
//! round sits on that round's committees and loses `NoShowSlash` of its snapshot stake when it
//! does not vote, once per round. A trainer that crashed contributed to every round up to its
//! crash, and each of those rounds can be challenged for a challenge window: an adversary that
//! opted its own accounts out of juries opens a sham challenge against each of them (a bond
//! each, which the undecided committee's acquittal slashes), and the crashed juror, seated on every
//! one, lost its penalty once per round, about a hundred rounds taking its whole stake. A juror
//! whose account has sent no transaction since its last no-show slash is not slashed again; a
//! live one still is, once per round.

use super::challenge;
use crate::mock::*;
use frame_support::assert_ok;
use pallet_challenges::{Event, OpenChallenges};

/// Planck slashed from `juror` for missed votes, by the challenges' `JurorNoShow` events.
fn no_show_losses(juror: AccountId) -> Balance {
	challenges_events()
		.into_iter()
		.filter_map(|e| match e {
			Event::JurorNoShow { juror: j, slashed, .. } if j == juror => Some(slashed),
			_ => None,
		})
		.sum()
}

#[test]
fn a_crashed_juror_loses_one_no_show_slash_to_sham_challenges_on_every_round() {
	run_test(|| {
		// Members 1..=5 (1 000 each) contribute to rounds 1..=3; each commit is a transaction
		// of its own (the account's nonce moves: `commit`).
		training_pool(3, two_thirds(), &[1_000; 5]);
		for round in 1..=3u32 {
			for who in 1..=5 {
				assert_ok!(commit(who, round, round as u8, &[0, 1, 2, 3, 4]));
			}
			assert!(pallet_checkpoints::FinalCheckpoints::<Test>::get(0, round).is_some());
			run_to_block(System::block_number() + 1);
		}
		// Member 5 crashes: it sends nothing from now on. Attacker 1 opts out of juries and
		// opens a sham challenge against honest member 2 in every round.
		assert_ok!(Challenges::unregister_juror(RuntimeOrigin::signed(1)));
		System::inc_account_nonce(1);
		let crashed = staked(5);
		let attacker_free = Balances::free_balance(1);
		let mut shams = Vec::new();
		for round in 1..=3u32 {
			let (id, jury) = challenge(1, 0, round, 2);
			// 203 seats ∝ stake over the four eligible jurors: each is seated with
			// probability 1 − (3/4)^203 ≈ 1 − 4 × 10⁻²⁶.
			assert!(jury.iter().any(|(j, _)| *j == 5), "the crashed juror is seated");
			assert!(jury.iter().any(|(j, _)| *j == 3), "a live juror is seated");
			assert!(jury.iter().all(|(j, _)| *j != 1), "the attacker opted out");
			shams.push(id);
		}
		// Nobody votes; the shams expire one after the other. The live jurors send
		// transactions meanwhile (commits elsewhere); the crashed trainer restarts before the
		// last one expires.
		for (n, id) in shams.iter().enumerate() {
			let expires_at = OpenChallenges::<Test>::get(id).expect("open").expires_at;
			run_to_block(expires_at - 1);
			for live in 2..=4 {
				System::inc_account_nonce(live);
			}
			if n == 2 {
				System::inc_account_nonce(5);
			}
			run_to_block(expires_at);
		}
		assert!(shams.iter().all(|id| !OpenChallenges::<Test>::contains_key(id)));
		// Every sham ended undecided, so acquitted: the attacker lost its three bonds.
		assert_eq!(Balances::free_balance(1), attacker_free - 3 * BOND);
		// The live juror answers once per round (10 % of 1 000 each); the crashed one once for
		// rounds 1 and 2 (it sent nothing between them), then once more after its restart.
		assert_eq!(no_show_losses(3), 300);
		assert_eq!(no_show_losses(5), 200, "was 300: once per challenged round");
		assert_eq!(staked(5), crashed - 200);
	});
}
