//! What a pool's terms must leave time for (`docs/architecture.md`, "Verification"): the
//! challenge window must cover one verifier's checks of a final round, and the round timeout
//! a member's inner phase, its exchange and the duties that share its compute. Pure arithmetic
//! over a measured (or stated) cost per inner step; the trainer measures it
//! (`synod-trainer pool create` and `run`) and refuses terms that these bounds say cannot be
//! met.
//!
//! The worst case is the adversary's best play: concentrating stake pushes every verifier's
//! sample rate ([`crate::verify::honest_verifiers_at_least`]) towards 1, so a verifier may
//! have to check every other included payload of a round; seats that withhold their trace
//! states (which costs them nothing) turn each of those checks into a whole replay. Until
//! the challenge is included, a lazy member whose check does not fit is paid like an honest
//! one.

/// Blocks of a challenge window a verifier cannot use: the member learns the round's
/// finality block `F` once GRANDPA finalizes it (one or two blocks later), and its challenge
/// is included one block after it is submitted.
pub const LAG_BLOCKS: u64 = 3;

/// Factor `pool create` applies to its own measurement: 2 for duties that share a member's
/// cores with its inner phase, × 1.5 for members slower than the creator's machine. A member
/// checks its own (idle) measurement without it.
pub const CREATOR_MARGIN: f64 = 3.0;

/// What one verifier replays and fetches, at worst, to find and prove a lazy contribution
/// of one final round.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VerifyLoad {
    /// Inner steps H per round.
    pub inner_steps: u32,
    /// Inner steps per Proof-of-Learning segment, `⌈H / S⌉` ([`crate::verify::segment_len`]).
    pub segment_len: u32,
    /// Segments replayed per checked contribution (the member's `verify_segments`).
    pub verify_segments: u32,
    /// Contributions the verifier checks per round (other included members it samples).
    pub contributions: u32,
    /// The recipe's trace segments S (at most S states per check are fetched).
    pub trace_segments: u32,
    /// Largest trace state, in bytes ([`crate::trace::max_state_bytes`]).
    pub state_bytes: u64,
    /// Error-feedback residual bytes fetched per check (two residuals of
    /// [`crate::residual::max_residual_bytes`] in a sparse pool, 0 in a dense one).
    pub residual_bytes: u64,
}

impl VerifyLoad {
    /// Inner steps replayed: every checked contribution's sampled segments (at most a whole
    /// phase), then the whole phase, as the verifier does when a segment check fails or the
    /// states are not served.
    pub fn replayed_steps(&self) -> u64 {
        let per_check = u64::from(self.verify_segments)
            .saturating_mul(u64::from(self.segment_len.max(1)))
            .min(u64::from(self.inner_steps));
        u64::from(self.contributions)
            .saturating_mul(per_check.saturating_add(u64::from(self.inner_steps)))
    }

    /// Bytes fetched: per checked contribution, the end state and both boundaries of each
    /// sampled segment (`2 · verify_segments + 1` states, at most S), and its residuals.
    pub fn fetched_bytes(&self) -> u64 {
        let states =
            (2 * u64::from(self.verify_segments) + 1).min(u64::from(self.trace_segments.max(1)));
        u64::from(self.contributions).saturating_mul(
            states
                .saturating_mul(self.state_bytes)
                .saturating_add(self.residual_bytes),
        )
    }

    /// Seconds the checks take at `step_secs` per inner step and `bytes_per_sec` of download.
    pub fn secs(&self, step_secs: f64, bytes_per_sec: f64) -> f64 {
        self.replayed_steps() as f64 * step_secs + self.fetched_bytes() as f64 / bytes_per_sec
    }
}

/// Contributions one verifier checks per round, at worst, in a pool of at most `members`:
/// for an explicit `rate` (the member's `verify_rate`, each other member sampled independently) the
/// mean plus three standard deviations of Binomial(members − 1, rate), rounded up and at most
/// every other member; every other member without one (the adversary can push the
/// stake-derived rate to 1 by concentrating stake).
pub fn checked_contributions(members: u32, rate: Option<f64>) -> u32 {
    let others = members.saturating_sub(1);
    match rate {
        Some(r) if r.is_finite() => {
            let (n, r) = (f64::from(others), r.clamp(0.0, 1.0));
            let high = n * r + 3.0 * (n * r * (1.0 - r)).sqrt();
            (high.ceil() as u32).min(others)
        }
        _ => others,
    }
}

