//! # synod-dashboard
//!
//! `synod-trainer dashboard`: serves a single web page that shows the chain's pools, their
//! rounds (final / voided, contributors, on-chain hash), stakes, challenges, verdicts and
//! slashes, and a live validation-loss chart per pool.
//!
//! The page reads the chain itself, with `@polkadot/api` in the browser (the Polkadot.js
//! bundles `scripts/setup.sh` installs, served under `/vendor/`), straight from the node's
//! JSON-RPC WebSocket. Trainers' metrics endpoints are not readable from another origin, so
//! this server scrapes them ([`DashboardConfig::metrics`]) and keeps every round they report
//! (`/api/trainers`).
//!
//! Routes: `/` (the page), `/app.js`, `/shim.js`, `/config.json` (`{"rpc", "metrics"}`),
//! `/api/trainers` (JSON, [`scrape::Trainer`] per endpoint), `/vendor/{util,util-crypto,
//! keyring,types,api}.js`.
#![deny(missing_docs)]

pub mod scrape;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::json;

use scrape::{Scraper, Trainer};

const INDEX_HTML: &str = include_str!("page/index.html");
const APP_JS: &str = include_str!("page/app.js");
const SHIM_JS: &str = include_str!("page/shim.js");
/// The Polkadot.js browser bundles, in load order: (route name, file under
/// [`DashboardConfig::js_modules`]).
const BUNDLES: [(&str, &str); 5] = [
    ("util", "@polkadot/util/bundle-polkadot-util.js"),
    (
        "util-crypto",
        "@polkadot/util-crypto/bundle-polkadot-util-crypto.js",
    ),
    ("keyring", "@polkadot/keyring/bundle-polkadot-keyring.js"),
    ("types", "@polkadot/types/bundle-polkadot-types.js"),
    ("api", "@polkadot/api/bundle-polkadot-api.js"),
];

/// What the dashboard serves and scrapes (`synod-trainer dashboard`).
#[derive(Clone, Debug)]
pub struct DashboardConfig {
    /// The node's JSON-RPC WebSocket address, as the browser reaches it.
    pub rpc: String,
    /// Address the page is served on.
    pub listen: SocketAddr,
    /// Trainers' Prometheus endpoints to chart, e.g. `http://127.0.0.1:9616/metrics`
    /// (`synod-trainer run --prometheus-port`).
    pub metrics: Vec<String>,
    /// Seconds between two scrapes of each metrics endpoint (at least 1 is used).
    pub scrape_interval: u64,
    /// `node_modules` holding the Polkadot.js packages (`scripts/setup.sh` installs them).
    pub js_modules: PathBuf,
}

/// What the routes serve.
struct Site {
    config: String,
    /// The page's Content-Security-Policy: scripts from this server only (no inline script, so
    /// chain data that slipped into the page as markup could not run), connections to this
    /// server and the node's RPC only.
    csp: String,
    bundles: Vec<(&'static str, Bytes)>,
    trainers: Mutex<Vec<Trainer>>,
}

/// Serves the dashboard until interrupted; `listening` is called once with the page's URL
/// when the server is bound (the trainer prints it as a JSON line that scripts wait for).
///
/// # Errors
/// A missing Polkadot.js bundle (run `scripts/setup.sh`), a listen address in use, an
/// error of `listening`.
pub fn run(c: &DashboardConfig, listening: impl FnOnce(String) -> Result<()>) -> Result<()> {
    let site = Arc::new(site(c)?);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(c.listen)
            .await
            .with_context(|| format!("listening on {}", c.listen))?;
        let addr = listener.local_addr()?;
        tokio::spawn(scrape_forever(
            site.clone(),
            Duration::from_secs(c.scrape_interval.max(1)),
        ));
        listening(format!("http://{addr}/"))?;
        tracing::info!("dashboard at http://{addr}/ (chain {})", c.rpc);
        serve(listener, site).await
    })
}

