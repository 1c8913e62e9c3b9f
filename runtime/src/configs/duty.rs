//! Block space that block stuffing cannot take from the protocol's duties.
//!
//! `Checkpoints::commit_checkpoint`, `Checkpoints::void_expired_round`, `Challenges::vote` and
//! `Challenges::appeal` are `Operational` calls: besides the normal class's 75 % of every block they may use the 25 %
//! that ordinary transactions never can, however high their tip, and the transaction pool ranks
//! them above ordinary ones of the same tip (`OperationalFeeMultiplier`). So that this space
//! serves only the duties it is for, [`CheckDutyCall`] admits such a call only if it would
//! succeed now (the pallets' `check_commit` / `check_void` / `check_vote` / `check_appeal` run
//! it and discard its effects): an outsider's commit, a void of a round whose deadline has not
//! passed, a vote by a juror who is not seated, an appeal by anyone but a ruling's loser and a
//! member repeating a failing commit are refused by the pool and never take block space. An
//! admitted duty provides a tag naming what it does (a member's commit of one round, one pool's
//! void, a juror's vote on one challenge, one challenge's appeal, [`duty_tag`]),
//! so that the pool holds at most one of each: a member's copies of its own commit, sent with
//! other nonces (each passes the check against the state without the others), would otherwise
//! all be kept, gossiped and ranked as `Operational` calls, though only the first can succeed.
//! Duties rank among themselves as every transaction does (priority from tip and fee, then the
//! earlier end of validity, then arrival): a fixed top priority would not stop an attacker's
//! own duties from going first, since the pool breaks equal priorities by the earlier end of
//! the transaction's era, which the sender chooses.
//! A refusal carries the pallet error's index as
//! `InvalidTransaction::Custom` (`synod-trainer` maps it back to the error's name through the
//! metadata). Every other `Operational` call (root's: `sudo(…)`, `System::set_code`, …) is
//! admitted only from the sudo key: from anyone else it would fail at dispatch, but only
//! after taking that space (`InvalidTransaction::BadSigner`).

use super::super::{Challenges, Checkpoints, Runtime, RuntimeCall, RuntimeOrigin};
use alloc::vec::Vec;
use codec::{Decode, DecodeWithMemTracking, Encode};
use frame_support::{
    dispatch::{DispatchClass, GetDispatchInfo},
    pallet_prelude::TransactionSource,
    traits::OriginTrait,
    weights::Weight,
};
use scale_info::TypeInfo;
use sp_runtime::{
    traits::{DispatchInfoOf, PostDispatchInfoOf, TransactionExtension, ValidateResult},
    transaction_validity::{InvalidTransaction, TransactionValidityError, ValidTransaction},
    DispatchError, DispatchResult,
};

/// Admits `commit_checkpoint`, `void_expired_round`, `vote` and `appeal` only if they would
/// succeed (see the module docs); every other call passes unchanged. Encodes to nothing (no explicit or implicit data).
#[derive(
    Encode, Decode, DecodeWithMemTracking, Clone, Copy, Eq, PartialEq, Default, TypeInfo, Debug,
)]
pub struct CheckDutyCall;

/// A duty call's arguments: the one place that tells a duty from any other call.
enum Duty<'a> {
    /// `Checkpoints::commit_checkpoint`.
    Commit {
        pool_id: u32,
        round: u32,
        checkpoint_hash: [u8; 32],
        included: &'a pallet_checkpoints::IncludedSet<Runtime>,
    },
    /// `Checkpoints::void_expired_round`.
    Void { pool_id: u32 },
    /// `Challenges::vote`.
    Vote { challenge_id: u32, guilty: bool },
    /// `Challenges::appeal`.
    Appeal { challenge_id: u32 },
}

impl<'a> Duty<'a> {
    /// `call` as a duty; `None` for any other call.
    fn of(call: &'a RuntimeCall) -> Option<Self> {
        match call {
            RuntimeCall::Checkpoints(pallet_checkpoints::Call::commit_checkpoint {
                pool_id,
                round,
                checkpoint_hash,
                included,
            }) => Some(Duty::Commit {
                pool_id: *pool_id,
                round: *round,
                checkpoint_hash: *checkpoint_hash,
                included,
            }),
            RuntimeCall::Checkpoints(pallet_checkpoints::Call::void_expired_round { pool_id }) => {
                Some(Duty::Void { pool_id: *pool_id })
            }
            RuntimeCall::Challenges(pallet_challenges::Call::vote {
                challenge_id,
                guilty,
            }) => Some(Duty::Vote {
                challenge_id: *challenge_id,
                guilty: *guilty,
            }),
            RuntimeCall::Challenges(pallet_challenges::Call::appeal { challenge_id }) => {
                Some(Duty::Appeal {
                    challenge_id: *challenge_id,
                })
            }
            _ => None,
        }
    }

