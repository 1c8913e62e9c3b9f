//! `bench diloco`: DiLoCo vs data parallel at equal tokens and compute.

use anyhow::Result;
use serde_json::json;
use synod_diloco::recipe::RecipeCodec;

use synod_member::config::TrainConfig;
use synod_member::plot::{loss_vs_tokens, Curve};
use synod_member::train::{initial_params, run_ddp, run_diloco, Setup};

/// The codec's name in the recipe JSON (`int8`, `fp32`, `sparse`).
fn codec_name(codec: RecipeCodec) -> &'static str {
    match codec {
        RecipeCodec::Int8 => "int8",
        RecipeCodec::Fp32 => "fp32",
        RecipeCodec::Sparse => "sparse",
    }
}

/// Runs both methods of `c` (its `method` is not read) from the same θ₀ on the same batches,
/// writes `diloco_vs_ddp.png` under `c.out`, and prints per-evaluation lines plus one summary
/// line.
///
/// # Errors
/// An unreadable corpus or initial checkpoint, libtorch and codec errors, an unwritable
/// output directory.
pub fn run(c: &TrainConfig) -> Result<()> {
    let recipe = &c.recipe.recipe;
    std::fs::create_dir_all(&c.out)?;
    let setup = Setup::new(&c.recipe)?;
    let theta0 = initial_params(&setup, recipe, c.init.as_deref())?;
    let mut quiet = |_: &synod_member::train::RoundRecord| Ok(());
    let t0 = std::time::Instant::now();
    let dl = run_diloco(c, &setup, theta0.clone(), None, &mut quiet)?;
    let diloco_secs = t0.elapsed().as_secs_f64();
    let t1 = std::time::Instant::now();
    let dp = run_ddp(c, &setup, theta0, &mut quiet)?;
    let ddp_secs = t1.elapsed().as_secs_f64();
    let (Some(d), Some(b)) = (dl.last(), dp.last()) else {
        anyhow::bail!("no rounds ran")
    };
    for (x, y) in dl.iter().zip(&dp) {
        println!(
            "{}",
            json!({"bench": "diloco", "round": x.round, "tokens": x.tokens, "diloco_val_loss": x.val_loss, "ddp_val_loss": y.val_loss})
        );
    }
    let pd: Vec<(f64, f64)> = dl.iter().map(|r| (r.tokens as f64, r.val_loss)).collect();
    let pb: Vec<(f64, f64)> = dp.iter().map(|r| (r.tokens as f64, r.val_loss)).collect();
    let png = c.out.join("diloco_vs_ddp.png");
    let dlabel = format!(
        "DiLoCo {}, {} workers, H={}",
        codec_name(recipe.codec),
        c.workers,
        c.inner_steps
    );
    let blabel = format!(
        "data parallel, {} workers (f32 gradients every step)",
        c.workers
    );
    loss_vs_tokens(
        &png,
        "DiLoCo vs data parallel (equal tokens)",
        &[
            Curve {
                label: &dlabel,
                points: &pd,
            },
            Curve {
                label: &blabel,
                points: &pb,
            },
        ],
    )?;
    println!(
        "{}",
        json!({
            "bench": "diloco",
            "codec": codec_name(recipe.codec),
            "sparse_topk": recipe.sparse.map(|s| s.topk),
            "ef_decay": recipe.sparse.map(|s| s.ef_decay),
            "aggregation": recipe.aggregation.name(),
            "outer_lr": recipe.outer_lr,
            "outer_momentum": recipe.outer_momentum,
            "workers": c.workers,
            "inner_steps": c.inner_steps,
            "rounds": c.rounds,
            "tokens": d.tokens,
            "diloco_val_loss": d.val_loss,
            "ddp_val_loss": b.val_loss,
            "loss_ratio": d.val_loss / b.val_loss,
            "bytes_diloco": d.bytes_sent_per_worker,
            "bytes_ddp": b.bytes_sent_per_worker,
            "bytes_ratio": b.bytes_sent_per_worker as f64 / d.bytes_sent_per_worker.max(1) as f64,
            "diloco_secs": diloco_secs,
            "ddp_secs": ddp_secs,
            "plot": png,
        })
    );
    Ok(())
}
