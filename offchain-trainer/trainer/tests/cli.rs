//! Runs the real `synod-trainer` binary on tinyshakespeare.
#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn data() -> PathBuf {
    std::env::var_os("SYNOD_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../../shared/data/tinyshakespeare.txt")
        })
}

fn trainer(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_synod-trainer"))
        .args(["--threads", "1"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "synod-trainer {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The tiny local recipe every local test runs: 4 workers, H = 15, 4 rounds, CPU.
fn tiny_recipe(data: &Path) -> Vec<String> {
    [
        "--data",
        data.to_str().unwrap(),
        "--model",
        "tiny",
        "--batch",
        "8",
        "--workers",
        "4",
        "--inner-steps",
        "15",
        "--rounds",
        "4",
        "--warmup",
        "5",
        "--lr",
        "3e-3",
        "--device",
        "cpu",
        "--eval-batches",
        "8",
        "--quiet",
    ]
    .iter()
    .map(ToString::to_string)
    .collect()
}

fn train(dir: &Path, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["train".to_string()];
    args.extend(tiny_recipe(&data()));
    args.extend(["--out".to_string(), dir.to_str().unwrap().to_string()]);
    args.extend(extra.iter().map(ToString::to_string));
    trainer(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let text = std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn four_local_workers_train_and_commit_content_addressed_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let rows = train(dir.path(), &[]);
    assert_eq!(rows.len(), 5, "round 0 plus 4 rounds");
    let first = rows[0]["val_loss"].as_f64().unwrap();
    let last = rows[4]["val_loss"].as_f64().unwrap();
    assert!(last < first - 1.0, "validation loss {first} -> {last}");
    for (r, row) in rows.iter().enumerate().skip(1) {
        assert_eq!(row["round"], r);
        assert_eq!(row["included"], serde_json::json!([0, 1, 2, 3]));
        // The round's wall clock covers its inner phases; utilisation is their share.
        let (compute, wall) = (
            row["compute_secs"].as_f64().unwrap(),
            row["wall_secs"].as_f64().unwrap(),
        );
        let u = row["compute_utilisation"].as_f64().unwrap();
        assert!(wall >= compute && compute > 0.0, "{row}");
        assert!(
            (u - compute / wall).abs() < 1e-9 && u > 0.0 && u <= 1.0,
            "{row}"
        );
        let file = dir.path().join(format!("round-{r:06}.safetensors"));
        let bytes = std::fs::read(&file).unwrap();
        assert_eq!(
            row["checkpoint_hash"].as_str().unwrap(),
            blake3::hash(&bytes).to_hex().as_str()
        );
    }
    // Per-worker bytes grow by one int8 payload (≈ params + scales, < 4·params) per round.
    let b1 = rows[1]["bytes_sent_per_worker"].as_u64().unwrap();
    let b4 = rows[4]["bytes_sent_per_worker"].as_u64().unwrap();
    assert!(b1 > 0 && b4 > 3 * b1 && b4 < 5 * b1);
    let png = std::fs::read(dir.path().join("loss.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
}

#[test]
fn the_same_pool_seed_replays_to_the_same_checkpoint_hashes() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let extra = ["--rounds", "2", "--workers", "2"];
    let ra = train(a.path(), &extra);
    let rb = train(b.path(), &extra);
    let hashes = |rows: &[Value]| {
        rows.iter()
            .skip(1)
            .map(|r| r["checkpoint_hash"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(hashes(&ra), hashes(&rb));
    let c = tempfile::tempdir().unwrap();
    let rc = train(
        c.path(),
        &["--rounds", "2", "--workers", "2", "--seed", "7"],
    );
    assert_ne!(hashes(&ra), hashes(&rc));
}

#[test]
fn data_parallel_baseline_runs_on_the_same_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let rows = train(dir.path(), &["--method", "ddp", "--rounds", "2"]);
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[2]["method"], "ddp");
    // 4 workers × 15 steps × 8 sequences × 32 tokens per block.
    assert_eq!(rows[2]["tokens"], 2 * 4 * 15 * 8 * 32);
    assert!(rows[2]["val_loss"].as_f64().unwrap() < rows[0]["val_loss"].as_f64().unwrap());
}

#[test]
fn init_prints_the_hash_of_the_file_it_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("init.safetensors");
    let out = trainer(&[
        "init",
        "--model",
        "tiny",
        "--device",
        "cpu",
        "--out",
        path.to_str().unwrap(),
    ]);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        v["checkpoint_hash"].as_str().unwrap(),
        blake3::hash(&std::fs::read(&path).unwrap())
            .to_hex()
            .as_str()
    );
}

#[test]
fn codec_benchmark_prints_its_figures() {
    let out = trainer(&["bench", "codec", "--params", "300000", "--reps", "1"]);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    for k in [
        "encode_gbps",
        "decode_gbps",
        "memcpy_gbps",
        "rel_l2_error",
        "bytes_ratio_vs_fp32",
    ] {
        assert!(v[k].as_f64().unwrap() > 0.0, "{k}");
    }
    assert!(v["rel_l2_error"].as_f64().unwrap() < 0.015);
    // Top-128 of 4096 (the default) with 4-level values and Golomb-coded positions: at least
    // the 100× fewer bytes than fp32 (108× on these 300 000 parameters, 110× on 4 M;
    // 4-bit codes with Rice-coded positions gave 101× on 4 M, with fixed-width indices 64×).
    let out = trainer(&[
        "bench", "codec", "--params", "300000", "--reps", "1", "--codec", "sparse",
    ]);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["codec"], "sparse");
    assert_eq!(v["sparse_topk"], 128);
    assert!(v["bytes_ratio_vs_fp32"].as_f64().unwrap() >= 100.0, "{v}");
}

#[test]
fn sparse_local_training_learns_with_error_feedback_on_a_fraction_of_the_bytes() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let extra = ["--aggregation", "mean"];
    let int8 = train(a.path(), &extra);
    let sparse = train(b.path(), &["--aggregation", "mean", "--codec", "sparse"]);
    let loss = |rows: &[Value], r: usize| rows[r]["val_loss"].as_f64().unwrap();
    assert!(
        loss(&sparse, 4) < loss(&sparse, 0) - 0.5,
        "sparse: {} -> {}",
        loss(&sparse, 0),
        loss(&sparse, 4)
    );
    let bytes = |rows: &[Value]| rows[4]["bytes_sent_per_worker"].as_u64().unwrap();
    // The tiny model's small tensors (biases, norms: < 64 elements) are sent whole, so the
    // ratio here is ≈ 9×, not the ≈ 125× of large matrices.
    assert!(
        bytes(&sparse) * 5 < bytes(&int8),
        "sparse {} bytes, int8 {}",
        bytes(&sparse),
        bytes(&int8)
    );
}

#[test]
fn a_pool_refuses_sparse_overlapped_rounds_its_verifiers_cannot_replay() {
    // An overlapped round is encoded before the previous round's included set, which fixes
    // the error-feedback residual a sparse payload carries, is known: refused before any RPC.
    let out = Command::new(env!("CARGO_BIN_EXE_synod-trainer"))
        .args([
            "pool",
            "create",
            "--codec",
            "sparse",
            "--overlap",
            "--device",
            "cpu",
            "--data",
        ])
        .arg(data())
        .args(["--rpc", "ws://127.0.0.1:9", "--connect-timeout", "1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--codec sparse with --overlap"), "{err}");
}

#[test]
fn allreduce_benchmark_prints_every_transport_side_by_side() {
    let out = trainer(&[
        "bench",
        "allreduce",
        "--peers",
        "3",
        "--params",
        "2000000",
        "--repeat",
        "1",
    ]);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["all_included"], true, "{v}");
    for k in [
        "raw_tcp_secs",
        "noise_secs",
        "tls_secs",
        "libp2p_tcp_secs",
        "libp2p_tcp_tls_secs",
        "libp2p_quic_secs",
        "ratio",
        "ratio_vs_noise",
        "ratio_vs_tls",
        "raw_tcp_gbps",
        "noise_gbps",
        "tls_gbps",
        "libp2p_tcp_gbps",
        "libp2p_tcp_tls_gbps",
        "libp2p_quic_gbps",
        "single_stream_tcp_gbps",
    ] {
        assert!(v[k].as_f64().unwrap() > 0.0, "{k}: {v}");
    }
    assert!(["tcp-noise", "tcp-tls", "quic"].contains(&v["faster_transport"].as_str().unwrap()));
}

#[test]
fn memory_benchmark_prints_both_peaks_of_a_bit_identical_aggregate() {
    let out = trainer(&["bench", "memory", "--peers", "3", "--params", "3000000"]);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["bit_identical"], true);
    assert_eq!(v["peers"], 3);
    for k in ["decode_all_peak_mib", "streaming_peak_mib", "payload_mib"] {
        assert!(v[k].as_f64().unwrap() > 0.0, "{k}: {v}");
    }
}

