//! `train` and `init`: local DiLoCo, the data-parallel baseline, and their shared setup.

mod ddp;
mod diloco;

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use synod_checkpoint::{ParamSet, OUTER_MOMENTUM_PREFIX};
use synod_data::{BatchPlan, Corpus};
use synod_diloco::recipe::PoolRecipe;
use synod_model::{parse_device, tch::Device, GptConfig, InnerConfig, TchInnerTrainer};

pub use ddp::run_ddp;
pub use diloco::{run_diloco, run_rounds};

use crate::config::{Method, RecipeConfig, TrainConfig};
use crate::event::TrainerEvent;
use crate::metrics::Metrics;
use crate::plot::{loss_vs_tokens, Curve};

/// One evaluation point of a run (one JSON line of metrics: [`RoundRecord::event`]).
#[derive(Clone, Debug)]
pub struct RoundRecord {
    /// "diloco" or "ddp".
    pub method: &'static str,
    /// Outer round (DDP: H-step block) just completed; 0 = before training.
    pub round: u32,
    /// Tokens consumed so far by all workers together.
    pub tokens: u64,
    /// Validation loss of the global parameters (nats/token).
    pub val_loss: f64,
    /// Mean training loss over the block's inner steps and workers (nats/token).
    pub train_loss: f64,
    /// Bytes each worker has sent so far (its encoded pseudo-gradients, or its f32 gradients for DDP).
    pub bytes_sent_per_worker: u64,
    /// blake3 of this round's canonical checkpoint (hex; DiLoCo only).
    pub checkpoint_hash: Option<String>,
    /// Members aggregated this round (DiLoCo only).
    pub included: Vec<u32>,
    /// Seconds of compute in the block (inner phases, or DDP steps). Pools: the inner-phase
    /// seconds that ran within `wall_secs` (the next round's phase, computed while this round
    /// settled, and this round's own when it was computed or redone within it).
    pub compute_secs: f64,
    /// Seconds of encode + decode + aggregate + outer step + checkpoint (DiLoCo only).
    pub outer_secs: f64,
    /// Seconds of the peer-to-peer exchange (pools only; 0 elsewhere).
    pub exchange_secs: f64,
    /// Wall-clock seconds of the round. Local runs: from the start of its inner phase to its
    /// checkpoint. Pools: from the end of the previous round's record to the end of this
    /// one's, so that nothing between two inner phases goes uncounted (the wait for the previous
    /// round to settle on-chain, the exchange, the outer step and this record's evaluation).
    pub wall_secs: f64,
    /// Inner-phase seconds that ran within `wall_secs` ÷ `wall_secs` (0..1; 0 before any
    /// compute): the share of the round useful inner steps ran. Everything else (exchange,
    /// aggregation, chain waits, evaluation, verification, an optimistic phase discarded
    /// after a lost vote, waits for the trace writer) is time the accelerator does not
    /// train for the pool.
    pub compute_utilisation: f64,
    /// Seconds evaluating this round's checkpoint (`RecipeConfig::eval_batches` batches; pools only, 0
    /// elsewhere).
    pub eval_secs: f64,
    /// Seconds the member's duty worker spent since the previous record (pools only): replaying
    /// sampled contributions, jury votes, challenges and equivocation reports, run on their own
    /// thread beside the rounds (not part of `wall_secs`' critical path).
    pub duty_secs: f64,
    /// Members left out of the round, with the reason (pools only).
    pub excluded: Vec<(u32, String)>,
}

impl RoundRecord {
    /// A DiLoCo record of `round` after `tokens` tokens, with no measurement filled in yet.
    pub fn diloco(round: u32, tokens: u64) -> Self {
        Self {
            method: "diloco",
            round,
            tokens,
            val_loss: f64::NAN,
            train_loss: f64::NAN,
            bytes_sent_per_worker: 0,
            checkpoint_hash: None,
            included: Vec::new(),
            compute_secs: 0.0,
            outer_secs: 0.0,
            exchange_secs: 0.0,
            wall_secs: 0.0,
            compute_utilisation: 0.0,
            eval_secs: 0.0,
            duty_secs: 0.0,
            excluded: Vec::new(),
        }
    }

