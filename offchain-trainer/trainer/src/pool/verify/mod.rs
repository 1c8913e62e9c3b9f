//! Verification (`docs/architecture.md`, step 7): what a member keeps of every round it took part in,
//! and the replay of another member's inner phase that verifiers and jurors run.
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
//!   ([`synod_diloco::verify`] holds the rules: distances, tolerances, sampling).
//! * [`vote`]: a juror's verdict on a disputed payload from its replay.
//! * [`forger`]: dishonest members (forged or skipped segments) for tests and benches.
//!
//! The duties built on them (sampling final rounds, opening challenges, voting as a juror)
//! run inside `synod-trainer run` (`member::duty`); `synod-trainer verify` is a one-off replay.

pub mod carried;
pub mod forger;
pub mod prefetch;
pub mod replay;
pub mod retained;
pub mod vote;

pub use replay::Replayer;
pub use retained::Retained;
