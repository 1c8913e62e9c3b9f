//! Joining: the member's identity and its registration in the pool.

use std::path::Path;

use anyhow::{anyhow, bail, Result};
use synod_chain::submit::account_of;
use synod_chain::{calls, Chain, Signer};
use synod_p2p::libp2p_identity::Keypair;
use synod_p2p::MemberKey;

use crate::config::MemberConfig;
use crate::pool::{ensure_bonded, planck};

/// Loads the 32-byte identity seed at `path` (64 hex digits), or creates it from the OS
/// generator: the member's libp2p Ed25519 key and its ML-DSA-65 key both derive from it.
///
/// # Errors
/// The file cannot be read or written, or does not hold 32 hex bytes.
pub(crate) fn identity_seed(path: &Path) -> Result<[u8; 32]> {
    match std::fs::read_to_string(path) {
        Ok(s) => {
            let s = s.trim();
            let bytes = (0..s.len())
                .step_by(2)
                .map(|i| s.get(i..i + 2).and_then(|d| u8::from_str_radix(d, 16).ok()))
                .collect::<Option<Vec<u8>>>();
            bytes
                .and_then(|v| <[u8; 32]>::try_from(v).ok())
                .ok_or_else(|| anyhow!("{} must hold 32 hex bytes", path.display()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let seed = MemberKey::generate().seed();
            let hex: String = seed.iter().map(|b| format!("{b:02x}")).collect();
            std::fs::write(path, hex)?;
            Ok(seed)
        }
        Err(e) => Err(anyhow!("reading {}: {e}", path.display())),
    }
}

/// Registers in the pool (bonding first if needed) with the peer id of `identity`, which signs
/// the proof that we hold its key ([`synod_protocol::peer`]), or finds our registration;
/// returns (member index, first round, whether we were already a member, committed stake in
/// planck).
pub(super) async fn register(
    chain: &Chain,
    signer: &Signer,
    a: &MemberConfig,
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

/// How many planck a member whose free balance is `free` lacks to hold both dispute bonds
/// (`challenge_bond`, to challenge a cheater it finds, and `appeal_bond`, to appeal a ruling
/// against it within the appeal period) at once; `None` when it has them. Bonds come from
/// free balance only: a member that bonded all it has can neither challenge nor appeal, and a
/// wrong ruling against it then executes.
pub(super) fn dispute_reserve_shortfall(
    free: u128,
    challenge_bond: u128,
    appeal_bond: u128,
) -> Option<u128> {
    let needed = challenge_bond.saturating_add(appeal_bond);
    (free < needed).then(|| needed - free)
}

/// Warns when `who`'s free balance cannot hold both dispute bonds
/// ([`dispute_reserve_shortfall`]); a read that fails is logged, not fatal.
pub(super) async fn warn_without_dispute_reserve(
    chain: &Chain,
    who: &synod_chain::types::AccountId,
) {
    let read = async {
        Ok::<_, synod_chain::ChainError>((
            chain.free_balance(who).await?,
            chain.dispute_bonds().await?,
        ))
    };
    match read.await {
        Ok((free, (challenge, appeal))) => {
            if let Some(short) = dispute_reserve_shortfall(free, challenge, appeal) {
                tracing::warn!(
                    free_planck = free,
                    challenge_bond_planck = challenge,
                    appeal_bond_planck = appeal,
                    short_planck = short,
                    "{who}'s free balance cannot hold the challenge bond and the appeal bond: \
                     this member could not challenge a cheater it finds or appeal a ruling \
                     against it (a wrong one would then execute); keep that much unbonded"
                );
            }
        }
        Err(e) => tracing::warn!("cannot read the free balance and the dispute bonds: {e}"),
    }
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

#[cfg(test)]
mod tests {
    use super::dispute_reserve_shortfall;

    /// Both bonds must fit in the free balance at once: a member that finds a cheater while a
    /// ruling against it is open needs both.
    #[test]
    fn a_member_that_cannot_hold_both_dispute_bonds_is_told_how_much_it_lacks() {
        assert_eq!(dispute_reserve_shortfall(30, 10, 20), None);
        assert_eq!(dispute_reserve_shortfall(31, 10, 20), None);
        assert_eq!(dispute_reserve_shortfall(29, 10, 20), Some(1));
        assert_eq!(dispute_reserve_shortfall(0, 10, 20), Some(30));
        assert_eq!(
            dispute_reserve_shortfall(5, u128::MAX, 1),
            Some(u128::MAX - 5)
        );
    }
}
