//! Every extrinsic's declared weight (the worst case it is charged for before it runs) fits the
//! block class it is dispatched in: a call whose bound exceeds the class is refused by every
//! transaction pool ("would exhaust the block limits") and can never be included, whatever it
//! would really cost. Each is held to half its class, so that it also lands in a block others
//! have partly filled.

use super::RuntimeBlockWeights;
use crate::{Runtime, RuntimeCall};
use frame_support::dispatch::GetDispatchInfo;
use sp_runtime::traits::Get;

/// A pool's account that is not a default one (the calls are never dispatched).
fn account() -> crate::AccountId {
    sp_runtime::AccountId32::new([7; 32])
}

/// The calls whose declared weights grow with the runtime's bounds (members, records, jurors,
/// settlements), each with its largest arguments.
fn heaviest_calls() -> Vec<(&'static str, RuntimeCall)> {
    use frame_support::BoundedVec;
    let max_members = <Runtime as pallet_training_pools::Config>::MaxMembers::get();
    let evidence =
        || BoundedVec::truncate_from(vec![0u8; pallet_challenges::MAX_EVIDENCE_BYTES as usize]);
    vec![
        (
            "training_pools.reap_pool",
            pallet_training_pools::Call::reap_pool { pool_id: 0 }.into(),
        ),
        (
            "checkpoints.commit_checkpoint",
            pallet_checkpoints::Call::commit_checkpoint {
                pool_id: 0,
                round: 1,
                checkpoint_hash: [0; 32],
                included: BoundedVec::truncate_from((0..max_members).collect()),
            }
            .into(),
        ),
        (
            "checkpoints.void_expired_round",
            pallet_checkpoints::Call::void_expired_round { pool_id: 0 }.into(),
        ),
        (
            "checkpoints.decide_unmatched_commits",
            pallet_checkpoints::Call::decide_unmatched_commits {
                pool_id: 0,
                round: 1,
            }
            .into(),
        ),
        (
            "challenges.open_challenge",
            pallet_challenges::Call::open_challenge {
                pool_id: 0,
                round: 1,
                accused: account(),
                evidence: evidence(),
            }
            .into(),
        ),
        (
            "challenges.open_narrowed_challenge",
            pallet_challenges::Call::open_narrowed_challenge {
                pool_id: 0,
                round: 1,
                accused: account(),
                evidence: evidence(),
                dispute: pallet_challenges::Dispute::Segment(0),
            }
            .into(),
        ),
        (
            "challenges.vote",
            pallet_challenges::Call::vote {
                challenge_id: 0,
                guilty: true,
            }
            .into(),
        ),
        (
            "challenges.advance_challenge",
            pallet_challenges::Call::advance_challenge { challenge_id: 0 }.into(),
        ),
        (
            "challenges.appeal",
            pallet_challenges::Call::appeal { challenge_id: 0 }.into(),
        ),
        (
            "challenges.report_equivocation",
            pallet_challenges::Call::report_equivocation {
                pool_id: 0,
                round: 1,
                accused: account(),
                first: evidence(),
                second: evidence(),
            }
            .into(),
        ),
        (
            "rewards.claim_rewards",
            pallet_rewards::Call::claim_rewards { pool_id: 0 }.into(),
        ),
        (
            "rewards.settle_round",
            pallet_rewards::Call::settle_round {
                pool_id: 0,
                round: 1,
            }
            .into(),
        ),
    ]
}

/// Prints each call's declared weight as a share of its class's per-extrinsic limit (JSON,
/// `cargo test -p synod-runtime worst_case -- --nocapture`) and fails if any exceeds half of it.
#[test]
fn every_heavy_call_fits_its_block_class() {
    let weights = RuntimeBlockWeights::get();
    let mut shares = Vec::new();
    for (name, call) in heaviest_calls() {
        let info = call.get_dispatch_info();
        let class = weights.get(info.class);
        let limit = class
            .max_extrinsic
            .expect("every class bounds one extrinsic");
        let weight = info.total_weight();
        let share = weight.ref_time() as f64 / limit.ref_time() as f64;
        shares.push(format!("\"{name}\":{share:.3}"));
        // Half the class: room for a regenerated weight to grow, and for a block already
        // partly filled by others (a call near the limit lands only in an empty block).
        assert!(
            weight.all_lte(limit / 2),
            "{name} declares {weight:?}, over half the {:?} class's {limit:?}",
            info.class
        );
    }
    println!("{{{}}}", shares.join(","));
}

/// The challenges' `on_initialize` with every schedule slot of its block due (each item at its
/// worst: a first committee's draw and an expiry with every juror absent, a ruling's execution
/// or an appeal committee's draw) stays within the normal class's three quarters of the block,
/// so that the operational quarter (commits, votes, appeals) is never taken by it: printed as a
/// share of the block's weight (`cargo test -p synod-runtime worst_case -- --nocapture`).
#[test]
fn a_full_challenge_schedule_leaves_the_operational_quarter() {
    let max = RuntimeBlockWeights::get().max_block;
    let slots = <Runtime as pallet_challenges::Config>::MaxExpiriesPerBlock::get();
    let hook = pallet_challenges::Pallet::<Runtime>::due_weight(slots);
    let share = hook.ref_time() as f64 / max.ref_time() as f64;
    println!("{{\"challenges.on_initialize({slots} due)\":{share:.3}}}");
    assert!(
        hook.all_lte(max / 4 * 3),
        "{hook:?} over three quarters of the block's {max:?}"
    );
}

