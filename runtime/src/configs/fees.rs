//! Transaction fees, priced against block stuffing: filling blocks so that members' commits and
//! votes miss their deadlines.
//!
//! * Every byte costs [`TransactionByteFee`] (10 µSYN): a block's normal-class length
//!   (3.75 MiB) costs ≈ 39 SYN however little weight it carries; the 8 KiB of a challenge's
//!   evidence cost ≈ 0.08 SYN.
//! * The weight fee (1 planck per picosecond of reference time) is multiplied by a factor that
//!   grows while blocks carry more than [`TargetBlockFullness`] of the normal-class weight and
//!   shrinks back (never below 1) while they carry less: `TargetedFeeAdjustment`, the rule of
//!   Polkadot's relay chain (W3F research, "Transaction fees", §"Adjustment of fees over time"),
//!   with a faster [`AdjustmentVariable`] so that it acts within one round: a full block
//!   multiplies it by ≈ 1.08, ×90 after 60 blocks (two minutes); an empty one divides it by
//!   ≈ 1.025, back to 1 about 180 blocks later. Commits and votes are `Operational`
//!   (`super::duty`): their weight does not count toward the multiplier.
//!
//! `cargo test -p synod-runtime fees -- --nocapture` prints what stuffing costs.

use super::super::{Balance, Runtime, MILLI_UNIT};
use frame_support::parameter_types;
use pallet_transaction_payment::{Multiplier, TargetedFeeAdjustment};
use sp_runtime::{traits::Bounded, FixedPointNumber, Perquintill};

parameter_types! {
    /// Fee per byte of an extrinsic, in planck: 10 µSYN.
    pub const TransactionByteFee: Balance = MILLI_UNIT / 100;
    /// The share of the normal-class block weight the fee multiplier steers blocks toward.
    pub const TargetBlockFullness: Perquintill = Perquintill::from_percent(25);
    /// How fast the multiplier moves: by about this × (fullness − target) per block.
    pub AdjustmentVariable: Multiplier = Multiplier::saturating_from_rational(1, 10);
    /// Fees never fall below the unadjusted weight fee.
    pub MinimumMultiplier: Multiplier = Multiplier::saturating_from_integer(1);
    /// No ceiling: sustained stuffing gets ever dearer.
    pub MaximumMultiplier: Multiplier = Bounded::max_value();
}

/// The weight-fee multiplier's update at the end of every block.
pub type FeeMultiplierUpdate = TargetedFeeAdjustment<
    Runtime,
    TargetBlockFullness,
    AdjustmentVariable,
    MinimumMultiplier,
    MaximumMultiplier,
