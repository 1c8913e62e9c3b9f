//! Fault injection for tests (`MemberConfig::fault`, refused on Live chains): a real trainer process
//! that misbehaves the way an attacker would, signed with its own key as usual.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::Result;
use synod_codec::EncodeOptions;
use synod_diloco::byzantine::Adversary;
use synod_diloco::{Contribution, OuterState};
use synod_p2p::message::PayloadRef;

use super::Trainer;
use crate::config::{Fault, LATE_SECS};

/// Largest payload a copier fetches, in bytes.
const MAX_COPY_BYTES: u64 = 1 << 30;

impl Trainer {
    /// Rewrites our contribution to round `r` (computed from `state`) as our fault asks, right
    /// before the exchange: a crafted pseudo-gradient, another member's payload, ours served
    /// to a single peer, or ours announced late.
    pub(super) fn inject_fault(
        &mut self,
        r: u32,
        state: &OuterState,
        mine: &mut Contribution,
        codec: &EncodeOptions,
    ) -> Result<()> {
        let Some(fault) = self.ctx.a.fault else {
            return Ok(());
        };
        if let Some(attack) = fault.attack() {
            let adversary = Adversary {
                member: self.ctx.me,
                attack,
                seed: self.ctx.recipe.pool.seed,
            };
            adversary.tamper(&state.params, r, std::slice::from_mut(mine), codec)?;
            return Ok(());
        }
        match fault {
            Fault::Copy => {
                if let Some(copied) = self.copy_a_payload(r)? {
                    mine.payload = std::sync::Arc::new(copied);
                }
            }
            Fault::Withhold => {
                let first_peer: BTreeSet<u32> = self
                    .members
                    .iter()
                    .map(|m| m.record.index)
                    .filter(|i| *i != self.ctx.me)
                    .take(1)
                    .collect();
                tracing::warn!(
                    round = r,
                    "withholding our payload from all but {first_peer:?}"
                );
                self.ctx
                    .block_on(self.ctx.client.withhold_own_payloads(Some(first_peer)))?;
            }
            Fault::Equivocate => self.equivocate(r, &mine.payload),
            Fault::Late => {
                tracing::warn!(round = r, "announcing our payload {LATE_SECS} s late");
                std::thread::sleep(Duration::from_secs(LATE_SECS));
            }
            Fault::Mute => {
                tracing::warn!(
                    round = r,
                    "heartbeating without a payload until the pool ends"
                );
                let (chain, pool) = (&self.ctx.chain, self.ctx.pool);
                while self
                    .ctx
                    .block_on(chain.pool(pool))?
                    .is_some_and(|p| p.status == synod_chain::PoolStatus::Training)
                {
                    std::thread::sleep(Duration::from_secs(2));
                }
                anyhow::bail!("muted until the pool ended (--fault mute)");
            }
            _ => {}
        }
        Ok(())
    }

    /// Announces, a second after our real announcement of round `r` goes out, a second payload
    /// for it (`payload` with its last byte flipped, never served): an equivocation.
    fn equivocate(&self, r: u32, payload: &[u8]) {
        let mut other = payload.to_vec();
        if let Some(b) = other.last_mut() {
            *b ^= 1;
        }
        let second = PayloadRef {
            digest: *blake3::hash(&other).as_bytes(),
            size: other.len() as u64,
        };
        tracing::warn!(round = r, "equivocating: announcing a second payload");
        let client = self.ctx.client.clone();
        self.ctx.rt.spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if let Err(e) = client.announce_once(r, second).await {
                tracing::warn!("equivocation fault: {e}");
            }
        });
    }

    /// Waits for another member's announcement of round `r` and fetches that payload.
    fn copy_a_payload(&self, r: u32) -> Result<Option<Vec<u8>>> {
        let start = Instant::now();
        while start.elapsed() < self.ctx.a.round_deadline {
            let snap = self.ctx.client.snapshot();
            let others = snap
                .announced
                .iter()
                .filter(|((round, m), _)| *round == r && *m != self.ctx.me);
            for ((_, m), a) in others {
                match self.ctx.block_on(self.ctx.client.fetch_payload(
                    *m,
                    r,
                    a.payload,
                    MAX_COPY_BYTES,
                )) {
                    Ok(bytes) => {
                        tracing::warn!(round = r, "announcing member {m}'s payload as ours");
                        return Ok(Some(bytes));
                    }
                    Err(e) => tracing::debug!("copy from member {m}: {e}"),
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        tracing::warn!(round = r, "nothing to copy: announcing our own payload");
        Ok(None)
    }
}
