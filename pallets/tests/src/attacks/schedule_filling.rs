//! Schedule filling: an attacker opens `MaxExpiriesPerBlock` filler challenges against a
//! contribution whose other contributors opted out of juries, so that each draws no jury and
//! its bond comes back at the draw, to take every slot of blocks that an honest challenge
//! needs: a challenge is refused (`ScheduleFull`) unless its draw, its expiry and, in a pool
//! with appeals, its ruling's execution and its appeal's end each find a block with room. A
//! filler that closed at its draw kept the three later slots it reserved, so one batch denied
//! honest openings at several offsets for the price of one. The defence: closing a challenge
//! frees every slot it holds in the blocks to come (`ScheduledAt`), so a batch of fillers denies
//! only the blocks of its draw, and only while its bonds are held; and one pool's challenges
//! take at most `MaxExpiriesPerPool` of a block's entries, so fillers in the attacker's own pool
//! leave the rest to the other pools.

use crate::mock::*;
use frame_support::assert_ok;
use pallet_challenges::{Event, Expiries, NextChallengeId, OpenChallenges};

/// The filler challengers: one filler each against member 1's contribution (one open
/// challenge per challenger and contribution), `MaxExpiriesPerBlock` = 4 in all.
const FILLERS: [AccountId; 4] = [6, 7, 8, OUTSIDER];

/// The blocks after the current one whose schedule holds challenge `id` (the mock's timelines
/// end within 100 blocks).
fn slots(id: u32) -> Vec<u64> {
	(System::block_number() + 1..=100)
		.filter(|at| Expiries::<Test>::get(at).contains(&id))
		.collect()
}

/// Round 1 of pool 0 (members 1..=5, 1 000 each) final at block 1 in a pool whose challenge
/// window is 8 blocks: challenges open at block 10 and close after block 17, room for an honest
/// challenge whose expiry falls in the block where the fillers' rulings would execute.
fn final_round_with_a_longer_window() {
	assert_ok!(TrainingPools::create_pool(
		RuntimeOrigin::signed(CREATOR),
		edited(spec(3, 5, two_thirds()), |s| s.terms.challenge_window = 8)
	));
	for who in 1..=5 {
		bond_and_join(who, 0, 1_000);
	}
	for who in 1..=5 {
		assert_ok!(commit(who, 1, 7, &[0, 1, 2, 3, 4]));
	}
}

#[test]
fn schedule_fillers_that_draw_no_jury_free_every_slot_they_reserved() {
	run_test(|| {
		AppealPeriod::set(&6);
		final_round_with_a_longer_window();
		// Only the accused is eligible on the fillers: each draws no jury, its bond comes back.
		opt_out(&[2, 3, 4, 5]);
		let first = NextChallengeId::<Test>::get();
		for challenger in FILLERS {
			assert_ok!(open_challenge(challenger, 0, 1, 1, [0x11; 32]));
		}
		let fillers: Vec<u32> = (first..first + FILLERS.len() as u32).collect();
		let c = OpenChallenges::<Test>::get(first).expect("open");
		let reserved = slots(first);
		assert_eq!(reserved.len(), 4, "draw, expiry, ruling's execution, appeal's end");
		let ruling_by = reserved[2];
		assert!(fillers.iter().all(|id| slots(*id) == reserved), "every filler in the same blocks");
		run_to_block(c.draw_at);
		let no_jury = challenges_events()
			.iter()
			.filter(|e| matches!(e, Event::NoJuryDrawn { .. }))
			.count();
		assert_eq!(no_jury, FILLERS.len(), "every filler closed at its draw");
		for id in &fillers {
			assert_eq!(slots(*id), Vec::<u64>::new(), "closed filler {id} holds no later slot");
		}
		// The honest challenge whose expiry falls in the fillers' ruling block (the block of a
		// challenge opened at `h` is `h + jury delay + voting period`): accepted.
		for j in [3, 4, 5] {
			assert_ok!(Challenges::register_juror(RuntimeOrigin::signed(j)));
		}
		let (delay, period) = (c.draw_at - c.opened_at, c.expires_at - c.draw_at);
		run_to_block(ruling_by - delay - period);
		let honest = NextChallengeId::<Test>::get();
		assert_ok!(open_challenge(2, 0, 1, 3, [0x22; 32]));
		assert!(slots(honest).contains(&ruling_by), "its expiry in the block the fillers held");
		let h = OpenChallenges::<Test>::get(honest).expect("open");
		run_to_block(h.draw_at);
		assert!(!OpenChallenges::<Test>::get(honest).expect("open").jury.is_empty(), "drawn");
	});
}

