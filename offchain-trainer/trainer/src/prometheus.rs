//! Prometheus metrics of `synod-trainer run`, served over HTTP at `/metrics` by Substrate's own
//! exporter (`substrate-prometheus-endpoint`, the one `synod-node` serves on port 9615).
//!
//! They are fed from the events of the JSON lines ([`TrainerEvent`], emitted by
//! [`crate::metrics::Metrics`]), so both views of a run always agree. Names and units follow
//! Prometheus' conventions: `synod_trainer_` prefix, `_total` counters, `_seconds` and `_bytes`
//! units.

use std::net::{Ipv4Addr, SocketAddr};

use anyhow::Result;
use substrate_prometheus_endpoint::{
    init_prometheus, register, Counter, CounterVec, Gauge, Opts, Registry, F64, U64,
};

use crate::event::TrainerEvent;

/// Default port of a trainer's exporter (the node's is 9615).
pub const DEFAULT_PORT: u16 = 9616;

/// The trainer's metrics registry.
#[derive(Clone)]
pub struct Exporter {
    registry: Registry,
    pool: Gauge<U64>,
    finalized_height: Gauge<U64>,
    peers: Gauge<U64>,
    received_bytes: Counter<U64>,
    stake: Gauge<F64>,
    commits: CounterVec<U64>,
    rounds: CounterVec<U64>,
    round: Gauge<U64>,
    inner_loss: Gauge<F64>,
    validation_loss: Gauge<F64>,
    tokens: Gauge<U64>,
    inner_seconds: Counter<F64>,
    exchange_seconds: Counter<F64>,
    outer_seconds: Counter<F64>,
    compute_utilisation: Gauge<F64>,
    payload_bytes: Counter<U64>,
    included: Gauge<U64>,
    excluded: CounterVec<U64>,
    replays: CounterVec<U64>,
    replay_seconds: Counter<F64>,
    challenges: CounterVec<U64>,
    votes: CounterVec<U64>,
}

fn counter_vec(r: &Registry, name: &str, help: &str, label: &str) -> Result<CounterVec<U64>> {
    Ok(register(
        CounterVec::new(Opts::new(name, help), &[label])?,
        r,
    )?)
}

