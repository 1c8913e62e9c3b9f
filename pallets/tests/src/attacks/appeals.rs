//! Verdicts executed with no appeal. A committee an adversary captured (a seat majority of the
//! first committee: probability ≤ 10⁻⁶ per dispute below ⅓ of the stake, but never 0, and the
//! adversary chooses how often it tries) slashed an honest member at once, with no recourse;
//! a cheater's friends holding the majority acquitted it for good. Now, in a pool with appeals,
//! a guilty or innocent verdict is a *ruling* that executes `appeal_period` blocks later; the
//! losing party may appeal first (holding `AppealBond`) to a committee of `2 × seats + 1` seats
//! drawn from the same frozen eligible jurors, seeded by a block after the appeal, and that
//! committee's verdict is final.
//!
//! The attacker's moves played here: capture the first committee (every seated juror votes its
//! way) against an honest member; appeal a correct conviction to win a second draw; appeal at
//! the last block, hoping the appeal's seed is one it knows; appeal on another's behalf; let
//! the appeal committee stay silent.

use super::challenge;
use crate::mock::*;
use frame_support::{assert_noop, assert_ok};
use pallet_challenges::{Appeals, Error, Event, OpenChallenges, Verdict, Verdicts};
use synod_primitives::protocol::{self, jury::wrong_verdict_probability};

/// Every member of `jury` votes `guilty` while the committee's vote is open (it closes at the
/// ruling or at the verdict).
fn vote_all(id: u32, jury: &[(AccountId, u128)], guilty: bool) -> Vec<AccountId> {
	let mut voted = Vec::new();
	for (j, _) in jury {
		let open = OpenChallenges::<Test>::contains_key(id)
			&& Appeals::<Test>::get(id).is_none_or(|a| a.ruling.is_none());
		if open {
			assert_ok!(Challenges::vote(RuntimeOrigin::signed(*j), id, guilty));
			voted.push(*j);
		}
	}
	voted
}

/// What the jurors of committee `c` (a challenge read before it closed) among `voted` are paid
/// of `amount`: per seat of the committee, the parties' seats excluded.
fn paid_per_seat(
	c: &pallet_challenges::Challenge<Test>,
	voted: &[AccountId],
	amount: Balance,
) -> Balance {
	let party = |who: &AccountId| *who == c.accused || *who == c.challenger;
	let paid_seats: u128 =
		c.jury.iter().filter(|s| !party(&s.who)).map(|s| u128::from(s.seats)).sum();
	c.jury
		.iter()
		.filter(|s| !party(&s.who) && voted.contains(&s.who))
		.map(|s| amount * u128::from(s.seats) / paid_seats)
		.sum()
}

/// The ruling of challenge `id`: its verdict and the block it executes at.
fn ruling(id: u32) -> (Verdict, u64) {
	Appeals::<Test>::get(id).and_then(|a| a.ruling).expect("a ruling")
}

/// Appeals challenge `id` as `who`, moves to the appeal committee's draw and returns it.
fn appeal(who: AccountId, id: u32) -> Vec<(AccountId, u128)> {
	assert_ok!(Challenges::appeal(RuntimeOrigin::signed(who), id));
	let c = OpenChallenges::<Test>::get(id).expect("open");
	run_to_block(c.draw_at);
	let c = OpenChallenges::<Test>::get(id).expect("appeal drawn");
	assert_eq!(c.votes.seats, APPEAL_SEATS, "the appeal committee holds 2 × seats + 1");
	c.jury.iter().map(|s| (s.who, s.stake)).collect()
}

/// A pool with appeals whose three rounds are final.
fn final_pool_with_appeals() {
	AppealPeriod::set(&6);
	final_pool();
}

/// A pool whose three rounds are final (with appeals if [`AppealPeriod`] is set).
fn final_pool() {
	final_round();
	// Rounds 2 and 3 final too: nobody is leaked while the dispute runs.
	for (round, hash) in [(2, 8), (3, 9)] {
		for who in 1..=5 {
			assert_ok!(commit(who, round, hash, &[0, 1, 2, 3, 4]));
		}
	}
}

