//! Configuration of Synod's pallets. Times are in blocks of [`crate::MILLISECS_PER_BLOCK`].

use frame_support::{
    parameter_types,
    traits::{tokens::imbalance::ResolveTo, ConstU32},
    PalletId,
};
use sp_runtime::{traits::AccountIdConversion, Perbill};

use crate::{
    AccountId, Balance, Balances, BlockNumber, Challenges, Checkpoints, Randomness, Rewards,
    Runtime, RuntimeHoldReason, Session, TrainerStaking, TrainingPools, ValidatorSet, DAYS,
    MINUTES, UNIT,
};

/// Maximum members of one pool (bounds included sets, juries and contributor lists).
pub const MAX_POOL_MEMBERS: u32 = 32;
/// Size of the active validator set (top N candidates by bonded stake).
pub const MAX_VALIDATORS: u32 = 16;
const _: () = assert!(MAX_VALIDATORS == super::MAX_AUTHORITIES);
const _: () = assert!(JuryDelay::get() > MAX_VALIDATORS);

parameter_types! {
    /// Receives slashed stake and failed challengers' bonds.
    pub TreasuryAccount: AccountId = PalletId(*b"syn/trsy").into_account_truncating();
    /// Smallest non-zero trainer stake: 1 SYN.
    pub const MinBond: Balance = UNIT;
    /// Unbonding takes 10 minutes.
    pub const UnbondingPeriod: BlockNumber = 10 * MINUTES;
    /// A member's storage deposit: 0.3 SYN for its record and 1952-byte ML-DSA key, kept
    /// while the key can serve as evidence, and its unclaimed reward (~2.5 KB at ~0.1 SYN per
    /// KB: `configs::deposits`).
    pub const MemberDeposit: Balance = UNIT * 3 / 10;
    /// A pool's storage deposit: 6 SYN for its record and member list, its open round's
    /// snapshot, commits and candidates, and the snapshots of the 16 voided rounds it may keep
    /// (~49 KB at ~0.1 SYN per KB: `configs::deposits`)…
    pub const PoolDeposit: Balance = 6 * UNIT;
    /// …plus 0.2 SYN per round for what each round leaves: its final checkpoint (≤ ~1.3 KB
    /// with 32 contributors) or its voided mark and undecided unmatched commits; all back to
    /// the creator when the pool is reaped.
    pub const RoundDeposit: Balance = UNIT / 5;
    /// A challenger holds 10 SYN.
    pub const ChallengeBond: Balance = 10 * UNIT;
    /// A jury is drawn `MAX_VALIDATORS + 1` blocks (34 s) after its challenge was opened, from
    /// the randomness of the block before the draw, which chains the VRF outputs of the
    /// `MAX_VALIDATORS` blocks after the opening one. One of those blocks is an honest
    /// validator's, so colluding authors of the opening block and the blocks after it cannot
    /// compute the committee when they include a challenge, as long as the honest validators
    /// author their slots and either the set stays the same (Aura gives each of its at most
    /// `MAX_VALIDATORS` authorities one slot in any `MAX_VALIDATORS` consecutive slots: any
    /// number of colluders short of all) or the colluders hold under ⅓ of each set and a
    /// session outlasts their count (re-placed in every session's order, they author at most
    /// `2k − 1` blocks in a row after their opening block, `k` ≤ 5).
    pub const JuryDelay: BlockNumber = MAX_VALIDATORS + 1;
    /// Jurors vote within one round timeout plus half a minute (a juror replays one member's
    /// H inner steps, which fit in a round timeout).
    pub const VoteMargin: BlockNumber = MINUTES / 2;
    /// The losing party of a jury's ruling has half a minute to appeal it before it executes.
    pub const AppealPeriod: BlockNumber = MINUTES / 2;
    /// An appellant holds 20 SYN (twice a challenge bond: an appeal convenes a committee twice
    /// as large).
    pub const AppealBond: Balance = 20 * UNIT;
    /// A guilty member loses 10 % of its snapshot stake…
    pub const SlashFraction: Perbill = Perbill::from_percent(10);
    /// …half of which goes to the challenger…
    pub const ChallengerShare: Perbill = Perbill::from_percent(50);
    /// …a quarter to the jurors who voted guilty (the rest to the treasury).
    pub const JurorShare: Perbill = Perbill::from_percent(25);
    /// A drawn juror that does not vote loses 1 % of its drawn stake (once per round).
    pub const NoShowSlash: Perbill = Perbill::from_percent(1);
    /// A member silent in a voided round loses 1 % of its snapshot stake.
    pub const InactivityLeak: Perbill = Perbill::from_percent(1);
    /// A drawn jury needs 50 SYN of stake (besides the parties') to give a verdict.
    pub const MinJuryStake: Balance = 50 * UNIT;
    /// Bounds on pool specs: `min_stake` ≥ 1 SYN, ≤ 1 000 000 SYN per round, a round times out
    /// within a day, challenge windows of 4 blocks to a day (challenges open for the W blocks
    /// after the late commits close, which a challenger that learns of finality a few blocks
    /// late, `synod_diloco::budget::LAG_BLOCKS` = 3, must still be able to land in); a round accepts commits no sooner
    /// than ⌈H / 256⌉ blocks after it opens (no member is assumed to run more than 256 inner
    /// steps per 2-second block, 128 steps/s), so never in the block it opened.
    pub const PoolSpecLimits: synod_primitives::protocol::SpecLimits =
        synod_primitives::protocol::SpecLimits {
            max_rounds: 100_000,
            max_inner_steps: 1_000_000,
            max_members: MAX_POOL_MEMBERS,
            min_stake_floor: UNIT,
            max_reward_per_round: 1_000_000 * UNIT,
            max_round_timeout: DAYS as u64,
            min_challenge_window: 4,
            max_challenge_window: DAYS as u64,
            max_inner_steps_per_block: 256,
        };
}

