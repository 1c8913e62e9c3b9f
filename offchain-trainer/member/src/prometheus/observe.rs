//! The event-to-metric update logic: [`Exporter::observe`] maps each [`TrainerEvent`] of the
//! JSON lines onto the metrics, with its helpers for bounded label and finite values.

use crate::event::TrainerEvent;

use super::Exporter;

impl Exporter {
    /// Updates the metrics from one event; events with no metric are ignored.
    pub fn observe(&self, e: &TrainerEvent) {
        match e {
            TrainerEvent::Joined { pool, stake, .. } => {
                self.pool.set(u64::from(*pool));
                // Planck as a decimal string (u128).
                if let Ok(p) = stake.parse::<u128>() {
                    self.stake.set(p as f64 / 1e12);
                }
            }
            TrainerEvent::Exchange {
                bytes_received,
                peers_connected,
                ..
            } => {
                self.peers.set(*peers_connected);
                self.received_bytes.inc_by(*bytes_received);
            }
            TrainerEvent::Commit { outcome, .. } => {
                self.commits.with_label_values(&[outcome.as_str()]).inc();
            }
            TrainerEvent::Round {
                round,
                tokens,
                val_loss,
                train_loss,
                bytes_sent_per_worker,
                included,
                compute_secs,
                outer_secs,
                exchange_secs,
                wall_secs,
                compute_utilisation,
                excluded,
                ..
            } => {
                self.round.set(u64::from(*round));
                self.inner_loss.set(finite(*train_loss));
                self.validation_loss.set(finite(*val_loss));
                self.tokens.set(*tokens);
                self.inner_seconds.inc_by(finite(*compute_secs));
                self.exchange_seconds.inc_by(finite(*exchange_secs));
                self.outer_seconds.inc_by(finite(*outer_secs));
                // The record's own share of its wall-clock round (chain waits included).
                if finite(*wall_secs) > 0.0 {
                    self.compute_utilisation.set(finite(*compute_utilisation));
                }
                self.payload_bytes.inc_by(*bytes_sent_per_worker);
                self.included.set(included.len() as u64);
                for (_, why) in excluded {
                    self.excluded.with_label_values(&[reason(why)]).inc();
                }
            }
            TrainerEvent::Closed { detail, .. } => {
                let outcome = if detail.starts_with("final: our") {
                    "final"
                } else if detail.starts_with("final") {
                    "lost"
                } else {
                    "voided"
                };
                self.rounds.with_label_values(&[outcome]).inc();
            }
            TrainerEvent::Verified {
                honest,
                replay_secs,
                ..
            } => {
                let result = if *honest { "honest" } else { "dishonest" };
                self.replays.with_label_values(&[result]).inc();
                self.replay_seconds.inc_by(finite(*replay_secs));
            }
            TrainerEvent::Challenge { outcome, .. } => {
                // A fixed set, except `failed: <error>`.
                // Each pass that finds the schedule full logs a "retrying" event: not counted.
                let label = if outcome.starts_with("failed") {
                    "failed"
                } else {
                    outcome.as_str()
                };
                if !outcome.starts_with("retrying") {
                    self.challenges.with_label_values(&[label]).inc();
                }
            }
            TrainerEvent::Vote { guilty, .. } => {
                let vote = match guilty {
                    Some(true) => "guilty",
                    Some(false) => "innocent",
                    None => "abstained",
                };
                self.votes.with_label_values(&[vote]).inc();
            }
            TrainerEvent::Recommit { .. }
            | TrainerEvent::Attest { .. }
            | TrainerEvent::Synced { .. }
            | TrainerEvent::Done { .. }
            | TrainerEvent::VerifySkipped { .. }
            | TrainerEvent::Equivocation { .. }
            | TrainerEvent::Dashboard { .. } => {}
        }
    }
}

/// `x` as its JSON line carries it, read as a number: a non-finite value (null there) reads
/// as 0.
fn finite(x: f64) -> f64 {
    if x.is_finite() {
        x
    } else {
        0.0
    }
}

/// A bounded label value from a free-text reason: its words before the first `:` or `(`,
/// at most 64 characters (the details stay in the JSON lines).
pub(super) fn reason(text: &str) -> &str {
    let head = text.split([':', '(']).next().unwrap_or_default().trim();
    let end = head.char_indices().nth(64).map_or(head.len(), |(i, _)| i);
    head.get(..end).unwrap_or(head)
}