impl Exporter {
    /// A registry with every `synod_trainer_*` metric at zero.
    ///
    /// # Errors
    /// Only on a duplicate or malformed metric name (a bug).
    pub fn new() -> Result<Self> {
        let r = Registry::new();
        Ok(Self {
            pool: register(
                Gauge::new(
                    "synod_trainer_pool",
                    "Id of the pool this trainer is a member of",
                )?,
                &r,
            )?,
            finalized_height: register(
                Gauge::new(
                    "synod_trainer_finalized_height",
                    "Number of the last finalized block the trainer has seen",
                )?,
                &r,
            )?,
            peers: register(
                Gauge::new(
                    "synod_trainer_peers_connected",
                    "libp2p peers connected at the last exchange",
                )?,
                &r,
            )?,
            received_bytes: register(
                Counter::new(
                    "synod_trainer_payload_bytes_received_total",
                    "Bytes of the other members' pseudo-gradient payloads we aggregated",
                )?,
                &r,
            )?,
            stake: register(
                Gauge::new(
                    "synod_trainer_stake_syn",
                    "Stake committed to the pool as registered on-chain (its quorum weight), in \
                     SYN (10^12 planck)",
                )?,
                &r,
            )?,
            commits: counter_vec(
                &r,
                "synod_trainer_commits_total",
                "Checkpoint commits submitted (Checkpoints.commit_checkpoint), by outcome: ok, \
                 failed",
                "outcome",
            )?,
            rounds: counter_vec(
                &r,
                "synod_trainer_rounds_total",
                "Rounds closed on-chain, by outcome: final (our checkpoint), lost (final, \
                 another hash), voided",
                "outcome",
            )?,
            round: register(
                Gauge::new("synod_trainer_round", "Last outer round trained")?,
                &r,
            )?,
            inner_loss: register(
                Gauge::new(
                    "synod_trainer_inner_loss",
                    "Mean training loss of the last inner phase (nats per token)",
                )?,
                &r,
            )?,
            validation_loss: register(
                Gauge::new(
                    "synod_trainer_validation_loss",
                    "Validation loss of the last checkpoint (nats per token)",
                )?,
                &r,
            )?,
            tokens: register(
                Gauge::new(
                    "synod_trainer_tokens",
                    "Tokens trained on by the included members of the pool so far",
                )?,
                &r,
            )?,
            inner_seconds: register(
                Counter::new(
                    "synod_trainer_inner_seconds_total",
                    "Seconds spent in inner phases",
                )?,
                &r,
            )?,
            exchange_seconds: register(
                Counter::new(
                    "synod_trainer_exchange_seconds_total",
                    "Seconds spent exchanging pseudo-gradients",
                )?,
                &r,
            )?,
            outer_seconds: register(
                Counter::new(
                    "synod_trainer_outer_seconds_total",
                    "Seconds spent in outer steps (aggregation and checkpoint)",
                )?,
                &r,
            )?,
            compute_utilisation: register(
                Gauge::new(
                    "synod_trainer_compute_utilisation",
                    "Inner seconds / wall-clock seconds of the last round, chain waits included (0..1)",
                )?,
                &r,
            )?,
            payload_bytes: register(
                Counter::new(
                    "synod_trainer_payload_bytes_total",
                    "Bytes of the pseudo-gradient payloads we announced",
                )?,
                &r,
            )?,
            included: register(
                Gauge::new(
                    "synod_trainer_included_members",
                    "Members in the last round's included set",
                )?,
                &r,
            )?,
            excluded: counter_vec(
                &r,
                "synod_trainer_payloads_excluded_total",
                "Members left out of an included set, by reason",
                "reason",
            )?,
            replays: counter_vec(
                &r,
                "synod_trainer_replays_total",
                "Contributions we replayed (verification), by result: honest, dishonest",
                "result",
            )?,
            replay_seconds: register(
                Counter::new(
                    "synod_trainer_replay_seconds_total",
                    "Seconds spent replaying others' inner phases",
                )?,
                &r,
            )?,
            challenges: counter_vec(
                &r,
                "synod_trainer_challenges_total",
                "Challenges we tried to open, by outcome",
                "outcome",
            )?,
            votes: counter_vec(
                &r,
                "synod_trainer_votes_total",
                "Jury duties, by vote: guilty, innocent, abstained",
                "vote",
            )?,
            registry: r,
        })
    }

    /// Serves `/metrics` on `127.0.0.1:port` (`0.0.0.0:port` if `external`) from a task of
    /// `rt`. A port in use is logged, not fatal: training goes on without the exporter.
    pub fn serve(&self, rt: &tokio::runtime::Runtime, port: u16, external: bool) {
        let ip = if external {
            Ipv4Addr::UNSPECIFIED
        } else {
            Ipv4Addr::LOCALHOST
        };
        let addr = SocketAddr::from((ip, port));
        let registry = self.registry.clone();
        rt.spawn(async move {
            tracing::info!(%addr, "serving Prometheus metrics at /metrics");
            if let Err(e) = init_prometheus(addr, registry).await {
                tracing::warn!(%addr, "no Prometheus metrics: {e}");
            }
        });
    }

    /// Sets the last finalized block number seen (from the finalized-block subscription, not
    /// from an event: one per block).
    pub fn set_finalized_height(&self, number: u64) {
        self.finalized_height.set(number);
    }

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
fn reason(text: &str) -> &str {
    let head = text.split([':', '(']).next().unwrap_or_default().trim();
    let end = head.char_indices().nth(64).map_or(head.len(), |(i, _)| i);
    head.get(..end).unwrap_or(head)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::RoundRecord;
    use substrate_prometheus_endpoint::prometheus::{Encoder, TextEncoder};

    fn text(e: &Exporter) -> String {
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&e.registry.gather(), &mut out)
            .unwrap();
        String::from_utf8(out).unwrap()
    }

    fn round(round: u32) -> RoundRecord {
        RoundRecord::diloco(round, 0)
    }