fn site(c: &DashboardConfig) -> Result<Site> {
    let mut bundles = Vec::new();
    for (name, file) in BUNDLES {
        let path = c.js_modules.join(file);
        let Ok(bytes) = std::fs::read(&path) else {
            bail!(
                "missing Polkadot.js bundle {} (run scripts/setup.sh, or pass --js-modules)",
                path.display()
            );
        };
        bundles.push((name, Bytes::from(bytes)));
    }
    for url in &c.metrics {
        url.parse::<hyper::Uri>()
            .with_context(|| format!("--metrics {url}"))?;
    }
    // A CSP source expression cannot hold spaces, quotes or semicolons.
    if c.rpc
        .contains(|ch: char| ch.is_whitespace() || matches!(ch, ';' | ',' | '\'' | '"'))
    {
        bail!("--rpc {:?} is not a WebSocket URL", c.rpc);
    }
    Ok(Site {
        config: json!({"rpc": c.rpc, "metrics": c.metrics}).to_string(),
        csp: format!(
            "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; style-src 'unsafe-inline'; \
             img-src 'self' data:; connect-src 'self' {}; base-uri 'none'; form-action 'none'; \
             frame-ancestors 'none'",
            c.rpc
        ),
        bundles,
        trainers: Mutex::new(c.metrics.iter().map(|u| Trainer::new(u)).collect()),
    })
}

/// Connections served at once; more wait in the listen backlog.
const MAX_CONNECTIONS: usize = 256;
/// A connection's request head must arrive within this.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection is closed after this, whatever it does (the page opens new ones).
const CONNECTION_LIFETIME: Duration = Duration::from_secs(120);

/// Accepts connections on `listener` forever, one task each, at most [`MAX_CONNECTIONS`] at
/// once; a failed accept (e.g. out of file descriptors) is logged and retried.
async fn serve(listener: tokio::net::TcpListener, site: Arc<Site>) -> Result<()> {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let slot = slots.clone().acquire_owned().await?;
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!("dashboard: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let site = site.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                let resp = route(&site, req.uri().path());
                async move { Ok::<_, Infallible>(resp) }
            });
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), svc);
            match tokio::time::timeout(CONNECTION_LIFETIME, conn).await {
                Ok(Err(e)) => tracing::debug!("dashboard connection: {e}"),
                Err(_) => {
                    tracing::debug!("dashboard connection closed after {CONNECTION_LIFETIME:?}")
                }
                Ok(Ok(())) => {}
            }
        });
    }
}

fn respond(status: StatusCode, content_type: &str, body: Bytes) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    let h = r.headers_mut();
    if let Ok(v) = content_type.parse() {
        h.insert(hyper::header::CONTENT_TYPE, v);
    }
    h.insert(
        hyper::header::X_CONTENT_TYPE_OPTIONS,
        hyper::header::HeaderValue::from_static("nosniff"),
    );
    h.insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-store"),
    );
    r
}

/// The response to a GET of `path` (every method is answered the same).
fn route(site: &Site, path: &str) -> Response<Full<Bytes>> {
    const JS: &str = "text/javascript; charset=utf-8";
    const JSON: &str = "application/json";
    match path {
        "/" | "/index.html" => {
            let mut r = respond(
                StatusCode::OK,
                "text/html; charset=utf-8",
                Bytes::from_static(INDEX_HTML.as_bytes()),
            );
            if let Ok(v) = site.csp.parse() {
                r.headers_mut()
                    .insert(hyper::header::CONTENT_SECURITY_POLICY, v);
            }
            r
        }
        "/app.js" => respond(StatusCode::OK, JS, Bytes::from_static(APP_JS.as_bytes())),
        "/shim.js" => respond(StatusCode::OK, JS, Bytes::from_static(SHIM_JS.as_bytes())),
        "/config.json" => respond(StatusCode::OK, JSON, Bytes::from(site.config.clone())),
        "/api/trainers" => {
            let body = match site.trainers.lock() {
                Ok(t) => serde_json::to_vec(&*t).unwrap_or_default(),
                Err(_) => b"[]".to_vec(),
            };
            respond(StatusCode::OK, JSON, Bytes::from(body))
        }
        _ => {
            let bundle = path
                .strip_prefix("/vendor/")
                .and_then(|f| f.strip_suffix(".js"))
                .and_then(|name| site.bundles.iter().find(|(n, _)| *n == name));
            match bundle {
                Some((_, bytes)) => respond(StatusCode::OK, JS, bytes.clone()),
                None => respond(
                    StatusCode::NOT_FOUND,
                    "text/plain",
                    Bytes::from_static(b"not found\n"),
                ),
            }
        }
    }
}

