//! `bench allreduce`: one round's all-gather over libp2p (TCP + Noise + Yamux, TCP + TLS +
//! Yamux, and QUIC) against the same all-gather over plain TCP, TCP + Noise and TCP + TLS,
//! measured in the same run on loopback (`synod_p2p::baseline`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, ensure, Result};
use serde_json::json;
use synod_p2p::baseline::{all_gather_secs, Wire};
use synod_p2p::libp2p_identity::Keypair;
use synod_p2p::{
    all_gather, spawn, Client, ExchangeConfig, Member, MemberKey, MemberSet, Multiaddr, NetConfig,
    Security,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Bytes per second of one loopback TCP stream moving exactly `bytes` (the old single-stream
/// ideal).
async fn single_stream(bytes: usize) -> Result<f64> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let reader = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await?;
        // Read to the end: a reader that closed with bytes unread would reset the writer's
        // connection before its shutdown went through.
        let mut buf = vec![0u8; 1 << 20];
        let mut n = 0;
        loop {
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
        let step = chunk.len().min(bytes - sent);
        w.write_all(&chunk[..step]).await?;
        sent += step;
    }
    w.shutdown().await?;
    let got = reader.await??;
    Ok(got as f64 / t0.elapsed().as_secs_f64())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `n` connected libp2p nodes listening on `listen` (a TCP or QUIC multiaddr), dialling TCP
/// with `security` first.
async fn nodes(n: usize, listen: &str, security: Security) -> Result<Vec<Client>> {
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
    let mut boot: Option<Multiaddr> = None;
    for (i, (k, m)) in ids.iter().enumerate() {
        let mut cfg = NetConfig::new(k.clone(), m.clone(), i as u32, set.clone());
        cfg.listen = vec![listen.parse()?];
        cfg.bootnodes.extend(boot.clone());
        cfg.heartbeat = Duration::from_millis(200);
        cfg.security = security;
        let c = spawn(cfg)?;
        if boot.is_none() {
            boot = c.listen_addrs().await.into_iter().next();
        }
        clients.push(c);
    }
    let t = Instant::now();
    while clients.iter().any(|c| c.snapshot().connected.len() < n - 1) {
        ensure!(
            t.elapsed() < Duration::from_secs(30),
            "the {listen} mesh did not form"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(clients)
}

/// Seconds of each of `repeat` libp2p exchanges (rounds 1..=repeat) of `payloads`, and whether
/// every peer included every payload every time.
async fn libp2p_secs(
    listen: &str,
    security: Security,
    payloads: &[Arc<Vec<u8>>],
    repeat: u32,
) -> Result<(Vec<f64>, bool)> {
    let clients = nodes(payloads.len(), listen, security).await?;
    let mut secs = Vec::new();
    let mut complete = true;
    for round in 1..=repeat {
        let t0 = Instant::now();
        let tasks: Vec<_> = clients
            .iter()
            .zip(payloads)
            .map(|(c, p)| {
                let (c, p) = (c.clone(), p.clone());
                tokio::spawn(
                    async move { all_gather(&c, round, p, ExchangeConfig::default()).await },
                )
            })
            .collect();
        for t in tasks {
            let out = t.await??;
            if out.included.len() != payloads.len() {
                eprintln!("{listen} round {round}: excluded {:?}", out.excluded);
                complete = false;
            }
        }
        secs.push(t0.elapsed().as_secs_f64());
    }
    for c in &clients {
        c.shutdown().await;
    }
    Ok((secs, complete))
}

/// Prints `{"bench":"allreduce", "raw_tcp_secs", "noise_secs", "tls_secs",
/// "libp2p_tcp_secs" (TCP + Noise + Yamux), "libp2p_tcp_tls_secs" (TCP + TLS + Yamux),
/// "libp2p_quic_secs", "ratio" (best libp2p ÷ raw TCP), "ratio_vs_noise" (libp2p TCP + Noise ÷
/// Noise alone), "ratio_vs_tls" (libp2p TCP + TLS ÷ TLS alone), "…_gbps" (GB/s = 10⁹ bytes/s
/// received per peer), "faster_transport" (`tcp-noise`, `tcp-tls` or `quic`), ...}`: medians
/// of `repeat` all-gathers of `peers` incompressible payloads of the int8 codec's size for
/// `params` parameters (≈ `params` bytes each), every peer sending to every other at once, over
/// in-process swarms on 127.0.0.1. The libp2p figures include the signed announcements.
///
/// # Errors
/// Fewer than 2 peers or no repetition; a mesh that does not form within 30 s; socket and
/// transport errors.
pub fn run(peers: u32, params: usize, repeat: u32) -> Result<()> {
    ensure!(peers >= 2 && repeat >= 1, "--peers ≥ 2 and --repeat ≥ 1");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let n = peers as usize;
        // ≈ 1 byte per parameter + one f32 scale per 1024 (int8 codec), incompressible.
        let payload_len = params + params.div_ceil(1024) * 4;
        let payloads: Vec<Arc<Vec<u8>>> = (0..n)
            .map(|i| {
                let mut v = vec![0u8; payload_len];
                blake3::Hasher::new()
                    .update(&[i as u8])
                    .finalize_xof()
                    .fill(&mut v);
                Arc::new(v)
            })
            .collect();
        let single = single_stream(payload_len.max(1 << 20) * 4).await?;
        let (mut raw, mut noise, mut tls) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..repeat {
            raw.push(all_gather_secs(&payloads, Wire::Tcp).await?);
            noise.push(all_gather_secs(&payloads, Wire::Noise).await?);
            tls.push(all_gather_secs(&payloads, Wire::Tls).await?);
        }
        let tcp_addr = "/ip4/127.0.0.1/tcp/0";
        let (tcp, tcp_ok) = libp2p_secs(tcp_addr, Security::Noise, &payloads, repeat).await?;
        let (tcp_tls, tcp_tls_ok) = libp2p_secs(tcp_addr, Security::Tls, &payloads, repeat).await?;
        let (quic, quic_ok) = libp2p_secs(
            "/ip4/127.0.0.1/udp/0/quic-v1",
            Security::default(),
            &payloads,
            repeat,
        )
        .await?;
        let (raw, noise, tls) = (median(raw), median(noise), median(tls));
        let (tcp, tcp_tls, quic) = (median(tcp), median(tcp_tls), median(quic));
        let (faster, best) = [("tcp-noise", tcp), ("tcp-tls", tcp_tls), ("quic", quic)]
            .into_iter()
            .min_by(|x, y| x.1.total_cmp(&y.1))
            .unwrap_or(("tcp-noise", tcp));
        let per_peer = ((n - 1) * payload_len) as f64;
        let gbps = |s: f64| per_peer / s / 1e9;
        println!(
            "{}",
            json!({
                "bench": "allreduce",
                "peers": n,
                "params": params,
                "payload_bytes": payload_len,
                "bytes_per_peer": per_peer,
                "repeat": repeat,
                "raw_tcp_secs": raw,
                "noise_secs": noise,
                "tls_secs": tls,
                "libp2p_tcp_secs": tcp,
                "libp2p_tcp_tls_secs": tcp_tls,
                "libp2p_quic_secs": quic,
                "ratio": best / raw,
                "ratio_vs_noise": tcp / noise,
                "ratio_vs_tls": tcp_tls / tls,
                "raw_tcp_gbps": gbps(raw),
                "noise_gbps": gbps(noise),
                "tls_gbps": gbps(tls),
                "libp2p_tcp_gbps": gbps(tcp),
                "libp2p_tcp_tls_gbps": gbps(tcp_tls),
                "libp2p_quic_gbps": gbps(quic),
                "faster_transport": faster,
                "single_stream_tcp_gbps": single / 1e9,
                "all_included": tcp_ok && tcp_tls_ok && quic_ok,
                "cores": std::thread::available_parallelism().map_or(1, |c| c.get()),
            })
        );
        Ok(())
    })
}
