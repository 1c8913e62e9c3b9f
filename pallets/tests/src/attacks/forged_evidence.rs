//! Evidence-bound challenges. Before, `open_challenge` took a bare digest that nothing checked:
//! anyone could accuse a contributor of a payload it never served, and a juror had nothing the
//! accused had signed. Now the evidence is the accused's own signed announcement (ML-DSA-65,
//! checked on-chain against the key it registered), and leaving the pool does not take the key
//! away while its rounds can be challenged.

use super::{all_vote, challenge};
use crate::mock::*;
use codec::Encode;
use frame_support::{assert_noop, assert_ok};
use pallet_challenges::{Error, Evidence, OpenChallenges};
use synod_primitives::protocol::evidence::{signing, Body, Envelope, PayloadRef};

fn open(evidence: Evidence) -> sp_runtime::DispatchResult {
	Challenges::open_challenge(RuntimeOrigin::signed(OUTSIDER), 0, 1, 3, evidence)
}

/// A message for member 3 of pool 0 signed with `seed`'s key.
fn signed_as_3(seed: [u8; 32], round: u32, body: Body) -> Evidence {
	let envelope = Envelope {
		pool: 0,
		round,
		member: member_index(0, 3).expect("member"),
		peer_id: peer(3).into_inner(),
		body,
	};
	signing::sign(&seed, envelope).encode().try_into().expect("fits")
}

fn alive(digest: u8) -> Body {
	Body::Alive { seq: 1, payload: Some(PayloadRef { digest: [digest; 32], size: 10 }) }
}

#[test]
fn challenge_with_forged_evidence_is_refused() {
	run_test(|| {
		final_round();
		run_to_challenges(0, 1);
		// The challenger signs "member 3 announced payload X" with its own key.
		assert_noop!(
			open(signed_as_3(key_seed(OUTSIDER), 1, alive(0x44))),
			Error::<Test>::EvidenceSignatureInvalid
		);
		// Another member's genuine announcement is not the accused's.
		assert_noop!(
			open(announcement(0, 1, 2, [0x44; 32])),
			Error::<Test>::EvidenceSignatureInvalid
		);
		// A genuine announcement by the accused, tampered with (another digest).
		let mut bytes = announcement(0, 1, 3, [0x44; 32]).into_inner();
		let at = bytes.iter().position(|b| *b == 0x44).expect("digest in the envelope");
		bytes[at] = 0x45;
		assert_noop!(open(bytes.try_into().unwrap()), Error::<Test>::EvidenceSignatureInvalid);
		// Garbage, a truncated message.
		assert_noop!(open(vec![1, 2, 3].try_into().unwrap()), Error::<Test>::EvidenceMalformed);
		let mut short = announcement(0, 1, 3, [0x44; 32]).into_inner();
		short.pop();
		assert_noop!(open(short.try_into().unwrap()), Error::<Test>::EvidenceMalformed);
		// The accused's genuine messages, but not about this contribution.
		assert_noop!(
			open(signed_as_3(key_seed(3), 2, alive(0x44))),
			Error::<Test>::EvidenceOfAnotherContribution
		);
		assert_noop!(
			open(signed_as_3(key_seed(3), 1, Body::Alive { seq: 1, payload: None })),
			Error::<Test>::EvidenceNotAnAnnouncement
		);
		assert_noop!(
			open(signed_as_3(key_seed(3), 1, Body::Leave)),
			Error::<Test>::EvidenceNotAnAnnouncement
		);
		// The genuine announcement opens it, and the challenge is about its digest.
		assert_ok!(open(announcement(0, 1, 3, [0x44; 32])));
		assert_eq!(OpenChallenges::<Test>::get(0).expect("open").payload_digest, [0x44; 32]);
	});
}

#[test]
fn leaving_does_not_take_the_key_away_from_challenges() {
	run_test(|| {
		final_round();
		run_to_challenges(0, 1);
		jurors(&[1, 2, 4], 1_000);
		// The accused leaves right after finality, hoping its key goes with its record.
		assert_ok!(TrainingPools::leave_pool(RuntimeOrigin::signed(3), 0));
		assert!(pallet_training_pools::Members::<Test>::get(0, 3).is_none());
		let (id, jury) = challenge(OUTSIDER, 0, 1, 3);
		all_vote(id, &jury, true);
		assert_eq!(staked(3), 500, "convicted on its own signature after leaving");
		// Its deposit stays until no challenge of its rounds can be open, then anyone frees it.
		let index = member_index(0, 3).expect("former member");
		let kept_until = pallet_training_pools::FormerMembers::<Test>::get(0, index)
			.expect("kept")
			.kept_until;
		assert_noop!(
			TrainingPools::release_member_deposit(RuntimeOrigin::signed(OUTSIDER), 0, index),
			pallet_training_pools::Error::<Test>::DepositStillNeeded
		);
		run_to_block(kept_until + 1);
		let before = free(3);
		assert_ok!(TrainingPools::release_member_deposit(
			RuntimeOrigin::signed(OUTSIDER),
			0,
			index
		));
		assert_eq!(free(3), before + MEMBER_DEPOSIT);
		assert!(member_index(0, 3).is_none());
	});
}