/// The smallest challenge window W (blocks) in which checks of `verify_secs` still
/// challenge: checks start at finality and challenges are accepted until 2W blocks after it,
/// of which [`LAG_BLOCKS`] pass before a verifier can act, so `(2W − LAG_BLOCKS) · block_secs ≥
/// verify_secs`. Challenges open only after the W blocks of late commits, so W is at least
/// `LAG_BLOCKS + 1`: a verifier that sees the opening block late still lands its challenge
/// before the window closes.
pub fn min_challenge_window(verify_secs: f64, block_secs: f64) -> u32 {
    let blocks = ((verify_secs.max(0.0) / block_secs).ceil() as u64).saturating_add(LAG_BLOCKS);
    let least = LAG_BLOCKS.saturating_add(1);
    u32::try_from(blocks.div_ceil(2).max(least)).unwrap_or(u32::MAX)
}

/// Seconds a challenge window of `window` blocks leaves a verifier (`(2W − LAG_BLOCKS) ·
/// block_secs`, 0 if negative).
pub fn challenge_secs(window: u32, block_secs: f64) -> f64 {
    (2 * u64::from(window)).saturating_sub(LAG_BLOCKS) as f64 * block_secs
}

/// The smallest round timeout (blocks) a member meets: its inner phase (`phase_secs`), the
/// duties that share its compute (`verify_secs`), the exchange (`exchange_secs`), and no
/// sooner than the round accepts commits (`min_round_length` blocks after it opens:
/// `PoolTerms::min_round_length`), then its commit's inclusion ([`LAG_BLOCKS`]).
pub fn min_round_timeout(
    phase_secs: f64,
    verify_secs: f64,
    exchange_secs: f64,
    block_secs: f64,
    min_round_length: u32,
) -> u32 {
    let secs = (phase_secs + verify_secs + exchange_secs).max(0.0);
    let ready = ((secs / block_secs).ceil() as u64).max(u64::from(min_round_length));
    u32::try_from(ready.saturating_add(LAG_BLOCKS)).unwrap_or(u32::MAX)
}

/// How much faster than the creator's measurement the fastest honest member may be, for
/// [`min_round_length`]: a member that fast, starting its inner phase when the round opens,
/// finishes it no sooner than the round accepts commits.
pub const FASTEST_MEMBER_SPEEDUP: f64 = 4.0;

/// The default minimum round length (blocks; `PoolTerms::min_round_length`): the inner phase
/// (`phase_secs`, as measured by the creator) run [`FASTEST_MEMBER_SPEEDUP`] times faster,
/// whole blocks only (floor), at least `chain_floor` (the chain's `⌈inner_steps /
/// SpecLimits::max_inner_steps_per_block⌉`) and at most half of `round_timeout` (the chain's
/// bound) when the floor allows.
/// A squatter holding a pool's quorum alone then finalizes no faster than members four times
/// faster than the creator's machine could train.
pub fn min_round_length(
    phase_secs: f64,
    block_secs: f64,
    chain_floor: u32,
    round_timeout: u32,
) -> u32 {
    let blocks = (phase_secs.max(0.0) / FASTEST_MEMBER_SPEEDUP / block_secs).floor();
    let blocks = if blocks.is_finite() {
        blocks as u32
    } else {
        u32::MAX
    };
    blocks.min(round_timeout / 2).max(chain_floor)
}

