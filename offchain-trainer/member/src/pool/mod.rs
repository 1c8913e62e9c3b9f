//! The chain-backed subcommands: `stake`, `pool create`, `pool show`, `run` (in [`member`])
//! and `claim`. Each prints JSON on stdout; logs go to stderr.

mod member;
mod recipe;
mod status;
mod store;
pub mod terms;

use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use synod_chain::submit::{account_of, signer_from_suri};
use synod_chain::types::{
    AccountId, DilocoSpec, PendingRound, Perbill, PoolKind, PoolSpec, PoolStatus, PoolTerms,
};
use synod_chain::{calls, Chain, Signer, SynodEvent, UNIT};

pub use member::run;
pub use recipe::Recipe;
// Verification (replays, segment checks, evidence, votes) is the `synod-verify` crate, kept
// under its former path.
pub(crate) use synod_verify as verify;

use crate::config::{ChainConfig, CreateConfig, VerifyConfig, DEFAULT_VERIFY_SEGMENTS};

/// A tokio runtime for the chain client and the libp2p node (2 worker threads).
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// Connects and parses the signer.
pub(crate) async fn connect(a: &ChainConfig) -> Result<(Chain, Signer)> {
    let signer = signer_from_suri(&a.suri)?;
    let chain = Chain::connect_any(&a.rpc, a.connect_timeout).await?;
    Ok((chain, signer))
}

/// `0x`-prefixed hex of a 32-byte hash, as Polkadot.js prints it.
fn hex(h: &[u8; 32]) -> String {
    format!("0x{}", synod_checkpoint::hex(h))
}

/// SYN → planck.
fn planck(syn: u64) -> u128 {
    u128::from(syn).saturating_mul(UNIT)
}

/// Bonds `amount_planck` more if the account's active stake is below it.
pub(crate) async fn ensure_bonded(
    chain: &Chain,
    signer: &Signer,
    amount_planck: u128,
) -> Result<u128> {
    let who = account_of(signer);
    let active = chain.active_stake(&who).await?;
    if active < amount_planck {
        chain
            .submit(&calls::bond(amount_planck - active), signer)
            .await?;
    }
    Ok(chain.active_stake(&who).await?)
}

/// `synod-trainer stake`: bonds `amount` SYN more (`TrainerStaking.bond`) and prints the
/// account's active stake (planck).
///
/// # Errors
/// The chain refuses the bond, or RPC failures.
pub fn stake(chain: &ChainConfig, amount: u64) -> Result<()> {
    runtime()?.block_on(async {
        let (chain, signer) = connect(chain).await?;
        chain.submit(&calls::bond(planck(amount)), &signer).await?;
        let who = account_of(&signer);
        println!("{}", serde_json::json!({"account": who.to_string(), "active_stake": chain.active_stake(&who).await?.to_string()}));
        Ok(())
    })
}

/// Round timeout `pool create` gives when none is asked for and the recipe needs less
/// (blocks): room for catch-up and a slow block.
const DEFAULT_MIN_ROUND_TIMEOUT: u32 = 60;

