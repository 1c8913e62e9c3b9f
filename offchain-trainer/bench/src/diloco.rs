//! `bench diloco`: DiLoCo vs data parallel at equal tokens and compute.

use anyhow::Result;
use serde_json::json;

use synod_member::args::TrainArgs;
use synod_member::plot::{loss_vs_tokens, Curve};
use synod_member::train::{initial_params, run_ddp, run_diloco, Setup};

/// Runs both methods from the same θ₀ on the same batches, writes `diloco_vs_ddp.png` under
/// `a.out`, and prints per-evaluation lines plus one summary line.
pub fn run(a: &TrainArgs) -> Result<()> {
    std::fs::create_dir_all(&a.out)?;
    let setup = Setup::new(&a.model, &a.data)?;
    let theta0 = initial_params(&setup, &a.model, a.init.as_deref())?;
    let mut quiet = |_: &synod_member::train::RoundRecord| Ok(());
    let t0 = std::time::Instant::now();
    let dl = run_diloco(a, &setup, theta0.clone(), None, &mut quiet)?;
    let diloco_secs = t0.elapsed().as_secs_f64();
    let t1 = std::time::Instant::now();
    let dp = run_ddp(a, &setup, theta0, &mut quiet)?;
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
    let png = a.out.join("diloco_vs_ddp.png");
    let dlabel = format!(
        "DiLoCo {}, {} workers, H={}",
        a.outer.wire.codec.name(),
        a.workers,
        a.inner_steps
    );
    let blabel = format!(
        "data parallel, {} workers (f32 gradients every step)",
        a.workers
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
            "codec": a.outer.wire.codec.name(),
            "sparse_topk": a.outer.wire.sparse().then_some(a.outer.wire.sparse_topk),
            "ef_decay": a.outer.wire.sparse().then_some(a.outer.ef_decay),
            "aggregation": a.outer.aggregation().rule().name(),
            "outer_lr": a.outer.outer_lr(),
            "outer_momentum": a.outer.outer_momentum(),
            "workers": a.workers,
            "inner_steps": a.inner_steps,
            "rounds": a.rounds,
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