type ToTreasury = ResolveTo<TreasuryAccount, Balances>;

impl pallet_trainer_staking::Config for Runtime {
    type Currency = Balances;
    type RuntimeHoldReason = RuntimeHoldReason;
    type MinBond = MinBond;
    type UnbondingPeriod = UnbondingPeriod;
    type MaxUnlockingChunks = ConstU32<32>;
    /// Pool memberships and validation: `unbond` leaves both.
    type Commitments = (TrainingPools, ValidatorSet);
    type Slash = ToTreasury;
    type WeightInfo = pallet_trainer_staking::weights::SubstrateWeight<Runtime>;
}

parameter_types! {
    /// A validator candidate keeps 1 000 SYN bonded (the presets' validators bond exactly
    /// that): a GRANDPA seat weighs the same whatever the stake behind it, so seats must not
    /// be cheap while the set has room (`MAX_VALIDATORS`).
    pub const MinValidatorBond: Balance = 1_000 * UNIT;
}

impl pallet_validator_set::Config for Runtime {
    type Balance = Balance;
    type Staking = TrainerStaking;
    type SessionKeys = Session;
    type MinValidatorBond = MinValidatorBond;
    type MaxValidators = ConstU32<MAX_VALIDATORS>;
    type MaxCandidates = ConstU32<64>;
    type WeightInfo = pallet_validator_set::weights::SubstrateWeight<Runtime>;
    #[cfg(feature = "runtime-benchmarks")]
    type BenchmarkHelper = benchmark_helpers::Helper;
}

impl pallet_training_pools::Config for Runtime {
    type Currency = Balances;
    type RuntimeHoldReason = RuntimeHoldReason;
    type Staking = TrainerStaking;
    type OnTrainingStarted = Checkpoints;
    type OnMemberLeft = Checkpoints;
    type MaxMembers = ConstU32<MAX_POOL_MEMBERS>;
    type MaxPoolsPerTrainer = ConstU32<8>;
    type MaxPeerIdLen = ConstU32<64>;
    type MaxDatasetIdLen = ConstU32<64>;
    type MaxRounds = ConstU32<100_000>;
    type SpecLimits = PoolSpecLimits;
    type JuryDelay = JuryDelay;
    type VoteMargin = VoteMargin;
    type AppealPeriod = AppealPeriod;
    type MemberDeposit = MemberDeposit;
    type PoolDeposit = PoolDeposit;
    type RoundDeposit = RoundDeposit;
    /// 64 records (former members, round history) per `reap_pool` call: its declared weight
    /// stays under half the normal class (`configs::worst_case`), so a reap fits blocks that
    /// are already partly full.
    type ReapLimit = ConstU32<64>;
    type Records = (Rewards, (Checkpoints, Challenges));
    type WeightInfo = pallet_training_pools::weights::SubstrateWeight<Runtime>;
    #[cfg(feature = "runtime-benchmarks")]
    type BenchmarkHelper = benchmark_helpers::Helper;
}