/// `synod-trainer pool create`: measures the recipe here ([`terms`]), derives or checks the
/// challenge window and round timeout, then submits `TrainingPools.create_pool`.
pub fn create(a: &CreateConfig) -> Result<()> {
    let recipe = Recipe::load(&a.recipe)?;
    let dataset_id = a.dataset_id.clone().unwrap_or_else(|| {
        a.recipe
            .data
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    let h = a.inner_steps;
    let (step_secs, measured) = match a.step_secs {
        Some(s) => (s, false),
        None => (terms::step_secs(&recipe, h)?, true),
    };
    let rt = runtime()?;
    let (chain, signer) = rt.block_on(connect(&a.chain))?;
    let shape = terms::Shape {
        inner_steps: h,
        members: a.max_trainers,
        verify_segments: DEFAULT_VERIFY_SEGMENTS,
        rate: None,
    };
    let block_secs = rt.block_on(chain.block_secs())?;
    let costs =
        terms::Costs::for_recipe(&recipe, shape, step_secs, block_secs, a.link_bytes_per_sec)?;
    let margin = synod_diloco::budget::CREATOR_MARGIN;
    let challenge_window = a
        .challenge_window
        .unwrap_or_else(|| costs.min_window(margin));
    // A stated round length delays every commit: the default timeout leaves room after it.
    let round_timeout = a.round_timeout.unwrap_or_else(|| {
        let stated = costs.with_min_round_length(a.min_round_length.unwrap_or(0));
        stated.min_timeout(margin).max(DEFAULT_MIN_ROUND_TIMEOUT)
    });
    let chain_floor = rt.block_on(chain.min_round_length_floor(h))?;
    let chain_floor = u32::try_from(chain_floor).unwrap_or(u32::MAX);
    let min_round_length = a
        .min_round_length
        .unwrap_or_else(|| costs.min_round_length(chain_floor, round_timeout));
    // The chain's bounds, checked before the noise probe's two inner phases.
    if min_round_length < chain_floor || min_round_length > round_timeout / 2 {
        bail!(
            "a minimum round length of {min_round_length} blocks is outside the chain's bounds \
             for H = {h} and a {round_timeout}-block round timeout: at least {chain_floor}, at \
             most half the timeout ({}); pass a --min-round-length within them, or a \
             --round-timeout of at least {}",
            round_timeout / 2,
            min_round_length.max(chain_floor).saturating_mul(2)
        );
    }
    let costs = costs.with_min_round_length(min_round_length);
    costs.check(challenge_window, round_timeout, margin, terms::CREATE_HINT)?;
    // Two whole inner phases: after the cheap checks.
    let noise = if a.skip_noise_probe {
        None
    } else {
        let n = terms::honest_noise(&recipe, h, a.rounds)?;
        terms::check_noise(&n)?;
        Some(n)
    };
    let job = DilocoSpec {
        model_config_hash: recipe.config_hash,
        initial_weights_hash: recipe.theta0_hash,
        dataset_id: dataset_id.clone().into_bytes(),
        dataset_hash: recipe.dataset_hash,
        inner_steps: a.inner_steps,
    };
    let spec = PoolSpec {
        terms: PoolTerms {
            rounds: a.rounds,
            min_trainers: a.min_trainers,
            max_trainers: a.max_trainers,
            min_stake: planck(a.min_stake),
            reward_per_round: planck(a.reward_per_round),
            quorum: Perbill(a.quorum_ppb),
            round_timeout,
            challenge_window,
            min_round_length,
            allowed_trainers: a.allowed_trainers.clone(),
        },
        kind: PoolKind::DiLoCo(job.clone()),
    };
    rt.block_on(async {
        let id = chain.next_pool_id().await?;
        chain.submit(&calls::create_pool(spec.clone()), &signer).await?;
        let pool = chain.pool(id).await?.ok_or_else(|| anyhow!("pool {id} not found after create_pool"))?;
        // Blocks from a round's finality to its settlement (the last challenge that can be
        // opened on it over, appeal included): how long a claim of the last round may wait.
        let settle_blocks = chain.timeline(&spec.terms).await?.settle_at(0);
        println!(
            "{}",
            serde_json::json!({
                "pool_id": id, "creator": pool.creator.to_string(), "dataset_id": dataset_id,
                "model_config_hash": hex(&job.model_config_hash), "recipe": recipe.pool.canonical_json()?,
                "initial_weights_hash": hex(&job.initial_weights_hash), "dataset_hash": hex(&job.dataset_hash),
                "inner_steps": job.inner_steps, "rounds": spec.terms.rounds, "min_trainers": spec.terms.min_trainers,
                "reward_per_round": spec.terms.reward_per_round.to_string(), "quorum_ppb": a.quorum_ppb,
                // What each member keeps on disk per round until its challenge window closes.
                "trace_bytes_per_round": recipe.pool.segment_boundaries(job.inner_steps).len() as u64
                    * recipe.max_state_bytes,
                "round_timeout": round_timeout, "challenge_window": challenge_window,
                "min_round_length": min_round_length, "settle_blocks": settle_blocks,
                "allowed_trainers": spec.terms.allowed_trainers.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
                // What the terms were checked against (`synod_diloco::budget`).
                "terms": {
                    "step_secs": step_secs, "step_secs_measured": measured,
                    "block_secs": costs.block_secs, "bandwidth_mbit": a.link_bytes_per_sec * 8.0 / 1e6,
                    "verify_secs": costs.verify_secs(margin), "margin": margin,
                    "min_challenge_window": costs.min_window(margin),
                    "min_round_timeout": costs.min_timeout(margin),
                    "honest_noise": noise.map(|n| serde_json::json!({
                        "distance": n.distance, "segment_distance": n.segment_distance,
                        "runs": [n.runs.0.to_string(), n.runs.1.to_string()], "round": n.round,
                    })),
                },
            })
        );
        Ok(())
    })
}

/// `synod-trainer pool show`: pool, members and every final round with its contributors.
///
/// # Errors
/// The pool does not exist, or RPC failures.
pub fn show(chain: &ChainConfig, pool: u32) -> Result<()> {
    let state = runtime()?.block_on(pool_state(chain, pool))?;
    println!("{state}");
    Ok(())
}

/// `synod-trainer pool allow`: replaces the accounts that may join the pool (the signer must
/// be its creator); prints the pool's new list as JSON.
///
/// # Errors
/// The chain refuses the call (`NotCreator`, `PoolEnded`, `InvalidAllowedTrainers`), or RPC
/// failures.
pub fn allow(chain: &ChainConfig, pool_id: u32, allowed: &[AccountId]) -> Result<()> {
    runtime()?.block_on(async {
        let (chain, signer) = connect(chain).await?;
        let call = calls::set_allowed_trainers(pool_id, allowed.to_vec());
        chain.submit(&call, &signer).await?;
        let pool = chain
            .pool(pool_id)
            .await?
            .ok_or_else(|| anyhow!("pool {pool_id} does not exist"))?;
        let allowed: Vec<String> = pool
            .spec
            .terms
            .allowed_trainers
            .iter()
            .map(ToString::to_string)
            .collect();
        println!(
            "{}",
            serde_json::json!({"pool": pool_id, "allowed_trainers": allowed})
        );
        Ok(())
    })
}

/// `synod-trainer status`: [`show`]'s state as tables, with validation losses from the
/// `metrics.jsonl` of a member's `base_path` when given.
///
/// # Errors
/// As [`show`].
pub fn status(chain: &ChainConfig, pool: u32, base_path: Option<&Path>) -> Result<()> {
    let state = runtime()?.block_on(pool_state(chain, pool))?;
    let losses = base_path
        .map(|p| status::losses(&p.join("metrics.jsonl")))
        .unwrap_or_default();
    print!("{}", status::render(&state, &losses));
    Ok(())
}

/// The pool's spec, members (bonded and active stake) and every closed round, as JSON.
async fn pool_state(config: &ChainConfig, pool_id: u32) -> Result<serde_json::Value> {
    let chain = Chain::connect_any(&config.rpc, config.connect_timeout).await?;
    let pool = chain
        .pool(pool_id)
        .await?
        .ok_or_else(|| anyhow!("pool {pool_id} does not exist"))?;
    let members = chain.members(pool_id).await?;
    let mut rounds = Vec::new();
    for r in 1..=pool.spec.terms.rounds {
        if let Some(f) = chain.final_checkpoint(pool_id, r).await? {
            let mut verdicts = serde_json::Map::new();
            for c in &f.contributors {
                if let Some(v) = chain.verdict(pool_id, r, c).await? {
                    verdicts.insert(c.to_string(), format!("{v:?}").into());
                }
            }
            rounds.push(serde_json::json!({
                "round": r, "status": "final", "hash": hex(&f.hash), "parent": hex(&f.parent),
                "included": f.included, "contributors": f.contributors.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "finalized_at": f.finalized_at, "verdicts": verdicts,
            }));
        } else if chain.voided(pool_id, r).await? {
            rounds.push(serde_json::json!({"round": r, "status": "voided"}));
        }
    }
    let mut active = Vec::new();
    for m in &members {
        active.push(chain.active_stake(&m.account).await?.to_string());
    }
    Ok(serde_json::json!({
        "pool_id": pool_id, "status": format!("{:?}", pool.status), "current_round": pool.current_round,
        "rounds": pool.spec.terms.rounds, "kind": pool.spec.kind.name(),
        // `null` for a kind without inner steps.
        "inner_steps": pool.spec.diloco().ok().map(|job| job.inner_steps),
        "challenge_window": pool.spec.terms.challenge_window, "round_timeout": pool.spec.terms.round_timeout,
        "reward_per_round": pool.spec.terms.reward_per_round.to_string(),
        "members": members.iter().zip(&active).map(|(m, active)| serde_json::json!({
            "index": m.record.index, "account": m.account.to_string(), "stake": m.record.stake.to_string(),
            "from_round": m.record.from_round, "active_stake": active,
        })).collect::<Vec<_>>(),
        "final_rounds": rounds,
        "unsettled_rounds": chain.unsettled_rounds(pool_id).await?.len(),
    }))
}

/// blake3 of the checkpoint round `round`'s inner phases start from, `parent` being the
/// round's θ_{round−1}: `parent`, or with overlapped rounds (`overlap`, a one-step-delayed
/// outer update, [`synod_diloco::OuterState::overlapped`]) the checkpoint that was final when
/// round `round − 1` opened — θ_{round−2}: the parent of round `round − 1` if that round is
/// final, else `parent` (a voided round changed nothing); θ₀ for rounds 1 and 2. Members (what
/// they train from), verifiers and jurors (what they replay from) read it alike from `chain`.
///
/// # Errors
/// RPC errors; `anyhow` when round `round − 1` is neither final nor voided (its start is not
/// known yet).
pub async fn inner_start(
    chain: &synod_chain::Chain,
    pool: u32,
    overlap: bool,
    round: u32,
    parent: synod_checkpoint::CheckpointHash,
) -> Result<synod_checkpoint::CheckpointHash> {
    if !overlap || round <= 1 {
        return Ok(parent);
    }
    if let Some(f) = chain.final_checkpoint(pool, round - 1).await? {
        return Ok(f.parent);
    }
    if chain.voided(pool, round - 1).await? {
        return Ok(parent);
    }
    bail!(
        "round {} of pool {pool} is neither final nor voided: round {round}'s start is not known",
        round - 1
    )
}

/// `synod-trainer verify`: replays member `a.member`'s contribution to final round `a.round`
/// from the checkpoint and payload a member of the pool kept under `a.base_path`, prints the
/// distance (JSON), and with `a.challenge` opens a challenge when it is outside the tolerance.
pub fn verify(a: &VerifyConfig) -> Result<()> {
    let recipe = Recipe::load(&a.recipe)?;
    let rt = runtime()?;
    let (chain, signer) = rt.block_on(connect(&a.chain))?;
    let info = rt
        .block_on(chain.pool(a.pool))?
        .ok_or_else(|| anyhow!("pool {} does not exist", a.pool))?;
    let job = info.spec.diloco()?;
    recipe.check(job)?;
    let f = rt
        .block_on(chain.final_checkpoint(a.pool, a.round))?
        .ok_or_else(|| anyhow!("round {} of pool {} is not final", a.round, a.pool))?;
    let store = store::Store::open(
        &a.base_path.join("checkpoints"),
        recipe.max_checkpoint_bytes,
    )?;
    let overlap = recipe.pool.overlap;
    let start = rt.block_on(inner_start(&chain, a.pool, overlap, a.round, f.parent))?;
    let parent = store.get(&start).ok_or_else(|| {
        anyhow!(
            "θ that round {} started from ({}) is not under {}",
            a.round,
            hex(&start),
            a.base_path.display()
        )
    })?;
    let kept = verify::Retained::open(&member::evidence_dir(&a.base_path, a.pool))?;
    let claimed = kept.payload(a.round, a.member).ok_or_else(|| {
        anyhow!(
            "no payload of member {} for round {} under {}",
            a.member,
            a.round,
            a.base_path.display()
        )
    })?;
    let mut replayer = verify::Replayer::new(job.inner_steps, info.spec.terms.rounds);
    // A sparse payload's residuals: only its author keeps them (`--base-path` of the accused).
    let residuals = verify::replay::Residuals::from_evidence(&kept, a.round, a.member, &claimed)?;
    let rep = replayer.check(&verify::ReplayInput {
        recipe: &recipe.replay_view(),
        parent: &parent,
        round: a.round,
        member: a.member,
        claimed: &claimed,
        residuals: &residuals,
    })?;
    let mut challenge = serde_json::Value::Null;
    if a.challenge && !rep.honest {
        let snapshot = rt
            .block_on(chain.round_snapshot(a.pool, a.round))?
            .ok_or_else(|| {
                anyhow!(
                    "round {} is settled: it can no longer be challenged",
                    a.round
                )
            })?;
        let who = snapshot
            .iter()
            .find(|p| p.index == a.member)
            .map(|p| p.who)
            .ok_or_else(|| anyhow!("member {} is not in round {}'s snapshot", a.member, a.round))?;
        let evidence = kept.announcement(a.round, a.member).ok_or_else(|| {
            anyhow!(
                "no signed announcement of member {} kept: cannot challenge",
                a.member
            )
        })?;
        let call = calls::open_challenge(a.pool, a.round, who, evidence)?;
        rt.block_on(chain.submit(&call, &signer))?;
        challenge = serde_json::json!({"accused": who.to_string(), "opened": true});
    }
    println!(
        "{}",
        serde_json::json!({
            "pool": a.pool, "round": a.round, "member": a.member, "distance": rep.distance,
            "tolerance": synod_diloco::verify::REPLAY_TOLERANCE, "honest": rep.honest,
            "replay_secs": rep.secs, "challenge": challenge,
        })
    );
    Ok(())
}

/// The rounds of `pending` (round, its reward waiting for settlement) that the chain does not
/// settle itself and whose settlement block the finalized block `now` has reached: nothing
/// settles them but a call (a claim settles only those among the unsettled entries it reads,
/// in storage order), so a claim that waits for them settles them itself.
fn lazy_due(pending: &[(u32, PendingRound)], now: u64) -> Vec<u32> {
    pending
        .iter()
        .filter(|(_, p)| !p.scheduled && u64::from(p.settle_at) <= now)
        .map(|(round, _)| *round)
        .collect()
}

/// Settles (`Rewards.settle_round`, signed by `signer`) those of `pool`'s unsettled `rounds`
/// that are due and that the chain does not settle itself ([`lazy_due`]). A failed settlement
/// is only warned about: another member may have settled the round first, and the wait reads
/// the rounds again.
///
/// # Errors
/// A failed read.
async fn settle_lazy_rounds(
    chain: &Chain,
    signer: &Signer,
    pool: u32,
    rounds: Vec<u32>,
) -> Result<(), synod_chain::ChainError> {
    let now = chain.finalized_number().await?;
    let mut pending = Vec::new();
    for round in rounds {
        if let Some(p) = chain.pending_round(pool, round).await? {
            pending.push((round, p));
        }
    }
    for round in lazy_due(&pending, now) {
        match chain
            .submit(&calls::settle_round(pool, round), signer)
            .await
        {
            Ok(_) => tracing::info!(pool, round, "settled a round the chain left to a call"),
            Err(e) => tracing::warn!(pool, round, "settling the round failed: {e}"),
        }
    }
    Ok(())
}

/// `synod-trainer claim`: waits (up to `wait` seconds) until the pool is over and every final round
/// is settled (settling itself those the chain leaves to a call: [`lazy_due`]), then claims;
/// prints the amount paid and the account's active stake (planck).
///
/// # Errors
/// The wait runs out, the chain refuses the claim, or RPC failures.
pub fn claim(chain: &ChainConfig, pool: u32, wait: u64) -> Result<()> {
    runtime()?.block_on(async {
        let (chain, signer) = connect(chain).await?;
        let who = account_of(&signer);
        if wait > 0 {
            chain
                .wait_for(
                    "the pool to end and its rounds to settle",
                    Duration::from_secs(wait),
                    || async {
                        let p = chain.pool(pool).await?;
                        let over = p.is_none_or(|p| {
                            matches!(p.status, PoolStatus::Completed | PoolStatus::Cancelled)
                        });
                        let rounds = chain.unsettled_rounds(pool).await?;
                        if rounds.is_empty() {
                            return Ok(over.then_some(()));
                        }
                        settle_lazy_rounds(&chain, &signer, pool, rounds).await?;
                        Ok(None)
                    },
                )
                .await?;
        }
        let claimable = chain.claimable(pool, &who).await?;
        let mut claimed = 0u128;
        if claimable > 0 {
            let inc = chain.submit(&calls::claim_rewards(pool), &signer).await?;
            claimed = inc
                .events
                .iter()
                .filter_map(|e| match e {
                    SynodEvent::RewardsClaimed { who: w, amount, .. } if *w == who => Some(*amount),
                    _ => None,
                })
                .sum();
        }
        println!(
            "{}",
            serde_json::json!({
                "account": who.to_string(), "pool_id": pool, "claimed": claimed.to_string(),
                "active_stake": chain.active_stake(&who).await?.to_string(),
            })
        );
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::{lazy_due, PendingRound};

    /// Only rounds the chain does not settle itself, once their settlement block is final.
    #[test]
    fn a_claim_settles_the_due_rounds_the_chain_leaves_to_a_call() {
        let pending = |settle_at, scheduled| PendingRound {
            reserved: 30,
            settle_at,
            scheduled,
        };
        let rounds = [
            (1, pending(100, false)),
            (2, pending(100, true)),
            (3, pending(101, false)),
            (4, pending(90, false)),
        ];
        assert_eq!(lazy_due(&rounds, 100), vec![1, 4]);
        assert_eq!(lazy_due(&rounds, 99), vec![4]);
        assert_eq!(lazy_due(&rounds, 101), vec![1, 3, 4]);
        assert!(lazy_due(&[], 100).is_empty());
    }
}