/// [`final_pool_with_appeals`], and challenger 2's challenge of member 1's round 1 with its
/// first committee drawn: (challenge id, committee).
fn challenged() -> (u32, Vec<(AccountId, u128)>) {
	final_pool_with_appeals();
	challenge(2, 0, 1, 1)
}

/// [`challenged`], then every seated juror votes `guilty`: (challenge id, committee, the
/// ruling's verdict, the block it executes at).
fn ruled(guilty: bool) -> (u32, Vec<(AccountId, u128)>, Verdict, u64) {
	let (id, jury) = challenged();
	vote_all(id, &jury, guilty);
	let (verdict, executes_at) = ruling(id);
	(id, jury, verdict, executes_at)
}

fn held_appeal_bond(who: AccountId) -> Balance {
	use frame_support::traits::fungible::InspectHold;
	Balances::balance_on_hold(
		&RuntimeHoldReason::Challenges(pallet_challenges::HoldReason::AppealBond),
		&who,
	)
}

#[test]
fn a_captured_committee_cannot_slash_before_an_appeal() {
	run_test(|| {
		// Attacker 2 accuses honest member 1; the first committee votes guilty as one (as if
		// the attacker held its majority).
		let (id, _, verdict, executes_at) = ruled(true);
		assert_eq!(verdict, Verdict::Guilty);
		assert_eq!(staked(1), 1_000, "a ruling slashes nothing before its appeal period");
		assert!(executes_at >= System::block_number() + 6);
		// The honest member appeals; the appeal committee replays and acquits.
		let free_before = free(1);
		let appeal_jury = appeal(1, id);
		assert_eq!(held_appeal_bond(1), APPEAL_BOND);
		let committee = OpenChallenges::<Test>::get(id).expect("appeal drawn");
		let voted = vote_all(id, &appeal_jury, false);
		assert_eq!(verdict_of(0, 1, 1), Some(Verdict::Innocent));
		assert_eq!(staked(1), 1_000, "the honest member keeps its stake");
		assert_eq!(held_appeal_bond(1), 0);
		assert!(free(1) >= free_before, "its appeal bond came back (plus its juror's share)");
		assert!(challenges_events().contains(&Event::AccusedFoundInnocent {
			challenge_id: id,
			accused: 1,
			bond_slashed: BOND,
			jurors_paid: paid_per_seat(&committee, &voted, BOND),
		}));
		// The ruling's block passes with nothing left to execute.
		run_to_block(executes_at.max(System::block_number()) + 1);
		assert_eq!(staked(1), 1_000);
	});
}

#[test]
fn an_unappealed_ruling_executes_when_its_appeal_period_ends() {
	run_test(|| {
		let (id, jury, _, executes_at) = ruled(true);
		// Votes are closed; nothing executes before the appeal period is over.
		assert_noop!(
			Challenges::vote(RuntimeOrigin::signed(jury[0].0), id, false),
			Error::<Test>::VotingClosed
		);
		run_to_block(executes_at - 1);
		assert_eq!(staked(1), 1_000);
		assert_noop!(
			Challenges::advance_challenge(RuntimeOrigin::signed(3), id),
			Error::<Test>::NothingDue
		);
		run_to_block(executes_at);
		assert_eq!(Verdicts::<Test>::get((0, 1, 1)), Some(Verdict::Guilty));
		assert_eq!(staked(1), 500);
		assert!(!OpenChallenges::<Test>::contains_key(id) && !Appeals::<Test>::contains_key(id));
	});
}

