//! Joining: registration in the pool and the log of its on-chain events.

use anyhow::{anyhow, bail, Result};
use synod_chain::submit::account_of;
use synod_chain::{calls, Chain, ChainError, FinalizedBlock, Signer, SynodEvent};
use synod_p2p::{MemberKey, PeerId};

use super::appeal::{AppealChain, Appealer};
use crate::chain_args::RunArgs;
use crate::pool::{ensure_bonded, planck};
use crate::prometheus::Exporter;

/// Logs the pool's on-chain events as finalized blocks arrive, sets the exporter's
/// finalized height, tells the duty worker (`duties`) of each block, and hands each
/// `Challenges.Ruled` event to `appealer` on a task of its own (an appeal waits for neither the
/// duty worker nor the next block).
pub(super) async fn log_chain_events<C: AppealChain>(
    mut rx: tokio::sync::mpsc::Receiver<Result<FinalizedBlock, ChainError>>,
    pool: u32,
    ticks: tokio::sync::watch::Sender<super::watch::Tick>,
    exporter: Option<Exporter>,
    duties: std::sync::mpsc::Sender<super::duty::DutyMsg>,
    appealer: Appealer<C>,
) {
    while let Some(b) = rx.recv().await {
        match b {
            Ok(b) => {
                if let Some(x) = &exporter {
                    x.set_finalized_height(b.number);
                }
                let ours = b.events.iter().any(|e| e.pool() == Some(pool));
                ticks.send_modify(|t| {
                    t.finalized = t.finalized.max(b.number);
                    if ours {
                        t.pool_event_at = t.pool_event_at.max(b.number);
                    }
                });
                // The worker is gone once the member stops: nothing left to tell.
                let _ = duties.send(super::duty::DutyMsg::Finalized);
                for e in &b.events {
                    if let SynodEvent::Ruled { challenge, .. } = e {
                        let (appealer, challenge, block) = (appealer.clone(), *challenge, b.number);
                        tokio::spawn(async move { appealer.on_ruled(challenge, block).await });
                    }
                    if e.pool() == Some(pool) {
                        tracing::info!(block = b.number, "chain: {e:?}");
                    }
                }
            }
            Err(e) => {
                tracing::warn!("finalized-block subscription ended: {e}");
                break;
            }
        }
    }
}

/// Registers in the pool (bonding first if needed) or finds our registration; returns
/// (member index, first round, whether we were already a member, committed stake in planck).
pub(super) async fn register(
    chain: &Chain,
    signer: &Signer,
    a: &RunArgs,
    peer_id: &PeerId,
    key: &MemberKey,
) -> Result<(u32, u32, bool, u128)> {
    let who = account_of(signer);
    if let Some(rec) = chain.member(a.pool, &who).await? {
        if rec.peer_id != peer_id.to_bytes() {
            bail!("{who} is member {} of pool {} with another peer id; run with the --base-path that holds its identity.key", rec.index, a.pool);
        }
        tracing::info!(
            member = rec.index,
            "already a member of pool {}: resuming",
            a.pool
        );
        return Ok((rec.index, rec.from_round, true, rec.stake));
    }
    ensure_bonded(chain, signer, planck(a.stake)).await?;
    chain
        .submit(
            &calls::join_pool(a.pool, planck(a.stake), peer_id.to_bytes(), &key.public().0)?,
            signer,
        )
        .await?;
    let rec = chain
        .member(a.pool, &who)
        .await?
        .ok_or_else(|| anyhow!("join_pool succeeded but {who} is not a member"))?;
    tracing::info!(
        member = rec.index,
        from_round = rec.from_round,
        "joined pool {}",
        a.pool
    );
    Ok((rec.index, rec.from_round, false, rec.stake))
}

/// Opts in to juries (`Challenges.register_juror`, `juror`) or out of them
/// (`Challenges.unregister_juror`); being in that state already is fine.
///
/// # Errors
/// Chain RPC failures and any other dispatch error.
pub(super) async fn set_jury_duty(chain: &Chain, signer: &Signer, juror: bool) -> Result<()> {
    let (call, unchanged, done) = if juror {
        (
            calls::register_juror(),
            "AlreadyJuror",
            "opted in to juries",
        )
    } else {
        (
            calls::unregister_juror(),
            "NotAJuror",
            "opted out of juries",
        )
    };
    match chain.submit(&call, signer).await {
        Ok(_) => tracing::info!("{done}"),
        Err(e) if e.is_module("Challenges", unchanged) => {}
        Err(e) => bail!("{done}: {e}"),
    }
    Ok(())
}
