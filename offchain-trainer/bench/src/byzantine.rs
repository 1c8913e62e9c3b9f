//! `bench byzantine`: one Byzantine member among the workers, every attack of
//! [`synod_diloco::byzantine::Attack`], under the pool's aggregation rule and under the plain
//! mean, against the clean run of the same rule (the target: every ratio ≤ 1.05).

use anyhow::Result;
use clap::Args;
use serde_json::{json, Map, Value};
use synod_checkpoint::ParamSet;
use synod_codec::EncodeError;
use synod_diloco::byzantine::{Adversary, Attack};
use synod_diloco::DilocoError;

use synod_member::args::{Aggregation, TrainArgs};
use synod_member::train::{initial_params, run_rounds, Setup};

/// Arguments of `bench byzantine`.
#[derive(Args, Clone, Debug)]
pub struct ByzantineArgs {
    #[command(flatten)]
    pub train: TrainArgs,
    /// Member index of the attacker (default: the last worker).
    #[arg(long)]
    pub attacker: Option<u32>,
    /// Also run every attack under the plain mean, to show what the rule prevents.
    #[arg(long)]
    pub compare_mean: bool,
}

/// Final validation loss of one local run of `a` with `adversary`; `None` if the run
/// diverged (a non-finite loss or pseudo-gradient). Other errors are returned.
fn final_loss(
    a: &TrainArgs,
    setup: &Setup,
    theta0: &ParamSet,
    adversary: Option<&Adversary>,
) -> Result<Option<f64>> {
    let mut quiet = |_: &synod_member::train::RoundRecord| Ok(());
    match run_rounds(a, setup, theta0.clone(), None, &mut quiet, adversary) {
        Ok(records) => Ok(records.last().map(|r| r.val_loss).filter(|l| l.is_finite())),
        Err(e) if diverged(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Whether `e` is a divergence: the codec refused a non-finite pseudo-gradient, or the inner
/// loss went non-finite.
fn diverged(e: &anyhow::Error) -> bool {
    match e.downcast_ref::<DilocoError>() {
        Some(DilocoError::Encode(EncodeError::NonFinite { .. })) => true,
        Some(DilocoError::Inner(msg)) => msg.contains("diverged"),
        _ => false,
    }
}

/// Runs the clean baseline and every attack; prints one JSON line per run and a summary
/// `{"bench":"byzantine","clean_val_loss":…,"attacks":{"sign_flip":{"val_loss":…,"ratio":…},…}}`.
/// A diverged run (NaN loss, or a pseudo-gradient the codec refuses) reports `null`.
pub fn run(a: &ByzantineArgs) -> Result<()> {
    let t = &a.train;
    let setup = Setup::new(&t.model, &t.data)?;
    let theta0 = initial_params(&setup, &t.model, t.init.as_deref())?;
    let member = a.attacker.unwrap_or(t.workers.saturating_sub(1));
    anyhow::ensure!(
        member < t.workers,
        "--attacker {member} is not one of the {} workers",
        t.workers
    );
    let mut rules = vec![t.outer.aggregation()];
    if a.compare_mean && t.outer.aggregation() != Aggregation::Mean {
        rules.push(Aggregation::Mean);
    }
    let mut summary = Map::new();
    for rule in rules {
        let mut args = t.clone();
        args.outer.aggregation_flag = Some(rule);
        let name = rule.rule().name();
        let clean = final_loss(&args, &setup, &theta0, None)?
            .ok_or_else(|| anyhow::anyhow!("the clean run under {name} diverged"))?;
        println!(
            "{}",
            json!({"bench": "byzantine", "rule": name, "attack": "none", "val_loss": clean})
        );
        let mut attacks = Map::new();
        for attack in Attack::ALL {
            let adversary = Adversary {
                member,
                attack,
                seed: t.model.seed,
            };
            let loss = final_loss(&args, &setup, &theta0, Some(&adversary))?;
            let ratio = loss.map(|l| l / clean);
            println!(
                "{}",
                json!({"bench": "byzantine", "rule": name, "attack": attack.name(), "val_loss": loss, "ratio": ratio})
            );
            attacks.insert(
                attack.name().into(),
                json!({"val_loss": loss, "ratio": ratio}),
            );
        }
        let worst = attacks
            .values()
            .map(|v| v["ratio"].as_f64().unwrap_or(f64::INFINITY))
            .fold(0.0, f64::max);
        let block = json!({
            "clean_val_loss": clean,
            "attacks": Value::Object(attacks),
            "worst_ratio": if worst.is_finite() { json!(worst) } else { Value::Null },
        });
        summary.insert(name.into(), block);
    }
    let main = summary
        .remove(t.outer.aggregation().rule().name())
        .unwrap_or(Value::Null);
    let mut out = json!({
        "bench": "byzantine",
        "rule": t.outer.aggregation().rule().name(),
        "workers": t.workers,
        "attacker": member,
        "inner_steps": t.inner_steps,
        "rounds": t.rounds,
        "model": t.model.model,
        "clean_val_loss": main["clean_val_loss"],
        "attacks": main["attacks"],
        "worst_ratio": main["worst_ratio"],
    });
    if let Some(mean) = summary.remove(Aggregation::Mean.rule().name()) {
        out["mean_rule"] = mean;
    }
    println!("{out}");
    Ok(())
}