    fn closed(round: u32, detail: &str) -> TrainerEvent {
        TrainerEvent::Closed {
            round,
            hash: "ab".into(),
            detail: detail.into(),
        }
    }

    fn commit(round: u32, outcome: &str) -> TrainerEvent {
        TrainerEvent::Commit {
            error: (outcome == "failed").then(|| "refused".to_string()),
            hash: "ab".into(),
            outcome: outcome.into(),
            round,
        }
    }

    fn verified(honest: bool, replay_secs: f64) -> TrainerEvent {
        TrainerEvent::Verified {
            account: "5Grw".into(),
            distance: if honest { 0.0 } else { 1.0 },
            honest,
            member: 1,
            replay_secs,
            round: 1,
            segments: 0,
            tolerance: 0.01,
            whole_replay: Some("asked".into()),
        }
    }

    fn vote(guilty: Option<bool>) -> TrainerEvent {
        TrainerEvent::Vote {
            abstained: guilty.is_none().then(|| "another pool".to_string()),
            accused: guilty.map(|_| "5Grw".to_string()),
            challenge: 0,
            distance: guilty.map(|_| 0.5),
            guilty,
            member: guilty.map(|_| 1),
            round: 1,
        }
    }

    #[test]
    fn events_move_the_counters_with_conventional_names_and_types() {
        let e = Exporter::new().unwrap();
        e.observe(
            &RoundRecord {
                train_loss: 3.5,
                val_loss: 3.25,
                tokens: 4096,
                compute_secs: 3.0,
                exchange_secs: 0.5,
                outer_secs: 0.5,
                wall_secs: 4.0,
                compute_utilisation: 0.75,
                bytes_sent_per_worker: 1000,
                included: vec![0, 1, 2],
                excluded: vec![(3, "fetch failed: timed out (3 tries)".into())],
                ..round(2)
            }
            .event(),
        );
        e.observe(&closed(2, "final: our checkpoint"));
        e.observe(&closed(3, "voided"));
        e.observe(&verified(false, 2.0));
        e.observe(&vote(Some(true)));
        e.observe(&vote(None));
        e.observe(&TrainerEvent::Synced {
            round: 1,
            hash: "ab".into(),
            detail: "local file".into(),
        });
        e.observe(&TrainerEvent::Joined {
            account: "5Grw".into(),
            from_round: 0,
            listen: Vec::new(),
            member: 1,
            peer_id: "12D3".into(),
            pool: 7,
            prometheus: None,
            resumed: false,
            stake: "100000000000000".into(),
        });
        e.observe(&commit(2, "ok"));
        e.observe(&TrainerEvent::Exchange {
            bytes_received: 2000,
            peers_connected: 3,
            round: 2,
        });
        e.set_finalized_height(41);
        e.observe(&commit(3, "failed"));
        let t = text(&e);
        for line in [
            "# TYPE synod_trainer_rounds_total counter",
            "synod_trainer_rounds_total{outcome=\"final\"} 1",
            "synod_trainer_rounds_total{outcome=\"voided\"} 1",
            "# TYPE synod_trainer_validation_loss gauge",
            "synod_trainer_validation_loss 3.25",
            "synod_trainer_round 2",
            "# TYPE synod_trainer_pool gauge",
            "synod_trainer_pool 7",
            "synod_trainer_stake_syn 100",
            "synod_trainer_peers_connected 3",
            "# TYPE synod_trainer_payload_bytes_received_total counter",
            "synod_trainer_payload_bytes_received_total 2000",
            "synod_trainer_finalized_height 41",
            "# TYPE synod_trainer_commits_total counter",
            "synod_trainer_commits_total{outcome=\"ok\"} 1",
            "synod_trainer_commits_total{outcome=\"failed\"} 1",
            "synod_trainer_inner_seconds_total 3",
            "synod_trainer_compute_utilisation 0.75",
            "synod_trainer_payload_bytes_total 1000",
            "synod_trainer_included_members 3",
            "synod_trainer_payloads_excluded_total{reason=\"fetch failed\"} 1",
            "synod_trainer_replays_total{result=\"dishonest\"} 1",
            "synod_trainer_votes_total{vote=\"guilty\"} 1",
            "synod_trainer_votes_total{vote=\"abstained\"} 1",
        ] {
            assert!(t.lines().any(|l| l == line), "missing {line:?} in\n{t}");
        }
    }

