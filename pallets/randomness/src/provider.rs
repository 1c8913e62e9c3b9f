//! The block author's side: puts its VRF proof into the inherent data (the node signs it with
//! the slot's Aura key from its keystore).

use crate::{VrfProof, INHERENT_IDENTIFIER};
use sp_inherents::{Error, InherentData};

/// Provides this block's [`VrfProof`]; `None` when this node does not author the slot (the
/// import queue's check needs no data: the runtime verifies the proof itself).
pub struct InherentDataProvider(pub Option<VrfProof>);

#[async_trait::async_trait]
impl sp_inherents::InherentDataProvider for InherentDataProvider {
	async fn provide_inherent_data(&self, data: &mut InherentData) -> Result<(), Error> {
		match &self.0 {
			Some(proof) => data.put_data(INHERENT_IDENTIFIER, proof),
			None => Ok(()),
		}
	}

	async fn try_handle_error(
		&self,
		identifier: &sp_inherents::InherentIdentifier,
		_error: &[u8],
	) -> Option<Result<(), Error>> {
		(*identifier == INHERENT_IDENTIFIER).then(|| {
			Err(Error::Application(
				"the block's VRF randomness inherent is missing or invalid".into(),
			))
		})
	}
}
