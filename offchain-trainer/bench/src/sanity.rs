//! `bench sanity`: nanoGPT's CPU "baby GPT" recipe on one worker.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use serde_json::json;
use synod_model::{eval_loss, load_params};

use synod_member::args::ModelArgs;
use synod_member::train::{initial_params, Setup};

/// Arguments of `bench sanity`.
#[derive(Args, Clone, Debug)]
pub struct SanityArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Text corpus.
    #[arg(long, default_value = "../shared/data/tinyshakespeare.txt")]
    pub data: PathBuf,
    /// Training iterations (nanoGPT: 2000).
    #[arg(long, default_value_t = 2000)]
    pub iters: u32,
    /// Validation batches for the final loss.
    #[arg(long, default_value_t = 100)]
    pub final_eval_batches: u32,
}

/// Trains one worker for `iters` steps (lr 1e-3 → 1e-4 cosine, warm-up 100, batch 12, context 64
/// with the defaults) and prints `{"bench":"sanity","val_loss",...}`; nanoGPT reports ≈1.88.
pub fn run(a: &SanityArgs) -> Result<()> {
    let setup = Setup::new(&a.model, &a.data)?;
    let theta0 = initial_params(&setup, &a.model, None)?;
    let start = std::time::Instant::now();
    let mut replica = setup.replica(&a.model, 0, a.iters, a.iters)?;
    load_params(&replica.vs, &theta0)?;
    let pb = synod_member::train::progress(u64::from(a.iters), "iters", false);
    let mut last = 0.0;
    for step in 0..a.iters {
        let b = replica.plan.train_batch(0, 1, step);
        last = replica.train_step(&[b], u64::from(step))?;
        pb.inc(1);
    }
    pb.finish_and_clear();
    let secs = start.elapsed().as_secs_f64();
    let val_loss = eval_loss(
        &replica.model,
        &replica.plan,
        a.final_eval_batches,
        setup.device,
    )?;
    println!(
        "{}",
        json!({
            "bench": "sanity",
            "model": a.model.model,
            "iters": a.iters,
            "batch": a.model.batch,
            "val_loss": val_loss,
            "train_loss_last": last,
            "nanogpt_reference_val_loss": 1.88,
            "secs": secs,
        })
    );
    Ok(())
}