impl pallet_checkpoints::Config for Runtime {
    type Balance = Balance;
    type Pools = TrainingPools;
    type OnRoundFinalized = Rewards;
    type Staking = TrainerStaking;
    type Challenges = Challenges;
    type InactivityLeak = InactivityLeak;
    type DropAfterMissed = ConstU32<3>;
    type MaxMembers = ConstU32<MAX_POOL_MEMBERS>;
    // A void of a 32-member round costs up to ~23 ms with ParityDB's reads and writes (leak
    // and drop of every participant, two expired kept snapshots deleted:
    // `on_initialize_void_dropping`; ~14 ms when the pool goes on to its next round:
    // `on_initialize_void`, release-node weights); 8 per block ≈ 186 ms of the 500 ms block,
    // ≈ 209 ms with the ends of the pools they close (charged apart).
    // Rounds beyond it are voided lazily (`void_expired_round`).
    type MaxDeadlinesPerBlock = ConstU32<8>;
    // 80 s: a trainer sees the agreed set one or two blocks after it is fixed (GRANDPA's lag),
    // fetches the payloads it lacks in the 60 s or so this leaves (it keeps fetching until 3
    // blocks before the deadline: `fetch_secs` of
    // `offchain-trainer/member/src/pool/member/agreed.rs`), aggregates and has its second
    // commit in a best block about a block later.
    type RecommitPeriod = ConstU32<40>;
    type WeightInfo = pallet_checkpoints::weights::SubstrateWeight<Runtime>;
    #[cfg(feature = "runtime-benchmarks")]
    type BenchmarkHelper = TrainingPools;
}

impl pallet_challenges::Config for Runtime {
    type Currency = Balances;
    type RuntimeHoldReason = RuntimeHoldReason;
    type Staking = TrainerStaking;
    type Pools = TrainingPools;
    type Checkpoints = Checkpoints;
    type Randomness = Randomness;
    type ChallengeBond = ChallengeBond;
    type JurySize = ConstU32<{ synod_primitives::protocol::COMMITTEE_SEATS }>;
    type AppealJurySize = ConstU32<{ synod_primitives::protocol::APPEAL_SEATS }>;
    type AppealBond = AppealBond;
    type SlashFraction = SlashFraction;
    type ChallengerShare = ChallengerShare;
    type JurorShare = JurorShare;
    type NoShowSlash = NoShowSlash;
    type MaxPoolMembers = ConstU32<MAX_POOL_MEMBERS>;
    // Benchmarked (`pallets/challenges/src/weights.rs`, dev-profile node): a draw over a full
    // pool's 32 contributors ≈ 0.6 ms, an expiry slashing a silent 32-juror committee ≈ 15.7 ms
    // of execution, each with its database reads and writes; each due item is charged both, and
    // a full schedule must leave the block's operational quarter (`worst_case.rs`: 12 due items
    // ≈ 70 % of the block). A challenge whose draw block (`JuryDelay` after it) or whose expiry
    // span within its timeline has no room is refused (`ScheduleFull`). A block's schedule holds up to
    // `pallet_challenges::MAX_SCHEDULED_PER_BLOCK` entries; only this many are scheduled into one.
    type MaxExpiriesPerBlock = ConstU32<12>;
    // Half a block's schedule per pool: fillers in the attacker's own pools deny another pool
    // a block only from two pools at once, and fillers in the victim's pool (judged by its
    // jurors) risk six bonds per block.
    type MaxExpiriesPerPool = ConstU32<6>;
    type MinJuryStake = MinJuryStake;
    type Slash = ToTreasury;
    type WeightInfo = pallet_challenges::weights::SubstrateWeight<Runtime>;
    #[cfg(feature = "runtime-benchmarks")]
    type BenchmarkHelper = benchmark_helpers::Helper;
}