#[test]
fn only_the_losing_party_appeals_and_only_while_a_later_seed_remains() {
	run_test(|| {
		let (id, jury) = challenged();
		assert_noop!(Challenges::appeal(RuntimeOrigin::signed(1), id), Error::<Test>::NoRuling);
		vote_all(id, &jury, true);
		let (_, executes_at) = ruling(id);
		// The winner, a juror or an outsider cannot appeal on the loser's behalf, nor take
		// the operational space an appeal may use: the transaction pool refuses them.
		for who in [2, 3, OUTSIDER] {
			assert_noop!(
				Challenges::appeal(RuntimeOrigin::signed(who), id),
				Error::<Test>::NotAppellant
			);
			assert_noop!(Challenges::check_appeal(who, id), Error::<Test>::NotAppellant);
		}
		assert_ok!(Challenges::check_appeal(1, id));
		assert!(Appeals::<Test>::get(id).is_some_and(|a| a.appellant.is_none()), "checked only");
		// The last block leaving the appeal committee a seed block after the appeal is
		// `executes_at − 2`; at `executes_at − 1` the seed block's author would be the appeal's.
		run_to_block(executes_at - 1);
		assert_noop!(Challenges::appeal(RuntimeOrigin::signed(1), id), Error::<Test>::AppealClosed);
		assert_noop!(
			Challenges::appeal(RuntimeOrigin::signed(1), id + 1),
			Error::<Test>::ChallengeNotFound
		);
	});
}

#[test]
fn an_appeal_at_the_last_block_is_drawn_from_a_later_seed_on_schedule() {
	run_test(|| {
		let (id, _, _, executes_at) = ruled(true);
		run_to_block(executes_at - 2);
		let at = System::block_number();
		assert_ok!(Challenges::appeal(RuntimeOrigin::signed(1), id));
		let c = OpenChallenges::<Test>::get(id).expect("open");
		// Drawn in the ruling's execution block, fixed before the appeal: the appellant cannot
		// pick the seed by choosing when to appeal.
		assert_eq!(c.draw_at, executes_at);
		assert!(c.draw_at >= at + 2, "seeded by a block after the appeal's");
		assert!(pallet_challenges::Expiries::<Test>::get(c.draw_at).contains(&id), "scheduled");
		assert_noop!(Challenges::appeal(RuntimeOrigin::signed(1), id), Error::<Test>::NoRuling);
		// Nobody on the appeal committee votes: its absent seats acquit, so the appellant (the
		// accused) wins, its appeal bond back; the silent appeal jurors answer as no-shows.
		run_to_block(c.draw_at);
		let c = OpenChallenges::<Test>::get(id).expect("appeal drawn");
		run_to_block(c.expires_at + 8);
		assert!(!OpenChallenges::<Test>::contains_key(id));
		assert_eq!(verdict_of(0, 1, 1), Some(Verdict::Innocent));
		assert_eq!(held_appeal_bond(1), 0);
		assert!(challenges_events().iter().any(|e| matches!(e, Event::JurorNoShow { .. })));
	});
}

#[test]
fn appealing_a_correct_verdict_costs_the_appellant_its_bond() {
	run_test(|| {
		// Cheater 1 is convicted and appeals for a second draw; the appeal confirms.
		let (id, ..) = ruled(true);
		let appeal_jury = appeal(1, id);
		vote_all(id, &appeal_jury, true);
		assert_eq!(Verdicts::<Test>::get((0, 1, 1)), Some(Verdict::Guilty));
		assert_eq!(staked(1), 500);
		let settled = challenges_events().into_iter().find_map(|e| match e {
			Event::AppealBondSettled { appellant: 1, slashed, jurors_paid, .. } => {
				Some((slashed, jurors_paid))
			},
			_ => None,
		});
		let (slashed, paid) = settled.expect("the appeal bond was settled");
		assert_eq!(slashed, APPEAL_BOND);
		assert!(paid > 0, "paid to the appeal jurors who voted guilty");
		assert_eq!(held_appeal_bond(1), 0);
	});
}

