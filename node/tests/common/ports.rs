//! Loopback ports for the processes a test binary starts. Shared by the node's tests and the
//! trainer's end-to-end tests (`offchain-trainer/trainer/tests/chain_e2e.rs` includes this
//! file by path).

use std::net::TcpListener;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::OnceLock;

/// Ports in a test binary's block.
const BLOCK: u16 = 256;
/// Blocks below the kernel's ephemeral range.
const BLOCKS: u16 = 40;

/// A TCP port on 127.0.0.1 that nothing listens on now, handed out once per test binary.
/// Taken from a block of [`BLOCK`] ports below the kernel's ephemeral range, not from
/// `bind(:0)`: an ephemeral port can be taken by any process's outbound connection between
/// this check and the child process's own bind (a trainer then dies with "address in use").
/// The block is this binary's alone while it runs ([`claimed_block`]), so test binaries that
/// run at once (`scripts/test.sh` runs the loopback suites side by side) never hand out the
/// same port.
///
/// Panics when the binary has used all of its block's ports.
pub fn free_port() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(1);
    let block = claimed_block();
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(n < BLOCK, "this test binary used all of its {BLOCK} ports");
        let port = block + n;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// The first port of this binary's block: the first of the [`BLOCKS`] blocks below the
/// ephemeral range, starting from one chosen by the process id, whose first port this
/// process could bind. That port stays bound (a listener nobody connects to) for the
/// process's lifetime: it is the claim another test binary finds taken.
///
/// Panics when every block is claimed.
fn claimed_block() -> u16 {
    static CLAIM: OnceLock<(u16, TcpListener)> = OnceLock::new();
    CLAIM
        .get_or_init(|| {
            let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
                .unwrap_or(32_768);
            let base = ephemeral_low.saturating_sub(BLOCKS * BLOCK).max(1024);
            let first = (std::process::id() % u32::from(BLOCKS)) as u16;
            (0..BLOCKS)
                .map(|i| base + (first + i) % BLOCKS * BLOCK)
                .find_map(|block| {
                    TcpListener::bind(("127.0.0.1", block))
                        .ok()
                        .map(|l| (block, l))
                })
                .expect("every block of test ports is claimed by another process")
        })
        .0
}
