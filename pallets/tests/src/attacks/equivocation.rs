//! Equivocation: a member signs two different payloads for one round and shows each to
//! different peers, so honest members end with different included sets and the round may be
//! voided. Peers that see both ban it locally, and the two signed announcements are the proof:
//! `report_equivocation` verifies both against the accused's registered key and slashes its snapshot stake at once, without a
//! jury, and the accused is unpaid for the round. It is its own offence: reporting oneself does
//! not shield a wrong payload from the jury.

use super::split;
use super::{all_vote, challenge};
use crate::mock::*;
use frame_support::{assert_noop, assert_ok};
use pallet_challenges::{Equivocations, Error, Event, Evidence, Verdicts};
use pallet_checkpoints::{KeptSnapshots, Snapshots};
use pallet_rewards::Claimable;
use synod_primitives::{protocol::Verdict, PoolsInterface};

fn report(
	reporter: AccountId,
	round: u32,
	accused: AccountId,
	a: Evidence,
	b: Evidence,
) -> sp_runtime::DispatchResult {
	Challenges::report_equivocation(RuntimeOrigin::signed(reporter), 0, round, accused, a, b)
}

#[test]
fn equivocation_is_slashed_on_chain_at_once_and_the_equivocator_is_unpaid() {
	run_test(|| {
		training_pool(3, two_thirds(), &[1_000; 5]);
		// Round 1 is open: member 3 signs payload 0x11 for some peers and 0x22 for others.
		let (a, b) = (announcement(0, 1, 3, [0x11; 32]), announcement(0, 1, 3, [0x22; 32]));
		let before = free(OUTSIDER);
		assert_ok!(report(OUTSIDER, 1, 3, a, b));
		// SlashFraction (50 %) of its snapshot stake, ChallengerShare (20 %) of that to the reporter.
		assert_eq!(staked(3), 500);
		assert_eq!(free(OUTSIDER), before + 100);
		assert_eq!(Equivocations::<Test>::get((0, 1, 3)), Some(([0x11; 32], [0x22; 32])));
		assert!(System::events().iter().any(|r| matches!(
			&r.event,
			RuntimeEvent::Challenges(Event::EquivocationSlashed { accused: 3, reporter: OUTSIDER, slashed: 500, digests, .. })
				if *digests == ([0x11; 32], [0x22; 32])
		)));
		// The round still becomes final with it included, but it is not paid for it (its
		// share goes back to the pool's budget, as for a convicted contributor).
		for who in 1..=5 {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2, 3, 4]));
		}
		run_to_block(34);
		assert_eq!(Claimable::<Test>::get(0, 3), 0);
		for honest in [1, 2, 4, 5] {
			assert_eq!(
				Claimable::<Test>::get(0, honest),
				200,
				"each honest contributor keeps its stake-weighted share"
			);
		}
	});
}

#[test]
fn an_equivocation_is_slashed_once() {
	run_test(|| {
		training_pool(3, two_thirds(), &[1_000; 5]);
		let (a, b) = (announcement(0, 1, 3, [0x11; 32]), announcement(0, 1, 3, [0x22; 32]));
		assert_ok!(report(OUTSIDER, 1, 3, a.clone(), b.clone()));
		assert_noop!(report(1, 1, 3, b, a.clone()), Error::<Test>::AlreadyReported);
		// A third payload of the same round does not slash it again either.
		assert_noop!(
			report(1, 1, 3, a, announcement(0, 1, 3, [0x33; 32])),
			Error::<Test>::AlreadyReported
		);
		assert_eq!(staked(3), 500);
	});
}

#[test]
fn reporting_oneself_does_not_shield_a_wrong_payload_from_the_jury() {
	run_test(|| {
		training_pool(3, two_thirds(), &[1_000; 5]);
		jurors(&[1, 4, 5], 1_000);
		for who in 1..=5 {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2, 3, 4]));
		}
		// Member 3 sent a wrong payload; before anyone challenges it, it signs a second one and
		// reports itself from an account it controls, hoping to pay half a slash (the reporter's
		// share comes back to it) and to leave nothing for the challenger and the jury.
		assert_ok!(report(
			OUTSIDER,
			1,
			3,
			announcement(0, 1, 3, [0x44; 32]),
			announcement(0, 1, 3, [0x45; 32])
		));
		assert_eq!(staked(3), 500);
		let before = free(2);
		let (id, jury) = challenge(2, 0, 1, 3);
		all_vote(id, &jury, true);
		// The conviction slashes SlashFraction of the snapshot stake again (all that is left),
		// and the challenger is paid its share of it.
		assert_eq!(Verdicts::<Test>::get((0, 1, 3)), Some(Verdict::Guilty));
		assert_eq!(staked(3), 0);
		assert!(free(2) > before, "the challenger was paid");
	});
}