#[test]
fn a_challenger_appeals_a_captured_acquittal() {
	run_test(|| {
		// The cheater's friends hold the first committee and acquit; the challenger appeals.
		let (id, _, verdict, _) = ruled(false);
		assert_eq!(verdict, Verdict::Innocent);
		assert_noop!(Challenges::appeal(RuntimeOrigin::signed(1), id), Error::<Test>::NotAppellant);
		let appeal_jury = appeal(2, id);
		vote_all(id, &appeal_jury, true);
		assert_eq!(Verdicts::<Test>::get((0, 1, 1)), Some(Verdict::Guilty));
		assert_eq!(staked(1), 500);
		assert_eq!(held_appeal_bond(2), 0, "a reversed ruling returns the appeal bond");
	});
}

/// Attack: blind acquittals on appeal. An appeal committee left undecided acquits, and the
/// appellant (a challenger whose first committee acquitted) lost its appeal bond to the appeal
/// jurors who voted innocent, however few: a cheater's allies voting at once, without a
/// replay, were paid for the honest jurors' absence. Only votes that decide are paid: the
/// bond goes to `Slash`.
#[test]
fn an_undecided_appeal_committee_pays_nobody_the_appellants_bond() {
	run_test(|| {
		let (id, _, verdict, _) = ruled(false);
		assert_eq!(verdict, Verdict::Innocent);
		let appeal_jury = appeal(2, id);
		// One appeal juror besides the parties votes innocent at once; the others stay away.
		let (ally, _) =
			*appeal_jury.iter().find(|(j, _)| ![1, 2].contains(j)).expect("a third juror");
		assert_ok!(Challenges::vote(RuntimeOrigin::signed(ally), id, false));
		let c = OpenChallenges::<Test>::get(id).expect("open");
		assert_eq!(c.votes.decided(), None, "one juror's seats do not decide the committee");
		let ally_free = free(ally);
		run_to_block(c.expires_at);
		assert_eq!(verdict_of(0, 1, 1), Some(Verdict::Innocent));
		assert_eq!(free(ally), ally_free, "the blind vote is paid nothing");
		assert_eq!(held_appeal_bond(2), 0);
		assert!(challenges_events().contains(&Event::AppealBondSettled {
			challenge_id: id,
			appellant: 2,
			slashed: APPEAL_BOND,
			jurors_paid: 0
		}));
	});
}

#[test]
fn an_appellant_that_cannot_hold_the_bond_is_refused() {
	run_test(|| {
		AppealPeriod::set(&6);
		final_round();
		// A challenger funded for its challenge bond only.
		mint(300, BOND + 1);
		assert_ok!(open_challenge(300, 0, 1, 1, [0x44; 32]));
		let id = 0;
		let c = OpenChallenges::<Test>::get(id).expect("open");
		run_to_block(c.draw_at);
		let c = OpenChallenges::<Test>::get(id).expect("drawn");
		vote_all(id, &c.jury.iter().map(|s| (s.who, s.stake)).collect::<Vec<_>>(), false);
		assert_noop!(
			Challenges::appeal(RuntimeOrigin::signed(300), id),
			Error::<Test>::InsufficientAppealBond
		);
	});
}

