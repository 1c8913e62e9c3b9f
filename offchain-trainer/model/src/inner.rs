//! The DiLoCo inner phase on tch.

use std::time::Instant;

use synod_checkpoint::ParamSet;
use synod_data::{Batch, BatchPlan};
use synod_diloco::{CancelToken, DilocoError, InnerReport, InnerTrainer};
use tch::nn::VarStore;
use tch::Device;

use crate::{
    batch_tensors, load_params, param_set, AdamW, Gpt, GptConfig, InnerConfig, ModelError,
};

/// One worker: a model replica, its AdamW optimizer ([`AdamW`], whose state Proof-of-Learning
/// segments record) and its deterministic batch sequence.
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
    opt: Option<AdamW>,
    on_step: Option<StepHook>,
    cancel: Option<CancelToken>,
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
            cancel: None,
        })
    }

    /// Calls `hook` after every inner step of [`InnerTrainer::inner_phase`] (a progress bar).
    pub fn with_step_hook(mut self, hook: StepHook) -> Self {
        self.on_step = Some(hook);
        self
    }

    /// Makes the inner phases that follow end with [`ModelError::Cancelled`] before their next
    /// inner step once `token` is cancelled (checked before every step; a step under way
    /// finishes first); `None` removes the token. The replica's parameters and optimizer state
    /// are then those after the last step run: the next phase loads its start over the
    /// parameters and, unless the configuration keeps the optimizer state across phases
    /// (`keep_state`), starts a fresh optimizer.
    pub fn set_cancel(&mut self, token: Option<CancelToken>) {
        self.cancel = token;
    }

    pub(crate) fn optimizer(&mut self) -> Result<&mut AdamW, ModelError> {
        let opt = match self.opt.take() {
            Some(opt) => opt,
            None => AdamW::new(
                &self.vs,
                self.cfg.beta1,
                self.cfg.beta2,
                self.cfg.weight_decay,
            )?,
        };
        Ok(self.opt.insert(opt))
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
            opt.clip_grad_norm(clip)?;
        }
        opt.step(lr)?;
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

impl TchInnerTrainer {
    /// Runs inner steps `from..to` (0-based, within the phase) of outer round `round` on the
    /// replica's current parameters and optimizer state. Returns the sum of the steps' losses
    /// and the last one (nats per token).
    ///
    /// # Errors
    /// As [`TchInnerTrainer::train_step`]; [`ModelError::Cancelled`] once the replica's
    /// [`CancelToken`] is cancelled.
    pub(crate) fn run_steps(
        &mut self,
        round: u32,
        from: u32,
        to: u32,
    ) -> Result<(f64, f64), ModelError> {
        let h = self.cfg.inner_steps;
        let (mut sum, mut last) = (0.0, 0.0);
        for step in from..to {
            if self.cancel.as_ref().is_some_and(CancelToken::is_cancelled) {
                return Err(ModelError::Cancelled { round, step });
            }
            let batch = self.plan.train_batch(self.worker, round, step);
            let global = u64::from(round.saturating_sub(1)) * u64::from(h) + u64::from(step);
            let lr = self.cfg.lr_in_round(global, step);
            last = self.train_step_at(std::slice::from_ref(&batch), global, lr)?;
            sum += last;
            if let Some(hook) = &mut self.on_step {
                hook(step + 1, h, last);
            }
        }
        Ok((sum, last))
    }

    /// The inner phase of [`InnerTrainer::inner_phase`], calling `boundary(j, state)` with the
    /// phase's full state ([`TchInnerTrainer::phase_state`]) after `j` steps for every
    /// boundary `j` in `boundaries` (ascending, each ≤ H; `0` is the start). With no
    /// boundaries it is the plain inner phase.
    ///
    /// # Errors
    /// As [`InnerTrainer::inner_phase`]; whatever `boundary` returns.
    pub fn traced_phase<E: From<ModelError>>(
        &mut self,
        start: &ParamSet,
        round: u32,
        boundaries: &[u32],
        boundary: &mut dyn FnMut(u32, ParamSet) -> Result<(), E>,
    ) -> Result<(ParamSet, InnerReport), E> {
        let t0 = Instant::now();
        load_params(&self.vs, start)?;
        if !self.cfg.keep_state {
            self.reset_optimizer();
        }
        let h = self.cfg.inner_steps;
        let (mut sum, mut last, mut done) = (0.0, 0.0, 0);
        for &j in boundaries.iter().filter(|j| **j <= h) {
            if j > done {
                let (s, l) = self.run_steps(round, done, j)?;
                (sum, last, done) = (sum + s, l, j);
            }
            boundary(j, self.phase_state()?)?;
        }
        if done < h {
            let (s, l) = self.run_steps(round, done, h)?;
            (sum, last) = (sum + s, l);
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

impl InnerTrainer for TchInnerTrainer {
    fn inner_phase(
        &mut self,
        start: &ParamSet,
        round: u32,
    ) -> Result<(ParamSet, InnerReport), DilocoError> {
        self.traced_phase(start, round, &[], &mut |_, _| Ok(()))
    }

    fn inner_phase_traced(
        &mut self,
        start: &ParamSet,
        round: u32,
        boundaries: &[u32],
        state: &mut dyn FnMut(u32, ParamSet) -> Result<(), DilocoError>,
    ) -> Result<(ParamSet, InnerReport), DilocoError> {
        self.traced_phase(start, round, boundaries, state)
    }
}