/// Spam `unbond` of exactly the committed stake from a trainer in `MaxPoolsPerTrainer` pools:
/// each call reads every pool's records (and the validator lists) to find the stake committed,
/// fails with `StakeCommitted` and changes nothing. Its benchmark's trainer is in no pool, so
/// the declared weight adds what that check reads at its bound; without it every such call
/// costs the chain more than its fee pays for.
#[test]
fn unbond_is_weighed_for_a_trainer_in_max_pools() {
    use frame_support::weights::RuntimeDbWeight;
    use pallet_trainer_staking::WeightInfo;
    let pools: u32 = <Runtime as pallet_training_pools::Config>::MaxPoolsPerTrainer::get();
    let pools = u64::from(pools);
    let db: RuntimeDbWeight = <Runtime as frame_system::Config>::DbWeight::get();
    let declared = RuntimeCall::from(pallet_trainer_staking::Call::unbond { value: 1 })
        .get_dispatch_info()
        .call_weight;
    let benchmarked = <Runtime as pallet_trainer_staking::Config>::WeightInfo::unbond();
    // Per pool: its record, the membership, the left commitment; the validator lists.
    let check = db.reads(3 * pools + 4);
    assert!(
        declared.all_gte(benchmarked.saturating_add(check)),
        "unbond declares {declared:?}, under {benchmarked:?} + the commitments' {check:?}"
    );
}

/// Attack: let a large round expire with some participants silent at their last missed round
/// (dropped by the void) and the others not (they stay, and the pool opens its next round
/// with them): the void does each participant's part of one of the two benchmarked paths
/// (`void_expired_round`, the pool going on, and `void_expired_round_dropping`), plus the
/// fixed part of the staying one. With `k` staying of `m` it costs, the benchmarks being
/// linear, at most `void_expired_round(k)` plus `void_expired_round_dropping(m)` less
/// `void_expired_round_dropping(k)`: the charge (`void_weight_at(m)`, the larger fixed part
/// plus `m` times the larger part per participant) covers every `k`, in time and in proof
/// size, whatever the benchmarks' fits.
#[test]
fn a_void_of_dropped_and_staying_participants_is_charged_enough() {
    use pallet_checkpoints::WeightInfo;
    type W = <Runtime as pallet_checkpoints::Config>::WeightInfo;
    assert_every_mix_is_covered(
        <Runtime as pallet_checkpoints::Config>::MaxMembers::get(),
        W::void_expired_round,
        W::void_expired_round_dropping,
        pallet_checkpoints::Pallet::<Runtime>::void_weight_at,
    );
}

/// Asserts that `charged(n)`, for every `n` in `1..=max`, covers `k` items of the linear
/// benchmark `stay` (with its fixed part) and the other `n − k` of `drop` (`drop(n)` less
/// `drop(k)`), for every `k` in `0..=n`, in time and in proof size.
fn assert_every_mix_is_covered(
    max: u32,
    stay: impl Fn(u32) -> frame_support::weights::Weight,
    drop: impl Fn(u32) -> frame_support::weights::Weight,
    charged: impl Fn(u32) -> frame_support::weights::Weight,
) {
    for n in 1..=max {
        let charged = charged(n);
        for k in 0..=n {
            let mixed = stay(k).saturating_add(drop(n).saturating_sub(drop(k)));
            assert!(
                mixed.all_lte(charged),
                "{n} items, {k} staying: {mixed:?} over {charged:?}"
            );
        }
    }
}

/// Attack: aim the deadlines of rounds whose pools go on and of rounds that drop every
/// participant at one block, so that the deadline queue's hook voids some of each: `k`
/// staying voids of `v` cost, the benchmarks being linear, at most `on_initialize_void(k)`
/// plus the dropping hook's part for the other `v − k` (`on_initialize_void_dropping(v)`
/// less `on_initialize_void_dropping(k)`).
/// The larger of the two hooks at `v` is under that whenever one hook's fit has the larger
/// fixed part and the other the larger part per void (as the staying hook's fixed part,
/// 0.6 ms, and the dropping hook's part per void, 4.5 ms, do): the charge (`mix_weight`)
/// covers every `k`.
#[test]
fn a_block_of_staying_and_dropping_voids_is_charged_enough() {
    use pallet_checkpoints::WeightInfo;
    type W = <Runtime as pallet_checkpoints::Config>::WeightInfo;
    assert_every_mix_is_covered(
        <Runtime as pallet_checkpoints::Config>::MaxDeadlinesPerBlock::get(),
        W::on_initialize_void,
        W::on_initialize_void_dropping,
        pallet_checkpoints::Pallet::<Runtime>::on_initialize_void_weight,
    );
}
