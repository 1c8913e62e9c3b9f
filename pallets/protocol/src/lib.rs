//! # synod-protocol: the round protocol, once
//!
//! Every rule of `docs/architecture.md`'s round walk-through that two parties must apply identically
//! lives here, as pure, deterministic functions over plain data: the pallets call them to decide
//! finality, contributors, rewards, jury draws and verdicts, and the trainer's chain follower
//! uses the same types and functions to predict what the chain will decide. Nothing here reads
//! storage, the clock or a random source: block numbers, stakes and randomness are inputs.
//!
//! | module | rule |
//! |---|---|
//! | [`round`] | one round's state machine: facts in, actions out (finalize, void, verify, close, settle); its phase at a block |
//! | [`timeline`] | when a round is voided, how long late commits and challenges stay open, when it settles, how long backing stake stays slashable |
//! | [`snapshot`] | the participant set of a round, frozen when it opens |
//! | [`quorum`] | the quorum threshold, rounded **up** |
//! | [`tally`] | counting commits of snapshot participants, the winner, the contributors |
//! | [`agreement`] | the one included set S* the chain fixes when honest members' sets split |
//! | [`rewards`] | splitting a round's reward over its contributors by stake |
//! | [`dispute`] | what a challenge disputes (the whole inner phase, the trace's encoding, one segment), and so what its jurors check |
//! | [`jury`] | the committee: its size from the ⅓-adversary bound, seats drawn with replacement ∝ stake, the majority-of-seats verdict |
//! | [`leak`] | the inactivity leak of members who commit nothing in voided rounds, or something other than the candidate a majority of the stake committed |
//! | [`limits`] | bounds both halves check on the same objects (trace length) |
//! | [`pool`] | a pool's lifecycle, its storage deposit and when it can be reaped |
//! | [`spec`] | bounds on every pool-spec field |
//! | [`evidence`] | the signed gossip messages of members and their ML-DSA-65 verification (challenge evidence) |
//! | [`peer`] | the proof that a joiner holds the libp2p (Ed25519) key its peer id names |
//!
//! Units: stakes and rewards in planck (`u128`), times in blocks (`u64`), quorum and shares in
//! parts per billion (`u32`, [`PPB`] = 100 %). All arithmetic is exact or saturating; no function
//! panics on any input.
#![cfg_attr(not(feature = "std"), no_std)]
#![deny(missing_docs)]

extern crate alloc;

pub mod agreement;
pub mod arith;
pub mod dispute;
pub mod evidence;
pub mod jury;
pub mod leak;
pub mod limits;
pub mod peer;
pub mod pool;
pub mod quorum;
pub mod rewards;
pub mod round;
pub mod snapshot;
pub mod spec;
pub mod tally;
pub mod timeline;

pub use arith::{mul_div_floor, PPB};
pub use dispute::Dispute;
pub use evidence::{verify_announcement, verify_equivocation, Announcement, EvidenceError};
pub use jury::{
	draw_committee, eligible_jurors, split_per_seat, JuryVotes, Seated, Verdict, APPEAL_SEATS,
	COMMITTEE_SEATS,
};
pub use leak::LeakRule;
pub use pool::{pool_deposit, PoolStatus};
pub use quorum::{quorum_threshold, reaches_quorum};
pub use rewards::split_by_stake;
pub use round::{Action, Fact, RoundPhase, RoundState, Status as RoundStatus};
pub use snapshot::{snapshot, MemberState, Participant};
pub use spec::{check_allowed_trainers, check_spec, KindView, SpecField, SpecLimits, SpecView};
pub use tally::{contributors, tally, winner, Tallied};
pub use timeline::{JuryTiming, Timeline, KEPT_VOIDED_SNAPSHOTS, MIN_APPEAL_PERIOD};

/// Identifier of a training pool, assigned in creation order from 0.
pub type PoolId = u32;
/// Outer round of a pool; the first round is 1.
pub type RoundIndex = u32;
/// A member's position in its pool, assigned at join in join order from 0, never reused;
/// trainers aggregate pseudo-gradients in this order.
pub type MemberIndex = u32;
/// A 32-byte blake3 digest (checkpoint file bytes, model config, dataset).
pub type Hash32 = [u8; 32];
/// Stake, reward or bond in planck.
pub type Planck = u128;
/// A block number (the runtime's `BlockNumber` widened to 64 bits).
pub type Block = u64;