    #[test]
    fn a_loss_not_measured_reads_as_zero() {
        let e = Exporter::new().unwrap();
        e.observe(
            &RoundRecord {
                val_loss: 2.0,
                ..round(1)
            }
            .event(),
        );
        e.observe(&round(2).event());
        let t = text(&e);
        for line in ["synod_trainer_validation_loss 0", "synod_trainer_round 2"] {
            assert!(t.lines().any(|l| l == line), "missing {line:?} in\n{t}");
        }
    }

    #[test]
    fn reasons_are_short_label_values() {
        assert_eq!(reason("silent (no announcement)"), "silent");
        assert_eq!(
            reason("fetch failed: request failed: timeout"),
            "fetch failed"
        );
        assert_eq!(reason(&"x".repeat(100)).len(), 64);
        assert_eq!(reason(""), "");
    }

    #[test]
    fn the_grafana_dashboard_plots_every_trainer_metric_and_only_those() {
        let dashboard: serde_json::Value =
            serde_json::from_str(include_str!("../../../scripts/grafana/synod.json")).unwrap();
        let mut used = std::collections::BTreeSet::new();
        for p in dashboard["panels"].as_array().unwrap() {
            for t in p["targets"].as_array().into_iter().flatten() {
                let expr = t["expr"].as_str().unwrap();
                let mut rest = expr;
                while let Some(at) = rest.find("synod_trainer_") {
                    let name: String = rest[at..]
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    rest = &rest[at + name.len()..];
                    used.insert(name);
                }
            }
        }
        let e = Exporter::new().unwrap();
        // Labelled families appear with their first label value.
        for ev in [
            RoundRecord {
                excluded: vec![(3, "fetch failed".into())],
                ..round(1)
            }
            .event(),
            closed(1, "voided"),
            commit(1, "ok"),
            verified(true, 1.0),
            TrainerEvent::Challenge {
                account: "5Grw".into(),
                distance: 1.0,
                member: 1,
                outcome: "opened".into(),
                round: 1,
            },
            vote(Some(false)),
        ] {
            e.observe(&ev);
        }
        let exported: std::collections::BTreeSet<String> = text(&e)
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|n| n.starts_with("synod_trainer_"))
            .map(str::to_string)
            .collect();
        assert!(exported.len() >= 10, "{exported:?}");
        assert_eq!(used, exported, "dashboard vs exporter");
    }

    #[test]
    fn the_dashboards_scraper_charts_what_the_exporter_serves() {
        use std::time::Duration;
        use synod_dashboard::scrape::{Point, Scraper, Trainer};
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let e = Exporter::new().unwrap();
        e.observe(&TrainerEvent::Joined {
            account: "5Grw".into(),
            from_round: 0,
            listen: Vec::new(),
            member: 0,
            peer_id: "12D3".into(),
            pool: 3,
            prometheus: None,
            resumed: false,
            stake: "0".into(),
        });
        e.observe(
            &RoundRecord {
                train_loss: 4.0,
                val_loss: 3.5,
                ..RoundRecord::diloco(1, 0)
            }
            .event(),
        );
        e.serve(&rt, port, false);
        let url = format!("http://127.0.0.1:{port}/metrics");
        let scraper = Scraper::new(Duration::from_secs(2));
        let page = rt.block_on(async {
            for _ in 0..100 {
                if let Ok(p) = scraper.get(&url).await {
                    return p;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            panic!("the exporter never answered");
        });
        let mut t = Trainer::new(&url);
        t.observe(&page);
        assert_eq!(t.pool, Some(3));
        assert_eq!(
            t.points,
            vec![Point {
                round: 1,
                val_loss: 3.5,
                inner_loss: 4.0
            }]
        );
        let closed = rt.block_on(scraper.get("http://127.0.0.1:1/metrics"));
        assert!(closed.is_err());
    }
}
