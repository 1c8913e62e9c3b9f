//! The main job end to end on loopback: a real `synod-node --dev`, three real `synod-trainer
//! run` processes (tiny model, tinyshakespeare), one of them killed after round 1 and restarted
//! later with the same base path; then rewards are claimed and checked against the chain.
//! A second test runs four trainers, one of which announces 100× scaled pseudo-gradients
//! (`--fault scale-x100`), and checks that the pool trains as a clean local run does and that
//! the three honest ones (jurors) replay, challenge, convict and slash the attacker; another
//! does the same with a free-rider (`--fault copy`) next to a member that withholds its payload
//! from all but one peer (`--fault withhold`), which must not void a round; a third
//! checks that `--fault` is refused against a node whose chain is declared Live.
//! At most [`AT_ONCE`] tests run at a time: each starts a node and several trainers.
//!
//! `synod-node` is taken from the same target directory as `synod-trainer` (`cargo test
//! --workspace` builds both before running any test).
#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const ROUNDS: u64 = 7;
const REWARD_PER_ROUND: u128 = 30 * UNIT;
const STAKE: u128 = 100 * UNIT;
const UNIT: u128 = 1_000_000_000_000;
const SURIS: [&str; 4] = ["//Bob", "//Charlie", "//Dave", "//Eve"];

/// A challenge window (blocks) long enough to verify a round between rounds and open a
/// challenge: what a test that needs verifiers or jurors gives its pool.
const VERIFYING_WINDOW: u32 = 15;
/// The challenge window (blocks) of a test that needs no verification: the shortest that
/// `pool create` and every member accept for these tiny pools (3 blocks of lag, then a few
/// seconds of checks at the step time the machine measures, loaded or not).
const SHORT_WINDOW: u32 = 5;
/// A flag's value that leaves the flag out of `pool create`: the creator's default (for
/// `--challenge-window`, the window `pool create` derives from the recipe's measured cost).
const DERIVED: &str = "derived";
/// End-to-end tests running at once (with as many test threads): a test's processes wait for
/// blocks most of the time (a serial run of these tests used a quarter of two cores), so two
/// share the machine without their trainers missing a window.
const AT_ONCE: usize = 2;
static RUNNING: (std::sync::Mutex<usize>, std::sync::Condvar) =
    (std::sync::Mutex::new(0), std::sync::Condvar::new());

/// A turn to run: held for the test's lifetime, at most [`AT_ONCE`] at a time.
struct Turn;

impl Turn {
    fn take() -> Self {
        let (count, freed) = &RUNNING;
        let mut n = count.lock().unwrap_or_else(|e| e.into_inner());
        while *n >= AT_ONCE {
            n = freed.wait(n).unwrap_or_else(|e| e.into_inner());
        }
        *n += 1;
        Turn
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let (count, freed) = &RUNNING;
        *count.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
        freed.notify_one();
    }
}

#[path = "../../../node/tests/common/ports.rs"]
mod ports;
use ports::free_port;

fn data() -> PathBuf {
    std::env::var_os("SYNOD_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../../shared/data/tinyshakespeare.txt")
        })
}

/// A child process killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Net {
    dir: tempfile::TempDir,
    rpc: String,
    ports: (u16, u16),
    node: Proc,
    /// The recipe's learning rate (`--lr`) in `pool create` and every trainer.
    lr: &'static str,
}

/// The tests' learning rate.
const LR: &str = "3e-3";

impl Net {
    fn start() -> Self {
        Self::start_with_lr(LR)
    }

    /// A node whose pool's recipe (`pool create` and every trainer) trains at `lr`.
    fn start_with_lr(lr: &'static str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ports = (free_port(), free_port());
        let node = Self::spawn_node(dir.path(), ports);
        Net {
            rpc: format!("ws://127.0.0.1:{}", ports.0),
            ports,
            node,
            dir,
            lr,
        }
    }

