//! Loopback ports for the processes a test binary starts. Shared by the node's tests and the
//! trainer's end-to-end tests (`offchain-trainer/trainer/tests/chain_e2e.rs` includes this
//! file by path).

use std::net::TcpListener;
use std::sync::atomic::{AtomicU16, Ordering};

/// A TCP port on 127.0.0.1 that nothing listens on now, handed out once per test binary.
/// Taken from a block of 256 ports below the kernel's ephemeral range (chosen by the process
/// id), not from `bind(:0)`: an ephemeral port can be taken by any process's outbound
/// connection between this check and the child process's own bind (a trainer then dies with
/// "address in use").
pub fn free_port() -> u16 {
    const BLOCK: u16 = 256;
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    let base = ephemeral_low.saturating_sub(40 * BLOCK).max(1024);
    let block = base + (std::process::id() % 40) as u16 * BLOCK;
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(n < BLOCK, "this test binary used all of its {BLOCK} ports");
        let port = block + n;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}
