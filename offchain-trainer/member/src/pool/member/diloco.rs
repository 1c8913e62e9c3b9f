//! The DiLoCo program ([`PoolProgram`]): a member of a DiLoCo pool checks the pool's job against
//! its recipe and its machine against the pool's terms, then trains round after round
//! ([`super::rounds`]) beside its duty worker ([`super::duty`]).

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use synod_chain::submit::account_of;
use synod_chain::types::{DilocoSpec, PoolSpec};
use synod_chain::{Chain, Signer};
use tokio::runtime::Runtime;

use super::ctx::Ctx;
use super::program::{Joined, PoolProgram};
use super::{duty, evidence_dir, Trainer};
use crate::config::MemberConfig;
use crate::pool::recipe::Recipe;
use crate::pool::terms;
use crate::pool::verify::Retained;

/// A DiLoCo pool's program: the member's recipe (checked against the pool's job) and the
/// costs measured for it on this machine.
pub(super) struct Diloco {
    recipe: Recipe,
    job: DilocoSpec,
    costs: terms::Costs,
}

impl PoolProgram for Diloco {
    fn prepare(
        rt: &Runtime,
        chain: &Chain,
        signer: &Signer,
        a: &MemberConfig,
        spec: &PoolSpec,
    ) -> Result<Self> {
        let recipe = Recipe::load(&a.recipe)?;
        let job = spec.diloco()?.clone();
        recipe.check(&job)?;
        let costs = keep_terms(rt, chain, signer, a, &recipe, spec, &job)?;
        Ok(Self { recipe, job, costs })
    }

    fn max_checkpoint_bytes(&self) -> u64 {
        self.recipe.max_checkpoint_bytes
    }

    fn initial_checkpoint(&self) -> &[u8] {
        &self.recipe.theta0_bytes
    }

    fn run(self, a: &MemberConfig, j: Joined) -> Result<()> {
        let Self { recipe, job, costs } = self;
        let total_steps = j.started.spec.terms.rounds.saturating_mul(job.inner_steps);
        let worker = recipe
            .setup
            .replica(&recipe.pool, j.me, job.inner_steps, total_steps)?
            .with_step_hook(inner_progress(a.quiet));
        let ctx = Ctx {
            a: Arc::new(a.clone()),
            rt: j.rt.handle().clone(),
            chain: j.chain,
            account: account_of(&j.signer),
            signer: j.signer,
            client: j.client,
            store: j.store,
            recipe: Arc::new(recipe),
            pool: a.pool,
            spec_rounds: j.started.spec.terms.rounds,
            inner_steps: job.inner_steps,
            me: j.me,
            timeline: j.timeline,
            block_secs: costs.block_secs,
            step_secs: costs.step_secs,
            retained: Retained::open(&evidence_dir(&a.base_path, a.pool))?,
            appealer: j.appealer,
            watch: j.watch,
        };
        let (duty_tx, duty_rx) = j.duties;
        let duties = duty::spawn(ctx.clone(), j.metrics.clone(), duty_tx, duty_rx)?;
        let mut t = Trainer {
            ctx,
            worker: Some(worker),
            members: Vec::new(),
            metrics: j.metrics,
            duties,
            tokens: 0,
            curve: Vec::new(),
            round_clock: Instant::now(),
            _rt: j.rt,
        };
        let last = t.train(j.from_round, j.resumed)?;
        t.finish(last)
    }
}

/// Refuses to join a pool whose challenge window or round timeout this machine cannot keep
/// with its own `MemberConfig::verify_rate` and `verify_segments` ([`terms::Costs::check`], measured
/// here without the creator's margin), or on a device whose honest runs drift from the
/// reference device's past half a tolerance ([`terms::device_check`]), before anything is
/// bonded or submitted. A member
/// that already joined resumes whatever the measurement says (it is logged): refusing it
/// now would leave its stake in the pool unserved. Returns the measured costs (the verifier
/// budgets its waits with them).
fn keep_terms(
    rt: &Runtime,
    chain: &synod_chain::Chain,
    signer: &synod_chain::Signer,
    a: &MemberConfig,
    recipe: &Recipe,
    spec: &PoolSpec,
    job: &DilocoSpec,
) -> Result<terms::Costs> {
    let inner_steps = job.inner_steps;
    let shape = terms::Shape {
        inner_steps,
        members: spec.terms.max_trainers,
        verify_segments: a.verify_segments,
        rate: a.verify_rate,
    };
    let costs = terms::Costs::for_recipe(
        recipe,
        shape,
        terms::step_secs(recipe, inner_steps)?,
        rt.block_on(chain.block_secs())?,
        a.link_bytes_per_sec,
    )?
    .with_min_round_length(spec.terms.min_round_length);
    let checked = costs.check(
        spec.terms.challenge_window,
        spec.terms.round_timeout,
        terms::MEMBER_MARGIN,
        terms::JOIN_HINT,
    );
    let joined = rt
        .block_on(chain.member(a.pool, &account_of(signer)))?
        .is_some();
    // Two inner phases and two segments: after the cheap checks, before anything is bonded.
    if checked.is_ok() {
        let probed = terms::device_check(recipe.setup.device, joined, || {
            terms::honest_noise(recipe, inner_steps, spec.terms.rounds)
        })?;
        if let Some(n) = probed {
            tracing::info!(
                distance = n.distance,
                segment_distance = n.segment_distance,
                "{} keeps within half the tolerances of {}",
                n.runs.0,
                n.runs.1
            );
        }
    }
    match checked {
        Ok(()) => Ok(costs),
        Err(e) if joined => {
            tracing::warn!("resuming as a member of pool {} although {e}", a.pool);
            Ok(costs)
        }
        Err(e) => Err(e.into()),
    }
}

/// A progress bar of the inner steps of each round on stderr: drawn only when stderr is a
/// terminal (indicatif hides it otherwise, leaving the plain log lines) and not `quiet`.
fn inner_progress(quiet: bool) -> synod_model::StepHook {
    let pb = if quiet {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(0)
    };
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "inner steps [{elapsed_precise}] {wide_bar} {pos}/{len} ({per_sec}) {msg}",
    ) {
        pb.set_style(style);
    }
    Box::new(move |done, of, loss| {
        if done == 1 {
            pb.reset();
            pb.set_length(u64::from(of));
        }
        pb.set_position(u64::from(done));
        pb.set_message(if done == of {
            format!("loss {loss:.3}; exchanging")
        } else {
            format!("loss {loss:.3}")
        });
    })
}
