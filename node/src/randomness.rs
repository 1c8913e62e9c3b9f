//! The block author's VRF for `pallet-randomness`: the author of a slot signs
//! `pallet_randomness::transcript(previous, slot)` with its Aura key from the keystore, and the
//! block carries the proof as a mandatory inherent (the runtime verifies it against the slot's
//! author and chains the output into the randomness that seeds jury draws).

use pallet_randomness::{RandomnessApi, VrfProof};
use sp_api::ProvideRuntimeApi;
use sp_consensus_aura::{sr25519::AuthorityId as AuraId, AuraApi, Slot};
use sp_core::crypto::key_types::AURA;
use sp_keystore::KeystorePtr;
use synod_runtime::opaque::{Block, Hash};

/// The inherent data provider of a block built at `slot` on `parent`: the VRF proof if this
/// node's keystore holds the slot author's Aura key (it does when Aura lets it author the
/// slot), nothing otherwise (a runtime without `pallet-randomness` asks for nothing).
pub fn inherent_data_provider<C>(
    client: &C,
    keystore: &KeystorePtr,
    parent: Hash,
    slot: Slot,
) -> pallet_randomness::InherentDataProvider
where
    C: ProvideRuntimeApi<Block>,
    C::Api: AuraApi<Block, AuraId> + RandomnessApi<Block>,
{
    pallet_randomness::InherentDataProvider(prove(client, keystore, parent, slot))
}

fn prove<C>(client: &C, keystore: &KeystorePtr, parent: Hash, slot: Slot) -> Option<VrfProof>
where
    C: ProvideRuntimeApi<Block>,
    C::Api: AuraApi<Block, AuraId> + RandomnessApi<Block>,
{
    let api = client.runtime_api();
    let authorities = api.authorities(parent).ok()?;
    let len = u64::try_from(authorities.len()).ok().filter(|l| *l > 0)?;
    let author = authorities.get(usize::try_from(u64::from(slot) % len).ok()?)?;
    let previous = api.current(parent).ok()?;
    let data = pallet_randomness::transcript(&previous, slot.into()).into_sign_data();
    match keystore.sr25519_vrf_sign(AURA, author.as_ref(), &data) {
        Ok(Some(signature)) => Some(VrfProof::from_signature(&signature)),
        Ok(None) => None,
        Err(e) => {
            log::warn!("randomness: VRF signing failed for slot {slot}: {e}");
            None
        }
    }
}