>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        configs::{RuntimeBlockLength, RuntimeBlockWeights},
        TransactionPayment, UNIT,
    };
    use frame_support::{
        dispatch::{DispatchClass, DispatchInfo, Pays},
        weights::Weight,
    };
    use sp_runtime::{traits::Convert, BuildStorage};

    /// One round of the demo's pools: `--round-timeout 60` blocks.
    const ROUND_BLOCKS: u32 = 60;

    fn ext() -> sp_io::TestExternalities {
        frame_system::GenesisConfig::<Runtime>::default()
            .build_storage()
            .expect("genesis")
            .into()
    }

    /// The fee of a normal-class extrinsic of `len` bytes and `weight`, at the current
    /// multiplier, in planck.
    fn fee(len: u32, weight: Weight) -> Balance {
        let info = DispatchInfo {
            call_weight: weight,
            extension_weight: Weight::zero(),
            class: DispatchClass::Normal,
            pays_fee: Pays::Yes,
        };
        TransactionPayment::compute_fee(len, &info, 0)
    }

    fn syn(planck: Balance) -> f64 {
        planck as f64 / UNIT as f64
    }

    /// The normal class's share of a block: (length in bytes, weight).
    fn normal_class() -> (u32, Weight) {
        let len = *RuntimeBlockLength::get().max.get(DispatchClass::Normal);
        let weights = RuntimeBlockWeights::get();
        let weight = weights
            .get(DispatchClass::Normal)
            .max_total
            .unwrap_or(weights.max_block);
        (len, weight)
    }

    /// Runs the runtime's multiplier update after a block whose normal class carried `weight`.
    fn end_block(weight: Weight) {
        type Update = <Runtime as pallet_transaction_payment::Config>::FeeMultiplierUpdate;
        frame_system::Pallet::<Runtime>::set_block_consumed_resources(weight, 0);
        let next = Update::convert(TransactionPayment::next_fee_multiplier());
        pallet_transaction_payment::NextFeeMultiplier::<Runtime>::put(next);
    }

    #[test]
    fn block_stuffing_a_round_costs_more_than_the_round_pays() {
        ext().execute_with(|| {
            let (len, weight) = normal_class();
            // By length: one extrinsic filling the class's bytes (weight barely above base).
            let by_length = fee(len, Weight::from_parts(1_000_000_000, 0));
            // By weight: extrinsics filling the class's weight, the multiplier rising each block.
            let mut by_weight = 0u128;
            for _ in 0..ROUND_BLOCKS {
                by_weight = by_weight.saturating_add(fee(1_000, weight));
                end_block(weight);
            }
            let multiplier = TransactionPayment::next_fee_multiplier();
            println!(
                "{{\"normal_class_bytes\":{len},\"fill_one_block_by_length_syn\":{:.2},\
                 \"fill_{ROUND_BLOCKS}_blocks_by_length_syn\":{:.1},\
                 \"fill_{ROUND_BLOCKS}_blocks_by_weight_syn\":{:.1},\
                 \"multiplier_after\":{:.2}}}",
                syn(by_length),
                syn(by_length) * f64::from(ROUND_BLOCKS),
                syn(by_weight),
                multiplier.to_float()
            );
            // The cheaper way to keep commits out of a 60-block round costs more than 100 SYN
            // (the demo's pool pays 30 SYN a round); at 1 planck per byte and a constant
            // multiplier it cost 0.000 24 SYN by length, 23 SYN by weight.
            let cheapest = by_weight.min(by_length.saturating_mul(ROUND_BLOCKS.into()));
            assert!(
                cheapest > 100 * UNIT,
                "stuffing a round costs {} SYN",
                syn(cheapest)
            );
            assert!(multiplier > Multiplier::saturating_from_integer(50));
        });
    }

    /// The fee of `call` signed (≈ 110 bytes of address, signature and extensions), in planck
    /// (the duty check's weight included: `configs::duty`).
    fn call_fee(call: crate::RuntimeCall) -> Balance {
        use codec::Encode;
        use frame_support::dispatch::GetDispatchInfo;
        use sp_runtime::traits::TransactionExtension;
        let len = call.encode().len() as u32 + 110;
        let mut info = call.get_dispatch_info();
        info.extension_weight = crate::configs::duty::CheckDutyCall.weight(&call);
        TransactionPayment::compute_fee(len, &info, 0)
    }

    /// A commit of a 32-member pool's round (the largest included set) and a juror's vote.
    fn honest_calls() -> (Balance, Balance) {
        let commit = call_fee(crate::RuntimeCall::Checkpoints(
            pallet_checkpoints::Call::commit_checkpoint {
                pool_id: 0,
                round: 1,
                checkpoint_hash: [0; 32],
                included: frame_support::BoundedVec::truncate_from((0..32).collect()),
            },
        ));
        let vote = call_fee(crate::RuntimeCall::Challenges(
            pallet_challenges::Call::vote {
                challenge_id: 0,
                guilty: true,
            },
        ));
        (commit, vote)
    }

    #[test]
    fn fees_fall_back_once_blocks_are_light_and_honest_calls_stay_cheap() {
        ext().execute_with(|| {
            let (commit, vote) = honest_calls();
            let (_, weight) = normal_class();
            for _ in 0..ROUND_BLOCKS {
                end_block(weight);
            }
            let (commit_stuffed, _) = honest_calls();
            assert!(TransactionPayment::next_fee_multiplier() > MinimumMultiplier::get());
            // Empty blocks bring it back to its floor, never below.
            for _ in 0..1_000 {
                end_block(Weight::zero());
            }
            assert_eq!(
                TransactionPayment::next_fee_multiplier(),
                MinimumMultiplier::get()
            );
            println!(
                "{{\"commit_syn\":{:.4},\"vote_syn\":{:.4},\
                 \"commit_after_{ROUND_BLOCKS}_stuffed_blocks_syn\":{:.3}}}",
                syn(commit),
                syn(vote),
                syn(commit_stuffed)
            );
            // At the floor, a member's commit and a juror's vote cost less than 0.1 SYN.
            assert!(commit < UNIT / 10 && vote < UNIT / 10);
        });
    }
}
