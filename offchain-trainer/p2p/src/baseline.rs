//! Transport baselines for `synod-trainer bench allreduce`: the same all-gather as a round's
//! exchange (every peer sends its payload to every other, all at once, on loopback) over plain
//! TCP sockets and over TCP + Noise (libp2p's handshake and ChaCha20-Poly1305 framing, no
//! multiplexer), so one run shows what the wire costs, what encryption adds, and what the rest
//! of libp2p adds on top. It lives here, not in the bench, because Noise's byte path is generic
//! over the socket and is compiled (and optimised) where it is instantiated.

use std::io;
use std::sync::Arc;
use std::time::Instant;

use futures::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use libp2p::core::upgrade::{InboundConnectionUpgrade, OutboundConnectionUpgrade};
use libp2p::identity::Keypair;
use libp2p::noise;
use libp2p::tcp::tokio::TcpStream;
use tokio::task::JoinSet;

/// What carries the baseline's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    /// Plain TCP, `TCP_NODELAY`.
    Tcp,
    /// TCP + Noise XX (libp2p-noise), the encryption libp2p's TCP transport uses.
    Noise,
}

fn other(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

/// One connected loopback TCP pair (client end, server end).
async fn tcp_pair() -> io::Result<(TcpStream, TcpStream)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (client, server) = tokio::join!(tokio::net::TcpStream::connect(addr), listener.accept());
    let (client, (server, _)) = (client?, server?);
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    Ok((TcpStream(client), TcpStream(server)))
}

/// Sends `payload` from one end to the other of each connection, all at once; returns the
/// seconds until every receiver holds every byte (checked against the payload after the clock
/// stops).
async fn transfer<S>(pairs: Vec<(S, S, Arc<Vec<u8>>)>) -> io::Result<f64>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for (mut tx, mut rx, payload) in pairs {
        let len = payload.len();
        let sent = payload.clone();
        tasks.spawn(async move {
            tx.write_all(&sent).await?;
            tx.flush().await?;
            // The sender stays open until the receiver is done.
            Ok::<_, io::Error>((tx, None))
        });
        tasks.spawn(async move {
            let mut buf = vec![0u8; len];
            rx.read_exact(&mut buf).await?;
            Ok((rx, Some((buf, payload))))
        });
    }
    let mut done = Vec::new();
    while let Some(r) = tasks.join_next().await {
        done.push(r.map_err(other)??);
    }
    let secs = start.elapsed().as_secs_f64();
    for (_, got) in &done {
        if let Some((buf, payload)) = got {
            if buf != payload.as_ref() {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "bytes differ"));
            }
        }
    }
    Ok(secs)
}

/// Seconds for every one of `payloads.len()` peers to receive every other peer's payload over
/// `wire`: one connection per ordered pair of peers, all connected (and for Noise, handshaken)
/// before the clock starts.
///
/// # Errors
/// Socket or handshake errors.
pub async fn all_gather_secs(payloads: &[Arc<Vec<u8>>], wire: Wire) -> io::Result<f64> {
    let n = payloads.len();
    let mut tcp = Vec::new();
    for (i, p) in payloads.iter().enumerate() {
        for j in 0..n {
            if i != j {
                let (a, b) = tcp_pair().await?;
                tcp.push((a, b, p.clone()));
            }
        }
    }
    match wire {
        Wire::Tcp => transfer(tcp).await,
        Wire::Noise => {
            let mut pairs = Vec::new();
            for (a, b, p) in tcp {
                let (ka, kb) = (Keypair::generate_ed25519(), Keypair::generate_ed25519());
                let (ca, cb) = (
                    noise::Config::new(&ka).map_err(other)?,
                    noise::Config::new(&kb).map_err(other)?,
                );
                let (out, inb) = tokio::join!(
                    ca.upgrade_outbound(a, "/noise"),
                    cb.upgrade_inbound(b, "/noise")
                );
                pairs.push((out.map_err(other)?.1, inb.map_err(other)?.1, p));
            }
            transfer(pairs).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn both_baselines_deliver_every_payload_to_every_peer() {
        let payloads: Vec<_> = (0..3u8)
            .map(|i| Arc::new(vec![i; 300_000 + usize::from(i)]))
            .collect();
        for wire in [Wire::Tcp, Wire::Noise] {
            let secs = all_gather_secs(&payloads, wire).await.unwrap();
            assert!(secs > 0.0 && secs.is_finite(), "{wire:?}: {secs}");
        }
    }
}
