//! The pallets benchmarked by `synod-node benchmark pallet` (feature `runtime-benchmarks`).

frame_benchmarking::define_benchmarks!(
    [frame_benchmarking, BaselineBench::<Runtime>]
    [frame_system, SystemBench::<Runtime>]
    [pallet_balances, Balances]
    [pallet_timestamp, Timestamp]
    [pallet_sudo, Sudo]
    [pallet_trainer_staking, TrainerStaking]
    [pallet_training_pools, TrainingPools]
    [pallet_checkpoints, Checkpoints]
    [pallet_challenges, Challenges]
    [pallet_rewards, Rewards]
    [pallet_validator_set, ValidatorSet]
    [pallet_randomness, Randomness]
);
