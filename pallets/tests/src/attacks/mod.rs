//! One test per attack on the round protocol (`docs/architecture.md`'s threat model; the table
//! of attacks and tests is `docs/security.md`), one file per attack surface. Each test performs
//! the attack on the one test runtime, shows that it fails, and that nobody honest loses
//! anything; `run_test` then checks every pallet's `try_state` and conservation of issuance.

mod appeals;
mod below_quorum;
mod blind_acquittal;
mod bounds;
mod candidate_flooding;
mod commit_litter;
mod cross_pool_jurors;
mod decision_schedule;
mod duty_space;
mod early_challenge;
mod equivocation;
mod forged_evidence;
mod free_rewards;
mod garbage_commits;
mod idle_juror_drain;
mod jury_capture;
mod late_registration;
mod narrowed_disputes;
mod newcomer_no_show;
mod no_show_ambush;
mod pool_squatting;
mod reaping;
mod schedule_filling;
mod seed_grinding;
mod sham_challenge;
mod silent_included;
mod slash_dodge;
mod split_included_set;
mod stake_concentration;
mod stake_reuse;
mod stalls;
mod vote_racing;
mod withholding;

use crate::mock::*;
use frame_support::assert_ok;

/// Opens a challenge by `challenger` against `accused` in `round` of `pool`, runs to the jury
/// draw and returns the challenge id and the drawn jurors with their stake.
pub(crate) fn challenge(
	challenger: AccountId,
	pool: u32,
	round: u32,
	accused: AccountId,
) -> (u32, Vec<(AccountId, u128)>) {
	let id = pallet_challenges::NextChallengeId::<Test>::get();
	assert_ok!(open_challenge(challenger, pool, round, accused, [0x44; 32]));
	let c = pallet_challenges::OpenChallenges::<Test>::get(id).expect("opened");
	assert!(c.jury.is_empty(), "the jury is not known when the challenge is opened");
	run_to_block(c.draw_at);
	let jury = pallet_challenges::OpenChallenges::<Test>::get(id)
		.map(|c| c.jury.iter().map(|s| (s.who, s.stake)).collect())
		.unwrap_or_default();
	(id, jury)
}

/// Every juror of `jury` votes `guilty`.
pub(crate) fn all_vote(id: u32, jury: &[(AccountId, u128)], guilty: bool) {
	for (j, _) in jury {
		if pallet_challenges::OpenChallenges::<Test>::contains_key(id) {
			assert_ok!(Challenges::vote(RuntimeOrigin::signed(*j), id, guilty));
		}
	}
}

/// Round `round` of pool 0 (5 × 1 000 stake, ⅔ quorum) splits as an equivocation by member 3
/// splits it: members 1 and 2 commit hash 7, members 3, 4 and 5 hash 8 (a strict majority),
/// all over the same included set; neither reaches ⅔ and the round is voided at its deadline
/// (members 1 and 2 are unmatched: leaked when the round's reports close unless the
/// equivocation is proved).
pub(crate) fn split(round: u32) {
	for who in [1, 2] {
		assert_ok!(commit(who, round, 7, &[0, 1, 2, 3, 4]));
	}
	for who in [3, 4, 5] {
		assert_ok!(commit(who, round, 8, &[0, 1, 2, 3, 4]));
	}
	run_to_block(u64::from(round) * 10 + 1);
	assert!(pallet_checkpoints::Voided::<Test>::get(0, round).is_some());
}
