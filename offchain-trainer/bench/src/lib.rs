//! The `synod-trainer bench` benchmarks and the attack fixtures ([`forger`]: dishonest
//! Proof-of-Learning traces that the replay tests and `bench verify` play). Each benchmark prints one JSON object per line: figures and ratios against a baseline
//! measured in the same run, never pass/fail assertions.
//!
//! Each module is one benchmark, run by its `run` function with typed configuration (the
//! `synod-trainer` binary builds it from its command line): [`diloco`], [`sanity`],
//! [`throughput`], [`codec`], [`allreduce`], [`byzantine`], [`memory`], [`verify`].

pub mod allreduce;
pub mod byzantine;
pub mod codec;
pub mod diloco;
pub mod forger;
pub mod memory;
#[cfg(test)]
mod replay_tests;
pub mod sanity;
pub mod throughput;
pub mod verify;
