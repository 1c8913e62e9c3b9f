//! Real swarms on 127.0.0.1: all-gather, a killed peer, checkpoint catch-up, hostile peers.
#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use std::sync::Arc;
use std::time::Duration;

use parity_scale_codec::Encode;
use synod_checkpoint::{NamedTensor, ParamSet};
use synod_codec::EncodeOptions;
use synod_diloco::{encode_pseudo_gradient, Contribution, Mean, NesterovSgd, OuterState};
use synod_p2p::libp2p_identity::Keypair;
use synod_p2p::message::{self, Body, Envelope};
use synod_p2p::{
    all_gather, spawn, Client, ExchangeConfig, ExchangeOutcome, Member, MemberKey, MemberSet,
    Multiaddr, NetConfig,
};

const POOL: u64 = 3;

fn ids(n: u8) -> Vec<(Keypair, Arc<MemberKey>)> {
    (0..n)
        .map(|i| {
            (
                Keypair::ed25519_from_bytes([i + 1; 32]).unwrap(),
                Arc::new(MemberKey::from_seed([i + 1; 32])),
            )
        })
        .collect()
}

fn member_set(ids: &[(Keypair, Arc<MemberKey>)]) -> MemberSet {
    MemberSet::new(
        POOL,
        ids.iter()
            .enumerate()
            .map(|(i, (k, m))| Member {
                index: i as u32,
                peer_id: k.public().to_peer_id(),
                key: m.public(),
            })
            .collect(),
    )
}

/// The TCP port of `addr` (`/ip4/…/tcp/PORT/…`).
fn tcp_port(addr: &Multiaddr) -> u16 {
    addr.iter()
        .find_map(|p| match p {
            libp2p::multiaddr::Protocol::Tcp(port) => Some(port),
            _ => None,
        })
        .expect("a TCP address")
}

/// Member 0 of `set` with the tests' heartbeat (500 ms) and at most 8 connections (and 8
/// pending handshakes), so that a few sockets reach its limits.
fn small_node(ids: &[(Keypair, Arc<MemberKey>)], set: &MemberSet) -> Client {
    let mut cfg = NetConfig::new(ids[0].0.clone(), ids[0].1.clone(), 0, set.clone());
    cfg.heartbeat = Duration::from_millis(500);
    cfg.max_connections = 8;
    spawn(cfg).unwrap()
}

async fn start(
    ids: &[(Keypair, Arc<MemberKey>)],
    set: &MemberSet,
    i: usize,
    key: Arc<MemberKey>,
    boot: Option<Multiaddr>,
) -> Client {
    let mut cfg = NetConfig::new(ids[i].0.clone(), key, i as u32, set.clone());
    cfg.heartbeat = Duration::from_millis(500);
    cfg.bootnodes.extend(boot);
    spawn(cfg).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_address_in_use_is_reported_with_its_cause() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let ids = ids(1);
    let set = member_set(&ids);
    let mut cfg = NetConfig::new(ids[0].0.clone(), ids[0].1.clone(), 0, set);
    cfg.listen = vec![format!("/ip4/127.0.0.1/tcp/{port}").parse().unwrap()];
    let Err(e) = spawn(cfg) else {
        panic!("listening on a port in use must fail")
    };
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("listening on /ip4/127.0.0.1/tcp/{port}")) && msg.contains("in use"),
        "the error names the address and the OS cause: {msg}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbage_relay_is_not_trusted_again_after_a_restart() {
    let ids = ids(2);
    let set = member_set(&ids);
    let file = std::env::temp_dir().join(format!("synod-distrust-{}", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let config = |file: Option<std::path::PathBuf>| {
        let mut cfg = NetConfig::new(ids[0].0.clone(), ids[0].1.clone(), 0, set.clone());
        cfg.distrust_file = file;
        cfg
    };
    let relay = ids[1].0.public().to_peer_id();
    let node = spawn(config(Some(file.clone()))).unwrap();
    node.distrust_relay(relay);
    node.distrust_relay(relay);
    drop(node);
    // A damaged line costs only itself.
    let mut text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.lines().count(), 1, "recorded once: {text:?}");
    text.push_str("not a peer id\n");
    std::fs::write(&file, text).unwrap();
    let restarted = spawn(config(Some(file.clone()))).unwrap();
    assert!(
        restarted.snapshot().distrusted.contains(&relay),
        "the restarted node still distrusts the relay"
    );
    let forgetful = spawn(config(None)).unwrap();
    assert!(forgetful.snapshot().distrusted.is_empty());
    std::fs::remove_file(&file).unwrap();
}

/// [`network`] of `n` after one round (round 1) that included everyone: the mesh is up.
async fn network_after_a_round(n: u8) -> (Vec<(Keypair, Arc<MemberKey>)>, Vec<Client>) {
    let (ids, _set, clients) = network(n).await;
    let outcomes = gather(&clients, 1, 0).await;
    assert!(outcomes.iter().all(|o| o.included.len() == usize::from(n)));
    (ids, clients)
}

async fn network(n: u8) -> (Vec<(Keypair, Arc<MemberKey>)>, MemberSet, Vec<Client>) {
    let ids = ids(n);
    let set = member_set(&ids);
    let first = start(&ids, &set, 0, ids[0].1.clone(), None).await;
    let boot = first.listen_addrs().await.into_iter().next().unwrap();
    let mut clients = vec![first];
    for i in 1..n as usize {
        clients.push(start(&ids, &set, i, ids[i].1.clone(), Some(boot.clone())).await);
    }
    (ids, set, clients)
}

fn theta() -> ParamSet {
    ParamSet::new(vec![
        NamedTensor {
            name: "a".into(),
            shape: vec![64, 33],
            data: (0..64 * 33).map(|i| (i as f32 * 0.01).sin()).collect(),
        },
        NamedTensor {
            name: "b".into(),
            shape: vec![7],
            data: vec![0.5; 7],
        },
    ])
    .unwrap()
}

fn payload(member: u32) -> Arc<Vec<u8>> {
    let t = theta();
    let delta: Vec<Vec<f32>> = t
        .tensors()
        .iter()
        .map(|x| {
            (0..x.numel())
                .map(|i| ((i as u32 * 7 + member * 13) % 17) as f32 * 1e-3 - 8e-3)
                .collect()
        })
        .collect();
    Arc::new(encode_pseudo_gradient(&t, &delta, &EncodeOptions::default()).unwrap())
}

/// Milliseconds since the Unix epoch: what heartbeats are numbered with.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Member `member`'s signed heartbeat about `round` numbered `seq`, as sent on the wire.
fn heartbeat(ids: &[(Keypair, Arc<MemberKey>)], member: usize, round: u32, seq: u64) -> Vec<u8> {
    let e = Envelope {
        pool: POOL,
        round,
        member: member as u32,
        peer_id: ids[member].0.public().to_peer_id().to_bytes(),
        body: Body::Alive { seq, payload: None },
    };
    message::sign(e, &ids[member].1).encode()
}