/// Seconds a member spends exchanging one round: sending its payload to, and receiving one
/// from, each of the other `members − 1` (`payload_bytes` each way, full duplex) at
/// `bytes_per_sec`.
pub fn exchange_secs(members: u32, payload_bytes: u64, bytes_per_sec: f64) -> f64 {
    f64::from(members.saturating_sub(1)) * payload_bytes as f64 / bytes_per_sec
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(contributions: u32) -> VerifyLoad {
        VerifyLoad {
            inner_steps: 400,
            segment_len: 25,
            verify_segments: 2,
            contributions,
            trace_segments: 16,
            state_bytes: 0,
            residual_bytes: 0,
        }
    }

    #[test]
    fn a_verifier_may_replay_every_sampled_contribution_whole() {
        // Each check: 2 segments of 25 steps, then the whole phase (states withheld).
        assert_eq!(load(3).replayed_steps(), 3 * (50 + 400));
        // Segments past the phase are one whole phase, not more.
        let all = VerifyLoad {
            verify_segments: 100,
            ..load(2)
        };
        assert_eq!(all.replayed_steps(), 2 * (400 + 400));
        let fetched = VerifyLoad {
            state_bytes: 1000,
            residual_bytes: 7,
            ..load(3)
        };
        assert_eq!(fetched.fetched_bytes(), 3 * (5 * 1000 + 7));
        assert!((fetched.secs(0.01, 1000.0) - (13.5 + 15.021)).abs() < 1e-9);
        // No more states than the trace has.
        let short = VerifyLoad {
            trace_segments: 2,
            state_bytes: 1000,
            ..load(1)
        };
        assert_eq!(short.fetched_bytes(), 2000);
    }

    #[test]
    fn concentrated_stake_is_priced_as_every_other_member_checked() {
        // No explicit rate: the adversary can push the stake-derived rate to 1.
        assert_eq!(checked_contributions(8, None), 7);
        assert_eq!(checked_contributions(8, Some(f64::NAN)), 7);
        // An explicit rate: independent draws, priced at mean + 3σ.
        assert_eq!(checked_contributions(8, Some(0.5)), 7);
        assert_eq!(checked_contributions(101, Some(0.1)), 19);
        assert_eq!(checked_contributions(8, Some(2.0)), 7);
        assert_eq!(checked_contributions(8, Some(0.0)), 0);
        assert_eq!(checked_contributions(1, None), 0);
    }

    #[test]
    fn the_window_covers_the_checks_after_the_lag_and_no_more() {
        // 28 s of checks with 2-second blocks: 14 blocks after the 3 of lag.
        let w = min_challenge_window(28.0, 2.0);
        assert_eq!(w, 9);
        assert!(challenge_secs(w, 2.0) >= 28.0);
        assert!(challenge_secs(w - 1, 2.0) < 28.0);
        // Instant checks still need the lag, and challenges open after W blocks of late
        // commits: four blocks of window.
        assert_eq!(min_challenge_window(0.0, 2.0), 4);
        assert_eq!(challenge_secs(2, 2.0), 2.0);
        assert_eq!(challenge_secs(1, 2.0), 0.0);
        assert_eq!(challenge_secs(0, 2.0), 0.0);
        // Nothing overflows.
        assert_eq!(min_challenge_window(f64::MAX, 1e-9), u32::MAX);
    }

    #[test]
    fn the_minimum_round_length_is_a_quarter_of_the_measured_phase_within_the_chains_bounds() {
        // 40 s of inner phase at 2 s blocks: 20 blocks, 5 for a member 4× faster.
        assert_eq!(min_round_length(40.0, 2.0, 0, 60), 5);
        assert_eq!(
            min_round_length(1.0, 2.0, 0, 60),
            0,
            "a phase shorter than a block"
        );
        assert_eq!(min_round_length(1.0, 2.0, 3, 60), 3, "the chain's floor");
        assert_eq!(
            min_round_length(4_000.0, 2.0, 0, 60),
            30,
            "half a round to commit in"
        );
        assert_eq!(min_round_length(f64::INFINITY, 2.0, 0, 60), 30);
    }

    #[test]
    fn the_round_timeout_covers_phase_duties_exchange_and_inclusion() {
        assert_eq!(min_round_timeout(20.0, 28.0, 2.0, 2.0, 0), 25 + 3);
        assert_eq!(min_round_timeout(0.0, 0.0, 0.0, 2.0, 0), 3);
        // A round that accepts commits only after 40 blocks: the member waits for it.
        assert_eq!(min_round_timeout(20.0, 28.0, 2.0, 2.0, 40), 40 + 3);
        assert_eq!(min_round_timeout(20.0, 28.0, 2.0, 2.0, 25), 25 + 3);
        assert!((exchange_secs(4, 1_000_000, 1e6) - 3.0).abs() < 1e-12);
        assert_eq!(exchange_secs(1, 1_000_000, 1e6), 0.0);
    }
}
