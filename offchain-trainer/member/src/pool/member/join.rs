//! Joining: registration in the pool.

use anyhow::{anyhow, bail, Result};
use synod_chain::submit::account_of;
use synod_chain::{calls, Chain, Signer};
use synod_p2p::libp2p_identity::Keypair;
use synod_p2p::MemberKey;

use crate::chain_args::RunArgs;
use crate::pool::{ensure_bonded, planck};

/// Registers in the pool (bonding first if needed) with the peer id of `identity`, which signs
/// the proof that we hold its key ([`synod_protocol::peer`]), or finds our registration;
/// returns (member index, first round, whether we were already a member, committed stake in
/// planck).
pub(super) async fn register(
    chain: &Chain,
    signer: &Signer,
    a: &RunArgs,
    identity: &Keypair,
    key: &MemberKey,
) -> Result<(u32, u32, bool, u128)> {
    let who = account_of(signer);
    let peer_id = identity.public().to_peer_id();
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
    let message = synod_protocol::peer::proof_message(&chain.genesis_hash(), a.pool, &who.0);
    let proof: [u8; synod_protocol::peer::PEER_ID_PROOF_LEN] = identity
        .sign(&message)
        .map_err(|e| anyhow!("signing the peer-id proof: {e}"))?
        .try_into()
        .map_err(|_| anyhow!("the libp2p identity is not an Ed25519 key"))?;
    chain
        .submit(
            &calls::join_pool(
                a.pool,
                planck(a.stake),
                peer_id.to_bytes(),
                &key.public().0,
                proof,
            )?,
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