#[test]
fn an_honest_member_cannot_be_framed_as_an_equivocator() {
	run_test(|| {
		training_pool(3, two_thirds(), &[1_000; 5]);
		let genuine = announcement(0, 1, 3, [0x11; 32]);
		// Its one payload, announced in many heartbeats: not an equivocation.
		assert_noop!(
			report(OUTSIDER, 1, 3, genuine.clone(), announcement(0, 1, 3, [0x11; 32])),
			Error::<Test>::NotAnEquivocation
		);
		// A second "announcement" signed by someone else, or by another member.
		let forged = {
			use codec::Encode;
			use synod_primitives::protocol::evidence::{signing, Body, Envelope, PayloadRef};
			let envelope = Envelope {
				pool: 0,
				round: 1,
				member: member_index(0, 3).expect("member"),
				peer_id: peer(3).into_inner(),
				body: Body::Alive {
					seq: 2,
					payload: Some(PayloadRef { digest: [0x22; 32], size: 1_000 }),
				},
			};
			Evidence::try_from(signing::sign(&key_seed(OUTSIDER), envelope).encode()).expect("fits")
		};
		assert_noop!(
			report(OUTSIDER, 1, 3, genuine.clone(), forged),
			Error::<Test>::EvidenceSignatureInvalid
		);
		assert_noop!(
			report(OUTSIDER, 1, 3, genuine.clone(), announcement(0, 1, 2, [0x22; 32])),
			Error::<Test>::EvidenceSignatureInvalid
		);
		// Its payloads of two different rounds, presented as one round's.
		for who in 1..=5 {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2, 3, 4]));
		}
		let next = announcement(0, 2, 3, [0x22; 32]);
		assert_noop!(
			report(OUTSIDER, 1, 3, genuine.clone(), next.clone()),
			Error::<Test>::NotAnEquivocation
		);
		// Two genuine announcements of round 1 claimed to be about round 2.
		assert_noop!(
			report(OUTSIDER, 2, 3, genuine, announcement(0, 1, 3, [0x33; 32])),
			Error::<Test>::EvidenceOfAnotherContribution
		);
		// Nobody accuses itself to collect the reporter's share.
		assert_noop!(
			report(3, 2, 3, next, announcement(0, 2, 3, [0x33; 32])),
			Error::<Test>::SelfChallenge
		);
		assert_eq!(staked(3), 1_000);
		assert_eq!(Equivocations::<Test>::iter().count(), 0);
	});
}

#[test]
fn leaving_does_not_dodge_an_equivocation_report() {
	run_test(|| {
		training_pool(3, two_thirds(), &[1_000; 5]);
		let (a, b) = (announcement(0, 1, 3, [0x11; 32]), announcement(0, 1, 3, [0x22; 32]));
		// It leaves right after signing both; its key and its snapshot stake stay.
		assert_ok!(TrainingPools::leave_pool(RuntimeOrigin::signed(3), 0));
		assert_ok!(report(OUTSIDER, 1, 3, a, b));
		assert_eq!(staked(3), 500);
	});
}

#[test]
fn equivocation_needs_the_round_snapshot() {
	run_test(|| {
		training_pool(3, two_thirds(), &[1_000; 5]);
		// Member 3's two payloads of `round`, reported by OUTSIDER against `accused` in `pool`.
		let try_report = |pool: u32, round: u32, accused: AccountId| {
			Challenges::report_equivocation(
				RuntimeOrigin::signed(OUTSIDER),
				pool,
				round,
				accused,
				announcement(0, round, 3, [0x11; 32]),
				announcement(0, round, 3, [0x22; 32]),
			)
		};
		// Round 2 has not opened: nobody's stake backs it yet.
		assert_noop!(try_report(0, 2, 3), Error::<Test>::NotAParticipant);
		// Not a member of the pool at all.
		assert_noop!(try_report(0, 1, 1_000), Error::<Test>::NotAParticipant);
		assert_noop!(try_report(7, 1, 3), Error::<Test>::PoolNotFound);
		assert_ok!(try_report(0, 1, 3));
	});
}

#[test]
fn equivocating_in_a_round_that_is_then_voided_is_still_slashed() {
	run_test(|| {
		training_pool(10, two_thirds(), &[1_000; 5]);
		// The split its two payloads caused voided the round; before, voiding deleted the
		// round's snapshot and with it the basis of the report (`NotAParticipant`).
		split(1);
		let (a, b) = (announcement(0, 1, 3, [0x11; 32]), announcement(0, 1, 3, [0x22; 32]));
		assert_ok!(report(OUTSIDER, 1, 3, a, b));
		assert_eq!(staked(3), 500, "SlashFraction of its snapshot stake");
		assert!(Equivocations::<Test>::contains_key((0, 1, 3)));
	});
}

