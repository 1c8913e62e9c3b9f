//! Narrowed disputes: a challenge may name the part of the accused's signed Proof-of-Learning
//! trace it disputes (`open_narrowed_challenge`), so that its committee checks that part only.
//! The attack: a friend of the cheater names a part that holds (an honest segment), so that
//! the committee acquits, hoping the acquittal shields the cheater from the challenge that
//! names the part that fails. An acquittal is a verdict on one claim, never final: only
//! `Guilty` is.

use super::{all_vote, challenge};
use crate::mock::*;
use frame_support::{assert_noop, assert_ok};
use pallet_challenges::{Dispute, Disputes, Error, OpenChallenges, Verdict, Verdicts};
use synod_primitives::protocol::limits::MAX_TRACE_SEGMENTS;

/// `challenger` narrows a challenge of `accused`'s contribution to `round` of pool 0 to
/// `dispute`, with the accused's genuine signed announcement as evidence.
fn open_narrowed(
	challenger: AccountId,
	round: u32,
	accused: AccountId,
	dispute: Dispute,
) -> sp_runtime::DispatchResult {
	Challenges::open_narrowed_challenge(
		RuntimeOrigin::signed(challenger),
		0,
		round,
		accused,
		announcement(0, round, accused, [0x44; 32]),
		dispute,
	)
}

#[test]
fn a_narrowed_challenge_records_its_dispute_until_it_closes() {
	run_test(|| {
		final_round();
		run_to_challenges(0, 1);
		jurors(&[4, 5], 1_000);
		assert_ok!(open_narrowed(2, 1, 1, Dispute::Segment(3)));
		assert_eq!(Disputes::<Test>::get(0), Some(Dispute::Segment(3)));
		assert!(challenges_events().iter().any(|e| matches!(
			e,
			pallet_challenges::Event::ChallengeOpened {
				challenge_id: 0,
				dispute: Dispute::Segment(3),
				..
			}
		)));
		// The whole phase is what a plain challenge disputes: nothing is recorded for it.
		assert_ok!(open_narrowed(3, 1, 1, Dispute::Phase));
		assert_eq!(Disputes::<Test>::get(1), None);
		assert_ok!(open_narrowed(4, 1, 1, Dispute::Encoding));
		assert_eq!(Disputes::<Test>::get(2), Some(Dispute::Encoding));
		// Every challenge ends undecided (acquitted): their records go with them.
		let expires = OpenChallenges::<Test>::get(0).expect("open").expires_at;
		run_to_block(expires + 1);
		assert!(!OpenChallenges::<Test>::contains_key(0));
		assert_eq!(Disputes::<Test>::iter().count(), 0);
	});
}

#[test]
fn a_dispute_naming_a_segment_no_trace_has_is_refused() {
	run_test(|| {
		final_round();
		run_to_challenges(0, 1);
		assert_noop!(
			open_narrowed(2, 1, 1, Dispute::Segment(MAX_TRACE_SEGMENTS)),
			Error::<Test>::DisputeOutOfRange
		);
		assert_ok!(open_narrowed(2, 1, 1, Dispute::Segment(MAX_TRACE_SEGMENTS - 1)));
	});
}

#[test]
fn a_sham_narrowed_challenge_acquitted_does_not_shield_the_cheater() {
	run_test(|| {
		final_round();
		run_to_challenges(0, 1);
		jurors(&[4, 5], 1_000);
		// Member 2, a friend of cheater 1, names a segment of 1's trace that replays (its
		// committee acquits on it)…
		let sham = pallet_challenges::NextChallengeId::<Test>::get();
		assert_ok!(open_narrowed(2, 1, 1, Dispute::Segment(0)));
		let draw_at = OpenChallenges::<Test>::get(sham).expect("open").draw_at;
		run_to_block(draw_at);
		let jury: Vec<(AccountId, u128)> = OpenChallenges::<Test>::get(sham)
			.expect("drawn")
			.jury
			.iter()
			.map(|s| (s.who, s.stake))
			.collect();
		all_vote(sham, &jury, false);
		assert_eq!(verdict_of(0, 1, 1), Some(Verdict::Innocent));
		assert_eq!(staked(1), 1_000);
		// …and the honest challenge of the part that fails is still accepted, and convicts
		// (half of the 1 000 snapshot stake slashed; a voided round may have leaked some).
		let (real, jury) = challenge(3, 0, 1, 1);
		let before = staked(1);
		all_vote(real, &jury, true);
		assert_eq!(Verdicts::<Test>::get((0, 1, 1)), Some(Verdict::Guilty));
		assert_eq!(staked(1), before - 500);
	});
}
