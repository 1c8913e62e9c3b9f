//! Prometheus metrics of `synod-trainer run`, served over HTTP at `/metrics` by Substrate's own
//! exporter (`substrate-prometheus-endpoint`, the one `synod-node` serves on port 9615).
//!
//! They are fed from the events of the JSON lines
//! ([`TrainerEvent`](crate::event::TrainerEvent), emitted by [`crate::metrics::Metrics`]), so
//! both views of a run always agree. Names and units follow Prometheus' conventions:
//! `synod_trainer_` prefix, `_total` counters, `_seconds` and `_bytes` units.
//!
//! The module is split by concern: the metric definitions ([`registry`]), the event-to-metric
//! updates ([`observe`]) and, here, the exporter itself (its fields, HTTP server and public API).

mod observe;
mod registry;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;

use substrate_prometheus_endpoint::{
    init_prometheus, Counter, CounterVec, Gauge, Registry, F64, U64,
};

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

impl Exporter {
    /// Serves `/metrics` on `addr` from a task of `rt`. A port in use is logged, not fatal:
    /// training goes on without the exporter.
    pub fn serve(&self, rt: &tokio::runtime::Runtime, addr: SocketAddr) {
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
}
