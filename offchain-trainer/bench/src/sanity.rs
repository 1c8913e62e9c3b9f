//! `bench sanity`: nanoGPT's CPU "baby GPT" recipe on one worker.

use anyhow::Result;
use serde_json::json;
use synod_model::{eval_loss, load_params};

use synod_member::config::RecipeConfig;
use synod_member::train::{initial_params, Setup};

/// What `bench sanity` runs.
#[derive(Clone, Debug)]
pub struct SanityConfig {
    /// The recipe (model, batch, inner optimizer, seed), corpus and device.
    pub recipe: RecipeConfig,
    /// Training iterations (nanoGPT: 2000).
    pub iters: u32,
    /// Validation batches for the final loss.
    pub final_eval_batches: u32,
}

/// Trains one worker for `iters` steps (lr 1e-3 → 1e-4 cosine, warm-up 100, batch 12, context 64
/// with the defaults) and prints `{"bench":"sanity","val_loss",...}`; nanoGPT reports ≈1.88.
///
/// # Errors
/// An unreadable corpus, an unknown device or model preset, libtorch errors.
pub fn run(c: &SanityConfig) -> Result<()> {
    let recipe = &c.recipe.recipe;
    let setup = Setup::new(&c.recipe)?;
    let theta0 = initial_params(&setup, recipe, None)?;
    let start = std::time::Instant::now();
    let mut replica = setup.replica(recipe, 0, c.iters, c.iters)?;
    load_params(&replica.vs, &theta0)?;
    let pb = synod_member::train::progress(u64::from(c.iters), "iters", false);
    let mut last = 0.0;
    for step in 0..c.iters {
        let b = replica.plan.train_batch(0, 1, step);
        last = replica.train_step(&[b], u64::from(step))?;
        pb.inc(1);
    }
    pb.finish_and_clear();
    let secs = start.elapsed().as_secs_f64();
    let val_loss = eval_loss(
        &replica.model,
        &replica.plan,
        c.final_eval_batches,
        setup.device,
    )?;
    println!(
        "{}",
        json!({
            "bench": "sanity",
            "model": recipe.model,
            "iters": c.iters,
            "batch": recipe.batch,
            "val_loss": val_loss,
            "train_loss_last": last,
            "nanogpt_reference_val_loss": 1.88,
            "secs": secs,
        })
    );
    Ok(())
}
