//! Seed grinding. The committee of a challenge was drawn from the hash of the block before the
//! draw; the author of that block knows its slot in advance and chooses the block's contents
//! (extrinsic order, remarks, digests), so it could try millions of hashes and publish the one
//! whose committee suits it, multiplying its chance of a majority by the number of tries. The
//! seed is now that block's randomness (`pallet-randomness`): its author's VRF output over the
//! parent's randomness and the slot, unique for the author's key. The attacker plays its best
//! strategy as the author of the seed block: every content it can choose, and withholding the
//! block (skipping its slot so that the next author seeds the draw).

use crate::mock::*;
use codec::Encode;
use frame_support::{assert_ok, storage::with_transaction_unchecked};
use pallet_challenges::{OpenChallenges, Seated};
use sp_runtime::TransactionOutcome;
use std::collections::BTreeSet;
use synod_primitives::protocol::{
	jury::{wrong_verdict_probability, MAX_WRONG_VERDICT, SEED_OPTIONS},
	timeline::MIN_JURY_DELAY,
};

/// Contents the grinding author tries for its block.
const TRIES: u32 = 200;

/// Pool 0, round 1 final with members 1..=5 contributing (all of them jurors), and a
/// challenge against member 1 opened by an outsider; returns the challenge's draw block.
fn challenged_round() -> u64 {
	training_pool(3, two_thirds(), &[300, 150, 200, 200, 150]);
	for who in 1..=5 {
		assert_ok!(commit(who, 1, 7, &[0, 1, 2, 3, 4]));
	}
	mint(400, 1_000_000);
	assert_ok!(open_challenge(400, 0, 1, 1, [0x44; 32]));
	OpenChallenges::<Test>::get(0).expect("open").draw_at
}

/// The committee drawn at `draw_at` when the seed block `draw_at − 1` carries `contents` in
/// its digest (and so another hash), after `skipped` slots were withheld before it; nothing of
/// it is kept.
fn committee_after(
	draw_at: u64,
	contents: u32,
	skipped: u64,
) -> (Vec<Seated<AccountId>>, [u8; 32]) {
	let result = with_transaction_unchecked(|| {
		skip_slots(skipped);
		run_to_block(draw_at - 1);
		System::deposit_log(sp_runtime::DigestItem::Other(contents.encode()));
		let hash = header_hash(draw_at - 1).0;
		run_to_block(draw_at);
		let jury = OpenChallenges::<Test>::get(0).expect("drawn").jury.into_inner();
		TransactionOutcome::Rollback((jury, hash))
	});
	// The slot offset is not storage: undo it by hand.
	skip_slots(0u64.wrapping_sub(skipped));
	result
}

#[test]
fn an_author_grinding_the_seed_block_cannot_pick_the_committee() {
	run_test(|| {
		let draw_at = challenged_round();
		run_to_block(draw_at - 2);
		let mut committees = BTreeSet::new();
		let mut hashes = BTreeSet::new();
		for contents in 0..TRIES {
			for skipped in [0, 1] {
				let (jury, hash) = committee_after(draw_at, contents, skipped);
				assert!(!jury.is_empty(), "a committee was drawn");
				committees.insert(jury);
				hashes.insert(hash);
			}
		}
		// What the attacker gains: the best of its seeds. Member 2's share (150 of 1 000, or any
		// share below ⅓) reaches a majority with `p` per seed; the best of `k` seeds with at most
		// `k·p`.
		let p = wrong_verdict_probability(JURY_SEATS, 1.0 / 3.0);
		let options = committees.len() as f64;
		println!(
			"{{\"contents_tried\":{TRIES},\"slot_choices\":2,\"distinct_seed_block_hashes\":{},\
			 \"distinct_committees\":{},\"p_wrong_verdict_per_seed\":{p:e},\
			 \"p_wrong_verdict_best_seed\":{:e},\"p_with_a_block_hash_seed\":{:e}}}",
			hashes.len(),
			committees.len(),
			options * p,
			hashes.len() as f64 * p
		);
		// A block-hash seed would have given the attacker one committee per hash.
		assert_eq!(hashes.len() as u32, 2 * TRIES);
		assert!(committees.len() as u32 <= SEED_OPTIONS, "{} committees", committees.len());
		assert!(options * p <= MAX_WRONG_VERDICT);
	});
}

/// In the block of [`challenged_round`]'s challenge, fillers take the rest of its draw block's
/// slots (`MaxExpiriesPerBlock` = 4) with challenges of the round-1 contributions of members
/// 2, 3 and 4; the attacker's target, member 5's, is then refused (`ScheduleFull`).
fn fill_the_draw_block_then_refuse_the_target() {
	for (challenger, accused) in [(401, 2), (402, 3), (403, 4)] {
		mint(challenger, 1_000_000);
		assert_ok!(open_challenge(challenger, 0, 1, accused, [0x44; 32]));
	}
	mint(404, 1_000_000);
	assert_eq!(
		open_challenge(404, 0, 1, 5, [0x44; 32]),
		Err(pallet_challenges::Error::<Test>::ScheduleFull.into())
	);
}

/// The author of the block that includes a challenge knows that block's randomness before it
/// builds it (its own VRF over the parent's): were the committee seeded by it, the author
/// would include only challenges whose committee suits it. Every draw is seeded by a later
/// block's randomness, even when fillers have taken every draw slot but the earliest.
#[test]
fn the_author_of_the_opening_block_cannot_know_the_committee() {
	run_test(|| {
		let draw_at = challenged_round();
		let opened = System::block_number();
		assert!(draw_at - 1 > opened, "seed block {} is the opening block", draw_at - 1);
		// The next challenge is refused, not drawn from the opening block's randomness.
		fill_the_draw_block_then_refuse_the_target();
		for (_, c) in OpenChallenges::<Test>::iter() {
			assert!(c.draw_at >= opened + MIN_JURY_DELAY);
		}
	});
}

/// Colluding authors of the opening block and of the blocks after it share their VRF outputs
/// (functions of the parent's randomness and the slot, not of the blocks' contents), so while
/// they author every block up to the seed block, the opening block's author knows the
/// committee of every challenge it could include. The draw comes `jury_delay` blocks after
/// opening, more than there are authors, so an honest author's block always comes between; the
/// attacker's lever is fillers that take the draw block's slots, so that the target would be
/// drawn earlier, from a seed its colluders produce. It is refused instead.
#[test]
fn fillers_cannot_pull_a_draw_before_the_jury_delay() {
	run_test(|| {
		let delay = u64::from(AUTHORS) + 1;
		JuryDelay::set(&delay);
		let draw_at = challenged_round();
		let opened = System::block_number();
		assert_eq!(draw_at, opened + delay);
		// Between the opening block and the draw, every author's slot comes once: the seed
		// chains an honest author's VRF output whatever places the colluders hold.
		let authors: BTreeSet<u64> =
			(opened + 1..draw_at).map(|n| slot_of(n) % u64::from(AUTHORS)).collect();
		assert_eq!(authors.len(), usize::from(AUTHORS));
		// The target is refused rather than drawn from the randomness of a block that the
		// colluders right after the opening produce.
		fill_the_draw_block_then_refuse_the_target();
		for (_, c) in OpenChallenges::<Test>::iter() {
			assert_eq!(c.draw_at, opened + delay);
		}
	});
}