impl pallet_rewards::Config for Runtime {
    type Balance = Balance;
    type Pools = TrainingPools;
    type Checkpoints = Checkpoints;
    type Challenges = Challenges;
    type OnRoundSettled = Checkpoints;
    // 16 settlements of 32 contributors each are charged ≈ 36 ms per block
    // (`on_initialize_settle(16, 32)`, dev-profile node); the rest settle lazily.
    type MaxSettlementsPerBlock = ConstU32<16>;
    type MaxContributors = ConstU32<MAX_POOL_MEMBERS>;
    type WeightInfo = pallet_rewards::weights::SubstrateWeight<Runtime>;
    #[cfg(feature = "runtime-benchmarks")]
    type BenchmarkHelper = benchmark_helpers::Helper;
}

#[cfg(feature = "runtime-benchmarks")]
mod benchmark_helpers {
    use super::*;
    use crate::RuntimeOrigin;
    use alloc::vec::Vec;
    use synod_primitives::PoolSetup;

    /// Bonds stake and builds pools with final rounds for the pallets' benchmarks.
    pub struct Helper;

    impl pallet_training_pools::benchmarking::BenchmarkHelper<AccountId, Balance> for Helper {
        fn bond(who: &AccountId, amount: Balance) {
            let amount = amount.max(MinBond::get());
            TrainerStaking::bond(RuntimeOrigin::signed(who.clone()), amount)
                .expect("benchmark account can bond");
        }
    }

    /// A pool of `members` whose round 1 every member committed with the same hash: final in
    /// the first block it accepts commits, which the chain is left at.
    fn final_round(members: u32) -> (u32, Vec<AccountId>) {
        let (pool, who) = TrainingPools::training_pool(members);
        let from = Checkpoints::commits_from(pool).expect("round 1 is open");
        frame_system::Pallet::<Runtime>::set_block_number(from);
        let all: Vec<u32> = (0..who.len() as u32).collect();
        for w in &who {
            let _ = Checkpoints::commit_checkpoint(
                RuntimeOrigin::signed(w.clone()),
                pool,
                1,
                [1; 32],
                frame_support::BoundedVec::truncate_from(all.clone()),
            );
        }
        (pool, who)
    }

    impl pallet_challenges::BenchmarkHelper<AccountId> for Helper {
        fn final_round(members: u32) -> (u32, Vec<AccountId>) {
            final_round(members)
        }

        fn voided_round(members: u32) -> (u32, Vec<AccountId>) {
            let (pool, who) = TrainingPools::training_pool(members);
            let deadline = Checkpoints::open_round(pool)
                .expect("round 1 is open")
                .deadline;
            frame_system::Pallet::<Runtime>::set_block_number(deadline);
            Checkpoints::void_expired_round(RuntimeOrigin::signed(who[0].clone()), pool)
                .expect("the deadline has passed");
            (pool, who)
        }

        fn bond(who: &AccountId, stake: u128) {
            TrainerStaking::bond(
                RuntimeOrigin::signed(who.clone()),
                stake.max(MinBond::get()),
            )
            .expect("benchmark account can bond");
        }

        fn set_snapshot_stakes(pool: u32, round: u32, stakes: &[u128]) {
            pallet_checkpoints::Snapshots::<Runtime>::mutate((pool, round), |s| {
                for (p, stake) in s.iter_mut().flatten().zip(stakes) {
                    p.stake = *stake;
                }
            });
        }
    }

    impl pallet_rewards::BenchmarkHelper<AccountId> for Helper {
        fn final_round(members: u32) -> (u32, Vec<AccountId>) {
            final_round(members)
        }
    }