#[test]
fn a_ruling_executed_early_frees_the_appeal_blocks_it_reserved() {
	run_test(|| {
		AppealPeriod::set(&6);
		final_round();
		let (id, jury) = super::challenge(2, 0, 1, 1);
		let reserved = slots(id);
		assert_eq!(reserved.len(), 3, "expiry, ruling's execution, appeal's end");
		// The committee rules as soon as a majority of its seats votes; nobody appeals; the
		// ruling executes early.
		let ruling = || pallet_challenges::Appeals::<Test>::get(id).and_then(|a| a.ruling);
		for (j, _) in &jury {
			if ruling().is_none() {
				assert_ok!(Challenges::vote(RuntimeOrigin::signed(*j), id, false));
			}
		}
		let (_, executes_at) = ruling().expect("ruled");
		assert!(executes_at < reserved[1], "executes before the block reserved for it");
		run_to_block(executes_at);
		assert!(!OpenChallenges::<Test>::contains_key(id), "executed");
		assert_eq!(slots(id), Vec::<u64>::new(), "its reserved blocks are free again");
	});
}

#[test]
fn fillers_in_the_attackers_own_pool_cannot_take_another_pools_draw_block() {
	run_test(|| {
		// A block's schedule holds 4 entries, at most 2 of one pool's challenges.
		MaxExpiriesPerPool::set(&2);
		final_round();
		// The attacker's own pool 1 (trainers 6, 7, 8), its round 1 final beside pool 0's.
		let own = pallet_training_pools::NextPoolId::<Test>::get();
		assert_ok!(TrainingPools::create_pool(
			RuntimeOrigin::signed(CREATOR),
			spec(3, 3, two_thirds())
		));
		for who in [6, 7, 8] {
			bond_and_join(who, own, 1_000);
		}
		for who in [6, 7, 8] {
			assert_ok!(commit_to(own, who, 1, 9, &[0, 1, 2]));
		}
		run_to_challenges(0, 1);
		let block = System::block_number();
		// Four fillers against its own contributions, one per challenger and contribution, in
		// the block an honest verifier of pool 0 challenges in: two are scheduled, the others
		// refused.
		let fillers = [(7, 6), (8, 6), (6, 7), (8, 7)];
		let opened: Vec<bool> = fillers
			.iter()
			.map(|(challenger, accused)| {
				open_challenge(*challenger, own, 1, *accused, [0x33; 32]).is_ok()
			})
			.collect();
		assert_eq!(opened, vec![true, true, false, false]);
		assert_eq!(System::block_number(), block, "all in one block");
		assert_eq!(
			open_challenge(8, own, 1, 7, [0x33; 32]),
			Err(pallet_challenges::Error::<Test>::ScheduleFull.into())
		);
		// The honest challenge in pool 0 finds the block's other slots.
		let honest = NextChallengeId::<Test>::get();
		assert_ok!(open_challenge(2, 0, 1, 1, [0x44; 32]));
		let c = OpenChallenges::<Test>::get(honest).expect("open");
		assert!(Expiries::<Test>::get(c.draw_at).contains(&honest), "its draw is scheduled");
		assert_eq!(pallet_challenges::PoolSlots::<Test>::get(c.draw_at, own), 2);
		assert_eq!(pallet_challenges::PoolSlots::<Test>::get(c.draw_at, 0), 1);
		// Every count goes with the block's schedule.
		run_to_block(c.draw_at);
		assert_eq!(pallet_challenges::PoolSlots::<Test>::iter_prefix(c.draw_at).count(), 0);
		assert!(!OpenChallenges::<Test>::get(honest).expect("open").jury.is_empty(), "drawn");
	});
}
