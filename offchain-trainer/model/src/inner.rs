//! The DiLoCo inner phase on tch.

use std::time::Instant;

use synod_checkpoint::ParamSet;
use synod_data::{Batch, BatchPlan};
use synod_diloco::{DilocoError, InnerReport, InnerTrainer};
use tch::nn::{self, OptimizerConfig, VarStore};
use tch::Device;

use crate::gpt::{DECAY_GROUP, NO_DECAY_GROUP};
use crate::{batch_tensors, load_params, param_set, Gpt, GptConfig, InnerConfig, ModelError};

/// One worker: a model replica, its AdamW optimizer and its deterministic batch sequence.
pub struct TchInnerTrainer {
    /// The replica's variables.
    pub vs: VarStore,
    /// The replica.
    pub model: Gpt,
    /// Inner optimizer settings.
    pub cfg: InnerConfig,
    /// Where batches come from.
    pub plan: BatchPlan,
    /// This worker's member index (selects its batches).
    pub worker: u32,
    opt: Option<nn::Optimizer>,
    on_step: Option<StepHook>,
}

/// Called after every inner step with (steps done, steps in the phase, the step's mean loss in
/// nats per token): progress display only, it cannot change the training.
pub type StepHook = Box<dyn FnMut(u32, u32, f64) + Send>;

impl TchInnerTrainer {
    /// Builds a replica on `device`, initialized from libtorch's generator after
    /// `tch::manual_seed(init_seed)` (callers normally overwrite it with θ from a checkpoint).
    ///
    /// # Errors
    /// [`ModelError::Config`] for an invalid model configuration.
    pub fn new(
        model: GptConfig,
        cfg: InnerConfig,
        plan: BatchPlan,
        worker: u32,
        device: Device,
        init_seed: i64,
    ) -> Result<Self, ModelError> {
        if plan.seq_len as i64 > model.ctx {
            return Err(ModelError::Config(format!(
                "sequence length {} exceeds context {}",
                plan.seq_len, model.ctx
            )));
        }
        tch::manual_seed(init_seed);
        let vs = VarStore::new(device);
        let model = Gpt::new(&vs.root(), model)?;
        Ok(Self {
            vs,
            model,
            cfg,
            plan,
            worker,
            opt: None,
            on_step: None,
        })
    }

    /// Calls `hook` after every inner step of [`InnerTrainer::inner_phase`] (a progress bar).
    pub fn with_step_hook(mut self, hook: StepHook) -> Self {
        self.on_step = Some(hook);
        self
    }

    fn optimizer(&mut self) -> Result<&mut nn::Optimizer, ModelError> {
        if self.opt.is_none() {
            let mut opt = nn::adamw(self.cfg.beta1, self.cfg.beta2, self.cfg.weight_decay)
                .build(&self.vs, self.cfg.lr)?;
            opt.set_weight_decay_group(DECAY_GROUP, self.cfg.weight_decay);
            opt.set_weight_decay_group(NO_DECAY_GROUP, 0.0);
            self.opt = Some(opt);
        }
        self.opt
            .as_mut()
            .ok_or_else(|| ModelError::Config("optimizer".into()))
    }

    /// Drops the AdamW moments (the next step starts a fresh optimizer).
    pub fn reset_optimizer(&mut self) {
        self.opt = None;
    }

    /// One AdamW step on the mean loss of `batches` (several batches = gradient averaging over
    /// workers, as data parallelism does), at global inner step `step` of the schedule.
    /// Returns the mean loss (nats per token).
    ///
    /// # Errors
    /// [`ModelError::Diverged`] on a non-finite loss, [`ModelError::Torch`] on libtorch errors.
    pub fn train_step(&mut self, batches: &[Batch], step: u64) -> Result<f64, ModelError> {
        let lr = self.cfg.lr_at(step);
        self.train_step_at(batches, step, lr)
    }

    fn train_step_at(&mut self, batches: &[Batch], step: u64, lr: f64) -> Result<f64, ModelError> {
        let device = self.vs.device();
        let clip = self.cfg.grad_clip;
        let n = batches.len().max(1) as f64;
        self.optimizer()?.zero_grad();
        let mut total = 0.0;
        for b in batches {
            let (x, y) = batch_tensors(b, device);
            let loss = self.model.loss(&x, &y)?;
            (&loss / n).f_backward()?;
            total += f64::try_from(&loss)?;
        }
        let mean = total / n;
        if !mean.is_finite() {
            return Err(ModelError::Diverged(step as u32));
        }
        let opt = self.optimizer()?;
        if clip > 0.0 {
            opt.clip_grad_norm(clip);
        }
        opt.set_lr(lr);
        opt.step();
        Ok(mean)
    }

    /// The replica's parameters.
    ///
    /// # Errors
    /// As [`param_set`].
    pub fn params(&self) -> Result<ParamSet, ModelError> {
        param_set(&self.vs)
    }
}

impl InnerTrainer for TchInnerTrainer {
    fn inner_phase(
        &mut self,
        start: &ParamSet,
        round: u32,
    ) -> Result<(ParamSet, InnerReport), DilocoError> {
        let t0 = Instant::now();
        load_params(&self.vs, start)?;
        if !self.cfg.keep_state {
            self.reset_optimizer();
        }
        let h = self.cfg.inner_steps;
        let (mut sum, mut last) = (0.0, 0.0);
        for step in 0..h {
            let batch = self.plan.train_batch(self.worker, round, step);
            let global = u64::from(round.saturating_sub(1)) * u64::from(h) + u64::from(step);
            let lr = self.cfg.lr_in_round(global, step);
            last = self.train_step_at(std::slice::from_ref(&batch), global, lr)?;
            sum += last;
            if let Some(hook) = &mut self.on_step {
                hook(step + 1, h, last);
            }
        }
        let tokens = u64::from(h) * (self.plan.batch * self.plan.seq_len) as u64;
        let report = InnerReport {
            mean_loss: sum / f64::from(h.max(1)),
            last_loss: last,
            tokens,
            secs: t0.elapsed().as_secs_f64(),
        };
        Ok((self.params()?, report))
    }
}