/// The probability that an adversary turns the *final* verdict, from the runtime's own draw
/// ([`Challenges::seat_randomness`], `protocol::draw_committee`) over many seeds, against the
/// exact binomial tail: at a share large enough to measure (45 %, split as one whale or as
/// many sybils), the appeal committee turns far less often than the first; at ⅓ the exact
/// figures are printed (`cargo test -p synod-pallet-tests appeal -- --nocapture`).
#[test]
fn an_appeal_committee_turns_far_less_often_for_any_stake_split() {
	const TRIES: u32 = 2_000;
	let share = 0.45;
	// One whale holding 45 %, or the same stake over 45 sybils interleaved with 55 honest
	// accounts of 1 000 each.
	let whale: Vec<(u64, u128)> =
		core::iter::once((0, 45_000)).chain((1..=55).map(|i| (i, 1_000))).collect();
	let sybils: Vec<(u64, u128)> = (0..100).map(|i| (i, 1_000)).collect();
	let adversary_whale = |w: &u64| *w == 0;
	let adversary_sybils = |w: &u64| w.is_multiple_of(2) && *w < 90;
	let mut report = Vec::new();
	for (name, candidates, adversary) in [
		("whale", &whale, &adversary_whale as &dyn Fn(&u64) -> bool),
		("sybils", &sybils, &adversary_sybils),
	] {
		let turned = |seats: u32| {
			(0..TRIES)
				.filter(|t| {
					let mut seed = [0u8; 32];
					seed[..4].copy_from_slice(&t.to_le_bytes());
					let committee = protocol::draw_committee(candidates, seats, |j| {
						Challenges::seat_randomness(seed, *t, j)
					});
					let held: u32 =
						committee.iter().filter(|s| adversary(&s.who)).map(|s| s.seats).sum();
					held >= protocol::jury::majority(seats)
				})
				.count() as f64
				/ f64::from(TRIES)
		};
		let (first, appeal) = (turned(JURY_SEATS), turned(APPEAL_SEATS));
		let (exact_first, exact_appeal) = (
			wrong_verdict_probability(JURY_SEATS, share),
			wrong_verdict_probability(APPEAL_SEATS, share),
		);
		// Within 4 standard errors of the exact tail.
		for (simulated, exact) in [(first, exact_first), (appeal, exact_appeal)] {
			let se = (exact * (1.0 - exact) / f64::from(TRIES)).sqrt();
			assert!((simulated - exact).abs() <= 4.0 * se + 1e-3, "{name}: {simulated} vs {exact}");
		}
		assert!(appeal < first / 2.0, "{name}: appeal {appeal} vs first {first}");
		report.push(format!(
			"\"{name}\":{{\"first\":{first},\"appeal\":{appeal},\"exact_first\":{exact_first:.4},\
			 \"exact_appeal\":{exact_appeal:.4}}}"
		));
	}
	let third = 1.0 / 3.0;
	println!(
		"{{\"tries\":{TRIES},\"share\":{share},{},\"at_one_third\":{{\"first\":{:e},\"appeal\":{:e}}}}}",
		report.join(","),
		wrong_verdict_probability(JURY_SEATS, third),
		wrong_verdict_probability(APPEAL_SEATS, third)
	);
}

/// The cheater hands the challenger share of its conviction to an accomplice: after honest
/// challenger 2's committee rules it guilty, the accomplice challenges it too, and the cheater
/// appeals 2's ruling so that the accomplice's executes first (the first conviction paid its own
/// challenger: the cheater got half of its slash back and the honest verifier nothing). The
/// share goes to the challenger of the earliest challenge still open instead.
#[test]
fn a_self_challenge_cannot_take_the_challenger_share_by_appealing_the_honest_ruling() {
	run_test(|| {
		let (honest, _, verdict, honest_at) = ruled(true);
		assert_eq!(verdict, Verdict::Guilty);
		// The accomplice's challenge, opened after the honest one, is ruled guilty too.
		mint(300, 10 * BOND);
		let (sham, sham_jury) = challenge(300, 0, 1, 1);
		vote_all(sham, &sham_jury, true);
		let (verdict, sham_at) = ruling(sham);
		assert_eq!(verdict, Verdict::Guilty);
		// The cheater appeals the honest ruling before it executes.
		assert!(System::block_number() < honest_at);
		let (two, accomplice) = (free(2), free(300));
		// What member 2 earns as a guilty voter of the accomplice's committee, if it voted
		// there: its seats' part of `JurorShare` (30 % of the 500 slashed), per seat of the
		// committee, the parties' excluded (the vote closed at the ruling).
		let committee = OpenChallenges::<Test>::get(sham).expect("open");
		let voted_guilty = pallet_challenges::Votes::<Test>::get(sham, 2) == Some(true);
		let as_juror = if voted_guilty { paid_per_seat(&committee, &[2], 150) } else { 0 };
		assert_ok!(Challenges::appeal(RuntimeOrigin::signed(1), honest));
		run_to_block(sham_at);
		assert_eq!(Verdicts::<Test>::get((0, 1, 1)), Some(Verdict::Guilty));
		assert!(OpenChallenges::<Test>::contains_key(honest), "the honest ruling is under appeal");
		assert!(!OpenChallenges::<Test>::contains_key(sham), "convicted by the accomplice's");
		// `ChallengerShare` (20 % of the slash) goes to the honest challenger; the accomplice
		// only gets its bond back.
		assert_eq!(free(300), accomplice + BOND);
		assert_eq!(free(2), two + 100 + as_juror);
	});
}

