//! Verification (`docs/architecture.md`, step 7): checking that a pool member did the inner
//! phase its signed payload claims. A verifier replays the member's inner phase from the
//! checkpoint the round started from, either by the sampled segments of the Proof-of-Learning
//! trace the payload commits to (each drawn segment replayed from its start state and compared
//! with its end state) or whole, and measures the distance between the replayed and the claimed
//! pseudo-gradient (with the sparse codec, also between the error-feedback residuals);
//! outside the protocol's tolerance the member is challenged, and each juror votes on the
//! challenge from its own whole replay. This crate also holds what a member keeps of every
//! round it took part in, for its verifiers and jurors.
//!
//! * [`retained`]: the payloads and signed announcements of a round's included set, and our own
//!   Proof-of-Learning trace states, on disk
//!   under `<base>/evidence/` until the round can no longer be challenged.
//! * [`carried`]: which error-feedback residual a sparse payload must carry in (the rule
//!   member and verifier share).
//! * [`prefetch`]: fetches the trace states a round's segment checks need, every accused side
//!   by side under one deadline.
//! * [`replay`]: checks a member's Proof-of-Learning trace by sampled segments, or re-runs its
//!   whole inner phase from θ_{r−1}, and measures the distance to its signed payload
//!   ([`synod_diloco::verify`] holds the rules: distances, tolerances, sampling). What it needs
//!   of the pool's recipe comes through [`ReplayRecipe`], and of the inner trainer through
//!   [`synod_diloco::SegmentReplay`]: this crate does not link libtorch (the trainer's tch
//!   replica implements it in `synod-model`; `tests/segment_replay.rs` checks a toy model).
//! * [`vote`]: a juror's verdict on a disputed payload from its replay.
//!
//! Dishonest members (forged or skipped segments) for tests and benches live in the trainer
//! (`offchain-trainer/bench/src/forger.rs`), and so do the replay tests that need its
//! recipe and corpus (`offchain-trainer/bench/src/replay_tests.rs`). The duties built on
//! this crate (sampling final rounds, opening challenges, voting as a juror) run inside
//! `synod-trainer run` (`offchain-trainer/member/src/pool/member/duty/`); `synod-trainer
//! verify` is a one-off replay.

#![deny(missing_docs)]

pub mod carried;
pub mod prefetch;
pub mod replay;
pub mod retained;
pub mod vote;

pub use replay::{ReplayInput, ReplayRecipe, Replayer};
pub use retained::{Checker, Retained};
