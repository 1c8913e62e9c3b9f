//! Starts real `synod-node` processes on loopback and talks JSON-RPC to them over HTTP.

#![allow(dead_code)]

mod ports;

use std::{
    io::{Read, Write},
    net::TcpStream,
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

pub use ports::free_port;

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("node/ has a parent")
        .to_path_buf()
}

/// A running node, killed on drop. Its log is `<base>/node.log`.
pub struct Node {
    child: Child,
    /// JSON-RPC port (HTTP and WebSocket).
    pub rpc_port: u16,
    /// libp2p port.
    pub p2p_port: u16,
    /// Base path (`--base-path`).
    pub base: tempfile::TempDir,
}

impl Node {
    /// Starts `synod-node` with `args` plus its own base path, RPC and p2p ports.
    pub fn start(args: &[&str]) -> Node {
        let base = tempfile::tempdir().expect("temp dir");
        let rpc_port = free_port();
        let p2p_port = free_port();
        let log = std::fs::File::create(base.path().join("node.log")).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_synod-node"))
            .args(args)
            .args(["--base-path", base.path().to_str().expect("utf-8 path")])
            .args([
                "--rpc-port",
                &rpc_port.to_string(),
                "--port",
                &p2p_port.to_string(),
            ])
            .args([
                "--no-prometheus",
                "--no-telemetry",
                "--no-mdns",
                "--rpc-cors",
                "all",
            ])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("synod-node starts");
        Node {
            child,
            rpc_port,
            p2p_port,
            base,
        }
    }

    /// The node's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.base.path().join("node.log")).unwrap_or_default()
    }

    /// Calls `method` with `params` (JSON text) and returns the `result` member's JSON.
    pub fn rpc(&self, method: &str, params: &str) -> Option<serde_json::Value> {
        let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{params}}}"#);
        let mut s = TcpStream::connect(("127.0.0.1", self.rpc_port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        write!(
			s,
			"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
			body.len(),
			body
		)
		.ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        let json = out.split("\r\n\r\n").nth(1)?;
        let v: serde_json::Value = serde_json::from_str(json.trim()).ok()?;
        v.get("result").cloned()
    }

    /// Number of the best (`finalized = false`) or finalized block.
    pub fn block_number(&self, finalized: bool) -> Option<u64> {
        let header = if finalized {
            let hash = self.rpc("chain_getFinalizedHead", "[]")?;
            self.rpc("chain_getHeader", &format!("[{hash}]"))?
        } else {
            self.rpc("chain_getHeader", "[]")?
        };
        u64::from_str_radix(header.get("number")?.as_str()?.trim_start_matches("0x"), 16).ok()
    }

    /// Waits until the finalized block number reaches `n`; panics with the log after `timeout`.
    pub fn wait_finalized(&self, n: u64, timeout: Duration) -> u64 {
        let start = Instant::now();
        loop {
            if let Some(f) = self.block_number(true) {
                if f >= n {
                    return f;
                }
            }
            if start.elapsed() > timeout {
                panic!(
                    "finalized block {n} not reached in {timeout:?}; log:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