#[test]
fn a_voided_rounds_snapshot_is_kept_while_its_stake_is_slashable() {
	run_test(|| {
		training_pool(10, two_thirds(), &[1_000; 5]);
		let try_report = |member: AccountId| {
			report(
				OUTSIDER,
				1,
				member,
				announcement(0, 1, member, [0x11; 32]),
				announcement(0, 1, member, [0x22; 32]),
			)
		};
		split(1);
		// Round 1 opened at block 1: deadline 11; its stake is held until slashable_until(11).
		let until = TrainingPools::round_params(0).expect("pool").timeline.slashable_until(11);
		assert_eq!(KeptSnapshots::<Test>::get(0).into_inner(), vec![(1, until)]);
		split(2);
		split(3);
		run_to_block(until - 1);
		assert_ok!(try_report(4));
		// From `until` on the stake may be withdrawn: nothing can be charged any more.
		run_to_block(until);
		assert_noop!(try_report(5), Error::<Test>::NotAParticipant);
		assert!(Checkpoints::round_snapshot(0, 1).is_empty());
		// The next void deletes the expired snapshot.
		assert!(Snapshots::<Test>::contains_key((0, 1)));
		split(5);
		assert!(!Snapshots::<Test>::contains_key((0, 1)));
		assert_eq!(KeptSnapshots::<Test>::get(0).first().map(|(r, _)| *r), Some(2));
	});
}

#[test]
fn forced_voids_cannot_evict_a_voided_rounds_snapshot_while_it_is_slashable() {
	run_test(|| {
		// Holders of more than ⅓ of the stake can void every round by committing their own
		// hash (no inactivity leak: they committed). The chain keeps 16 voided rounds'
		// snapshots per pool, so a pool whose slashable window (2W + jury delay + voting period
		// + 1 = 2W + 23 blocks here) spans more than 16 timeouts (160 blocks) is refused.
		let mut s = spec(20, 5, two_thirds());
		s.terms.challenge_window = 69;
		assert_noop!(
			TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), s.clone()),
			pallet_training_pools::Error::<Test>::InvalidChallengeWindow
		);
		s.terms.challenge_window = 68;
		assert_ok!(TrainingPools::create_pool(RuntimeOrigin::signed(CREATOR), s));
		for who in 1..=5 {
			bond_and_join(who, 0, 1_000);
		}
		// Member 3 equivocates in round 1; the round and the 15 after it are voided.
		for round in 1..=16 {
			split(round);
		}
		assert_eq!(KeptSnapshots::<Test>::get(0).len(), 16);
		let until = TrainingPools::round_params(0).expect("pool").timeline.slashable_until(11);
		run_to_block(until - 1);
		let (a, b) = (announcement(0, 1, 3, [0x11; 32]), announcement(0, 1, 3, [0x22; 32]));
		assert_ok!(report(OUTSIDER, 1, 3, a, b));
		assert_eq!(staked(3), 500);
	});
}

/// Attack: an equivocator (member 3) gives payload A to members 1, 2 and 4 and payload B to
/// member 5, all over one included set. Members 1 to 4 hold the quorum with the aggregate of
/// A and the round is final without member 5, whose commit names the final set with another
/// hash: it could not commit again (`AlreadyCommitted`), so it went unpaid for a round its
/// payload is in, and was left out of the next round's juries (eligibility needs the
/// previous round's contributors), which raises the adversary's share of them. It now commits
/// the final pair once it recomputed it, within the late-commit window: a late contributor,
/// paid.
#[test]
fn honest_members_split_by_an_equivocator_in_a_final_round_commit_the_final_pair_and_are_paid() {
	run_test(|| {
		training_pool(3, two_thirds(), &[1_000; 5]);
		assert_ok!(commit(5, 1, 8, &[0, 1, 2, 3, 4]));
		for who in 1..=4 {
			assert_ok!(commit(who, 1, 7, &[0, 1, 2, 3, 4]));
		}
		let fin = pallet_checkpoints::FinalCheckpoints::<Test>::get(0, 1).expect("final");
		assert_eq!(fin.hash, [7; 32]);
		assert!(!fin.contributors.contains(&5));
		let (a, b) = (announcement(0, 1, 3, [0x11; 32]), announcement(0, 1, 3, [0x22; 32]));
		assert_ok!(report(5, 1, 3, a, b));
		// Member 5 recomputed the final aggregate with the equivocator's other payload.
		assert_noop!(
			commit(5, 1, 9, &[0, 1, 2, 3, 4]),
			pallet_checkpoints::Error::<Test>::NotTheAgreedSet
		);
		assert_ok!(commit(5, 1, 7, &[0, 1, 2, 3, 4]));
		let fin = pallet_checkpoints::FinalCheckpoints::<Test>::get(0, 1).expect("final");
		assert!(fin.contributors.contains(&5), "a late contributor");
		assert!(pallet_checkpoints::Divergent::<Test>::get((0, 1)).is_empty());
		// Once.
		assert_noop!(
			commit(5, 1, 7, &[0, 1, 2, 3, 4]),
			pallet_checkpoints::Error::<Test>::AlreadyCommitted
		);
		run_to_block(34);
		assert_eq!(Claimable::<Test>::get(0, 3), 0, "the equivocator is unpaid");
		assert_eq!(Claimable::<Test>::get(0, 5), 200, "the split honest member is paid");
	});
}