#[test]
fn verify_benchmark_prices_segment_checks_against_whole_replays_and_catches_a_lazy_member() {
    let data = data();
    let out = trainer(&[
        "bench",
        "verify",
        "--model",
        "tiny",
        "--device",
        "cpu",
        "--inner-steps",
        "16",
        "--segments",
        "4",
        "--trials",
        "12",
        "--data",
        data.to_str().unwrap(),
    ]);
    let v: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(v["bench"], "verify");
    assert_eq!(
        (v["segments"].as_u64(), v["segment_len"].as_u64()),
        (Some(16), Some(1))
    );
    let (segment, whole) = (
        v["segment_check_secs"].as_f64().unwrap(),
        v["whole_replay_secs"].as_f64().unwrap(),
    );
    assert!(segment > 0.0 && whole > 0.0);
    // 2 of 16 one-step segments skipped, 4 drawn: caught by ≈ 45 % of verifiers (12 trials).
    assert_eq!(v["bad_segments"], 2);
    let caught = v["caught_measured"].as_f64().unwrap();
    assert!(caught > 0.0, "no verifier caught the lazy member: {v}");
    assert!(v["escape_one_round"].as_f64().unwrap() < 1.0);
    // A juror of a challenge narrowed to a skipped segment convicts from that segment alone.
    assert_eq!(v["juror_dispute_guilty"], true, "{v}");
    assert!(v["juror_dispute_secs"].as_f64().unwrap() > 0.0);
    // 4 members of equal stake: the 3 honest ones a third of the stake guarantees are counted
    // on, each sampling at 1 − 0.01^{1/3}.
    assert_eq!(v["honest_verifiers"], 3);
    let rate = v["verify_rate"].as_f64().unwrap();
    assert!(
        (rate - (1.0 - 0.01f64.powf(1.0 / 3.0))).abs() < 1e-12,
        "{rate}"
    );
}

