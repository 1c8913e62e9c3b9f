//! Command-line arguments of `synod-trainer dashboard` and their conversion into
//! [`DashboardConfig`].

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;
use synod_dashboard::DashboardConfig;

/// `synod-trainer dashboard`.
#[derive(Args, Clone, Debug)]
pub struct DashboardArgs {
    /// The node's JSON-RPC WebSocket address, as the browser reaches it.
    #[arg(long, default_value = "ws://127.0.0.1:9944")]
    pub rpc: String,
    /// Address the page is served on.
    #[arg(long, default_value = "127.0.0.1:8090")]
    pub listen: SocketAddr,
    /// Trainers' Prometheus endpoints to chart (repeat or comma-separate), e.g.
    /// `http://127.0.0.1:9616/metrics` (`synod-trainer run --prometheus-port`).
    #[arg(long = "metrics", value_delimiter = ',')]
    pub metrics: Vec<String>,
    /// Seconds between two scrapes of each metrics endpoint.
    #[arg(long, default_value_t = 2)]
    pub scrape_interval: u64,
    /// `node_modules` holding the Polkadot.js packages (`scripts/setup.sh` installs them).
    #[arg(long, default_value = "scripts/polkadot-js/node_modules")]
    pub js_modules: PathBuf,
}

impl DashboardArgs {
    /// The dashboard's configuration.
    pub fn config(&self) -> DashboardConfig {
        DashboardConfig {
            rpc: self.rpc.clone(),
            listen: self.listen,
            metrics: self.metrics.clone(),
            scrape_interval: self.scrape_interval,
            js_modules: self.js_modules.clone(),
        }
    }
}