/// The honest challenger of [`honest_then_accomplice`].
const HONEST: AccountId = 300;
/// The accused's accomplice of [`honest_then_accomplice`].
const ACCOMPLICE: AccountId = 301;

/// [`HONEST`] challenges member 1's round 1, then [`ACCOMPLICE`] does; both committees drawn:
/// (the honest challenge, the accomplice's, the accomplice's committee).
fn honest_then_accomplice() -> (u32, u32, Vec<(AccountId, u128)>) {
	mint(HONEST, 10 * BOND);
	mint(ACCOMPLICE, 10 * BOND);
	let (first, _) = challenge(HONEST, 0, 1, 1);
	let (sham, sham_jury) = challenge(ACCOMPLICE, 0, 1, 1);
	(first, sham, sham_jury)
}

/// The cheater hands the challenger share to an accomplice that challenges *after* the honest
/// challenger: the accomplice's challenge is decided first (its committee votes at once: a
/// narrower dispute, the accused's own seats voting guilty), while the honest committee still
/// replays. The share does not follow whoever is decided first: it follows the earliest-opened
/// challenge still open, the honest one.
#[test]
fn an_accomplice_opened_after_the_honest_challenge_cannot_be_ruled_first_and_take_the_share() {
	run_test(|| {
		final_pool_with_appeals();
		let (honest, accomplice) = (HONEST, ACCOMPLICE);
		let (first, sham, sham_jury) = honest_then_accomplice();
		vote_all(sham, &sham_jury, true);
		let (verdict, sham_at) = ruling(sham);
		assert_eq!(verdict, Verdict::Guilty);
		let (honest_before, accomplice_before) = (free(honest), free(accomplice));
		run_to_block(sham_at);
		assert_eq!(Verdicts::<Test>::get((0, 1, 1)), Some(Verdict::Guilty));
		assert!(!OpenChallenges::<Test>::contains_key(sham), "convicted by the accomplice's");
		let c = OpenChallenges::<Test>::get(first).expect("the honest committee still votes");
		assert!(Appeals::<Test>::get(first).is_some_and(|a| a.ruling.is_none()), "not ruled");
		assert!(System::block_number() < c.expires_at);
		// `ChallengerShare` (20 % of the 500 slashed) goes to the honest challenger, whose bond
		// stays held while its challenge is open; the accomplice only gets its bond back.
		assert_eq!(free(accomplice), accomplice_before + BOND);
		assert_eq!(free(honest), honest_before + 100);
	});
}

/// [`an_accomplice_opened_after_the_honest_challenge_cannot_be_ruled_first_and_take_the_share`]
/// in a pool without appeals, where the accomplice's guilty verdict executes at once.
#[test]
fn an_accomplice_decided_first_in_a_pool_without_appeals_cannot_take_the_share() {
	run_test(|| {
		final_pool();
		let (honest, accomplice) = (HONEST, ACCOMPLICE);
		let (first, sham, sham_jury) = honest_then_accomplice();
		assert!(Appeals::<Test>::get(sham).is_none(), "no appeals");
		let (honest_before, accomplice_before) = (free(honest), free(accomplice));
		vote_all(sham, &sham_jury, true);
		assert_eq!(Verdicts::<Test>::get((0, 1, 1)), Some(Verdict::Guilty));
		assert!(!OpenChallenges::<Test>::contains_key(sham));
		assert!(OpenChallenges::<Test>::contains_key(first), "the honest committee still votes");
		assert_eq!(free(accomplice), accomplice_before + BOND);
		assert_eq!(free(honest), honest_before + 100);
	});
}