/// Scrapes every trainer every `every`, forever: one task per endpoint, so a slow one
/// delays only itself.
async fn scrape_forever(site: Arc<Site>, every: Duration) {
    let urls: Vec<String> = match site.trainers.lock() {
        Ok(t) => t.iter().map(|t| t.url.clone()).collect(),
        Err(_) => return,
    };
    for (i, url) in urls.into_iter().enumerate() {
        let site = site.clone();
        tokio::spawn(async move {
            let scraper = Scraper::new(Duration::from_secs(3));
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let got = scraper.get(&url).await;
                let Ok(mut trainers) = site.trainers.lock() else {
                    return;
                };
                match got {
                    Ok(page) => trainers[i].observe(&page),
                    Err(e) => trainers[i].down(format!("{e:#}")),
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn args(js: &std::path::Path) -> DashboardConfig {
        DashboardConfig {
            rpc: "ws://127.0.0.1:1".into(),
            listen: "127.0.0.1:0".parse().unwrap(),
            metrics: vec!["http://127.0.0.1:1/metrics".into()],
            scrape_interval: 1,
            js_modules: js.to_path_buf(),
        }
    }

    fn fake_modules() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (name, file) in BUNDLES {
            let p = d.path().join(file);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, format!("/* {name} */")).unwrap();
        }
        d
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    fn body(r: Response<Full<Bytes>>) -> (StatusCode, String) {
        let status = r.status();
        let b = rt().block_on(r.into_body().collect()).unwrap().to_bytes();
        (status, String::from_utf8(b.to_vec()).unwrap())
    }

    #[test]
    fn the_page_its_script_config_and_bundles_are_served() {
        let d = fake_modules();
        let s = site(&args(d.path())).unwrap();
        let page = route(&s, "/");
        let csp = page.headers()[hyper::header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .to_string();
        assert!(
            csp.contains("script-src 'self' 'wasm-unsafe-eval';"),
            "{csp}"
        );
        assert!(
            csp.contains("connect-src 'self' ws://127.0.0.1:1;"),
            "{csp}"
        );
        assert_eq!(page.headers()["x-content-type-options"], "nosniff");
        let (st, html) = body(page);
        assert_eq!(st, StatusCode::OK);
        assert!(
            !html.contains("<script>"),
            "no inline script: the CSP forbids it"
        );
        assert!(body(route(&s, "/shim.js")).1.contains("unwrapStorageSi"));
        for (name, _) in BUNDLES {
            assert!(html.contains(&format!("/vendor/{name}.js")), "{name}");
        }
        assert!(body(route(&s, "/app.js")).1.contains("polkadotApi"));
        let cfg: serde_json::Value =
            serde_json::from_str(&body(route(&s, "/config.json")).1).unwrap();
        assert_eq!(cfg["rpc"], "ws://127.0.0.1:1");
        assert_eq!(cfg["metrics"][0], "http://127.0.0.1:1/metrics");
        assert_eq!(body(route(&s, "/vendor/api.js")).1, "/* api */");
        let trainers: serde_json::Value =
            serde_json::from_str(&body(route(&s, "/api/trainers")).1).unwrap();
        assert_eq!(trainers[0]["up"], false);
    }

    #[test]
    fn nothing_outside_the_bundles_is_served() {
        let d = fake_modules();
        std::fs::write(d.path().join("secret.js"), "x").unwrap();
        let s = site(&args(d.path())).unwrap();
        for p in [
            "/vendor/../secret.js",
            "/vendor/secret.js",
            "/vendor/%2e%2e/secret.js",
            "/vendor/api",
            "/etc/passwd",
            "/vendor/",
        ] {
            assert_eq!(route(&s, p).status(), StatusCode::NOT_FOUND, "{p}");
        }
    }

    #[test]
    fn a_missing_bundle_is_a_clear_error_at_start() {
        let d = tempfile::tempdir().unwrap();
        let e = site(&args(d.path())).err().unwrap().to_string();
        assert!(e.contains("scripts/setup.sh"), "{e}");
        let d = fake_modules();
        let mut a = args(d.path());
        a.metrics = vec!["not a url".into()];
        assert!(site(&a).is_err());
        let mut a = args(d.path());
        a.rpc = "ws://x; script-src *".into();
        assert!(site(&a).is_err(), "an --rpc that would extend the CSP");
    }
}
