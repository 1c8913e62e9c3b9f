//! Moving parameters between a `VarStore` and a [`ParamSet`].

use synod_checkpoint::{NamedTensor, ParamSet};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use crate::ModelError;

/// Copies every variable of `vs` to host f32 vectors, in canonical (name) order.
///
/// # Errors
/// [`ModelError::Torch`] if a copy fails.
pub fn param_set(vs: &VarStore) -> Result<ParamSet, ModelError> {
    let mut tensors = Vec::new();
    for (name, t) in vs.variables() {
        let shape = t.size().iter().map(|d| *d as usize).collect();
        let flat = t
            .detach()
            .to_device(Device::Cpu)
            .to_kind(Kind::Float)
            .flatten(0, -1);
        tensors.push(NamedTensor {
            name,
            shape,
            data: Vec::<f32>::try_from(&flat)?,
        });
    }
    Ok(ParamSet::new(tensors)?)
}

/// Overwrites the variables of `vs` with `set` (same names and shapes; extra tensors in `set`,
/// such as outer-optimizer state, are an error).
///
/// # Errors
/// [`ModelError::Layout`] for a missing, extra or misshaped tensor; [`ModelError::Torch`] on copy failure.
pub fn load_params(vs: &VarStore, set: &ParamSet) -> Result<(), ModelError> {
    let mut vars = vs.variables();
    if vars.len() != set.tensors().len() {
        let extra = set
            .tensors()
            .iter()
            .find(|t| !vars.contains_key(&t.name))
            .map(|t| t.name.clone());
        return Err(ModelError::Layout(
            extra.unwrap_or_else(|| "(count differs)".into()),
        ));
    }
    tch::no_grad(|| {
        for t in set.tensors() {
            let var = vars
                .get_mut(&t.name)
                .ok_or_else(|| ModelError::Layout(t.name.clone()))?;
            let shape: Vec<i64> = t.shape.iter().map(|d| *d as i64).collect();
            if var.size() != shape {
                return Err(ModelError::Layout(t.name.clone()));
            }
            let src = Tensor::from_slice(&t.data)
                .view(shape.as_slice())
                .to_device(var.device());
            var.f_copy_(&src)?;
        }
        Ok(())
    })
}