    /// Runs the duty's check for `who` (the call run and its effects discarded).
    fn check(&self, who: &super::super::AccountId) -> DispatchResult {
        match *self {
            Duty::Commit {
                pool_id,
                round,
                checkpoint_hash,
                included,
            } => Checkpoints::check_commit(
                who.clone(),
                pool_id,
                round,
                checkpoint_hash,
                included.clone(),
            ),
            Duty::Void { pool_id } => Checkpoints::check_void(pool_id),
            Duty::Vote {
                challenge_id,
                guilty,
            } => Challenges::check_vote(who.clone(), challenge_id, guilty),
            Duty::Appeal { challenge_id } => Challenges::check_appeal(who.clone(), challenge_id),
        }
    }

    /// The pool tag of `who`'s duty (see [`duty_tag`]).
    fn tag(&self, who: &super::super::AccountId) -> Vec<u8> {
        match *self {
            Duty::Commit { pool_id, round, .. } => {
                (b"synod/duty/commit", pool_id, round, who).encode()
            }
            Duty::Void { pool_id } => (b"synod/duty/void", pool_id).encode(),
            Duty::Vote { challenge_id, .. } => (b"synod/duty/vote", challenge_id, who).encode(),
            Duty::Appeal { challenge_id } => (b"synod/duty/appeal", challenge_id).encode(),
        }
    }
}

/// The transaction-pool tag an admitted duty `call` of `who` provides, `None` for any other
/// call: `("synod/duty/commit", pool, round, who)`, `("synod/duty/void", pool)`,
/// `("synod/duty/vote", challenge, who)`, `("synod/duty/appeal", challenge)`, SCALE-encoded. Two transactions providing one tag
/// cannot both be in the pool's ready set (the second is refused unless its priority is
/// higher, then it replaces the first) nor in one block; each duty succeeds once anyway, so an
/// honest sender never needs two at once.
pub fn duty_tag(who: &super::super::AccountId, call: &RuntimeCall) -> Option<Vec<u8>> {
    Duty::of(call).map(|d| d.tag(who))
}

/// The `InvalidTransaction::Custom` code of a failed duty: the pallet error's index within its
/// pallet (`u8::MAX` for an error that is not a pallet's).
pub fn refusal_code(e: DispatchError) -> u8 {
    match e {
        DispatchError::Module(m) => m.error[0],
        _ => u8::MAX,
    }
}

impl TransactionExtension<RuntimeCall> for CheckDutyCall {
    const IDENTIFIER: &'static str = "CheckDutyCall";
    type Implicit = ();
    type Val = ();
    /// The weight the check booked ([`Self::weight`]).
    type Pre = Weight;

    /// A duty is run once more to be checked: its own weight again. What the call then
    /// reports it did not use is refunded ([`Self::post_dispatch_details`]).
    fn weight(&self, call: &RuntimeCall) -> Weight {
        if Duty::of(call).is_some() {
            call.get_dispatch_info().call_weight
        } else {
            Weight::zero()
        }
    }

    fn validate(
        &self,
        origin: RuntimeOrigin,
        call: &RuntimeCall,
        info: &DispatchInfoOf<RuntimeCall>,
        _len: usize,
        _self_implicit: Self::Implicit,
        _inherited_implication: &impl Encode,
        _source: TransactionSource,
    ) -> ValidateResult<Self::Val, RuntimeCall> {
        let mut valid = ValidTransaction::default();
        if let Some(who) = origin.as_signer() {
            match Duty::of(call).map(|d| (d.check(who), d.tag(who))) {
                Some((Err(e), _)) => return Err(InvalidTransaction::Custom(refusal_code(e)).into()),
                Some((Ok(()), tag)) => valid.provides.push(tag),
                None if info.class == DispatchClass::Operational
                    && pallet_sudo::Key::<Runtime>::get().as_ref() != Some(who) =>
                {
                    return Err(InvalidTransaction::BadSigner.into());
                }
                None => {}
            }
        }
        Ok((valid, (), origin))
    }

