//! The data-parallel (DDP-style) baseline.

use crate::{ModelError, TchInnerTrainer};

/// N workers that average their gradients every step (what DDP's all-reduce computes),
/// simulated by one replica accumulating the N workers' batches. Worker `w` at global step `s`
/// uses the batch DiLoCo worker `w` uses at inner step `s mod H` of round `s / H + 1`, so both
/// methods see exactly the same tokens.
pub struct DataParallel {
    /// The single replica (its `worker` field is unused).
    pub replica: TchInnerTrainer,
    /// Number of simulated workers.
    pub workers: u32,
}

impl DataParallel {
    /// One synchronous step at global step `step`; returns the mean training loss.
    ///
    /// # Errors
    /// As [`TchInnerTrainer::train_step`].
    pub fn step(&mut self, step: u64) -> Result<f64, ModelError> {
        let h = u64::from(self.replica.cfg.inner_steps.max(1));
        let round = u32::try_from(step / h + 1).unwrap_or(u32::MAX);
        let inner = u32::try_from(step % h).unwrap_or(0);
        let batches: Vec<_> = (0..self.workers)
            .map(|w| self.replica.plan.train_batch(w, round, inner))
            .collect();
        self.replica.train_step(&batches, step)
    }

    /// Bytes each worker sends per step: its full f32 gradient (`params · 4`).
    pub fn bytes_per_step(&self) -> u64 {
        self.replica
            .vs
            .variables()
            .values()
            .map(|t| t.numel() as u64 * 4)
            .sum()
    }
}