    /// This record as its metrics event ([`TrainerEvent::Round`]).
    pub fn event(&self) -> TrainerEvent {
        TrainerEvent::Round {
            method: self.method.to_string(),
            round: self.round,
            tokens: self.tokens,
            val_loss: self.val_loss,
            train_loss: self.train_loss,
            bytes_sent_per_worker: self.bytes_sent_per_worker,
            checkpoint_hash: self.checkpoint_hash.clone(),
            included: self.included.clone(),
            compute_secs: self.compute_secs,
            outer_secs: self.outer_secs,
            exchange_secs: self.exchange_secs,
            wall_secs: self.wall_secs,
            compute_utilisation: self.compute_utilisation,
            eval_secs: self.eval_secs,
            duty_secs: self.duty_secs,
            excluded: self.excluded.clone(),
        }
    }

    /// Sets `wall_secs` and `compute_utilisation` from the round's wall-clock seconds.
    pub fn with_wall(self, wall_secs: f64) -> Self {
        let busy = self.compute_secs;
        self.with_busy_wall(busy, wall_secs)
    }

    /// Sets `wall_secs` and `compute_utilisation` = `busy_secs` / `wall_secs` (clamped to
    /// 0..=1), `busy_secs` being the inner-phase seconds that ran during the round's wall
    /// clock (in a pool member's rounds, the next round's phase, computed while this one settled).
    pub fn with_busy_wall(self, busy_secs: f64, wall_secs: f64) -> Self {
        Self {
            wall_secs,
            compute_utilisation: if wall_secs > 0.0 {
                (busy_secs / wall_secs).clamp(0.0, 1.0)
            } else {
                0.0
            },
            ..self
        }
    }
}

/// What every run needs: corpus, device, model and the batch plan.
pub struct Setup {
    /// Byte-level corpus.
    pub plan: BatchPlan,
    /// Device of the replicas.
    pub device: Device,
}

impl Setup {
    /// Loads the corpus `c.data` and plans the recipe's batches on `c.device`.
    ///
    /// # Errors
    /// An unreadable corpus, one too short for a batch, an unknown device.
    pub fn new(c: &RecipeConfig) -> Result<Self> {
        let corpus = Arc::new(
            Corpus::from_file(&c.data)
                .with_context(|| format!("loading corpus {}", c.data.display()))?,
        );
        let r = &c.recipe;
        let plan = BatchPlan::new(corpus, r.seed, r.batch, r.seq_len)?;
        Ok(Self {
            plan,
            device: parse_device(&c.device)?,
        })
    }

    /// A replica for `worker` (fresh weights from the pool seed) on this setup's device.
    pub fn replica(
        &self,
        r: &PoolRecipe,
        worker: u32,
        inner_steps: u32,
        total_steps: u32,
    ) -> Result<TchInnerTrainer> {
        self.replica_on(self.device, r, worker, inner_steps, total_steps)
    }

    /// A replica for `worker` (fresh weights from the pool seed) on `device`, whatever this
    /// setup's: the device-drift probe runs one on the reference device beside it.
    pub fn replica_on(
        &self,
        device: Device,
        r: &PoolRecipe,
        worker: u32,
        inner_steps: u32,
        total_steps: u32,
    ) -> Result<TchInnerTrainer> {
        Ok(TchInnerTrainer::new(
            model_config(r)?,
            inner_config(r, inner_steps, total_steps),
            self.plan.clone(),
            worker,
            device,
            r.seed as i64,
        )?)
    }
}

/// The model of the recipe's preset.
///
/// # Errors
/// An unknown preset.
pub fn model_config(r: &PoolRecipe) -> Result<GptConfig> {
    Ok(GptConfig::preset(&r.model)?)
}

