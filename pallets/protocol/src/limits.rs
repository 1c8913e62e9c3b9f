//! Bounds both halves check on the same objects: how long a recipe's Proof-of-Learning trace
//! may be. (The ML-DSA-65 key and signature lengths are in [`crate::evidence`].)

/// Most segments a recipe may cut an inner phase into (one-step segments up to H = 4096 inner
/// steps); a member records its full state at every segment boundary (Jia et al. 2021,
/// "Proof-of-Learning", §4.2).
pub const MAX_TRACE_SEGMENTS: u32 = 4096;

/// Most boundary hashes one trace holds: one per segment boundary, start and end included
/// ([`MAX_TRACE_SEGMENTS`] + 1).
pub const MAX_TRACE_HASHES: usize = MAX_TRACE_SEGMENTS as usize + 1;
