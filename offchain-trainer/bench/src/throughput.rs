//! `bench throughput`: our inner step against plain PyTorch, same model, batch and threads.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::{json, Value};

use synod_member::args::ModelArgs;
use synod_member::train::Setup;

/// Arguments of `bench throughput`.
#[derive(Args, Clone, Debug)]
pub struct ThroughputArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Text corpus.
    #[arg(long, default_value = "../shared/data/tinyshakespeare.txt")]
    pub data: PathBuf,
    /// Timed steps per trial.
    #[arg(long, default_value_t = 40)]
    pub steps: u32,
    /// Untimed steps before each trial's timing starts.
    #[arg(long, default_value_t = 5)]
    pub untimed_steps: u32,
    /// Alternating trials of each side; the best of each counts.
    #[arg(long, default_value_t = 2)]
    pub trials: u32,
    /// Python interpreter with torch (default: $SYNOD_PYTHON, else python3).
    #[arg(long)]
    pub python: Option<String>,
    /// Directory holding bench_throughput.py and synod_gpt.py.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../python"))]
    pub python_dir: PathBuf,
}

fn ours(a: &ThroughputArgs, setup: &Setup) -> Result<f64> {
    let mut r = setup.replica(&a.model, 0, 1, a.untimed_steps + a.steps)?;
    let mut t0 = Instant::now();
    for s in 0..a.untimed_steps + a.steps {
        if s == a.untimed_steps {
            t0 = Instant::now();
        }
        let b = r.plan.train_batch(0, 1, s);
        r.train_step(&[b], u64::from(s))?;
    }
    Ok(
        (a.model.batch * setup.plan.seq_len) as f64 * f64::from(a.steps)
            / t0.elapsed().as_secs_f64(),
    )
}

fn theirs(a: &ThroughputArgs, seq_len: usize, threads: usize) -> Result<f64> {
    let g = a.model.gpt()?;
    let python = a
        .python
        .clone()
        .or_else(|| std::env::var("SYNOD_PYTHON").ok())
        .unwrap_or_else(|| "python3".into());
    let out = Command::new(&python)
        .arg(a.python_dir.join("bench_throughput.py"))
        .args(["--config", &json!({"vocab": g.vocab, "ctx": g.ctx, "n_layer": g.n_layer, "n_head": g.n_head, "d_model": g.d_model}).to_string()])
        .arg("--data")
        .arg(&a.data)
        .args(["--batch", &a.model.batch.to_string(), "--seq-len", &seq_len.to_string()])
        .args(["--steps", &a.steps.to_string(), "--warmup", &a.untimed_steps.to_string(), "--threads", &threads.to_string()])
        .output()
        .with_context(|| format!("running {python} (needs torch; scripts/setup.sh installs it)"))?;
    if !out.status.success() {
        bail!(
            "PyTorch baseline failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let v: Value = serde_json::from_slice(&out.stdout)?;
    v["tokens_per_s"]
        .as_f64()
        .context("no tokens_per_s from the PyTorch baseline")
}

/// Alternates trials of both sides and prints `{"bench":"throughput","ratio",...}`.
pub fn run(a: &ThroughputArgs, threads: usize) -> Result<()> {
    let setup = Setup::new(&a.model, &a.data)?;
    if setup.device != synod_model::tch::Device::Cpu {
        tracing::warn!("the PyTorch baseline runs on CPU; compare with --device cpu");
    }
    let (mut best_ours, mut best_theirs) = (0f64, 0f64);
    for _ in 0..a.trials.max(1) {
        best_ours = best_ours.max(ours(a, &setup)?);
        best_theirs = best_theirs.max(theirs(a, setup.plan.seq_len, threads)?);
    }
    println!(
        "{}",
        json!({
            "bench": "throughput",
            "model": a.model.model,
            "batch": a.model.batch,
            "seq_len": setup.plan.seq_len,
            "threads": threads,
            "synod_tokens_per_s": best_ours,
            "pytorch_tokens_per_s": best_theirs,
            "ratio": best_ours / best_theirs,
        })
    );
    Ok(())
}
