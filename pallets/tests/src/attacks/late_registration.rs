//! Late registration. The author of the seed block (the block before the draw) knows the seed
//! before anyone else; if a committee's eligible set (the challenged round's contributors that
//! have not opted out) were read at the draw, it could, in that very block, opt a contributor
//! account back in when the seed gives it more seats, or opt out one that would sit against it.
//! The set is frozen when the challenge opens, before the seed block exists.

use crate::mock::*;
use frame_support::assert_ok;
use pallet_challenges::{EligibleJurors, OpenChallenges};

#[test]
fn opting_in_or_out_after_a_challenge_opens_changes_no_seat() {
	run_test(|| {
		final_round();
		opt_out(&[5]);
		assert_ok!(open_challenge(2, 0, 1, 1, [0x44; 32]));
		assert_eq!(EligibleJurors::<Test>::get(0).map(|e| e.into_inner()), Some(vec![1, 2, 3, 4]));
		let draw_at = OpenChallenges::<Test>::get(0).expect("open").draw_at;
		// The seed block: its author knows the seed and moves the opt-outs in it.
		run_to_block(draw_at - 1);
		assert_ok!(Challenges::unregister_juror(RuntimeOrigin::signed(4)));
		assert_ok!(Challenges::register_juror(RuntimeOrigin::signed(5)));
		run_to_block(draw_at);
		let c = OpenChallenges::<Test>::get(0).expect("drawn");
		let seats = |who| c.jury.iter().filter(|s| s.who == who).map(|s| s.seats).sum::<u32>();
		// 5 opted back in too late: no seat. 4 holds a quarter of the eligible stake and keeps
		// its seats (P(no seat) = (3/4)^203 < 10⁻²⁵), so it still answers for its vote.
		assert_eq!(seats(5), 0);
		assert!(seats(4) > 0);
		assert_eq!(seats(1) + seats(2) + seats(3) + seats(4), JURY_SEATS);
		// The next challenge, opened after the change, sees the new opt-outs.
		assert_ok!(open_challenge(3, 0, 1, 2, [0x44; 32]));
		assert_eq!(EligibleJurors::<Test>::get(1).map(|e| e.into_inner()), Some(vec![1, 2, 3, 5]));
	});
}