/// Members 0–2 of four, started honestly and connected, and member 3's node signing with
/// `key` (its registered key or not): the honest clients and member 3's.
async fn three_honest_and_a_fourth(
    ids: &[(Keypair, Arc<MemberKey>)],
    key: Arc<MemberKey>,
) -> (Vec<Client>, Client) {
    let set = member_set(ids);
    let first = start(ids, &set, 0, ids[0].1.clone(), None).await;
    let boot = first.listen_addrs().await.into_iter().next().unwrap();
    let mut honest = vec![first];
    for i in 1..3 {
        honest.push(start(ids, &set, i, ids[i].1.clone(), Some(boot.clone())).await);
    }
    let fourth = start(ids, &set, 3, key, Some(boot)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    (honest, fourth)
}

fn cfg() -> ExchangeConfig {
    ExchangeConfig {
        deadline: Duration::from_secs(40),
        ..ExchangeConfig::default()
    }
}

/// Runs round `round` on every client at once (client i contributes `payload(first + i)`) and
/// returns the outcomes in client order.
async fn gather(clients: &[Client], round: u32, first: u32) -> Vec<ExchangeOutcome> {
    gather_with(clients, round, first, cfg()).await
}

/// [`gather`] with the exchange timing `xcfg`.
async fn gather_with(
    clients: &[Client],
    round: u32,
    first: u32,
    xcfg: ExchangeConfig,
) -> Vec<ExchangeOutcome> {
    let tasks: Vec<_> = clients
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let c = c.clone();
            tokio::spawn(async move {
                all_gather(&c, round, payload(first + i as u32), xcfg)
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_peers_gather_the_same_set_and_compute_the_same_checkpoint() {
    let (_, _, clients) = network(4).await;
    let outcomes = gather(&clients, 1, 0).await;
    let mut hashes = Vec::new();
    for out in outcomes {
        assert_eq!(
            out.included.iter().map(|c| c.member).collect::<Vec<_>>(),
            vec![0, 1, 2, 3],
            "{:?}",
            out.excluded
        );
        assert!(out.excluded.is_empty());
        // Outer step with lr 1, no momentum: θ_new = θ − mean(decoded Δ).
        let mut s = OuterState::new(theta(), NesterovSgd::new(1.0, 0.0));
        let r = s.apply(&contributions(&out.included), &Mean).unwrap();
        let decoded: Vec<_> = (0..4)
            .map(|m| synod_diloco::decode_pseudo_gradient(&theta(), m, &payload(m)).unwrap())
            .collect();
        for (ti, t) in theta().tensors().iter().enumerate() {
            for (j, x) in t.data.iter().enumerate() {
                let mean = decoded.iter().map(|d| d[ti][j]).sum::<f32>() / 4.0;
                assert!((s.params.tensors()[ti].data[j] - (x - mean)).abs() < 1e-6);
            }
        }
        hashes.push(r.hash);
    }
    assert!(hashes.windows(2).all(|w| w[0] == w[1]));
    for c in &clients {
        c.shutdown().await;
    }
}

/// A member whose first dial of its bootnode failed (started before the bootnode listened)
/// knows no other address and nobody knows its: it dials the bootnode again on its heartbeat
/// and joins the round once the bootnode is up, instead of staying alone for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_started_before_its_bootnode_joins_once_the_bootnode_is_up() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let ids = ids(3);
    let set = member_set(&ids);
    // The bootnode's port, held by a gate that takes each connection and closes it at once
    // (a refused dial), until the bootnode itself listens there.
    let gate = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    gate.set_nonblocking(true).unwrap();
    let port = gate.local_addr().unwrap().port();
    let (refused, open) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let gatekeeper = {
        let (refused, open) = (refused.clone(), open.clone());
        std::thread::spawn(move || {
            while !open.load(Ordering::SeqCst) {
                if let Ok((stream, _)) = gate.accept() {
                    drop(stream);
                    refused.fetch_add(1, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let boot: Multiaddr = format!("/ip4/127.0.0.1/tcp/{port}").parse().unwrap();
    let early = start(&ids, &set, 2, ids[2].1.clone(), Some(boot.clone())).await;
    for _ in 0..200 {
        if refused.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        refused.load(Ordering::SeqCst) > 0,
        "the early member's first dial was refused"
    );
    open.store(true, Ordering::SeqCst);
    gatekeeper.join().unwrap();
    let mut cfg = NetConfig::new(ids[0].0.clone(), ids[0].1.clone(), 0, set.clone());
    cfg.heartbeat = Duration::from_millis(500);
    cfg.listen = vec![boot.clone()];
    let first = spawn(cfg).unwrap();
    let second = start(&ids, &set, 1, ids[1].1.clone(), Some(boot)).await;
    let clients = vec![first, second, early];
    let outcomes = gather(&clients, 1, 0).await;
    for out in outcomes {
        assert_eq!(
            out.included.iter().map(|c| c.member).collect::<Vec<_>>(),
            vec![0, 1, 2],
            "{:?}",
            out.excluded
        );
    }
    for c in &clients {
        c.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_peer_killed_mid_round_is_excluded_and_the_survivors_agree() {
    let (_, _, clients) = network(4).await;
    // Let everyone see everyone, then kill member 3 before it publishes.
    tokio::time::sleep(Duration::from_secs(2)).await;
    clients[3].shutdown().await;
    let started = std::time::Instant::now();
    let outcomes = gather(&clients[..3], 1, 0).await;
    let mut sets = Vec::new();
    for out in outcomes {
        assert_eq!(
            out.excluded.iter().map(|e| e.0).collect::<Vec<_>>(),
            vec![3]
        );
        sets.push(
            out.included
                .iter()
                .map(|c| (c.member, blake3::hash(&c.payload)))
                .collect::<Vec<_>>(),
        );
    }
    assert!(sets.windows(2).all(|w| w[0] == w[1]));
    assert_eq!(sets[0].len(), 3);
    // Excluded within the 10 s liveness window (plus scheduling slack), well before the 40 s deadline.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?}",
        started.elapsed()
    );
    for c in &clients[..3] {
        c.shutdown().await;
    }
}

/// Every outcome includes members 0 and 1 and leaves member 2 out, its payload announced but
/// not delivered.
fn assert_only_2_left_out_undelivered(outcomes: &[ExchangeOutcome]) {
    for out in outcomes {
        let members: Vec<u32> = out.included.iter().map(|c| c.member).collect();
        assert_eq!(members, vec![0, 1], "left out: {:?}", out.excluded);
        assert_eq!(out.excluded.len(), 1);
        assert_eq!(out.excluded[0].0, 2);
        assert!(
            out.excluded[0].1.starts_with("announced but not delivered"),
            "{:?}",
            out.excluded
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_that_heartbeats_but_never_delivers_is_dropped_after_the_dead_time_not_at_the_deadline(
) {
    // The stall attack: member 2 announces its payload and keeps heartbeating, but serves it to
    // nobody. Its peers must not retry until the round deadline (60 s here, 300 s in a pool).
    // The mesh has done a round first, so every member has heard every other; the dead time
    // (20 s) leaves an honest member room for a scheduling stall of the loaded test machine.
    let (_, clients) = network_after_a_round(3).await;
    clients[2]
        .withhold_own_payloads(Some(std::collections::BTreeSet::new()))
        .await
        .unwrap();
    let xcfg = ExchangeConfig {
        deadline: Duration::from_secs(60),
        dead_after: Duration::from_secs(20),
        ..ExchangeConfig::default()
    };
    let started = std::time::Instant::now();
    let withholder = clients[2].clone();
    let withholding =
        tokio::spawn(async move { all_gather(&withholder, 2, payload(5), xcfg).await });
    // Round 2's payloads differ from round 1's (3, 4, 5): none is held already.
    let outcomes = gather_with(&clients[..2], 2, 3, xcfg).await;
    let elapsed = started.elapsed();
    assert_only_2_left_out_undelivered(&outcomes);
    // Dropped 20 s (`dead_after`) after the first failed fetch, well before the 60 s deadline.
    assert!(elapsed < Duration::from_secs(45), "took {elapsed:?}");
    let _ = withholding.await;
    for c in &clients {
        c.shutdown().await;
    }
}

/// The refusing variant of the stall attack: member 2 announces its payload and keeps
/// heartbeating, but takes every request for it and never answers (or refuses it, or resets
/// the stream), so no "not found" ever starts the clock. Its peers leave it out
/// `announce_grace` (at least `dead_after`: 10 s here) after their first failed ask of it, not
/// at the round's deadline (60 s here), which it would otherwise hold every exchange, and so
/// every round, open until.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_that_announces_and_stalls_every_request_is_left_out_before_the_deadline() {
    // The first ask is cut at the transfer's stall limit (10 s), then 10 s of grace: well
    // before 60 s.
    faulty_author_is_left_out_within(false, Duration::from_secs(40)).await;
}

/// Member 2 announces its payload and serves it to members 0 and 1 as a staller (takes every
/// request and never answers) or, with `drip`, as a dripper (the data's header, then
/// nothing); they (exchange deadline 60 s, `announce_grace` 5 s) leave it out as undelivered
/// within `within`.
async fn faulty_author_is_left_out_within(drip: bool, within: Duration) {
    let (_, _, clients) = network(3).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    if drip {
        clients[2].drip_payloads_to([0, 1].into()).await.unwrap();
    } else {
        clients[2].stall_payloads_to([0, 1].into()).await.unwrap();
    }
    let xcfg = ExchangeConfig {
        deadline: Duration::from_secs(60),
        announce_grace: Duration::from_secs(5),
        ..ExchangeConfig::default()
    };
    let started = std::time::Instant::now();
    let faulty = clients[2].clone();
    let serving = tokio::spawn(async move { all_gather(&faulty, 1, payload(2), xcfg).await });
    let outcomes = gather_with(&clients[..2], 1, 0, xcfg).await;
    let elapsed = started.elapsed();
    assert_only_2_left_out_undelivered(&outcomes);
    assert!(elapsed < within, "took {elapsed:?}");
    let _ = serving.await;
    for c in &clients {
        c.shutdown().await;
    }
}

/// The drip attack: member 2 announces its payload, gives it to nobody, and answers every ask
/// with the data's header and then nothing. Each ask is cut by the transfer's pace (10 s
/// after the header) and asked again; a header used to count as the author "sending after
/// all" and restarted its failure clock, so it held every exchange, and so every round, to
/// the deadline (60 s here). Its peers now leave it out once its grace and its payload's body
/// time at the slowest rate kept have passed since the first cut ask (about 30 s here).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_author_that_answers_every_ask_and_then_drips_is_left_out_before_the_deadline() {
    // Bounded from the first ask: 10 s of grace and the body's 10 s at the slowest rate kept
    // (about 22 s), well before 60 s.
    faulty_author_is_left_out_within(true, Duration::from_secs(45)).await;
}

/// The mute attack: member 2 stays live (its node heartbeats) but never announces a payload.
/// Its peers leave it out `announce_grace` (3 s here) after their own announcements, not at
/// the round's deadline (40 s here), which a live member would otherwise hold every exchange,
/// and so every round, open until.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_that_heartbeats_but_never_announces_is_left_out_after_the_grace_not_at_the_deadline(
) {
    let (_, _, clients) = network(3).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let xcfg = ExchangeConfig {
        announce_grace: Duration::from_secs(3),
        ..cfg()
    };
    let started = std::time::Instant::now();
    let outcomes = gather_with(&clients[..2], 1, 0, xcfg).await;
    let elapsed = started.elapsed();
    for out in &outcomes {
        assert_eq!(
            out.included.iter().map(|c| c.member).collect::<Vec<_>>(),
            vec![0, 1]
        );
        assert_eq!(out.excluded.len(), 1, "{:?}", out.excluded);
        assert_eq!(out.excluded[0].0, 2);
        assert!(
            out.excluded[0]
                .1
                .starts_with("live but announced nothing within 3 s"),
            "{:?}",
            out.excluded
        );
    }
    assert!(elapsed < Duration::from_secs(20), "took {elapsed:?}");
    for c in &clients {
        c.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_author_that_could_not_serve_at_first_is_asked_again_and_included() {
    // Member 0's first answers are "not found" (it withholds for 2 s), and no relay can have
    // its payload yet. Before, its peers asked the author once and then only the relays, so
    // they could never get it; now the author is back in the rotation and everyone includes it.
    let (_, _, clients) = network(3).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    clients[0]
        .withhold_own_payloads(Some(std::collections::BTreeSet::new()))
        .await
        .unwrap();
    let author = clients[0].clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(2)).await;
        author.withhold_own_payloads(None).await.unwrap();
    });
    let outcomes = gather(&clients, 1, 0).await;
    for out in &outcomes {
        assert_eq!(
            out.included.iter().map(|c| c.member).collect::<Vec<_>>(),
            vec![0, 1, 2],
            "excluded: {:?}",
            out.excluded
        );
    }
    for c in &clients {
        c.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_late_joiner_catches_up_from_a_checkpoint_and_contributes_next_round() {
    let (ids, set2, clients) = network(2).await;
    // Round 1 between members 0 and 1.
    let outcomes = gather(&clients, 1, 0).await;
    let mut states = Vec::new();
    let mut ckpt = Vec::new();
    for out in outcomes {
        let mut s = OuterState::new(theta(), NesterovSgd::new(0.7, 0.9));
        ckpt = s
            .apply(&contributions(&out.included), &Mean)
            .unwrap()
            .checkpoint;
        states.push(s);
    }
    // Member 2 registers (on-chain: join_pool) and starts late; the expected hash comes from the chain.
    let expected = *blake3::hash(&ckpt).as_bytes();
    let hash = clients[0]
        .serve_checkpoint(Arc::new(ckpt.clone()))
        .await
        .unwrap();
    assert_eq!(hash, expected);
    let all = self::ids(3);
    let set3 = member_set(&all);
    assert_eq!(set3.get(1), set2.get(1));
    let boot = clients[0].listen_addrs().await.into_iter().next().unwrap();
    let late = start(&all, &set3, 2, all[2].1.clone(), Some(boot)).await;
    let seed_peer = ids[0].0.public().to_peer_id();
    let t = std::time::Instant::now();
    while !late.snapshot().connected.contains(&seed_peer) && t.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Not yet in node 0's member set: refused.
    assert!(late
        .fetch_checkpoint(seed_peer, expected, 1 << 30)
        .await
        .is_err());
    for c in &clients {
        c.set_members(set3.clone()).await.unwrap();
    }
    let got = late
        .fetch_checkpoint(seed_peer, expected, 1 << 30)
        .await
        .unwrap();
    assert_eq!(got, ckpt);
    let mut wrong = expected;
    wrong[0] ^= 1;
    assert!(matches!(
        late.fetch_checkpoint(seed_peer, wrong, 1 << 30).await,
        Err(synod_p2p::NetError::NotFound)
    ));
    assert!(matches!(
        late.fetch_checkpoint(seed_peer, expected, 1000).await,
        Err(synod_p2p::NetError::TooLarge(_))
    ));
    let mut late_state =
        OuterState::from_checkpoint(synod_checkpoint::from_bytes(&got).unwrap(), 0.7, 0.9, 1)
            .unwrap();
    // Round 2 with all three: everyone, the late joiner included, computes the same checkpoint.
    let mut everyone: Vec<Client> = clients.clone();
    everyone.push(late.clone());
    let outcomes = gather(&everyone, 2, 10).await;
    let mut hashes = Vec::new();
    for (i, out) in outcomes.into_iter().enumerate() {
        assert_eq!(
            out.included.iter().map(|c| c.member).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        let s = if i < 2 {
            &mut states[i]
        } else {
            &mut late_state
        };
        hashes.push(s.apply(&contributions(&out.included), &Mean).unwrap().hash);
    }
    assert!(hashes.windows(2).all(|w| w[0] == w[1]), "{hashes:?}");
    for c in &everyone {
        c.shutdown().await;
    }
}

/// libp2p-gossipsub 0.50.1 checks its size limit against everything buffered from the stream,
/// not against one frame: with the limit at our 8 KiB message bound, two signed messages read
/// together were refused, each refusal reset the stream, and after five the connection's
/// gossip was switched off for good, so the sender's later announcements never arrived and
/// it was excluded as silent (seen in `bench allreduce`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_of_signed_messages_does_not_switch_off_the_senders_gossip() {
    // A first round proves the mesh is up, so the burst reaches member 0.
    let (ids, clients) = network_after_a_round(2).await;
    // Signed first, then published back to back, so they reach the receiver faster than one
    // at a time.
    // As many as one author may send at once (peers meter authors: a larger burst of new
    // messages is a flood).
    let burst: Vec<Vec<u8>> = (0..16u64)
        .map(|k| heartbeat(&ids, 1, 1, now_ms() + k))
        .collect();
    for bytes in burst {
        clients[1].publish_raw(bytes).await.unwrap();
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    for round in 2..=3 {
        let outcomes = gather(&clients, round, 0).await;
        for out in &outcomes {
            let got: Vec<u32> = out.included.iter().map(|c| c.member).collect();
            assert_eq!(got, vec![0, 1], "round {round}: {:?}", out.excluded);
        }
    }
    for c in &clients {
        c.shutdown().await;
    }
}

/// Gossipsub's limit for the pool topic leaves room for its own envelope, so it would carry a
/// message a little over ours, and every peer bans the author of such a message: a node must
/// not publish one, even by mistake.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_oversized_message_is_not_published_so_its_author_is_not_banned() {
    let (ids, clients) = network_after_a_round(2).await;
    clients[1]
        .publish_raw(vec![0; message::MAX_MESSAGE_BYTES + 1])
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let banned = clients[0].snapshot().banned;
    assert!(
        !banned.contains_key(&ids[1].0.public().to_peer_id()),
        "{banned:?}"
    );
    for c in &clients {
        c.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn garbage_forged_and_replayed_messages_are_rejected_and_the_sender_banned() {
    let ids = ids(4);
    // Member 3's slot is taken by a node signing with a key that is not the registered one.
    let (honest, rogue) =
        three_honest_and_a_fourth(&ids, Arc::new(MemberKey::from_seed([99; 32]))).await;
    rogue
        .publish_raw(b"\x00garbage that is no SCALE message".to_vec())
        .await
        .unwrap();
    // A replay: member 0's genuine message for round 0 re-sent by someone else.
    let old = Envelope {
        pool: POOL,
        round: 0,
        member: 0,
        peer_id: ids[0].0.public().to_peer_id().to_bytes(),
        body: Body::Leave,
    };
    rogue
        .publish_raw(message::sign(old, &ids[0].1).encode())
        .await
        .unwrap();
    // The rogue's own (badly signed) announcement, during the honest members' round.
    let r = rogue.clone();
    tokio::spawn(async move { all_gather(&r, 1, payload(3), cfg()).await });
    let outcomes = gather(&honest, 1, 0).await;
    let mut sets = Vec::new();
    for out in outcomes {
        sets.push(out.included.iter().map(|c| c.member).collect::<Vec<_>>());
    }
    assert!(sets.iter().all(|s| *s == vec![0, 1, 2]), "{sets:?}");
    let rogue_id = ids[3].0.public().to_peer_id();
    for c in &honest {
        let snap = c.snapshot();
        assert!(snap.banned.contains_key(&rogue_id), "{:?}", snap.banned);
        assert!(!snap.left.contains(&0), "the replayed leave must not count");
    }
    for c in honest.iter().chain([&rogue]) {
        c.shutdown().await;
    }
}

/// Heartbeat flood: a member sends thousands of valid signed heartbeats (a fresh `seq` makes
/// each a new gossip message, and each would cost an ML-DSA verification on the swarm loop
/// and delay the honest heartbeats queued behind it). Every peer meters authors before
/// verifying: past a small burst the flood is dropped unverified and its author banned, and
/// the honest members' round completes with all of them included.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_flooding_heartbeats_is_metered_and_banned_while_the_round_completes() {
    let ids = ids(4);
    let (honest, flooder) = three_honest_and_a_fourth(&ids, ids[3].1.clone()).await;
    let me = ids[3].0.public().to_peer_id();
    for k in 0..2_000u64 {
        // Fresh: its own clock's milliseconds, as its heartbeats are numbered.
        flooder
            .publish_raw(heartbeat(&ids, 3, 1, now_ms() + k))
            .await
            .unwrap();
    }
    let outcomes = gather(&honest, 1, 0).await;
    for (c, out) in honest.iter().zip(&outcomes) {
        let members: Vec<u32> = out.included.iter().map(|c| c.member).collect();
        assert_eq!(members, vec![0, 1, 2]);
        let snap = c.snapshot();
        let why = snap.banned.get(&me).map(String::as_str).unwrap_or("");
        assert!(why.contains("over the rate"), "{:?}", snap.banned);
    }
    for c in honest.iter().chain([&flooder]) {
        c.shutdown().await;
    }
}

/// Connection exhaustion without stake: identities that are no members of the pool (free to
/// make) dial a member until its connection limit is reached. Outsiders hold at most a
/// quarter of a node's connections and members bypass that limit, so a member that comes
/// later still connects and the two gather a round together.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn outsiders_cannot_hold_a_members_connection_slots() {
    let ids = ids(2);
    let set = member_set(&ids);
    let first = small_node(&ids, &set);
    let boot = first.listen_addrs().await.into_iter().next().unwrap();
    // Twelve outsiders, each a pool of its own, dial the member.
    let mut outsiders = Vec::new();
    for i in 0..12u8 {
        let kp = Keypair::ed25519_from_bytes([100 + i; 32]).unwrap();
        let key = Arc::new(MemberKey::from_seed([100 + i; 32]));
        let own = MemberSet::new(
            POOL + 1,
            vec![Member {
                index: 0,
                peer_id: kp.public().to_peer_id(),
                key: key.public(),
            }],
        );
        let mut cfg = NetConfig::new(kp, key, 0, own);
        cfg.bootnodes.push(boot.clone());
        outsiders.push(spawn(cfg).unwrap());
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let held = first.snapshot().connected.len();
    assert!(
        held <= 2,
        "outsiders hold {held} of the member's 8 connections"
    );
    let second = start(&ids, &set, 1, ids[1].1.clone(), Some(boot.clone())).await;
    let outcomes = gather(&[first.clone(), second.clone()], 1, 0).await;
    for out in &outcomes {
        let members: Vec<u32> = out.included.iter().map(|c| c.member).collect();
        assert_eq!(members, vec![0, 1]);
    }
    for c in outsiders.iter().chain([&first, &second]) {
        c.shutdown().await;
    }
}

/// Half-open handshake flood without stake: an outsider opens TCP connections to a member from
/// many addresses (127.0.0.2–127.0.0.17) and never speaks, reopening each one the node closes,
/// so that every inbound handshake the node accepts stays pending until its timeout (10 s).
/// Addresses no member came from hold at most a quarter of the handshakes, so a member that
/// connected before (its address known) and restarts on a new port, so that the node cannot
/// dial it, still connects in within a few seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn half_open_handshakes_cannot_shut_members_out() {
    let ids = ids(2);
    let set = member_set(&ids);
    let node = small_node(&ids, &set);
    let boot = node.listen_addrs().await.into_iter().next().unwrap();
    let member = ids[1].0.public().to_peer_id();
    let connected = |c: &Client| c.snapshot().connected.contains(&member);
    // The member connects once (the node learns its address once the member identified
    // itself), then goes away.
    let first = start(&ids, &set, 1, ids[1].1.clone(), Some(boot.clone())).await;
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    while !connected(&node) {
        assert!(
            tokio::time::Instant::now() < until,
            "the member never connected"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Identify has run: the member said it dialled the node's own address.
    tokio::time::sleep(Duration::from_secs(1)).await;
    first.shutdown().await;
    while connected(&node) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The flood: 40 silent connections from 16 addresses, topped up every 50 ms.
    let port = tcp_port(&boot);
    let flood = tokio::spawn(async move {
        let mut open: Vec<tokio::net::TcpStream> = Vec::new();
        for i in 0u32.. {
            open.retain(|c| {
                let mut b = [0u8; 1];
                !matches!(c.try_read(&mut b), Ok(0))
            });
            while open.len() < 40 {
                let from = std::net::Ipv4Addr::new(127, 0, 0, 2 + (i % 16) as u8);
                let socket = tokio::net::TcpSocket::new_v4().unwrap();
                socket.bind((from, 0).into()).unwrap();
                match socket.connect(([127, 0, 0, 1], port).into()).await {
                    Ok(c) => open.push(c),
                    Err(_) => break,
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    // The member restarts on another port: only its own dial can connect it.
    let second = start(&ids, &set, 1, ids[1].1.clone(), Some(boot.clone())).await;
    let start_at = tokio::time::Instant::now();
    // Within 8 s: before the flood's first half-open handshakes reach the transport's 10 s
    // handshake timeout (9 s after the member starts) and free their slots, so only the node's
    // admission can have let the member in (a loaded CI machine takes seconds to start one).
    while !connected(&node) {
        assert!(
            start_at.elapsed() < Duration::from_secs(8),
            "the member could not connect in through the flood of half-open handshakes"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    flood.abort();
    for c in [&node, &second] {
        c.shutdown().await;
    }
}

/// Opens 8 silent TCP connections from `from` to the node at `port` and counts those the node
/// holds open as pending handshakes after 500 ms (it closes at once those it refuses). The
/// connections are closed again when the returned count is known.
async fn handshakes_held(from: [u8; 4], port: u16) -> usize {
    let mut open = Vec::new();
    for _ in 0..8 {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind((from, 0).into()).unwrap();
        open.push(socket.connect(([127, 0, 0, 1], port).into()).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    open.iter()
        .filter(|c| {
            let mut b = [0u8; 1];
            matches!(c.try_read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
        })
        .count()
}

/// A TCP forwarder at 127.0.0.7 that the node dials as a member (its address handed out as the
/// member's by a third party, as a Kademlia answer would): the connection reaches the member
/// (at 127.0.0.8) and works, but the member neither lists the forwarder's address nor sees the
/// node at the other end, so the forwarder's own half-open handshakes get an outsider's share
/// (4 of 8), not a member address's (all 8). Dialled at its own address, the member is
/// learned: its address then holds all 8.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_forwarder_dialled_as_a_member_gets_no_members_share_of_handshakes() {
    let ids = ids(2);
    let set = member_set(&ids);
    let node = small_node(&ids, &set);
    let port = tcp_port(&node.listen_addrs().await[0]);
    let mut cfg = NetConfig::new(ids[1].0.clone(), ids[1].1.clone(), 1, set.clone());
    cfg.heartbeat = Duration::from_millis(500);
    cfg.listen = vec!["/ip4/127.0.0.8/tcp/0".parse().unwrap()];
    let member = spawn(cfg).unwrap();
    let direct = member.listen_addrs().await[0].clone();
    let target = tcp_port(&direct);
    let relay = tokio::net::TcpListener::bind("127.0.0.7:0").await.unwrap();
    let relay_port = relay.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = relay.accept().await {
            tokio::spawn(async move {
                // From the forwarder's own address, as from another host.
                let socket = tokio::net::TcpSocket::new_v4().unwrap();
                socket.bind(([127, 0, 0, 7], 0).into()).unwrap();
                let mut out = socket
                    .connect(([127, 0, 0, 8], target).into())
                    .await
                    .unwrap();
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
            });
        }
    });
    let peer = ids[1].0.public().to_peer_id();
    let via: Multiaddr = format!("/ip4/127.0.0.7/tcp/{relay_port}/p2p/{peer}")
        .parse()
        .unwrap();
    node.dial(via).await.unwrap();
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    while !node.snapshot().connected.contains(&peer) {
        assert!(tokio::time::Instant::now() < until, "never connected");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Identify has run over the forwarded connection.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let held = handshakes_held([127, 0, 0, 7], port).await;
    assert!(
        held <= 4,
        "the forwarder holds {held} of the node's 8 handshakes, a member address's share"
    );
    // The refused and the closed handshakes are gone; the member is dialled where it listens.
    tokio::time::sleep(Duration::from_millis(500)).await;
    node.dial(direct.with(libp2p::multiaddr::Protocol::P2p(peer)))
        .await
        .unwrap();
    // Identify runs over the direct connection: until it has, the address is an outsider's.
    // Poll (a loaded machine takes longer than an idle one) instead of sleeping a fixed time.
    let until = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut held = 0;
    while tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(500)).await;
        held = handshakes_held([127, 0, 0, 8], port).await;
        if held == 8 {
            break;
        }
    }
    assert_eq!(
        held, 8,
        "the member's own address holds a member address's share"
    );
    for c in [&node, &member] {
        c.shutdown().await;
    }
}

/// Replayed heartbeats: a member's own signed heartbeats, resent by anyone once gossipsub's
/// duplicate cache forgot them, would cost that member its rate (and, enough of them, a ban)
/// if they were metered. Heartbeats older than the freshness window are dropped before the
/// meter: here member 2 itself sends 500 of them, ten minutes old, and is neither banned nor
/// left out of the round.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stale_heartbeats_are_dropped_before_they_cost_their_author() {
    let (ids, clients) = network_after_a_round(3).await;
    let old = now_ms() - 600_000;
    for k in 0..500u64 {
        clients[2]
            .publish_raw(heartbeat(&ids, 2, 2, old + k))
            .await
            .unwrap();
    }
    let outcomes = gather(&clients, 2, 0).await;
    for (c, out) in clients.iter().zip(&outcomes) {
        let members: Vec<u32> = out.included.iter().map(|c| c.member).collect();
        assert_eq!(members, vec![0, 1, 2], "{:?}", out.excluded);
        assert!(c.snapshot().banned.is_empty(), "{:?}", c.snapshot().banned);
    }
    for c in &clients {
        c.shutdown().await;
    }
}

/// Equivocation: member 2 signs two payloads for round 1. Every peer that sees both bans it and
/// keeps the first two signed announcements, which prove it on-chain
/// (`verify_equivocation`, what `Challenges::report_equivocation` runs); each proof is taken once.
/// Both announcements stay known after the proof is taken (`Snapshot::announcements`), so a
/// member that saw the unserved one first can still fetch the one the others aggregated.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_equivocating_member_is_banned_and_its_two_signed_payloads_kept_as_proof() {
    let (ids, _, clients) = network(3).await;
    // Member 2's heartbeats reach both others (the gossip mesh is formed) before it
    // equivocates: on a loaded machine two seconds are not always enough.
    for c in &clients[..2] {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while !c.snapshot().last_seen.contains_key(&2) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "member 2 never heard"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let payload_ref = |digest: u8| message::PayloadRef {
        digest: [digest; 32],
        size: 100,
    };
    // Two heartbeats of one payload (distinct messages), then a second payload.
    for d in [0x11, 0x11, 0x22] {
        clients[2].announce_once(1, payload_ref(d)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let key = ids[2].1.public().0;
    let cheater = ids[2].0.public().to_peer_id();
    for c in &clients[..2] {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !c.snapshot().banned.contains_key(&cheater) {
            assert!(tokio::time::Instant::now() < deadline, "never banned");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let proofs = c.take_equivocations();
        assert_eq!(proofs.len(), 1, "{proofs:?}");
        let ((round, member), proof) = &proofs[0];
        assert_eq!((*round, *member), (1, 2));
        let (a, b) =
            synod_protocol::evidence::verify_equivocation(&proof.first, &proof.second, &key)
                .unwrap();
        assert_eq!(
            (a.payload.digest, b.payload.digest),
            ([0x11; 32], [0x22; 32])
        );
        assert!(c.take_equivocations().is_empty(), "a proof is taken once");
        // Both payloads stay known, first seen first: the pool may have aggregated either.
        let snap = c.snapshot();
        let digests: Vec<_> = snap
            .announcements(1, 2)
            .iter()
            .map(|a| a.payload.digest)
            .collect();
        assert_eq!(digests, [[0x11; 32], [0x22; 32]]);
    }
    for c in &clients {
        c.shutdown().await;
    }
}

/// An equivocator's two payloads reach the pool in different orders: member 0 saw first one
/// that is never served, while the others aggregated the other one (here member 1, which
/// relays it). Fetching the agreed set's payload by the first announcement alone finds it
/// nowhere; [`Client::fetch_announced_from`] asks for either and gets the one that exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_that_saw_an_equivocators_unserved_payload_first_fetches_the_aggregated_one() {
    let (_, _, clients) = network(3).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let real = payload(2);
    let digest = *blake3::hash(&real).as_bytes();
    let unserved = synod_p2p::message::PayloadRef {
        digest: [0x33; 32],
        size: real.len() as u64,
    };
    clients[2].announce_once(1, unserved).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    clients[2].set_round(1).await.unwrap();
    clients[2].set_payload(1, real.clone()).await.unwrap();
    clients[1].relay(1, 2, real.clone()).await.unwrap();
    let t = std::time::Instant::now();
    while clients[0].snapshot().announcements(1, 2).len() < 2 {
        assert!(t.elapsed() < Duration::from_secs(20), "never saw both");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let relay = clients[1].peer_id;
    let first = clients[0].snapshot().announced[&(1, 2)].payload;
    assert_eq!(first.digest, [0x33; 32], "the unserved payload came first");
    assert!(
        matches!(
            clients[0]
                .fetch_payload_from(relay, 2, 1, first, 1 << 20)
                .await,
            Err(synod_p2p::NetError::NotFound)
        ),
        "the first announcement alone finds nothing"
    );
    let (a, bytes) = clients[0]
        .fetch_announced_from(relay, 2, 1, 1 << 20)
        .await
        .unwrap();
    assert_eq!((a.payload.digest, bytes), (digest, real.to_vec()));
    let never = clients[0].fetch_announced_from(relay, 0, 1, 1 << 20).await;
    assert!(
        matches!(
            never,
            Err(synod_p2p::NetError::NotAnnounced {
                round: 1,
                member: 0
            })
        ),
        "{never:?}"
    );
    for c in &clients {
        c.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_payload_whose_author_died_is_fetched_from_a_peer_that_relays_it() {
    let (_, _, clients) = network(3).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let bytes = payload(0);
    let announced = synod_p2p::message::PayloadRef {
        digest: *blake3::hash(&bytes).as_bytes(),
        size: bytes.len() as u64,
    };
    clients[0].set_round(1).await.unwrap();
    clients[0].set_payload(1, bytes.clone()).await.unwrap();
    // Member 1 sees the announcement (as a peer fetches only what it saw announced), gets the
    // payload from the author and relays it; then the author dies.
    let t = std::time::Instant::now();
    while !clients[1].snapshot().announced.contains_key(&(1, 0))
        && t.elapsed() < Duration::from_secs(10)
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let got = clients[1]
        .fetch_payload(0, 1, announced, 1 << 20)
        .await
        .unwrap();
    clients[1].relay(1, 0, Arc::new(got)).await.unwrap();
    clients[0].shutdown().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        clients[2]
            .fetch_payload(0, 1, announced, 1 << 20)
            .await
            .is_err(),
        "the author is gone"
    );
    let relayed = clients[2]
        .fetch_payload_from(clients[1].peer_id, 0, 1, announced, 1 << 20)
        .await
        .unwrap();
    assert_eq!(relayed, **bytes);
    // A relay cannot pass off other bytes: a wrong digest is not served.
    let wrong = synod_p2p::message::PayloadRef {
        digest: [7; 32],
        size: announced.size,
    };
    assert!(clients[2]
        .fetch_payload_from(clients[1].peer_id, 0, 1, wrong, 1 << 20)
        .await
        .is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn served_checkpoints_are_bounded_so_memory_does_not_grow_with_the_rounds() {
    let (ids, _, clients) = network(2).await;
    let seed_peer = ids[0].0.public().to_peer_id();
    let t = std::time::Instant::now();
    while !clients[1].snapshot().connected.contains(&seed_peer)
        && t.elapsed() < Duration::from_secs(10)
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // One checkpoint per round (2.5 chunks each), more rounds than the node keeps; the first
    // three are pinned in turn: the last two pinned (the last final checkpoint and the one an
    // overlapped round starts from) stay.
    let (max, pins) = (
        synod_p2p::MAX_SERVED_CHECKPOINTS,
        synod_p2p::PINNED_CHECKPOINTS,
    );
    let n = max + 3;
    let mut hashes = Vec::new();
    for r in 0..n {
        let bytes = vec![r as u8; (5 << 20) / 2];
        hashes.push(clients[0].serve_checkpoint(Arc::new(bytes)).await.unwrap());
        if r < 3 {
            assert!(clients[0].pin_checkpoint(hashes[r]).await.unwrap());
            assert!(
                !clients[0].pin_checkpoint([9; 32]).await.unwrap(),
                "not served"
            );
        }
    }
    for (r, h) in hashes.iter().enumerate() {
        let got = clients[1].fetch_checkpoint(seed_peer, *h, 8 << 20).await;
        let pinned = (3 - pins..3).contains(&r);
        if pinned || r + max - pins >= n {
            assert_eq!(got.unwrap(), vec![r as u8; (5 << 20) / 2], "round {r}");
        } else {
            assert!(
                matches!(got, Err(synod_p2p::NetError::NotFound)),
                "round {r}'s checkpoint was dropped"
            );
        }
    }
    for c in &clients {
        c.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_restarted_mid_round_serves_its_kept_payload_again_without_being_banned() {
    let (ids, set, clients) = network(2).await;
    let author = ids[0].0.public().to_peer_id();
    // Member 0 announces its round-1 payload, then dies before anyone fetched it.
    let kept = payload(0).to_vec();
    clients[0].set_round(1).await.unwrap();
    let digest = clients[0]
        .set_payload(1, Arc::new(kept.clone()))
        .await
        .unwrap();
    let t = std::time::Instant::now();
    while !clients[1].snapshot().announced.contains_key(&(1, 0))
        && t.elapsed() < Duration::from_secs(10)
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(clients[1].snapshot().announced.contains_key(&(1, 0)));
    clients[0].shutdown().await;
    // Restarted with the same identity, it has moved on to round 2 and serves the bytes it
    // kept for round 1 (a fresh `seq`, the same signed digest).
    let boot = clients[1].listen_addrs().await.into_iter().next().unwrap();
    let restarted = start(&ids, &set, 0, ids[0].1.clone(), Some(boot)).await;
    restarted.set_round(2).await.unwrap();
    assert_eq!(
        restarted
            .set_payload(1, Arc::new(kept.clone()))
            .await
            .unwrap(),
        digest
    );
    let started = std::time::Instant::now();
    let out = all_gather(&clients[1], 1, payload(1), cfg()).await.unwrap();
    assert_eq!(
        out.included.iter().map(|c| c.member).collect::<Vec<_>>(),
        vec![0, 1],
        "excluded: {:?}",
        out.excluded
    );
    assert_eq!(*out.included[0].payload, kept);
    assert!(!clients[1].snapshot().banned.contains_key(&author));
    // Fetched, not waited out: well inside the 40 s deadline.
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    restarted.shutdown().await;
    clients[1].shutdown().await;
}

/// The exchange's included payloads as DiLoCo contributions.
fn contributions(included: &[synod_p2p::Gathered]) -> Vec<Contribution> {
    included
        .iter()
        .map(|g| Contribution {
            member: g.member,
            payload: g.payload.clone(),
        })
        .collect()
}

/// A registered member that is only a bare libp2p node: it dials `target` and opens streams on
/// `protocol` that never send a request. Returns the streams (held open while kept) and the
/// task driving its swarm.
async fn silent_streams(
    key: Keypair,
    target: (synod_p2p::PeerId, Multiaddr),
    protocol: libp2p::StreamProtocol,
    n: usize,
) -> (Vec<libp2p::Stream>, tokio::task::JoinHandle<()>) {
    use futures::StreamExt;
    let mut swarm = libp2p::SwarmBuilder::with_existing_identity(key)
        .with_tokio()
        .with_tcp(
            libp2p::tcp::Config::default(),
            libp2p::noise::Config::new,
            libp2p::yamux::Config::default,
        )
        .unwrap()
        .with_behaviour(|_| libp2p_stream::Behaviour::new())
        .unwrap()
        .with_swarm_config(|c| c.with_idle_connection_timeout(Duration::from_secs(120)))
        .build();
    let mut control = swarm.behaviour().new_control();
    swarm.dial(target.1).unwrap();
    let connected = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let libp2p::swarm::SwarmEvent::ConnectionEstablished { .. } =
                swarm.select_next_some().await
            {
                break;
            }
        }
    })
    .await;
    assert!(connected.is_ok(), "a member's connection is accepted");
    let driver = tokio::spawn(async move {
        loop {
            swarm.select_next_some().await;
        }
    });
    let mut streams = Vec::new();
    for _ in 0..n {
        let open = control.open_stream(target.0, protocol.clone());
        if let Ok(Ok(s)) = tokio::time::timeout(Duration::from_secs(10), open).await {
            streams.push(s);
        }
    }
    (streams, driver)
}

/// Slot exhaustion: colluding members open every stream they may to an honest member and send
/// nothing, holding its serving slots for as long as it waits for a request (here a minute),
/// and again after. An honest requester (a verifier fetching trace states, a juror fetching
/// residuals, a member fetching a payload) is still served at once from the slots reserved to
/// it, so unavailability cannot be manufactured by others.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn silent_streams_of_colluding_members_cannot_take_an_honest_requesters_serving_slots() {
    use synod_p2p::{MAX_SERVED_PER_PEER, MAX_SERVED_STREAMS, RESERVED_PER_MEMBER};
    // Enough colluders to take every shared slot beside their own reserved ones.
    let attackers = MAX_SERVED_STREAMS / (MAX_SERVED_PER_PEER - RESERVED_PER_MEMBER) + 1;
    let ids = ids(2 + attackers as u8);
    let set = member_set(&ids);
    let mut cfg = NetConfig::new(ids[0].0.clone(), ids[0].1.clone(), 0, set.clone());
    cfg.heartbeat = Duration::from_millis(500);
    cfg.limits.stall = Duration::from_secs(60);
    let victim = spawn(cfg).unwrap();
    let addr = victim.listen_addrs().await.into_iter().next().unwrap();
    let victim_peer = ids[0].0.public().to_peer_id();
    let hash = victim
        .serve_checkpoint(Arc::new(vec![7u8; 1 << 20]))
        .await
        .unwrap();
    let mut held = Vec::new();
    for (key, _) in &ids[2..] {
        held.push(
            silent_streams(
                key.clone(),
                (victim_peer, addr.clone()),
                synod_p2p::protocol::CHECKPOINT_PROTOCOL,
                MAX_SERVED_PER_PEER,
            )
            .await,
        );
    }
    let opened: usize = held.iter().map(|(s, _)| s.len()).sum();
    assert!(
        opened >= MAX_SERVED_STREAMS + attackers * RESERVED_PER_MEMBER,
        "the attack opens more streams than the shared slots and its reserved ones: {opened}"
    );
    // Let the victim's serving loop take them all in.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let honest = start(&ids, &set, 1, ids[1].1.clone(), Some(addr)).await;
    let t = std::time::Instant::now();
    while !honest.snapshot().connected.contains(&victim_peer)
        && t.elapsed() < Duration::from_secs(10)
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let t = std::time::Instant::now();
    let got = tokio::time::timeout(
        Duration::from_secs(5),
        honest.fetch_checkpoint(victim_peer, hash, 2 << 20),
    )
    .await;
    assert!(
        matches!(&got, Ok(Ok(bytes)) if bytes.len() == 1 << 20),
        "the honest requester was served within {:?} while the attack held its streams: {got:?}",
        t.elapsed()
    );
    for (_, driver) in &held {
        driver.abort();
    }
    for c in [&victim, &honest] {
        c.shutdown().await;
    }
}

/// Colluding members download an accused's checkpoint again and again, on every stream they
/// may hold, so that its upload link is shared out so finely that a juror's fetch of its
/// residual is cut below the slowest kept rate, every time it asks: the honest accused would
/// look as if it withheld its evidence. (The colluders cut nothing themselves: they accept any
/// rate.) Their best strategy against the rule: all 8 streams downloading before the juror
/// asks, then, once evidence is served, as many transfers as they may hold (2 downloads and 2
/// evidence fetches each). Evidence goes first: once the downloads running at the juror's
/// first ask are cut, its next ask shares the link with at most 4 transfers per colluder. The
/// accused's link is 6 MB/s (`NetConfig::max_upload`), the pool's limits 6 s and 200 kB/s
/// (each 1 MiB step within 6 s: ≥ 175 kB/s): 6 colluders × 8 streams leave each transfer
/// ≈ 122 kB/s (cut), 6 × 4 ≈ 240 kB/s (kept).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn colluders_downloading_an_accuseds_checkpoint_cannot_starve_its_evidence() {
    use synod_p2p::{Limits, MAX_SERVED_PER_PEER};
    const COLLUDERS: usize = 6;
    let pool_limits = Limits {
        stall: Duration::from_secs(6),
        min_rate: 200_000,
    };
    let ids = ids(2 + COLLUDERS as u8);
    let set = member_set(&ids);
    let mut cfg = NetConfig::new(ids[0].0.clone(), ids[0].1.clone(), 0, set.clone());
    cfg.heartbeat = Duration::from_millis(500);
    cfg.limits = pool_limits;
    cfg.max_upload = Some(6_000_000);
    let accused = spawn(cfg).unwrap();
    let addr = accused.listen_addrs().await.into_iter().next().unwrap();
    let accused_peer = ids[0].0.public().to_peer_id();
    let checkpoint = accused
        .serve_checkpoint(Arc::new(vec![7u8; 4 << 20]))
        .await
        .unwrap();
    let residual = vec![9u8; 2 << 20];
    let residual_hash = *blake3::hash(&residual).as_bytes();
    let path =
        std::env::temp_dir().join(format!("synod-swarm-residual-{}.state", std::process::id()));
    std::fs::write(&path, &residual).unwrap();
    accused.serve_file(residual_hash, path.clone());
    let juror_asks = tokio::time::Instant::now() + Duration::from_secs(4);
    let mut attack = Vec::new();
    let mut colluders = Vec::new();
    for (i, (key, member_key)) in ids.iter().enumerate().skip(2) {
        let mut cfg = NetConfig::new(key.clone(), member_key.clone(), i as u32, set.clone());
        cfg.heartbeat = Duration::from_millis(500);
        cfg.bootnodes.push(addr.clone());
        cfg.limits = Limits {
            stall: Duration::from_secs(60),
            min_rate: 1,
        };
        let c = spawn(cfg).unwrap();
        // Every stream it may hold downloads the checkpoint, over and over; once the juror
        // has asked, two more loops fetch the residual too, as far as they are let.
        for stream in 0..MAX_SERVED_PER_PEER + 2 {
            let (c, evidence) = (c.clone(), stream >= MAX_SERVED_PER_PEER);
            attack.push(tokio::spawn(async move {
                let hash = if evidence {
                    tokio::time::sleep_until(juror_asks + Duration::from_secs(1)).await;
                    residual_hash
                } else {
                    checkpoint
                };
                loop {
                    if c.fetch_checkpoint(accused_peer, hash, 8 << 20)
                        .await
                        .is_err()
                    {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }));
        }
        colluders.push(c);
    }
    tokio::time::sleep_until(juror_asks).await;
    let mut cfg = NetConfig::new(ids[1].0.clone(), ids[1].1.clone(), 1, set.clone());
    cfg.heartbeat = Duration::from_millis(500);
    cfg.bootnodes.push(addr.clone());
    cfg.limits = pool_limits;
    let juror = spawn(cfg).unwrap();
    // The juror asks again after each failure (as it does at every pass of its duties), for
    // a minute: about five times what the residual takes among the contended transfers.
    let t = std::time::Instant::now();
    let (mut tries, mut got) = (0, None);
    while got.is_none() && t.elapsed() < Duration::from_secs(60) {
        tries += 1;
        match juror
            .fetch_checkpoint(accused_peer, residual_hash, 8 << 20)
            .await
        {
            Ok(bytes) => got = Some(bytes),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    eprintln!(
        "{{\"residual_served\":{},\"tries\":{tries},\"secs\":{:.1}}}",
        got.is_some(),
        t.elapsed().as_secs_f64()
    );
    for task in &attack {
        task.abort();
    }
    let _ = std::fs::remove_file(&path);
    assert!(
        got.as_ref().is_some_and(|b| *b == residual),
        "the juror never got the accused's residual in {tries} tries while colluders downloaded"
    );
    for c in colluders.iter().chain([&accused, &juror]) {
        c.shutdown().await;
    }
}

/// Stalling sources in a row: an author and the colluding members first in its relay order
/// take the victim's payload requests and never answer them. Asked one source at a time, the
/// victim would wait out its stall time (here a minute, longer than the round's deadline) on
/// each before reaching the honest member that relays the payloads, and leave them all out.
/// Asked by hedged requests (one more source every `hedge_after` while none has delivered),
/// it includes every payload through the honest relay well before the deadline.
/// Relays that answer with garbage bodies: the colluding authors 0..=3 do not serve their own
/// payloads to the victim, and as relays answer its requests with garbage of the right length
/// at full speed, so that it downloads each body before its digest check fails. An honest peer
/// never serves bytes of another digest than the one asked for, so a relay that does is not
/// asked to relay again: in the next round the victim downloads no garbage at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn relays_serving_garbage_bodies_are_not_asked_to_relay_again() {
    const VICTIM: u32 = 5;
    let (ids, _, clients) = network(6).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let others: std::collections::BTreeSet<u32> = (0..6).filter(|i| *i != VICTIM).collect();
    for c in &clients[..4] {
        c.withhold_own_payloads(Some(others.clone())).await.unwrap();
        c.garble_relays_to([VICTIM].into()).await.unwrap();
    }
    // Garbage bodies each colluding relay has served so far.
    let garbled = || -> Vec<u64> { clients[..4].iter().map(Client::garbled_bodies).collect() };
    let xcfg = ExchangeConfig {
        deadline: Duration::from_secs(30),
        ..ExchangeConfig::default()
    };
    let mut served = Vec::new();
    let mut distrusted = Vec::new();
    for (round, first) in [(1, 0), (2, 10)] {
        let outcomes = gather_with(&clients, round, first, xcfg).await;
        let victim = &outcomes[VICTIM as usize];
        let members: Vec<u32> = victim.included.iter().map(|g| g.member).collect();
        assert_eq!(
            members,
            vec![0, 1, 2, 3, 4, 5],
            "round {round}: the victim includes every payload (excluded: {:?})",
            victim.excluded
        );
        served.push(garbled());
        distrusted.push(clients[VICTIM as usize].snapshot().distrusted);
    }
    let total = |v: &[u64]| v.iter().sum::<u64>();
    println!(
        "{{\"garbage_bodies_round_1\":{},\"garbage_bodies_round_2\":{}}}",
        total(&served[0]),
        total(&served[1]) - total(&served[0])
    );
    assert!(
        total(&served[0]) > 0,
        "the colluders did serve garbage in round 1"
    );
    // The victim learns a relay is dishonest by checking a body it downloaded. A garbage
    // body it never checked (another relay's copy arrived first and the flight was
    // dropped) teaches it nothing, so such a relay may be asked again in round 2; a relay
    // it caught must not be.
    assert!(
        !distrusted[0].is_empty(),
        "the victim distrusts the relays it caught in round 1"
    );
    let honest = ids[4].0.public().to_peer_id();
    assert!(
        !distrusted[1].contains(&honest),
        "the honest relay is trusted"
    );
    for (relay, (r1, r2)) in served[0].iter().zip(&served[1]).enumerate() {
        if distrusted[0].contains(&ids[relay].0.public().to_peer_id()) {
            assert_eq!(
                r2, r1,
                "relay {relay} was caught serving garbage in round 1 and asked again in round 2"
            );
        }
    }
    for c in &clients {
        c.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stalling_authors_and_relays_cannot_keep_a_payload_from_a_member_an_honest_relay_serves() {
    const VICTIM: u32 = 5;
    let ids = ids(6);
    let set = member_set(&ids);
    let mut clients = Vec::new();
    let mut boot = None;
    for (i, (key, member_key)) in ids.iter().enumerate() {
        let mut cfg = NetConfig::new(key.clone(), member_key.clone(), i as u32, set.clone());
        cfg.heartbeat = Duration::from_millis(500);
        cfg.limits.stall = Duration::from_secs(60);
        cfg.bootnodes.extend(boot.clone());
        let c = spawn(cfg).unwrap();
        if boot.is_none() {
            boot = c.listen_addrs().await.into_iter().next();
        }
        clients.push(c);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Members 0..=3 collude against the victim; member 4 is honest.
    for c in &clients[..4] {
        c.stall_payloads_to([VICTIM].into()).await.unwrap();
    }
    let deadline = Duration::from_secs(30);
    let xcfg = ExchangeConfig {
        deadline,
        ..ExchangeConfig::default()
    };
    let outcomes = gather_with(&clients, 1, 0, xcfg).await;
    let victim = &outcomes[VICTIM as usize];
    let members: Vec<u32> = victim.included.iter().map(|g| g.member).collect();
    assert_eq!(
        members,
        vec![0, 1, 2, 3, 4, 5],
        "the victim includes every payload (excluded: {:?}) in {:.1} s",
        victim.excluded,
        victim.secs
    );
    assert!(victim.secs < deadline.as_secs_f64());
    for c in &clients {
        c.shutdown().await;
    }
}
