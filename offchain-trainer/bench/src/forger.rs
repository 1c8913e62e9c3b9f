//! Dishonest members for tests and benches: a [`Forger`] runs an honest inner phase except
//! for the segments it forges, so segment checks and whole replays can be shown to catch it.

use anyhow::Result;
use synod_checkpoint::ParamSet;
use synod_diloco::{DilocoError, InnerReport, InnerTrainer, OuterState};
use synod_model::segment::params_of;
use synod_model::{load_params, TchInnerTrainer, STEP_NAME};

use synod_verify::replay::TraceStates;

/// A dishonest member's inner trainer (the attacks segment checks exist for; a test and bench
/// fixture): runs each segment `i` of the phase on `replica` unless `forge(i, state,
/// end_step)` returns the state it claims instead. Its trace holds every segment boundary.
pub(crate) struct Forger<'a, F> {
    replica: &'a mut TchInnerTrainer,
    forge: F,
    /// The phase's segment boundaries (`0 … H`).
    bounds: &'a [u32],
}

impl<F: FnMut(u32, &ParamSet, u32) -> Option<ParamSet>> InnerTrainer for Forger<'_, F> {
    fn inner_phase(
        &mut self,
        start: &ParamSet,
        round: u32,
    ) -> Result<(ParamSet, InnerReport), DilocoError> {
        self.inner_phase_traced(start, round, &[], &mut |_, _| Ok(()))
    }

    fn inner_phase_traced(
        &mut self,
        start: &ParamSet,
        round: u32,
        boundaries: &[u32],
        state: &mut dyn FnMut(u32, ParamSet) -> Result<(), DilocoError>,
    ) -> Result<(ParamSet, InnerReport), DilocoError> {
        let r = &mut *self.replica;
        load_params(&r.vs, start)?;
        r.reset_optimizer();
        let mut s = r.phase_state()?;
        for (i, w) in self.bounds.windows(2).enumerate() {
            if boundaries.contains(&w[0]) {
                state(w[0], s.clone())?;
            }
            s = match (self.forge)(i as u32, &s, w[1]) {
                Some(forged) => forged,
                None => r.replay_segment(&s, round, w[0], w[1])?,
            };
        }
        if boundaries.contains(&r.cfg.inner_steps) {
            state(r.cfg.inner_steps, s.clone())?;
        }
        Ok((params_of(&s), InnerReport::default()))
    }
}

/// A dishonest member's traced contribution to `round` from θ `start`, made on the pool's
/// path ([`OuterState::contribute_traced`]) by a [`Forger`] with `forge`, its trace cut at
/// `bounds` (the recipe's
/// [`PoolRecipe::segment_boundaries`](synod_diloco::recipe::PoolRecipe::segment_boundaries)),
/// encoded with `opts`.
/// Returns the payload and its states by blake3. A `forge` that returns `None`: the honest
/// contribution.
///
/// # Errors
/// libtorch and encoding errors.
pub(crate) fn forged_contribution(
    replica: &mut TchInnerTrainer,
    start: &ParamSet,
    round: u32,
    forge: &mut dyn FnMut(u32, &ParamSet, u32) -> Option<ParamSet>,
    bounds: &[u32],
    opts: &synod_codec::EncodeOptions,
) -> Result<(Vec<u8>, TraceStates)> {
    let mut outer = OuterState::new(start.clone(), synod_diloco::NesterovSgd::new(0.0, 0.0));
    outer.round = round.saturating_sub(1);
    let member = replica.worker;
    let mut states = TraceStates::new();
    let (c, _) = outer.contribute_traced(
        &mut Forger {
            replica,
            forge,
            bounds,
        },
        member,
        opts,
        &mut synod_diloco::ErrorFeedback::default(),
        bounds,
        &mut |_, bytes, hash| {
            states.insert(hash, bytes);
            Ok(())
        },
    )?;
    Ok((c.payload.to_vec(), states))
}

/// `state` with its step counter set to `step` and, for every `(name, index, value)` of
/// `set`, that element overwritten: how a forger edits a state it did not compute.
pub(crate) fn edited(state: &ParamSet, step: u32, set: &[(&str, usize, f32)]) -> ParamSet {
    let mut t = state.tensors().to_vec();
    for x in &mut t {
        if x.name == STEP_NAME {
            x.data = vec![step as f32];
        }
        for (name, i, v) in set {
            if x.name == *name {
                if let Some(e) = x.data.get_mut(*i) {
                    *e = *v;
                }
            }
        }
    }
    ParamSet::new(t).unwrap_or_else(|_| state.clone())
}

/// A lazy member that never runs the segments in `skip`: only its step counter moves on.
pub(crate) fn skipping(skip: &[u32]) -> impl FnMut(u32, &ParamSet, u32) -> Option<ParamSet> + '_ {
    move |i, s, end| skip.contains(&i).then(|| edited(s, end, &[]))
}

/// A member that bends every segment one way: it runs each segment honestly on `replica`
/// (round `round`, segment `i` from `bounds[i]` to `bounds[i + 1]`), then moves each parameter
/// tensor of the end state by `share` of that segment's update norm along one fixed direction
/// (every coordinate up by the same amount), moments untouched. Each segment is then `share`
/// from its replay ([`synod_model::segment::state_distance`]); the bias adds up over the
/// phase.
#[cfg(test)]
pub(crate) fn bending<'a>(
    replica: &'a mut TchInnerTrainer,
    bounds: &'a [u32],
    round: u32,
    share: f64,
) -> impl FnMut(u32, &ParamSet, u32) -> Option<ParamSet> + 'a {
    move |i, s, _| {
        let (from, to) = (*bounds.get(i as usize)?, *bounds.get(i as usize + 1)?);
        let honest = replica.replay_segment(s, round, from, to).ok()?;
        let mut t = honest.tensors().to_vec();
        for (x, start) in t.iter_mut().zip(s.tensors()) {
            if x.name == STEP_NAME
                || x.name.starts_with(synod_model::FIRST_MOMENT_PREFIX)
                || x.name.starts_with(synod_model::SECOND_MOMENT_PREFIX)
            {
                continue;
            }
            let norm = x
                .data
                .iter()
                .zip(&start.data)
                .map(|(a, b)| (f64::from(*a) - f64::from(*b)).powi(2))
                .sum::<f64>()
                .sqrt();
            let step = (share * norm / (x.data.len() as f64).sqrt()) as f32;
            x.data.iter_mut().for_each(|v| *v += step);
        }
        ParamSet::new(t).ok()
    }
}
