//! `bench byzantine`: one Byzantine member among the workers, every attack of
//! [`synod_diloco::byzantine::Attack`], under the pool's aggregation rule and under the plain
//! mean, against the clean run of the same rule (the target: every ratio ≤ 1.05).

use anyhow::Result;
use serde_json::{json, Map, Value};
use synod_checkpoint::ParamSet;
use synod_codec::EncodeError;
use synod_diloco::byzantine::{Adversary, Attack};
use synod_diloco::{AggregationRule, DilocoError};

use synod_member::config::TrainConfig;
use synod_member::train::{initial_params, run_rounds, Setup};

/// Final validation loss of one local run of `a` with `adversary`; `None` if the run
/// diverged (a non-finite loss or pseudo-gradient). Other errors are returned.
fn final_loss(
    a: &TrainConfig,
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

/// Runs the clean baseline and every attack of member `attacker` (`None`: the last worker)
/// among `c.workers` under the recipe's aggregation rule, and under the plain mean too if
/// `compare_mean`; prints one JSON line per run and a summary
/// `{"bench":"byzantine","clean_val_loss":…,"attacks":{"sign_flip":{"val_loss":…,"ratio":…},…}}`.
/// A diverged run (NaN loss, or a pseudo-gradient the codec refuses) reports `null`.
///
/// # Errors
/// An attacker that is not one of the workers; a clean run that diverges; an unreadable
/// corpus or initial checkpoint, libtorch errors.
pub fn run(c: &TrainConfig, attacker: Option<u32>, compare_mean: bool) -> Result<()> {
    let recipe = &c.recipe.recipe;
    let setup = Setup::new(&c.recipe)?;
    let theta0 = initial_params(&setup, recipe, c.init.as_deref())?;
    let member = attacker.unwrap_or(c.workers.saturating_sub(1));
    anyhow::ensure!(
        member < c.workers,
        "--attacker {member} is not one of the {} workers",
        c.workers
    );
    let mut rules = vec![recipe.aggregation];
    if compare_mean && recipe.aggregation != AggregationRule::Mean {
        rules.push(AggregationRule::Mean);
    }
    let mut summary = Map::new();
    for rule in rules {
        let mut config = c.clone();
        config.recipe.recipe.aggregation = rule;
        let name = rule.name();
        let clean = final_loss(&config, &setup, &theta0, None)?
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
                seed: recipe.seed,
            };
            let loss = final_loss(&config, &setup, &theta0, Some(&adversary))?;
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
        .remove(recipe.aggregation.name())
        .unwrap_or(Value::Null);
    let mut out = json!({
        "bench": "byzantine",
        "rule": recipe.aggregation.name(),
        "workers": c.workers,
        "attacker": member,
        "inner_steps": c.inner_steps,
        "rounds": c.rounds,
        "model": recipe.model,
        "clean_val_loss": main["clean_val_loss"],
        "attacks": main["attacks"],
        "worst_ratio": main["worst_ratio"],
    });
    if let Some(mean) = summary.remove(AggregationRule::Mean.name()) {
        out["mean_rule"] = mean;
    }
    println!("{out}");
    Ok(())
}
