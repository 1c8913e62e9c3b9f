//! `bench throughput`: our inner step against plain PyTorch, same model, batch and threads.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use synod_member::config::RecipeConfig;
use synod_member::train::{model_config, Setup};

/// The directory of `bench_throughput.py` and `synod_gpt.py` in this source tree.
pub const PYTHON_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../python");

/// What `bench throughput` runs.
#[derive(Clone, Debug)]
pub struct ThroughputConfig {
    /// The recipe (model, batch, sequence length), corpus and device.
    pub recipe: RecipeConfig,
    /// Timed steps per trial.
    pub steps: u32,
    /// Untimed steps before each trial's timing starts.
    pub untimed_steps: u32,
    /// Alternating trials of each side; the best of each counts.
    pub trials: u32,
    /// Python interpreter with torch; `None`: `$SYNOD_PYTHON`, else `python3`.
    pub python: Option<String>,
    /// Directory holding bench_throughput.py and synod_gpt.py ([`PYTHON_DIR`] in this tree).
    pub python_dir: PathBuf,
}

fn ours(c: &ThroughputConfig, setup: &Setup) -> Result<f64> {
    let mut r = setup.replica(&c.recipe.recipe, 0, 1, c.untimed_steps + c.steps)?;
    let mut t0 = Instant::now();
    for s in 0..c.untimed_steps + c.steps {
        if s == c.untimed_steps {
            t0 = Instant::now();
        }
        let b = r.plan.train_batch(0, 1, s);
        r.train_step(&[b], u64::from(s))?;
    }
    Ok(
        (c.recipe.recipe.batch * setup.plan.seq_len) as f64 * f64::from(c.steps)
            / t0.elapsed().as_secs_f64(),
    )
}

fn theirs(c: &ThroughputConfig, seq_len: usize, threads: usize) -> Result<f64> {
    let g = model_config(&c.recipe.recipe)?;
    let python = c
        .python
        .clone()
        .or_else(|| std::env::var("SYNOD_PYTHON").ok())
        .unwrap_or_else(|| "python3".into());
    let out = Command::new(&python)
        .arg(c.python_dir.join("bench_throughput.py"))
        .args(["--config", &json!({"vocab": g.vocab, "ctx": g.ctx, "n_layer": g.n_layer, "n_head": g.n_head, "d_model": g.d_model}).to_string()])
        .arg("--data")
        .arg(&c.recipe.data)
        .args(["--batch", &c.recipe.recipe.batch.to_string(), "--seq-len", &seq_len.to_string()])
        .args(["--steps", &c.steps.to_string(), "--warmup", &c.untimed_steps.to_string(), "--threads", &threads.to_string()])
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

/// Alternates trials of both sides, ours and PyTorch's each on `threads` threads, and prints
/// `{"bench":"throughput","ratio",...}` (tokens per second).
///
/// # Errors
/// An unreadable corpus, an unknown device or model preset, libtorch errors; a PyTorch
/// baseline that does not run or report.
pub fn run(c: &ThroughputConfig, threads: usize) -> Result<()> {
    let setup = Setup::new(&c.recipe)?;
    if setup.device != synod_model::tch::Device::Cpu {
        tracing::warn!("the PyTorch baseline runs on CPU; compare with --device cpu");
    }
    let (mut best_ours, mut best_theirs) = (0f64, 0f64);
    for _ in 0..c.trials.max(1) {
        best_ours = best_ours.max(ours(c, &setup)?);
        best_theirs = best_theirs.max(theirs(c, setup.plan.seq_len, threads)?);
    }
    println!(
        "{}",
        json!({
            "bench": "throughput",
            "model": c.recipe.recipe.model,
            "batch": c.recipe.recipe.batch,
            "seq_len": setup.plan.seq_len,
            "threads": threads,
            "synod_tokens_per_s": best_ours,
            "pytorch_tokens_per_s": best_theirs,
            "ratio": best_ours / best_theirs,
        })
    );
    Ok(())
}
