//! Test helpers shared by the integration tests.

use synod_checkpoint::ParamSet;
use synod_diloco::{DilocoError, InnerReport, InnerTrainer};

/// A worker minimizing ½‖θ − target‖² with H plain gradient steps.
pub struct Quadratic {
    /// The minimum.
    pub target: Vec<f32>,
    /// Inner steps H.
    pub steps: u32,
}

impl InnerTrainer for Quadratic {
    fn inner_phase(
        &mut self,
        start: &ParamSet,
        round: u32,
    ) -> Result<(ParamSet, InnerReport), DilocoError> {
        self.inner_phase_traced(start, round, &[], &mut |_, _| Ok(()))
    }

    /// Its trace states are θ after each boundary's steps.
    fn inner_phase_traced(
        &mut self,
        start: &ParamSet,
        _round: u32,
        boundaries: &[u32],
        state: &mut dyn FnMut(u32, ParamSet) -> Result<(), DilocoError>,
    ) -> Result<(ParamSet, InnerReport), DilocoError> {
        let mut p = start.clone();
        for step in 0..=self.steps {
            if boundaries.contains(&step) {
                state(step, p.clone())?;
            }
            if step == self.steps {
                break;
            }
            for t in p.data_mut() {
                for (x, y) in t.iter_mut().zip(&self.target) {
                    *x -= 0.1 * (*x - y);
                }
            }
        }
        Ok((p, InnerReport::default()))
    }
}
