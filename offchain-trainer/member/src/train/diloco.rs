//! Local DiLoCo: N workers in this process, one outer state.

use std::path::Path;
use std::time::Instant;

use anyhow::Result;
use synod_checkpoint::ParamSet;
use synod_diloco::byzantine::Adversary;
use synod_diloco::{NesterovSgd, OuterState};
use synod_model::{eval_loss, load_params};

use super::{progress, RoundRecord, Setup};
use crate::config::TrainConfig;

/// Runs `a.rounds` DiLoCo rounds with `a.workers` workers in this process (local mode).
pub fn run_diloco(
    a: &TrainConfig,
    setup: &Setup,
    theta0: ParamSet,
    out: Option<&Path>,
    emit: &mut dyn FnMut(&RoundRecord) -> Result<()>,
) -> Result<Vec<RoundRecord>> {
    run_rounds(a, setup, theta0, out, emit, None)
}

/// Runs `a.rounds` DiLoCo rounds of `a.workers` workers in this process from `theta0`, of which
/// `adversary` (if any) is Byzantine, calling `emit` after the initial evaluation and after
/// every round; writes `round-NNNNNN.safetensors` under `out` when given. A pool's members run
/// the same rounds over the network and the chain (`synod-trainer run`, [`crate::pool`]).
pub fn run_rounds(
    a: &TrainConfig,
    setup: &Setup,
    theta0: ParamSet,
    out: Option<&Path>,
    emit: &mut dyn FnMut(&RoundRecord) -> Result<()>,
    adversary: Option<&Adversary>,
) -> Result<Vec<RoundRecord>> {
    let m = &a.recipe.recipe;
    let total = a.rounds.saturating_mul(a.inner_steps);
    let mut workers = (0..a.workers)
        .map(|w| setup.replica(m, w, a.inner_steps, total))
        .collect::<Result<Vec<_>>>()?;
    let mut state = OuterState::new(theta0, NesterovSgd::new(m.outer_lr, m.outer_momentum));
    if m.overlap {
        state = state.overlapped();
    }
    let tokens_per_round = u64::from(a.workers)
        * u64::from(a.inner_steps)
        * (setup.plan.batch * setup.plan.seq_len) as u64;
    let codec = m.encode_options();
    let mut feedback = vec![m.feedback(); workers.len()];
    let aggregation = m.aggregation.aggregator(None);
    let mut records = Vec::new();
    let mut bytes = 0u64;

    let mut record = |state: &OuterState,
                      workers: &mut [synod_model::TchInnerTrainer],
                      r: RoundRecord|
     -> Result<RoundRecord> {
        let eval = workers
            .first_mut()
            .ok_or_else(|| anyhow::anyhow!("no workers"))?;
        load_params(&eval.vs, &state.params)?;
        let val_loss = eval_loss(&eval.model, &eval.plan, a.recipe.eval_batches, setup.device)?;
        let r = RoundRecord { val_loss, ..r };
        emit(&r)?;
        Ok(r)
    };
    let blank = |round: u32| RoundRecord::diloco(round, u64::from(round) * tokens_per_round);
    records.push(record(&state, &mut workers, blank(0))?);

    let pb = progress(u64::from(a.rounds), "rounds", a.quiet);
    for _ in 0..a.rounds {
        let t0 = Instant::now();
        let (outcome, reports, sizes) = state.local_round(
            &mut workers,
            aggregation.as_ref(),
            &codec,
            &mut feedback,
            adversary,
        )?;
        let compute: f64 = reports.iter().map(|r| r.secs).sum();
        let outer_secs = t0.elapsed().as_secs_f64() - compute;
        bytes += sizes.iter().sum::<usize>() as u64 / sizes.len().max(1) as u64;
        if let Some(dir) = out {
            std::fs::write(
                dir.join(format!("round-{:06}.safetensors", outcome.round)),
                &outcome.checkpoint,
            )?;
        }
        let train_loss =
            reports.iter().map(|r| r.mean_loss).sum::<f64>() / reports.len().max(1) as f64;
        let r = RoundRecord {
            train_loss,
            bytes_sent_per_worker: bytes,
            checkpoint_hash: Some(synod_checkpoint::hex(&outcome.hash)),
            included: outcome.included.clone(),
            compute_secs: compute,
            outer_secs,
            ..blank(outcome.round)
        }
        .with_wall(t0.elapsed().as_secs_f64());
        records.push(record(&state, &mut workers, r)?);
        pb.inc(1);
    }
    pb.finish_and_clear();
    Ok(records)
}