/// The cheater tries to pass the challenger share to an accomplice by getting the first guilty
/// ruling closed without a conviction: honest challengers 2 and 300 get it ruled guilty, then
/// its accomplice 301; it appeals 2's ruling, whose appeal committee acquits (captured; an
/// appeal committee that stays undecided acquits the same way), then appeals 300's so that the
/// accomplice's executes first. The next challenge in opening order, 300's, takes the closed
/// one's place, not the accomplice's (which would take it were it next: `docs/security.md`).
#[test]
fn closing_the_first_guilty_ruling_passes_the_share_to_the_next_challenge_opened() {
	run_test(|| {
		let (first, _, verdict, first_at) = ruled(true);
		assert_eq!(verdict, Verdict::Guilty);
		let (honest, accomplice) = (300, 301);
		mint(honest, 10 * BOND);
		mint(accomplice, 10 * BOND);
		let (second, second_jury) = challenge(honest, 0, 1, 1);
		vote_all(second, &second_jury, true);
		let (sham, sham_jury) = challenge(accomplice, 0, 1, 1);
		vote_all(sham, &sham_jury, true);
		let (second_at, sham_at) = (ruling(second).1, ruling(sham).1);
		assert!(first_at < second_at && second_at < sham_at, "ruled in this order");
		// The first ruling's appeal committee acquits: it closes without a conviction.
		let appeal_jury = appeal(1, first);
		vote_all(first, &appeal_jury, false);
		assert!(!OpenChallenges::<Test>::contains_key(first));
		assert_eq!(Verdicts::<Test>::get((0, 1, 1)), None);
		// The cheater appeals the second ruling before it executes, so that the accomplice's
		// executes first.
		assert_ok!(Challenges::appeal(RuntimeOrigin::signed(1), second));
		let (honest_before, accomplice_before) = (free(honest), free(accomplice));
		run_to_block(sham_at);
		assert_eq!(Verdicts::<Test>::get((0, 1, 1)), Some(Verdict::Guilty));
		assert!(!OpenChallenges::<Test>::contains_key(sham), "convicted by the accomplice's");
		assert!(OpenChallenges::<Test>::contains_key(second), "the second is under appeal");
		// `ChallengerShare` (20 % of the 500 slashed) goes to the earliest-opened challenge
		// still open, the honest second one; the accomplice only gets its bond back.
		assert_eq!(free(accomplice), accomplice_before + BOND);
		assert_eq!(free(honest), honest_before + 100);
	});
}

/// A challenge whose committee's innocent ruling stands unappealed is not paid the challenger
/// share of another challenge's conviction, though it was opened first: a sham challenge
/// opened first does not take the honest challenger's reward.
#[test]
fn a_first_challenge_ruled_innocent_is_not_paid_for_a_later_conviction() {
	run_test(|| {
		// The sham comes first; the honest challenger's committee rules guilty first.
		let (sham, jury) = challenged();
		mint(300, 10 * BOND);
		let (honest, honest_jury) = challenge(300, 0, 1, 1);
		vote_all(honest, &honest_jury, true);
		let (verdict, at) = ruling(honest);
		assert_eq!(verdict, Verdict::Guilty);
		// A block later the sham's committee rules innocent; its ruling executes after the
		// honest one's, and nobody appeals it.
		run_to_block(System::block_number() + 1);
		vote_all(sham, &jury, false);
		let (verdict, sham_at) = ruling(sham);
		assert_eq!(verdict, Verdict::Innocent);
		assert!(sham_at > at);
		let before = free(300);
		run_to_block(at);
		assert_eq!(Verdicts::<Test>::get((0, 1, 1)), Some(Verdict::Guilty));
		assert!(OpenChallenges::<Test>::contains_key(sham), "its ruling executes later");
		// Its bond back and `ChallengerShare` (20 % of the 500 slashed).
		assert_eq!(free(300), before + BOND + 100);
	});
}