    /// `synod-node --dev` on `ports` (RPC, p2p) with its database under `dir/node`, logging
    /// (appending) to `dir/node.log`.
    fn spawn_node(dir: &Path, (rpc_port, p2p_port): (u16, u16)) -> Proc {
        let node_bin = Path::new(env!("CARGO_BIN_EXE_synod-trainer")).with_file_name("synod-node");
        assert!(
            node_bin.exists(),
            "{} is missing: build it first (cargo build -p synod-node)",
            node_bin.display()
        );
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("node.log"))
            .unwrap();
        let child = Command::new(node_bin)
            .args(["--dev", "--base-path", dir.join("node").to_str().unwrap()])
            .args([
                "--rpc-port",
                &rpc_port.to_string(),
                "--port",
                &p2p_port.to_string(),
            ])
            .args(["--no-prometheus", "--no-telemetry", "--no-mdns"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("synod-node starts");
        Proc(child)
    }

    /// Kills the node (SIGKILL), waits `down`, and starts it again on the same database and
    /// ports.
    fn restart_node(&mut self, down: Duration) {
        let _ = self.node.0.kill();
        let _ = self.node.0.wait();
        std::thread::sleep(down);
        self.node = Self::spawn_node(self.dir.path(), self.ports);
    }

    /// `pool create` by //Alice with the model flags and `flags` (unless given: a challenge
    /// window of [`SHORT_WINDOW`], and as many members at most as `--min-trainers`, which
    /// sets how many checks a verifier's window is priced for); checks that the pool got id 0.
    fn create_pool(&self, flags: &[(&str, &str)]) {
        let mut args: Vec<String> = ["pool", "create", "--suri", "//Alice"]
            .iter()
            .map(ToString::to_string)
            .collect();
        let given = |k: &str| {
            flags
                .iter()
                .find(|(f, _)| *f == k)
                .map(|(_, v)| v.to_string())
        };
        if given("--challenge-window").is_none() {
            args.extend(["--challenge-window".to_string(), SHORT_WINDOW.to_string()]);
        }
        if let (None, Some(min)) = (given("--max-trainers"), given("--min-trainers")) {
            args.extend(["--max-trainers".to_string(), min]);
        }
        for (k, v) in flags {
            if *v == DERIVED {
                continue;
            }
            args.push(k.to_string());
            if !v.is_empty() {
                args.push(v.to_string());
            }
        }
        args.extend(Self::model_flags_at(self.lr));
        let created = self.cli(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(created["pool_id"], 0);
    }

    /// A pool of four members, `rounds` rounds of `inner_steps`, with a
    /// [`VERIFYING_WINDOW`]; trainer i runs with `roles[i]`.
    /// Returns when all four have exited successfully.
    fn train_four_verified(&self, rounds: u32, inner_steps: u32, roles: [&[&str]; 4]) {
        self.train_four(rounds, inner_steps, Some(VERIFYING_WINDOW), &[], roles, &[]);
    }

    /// [`Net::train_four_verified`] with a [`SHORT_WINDOW`] (the trainers exit ≈ 2 windows
    /// after the last round; for a test whose cheater is slashed without a jury), where
    /// the trainers in `may_fail` (cheaters the others ban) may fail: they are stopped once the
    /// others are done.
    fn train_four_tolerating(
        &self,
        rounds: u32,
        inner_steps: u32,
        roles: [&[&str]; 4],
        may_fail: &[usize],
    ) {
        self.train_four(
            rounds,
            inner_steps,
            Some(SHORT_WINDOW),
            &[],
            roles,
            may_fail,
        );
    }

    /// [`Net::train_four_tolerating`] with a challenge window of `window` blocks (`None`: the
    /// one `pool create` derives) and the recipe flags `recipe` (flags without a value) in the
    /// pool and every trainer.
    fn train_four(
        &self,
        rounds: u32,
        inner_steps: u32,
        window: Option<u32>,
        recipe: &[&str],
        roles: [&[&str]; 4],
        may_fail: &[usize],
    ) {
        let (rounds, inner_steps, window) = (
            rounds.to_string(),
            inner_steps.to_string(),
            window.map_or(DERIVED.to_string(), |w| w.to_string()),
        );
        let mut flags = vec![
            ("--min-trainers", "4"),
            ("--round-timeout", "60"),
            ("--challenge-window", window.as_str()),
            ("--rounds", rounds.as_str()),
            ("--inner-steps", inner_steps.as_str()),
        ];
        flags.extend(recipe.iter().map(|f| (*f, "")));
        self.create_pool(&flags);
        let ports = [free_port(), free_port(), free_port(), free_port()];
        let mut trainers: Vec<Proc> = roles
            .iter()
            .enumerate()
            .map(|(i, role)| self.spawn_trainer(i, &ports, &[recipe, role].concat()))
            .collect();
        for (i, p) in trainers.iter_mut().enumerate() {
            if !may_fail.contains(&i) {
                wait_exit(p, self, i, Duration::from_secs(900));
            }
        }
        for &i in may_fail {
            let _ = trainers[i].0.kill();
            let _ = trainers[i].0.wait();
        }
    }

    /// A chain client of the test node (waits up to 3 minutes for it).
    async fn chain(&self) -> synod_chain::Chain {
        synod_chain::Chain::connect(&self.rpc, Duration::from_secs(180))
            .await
            .unwrap()
    }

    fn base(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("trainer-{i}"))
    }

    fn cli(&self, args: &[&str]) -> Value {
        let stdout = self.cli_text(args);
        serde_json::from_str(stdout.lines().last().unwrap_or("null")).unwrap()
    }

    /// Runs `synod-trainer` with `args` against the node (one libtorch thread).
    fn run_cli(&self, args: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_synod-trainer"))
            .args(["--threads", "1"])
            .args(args)
            .args(["--rpc", &self.rpc, "--connect-timeout", "180"])
            .output()
            .unwrap()
    }

    fn cli_text(&self, args: &[&str]) -> String {
        let out = self.run_cli(args);
        assert!(
            out.status.success(),
            "synod-trainer {args:?} failed: {}\nnode log tail:\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.node_log_tail()
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs `synod-trainer` with `args` (and the node's RPC) expecting it to fail; its stderr.
    fn cli_fails(&self, args: &[&str]) -> String {
        let out = self.run_cli(args);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            !out.status.success(),
            "synod-trainer {args:?} succeeded: {err}"
        );
        err
    }

    fn node_log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("node.log")).unwrap_or_default();
        log.lines()
            .rev()
            .take(20)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn model_flags() -> Vec<String> {
        Self::model_flags_at(LR)
    }

    /// The tests' recipe flags with learning rate `lr`.
    fn model_flags_at(lr: &str) -> Vec<String> {
        let d = data();
        [
            "--data",
            d.to_str().unwrap(),
            "--model",
            "tiny",
            "--batch",
            "8",
            "--warmup",
            "10",
            "--lr",
            lr,
            "--eval-batches",
            "8",
            "--device",
            "cpu",
        ]
        .iter()
        .map(ToString::to_string)
        .collect()
    }

    fn spawn_trainer(&self, i: usize, ports: &[u16], extra: &[&str]) -> Proc {
        let base = self.base(i);
        std::fs::create_dir_all(&base).unwrap();
        let err = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(base.join("trainer.log"))
            .unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_synod-trainer"));
        cmd.args([
            "--threads",
            "1",
            "run",
            "--rpc",
            &self.rpc,
            "--suri",
            SURIS[i],
            "--pool",
            "0",
            "--quiet",
        ])
        .args(Self::model_flags_at(self.lr))
        .args([
            "--base-path",
            base.to_str().unwrap(),
            "--listen",
            &format!("/ip4/127.0.0.1/tcp/{}", ports[i]),
            "--prometheus-port",
            &free_port().to_string(),
        ])
        .args(extra);
        for (_, p) in ports.iter().enumerate().filter(|(j, _)| *j != i) {
            cmd.args(["--bootnode", &format!("/ip4/127.0.0.1/tcp/{p}")]);
        }
        Proc(
            cmd.stdout(Stdio::null())
                .stderr(err)
                .spawn()
                .expect("synod-trainer starts"),
        )
    }

    fn metrics(&self, i: usize) -> Vec<Value> {
        std::fs::read_to_string(self.base(i).join("metrics.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Whether trainer `i` has seen `round` close on-chain (its `closed` event).
    fn has_closed(&self, i: usize, round: u64) -> bool {
        self.metrics(i)
            .iter()
            .any(|e| e["event"] == "closed" && e["round"] == round)
    }

    /// Trainer `i`'s Prometheus text exposition (the URL its `joined` event names), fetched
    /// over plain HTTP/1.1.
    fn scrape(&self, i: usize) -> String {
        use std::io::{Read, Write};
        let url = self
            .metrics(i)
            .iter()
            .rfind(|e| e["event"] == "joined")
            .and_then(|e| e["prometheus"].as_str().map(str::to_string))
            .expect("the trainer serves Prometheus metrics");
        let addr = url
            .trim_start_matches("http://")
            .trim_end_matches("/metrics");
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(
            s,
            "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
        out
    }

    fn show(&self) -> Value {
        self.cli(&["pool", "show", "--pool", "0"])
    }

    fn wait(&self, what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
        let start = Instant::now();
        while !ok() {
            assert!(
                start.elapsed() < timeout,
                "timed out waiting for {what}; node log tail:\n{}",
                self.node_log_tail()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The value of the sample `series` (name and labels, exactly as exposed) in `text`.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// Rounds trainer-side Prometheus metrics counted as closed on-chain (any outcome).
fn rounds_closed(text: &str) -> f64 {
    ["final", "lost", "voided"]
        .iter()
        .map(|o| {
            sample(
                text,
                &format!("synod_trainer_rounds_total{{outcome=\"{o}\"}}"),
            )
        })
        .sum()
}

fn final_rounds(show: &Value) -> Vec<Value> {
    show["final_rounds"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "final")
        .cloned()
        .collect()
}

fn wait_exit(p: &mut Proc, net: &Net, i: usize, timeout: Duration) {
    let status = wait_done(p, net, i, timeout);
    assert!(
        status.success(),
        "trainer {i} failed: {status}\n{}",
        log_tail(net, i)
    );
}

/// The last 30 lines of trainer `i`'s log, newest first (the log goes with the test's
/// temporary directory).
fn log_tail(net: &Net, i: usize) -> String {
    let log = std::fs::read_to_string(net.base(i).join("trainer.log")).unwrap_or_default();
    log.lines().rev().take(30).collect::<Vec<_>>().join("\n")
}

/// Waits for trainer `i` to exit (at most `timeout`), whatever its status.
fn wait_done(p: &mut Proc, net: &Net, i: usize, timeout: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = p.0.try_wait().unwrap() {
            return status;
        }
        assert!(
            start.elapsed() < timeout,
            "trainer {i} still running after {timeout:?}\n{}",
            log_tail(net, i)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn three_trainers_train_on_chain_survive_a_kill_resume_and_get_paid() {
    let _turn = Turn::take();
    let net = Net::start();
    net.create_pool(&[
        ("--inner-steps", "30"),
        ("--min-trainers", "3"),
        ("--reward-per-round", "30"),
        ("--round-timeout", "40"),
        ("--rounds", &ROUNDS.to_string()),
    ]);

    let ports = [free_port(), free_port(), free_port()];
    let mut t0 = net.spawn_trainer(0, &ports, &[]);
    let mut t1 = net.spawn_trainer(1, &ports, &[]);
    let t2 = net.spawn_trainer(2, &ports, &[]);

    // Kill member 2 as soon as it has seen round 1 final.
    net.wait(
        "round 1 to close at trainer 2",
        Duration::from_secs(400),
        || net.has_closed(2, 1),
    );
    drop(t2);
    // Trainer 0's Prometheus metrics follow the rounds it recorded (a round is recorded once it
    // closed and the next round's inner phase, run meanwhile, is done).
    net.wait(
        "round 1 to be recorded at trainer 0",
        Duration::from_secs(400),
        || {
            net.metrics(0)
                .iter()
                .any(|e| e["event"] == "round" && e["round"] == 1)
        },
    );
    let early = net.scrape(0);
    for kind in [
        "# TYPE synod_trainer_rounds_total counter",
        "# TYPE synod_trainer_validation_loss gauge",
        "# TYPE synod_trainer_inner_seconds_total counter",
        "# TYPE synod_trainer_payload_bytes_total counter",
    ] {
        assert!(
            early.lines().any(|l| l == kind),
            "{kind:?} missing:\n{early}"
        );
    }
    assert!(rounds_closed(&early) >= 1.0, "{early}");
    assert!(sample(&early, "synod_trainer_inner_seconds_total") > 0.0);
    assert!(sample(&early, "synod_trainer_payload_bytes_total") > 0.0);
    // The pool keeps finalizing with two of three stakes; restart member 2 after round 3.
    let mut k = 0;
    net.wait(
        "round 3 to be final without trainer 2",
        Duration::from_secs(400),
        || {
            k = final_rounds(&net.show()).len();
            k >= 3
        },
    );
    // Restarted at once: the rounds left are few and short.
    let mut t2 = net.spawn_trainer(2, &ports, &[]);
    // Trainer 0 settles round 2 before it exchanges round 3: its counters have moved on.
    let closed_at_0 = || {
        net.metrics(0)
            .iter()
            .filter(|e| e["event"] == "closed")
            .count() as f64
    };
    net.wait(
        "trainer 0 to see another round close",
        Duration::from_secs(400),
        || closed_at_0() > rounds_closed(&early),
    );
    let late = net.scrape(0);
    // The chain, network and stake gauges of a member that has exchanged and committed.
    for (series, at_least) in [
        ("synod_trainer_finalized_height", 1.0),
        ("synod_trainer_peers_connected", 1.0),
        ("synod_trainer_payload_bytes_received_total", 1.0),
        ("synod_trainer_stake_syn", 100.0),
        ("synod_trainer_commits_total{outcome=\"ok\"}", 2.0),
    ] {
        assert!(
            sample(&late, series) >= at_least,
            "{series} below {at_least}:\n{late}"
        );
    }
    assert!(
        rounds_closed(&late) > rounds_closed(&early),
        "the counters moved with the rounds: {} then {}",
        rounds_closed(&early),
        rounds_closed(&late)
    );
    for (i, p) in [(0, &mut t0), (1, &mut t1), (2, &mut t2)] {
        wait_exit(p, &net, i, Duration::from_secs(600));
    }

    let show = net.show();
    assert_eq!(show["status"], "Completed");
    let finals = final_rounds(&show);
    assert_eq!(finals.len() as u64, ROUNDS, "every round final: {show}");
    // `status` renders the same state as tables, with trainer 0's validation losses.
    let base0 = net.base(0);
    let table = net.cli_text(&[
        "status",
        "--pool",
        "0",
        "--base-path",
        base0.to_str().unwrap(),
    ]);
    assert!(table.starts_with("pool 0  Completed  "), "{table}");
    for r in 1..=ROUNDS {
        let line = table
            .lines()
            .find(|l| l.starts_with(&format!("{r:<5} final")))
            .unwrap_or_else(|| panic!("no final row for round {r}:\n{table}"));
        let loss = line.split_whitespace().nth(4).unwrap_or_default();
        assert!(
            loss.parse::<f64>().is_ok(),
            "round {r} loss {loss:?}:\n{table}"
        );
    }
    // Member indices follow the order in which the joins landed; map trainers by account.
    let account: Vec<String> = (0..3)
        .map(|i| {
            net.metrics(i)
                .iter()
                .find(|e| e["event"] == "joined")
                .and_then(|e| e["account"].as_str())
                .unwrap()
                .to_string()
        })
        .collect();
    let contributors = |f: &Value| -> BTreeSet<String> {
        f["contributors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect()
    };
    let killed = &account[2];
    assert!(
        contributors(&finals[0]).len() == 3,
        "round 1 has all three contributors"
    );
    // Rounds the killed trainer exchanged before the kill (at most round 2, by a race): a
    // member commits a round only after its exchange is over.
    let m2 = net.metrics(2);
    let restart = m2.iter().rposition(|e| e["event"] == "joined").unwrap();
    let before_kill: BTreeSet<u64> = m2[..restart]
        .iter()
        .filter(|e| e["event"] == "exchange")
        .filter_map(|e| e["round"].as_u64())
        .collect();
    for f in &finals[1..k] {
        let r = f["round"].as_u64().unwrap();
        assert!(
            !contributors(f).contains(killed) || before_kill.contains(&r),
            "killed trainer paid for missed round {r}"
        );
        assert!(
            contributors(f).len() >= 2,
            "quorum of the two live trainers in round {r}"
        );
    }
    let rejoined: Vec<u64> = finals[k..]
        .iter()
        .filter(|f| contributors(f).contains(killed))
        .map(|f| f["round"].as_u64().unwrap())
        .collect();
    assert!(
        !rejoined.is_empty(),
        "the restarted trainer contributes again after round {k}: {show}"
    );

    // Every honest commit equals the on-chain final hash, and the files are kept and match it.
    let final_hash: BTreeMap<u64, String> = finals
        .iter()
        .map(|f| {
            (
                f["round"].as_u64().unwrap(),
                f["hash"].as_str().unwrap()[2..].to_string(),
            )
        })
        .collect();
    for i in 0..3 {
        let mut trained = BTreeSet::new();
        for e in net
            .metrics(i)
            .iter()
            .filter(|e| e["event"] == "round" && e["round"].as_u64() != Some(0))
        {
            let r = e["round"].as_u64().unwrap();
            // Trainer 2 may have computed round 2 with a different included set just before the
            // kill, and after the restart a first round the others had already closed without
            // it (it then re-syncs); its last round must match.
            if i < 2 || r == 1 || r == ROUNDS {
                let h = &final_hash[&r];
                assert_eq!(
                    e["checkpoint_hash"].as_str().unwrap(),
                    h,
                    "trainer {i} round {r}"
                );
                let file = net
                    .base(i)
                    .join("checkpoints")
                    .join(format!("{h}.safetensors"));
                let bytes = std::fs::read(&file).unwrap_or_else(|e| {
                    panic!("trainer {i} lacks the final checkpoint of round {r}: {e}")
                });
                assert_eq!(blake3::hash(&bytes).to_hex().as_str(), h);
                trained.insert(r);
            }
        }
        if i < 2 {
            assert_eq!(
                trained,
                (1..=ROUNDS).collect::<BTreeSet<_>>(),
                "trainer {i} trained every round"
            );
        } else {
            assert!(
                trained.contains(&ROUNDS),
                "the restarted trainer computed the final round"
            );
        }
    }
    // A round's wall clock covers everything since the previous round's record: the chain
    // waits and the round's evaluation are not left out of its compute utilisation. Duties
    // run beside it on the duty worker's thread, so their seconds are not part of it.
    for i in 0..2 {
        let rounds: Vec<Value> = net
            .metrics(i)
            .into_iter()
            .filter(|e| e["event"] == "round" && e["round"].as_u64() != Some(0))
            .collect();
        let f = |e: &Value, k: &str| e[k].as_f64().unwrap_or(f64::NAN);
        for e in &rounds {
            let parts = f(e, "compute_secs") + f(e, "eval_secs");
            assert!(
                f(e, "wall_secs") >= parts - 1e-3 && f(e, "eval_secs") > 0.0,
                "trainer {i}: a round's parts outlast its wall clock: {e}"
            );
            let u = f(e, "compute_secs") / f(e, "wall_secs");
            assert!((u - f(e, "compute_utilisation")).abs() < 1e-6, "{e}");
        }
        assert!(
            rounds.iter().any(|e| f(e, "duty_secs") > 0.0),
            "trainer {i}'s duty worker ran beside its rounds: {rounds:?}"
        );
    }
    // The restarted trainer resumed: no final round recomputed after the restart.
    assert_eq!(m2[restart]["resumed"], true);
    let redone: Vec<u64> = m2[restart..]
        .iter()
        .filter(|e| e["event"] == "round")
        .map(|e| e["round"].as_u64().unwrap())
        .collect();
    assert!(
        !redone.is_empty() && redone.iter().all(|r| *r > k as u64),
        "rounds trained after the restart (k = {k}): {redone:?}"
    );

    // Validation loss falls (trainer 0: θ₀ vs the last round).
    let m0 = net.metrics(0);
    let losses: Vec<f64> = m0
        .iter()
        .filter(|e| e["event"] == "round")
        .map(|e| e["val_loss"].as_f64().unwrap())
        .collect();
    assert!(
        losses.last().unwrap() < &(losses[0] - 1.0),
        "validation loss {losses:?}"
    );

    // Rewards: each final round's reward split equally over its contributors. Nobody is
    // slashed. The restarted trainer records the final checkpoint of a round that aggregated
    // the payload it announced just before the kill (or served just after the restart) once
    // its late-commit window closes (`attest`); a round settled before it could is leaked (1 %
    // of its stake): at most the silent rounds it did not attest.
    let killed_index = member_of(&net, 2);
    let attested: BTreeSet<u64> = net
        .metrics(2)
        .iter()
        .filter(|e| e["event"] == "attest" && e["outcome"] == "ok")
        .filter_map(|e| e["round"].as_u64())
        .collect();
    let silent_rounds = finals
        .iter()
        .filter(|f| {
            f["included"]
                .as_array()
                .unwrap()
                .iter()
                .any(|ix| ix.as_u64() == Some(killed_index))
                && !contributors(f).contains(killed)
                && !f["round"].as_u64().is_some_and(|r| attested.contains(&r))
        })
        .count() as u128;
    for i in 0..3 {
        let claimed = net.cli(&["claim", "--suri", SURIS[i], "--pool", "0", "--wait", "480"]);
        let acct = &account[i];
        let expected: u128 = finals
            .iter()
            .filter(|f| contributors(f).contains(acct))
            .map(|f| REWARD_PER_ROUND / contributors(f).len() as u128)
            .sum();
        assert_eq!(
            claimed["claimed"]
                .as_str()
                .unwrap()
                .parse::<u128>()
                .unwrap(),
            expected,
            "trainer {i}: {claimed}"
        );
        let stake = claimed["active_stake"]
            .as_str()
            .unwrap()
            .parse::<u128>()
            .unwrap();
        let leakable = if i == 2 { silent_rounds } else { 0 };
        assert!(
            stake <= STAKE && STAKE - stake <= leakable * STAKE / 100,
            "trainer {i} lost {} planck ({leakable} rounds leakable): {show}",
            STAKE - stake
        );
    }
}

/// Final validation loss and per-round checkpoint hashes of a clean local run (`train`,
/// `workers` workers) of the same recipe.
fn clean_local_run(
    workers: u32,
    inner_steps: u32,
    rounds: u32,
    recipe: &[&str],
) -> (f64, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = ["--threads", "1", "train", "--quiet", "--out"]
        .iter()
        .map(ToString::to_string)
        .collect();
    args.push(dir.path().to_str().unwrap().to_string());
    for (k, v) in [
        ("--workers", workers),
        ("--inner-steps", inner_steps),
        ("--rounds", rounds),
    ] {
        args.extend([k.to_string(), v.to_string()]);
    }
    args.extend(Net::model_flags());
    args.extend(recipe.iter().map(ToString::to_string));
    let out = Command::new(env!("CARGO_BIN_EXE_synod-trainer"))
        .args(&args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(dir.path().join("metrics.jsonl")).unwrap();
    let rows: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "round")
        .collect();
    let hashes = rows
        .iter()
        .filter_map(|e| e["checkpoint_hash"].as_str().map(str::to_string))
        .collect();
    (
        rows.last().and_then(|e| e["val_loss"].as_f64()).unwrap(),
        hashes,
    )
}

#[test]
fn scaling_trainer_is_challenged_convicted_and_slashed_without_derailing_training() {
    let _turn = Turn::take();
    const R: u32 = 3;
    const H: u32 = 30;
    // Overlapped rounds (round r trains from θ_{r−2}): members train, and verifiers and
    // jurors replay, from the start the chain's parents name.
    const OVERLAP: &[&str] = &["--overlap"];
    let net = Net::start();
    net.train_four(
        R,
        H,
        Some(VERIFYING_WINDOW),
        OVERLAP,
        [&[], &[], &[], &["--fault", "scale-x100", "--no-jury"]],
        &[],
    );

    let show = net.show();
    assert_eq!(show["status"], "Completed");
    let finals = final_rounds(&show);
    assert_eq!(finals.len() as u32, R, "every round final: {show}");
    // The attacker's payloads are well-formed and signed: they are aggregated (all four in
    // every included set), and every member, the attacker included, computes the final hash.
    for f in &finals {
        assert_eq!(f["included"].as_array().unwrap().len(), 4, "{f}");
        let r = f["round"].as_u64().unwrap();
        let h = &f["hash"].as_str().unwrap()[2..];
        for i in 0..4 {
            let ours = net
                .metrics(i)
                .iter()
                .find(|e| e["event"] == "round" && e["round"].as_u64() == Some(r))
                .and_then(|e| e["checkpoint_hash"].as_str().map(str::to_string));
            assert_eq!(ours.as_deref(), Some(h), "trainer {i} round {r}");
        }
    }
    // The model trains as the clean run of the same recipe does (within 5 %).
    let loss = |i: usize| -> f64 {
        net.metrics(i)
            .iter()
            .rfind(|e| e["event"] == "round")
            .and_then(|e| e["val_loss"].as_f64())
            .unwrap()
    };
    let (clean, clean_hashes) = clean_local_run(4, H, R, OVERLAP);
    // The fault took effect: no checkpoint equals one of the clean local run of the recipe.
    for f in &finals {
        let h = &f["hash"].as_str().unwrap()[2..];
        assert!(
            !clean_hashes.iter().any(|c| c == h),
            "round {} equals the clean run: the fault did nothing",
            f["round"]
        );
    }
    let attacked = loss(0);
    assert!(
        attacked <= clean * 1.05,
        "val loss {attacked} with a ×100 member vs {clean} clean"
    );
    // Verifiers check honest members by their Proof-of-Learning traces (states fetched from
    // the author over the network) and the ×100 member, whose payload is not its trace's end,
    // by a whole replay. An honest trace is never refused nor mismatched; only a state not
    // served in time (a loaded machine: CI runs these tests side by side) costs its verifier
    // a whole replay.
    let cheater = member_of(&net, 3);
    let verified: Vec<Value> = (0..3)
        .flat_map(|i| net.metrics(i))
        .filter(|e| e["event"] == "verified")
        .collect();
    let (of_cheater, of_honest): (Vec<&Value>, Vec<&Value>) = verified
        .iter()
        .partition(|e| e["member"].as_u64() == Some(cheater));
    assert!(
        !of_cheater.is_empty()
            && of_honest
                .iter()
                .any(|e| e["segments"].as_u64() > Some(0) && e["whole_replay"].is_null()),
        "{verified:?}"
    );
    eprintln!("verified: {verified:?}");
    // Round 3 starts from θ₁, not its parent θ₂: a verifier replaying from θ₂ would find the
    // honest members' payloads mismatched.
    assert!(
        of_honest.iter().any(|e| e["round"].as_u64() >= Some(3)),
        "{verified:?}"
    );
    for e in of_honest {
        let by_segments = e["segments"].as_u64() > Some(0) && e["whole_replay"].is_null();
        assert!(
            e["honest"] == true && (by_segments || e["whole_replay"] == "unserved"),
            "{e}"
        );
    }
    for e in of_cheater {
        // Caught by its trace's end (the payload does not encode it), which decides without a
        // whole replay; replayed whole only if its states came late.
        assert!(
            e["honest"] == false && (e["failed"] == "encoding" || !e["whole_replay"].is_null()),
            "{e}"
        );
    }
    // A verifier whose trace check found the payload not its trace's end names that part: its
    // challenge disputes the encoding, which jurors check by the trace's last state alone,
    // without replaying the inner phase (unless the accused does not serve that state).
    let mut narrowed = false;
    for i in 0..3 {
        let m = net.metrics(i);
        for e in m
            .iter()
            .filter(|e| e["event"] == "challenge" && e["outcome"] == "opened")
        {
            let verified: Vec<&Value> = m
                .iter()
                .filter(|v| {
                    v["event"] == "verified"
                        && v["member"] == e["member"]
                        && v["round"] == e["round"]
                })
                .collect();
            // The challenge names the part its verification found.
            for v in &verified {
                assert_eq!(
                    e["dispute"],
                    v["failed"].as_str().unwrap_or("phase"),
                    "trainer {i}: {e} after {v}"
                );
            }
            if verified.iter().any(|v| v["failed"] == "encoding") {
                assert_eq!(e["dispute"], "encoding", "trainer {i}: {e}");
                narrowed = true;
            }
        }
    }
    let votes: Vec<Value> = (0..3)
        .flat_map(|i| net.metrics(i))
        .filter(|e| e["event"] == "vote" && e["member"].as_u64() == Some(cheater))
        .collect();
    eprintln!("votes on the cheater: {votes:?}");
    if narrowed {
        assert!(
            votes.iter().any(|v| v["dispute"] == "encoding"),
            "{votes:?}"
        );
    }
    // A juror of an encoding dispute replays no inner phase: the disputed part decides, or it
    // reuses the replay it ran as a verifier of the same payload.
    for v in votes.iter().filter(|v| v["dispute"] == "encoding") {
        assert!(
            v["guilty"] == true
                && (v["whole_replay"].is_null()
                    || v["whole_replay"] == "unserved"
                    || v["reused"] == true),
            "{v}"
        );
    }

    assert_cheater_convicted(&net, &show, &[0, 1, 2], 3, &[]);
}

/// A member whose payload carries no work (`--fault zeros`: it announces a zero pseudo-gradient
/// beside its trace) in a pool
/// whose inner phases are long (H = 200) and whose challenge window is the one `pool create`
/// derives from the recipe's measured cost (no `--challenge-window`): the other members replay
/// it on their duty workers while their next inner phases run (a replay of the cheater ends
/// before the pool's last round), challenge it within the window, and it is convicted; no
/// round is voided and no honest member loses stake.
#[test]
fn zero_announcing_member_at_large_h_is_challenged_within_the_derived_window_while_training_continues(
) {
    let _turn = Turn::take();
    // Rounds 2 to 4 give the verifiers of the cheater's round 1 three inner phases to replay it
    // beside training.
    const R: u32 = 4;
    const H: u32 = 200;
    // At the tests' learning rate, honest runs of 200 inner steps at 1 and 2 threads drift
    // apart by 8.7·10⁻³ on some CPUs (over half the replay tolerance: `pool create` refuses the
    // recipe), 1.1·10⁻³ at H = 150; at 2·10⁻³, by 1.9·10⁻⁴.
    let net = Net::start_with_lr("2e-3");
    net.train_four(
        R,
        H,
        None,
        &[],
        [&[], &[], &[], &["--fault", "zeros", "--no-jury"]],
        &[],
    );
    let show = completed_with_every_round_final(&net, R);
    eprintln!(
        "derived challenge window: {} blocks",
        show["challenge_window"]
    );
    // Verification ran beside training: an honest member replayed the cheater, and found it
    // outside the tolerance, before it recorded the pool's last round (one metrics file,
    // appended in time order by both threads). When its challenge opens depends on blocks
    // (it waits for the round's late commits to close, a derived window that grows on a loaded
    // machine), not on the replay; that it opened within the window is the chain's to check:
    // a challenge past the window is refused, and `assert_cheater_convicted` requires one.
    let beside = (0..3).any(|i| {
        let m = net.metrics(i);
        let replayed = m
            .iter()
            .position(|e| e["event"] == "verified" && e["honest"] == false);
        let last = m
            .iter()
            .position(|e| e["event"] == "round" && e["round"].as_u64() == Some(u64::from(R)));
        matches!((replayed, last), (Some(v), Some(l)) if v < l)
    });
    assert!(
        beside,
        "no replay of the cheater before the last round: {:?}",
        (0..3).map(|i| net.metrics(i)).collect::<Vec<_>>()
    );
    assert_cheater_convicted(&net, &show, &[0, 1, 2], 3, &[]);
}

/// `pool show` of a pool that completed with all its `rounds` rounds final (none voided).
fn completed_with_every_round_final(net: &Net, rounds: u32) -> Value {
    let show = net.show();
    assert_eq!(show["status"], "Completed");
    assert_eq!(
        final_rounds(&show).len() as u32,
        rounds,
        "a round was voided: {show}"
    );
    show
}

/// Trainer `i`'s active stake in planck, as `pool show` printed it.
fn active_stake(net: &Net, show: &Value, i: usize) -> u128 {
    show["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["account"] == account(net, i).as_str())
        .and_then(|m| m["active_stake"].as_str()?.parse().ok())
        .unwrap()
}

/// Trainer `i`'s member index (from its `joined` event).
fn member_of(net: &Net, i: usize) -> u64 {
    net.metrics(i)
        .iter()
        .find(|e| e["event"] == "joined")
        .and_then(|e| e["member"].as_u64())
        .unwrap()
}

/// Asserts that `member` is in the included set of every final round of `show`.
fn assert_in_every_included_set(show: &Value, member: u64, what: &str) {
    for f in final_rounds(show) {
        let included: Vec<u64> = f["included"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_u64)
            .collect();
        assert!(included.contains(&member), "{what}: {f}");
    }
}

/// Trainer `i`'s account (member indices follow the order of joining).
fn account(net: &Net, i: usize) -> String {
    net.metrics(i)
        .iter()
        .find(|e| e["event"] == "joined")
        .and_then(|e| e["account"].as_str().map(str::to_string))
        .unwrap()
}

/// Checks the verification of a finished pool with trainers `honest` (jurors by default),
/// one `cheater`, and members in `innocent` that misbehaved on the network only: every replay
/// of the cheater is outside the tolerance and every other inside; the cheater was challenged,
/// voted guilty by the automatic jury, convicted in at least one round and slashed; nobody
/// else was convicted or lost stake.
fn assert_cheater_convicted(
    net: &Net,
    show: &Value,
    honest: &[usize],
    cheater: usize,
    innocent: &[usize],
) {
    let cheat = account(net, cheater);
    let mut replays_of_cheater = 0;
    for &i in honest {
        for e in net.metrics(i).iter().filter(|e| e["event"] == "verified") {
            let ok = e["honest"].as_bool().unwrap();
            if e["account"] == cheat.as_str() {
                replays_of_cheater += 1;
                assert!(!ok, "trainer {i} passed the cheater: {e}");
            } else {
                assert!(ok, "trainer {i} flagged an honest member: {e}");
            }
        }
    }
    assert!(replays_of_cheater > 0, "nobody replayed the cheater");
    let events = |kind: &str| -> Vec<Value> {
        honest
            .iter()
            .flat_map(|i| net.metrics(*i))
            .filter(|e| e["event"] == kind)
            .collect()
    };
    assert!(
        events("challenge").iter().any(|e| e["outcome"] == "opened"),
        "the cheater was never challenged"
    );
    let votes = events("vote");
    assert!(
        votes.iter().any(|e| e["guilty"] == true),
        "no juror voted guilty"
    );
    // Every honest juror's vote on the cheater is guilty (a copier's digest is its victim's:
    // a juror must replay the accused's index, not whoever else sent the same bytes).
    for v in votes.iter().filter(|v| v["accused"] == cheat.as_str()) {
        assert_eq!(
            v["guilty"], true,
            "an honest juror acquitted the cheater: {v}"
        );
    }
    let mut convicted = 0;
    for f in final_rounds(show) {
        for (who, verdict) in f["verdicts"].as_object().unwrap() {
            if *who == cheat {
                convicted += usize::from(verdict == "Guilty");
            } else {
                assert_ne!(verdict, "Guilty", "{who} convicted in {f}");
            }
        }
    }
    assert!(convicted > 0, "the cheater was not convicted: {show}");
    let stake = |i: usize| active_stake(net, show, i);
    assert!(stake(cheater) < STAKE, "the cheater kept its stake");
    for &i in honest.iter().chain(innocent) {
        assert_eq!(
            stake(i),
            STAKE,
            "member {i} lost stake: {show}\nits events: {:?}\nits warnings:\n{}",
            net.metrics(i),
            warnings(net, i)
        );
    }
}

/// The lines of trainer `i`'s log at level WARN or above.
fn warnings(net: &Net, i: usize) -> String {
    let log = std::fs::read_to_string(net.base(i).join("trainer.log")).unwrap_or_default();
    log.lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A free-rider announcing another member's payload as its own (`--fault copy`) is replayed,
/// challenged, convicted and slashed; a member that serves its payload to one peer only
/// (`--fault withhold`) gets it relayed to the others, so no round is voided over it.
///
/// The pool uses the sparse codec with error feedback: every payload commits to the residual
/// it carries in and the one it leaves (`synod_diloco::residual`), which verifiers fetch from
/// its author, check against the previous round's commitment and replay with. Honest members
/// pass in every round (residuals carried from round 1 into 2 and 3); the copier, whose payload
/// names residuals it does not have, does not.
#[test]
fn free_rider_is_slashed_and_withholder_cannot_void_a_round() {
    let _turn = Turn::take();
    const R: u32 = 3;
    const SPARSE: &[&str] = &["--codec", "sparse", "--aggregation", "clipped-mean"];
    let net = Net::start();
    net.train_four(
        R,
        30,
        Some(VERIFYING_WINDOW),
        SPARSE,
        [
            &[],
            &[],
            &["--fault", "copy", "--no-jury"],
            &["--fault", "withhold", "--no-jury"],
        ],
        &[],
    );
    let show = completed_with_every_round_final(&net, R);
    // The withholder's payload reached everyone through relays: it is in every included set.
    assert_in_every_included_set(&show, member_of(&net, 3), "withheld payload missing");
    assert_cheater_convicted(&net, &show, &[0, 1], 2, &[3]);
    // Honest sparse payloads were verified after round 1, with a residual carried in, and
    // their payloads are sparse (far below int8's ≈ 1 byte per parameter).
    let verified: Vec<Value> = (0..2)
        .flat_map(|i| net.metrics(i))
        .filter(|e| e["event"] == "verified" && e["honest"] == true)
        .collect();
    assert!(
        verified.iter().any(|e| e["round"].as_u64() >= Some(2)),
        "no honest sparse payload verified after round 1: {verified:?}"
    );
    let sent: Vec<u64> = net
        .metrics(0)
        .iter()
        .filter(|e| e["event"] == "round" && e["round"].as_u64() > Some(0))
        .filter_map(|e| e["bytes_sent_per_worker"].as_u64())
        .collect();
    assert!(
        !sent.is_empty() && sent.iter().all(|b| *b < 10_000),
        "{sent:?}"
    );
    let all: Vec<Value> = (0..2)
        .flat_map(|i| net.metrics(i))
        .filter(|e| e["event"] == "verified")
        .collect();
    eprintln!("payload bytes per round: {sent:?}\nverified: {all:?}");
}

/// Splitting the included set (`--fault late`): trainer 3 announces its honest payload 20 s
/// after its inner phase and commits nothing. Trainer 0's exchange deadline (8 s) passes
/// before, trainers 1 and 2 (300 s) wait for it: ¼ of the stake commits one set, ½ another,
/// nothing reaches the ⅔ quorum, and before the agreed set (`synod_protocol::agreement`) every
/// round was voided. Now the chain fixes the set every member of which more than ⅓ of the stake attests
/// (trainer 3's payload: ½), trainer 0 fetches what it lacks, aggregates that set and commits
/// again, and every round is final with the late payload in it.
#[test]
fn late_announcer_cannot_void_rounds_by_splitting_the_included_set() {
    let _turn = Turn::take();
    const R: u32 = 2;
    let net = Net::start();
    net.train_four_verified(
        R,
        10,
        [&["--round-deadline", "8"], &[], &[], &["--fault", "late"]],
    );
    let show = net.show();
    assert_eq!(show["status"], "Completed", "{show}");
    assert_eq!(
        final_rounds(&show).len() as u32,
        R,
        "a round was voided: {show}"
    );
    let (late, early) = (member_of(&net, 3), member_of(&net, 0));
    assert_in_every_included_set(&show, late, "the late payload is missing");
    // Trainer 0 left the late payload out, then fetched it and committed the agreed set.
    let recommits: Vec<Value> = net
        .metrics(0)
        .into_iter()
        .filter(|e| e["event"] == "recommit")
        .collect();
    assert!(
        recommits.iter().any(|e| e["outcome"] == "ok"
            && e["fetched"]
                .as_array()
                .is_some_and(|f| f.contains(&late.into()))),
        "trainer 0 (member {early}) never committed over the agreed set: {recommits:?}"
    );
    // The honest members lost no stake. The late member never commits, so the chain leaks it
    // as a silent included member when each round is settled (after `show` was read, or
    // before on a slow machine): at most 1 % of its stake per round.
    for i in 0..3 {
        assert_eq!(active_stake(&net, &show, i), STAKE, "member {i} lost stake");
    }
    let late_stake = active_stake(&net, &show, 3);
    assert!(
        late_stake <= STAKE && STAKE - late_stake <= u128::from(R) * STAKE / 100,
        "the late member lost {} planck: {show}",
        STAKE - late_stake
    );
}

/// A member that heartbeats and never announces a payload (`--fault mute`): every honest
/// member's exchange would wait for a live member's payload for 300 s (`--round-deadline`),
/// more than the pool's 60-block round timeout, so that every honest commit landed after the
/// deadline, every round was voided and every honest member was leaked as silent. The
/// exchange never waits past a few blocks before the round's deadline (`exchange_wait`), and
/// it leaves out a live member that announced nothing within two inner phases of our own
/// announcement, at least 30 s (`announce_grace`): the mute member stretches each round by
/// that, not to its deadline. Every round is final without the mute member, every honest
/// member left it out for announcing nothing in the grace, and nobody honest loses stake.
#[test]
fn a_member_that_heartbeats_and_never_announces_cannot_push_honest_commits_past_the_deadline() {
    let _turn = Turn::take();
    const R: u32 = 2;
    let net = Net::start();
    net.train_four_tolerating(R, 10, [&[], &[], &[], &["--fault", "mute"]], &[3]);
    let show = net.show();
    assert_eq!(show["status"], "Completed", "{show}");
    assert_eq!(
        final_rounds(&show).len() as u32,
        R,
        "a round was voided: {show}"
    );
    let mute = member_of(&net, 3);
    for f in final_rounds(&show) {
        assert!(
            f["included"]
                .as_array()
                .is_some_and(|s| !s.contains(&mute.into())),
            "the mute member announced nothing: {f}"
        );
    }
    for i in 0..3 {
        assert_eq!(active_stake(&net, &show, i), STAKE, "member {i} lost stake");
        // Left out after the grace, not when the round's deadline came near.
        let rounds: Vec<Value> = net
            .metrics(i)
            .into_iter()
            .filter(|e| e["event"] == "round" && e["round"].as_u64() != Some(0))
            .collect();
        assert_eq!(rounds.len() as u32, R, "trainer {i}: {rounds:?}");
        for e in &rounds {
            let why = e["excluded"]
                .as_array()
                .and_then(|x| x.iter().find(|m| m[0] == mute))
                .and_then(|m| m[1].as_str());
            assert!(
                why.is_some_and(|w| w.starts_with("live but announced nothing within")),
                "trainer {i} did not leave the mute member out after the grace: {e}"
            );
        }
    }
}

/// Equivocation (`--fault equivocate`): a member announces two signed payloads for each round.
/// The honest members ban it and report the two announcements on-chain
/// (`Challenges::report_equivocation`), which slashes it at once, without a jury; nobody honest
/// loses stake and the pool completes.
#[test]
fn equivocating_trainer_is_reported_and_slashed_on_chain() {
    let _turn = Turn::take();
    let net = Net::start();
    // The equivocator, banned by every peer, would wait 300 s for the final checkpoint.
    net.train_four_tolerating(2, 10, [&[], &[], &[], &["--fault", "equivocate"]], &[3]);
    let show = net.show();
    assert_eq!(show["status"], "Completed", "{show}");
    let cheat = account(&net, 3);
    let reports: Vec<Value> = (0..3)
        .flat_map(|i| net.metrics(i))
        .filter(|e| e["event"] == "equivocation")
        .collect();
    // Either outcome is logged only once the chain has recorded the equivocation.
    assert!(
        reports
            .iter()
            .any(|e| e["outcome"] == "reported" || e["outcome"] == "already reported"),
        "no honest member reported the equivocation: {reports:?}"
    );
    assert!(
        reports
            .iter()
            .all(|e| e["account"].is_null() || e["account"] == cheat.as_str()),
        "an honest member was reported: {reports:?}"
    );
    let stake = |i: usize| active_stake(&net, &show, i);
    // SlashFraction (10 %) of its snapshot stake, per round it was reported for.
    assert!(
        stake(3) <= STAKE - STAKE / 10,
        "the equivocator kept its stake: {show}"
    );
    for i in 0..3 {
        assert_eq!(
            stake(i),
            STAKE,
            "member {i} lost stake: {show}\nits events: {:?}",
            net.metrics(i)
        );
    }
}

/// The node every trainer talks to is killed mid-pool and restarted 8 s later: the trainers
/// reconnect (reads, the background commit and the block subscription) instead of exiting,
/// and every round becomes final.
#[test]
fn trainers_survive_a_node_restart() {
    let _turn = Turn::take();
    const R: u32 = 4;
    let mut net = Net::start();
    net.create_pool(&[
        ("--min-trainers", "3"),
        ("--round-timeout", "60"),
        ("--rounds", &R.to_string()),
        ("--inner-steps", "30"),
    ]);
    let ports = [free_port(), free_port(), free_port()];
    let mut trainers: Vec<Proc> = (0..3).map(|i| net.spawn_trainer(i, &ports, &[])).collect();
    net.wait("round 1 to close", Duration::from_secs(400), || {
        net.metrics(0)
            .iter()
            .any(|e| e["event"] == "closed" && e["round"] == 1)
    });
    net.restart_node(Duration::from_secs(8));
    for (i, p) in trainers.iter_mut().enumerate() {
        wait_exit(p, &net, i, Duration::from_secs(900));
    }
    let show = net.show();
    assert_eq!(show["status"], "Completed");
    assert_eq!(final_rounds(&show).len() as u32, R, "{show}");
    let log = std::fs::read_to_string(net.base(0).join("trainer.log")).unwrap();
    assert!(
        log.contains("reconnected to"),
        "trainer 0 never lost the node?"
    );
}

/// A trainer submits its commit in the background while it opens a challenge or votes: two
/// extrinsics of one account in flight at once must not take the same nonce (the second would
/// invalidate the first: "rendered invalid by another extrinsic"), and none may wait for
/// another's finality (a challenge held behind a commit in flight misses a window of a few
/// blocks): three sent at once land in three blocks in a row at most (each waits for the one
/// before it to be in a block), not one per finality (four blocks apart on the dev chain).
#[test]
fn concurrent_extrinsics_of_one_account_neither_invalidate_nor_wait_for_each_other() {
    let _turn = Turn::take();
    let net = Net::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let chain = net.chain().await;
        let bob = synod_chain::submit::signer_from_suri("//Bob").unwrap();
        let who = synod_chain::submit::account_of(&bob);
        let before = chain.nonce(&who).await.unwrap();
        let calls: Vec<_> = (1..=3u128)
            .map(|i| {
                let (chain, bob) = (chain.clone(), bob.clone());
                tokio::spawn(async move {
                    chain
                        .submit(&synod_chain::calls::bond(i * UNIT), &bob)
                        .await
                })
            })
            .collect();
        let mut blocks = Vec::new();
        for c in calls {
            let included = c.await.unwrap().unwrap();
            blocks.push(included.block_number);
        }
        let span = blocks.iter().max().unwrap() - blocks.iter().min().unwrap();
        assert!(
            span <= 2,
            "each waited for the finality of the one before: {blocks:?}"
        );
        assert_eq!(chain.nonce(&who).await.unwrap(), before + 3);
        assert_eq!(chain.active_stake(&who).await.unwrap(), 6 * UNIT);
    });
}

#[test]
fn fault_injection_is_refused_on_a_live_chain() {
    let _turn = Turn::take();
    let node_bin = Path::new(env!("CARGO_BIN_EXE_synod-trainer")).with_file_name("synod-node");
    let dir = tempfile::tempdir().unwrap();
    // The local testnet's spec, declared Live (as a production chain's spec is).
    let spec = Command::new(&node_bin)
        .args(["build-spec", "--chain", "local"])
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(spec.status.success());
    let mut json: Value = serde_json::from_slice(&spec.stdout).unwrap();
    assert_eq!(json["chainType"], "Local");
    json["chainType"] = Value::from("Live");
    let spec_path = dir.path().join("live.json");
    std::fs::write(&spec_path, serde_json::to_vec(&json).unwrap()).unwrap();
    let rpc_port = free_port();
    let log = std::fs::File::create(dir.path().join("node.log")).unwrap();
    let _node = Proc(
        Command::new(&node_bin)
            .args(["--chain", spec_path.to_str().unwrap()])
            .args(["--base-path", dir.path().join("node").to_str().unwrap()])
            .args(["--rpc-port", &rpc_port.to_string()])
            .args(["--port", &free_port().to_string()])
            .args(["--no-prometheus", "--no-telemetry", "--no-mdns"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_synod-trainer"))
        .args([
            "--threads",
            "1",
            "run",
            "--fault",
            "zeros",
            "--suri",
            "//Bob",
        ])
        .args(["--rpc", &format!("ws://127.0.0.1:{rpc_port}")])
        .args(["--connect-timeout", "120", "--quiet"])
        .args(["--base-path", dir.path().join("trainer").to_str().unwrap()])
        .args(Net::model_flags())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a --fault trainer ran on a Live chain"
    );
    assert!(
        stderr.contains("refused on a Live chain"),
        "unexpected failure: {stderr}"
    );
}

/// Lazy work that outlives the window: a pool whose challenge window closes before one
/// verifier's checks of a round can challenge would pay a member that sends junk and
/// withholds its trace. `pool create` measures the recipe and refuses such a window; a
/// member that cannot keep a pool's window (here: a creator that stated faster members than
/// this machine) refuses to join before anything is bonded or submitted.
#[test]
fn lazy_work_that_outlives_the_window_is_refused_before_any_stake_moves() {
    let _turn = Turn::take();
    let net = Net::start();
    let model = Net::model_flags();
    let with_model = |args: &[&str]| -> Vec<String> {
        args.iter()
            .map(ToString::to_string)
            .chain(model.iter().cloned())
            .collect()
    };
    // 20 000 inner steps of the tiny model: a whole replay takes far longer than the 16 s
    // that a 5-block window leaves after the lag, on any CPU.
    let create = [
        "pool",
        "create",
        "--suri",
        "//Alice",
        "--inner-steps",
        "20000",
        "--rounds",
        "2",
        "--round-timeout",
        "40000",
    ];
    let refused = with_model(&[&create[..], &["--challenge-window", "5"]].concat());
    let err = net.cli_fails(&refused.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        err.contains("a challenge window of 5 blocks") && err.contains("lengthen it"),
        "{err}"
    );
    let err = net.cli_fails(&["pool", "show", "--pool", "0"]);
    assert!(err.contains("pool 0 does not exist"), "{err}");

    // A creator that states its members' step time gets the window that time needs …
    let stated = with_model(
        &[
            &create[..],
            &["--step-secs", "0.00001", "--skip-noise-probe"],
        ]
        .concat(),
    );
    let created = net.cli(&stated.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(created["pool_id"], 0);
    let window = created["challenge_window"].as_u64().unwrap();
    assert_eq!(
        window,
        created["terms"]["min_challenge_window"].as_u64().unwrap()
    );
    assert!(created["terms"]["step_secs_measured"] == false, "{created}");

    // … which this machine cannot keep: it refuses to join, and nothing is staked.
    let base = net.base(0);
    let run = with_model(&[
        "run",
        "--suri",
        SURIS[0],
        "--pool",
        "0",
        "--quiet",
        "--no-prometheus",
        "--base-path",
        base.to_str().unwrap(),
        "--listen",
        "/ip4/127.0.0.1/tcp/0",
    ]);
    let err = net.cli_fails(&run.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        err.contains(&format!("a challenge window of {window} blocks"))
            && err.contains("this member cannot keep the pool's terms"),
        "{err}"
    );
    let pool = net.cli(&["pool", "show", "--pool", "0"]);
    assert_eq!(pool["members"].as_array().map(Vec::len), Some(0), "{pool}");
}

/// Every call a trainer submits (`synod_chain::calls`, built by pallet and call name) encodes
/// against the running runtime's metadata: the pallets, calls, argument names and types the
/// trainer assumes are the runtime's. A call the runtime does not have is refused the same way.
#[test]
fn every_call_a_trainer_submits_encodes_against_the_runtime_metadata() {
    use synod_chain::{
        calls,
        types::{DilocoSpec, PoolKind, PoolSpec, PoolTerms},
    };
    let _turn = Turn::take();
    let net = Net::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let chain = net.chain().await;
        let bob = synod_chain::submit::account_of(
            &synod_chain::submit::signer_from_suri("//Bob").unwrap(),
        );
        let spec = PoolSpec {
            terms: PoolTerms {
                rounds: 6,
                min_trainers: 3,
                max_trainers: 8,
                min_stake: 100 * UNIT,
                reward_per_round: 30 * UNIT,
                quorum: synod_chain::types::Perbill(666_666_667),
                round_timeout: 60,
                challenge_window: 5,
                min_round_length: 0,
                allowed_trainers: vec![bob],
            },
            kind: PoolKind::DiLoCo(DilocoSpec {
                model_config_hash: [1; 32],
                initial_weights_hash: [2; 32],
                dataset_id: b"tinyshakespeare".to_vec(),
                dataset_hash: [3; 32],
                inner_steps: 50,
            }),
        };
        let key = vec![0u8; calls::ML_DSA_65_PUBLIC_KEY_LEN];
        // An Ed25519 peer id: the identity-multihash prefix, then the key.
        let peer = [&[0u8, 36, 8, 1, 18, 32][..], &[1; 32]].concat();
        // One per function of `synod_chain::calls`.
        let mut encoded = vec![
            chain.call_data(&calls::bond(UNIT)).await,
            chain.call_data(&calls::create_pool(spec)).await,
            chain
                .call_data(&calls::set_allowed_trainers(0, vec![bob]))
                .await,
            chain
                .call_data(&calls::join_pool(0, UNIT, peer, &key, [3; 64]).unwrap())
                .await,
            chain
                .call_data(&calls::commit_checkpoint(0, 1, [4; 32], vec![0, 1, 2]))
                .await,
            chain
                .call_data(&calls::open_challenge(0, 1, bob, vec![5; 64]).unwrap())
                .await,
            chain
                .call_data(
                    &calls::open_narrowed_challenge(
                        0,
                        1,
                        bob,
                        vec![5; 64],
                        calls::Dispute::Encoding,
                    )
                    .unwrap(),
                )
                .await,
            chain
                .call_data(
                    &calls::report_equivocation(0, 1, bob, vec![6; 64], vec![7; 64]).unwrap(),
                )
                .await,
            chain.call_data(&calls::vote(0, true)).await,
            chain.call_data(&calls::appeal(0)).await,
            chain.call_data(&calls::register_juror()).await,
            chain.call_data(&calls::unregister_juror()).await,
            chain.call_data(&calls::void_expired_round(0)).await,
            chain
                .call_data(&calls::decide_unmatched_commits(0, 1))
                .await,
            chain.call_data(&calls::settle_round(0, 1)).await,
            chain.call_data(&calls::claim_rewards(0)).await,
        ];
        for (i, call) in encoded.drain(..).enumerate() {
            let bytes = call.unwrap_or_else(|e| panic!("call {i}: {e}"));
            assert!(bytes.len() >= 2, "pallet and call index");
        }
        // The dispute is encoded as the runtime's enum: call 7, `Segment(3)` its variant 2
        // and a little-endian u32.
        let narrowed = chain
            .call_data(
                &calls::open_narrowed_challenge(0, 1, bob, vec![5; 64], calls::Dispute::Segment(3))
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(narrowed[1], 7, "{narrowed:?}");
        assert!(narrowed.ends_with(&[2, 3, 0, 0, 0]), "{narrowed:?}");
        // The check can fail: an unknown call, and a call with an argument missing.
        let unknown = subxt::dynamic::tx("Challenges", "register_jurors", ());
        assert!(chain.call_data(&unknown).await.is_err());
        let short = subxt::dynamic::tx("Challenges", "vote", (0u32,));
        assert!(chain.call_data(&short).await.is_err());
    });
}
