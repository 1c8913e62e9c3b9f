//! The dashboard's view of the trainers: each `--metrics` endpoint is scraped every few
//! seconds and every outer round it reports is kept, so a page opened late still charts the
//! whole run (a trainer's exporter only holds the last round).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{anyhow, Result};
use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use serde::Serialize;

/// Largest metrics page read, in bytes (a trainer's is ~5 KB).
const MAX_PAGE_BYTES: usize = 1 << 20;
/// Rounds kept per trainer (the oldest are dropped beyond it).
const MAX_POINTS: usize = 4096;

/// One outer round as a trainer reported it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Point {
    /// Outer round (0 = the initial checkpoint).
    pub round: u64,
    /// Validation loss of the round's checkpoint, nats per token.
    pub val_loss: f64,
    /// Mean training loss of the round's inner phase, nats per token (0 for round 0).
    pub inner_loss: f64,
}

/// What the dashboard knows of one trainer.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Trainer {
    /// Its metrics endpoint, as given with `--metrics`.
    pub url: String,
    /// Whether the last scrape succeeded.
    pub up: bool,
    /// The last scrape's error, if it failed.
    pub error: Option<String>,
    /// The pool it trains (`synod_trainer_pool`), once reported.
    pub pool: Option<u64>,
    /// Its rounds, ascending, at most 4096.
    pub points: Vec<Point>,
}

impl Trainer {
    /// A trainer not scraped yet.
    pub fn new(url: &str) -> Self {
        Self {
            url: url.to_string(),
            ..Self::default()
        }
    }

    /// Records one scrape: the pool and, once the trainer has a validation loss, its current
    /// round (a repeated round replaces its point, e.g. after a restart).
    pub fn observe(&mut self, page: &str) {
        let m = parse_exposition(page);
        self.up = true;
        self.error = None;
        if let Some(p) = m.get("synod_trainer_pool").and_then(|v| whole(*v)) {
            self.pool = Some(p);
        }
        let (Some(round), Some(val_loss)) = (
            m.get("synod_trainer_round").and_then(|v| whole(*v)),
            m.get("synod_trainer_validation_loss"),
        ) else {
            return;
        };
        // The exporter starts every gauge at 0: no round event yet.
        if !(val_loss.is_finite() && *val_loss > 0.0) {
            return;
        }
        let point = Point {
            round,
            val_loss: *val_loss,
            inner_loss: m.get("synod_trainer_inner_loss").copied().unwrap_or(0.0),
        };
        match self.points.binary_search_by_key(&point.round, |p| p.round) {
            Ok(i) => self.points[i] = point,
            Err(i) => self.points.insert(i, point),
        }
        if self.points.len() > MAX_POINTS {
            self.points.remove(0);
        }
    }

    /// Records a failed scrape (the points are kept).
    pub fn down(&mut self, error: String) {
        self.up = false;
        self.error = Some(error);
    }
}

/// `v` if it is a whole number in 0..=2⁵³ (exact in JavaScript), else `None`: a pool id or a
/// round from a broken or hostile endpoint is dropped, not wrapped.
fn whole(v: f64) -> Option<u64> {
    (v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v <= 9_007_199_254_740_992.0)
        .then_some(v as u64)
}

/// The unlabelled samples of a Prometheus text exposition page (`name value` lines), by name.
/// Comments, labelled samples and unparsable lines are skipped.
pub fn parse_exposition(page: &str) -> BTreeMap<String, f64> {
    page.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (name, value) = (it.next()?, it.next()?);
            if name.contains('{') {
                return None;
            }
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// An HTTP client for metrics pages.
pub struct Scraper {
    client: Client<HttpConnector, Empty<Bytes>>,
    timeout: Duration,
}

impl Scraper {
    /// A client whose requests give up after `timeout`.
    pub fn new(timeout: Duration) -> Self {
        Self {
            client: Client::builder(TokioExecutor::new()).build_http(),
            timeout,
        }
    }

    /// GETs `url` (http only) and returns its body as text.
    ///
    /// # Errors
    /// A malformed URL, no answer within the timeout, a status other than 200, a body over
    /// 1 MiB or not UTF-8.
    pub async fn get(&self, url: &str) -> Result<String> {
        let uri: hyper::Uri = url.parse()?;
        let fetch = async {
            let resp = self.client.get(uri).await?;
            if resp.status() != hyper::StatusCode::OK {
                return Err(anyhow!("HTTP {}", resp.status()));
            }
            let body = Limited::new(resp.into_body(), MAX_PAGE_BYTES)
                .collect()
                .await
                .map_err(|e| anyhow!("reading the body: {e}"))?;
            Ok(String::from_utf8(body.to_bytes().to_vec())?)
        };
        tokio::time::timeout(self.timeout, fetch)
            .await
            .map_err(|_| anyhow!("no answer in {:?}", self.timeout))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(pool: u32, round: u32, val: f64, inner: f64) -> String {
        format!(
            "# HELP synod_trainer_round Last outer round trained\n# TYPE synod_trainer_round gauge\n\
             synod_trainer_pool {pool}\nsynod_trainer_round {round}\n\
             synod_trainer_validation_loss {val}\nsynod_trainer_inner_loss {inner}\n\
             synod_trainer_rounds_total{{outcome=\"final\"}} 3\n"
        )
    }

    #[test]
    fn the_exposition_parser_keeps_unlabelled_samples_only() {
        let m = parse_exposition(&page(2, 3, 4.5, 4.25));
        assert_eq!(m["synod_trainer_pool"], 2.0);
        assert_eq!(m["synod_trainer_round"], 3.0);
        assert_eq!(m["synod_trainer_inner_loss"], 4.25);
        assert!(!m.keys().any(|k| k.contains("rounds_total")));
        assert!(parse_exposition("garbage\nx y z\n{ 1\n").is_empty());
    }

    #[test]
    fn every_round_a_trainer_reports_is_kept_in_order() {
        let mut t = Trainer::new("http://x/metrics");
        t.observe(&page(0, 0, 0.0, 0.0)); // exporter not fed yet
        assert!(t.points.is_empty());
        assert_eq!(t.pool, Some(0));
        t.observe(&page(0, 2, 3.0, 3.1));
        t.observe(&page(0, 1, 4.0, 4.1));
        t.observe(&page(0, 2, 2.9, 3.0)); // the same round again: replaced
        let rounds: Vec<_> = t.points.iter().map(|p| (p.round, p.val_loss)).collect();
        assert_eq!(rounds, vec![(1, 4.0), (2, 2.9)]);
        t.down("refused".into());
        assert!(!t.up);
        assert_eq!(t.points.len(), 2);
        t.observe(&page(0, 3, f64::NAN, 0.0));
        assert!(t.up && t.points.len() == 2);
    }

    #[test]
    fn a_hostile_endpoint_cannot_invent_pools_or_rounds() {
        let mut t = Trainer::new("u");
        for bad in ["NaN", "-1", "1.5", "1e300", "+Inf"] {
            t.observe(&format!(
                "synod_trainer_pool {bad}\nsynod_trainer_round {bad}\nsynod_trainer_validation_loss 2\n"
            ));
            assert_eq!(t.pool, None, "{bad}");
            assert!(t.points.is_empty(), "{bad}");
        }
    }

    #[test]
    fn a_trainer_history_is_bounded() {
        let mut t = Trainer::new("u");
        for r in 0..(MAX_POINTS as u32 + 10) {
            t.observe(&page(0, r, 1.0, 1.0));
        }
        assert_eq!(t.points.len(), MAX_POINTS);
        assert_eq!(t.points[0].round, 10);
    }
}
