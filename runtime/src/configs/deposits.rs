//! Storage deposits cover the bytes they pay for: each deposit is at least
//! [`PRICE_PER_KB`] per KiB of the largest records it keeps in storage (their `MaxEncodedLen`
//! bound plus the key), so growing a stored type without re-pricing its deposit fails here.
//!
//! Not covered: the working state a *final* round keeps until it is settled (its snapshot,
//! commits, candidates and divergence proofs, ~12 KB at 32 members, deleted at settlement).
//! Rounds awaiting settlement at once are at most the settlement delay over
//! `min_round_length`, which the pool's round deposits pay only in part.

use crate::{configs::synod::*, Runtime, UNIT};
use frame_support::traits::StorageInfoTrait;

/// What the runtime charges for one KiB kept in state, in planck (0.1 SYN).
const PRICE_PER_KB: u128 = UNIT / 10;

/// The largest size of one entry of storage item `name` of `infos` in bytes: FRAME's bound
/// (hashed key and value) plus the 32-byte pallet and item prefix. Panics on a missing or
/// unbounded item.
fn size(infos: &[frame_support::traits::StorageInfo], name: &str) -> u128 {
    let info = infos
        .iter()
        .find(|i| i.storage_name == name.as_bytes())
        .unwrap_or_else(|| panic!("no storage item {name}"));
    let value = info
        .max_size
        .unwrap_or_else(|| panic!("{name} is unbounded"));
    u128::from(value) + 32
}

/// Planck that `bytes` of state cost.
fn price(bytes: u128) -> u128 {
    (bytes * PRICE_PER_KB).div_ceil(1024)
}

/// Prints what each deposit covers (JSON, `cargo test -p synod-runtime deposits --
/// --nocapture`) and fails if a deposit is below the price of its records.
#[test]
fn storage_deposits_cover_the_records_they_pay_for() {
    let pools = pallet_training_pools::Pallet::<Runtime>::storage_info();
    let checkpoints = pallet_checkpoints::Pallet::<Runtime>::storage_info();
    let rewards = pallet_rewards::Pallet::<Runtime>::storage_info();
    let kept = u128::from(pallet_checkpoints::KEPT_VOIDED_SNAPSHOTS);
    let members = u128::from(MAX_POOL_MEMBERS);
    // A pool: its record and member list; its open round (snapshot, a commit of every member,
    // the candidates, the agreed set, the divergence proofs); the voided rounds' snapshots it
    // may keep.
    let pool = size(&pools, "Pools")
        + size(&pools, "MemberList")
        + size(&checkpoints, "OpenRounds")
        + size(&checkpoints, "LastFinal")
        + size(&checkpoints, "KeptSnapshots")
        + size(&checkpoints, "Snapshots")
        + members * size(&checkpoints, "Commits")
        + size(&checkpoints, "Candidates")
        + size(&checkpoints, "AgreedSets")
        + size(&checkpoints, "Divergent")
        + kept * size(&checkpoints, "Snapshots");
    // A member: its record (with its ML-DSA key) and peer id while it is one, its
    // former-member record (the key kept as evidence) and drop mark after; its missed-round
    // count, unclaimed reward and a leaver's held commitment in both.
    let member = (size(&pools, "Members") + size(&pools, "PeerIds"))
        .max(size(&pools, "FormerMembers") + size(&pools, "Dropped"))
        + size(&checkpoints, "MissedRounds")
        + size(&rewards, "Claimable")
        + size(&pools, "LeftCommitments");
    // A round: the final checkpoint (with its contributors), or the voided mark and the
    // unmatched commits that may outlive the round's snapshot until decided.
    let round = size(&checkpoints, "FinalCheckpoints")
        .max(size(&checkpoints, "Voided") + size(&checkpoints, "UnmatchedCommits"));
    let covered = [
        ("pool", pool, PoolDeposit::get()),
        ("member", member, MemberDeposit::get()),
        ("round", round, RoundDeposit::get()),
    ];
    let figures: Vec<String> = covered
        .iter()
        .map(|(what, bytes, deposit)| {
            format!(
                "\"{what}\":{{\"bytes\":{bytes},\"price_syn\":{:.3},\"deposit_syn\":{:.3}}}",
                price(*bytes) as f64 / UNIT as f64,
                *deposit as f64 / UNIT as f64
            )
        })
        .collect();
    println!("{{{}}}", figures.join(","));
    for (what, bytes, deposit) in covered {
        assert!(
            deposit >= price(bytes),
            "the {what} deposit ({deposit} planck) is below the price of its {bytes} bytes"
        );
    }
}
