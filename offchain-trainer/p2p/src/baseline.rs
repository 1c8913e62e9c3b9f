//! Transport baselines for `synod-trainer bench allreduce`: the same all-gather as a round's
//! exchange (every peer sends its payload to every other, all at once, on loopback) over plain
//! TCP sockets, over TCP + Noise (libp2p's handshake and ChaCha20-Poly1305 framing, no
//! multiplexer) and over TCP + TLS 1.3 (libp2p-tls), so one run shows what the wire costs, what
//! each encryption adds, and what the rest of libp2p adds on top. It lives here, not in the
//! bench, because the encryptions' byte paths are generic over the socket and are compiled (and
//! optimised) where they are instantiated.

use std::io;
use std::sync::Arc;
use std::time::Instant;

use futures::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use libp2p::core::upgrade::{InboundConnectionUpgrade, OutboundConnectionUpgrade};
use libp2p::core::UpgradeInfo;
use libp2p::identity::Keypair;
use libp2p::tcp::tokio::TcpStream;
use libp2p::{noise, tls, PeerId};
use tokio::task::JoinSet;

/// What carries the baseline's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    /// Plain TCP, `TCP_NODELAY`.
    Tcp,
    /// TCP + Noise XX (libp2p-noise).
    Noise,
    /// TCP + TLS 1.3 (libp2p-tls).
    Tls,
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
        Wire::Noise => transfer(secure(tcp, noise::Config::new).await?).await,
        Wire::Tls => transfer(secure(tcp, tls::Config::new).await?).await,
    }
}

/// Both ends of every connection in `tcp` upgraded by `make` (fresh ed25519 identities), the
/// handshakes done; the payloads kept with their connection.
async fn secure<U, E, S>(
    tcp: Vec<(TcpStream, TcpStream, Arc<Vec<u8>>)>,
    make: impl Fn(&Keypair) -> Result<U, E>,
) -> io::Result<Vec<(S, S, Arc<Vec<u8>>)>>
where
    U: UpgradeInfo
        + InboundConnectionUpgrade<TcpStream, Output = (PeerId, S)>
        + OutboundConnectionUpgrade<TcpStream, Output = (PeerId, S)>,
    <U as InboundConnectionUpgrade<TcpStream>>::Error: std::fmt::Display,
    <U as OutboundConnectionUpgrade<TcpStream>>::Error: std::fmt::Display,
    E: std::fmt::Display,
{
    let mut pairs = Vec::new();
    for (a, b, p) in tcp {
        let (ca, cb) = (
            make(&Keypair::generate_ed25519()).map_err(other)?,
            make(&Keypair::generate_ed25519()).map_err(other)?,
        );
        let info = ca
            .protocol_info()
            .into_iter()
            .next()
            .ok_or_else(|| other("the upgrade names no protocol"))?;
        let (out, inb) = tokio::join!(
            ca.upgrade_outbound(a, info.clone()),
            cb.upgrade_inbound(b, info)
        );
        pairs.push((out.map_err(other)?.1, inb.map_err(other)?.1, p));
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_baseline_delivers_every_payload_to_every_peer() {
        let payloads: Vec<_> = (0..3u8)
            .map(|i| Arc::new(vec![i; 300_000 + usize::from(i)]))
            .collect();
        for wire in [Wire::Tcp, Wire::Noise, Wire::Tls] {
            let secs = all_gather_secs(&payloads, wire).await.unwrap();
            assert!(secs > 0.0 && secs.is_finite(), "{wire:?}: {secs}");
        }
    }
}