/// An honest challenger whose first committee was captured and acquitted appeals, and the
/// appeal convicts: it keeps its place before an accomplice that challenged after it and is
/// still open, and is paid the share of its own conviction.
#[test]
fn a_challenger_that_wins_its_appeal_of_a_captured_acquittal_keeps_the_share() {
	run_test(|| {
		let (honest, jury) = challenged();
		let accomplice = 300;
		mint(accomplice, 10 * BOND);
		let (sham, _) = challenge(accomplice, 0, 1, 1);
		// The honest challenge's captured committee acquits; challenger 2 appeals.
		vote_all(honest, &jury, false);
		assert_eq!(ruling(honest).0, Verdict::Innocent);
		let appeal_jury = appeal(2, honest);
		let (two, accomplice_before) = (free(2), free(accomplice));
		vote_all(honest, &appeal_jury, true);
		assert_eq!(Verdicts::<Test>::get((0, 1, 1)), Some(Verdict::Guilty));
		assert!(OpenChallenges::<Test>::contains_key(sham), "the accomplice's is still open");
		// Challenger 2 gets its bond, its appeal bond (the ruling was reversed) and
		// `ChallengerShare` (20 % of the 500 slashed); the accomplice nothing.
		assert_eq!(free(2), two + BOND + APPEAL_BOND + 100);
		assert_eq!(free(accomplice), accomplice_before);
	});
}

/// Only the first `MAX_SHARE_CANDIDATES` (8) open challenges of a contribution are kept as
/// candidates for its challenger share: one opened past them is not kept, and while it is open
/// neither is any opened after it, so that no later candidate overtakes it when an earlier
/// candidate closes.
#[test]
fn challenges_opened_past_the_candidate_bound_are_not_kept_while_an_unkept_one_is_open() {
	use pallet_challenges::{ShareCandidates, MAX_SHARE_CANDIDATES};
	run_test(|| {
		final_pool();
		let opener = |who: AccountId| {
			mint(who, 10 * BOND);
			// `MaxExpiriesPerBlock` (4) draws per block: a block later when it is full.
			if open_challenge(who, 0, 1, 1, [0x44; 32]).is_err() {
				run_to_block(System::block_number() + 1);
				assert_ok!(open_challenge(who, 0, 1, 1, [0x44; 32]));
			}
			pallet_challenges::NextChallengeId::<Test>::get() - 1
		};
		let kept: Vec<u32> = (0..MAX_SHARE_CANDIDATES as u64).map(|i| opener(400 + i)).collect();
		let unkept = opener(300);
		let candidates = || -> Vec<u32> {
			ShareCandidates::<Test>::get((0, 1, 1))
				.map(|c| c.iter().map(|(id, _)| *id).collect())
				.unwrap_or_default()
		};
		assert_eq!(candidates(), kept);
		// The first candidate's committee acquits it (no appeals: it closes at once).
		let c = OpenChallenges::<Test>::get(kept[0]).expect("open");
		run_to_block(c.draw_at.max(System::block_number()));
		let jury: Vec<(AccountId, u128)> = OpenChallenges::<Test>::get(kept[0])
			.expect("drawn")
			.jury
			.iter()
			.map(|s| (s.who, s.stake))
			.collect();
		vote_all(kept[0], &jury, false);
		assert!(!OpenChallenges::<Test>::contains_key(kept[0]));
		// A challenge opened now is not kept ahead of the unkept one, which is still open.
		let later = opener(301);
		assert!(OpenChallenges::<Test>::contains_key(unkept));
		assert_eq!(candidates(), kept[1..].to_vec());
		assert!(!candidates().contains(&later));
	});
}
