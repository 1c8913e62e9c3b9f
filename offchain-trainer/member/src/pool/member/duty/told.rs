//! What the member's chain subscription told the duty worker of the pool's rounds (the
//! actions of the protocol's round state machine, `follow.rs`), and when the worker reads a
//! round from the chain instead: at once for a round told final, never for one told voided,
//! every [`FALLBACK_BLOCKS`] blocks for one told nothing while the subscription runs, at every
//! pass once it has ended or missed blocks.

use std::collections::BTreeMap;

use synod_protocol::Action;

use super::RetryAt;
use crate::pool::member::watch::FALLBACK_BLOCKS;

/// Rounds whose latest [`Action`] is remembered (the latest ones).
const TOLD_KEPT: usize = 256;

/// The subscription's news of the pool's rounds, as the duty worker keeps it.
#[derive(Debug)]
pub(super) struct Told {
    /// The latest action told of each round (the latest [`TOLD_KEPT`] rounds).
    latest: BTreeMap<u32, Action>,
    /// Whether the subscription still tells the worker of the pool's rounds: not once it has
    /// ended, or the worker is finishing (it reads no more messages).
    following: bool,
    /// Finalized block before which a kept round that was open at its last read is not read
    /// again, unless the subscription tells its finality first.
    unseen_not_before: RetryAt<u32>,
}

impl Default for Told {
    fn default() -> Self {
        Self {
            latest: BTreeMap::new(),
            following: true,
            unseen_not_before: RetryAt::default(),
        }
    }
}

impl Told {
    /// `action` is due in `round`.
    pub fn told(&mut self, round: u32, action: Action) {
        if matches!(action, Action::Verify { .. }) {
            // Final now: read at the next pass, whenever the read that found it open said to
            // look again.
            self.unseen_not_before.clear(&round);
        }
        self.latest.insert(round, action);
        while self.latest.len() > TOLD_KEPT {
            self.latest.pop_first();
        }
    }

    /// The subscription missed blocks (it reconnected): a round read as open may have become
    /// final in them, so every round is read at the next pass.
    pub fn resync(&mut self) {
        self.unseen_not_before = RetryAt::default();
    }

    /// The subscription has ended, or the worker reads no more of it: from now on every round
    /// is read from the chain at every pass, whatever was told.
    pub fn unfollowed(&mut self) {
        self.following = false;
        self.latest.clear();
        self.unseen_not_before = RetryAt::default();
    }

    /// The latest action told of `round`.
    pub fn latest(&self, round: u32) -> Option<Action> {
        self.latest.get(&round).copied()
    }

    /// Whether kept round `round` is read from the chain at finalized block `now`: not while a
    /// read found it open fewer than [`FALLBACK_BLOCKS`] blocks ago and nothing was told since.
    pub fn read_due(&self, round: u32, now: u64) -> bool {
        !self.unseen_not_before.waits(&round, now)
    }

    /// A read at finalized block `now` found `round` neither final nor voided: while the
    /// subscription runs and has told nothing of it, it is read again [`FALLBACK_BLOCKS`]
    /// later (or as soon as its finality is told).
    pub fn found_open(&mut self, round: u32, now: u64) {
        if self.following && !self.latest.contains_key(&round) {
            self.unseen_not_before.after(round, now, FALLBACK_BLOCKS);
        } else {
            self.unseen_not_before.clear(&round);
        }
    }

    /// `round` is done with (verified, voided or forgotten).
    pub fn done(&mut self, round: u32) {
        self.unseen_not_before.clear(&round);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// While the subscription runs, a round it told nothing of is read every
    /// [`FALLBACK_BLOCKS`] blocks, and at once when its finality is told or blocks were missed.
    #[test]
    fn a_round_told_nothing_is_read_every_few_blocks_and_at_once_when_told_final() {
        let mut t = Told::default();
        assert!(t.read_due(1, 100));
        t.found_open(1, 100);
        assert!(!t.read_due(1, 101));
        assert!(!t.read_due(1, 100 + FALLBACK_BLOCKS - 1));
        assert!(t.read_due(1, 100 + FALLBACK_BLOCKS));
        t.found_open(1, 104);
        t.told(1, Action::Verify { until: 120 });
        assert!(t.read_due(1, 105), "told final: read at once");
        assert_eq!(t.latest(1), Some(Action::Verify { until: 120 }));
        t.found_open(2, 105);
        assert!(!t.read_due(2, 106));
        t.resync();
        assert!(t.read_due(2, 106), "blocks missed: read at once");
    }

    /// Once the subscription has ended (or the worker finishes), nothing told is trusted and
    /// every round is read at every pass.
    #[test]
    fn after_the_subscription_ends_every_round_is_read_at_every_pass() {
        let mut t = Told::default();
        t.told(1, Action::Verify { until: 120 });
        t.found_open(2, 100);
        t.unfollowed();
        assert_eq!(t.latest(1), None);
        assert!(t.read_due(2, 100));
        t.found_open(2, 101);
        assert!(t.read_due(2, 102));
    }

    /// Only the latest rounds are remembered: an old one falls back to the chain.
    #[test]
    fn only_the_latest_rounds_are_remembered() {
        let mut t = Told::default();
        for round in 0..TOLD_KEPT as u32 + 5 {
            t.told(round, Action::Settle);
        }
        assert_eq!(t.latest(4), None);
        assert_eq!(t.latest(5), Some(Action::Settle));
    }
}
