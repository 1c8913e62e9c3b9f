//! The member's one chain subscription (`Chain::follow`) and the pool's rounds as it sees them:
//! one
//! [`synod_protocol::RoundState`] per round, stepped with the facts each finalized block
//! carries (the round's opening, finality or void, from the typed events of `Chain::follow`,
//! and the block itself), on the pool's own [`Timeline`] (`synod_chain::Chain::timeline`).
//! The chain runs the same machine (`pallet-checkpoints`), so the member reaches each phase of
//! a round at the block the chain does, and acts on the [`Action`]s it returns: the duty
//! worker verifies a round when it is told `Verify` and lets a voided round go at `Void`
//! ([`super::duty`]).
//!
//! The subscription skips the blocks finalized while it reconnects: a round that was open
//! before such a gap is forgotten (its finality or void may be in the gap, and its deadline
//! must not void it here) and left to the chain's storage; the gap is news for the driver's
//! waits, and the duty worker reads at once the rounds it was told nothing of
//! ([`DutyMsg::Resync`]). A round whose opening names another deadline than the member's
//! timeline gives (a timeline read before a runtime upgrade) is not followed either.

use std::collections::BTreeMap;

use synod_chain::{ChainError, FinalizedBlock, SynodEvent};
use synod_protocol::{Action, Fact, RoundState, Timeline};

use super::appeal::{AppealChain, Appealer};
use super::duty::DutyMsg;
use crate::prometheus::Exporter;

/// Follows the chain's finalized blocks (`rx`, from `Chain::follow`) until the subscription
/// ends: steps the pool's rounds with each block (`rounds`, [`PoolRounds::block`]) and tells
/// the duty worker (`duties`) the actions due, then the block; updates what the driver's waits
/// watch (`ticks`: the block, and whether it was news for a round, [`is_news`] or an action
/// due) and the exporter's finalized height; logs the pool's events; and hands each
/// `Challenges.Ruled` event to `appealer` on a task of its own (an appeal waits for neither the
/// duty worker nor the next block).
pub(super) async fn follow_chain<C: AppealChain>(
    mut rx: tokio::sync::mpsc::Receiver<Result<FinalizedBlock, ChainError>>,
    mut rounds: PoolRounds,
    ticks: tokio::sync::watch::Sender<super::watch::Tick>,
    exporter: Option<Exporter>,
    duties: std::sync::mpsc::Sender<DutyMsg>,
    appealer: Appealer<C>,
) {
    let pool = rounds.pool;
    // From the end of this loop (or of this task, however it ends) the worker reads the chain
    // for every round.
    let _unfollowed = Unfollowed(duties.clone());
    while let Some(b) = rx.recv().await {
        let b = match b {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!("finalized-block subscription ended: {e}");
                break;
            }
        };
        if let Some(x) = &exporter {
            x.set_finalized_height(b.number);
        }
        let step = rounds.block(b.number, &b.events);
        let news = step.resynced
            || !step.actions.is_empty()
            || rounds.awaits_void()
            || b.events.iter().any(|e| is_news(e, pool));
        ticks.send_modify(|t| {
            t.finalized = t.finalized.max(b.number);
            if news {
                t.news_at = t.news_at.max(b.number);
            }
        });
        for e in &b.events {
            if let SynodEvent::Ruled { challenge, .. } = e {
                let (appealer, challenge, block) = (appealer.clone(), *challenge, b.number);
                tokio::spawn(async move { appealer.on_ruled(challenge, block).await });
            }
            if e.pool() == Some(pool) {
                tracing::info!(block = b.number, "chain: {e:?}");
            }
        }
        // The worker is gone once the member stops: nothing left to tell.
        if step.resynced {
            tracing::info!(block = b.number, "chain: blocks missed; rounds read again");
            let _ = duties.send(DutyMsg::Resync);
        }
        for (round, action) in step.actions {
            tracing::debug!(block = b.number, round, "round: {action:?}");
            let _ = duties.send(DutyMsg::Round(round, action));
        }
        let _ = duties.send(DutyMsg::Finalized);
    }
}

/// Tells the duty worker, when dropped, that the subscription has ended
/// ([`DutyMsg::Unfollowed`]).
struct Unfollowed(std::sync::mpsc::Sender<DutyMsg>);

impl Drop for Unfollowed {
    fn drop(&mut self) {
        let _ = self.0.send(DutyMsg::Unfollowed);
    }
}

/// Whether `e` changes where a round of `pool` stands, what the driver's waits look for
/// ([`super::watch`]): a round opened, final or voided, an included set fixed, the pool
/// completed. A member's commit or a claim is not news: a wait is not woken at every member's
/// commit.
fn is_news(e: &SynodEvent, pool: u32) -> bool {
    e.pool() == Some(pool)
        && matches!(
            e,
            SynodEvent::RoundOpened { .. }
                | SynodEvent::CheckpointFinalized { .. }
                | SynodEvent::RoundVoided { .. }
                | SynodEvent::IncludedSetAgreed { .. }
                | SynodEvent::PoolCompleted { .. }
        )
}

/// Rounds over (settled or voided) that are still remembered, the latest ones: a late
/// question about one of them is answered without the chain; older ones are forgotten, so the
/// memory does not grow with the pool's rounds.
const KEPT_OVER: usize = 64;

/// Blocks after the deadline of a round this machine voided during which every block is
/// news until the chain's `RoundVoided` comes ([`PoolRounds::awaits_void`]): longer than the
/// chain's void may come late (its deadline queue spills over up to
/// `Checkpoints.MaxDeadlinesPerBlock` = 8 blocks) plus a member's slack before it voids the
/// round itself (`member index mod 4` blocks, `settle.rs`).
const VOID_WATCH: u64 = 32;