    fn prepare(
        self,
        _val: Self::Val,
        _origin: &RuntimeOrigin,
        call: &RuntimeCall,
        _info: &DispatchInfoOf<RuntimeCall>,
        _len: usize,
    ) -> Result<Self::Pre, TransactionValidityError> {
        Ok(self.weight(call))
    }

    /// The check ran the duty's own path against the state the call was dispatched in (the
    /// block's, just before): of the weight it booked (`booked`, the call's worst path), it
    /// used what the call did. The call's actual weight is `post_info`'s less the extensions'
    /// booked weight (`set_extension_weight` added it; none of the extensions before this one
    /// refunds a signed, fee-paying duty anything); a call that reports none used its whole
    /// weight, and nothing is refunded.
    fn post_dispatch_details(
        booked: Self::Pre,
        info: &DispatchInfoOf<RuntimeCall>,
        post_info: &PostDispatchInfoOf<RuntimeCall>,
        _len: usize,
        _result: &DispatchResult,
    ) -> Result<Weight, TransactionValidityError> {
        let used = post_info
            .actual_weight
            .map_or(info.call_weight, |w| {
                w.saturating_sub(info.extension_weight)
            })
            .min(info.call_weight);
        Ok(booked.saturating_sub(used))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::configs::RuntimeBlockWeights;
    use frame_support::dispatch::DispatchInfo;
    use sp_runtime::{
        traits::DispatchTransaction,
        transaction_validity::{TransactionSource, TransactionValidityError},
        BuildStorage,
    };

    fn ext() -> sp_io::TestExternalities {
        frame_system::GenesisConfig::<Runtime>::default()
            .build_storage()
            .expect("genesis")
            .into()
    }

    /// A commit of a 32-member pool's round (the largest included set), a void of a pool's
    /// expired round and a juror's vote.
    fn duties() -> [RuntimeCall; 3] {
        [
            RuntimeCall::Checkpoints(pallet_checkpoints::Call::commit_checkpoint {
                pool_id: 0,
                round: 1,
                checkpoint_hash: [0; 32],
                included: frame_support::BoundedVec::truncate_from((0..32).collect()),
            }),
            RuntimeCall::Checkpoints(pallet_checkpoints::Call::void_expired_round { pool_id: 0 }),
            RuntimeCall::Challenges(pallet_challenges::Call::vote {
                challenge_id: 0,
                guilty: true,
            }),
        ]
    }

    /// `call`'s dispatch info as the runtime books it (its extension weight included).
    fn info(call: &RuntimeCall) -> DispatchInfo {
        let mut info = call.get_dispatch_info();
        info.extension_weight = CheckDutyCall.weight(call);
        info
    }

    /// Attack: stuffing the normal class of every block (any tip) from a round's opening on, so
    /// that no member's commit, no juror's vote, and no void of a round whose deadline no
    /// deadline queue holds (`void_expired_round`, an ordinary call before) is included: the
    /// round would stall. Each duty is `Operational` and still fits a stuffed block. Printed:
    /// how many of each alone one stuffed block takes at their bookings.
    #[test]
    fn block_stuffing_cannot_starve_commits_voids_and_votes() {
        ext().execute_with(|| {
            let weights = RuntimeBlockWeights::get();
            let normal = weights.get(DispatchClass::Normal);
            let normal_weight = normal.max_total.expect("normal class bounded");
            let normal_len = *crate::configs::RuntimeBlockLength::get()
                .max
                .get(DispatchClass::Normal);
            // The attacker fills the normal class by weight and by length, whatever its tip.
            let stuff = || {
                frame_system::BlockWeight::<Runtime>::kill();
                frame_system::BlockWeight::<Runtime>::mutate(|w| {
                    w.set(normal_weight, DispatchClass::Normal)
                });
                frame_system::BlockSize::<Runtime>::put(normal_len);
            };
            stuff();
            let remark = RuntimeCall::System(frame_system::Call::remark { remark: vec![] });
            let check = |call: &RuntimeCall| -> Result<(), TransactionValidityError> {
                let (_, next_len) =
                    frame_system::CheckWeight::<Runtime>::do_validate(&info(call), 200)?;
                frame_system::CheckWeight::<Runtime>::do_prepare(&info(call), 200, next_len)
            };
            assert!(
                check(&remark).is_err(),
                "a stuffed block takes no more ordinary calls"
            );
            let mut fit = Vec::new();
            for call in duties() {
                assert_eq!(info(&call).class, DispatchClass::Operational);
                // How many of it alone the space that ordinary calls cannot use still takes.
                stuff();
                let mut n = 0u32;
                while check(&call).is_ok() {
                    n += 1;
                }
                assert!(n >= 1, "a commit, void or vote still fits in a stuffed block");
                fit.push(n);
            }
            println!(
                "{{\"commits_per_stuffed_block\":{},\"voids_per_stuffed_block\":{},\"votes_per_stuffed_block\":{}}}",
                fit[0], fit[1], fit[2]
            );
        });
    }

    /// Attack: aim every per-block list at one block (the challenges' `MaxExpiriesPerBlock`
    /// items, `MaxDeadlinesPerBlock` voids of 32-member rounds that drop every participant and
    /// end their pools, `MaxSettlementsPerBlock` settlements of `MaxContributors` each), so
    /// that the hooks' mandatory weight takes the whole block: ordinary calls get nothing in
    /// it, and duties would be starved if they shared the normal class. The operational
    /// reserve still takes them. Printed: the hooks' share of the block and how many of each
    /// duty such a block takes at their bookings.
    #[test]
    fn duties_fit_a_block_whose_hooks_are_all_at_their_worst() {
        use frame_support::traits::Get;
        use pallet_rewards::WeightInfo as _;
        use synod_primitives::OnRoundSettled as _;
        ext().execute_with(|| {
            let max = RuntimeBlockWeights::get().max_block;
            let expiries = <Runtime as pallet_challenges::Config>::MaxExpiriesPerBlock::get();
            let challenges = pallet_challenges::Pallet::<Runtime>::due_weight(expiries);
            let deadlines = <Runtime as pallet_checkpoints::Config>::MaxDeadlinesPerBlock::get();
            let voids = pallet_checkpoints::Pallet::<Runtime>::on_initialize_void_weight(deadlines)
                .saturating_add(
                    pallet_checkpoints::Pallet::<Runtime>::max_void_end_weight()
                        .saturating_mul(deadlines.into()),
                );
            let settlements = <Runtime as pallet_rewards::Config>::MaxSettlementsPerBlock::get();
            let contributors = <Runtime as pallet_rewards::Config>::MaxContributors::get();
            let settle = <Runtime as pallet_rewards::Config>::WeightInfo::on_initialize_settle(
                settlements,
                contributors,
            )
            .saturating_add(
                <<Runtime as pallet_rewards::Config>::OnRoundSettled>::weight()
                    .saturating_mul(settlements.into()),
            );
            let hooks = challenges.saturating_add(voids).saturating_add(settle);
            frame_system::BlockWeight::<Runtime>::mutate(|w| {
                w.accrue(hooks, DispatchClass::Mandatory)
            });
            let check = |call: &RuntimeCall| -> Result<(), TransactionValidityError> {
                let (_, next_len) =
                    frame_system::CheckWeight::<Runtime>::do_validate(&info(call), 200)?;
                frame_system::CheckWeight::<Runtime>::do_prepare(&info(call), 200, next_len)
            };
            let remark = RuntimeCall::System(frame_system::Call::remark { remark: vec![] });
            assert!(
                hooks.ref_time() < max.ref_time() || check(&remark).is_err(),
                "hooks past the block leave ordinary calls nothing"
            );
            let taken = frame_system::BlockWeight::<Runtime>::get();
            let mut fit = Vec::new();
            for call in duties() {
                frame_system::BlockWeight::<Runtime>::put(taken.clone());
                let mut n = 0u32;
                while check(&call).is_ok() {
                    n += 1;
                }
                assert!(
                    n >= 1,
                    "a commit, void or vote still fits beside the worst hooks"
                );
                fit.push(n);
            }
            let share = hooks.ref_time() as f64 / max.ref_time() as f64;
            println!(
                "{{\"worst_hooks_share\":{share:.3},\"commits\":{},\"voids\":{},\"votes\":{}}}",
                fit[0], fit[1], fit[2]
            );
        });
    }

    /// How many applications of `call` one block whose normal class is full takes, each booked
    /// as the runtime books it, dispatched reporting `used`, refunded by the duty check for what
    /// its dry run did not use and reclaimed by the block (`WeightReclaim`).
    fn per_stuffed_block(call: &RuntimeCall, used: Weight) -> u32 {
        use frame_support::dispatch::{Pays, PostDispatchInfo};
        use sp_runtime::traits::{ExtensionPostDispatchWeightHandler, RefundWeight};
        let booked = info(call);
        // Whether the block takes one more booking (checked, then rolled back).
        let fits = || {
            frame_support::storage::with_transaction(|| {
                let taken = frame_system::CheckWeight::<Runtime>::do_validate(&booked, 200)
                    .and_then(|(_, next_len)| {
                        frame_system::CheckWeight::<Runtime>::do_prepare(&booked, 200, next_len)
                    });
                sp_runtime::TransactionOutcome::Rollback(Ok::<_, DispatchError>(taken.is_ok()))
            })
            .unwrap_or(false)
        };
        // One application: booked, dispatched, refunded, reclaimed.
        let apply = || {
            let (_, next_len) =
                frame_system::CheckWeight::<Runtime>::do_validate(&booked, 200).expect("fits");
            frame_system::CheckWeight::<Runtime>::do_prepare(&booked, 200, next_len).expect("fits");
            let mut post = PostDispatchInfo {
                actual_weight: Some(used),
                pays_fee: Pays::Yes,
            };
            post.set_extension_weight(&booked);
            let unspent = CheckDutyCall::post_dispatch_details(
                CheckDutyCall.weight(call),
                &booked,
                &post,
                200,
                &Ok(()),
            )
            .expect("no refusal after dispatch");
            post.refund(unspent);
            frame_system::Pallet::<Runtime>::reclaim_weight(&booked, &post).expect("reclaim");
            frame_system::ExtrinsicWeightReclaimed::<Runtime>::kill();
        };
        ext().execute_with(|| {
            let normal = RuntimeBlockWeights::get()
                .get(DispatchClass::Normal)
                .max_total
                .expect("normal class bounded");
            frame_system::BlockWeight::<Runtime>::mutate(|w| w.set(normal, DispatchClass::Normal));
            let mut n = 0u32;
            while fits() {
                apply();
                n += 1;
                assert!(n < 10_000, "a call must take some space");
            }
            n
        })
    }

    /// Attack: a stuffed block's duty space taken by the commits of one-member pools of the
    /// attacker's own, tipped so that they go first, so that an honest member's commit (booked
    /// at the worst path of a 32-member pool) no longer fits. Each attacker commit is booked
    /// at that worst path too, then dispatched in its one-member pool: the pallet reports the
    /// weight of its own path (`Checkpoints::commit_weight_at`, or
    /// `Checkpoints::ending_commit_weight_at` for a commit that ends its one-round pool), the
    /// duty check refunds what its dry run did not use, and the block takes the rest back
    /// (`WeightReclaim`). Printed: how many such commits one block needs before an honest
    /// commit no longer fits (2 when every commit was charged as booked, and when commits
    /// ending a pool were), and how many commits of a 32-member pool that does not end with
    /// them a stuffed block takes.
    #[test]
    fn own_pool_commits_must_be_many_to_starve_a_commit_in_a_stuffed_block() {
        let [commit, _, _] = duties();
        let per_stuffed_block = |used| per_stuffed_block(&commit, used);
        let attacker = per_stuffed_block(Checkpoints::commit_weight_at(1));
        let ending = per_stuffed_block(Checkpoints::ending_commit_weight_at(1, 1));
        let honest = per_stuffed_block(Checkpoints::commit_weight_at(32));
        println!(
            "{{\"own_pool_commits_to_starve_a_commit\":{attacker},\"own_pool_ending_commits_to_starve_a_commit\":{ending},\"commits_of_a_32_member_pool_per_stuffed_block\":{honest}}}"
        );
        for (n, what) in [(attacker, "commits"), (ending, "pool-ending commits")] {
            assert!(
                n >= 16,
                "{n} one-member pools' {what} per block keep an honest commit out"
            );
        }
        assert!(
            honest > 2,
            "a 32-member pool's commits are charged their own path"
        );
    }

    /// Attack: a stuffed block against a committee's votes. Every vote is booked as the one
    /// that decides (`vote`, closing the challenge and its ruling's record); a vote that
    /// decides nothing is charged `vote_undecided` and the block takes the rest back, so one
    /// stuffed block takes every juror's vote of a committee drawn from the largest pool
    /// (`MAX_POOL_MEMBERS` jurors). Printed: undecided votes per stuffed block (3 when every
    /// vote was charged as booked).
    #[test]
    fn a_stuffed_block_takes_a_whole_committees_votes() {
        use pallet_challenges::WeightInfo;
        let [_, _, vote] = duties();
        let undecided = per_stuffed_block(
            &vote,
            pallet_challenges::weights::SubstrateWeight::<Runtime>::vote_undecided(),
        );
        println!("{{\"undecided_votes_per_stuffed_block\":{undecided}}}");
        assert!(
            undecided >= crate::configs::synod::MAX_POOL_MEMBERS,
            "{undecided} undecided votes per stuffed block: a committee needs several blocks"
        );
    }

    #[test]
    fn duties_that_would_fail_are_refused_by_the_pool() {
        ext().execute_with(|| {
            let outsider: crate::AccountId = [7u8; 32].into();
            let [commit, void, vote] = duties();
            let validate = |call: &RuntimeCall| {
                CheckDutyCall
                    .validate_only(
                        RuntimeOrigin::signed(outsider.clone()),
                        call,
                        &info(call),
                        200,
                        TransactionSource::External,
                        0,
                    )
                    .map(|_| ())
            };
            // No pool 0, no challenge 0: refused with the pallet error's index.
            let pool_not_found =
                refusal_code(pallet_checkpoints::Error::<Runtime>::PoolNotFound.into());
            let challenge_not_found =
                refusal_code(pallet_challenges::Error::<Runtime>::ChallengeNotFound.into());
            assert_eq!(
                validate(&commit),
                Err(InvalidTransaction::Custom(pool_not_found).into())
            );
            assert_eq!(
                validate(&vote),
                Err(InvalidTransaction::Custom(challenge_not_found).into())
            );
            // No open round of pool 0 to void: refused, it takes no duty space.
            let no_open_round =
                refusal_code(pallet_checkpoints::Error::<Runtime>::NoOpenRound.into());
            assert_eq!(
                validate(&void),
                Err(InvalidTransaction::Custom(no_open_round).into())
            );
            // Any other ordinary call passes unchecked.
            let remark = RuntimeCall::System(frame_system::Call::remark { remark: vec![] });
            assert_eq!(validate(&remark), Ok(()));
            assert_eq!(CheckDutyCall.weight(&remark), Weight::zero());
        });
    }

    /// A member's copies of its own commit (other nonces, other hashes or sets), a juror's
    /// votes on one challenge and anyone's voids of one pool share one tag, so that the pool
    /// keeps one of each; another member, round, pool or challenge has its own. Every call but a duty provides none.
    #[test]
    fn copies_of_a_duty_share_one_pool_tag() {
        let (member, other): (crate::AccountId, crate::AccountId) =
            ([1u8; 32].into(), [2u8; 32].into());
        let commit = |pool_id, round, hash: u8, set: &[u32]| {
            RuntimeCall::Checkpoints(pallet_checkpoints::Call::commit_checkpoint {
                pool_id,
                round,
                checkpoint_hash: [hash; 32],
                included: frame_support::BoundedVec::truncate_from(set.to_vec()),
            })
        };
        let vote = |challenge_id, guilty| {
            RuntimeCall::Challenges(pallet_challenges::Call::vote {
                challenge_id,
                guilty,
            })
        };
        let appeal = |challenge_id| {
            RuntimeCall::Challenges(pallet_challenges::Call::appeal { challenge_id })
        };
        let tag = |who: &crate::AccountId, call: &RuntimeCall| duty_tag(who, call).expect("a duty");
        let first = tag(&member, &commit(0, 3, 1, &[0, 1]));
        assert_eq!(first, tag(&member, &commit(0, 3, 1, &[0, 1])), "a copy");
        assert_eq!(
            first,
            tag(&member, &commit(0, 3, 2, &[0, 2])),
            "another hash and set"
        );
        for (who, call) in [
            (&other, commit(0, 3, 1, &[0, 1])),
            (&member, commit(0, 4, 1, &[0, 1])),
            (&member, commit(1, 3, 1, &[0, 1])),
        ] {
            assert_ne!(first, tag(who, &call));
        }
        let seat = tag(&member, &vote(5, true));
        assert_eq!(seat, tag(&member, &vote(5, false)));
        assert_ne!(seat, tag(&other, &vote(5, true)));
        assert_ne!(seat, tag(&member, &vote(6, true)));
        assert_eq!(tag(&member, &appeal(5)), tag(&other, &appeal(5)));
        assert_ne!(tag(&member, &appeal(5)), tag(&member, &appeal(6)));
        let void = |pool_id| {
            RuntimeCall::Checkpoints(pallet_checkpoints::Call::void_expired_round { pool_id })
        };
        assert_eq!(
            tag(&member, &void(2)),
            tag(&other, &void(2)),
            "one void per pool"
        );
        assert_ne!(tag(&member, &void(2)), tag(&member, &void(3)));
        let remark = RuntimeCall::System(frame_system::Call::remark { remark: vec![] });
        assert_eq!(duty_tag(&member, &remark), None);
    }

    /// A seated juror's vote is admitted and provides its tag; the check leaves no vote
    /// behind.
    #[test]
    fn an_admitted_duty_provides_its_tag_and_the_check_keeps_nothing() {
        ext().execute_with(|| {
            use pallet_challenges::{Challenge, OpenChallenges, Seated, Votes};
            let (juror, other): (crate::AccountId, crate::AccountId) =
                ([3u8; 32].into(), [4u8; 32].into());
            frame_system::Pallet::<Runtime>::set_block_number(10);
            let seat = |who: &crate::AccountId, seats| Seated {
                who: who.clone(),
                stake: 1,
                seats,
            };
            OpenChallenges::<Runtime>::insert(
                0,
                Challenge {
                    pool_id: 0,
                    round: 1,
                    accused: [5u8; 32].into(),
                    accused_stake: 1,
                    challenger: [6u8; 32].into(),
                    bond: 0,
                    payload_digest: [0; 32],
                    opened_at: 1,
                    draw_at: 2,
                    expires_at: 100,
                    jury: frame_support::BoundedVec::truncate_from(vec![
                        seat(&juror, 1),
                        seat(&other, 202),
                    ]),
                    votes: synod_primitives::protocol::JuryVotes {
                        seats: 203,
                        guilty: 0,
                        innocent: 0,
                    },
                },
            );
            let vote = RuntimeCall::Challenges(pallet_challenges::Call::vote {
                challenge_id: 0,
                guilty: true,
            });
            let (valid, _, _) = CheckDutyCall
                .validate_only(
                    RuntimeOrigin::signed(juror.clone()),
                    &vote,
                    &info(&vote),
                    200,
                    TransactionSource::External,
                    0,
                )
                .expect("a seated juror's first vote is admitted");
            assert_eq!(
                valid.provides,
                vec![duty_tag(&juror, &vote).expect("a duty")]
            );
            assert!(
                !Votes::<Runtime>::contains_key(0, &juror),
                "the check keeps nothing"
            );
        });
    }

    #[test]
    fn other_operational_calls_are_the_sudo_keys_alone() {
        ext().execute_with(|| {
            let key: crate::AccountId = [1u8; 32].into();
            let outsider: crate::AccountId = [7u8; 32].into();
            pallet_sudo::Key::<Runtime>::put(&key);
            let [commit, _, _] = duties();
            let wrapped = RuntimeCall::Sudo(pallet_sudo::Call::sudo_unchecked_weight {
                call: Box::new(commit),
                weight: Weight::from_parts(u64::MAX / 2, 0),
            });
            let kill = RuntimeCall::System(frame_system::Call::kill_prefix {
                prefix: vec![1],
                subkeys: u32::MAX,
            });
            for call in [wrapped, kill] {
                assert_eq!(info(&call).class, DispatchClass::Operational);
                let validate = |who: &crate::AccountId| {
                    CheckDutyCall
                        .validate_only(
                            RuntimeOrigin::signed(who.clone()),
                            &call,
                            &info(&call),
                            200,
                            TransactionSource::External,
                            0,
                        )
                        .map(|_| ())
                };
                assert_eq!(
                    validate(&outsider),
                    Err(InvalidTransaction::BadSigner.into())
                );
                assert_eq!(validate(&key), Ok(()));
            }
        });
    }
}
