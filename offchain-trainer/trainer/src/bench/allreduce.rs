//! `bench allreduce`: the libp2p all-gather of one round against raw TCP on loopback.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use clap::Args;
use serde_json::json;
use synod_p2p::libp2p_identity::Keypair;
use synod_p2p::{all_gather, spawn, ExchangeConfig, Member, MemberKey, MemberSet, NetConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Arguments of `bench allreduce`.
#[derive(Args, Clone, Debug)]
pub struct AllreduceArgs {
    /// Peers (in-process swarms on 127.0.0.1).
    #[arg(long, default_value_t = 4)]
    pub peers: u32,
    /// Parameters per pseudo-gradient (int8-encoded: ≈ params bytes on the wire).
    #[arg(long, default_value_t = 25_000_000)]
    pub params: usize,
}

/// Bytes per second of one loopback TCP stream moving `bytes`.
async fn raw_tcp(bytes: usize) -> Result<f64> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let reader = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await?;
        let mut buf = vec![0u8; 1 << 20];
        let mut n = 0;
        while n < bytes {
            let r = s.read(&mut buf).await?;
            if r == 0 {
                break;
            }
            n += r;
        }
        Ok::<_, std::io::Error>(n)
    });
    let mut w = tokio::net::TcpStream::connect(addr).await?;
    w.set_nodelay(true)?;
    let chunk = vec![7u8; 1 << 20];
    let t0 = Instant::now();
    let mut sent = 0;
    while sent < bytes {
        w.write_all(&chunk).await?;
        sent += chunk.len();
    }
    w.shutdown().await?;
    let got = reader.await??;
    Ok(got as f64 / t0.elapsed().as_secs_f64())
}

/// Prints `{"bench":"allreduce","secs","ideal_secs","ratio","raw_tcp_gbps","libp2p_gbps",...}`
/// (GB/s = 10⁹ bytes per second).
pub fn run(a: &AllreduceArgs) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let raw = raw_tcp(512 << 20).await?;
        let n = a.peers as usize;
        let ids: Vec<(Keypair, Arc<MemberKey>)> = (0..n)
            .map(|i| {
                Ok((
                    Keypair::ed25519_from_bytes([i as u8 + 1; 32]).map_err(|e| anyhow!("{e}"))?,
                    Arc::new(MemberKey::from_seed([i as u8 + 1; 32])),
                ))
            })
            .collect::<Result<_>>()?;
        let set = MemberSet::new(
            1,
            ids.iter()
                .enumerate()
                .map(|(i, (k, m))| Member {
                    index: i as u32,
                    peer_id: k.public().to_peer_id(),
                    key: m.public(),
                })
                .collect(),
        );
        let mut clients = Vec::new();
        let mut boot = None;
        for (i, (k, m)) in ids.iter().enumerate() {
            let mut cfg = NetConfig::new(k.clone(), m.clone(), i as u32, set.clone());
            cfg.bootnodes.extend(boot.clone());
            cfg.heartbeat = Duration::from_millis(200);
            let c = spawn(cfg)?;
            if boot.is_none() {
                boot = c.listen_addrs().await.into_iter().next();
            }
            clients.push(c);
        }
        // Wait until the mesh is complete.
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(20)
            && clients.iter().any(|c| c.snapshot().connected.len() < n - 1)
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Payloads of the int8 codec's size (≈ 1 byte per parameter + scales), incompressible.
        let payload_len = a.params + a.params.div_ceil(1024) * 4;
        let payloads: Vec<Vec<u8>> = (0..n)
            .map(|i| {
                let mut h = blake3::Hasher::new();
                h.update(&[i as u8]);
                let mut v = vec![0u8; payload_len];
                h.finalize_xof().fill(&mut v);
                v
            })
            .collect();
        let t0 = Instant::now();
        let tasks: Vec<_> = clients
            .iter()
            .zip(payloads)
            .map(|(c, p)| {
                let c = c.clone();
                tokio::spawn(async move { all_gather(&c, 1, p, ExchangeConfig::default()).await })
            })
            .collect();
        let mut included = Vec::new();
        for t in tasks {
            included.push(t.await??.included.len());
        }
        let secs = t0.elapsed().as_secs_f64();
        for c in &clients {
            c.shutdown().await;
        }
        let per_peer = ((n - 1) * payload_len) as f64;
        let ideal = per_peer / raw;
        println!(
            "{}",
            json!({
                "bench": "allreduce",
                "peers": n,
                "params": a.params,
                "payload_bytes": payload_len,
                "bytes_per_peer": per_peer,
                "secs": secs,
                "ideal_secs": ideal,
                "ratio": secs / ideal,
                "raw_tcp_gbps": raw / 1e9,
                "libp2p_gbps": per_peer / secs / 1e9,
                "all_included": included.iter().all(|k| *k == n),
                "cores": std::thread::available_parallelism().map_or(1, |c| c.get()),
            })
        );
        Ok(())
    })
}