#[test]
fn byzantine_benchmark_shows_the_robust_rule_holding_where_the_mean_breaks() {
    let mut args = vec!["bench".to_string(), "byzantine".to_string()];
    args.extend(tiny_recipe(&data()));
    args.push("--compare-mean".to_string());
    let out = trainer(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let v: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(v["rule"], "clipped_trimmed_mean");
    let clean = v["clean_val_loss"].as_f64().unwrap();
    assert!(clean.is_finite() && clean > 0.0);
    for attack in [
        "sign_flip",
        "scale_x100",
        "zeros",
        "gaussian",
        "alie",
        "copy",
    ] {
        let a = &v["attacks"][attack];
        let ratio = a["ratio"]
            .as_f64()
            .unwrap_or_else(|| panic!("{attack} diverged: {a}"));
        assert!(ratio < 1.5, "{attack}: robust rule ratio {ratio}");
    }
    // The same ×100 attacker wrecks the plain mean (diverged: null, or far worse).
    let robust = v["attacks"]["scale_x100"]["ratio"].as_f64().unwrap();
    let mean = v["mean_rule"]["attacks"]["scale_x100"]["ratio"].as_f64();
    assert!(
        mean.is_none_or(|m| m > robust * 1.2),
        "mean {mean:?} vs robust {robust}"
    );
}

#[test]
fn bad_arguments_fail_with_a_message() {
    let out = Command::new(env!("CARGO_BIN_EXE_synod-trainer"))
        .args([
            "train",
            "--data",
            "/nonexistent/corpus.txt",
            "--device",
            "cpu",
            "--quiet",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("corpus"));
    let out = Command::new(env!("CARGO_BIN_EXE_synod-trainer"))
        .args(["train", "--model", "huge"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}