/// The recipe's inner optimizer (AdamW, cosine decay to `min_lr` after a linear warm-up;
/// nanoGPT's settings otherwise) for phases of `inner_steps` out of `total_steps` inner steps.
pub fn inner_config(r: &PoolRecipe, inner_steps: u32, total_steps: u32) -> InnerConfig {
    InnerConfig {
        lr: r.lr,
        min_lr: r.min_lr,
        warmup_steps: r.warmup,
        round_warmup_steps: r.round_warmup,
        keep_state: r.keep_inner_state,
        ..InnerConfig::nanogpt(r.batch, inner_steps, total_steps)
    }
}

/// θ₀: the checkpoint at `init` (outer state ignored) or fresh weights from the seed.
pub fn initial_params(setup: &Setup, r: &PoolRecipe, init: Option<&Path>) -> Result<ParamSet> {
    match init {
        Some(path) => {
            let (mut set, hash) = synod_checkpoint::read(path, None)?;
            set.take_prefixed(OUTER_MOMENTUM_PREFIX);
            tracing::info!(hash = %synod_checkpoint::hex(&hash), "initial weights from {}", path.display());
            Ok(set)
        }
        None => Ok(setup.replica(r, 0, 1, 1)?.params()?),
    }
}

/// A progress bar on stderr (hidden when `quiet`).
pub fn progress(len: u64, what: &str, quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len);
    if let Ok(style) =
        ProgressStyle::with_template("{msg:>8} [{elapsed_precise}] {wide_bar} {pos}/{len} ({eta})")
    {
        pb.set_style(style);
    }
    pb.set_message(what.to_string());
    pb
}

/// `synod-trainer train`: `a.rounds` rounds of `a.workers` local workers; writes the round
/// checkpoints, `metrics.jsonl` and `loss.png` under `a.out`.
///
/// # Errors
/// An unreadable corpus or initial checkpoint, libtorch errors, an unwritable `a.out`.
pub fn run(a: &TrainConfig) -> Result<()> {
    std::fs::create_dir_all(&a.out)?;
    let setup = Setup::new(&a.recipe)?;
    let theta0 = initial_params(&setup, &a.recipe.recipe, a.init.as_deref())?;
    let metrics = Metrics::with_file(&a.out.join("metrics.jsonl"))?;
    let records = match a.method {
        Method::Diloco => run_diloco(a, &setup, theta0, Some(&a.out), &mut |r: &RoundRecord| {
            metrics.emit(&r.event())
        })?,
        Method::Ddp => run_ddp(a, &setup, theta0, &mut |r: &RoundRecord| {
            metrics.emit(&r.event())
        })?,
    };
    let points: Vec<(f64, f64)> = records
        .iter()
        .map(|r| (r.tokens as f64, r.val_loss))
        .collect();
    let label = match a.method {
        Method::Diloco => format!("DiLoCo, {} workers, H={}", a.workers, a.inner_steps),
        Method::Ddp => format!("data parallel, {} workers", a.workers),
    };
    let png = a.out.join("loss.png");
    loss_vs_tokens(
        &png,
        "synod-trainer: validation loss",
        &[Curve {
            label: &label,
            points: &points,
        }],
    )?;
    tracing::info!("wrote {}", png.display());
    Ok(())
}

/// `synod-trainer init`: writes θ₀ of recipe `r` (its model and seed) to `out` as a canonical
/// checkpoint, built on `device`, and prints `{"checkpoint_hash", "path", "params"}`.
///
/// # Errors
/// An unknown model preset or device, libtorch errors, an unwritable `out`.
pub fn init(r: &PoolRecipe, device: &str, out: &Path) -> Result<()> {
    let device = parse_device(device)?;
    let plan = BatchPlan::new(
        Arc::new(Corpus::from_bytes(vec![b' '; 4 * 1024])),
        r.seed,
        1,
        1,
    )?;
    let replica = TchInnerTrainer::new(
        model_config(r)?,
        inner_config(r, 1, 1),
        plan,
        0,
        device,
        r.seed as i64,
    )?;
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let set = replica.params()?;
    let hash = synod_checkpoint::write(out, &set)?;
    println!(
        "{}",
        serde_json::json!({"checkpoint_hash": synod_checkpoint::hex(&hash), "path": out, "params": set.numel()})
    );
    Ok(())
}