    impl pallet_validator_set::benchmarking::BenchmarkHelper<AccountId, Balance> for Helper {
        /// Keys are written to `Session::NextKeys` directly (what `is_registered` reads): a
        /// benchmark cannot sign the ownership proof of `session.setKeys`.
        fn bond_with_keys(who: &AccountId, stake: Balance) {
            use frame_support::traits::fungible::Mutate;
            let raw: [u8; 32] = *who.as_ref();
            Balances::set_balance(who, stake.saturating_mul(2).saturating_add(UNIT));
            TrainerStaking::bond(RuntimeOrigin::signed(who.clone()), stake)
                .expect("benchmark account can bond");
            let keys = crate::SessionKeys {
                aura: sp_core::sr25519::Public::from_raw(raw).into(),
                grandpa: sp_core::ed25519::Public::from_raw(raw).into(),
            };
            pallet_session::NextKeys::<Runtime>::insert(who, keys);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Openings at which the authors of every block between a challenge's opening block and
    /// its seed block (`JuryDelay − 1` blocks) are adversarial, out of all (author order,
    /// opening slot) pairs of `n` authorities of which the `adversarial` bit set collude, for
    /// a draw `jury_delay` blocks after opening. The attacker's best strategy: it places its
    /// validators anywhere in the order (every subset is tried), opens at any of its slots and
    /// may skip its own slots (which only lets an honest author's block come sooner); honest
    /// authors author their slots. Then the seed is known at opening exactly when the
    /// `jury_delay − 1` slots after the opening slot are all adversarial.
    fn predictable_openings(n: u32, jury_delay: u32, max_adversarial: u32) -> (u64, u64) {
        let (mut predictable, mut all) = (0u64, 0u64);
        for adversarial in 0u32..(1 << n) {
            if adversarial.count_ones() > max_adversarial {
                continue;
            }
            let colludes = |slot: u32| adversarial & (1 << (slot % n)) != 0;
            for opening in (0..n).filter(|s| colludes(*s)) {
                all += 1;
                if (1..jury_delay).all(|k| colludes(opening + k)) {
                    predictable += 1;
                }
            }
        }
        (predictable, all)
    }

    /// The most blocks in a row after an opening block (authored by a colluder) that `k`
    /// colluders among `n` validators author when they may take any places in each session's
    /// author order (validators chill, bond and rejoin between sessions), sessions lasting
    /// `session_length` slots, the opening at any slot of its session; `cap` when their run
    /// never ends (a session no longer than their count). Honest validators author their slots,
    /// so the run ends at the first slot the colluders cannot hold: in a session, they hold at
    /// most `k` consecutive slots.
    fn longest_colluding_run(n: u32, k: u32, session_length: u32, cap: u32) -> u32 {
        let mut worst = 0;
        for opening in 0..session_length {
            // Slots held after the opening one, and the slots left in the current session.
            let (mut run, mut left, mut first) = (0u32, session_length - opening, true);
            loop {
                let held = k.min(left).min(n);
                run += if first { held.saturating_sub(1) } else { held };
                first = false;
                if held < left || run >= cap {
                    break;
                }
                left = session_length;
            }
            worst = worst.max(run.min(cap));
        }
        worst
    }

    /// The attack: the authors of the block that includes a challenge and of the block(s) after
    /// it share their VRF outputs (which depend on the parent's randomness and the slot only),
    /// so the opening block's author computes the seed, and with it the committee of every
    /// challenge it could include (the challenge id it gets behind fillers, its own jurors
    /// opted in or out in the same block), and includes an accusation of an honest member only
    /// when a committee convicts. A draw `JuryDelay` blocks after opening leaves no opening in
    /// which all the `JuryDelay − 1` blocks up to the seed are theirs: with a fixed set, for
    /// every order of the authorities and any number of colluders short of all; across
    /// session changes (the colluders re-placed in every session's order), for colluders
    /// under ⅓ of the set with the presets' session length.
    #[test]
    fn colluding_authors_of_the_opening_block_and_the_next_cannot_know_the_committee() {
        let delay = JuryDelay::get();
        let session = crate::genesis_config_presets::SESSION_LENGTH;
        let mut figures = Vec::new();
        for n in 1..=MAX_VALIDATORS {
            let (predictable, openings) = predictable_openings(n, delay, n - 1);
            assert_eq!(
                predictable, 0,
                "{n} validators: {predictable} of {openings} openings"
            );
            // The most colluders under ⅓ of the set, re-placed at every session change.
            let k = (n - 1) / 3;
            let run = longest_colluding_run(n, k, session, delay);
            assert!(
                run < delay - 1,
                "{n} validators, {k} colluders: {run} blocks in a row"
            );
            // A two-block delay, for comparison: colluders side by side know the seed.
            let (old, old_openings) = predictable_openings(n, 2, k);
            figures.push(format!(
                "{{\"validators\":{n},\"colluders\":{k},\"jury_delay\":{delay},\
                 \"predictable_openings\":{predictable},\"longest_run_across_sessions\":{run},\
                 \"predictable_share_with_jury_delay_2\":{:.4}}}",
                old as f64 / old_openings.max(1) as f64
            ));
        }
        // The model's own check: colluders as many as a session is long hold every slot.
        assert_eq!(longest_colluding_run(16, 10, 10, delay), delay);
        println!("[{}]", figures.join(","));
    }
}
