//! The data-parallel baseline: gradients averaged over N workers every step.

use std::time::Instant;

use anyhow::Result;
use synod_checkpoint::ParamSet;
use synod_model::{eval_loss, load_params, DataParallel};

use super::{progress, RoundRecord, Setup};
use crate::config::TrainConfig;

/// Runs `a.rounds · a.inner_steps` synchronous steps from `theta0` on the same tokens DiLoCo
/// would see, evaluating every `a.inner_steps` steps (the same token counts as DiLoCo's rounds).
pub fn run_ddp(
    a: &TrainConfig,
    setup: &Setup,
    theta0: ParamSet,
    emit: &mut dyn FnMut(&RoundRecord) -> Result<()>,
) -> Result<Vec<RoundRecord>> {
    let m = &a.recipe.recipe;
    let total = a.rounds.saturating_mul(a.inner_steps);
    let replica = setup.replica(m, 0, a.inner_steps, total)?;
    load_params(&replica.vs, &theta0)?;
    let mut ddp = DataParallel {
        replica,
        workers: a.workers,
    };
    let per_step = ddp.bytes_per_step();
    let tokens_per_step = u64::from(a.workers) * (setup.plan.batch * setup.plan.seq_len) as u64;
    let mut records = Vec::new();
    let pb = progress(u64::from(total), "steps", a.quiet);
    let (mut loss_sum, mut compute) = (0.0, 0.0);
    for step in 0..=u64::from(total) {
        let h = u64::from(a.inner_steps.max(1));
        if step % h == 0 {
            let val_loss = eval_loss(
                &ddp.replica.model,
                &ddp.replica.plan,
                a.recipe.eval_batches,
                setup.device,
            )?;
            let r = RoundRecord {
                method: "ddp",
                round: u32::try_from(step / h).unwrap_or(u32::MAX),
                tokens: step * tokens_per_step,
                val_loss,
                train_loss: if step == 0 {
                    f64::NAN
                } else {
                    loss_sum / h as f64
                },
                bytes_sent_per_worker: step * per_step,
                checkpoint_hash: None,
                included: Vec::new(),
                compute_secs: compute,
                outer_secs: 0.0,
                exchange_secs: 0.0,
                wall_secs: 0.0,
                compute_utilisation: 0.0,
                eval_secs: 0.0,
                duty_secs: 0.0,
                excluded: Vec::new(),
            }
            .with_wall(compute);
            emit(&r)?;
            records.push(r);
            loss_sum = 0.0;
            compute = 0.0;
        }
        if step == u64::from(total) {
            break;
        }
        let t0 = Instant::now();
        loss_sum += ddp.step(step)?;
        compute += t0.elapsed().as_secs_f64();
        pb.inc(1);
    }
    pb.finish_and_clear();
    Ok(records)
}
