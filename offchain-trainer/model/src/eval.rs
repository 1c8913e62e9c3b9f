//! Turning batches into tensors, and validation loss.

use synod_data::{Batch, BatchPlan};
use tch::{Device, Tensor};

use crate::{Gpt, ModelError};

/// (inputs, targets) as `[batch, seq_len]` i64 tensors on `device`.
pub fn batch_tensors(b: &Batch, device: Device) -> (Tensor, Tensor) {
    let shape = [b.batch as i64, b.seq_len as i64];
    (
        Tensor::from_slice(&b.inputs).view(shape).to_device(device),
        Tensor::from_slice(&b.targets).view(shape).to_device(device),
    )
}

/// Mean validation loss (nats per token) over the plan's first `n_batches` fixed validation batches.
///
/// # Errors
/// As [`Gpt::loss`].
pub fn eval_loss(
    model: &Gpt,
    plan: &BatchPlan,
    n_batches: u32,
    device: Device,
) -> Result<f64, ModelError> {
    tch::no_grad(|| {
        let mut sum = 0.0;
        for i in 0..n_batches {
            let (x, y) = batch_tensors(&plan.val_batch(i), device);
            sum += f64::try_from(model.loss(&x, &y)?)?;
        }
        Ok(sum / f64::from(n_batches.max(1)))
    })
}
