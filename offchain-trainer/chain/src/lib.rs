//! # synod-chain
//!
//! The trainer's view of the Synod chain, on [`subxt`]'s dynamic API: every storage read, call
//! and event is looked up by name in the metadata the node serves and type-checked against it
//! when encoded or decoded (no generated code, no metadata file to keep in sync). The storage
//! items it reads ([`items`]) and the calls it submits ([`calls`]) are each named once and
//! checked against the runtime's own metadata by unit tests.
//!
//! * [`Chain::connect`] — a client at a node's RPC (`ws://…`), retried while the node starts;
//! * reads at the **finalized** head ([`Chain::pool`], [`Chain::members`],
//!   [`Chain::final_checkpoint`], [`Chain::last_final`], [`Chain::claimable`], …): a trainer
//!   only acts on what GRANDPA has finalized (`docs/architecture.md`, "It trusts the chain's finality");
//! * [`Chain::follow`] — a subscription to finalized blocks that yields this crate's
//!   [`SynodEvent`]s (round opened / committed / final / voided, included set agreed, pool
//!   completed, rulings, rewards);
//! * [`Chain::submit`] — a signed extrinsic built once (fixed nonce, mortal era) and retried
//!   byte for byte, so a retry can never execute twice (see [`submit`]).
//!
//! Pallet and call names are those of `pallets/*` (`TrainerStaking.bond`,
//! `TrainingPools.join_pool`, `Checkpoints.commit_checkpoint`, `Rewards.claim_rewards`, …).
#![deny(missing_docs)]

pub mod calls;
pub mod client;
pub mod error;
pub mod events;
pub mod items;
pub mod storage;
pub mod submit;
pub mod types;
pub mod wait;

pub use client::{Chain, FinalizedBlock};
pub use error::ChainError;
pub use events::SynodEvent;
pub use submit::{Included, Signer};
pub use types::{
    AccountId, FinalCheckpoint, MemberInfo, PoolInfo, PoolSpec, PoolStatus, UnsupportedKind, UNIT,
};
