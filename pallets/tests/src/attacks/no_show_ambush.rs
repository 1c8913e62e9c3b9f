//! No-show ambush: an attacker fills a block's challenge schedule with filler challenges so that
//! a target challenge's jury draw is left unscheduled, then draws it itself one block before the
//! voting period ends and expires it the next block: every honest juror that contributed to the
//! round is slashed `NoShowSlash` as a no-show without having had a block to vote in, and
//! repeating it drains their bonds. The defence: a challenge is opened only if its draw and its
//! expiry both get a scheduled block within the pool's timeline (else `ScheduleFull`), and a
//! jury drawn later than scheduled answers for no missed vote.

use crate::mock::*;
use frame_support::{assert_noop, assert_ok};
use pallet_challenges::{Error, Event, Expiries, OpenChallenges, Votes};

/// Honest jurors: contributors of the round (answerable for their votes), 1 000 planck of
/// snapshot stake each and 1 000 more bonded.
const HONEST_JURORS: [AccountId; 3] = [3, 4, 5];

/// Four filler challenges in the current block (two per contribution of members 1 and 2, one
/// per challenger): with a jury delay of one block they fill the next block's
/// `MaxExpiriesPerBlock` = 4 draw slots.
fn open_fillers() {
	for (challenger, accused) in [(6, 1), (7, 1), (6, 2), (7, 2)] {
		assert_ok!(open_challenge(challenger, 0, 1, accused, [0x11; 32]));
	}
}

/// Every honest juror votes innocent on every open challenge it sits on and has not voted on:
/// what an honest trainer does in the block after it sees its jury.
fn honest_jurors_vote() {
	let open: Vec<_> = OpenChallenges::<Test>::iter().collect();
	for (id, c) in open {
		for j in c.jury.iter().map(|s| s.who).filter(|j| HONEST_JURORS.contains(j)) {
			if OpenChallenges::<Test>::contains_key(id) && !Votes::<Test>::contains_key(id, j) {
				let _ = Challenges::vote(RuntimeOrigin::signed(j), id, false);
			}
		}
	}
}

/// Whether juror `j`, with `before` planck staked, lost less than a no-show slash (the pool's
/// later rounds are voided: the inactivity leak takes a little from every member).
fn kept_its_stake(j: AccountId, before: Balance) -> bool {
	before.saturating_sub(staked(j)) < NoShowSlash::get().mul_floor(before)
}

fn no_shows() -> usize {
	challenges_events()
		.iter()
		.filter(|e| matches!(e, Event::JurorNoShow { .. }))
		.count()
}

#[test]
fn filler_challenges_cannot_leave_a_draw_unscheduled() {
	run_test(|| {
		final_round();
		jurors(&HONEST_JURORS, 1_000);
		open_fillers();
		let id = pallet_challenges::NextChallengeId::<Test>::get();
		// The target finds no block with room for its draw: refused, nothing held…
		assert_noop!(open_challenge(8, 0, 1, 3, [0x22; 32]), Error::<Test>::ScheduleFull);
		// …and accepted in the next block, with its draw scheduled.
		run_to_block(System::block_number() + 1);
		assert_ok!(open_challenge(8, 0, 1, 3, [0x22; 32]));
		let c = OpenChallenges::<Test>::get(id).expect("open");
		assert!(Expiries::<Test>::get(c.draw_at).contains(&id), "its draw is scheduled");
		assert!(c.draw_at > System::block_number(), "drawn from a later block's hash");
		run_to_block(c.draw_at);
		assert!(!OpenChallenges::<Test>::get(id).expect("open").jury.is_empty(), "drawn on time");
	});
}

#[test]
fn no_show_ambush_cannot_slash_honest_jurors() {
	run_test(|| {
		final_round();
		jurors(&HONEST_JURORS, 1_000);
		let before: Vec<Balance> = HONEST_JURORS.iter().map(|j| staked(*j)).collect();
		open_fillers();
		// The attacker's target (an honest contribution), opened as soon as it is accepted.
		let id = pallet_challenges::NextChallengeId::<Test>::get();
		if open_challenge(8, 0, 1, 3, [0x22; 32]).is_err() {
			run_to_block(System::block_number() + 1);
			assert_ok!(open_challenge(8, 0, 1, 3, [0x22; 32]));
		}
		let expires_at = OpenChallenges::<Test>::get(id).expect("open").expires_at;
		// Honest jurors vote in the block after they see a jury, every block.
		while System::block_number() + 1 < expires_at {
			run_to_block(System::block_number() + 1);
			honest_jurors_vote();
		}
		// The ambush: draw at the last block of the voting period, expire at the next.
		let _ = Challenges::advance_challenge(RuntimeOrigin::signed(1), id);
		run_to_block(expires_at);
		honest_jurors_vote();
		let _ = Challenges::advance_challenge(RuntimeOrigin::signed(1), id);
		run_to_block(expires_at + 1);
		assert_eq!(no_shows(), 0, "no honest juror is a no-show");
		for (j, b) in HONEST_JURORS.iter().zip(before) {
			assert!(kept_its_stake(*j, b), "juror {j} lost stake");
		}
	});
}

#[test]
fn a_jury_drawn_late_answers_for_no_missed_vote() {
	run_test(|| {
		final_round();
		jurors(&HONEST_JURORS, 1_000);
		let before: Vec<Balance> = HONEST_JURORS.iter().map(|j| staked(*j)).collect();
		assert_ok!(open_challenge(8, 0, 1, 1, [0x22; 32]));
		let c = OpenChallenges::<Test>::get(0).expect("open");
		// A challenge whose draw is not in the schedule (whatever the cause), drawn by someone
		// one block before its voting period ends and expired at the next.
		Expiries::<Test>::mutate(c.draw_at, |e| e.retain(|i| *i != 0));
		run_to_block(c.expires_at - 1);
		assert_ok!(Challenges::advance_challenge(RuntimeOrigin::signed(1), 0));
		assert!(!OpenChallenges::<Test>::get(0).expect("open").jury.is_empty());
		run_to_block(c.expires_at);
		let _ = Challenges::advance_challenge(RuntimeOrigin::signed(1), 0);
		assert!(!OpenChallenges::<Test>::contains_key(0), "expired");
		assert_eq!(no_shows(), 0, "a juror drawn late is not a no-show");
		for (j, b) in HONEST_JURORS.iter().zip(before) {
			assert!(kept_its_stake(*j, b), "juror {j} lost stake");
		}
	});
}
