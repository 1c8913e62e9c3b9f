//! Tests of [`super`]: the metrics each event moves, their names and types, and that the
//! Grafana dashboard and `synod-dashboard`'s scraper read what the exporter serves.

use super::observe::reason;
use super::Exporter;
use crate::event::TrainerEvent;
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
        failed: (!honest).then(|| "encoding".to_string()),
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
        dispute: guilty.map(|_| "phase".to_string()),
        distance: guilty.map(|_| 0.5),
        guilty,
        member: guilty.map(|_| 1),
        reused: false,
        round: 1,
        whole_replay: guilty.map(|_| "asked".to_string()),
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
        serde_json::from_str(include_str!("../../../../scripts/grafana/synod.json")).unwrap();
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
            dispute: "segment 2".into(),
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
    e.serve(&rt, std::net::SocketAddr::from(([127, 0, 0, 1], port)));
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