/// What one finalized block made due ([`PoolRounds::block`]).
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Followed {
    /// The actions due, as `(round, action)`, in the order they came.
    pub actions: Vec<(u32, Action)>,
    /// Blocks were missed before this one: the rounds that were open are forgotten.
    pub resynced: bool,
}

/// What the member's subscription knows of its pool's rounds.
pub(super) struct PoolRounds {
    pool: u32,
    timeline: Timeline,
    rounds: BTreeMap<u32, RoundState>,
    /// Rounds this machine voided at their deadline whose `RoundVoided` has not come: round →
    /// the deadline block (kept [`VOID_WATCH`] blocks).
    unconfirmed_voids: BTreeMap<u32, u64>,
    /// The last block seen (a later one that does not follow it means blocks were missed).
    last: Option<u64>,
}

impl PoolRounds {
    /// No round seen yet, in pool `pool` with `timeline`.
    pub fn new(pool: u32, timeline: Timeline) -> Self {
        Self {
            pool,
            timeline,
            rounds: BTreeMap::new(),
            unconfirmed_voids: BTreeMap::new(),
            last: None,
        }
    }

    /// Whether a round this machine voided at its deadline still waits for the chain's
    /// `RoundVoided` (for at most [`VOID_WATCH`] blocks): a void the chain's queue had no room
    /// for is left to the members (`void_expired_round`), which look at every block meanwhile,
    /// each after its own slack, so that their calls do not all race in one block.
    pub fn awaits_void(&self) -> bool {
        !self.unconfirmed_voids.is_empty()
    }

    /// Steps the pool's rounds with finalized block `number` and its `events`: first each event
    /// of the pool's rounds (`RoundOpened`, `CheckpointFinalized`, `RoundVoided`, in the
    /// block's order), then the block itself for every round not over. Returns the actions made
    /// due, as `(round, action)` in that order: each action of a round comes once, except that
    /// a round forgotten after missed blocks ([`Followed::resynced`]) starts again from what
    /// comes next. A round first seen final (the subscription started after its opening)
    /// starts there; a round whose opening names a deadline other than this timeline's is not
    /// followed (its actions would come at the wrong blocks); events of other pools change
    /// nothing.
    pub fn block(&mut self, number: u64, events: &[SynodEvent]) -> Followed {
        let resynced = self.last.is_some_and(|l| number > l.saturating_add(1));
        if resynced {
            self.missed_blocks();
        }
        self.last = Some(number);
        let mut actions = Vec::new();
        for e in events {
            let (round, fact) = match *e {
                SynodEvent::RoundOpened {
                    pool,
                    round,
                    deadline,
                } if pool == self.pool => {
                    if u64::from(deadline) != self.timeline.deadline(number) {
                        tracing::error!(
                            round,
                            deadline,
                            ours = self.timeline.deadline(number),
                            "the chain's deadline differs from the member's timeline: the \
                             round is left to the chain's storage"
                        );
                        continue;
                    }
                    // The member never weighs support (the chain decides finality), so the
                    // snapshot's stake is not needed.
                    (
                        round,
                        Fact::Opened {
                            at: number,
                            round_stake: 0,
                        },
                    )
                }
                SynodEvent::CheckpointFinalized { pool, round, hash } if pool == self.pool => {
                    (round, Fact::Finalized { at: number, hash })
                }
                SynodEvent::RoundVoided { pool, round } if pool == self.pool => {
                    self.unconfirmed_voids.remove(&round);
                    (round, Fact::Voided { at: number })
                }
                _ => continue,
            };
            let state = self
                .rounds
                .entry(round)
                .or_insert_with(|| RoundState::new(self.timeline, 0));
            actions.extend(state.step(fact).into_iter().map(|a| (round, a)));
        }
        for (round, state) in &mut self.rounds {
            if !state.is_over() {
                for a in state.step(Fact::Block(number)) {
                    if a == Action::Void {
                        self.unconfirmed_voids.insert(*round, number);
                    }
                    actions.push((*round, a));
                }
            }
        }
        self.unconfirmed_voids
            .retain(|_, at| number < at.saturating_add(VOID_WATCH));
        self.forget_old();
        Followed { actions, resynced }
    }

    /// Forgets every round not final or voided: blocks were missed (the subscription
    /// reconnected), which may have carried its finality or void. Final rounds are kept: their
    /// milestones follow from the block number alone.
    fn missed_blocks(&mut self) {
        self.rounds.retain(|_, s| {
            matches!(
                s.status(),
                synod_protocol::RoundStatus::Final { .. }
                    | synod_protocol::RoundStatus::Voided { .. }
            )
        });
    }

    /// The state of `round`, if the subscription saw it open, final or voided (and it is not
    /// one of the forgotten rounds).
    #[cfg(test)]
    pub fn get(&self, round: u32) -> Option<&RoundState> {
        self.rounds.get(&round)
    }

    /// Forgets the oldest rounds that are over beyond the latest [`KEPT_OVER`].
    fn forget_old(&mut self) {
        let over: Vec<u32> = self
            .rounds
            .iter()
            .filter(|(_, s)| s.is_over())
            .map(|(r, _)| *r)
            .collect();
        for r in over.iter().take(over.len().saturating_sub(KEPT_OVER)) {
            self.rounds.remove(r);
        }
    }
}

#[cfg(test)]
mod tests;
