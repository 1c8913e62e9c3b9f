//! Signed extrinsics that are submitted at most once.
//!
//! [`Chain::submit`] signs the call once, with the account's next nonce as the node counts it
//! (`system_accountNextIndex`: the nonce at the best block plus the account's extrinsics ready
//! in the transaction pool) and a 32-block mortal era, and then only ever re-sends **those
//! bytes**: a retry after a lost connection or a dropped subscription is the same extrinsic
//! (same hash, same nonce), which the chain can include at most once. Submissions through one
//! [`Chain`] (and its clones) take turns from reading the nonce until the extrinsic is in a
//! best block, so two never take the same nonce, and an extrinsic that the pool accepted and
//! then dropped (a duty the runtime no longer takes) leaves no gap before the next one; none
//! waits for another's finality (a challenge is held behind a commit in flight for at most a
//! block). A re-send the pool refuses (its nonce used, its era over) is looked for in the
//! finalized blocks where it can lie: found, it reports its block and events; not found
//! while the nonce is used, another extrinsic took it and the submission fails. Such a re-send
//! gives its turn up while it waits (for finality, or for its era to end when its nonce is
//! used only in the pool): if it then leaves the pool unincluded, the extrinsic that took the
//! next nonce meanwhile waits in the pool's future queue until its own era ends.

use std::time::Duration;

use subxt::config::PolkadotExtrinsicParamsBuilder;
use subxt::error::{DispatchError, TransactionEventsError, TransactionFinalizedSuccessError};
use subxt::transactions::{Payload, TransactionStatus};

use crate::client::{Chain, Config};
use crate::events::{decode, SynodEvent};
use crate::types::AccountId;
use crate::ChainError;
use subxt::OnlineClient;

/// An sr25519 signer (`//Alice`, a mnemonic, or a raw seed with derivation paths).
pub type Signer = subxt_signer::sr25519::Keypair;

/// Attempts to send the same signed bytes before giving up.
const ATTEMPTS: u32 = 6;

/// Blocks a signed extrinsic stays valid for after the finalized block it was signed at: the
/// longest a used nonce's block can lie after it.
pub const MORTALITY: u64 = 32;

/// The longest [`Chain::submit`] waits for a re-sent extrinsic whose nonce is used in the pool
/// to be final or to leave it at the end of its era ([`MORTALITY`] blocks after the finalized
/// block it was signed at: 64 s of 2-second blocks, plus finality's lag).
const ERA_WAIT: Duration = Duration::from_secs(600);

/// A signer from a secret URI such as `//Bob`.
///
/// # Errors
/// [`ChainError::Invalid`] if the URI does not parse.
pub fn signer_from_suri(suri: &str) -> Result<Signer, ChainError> {
    let uri: subxt_signer::SecretUri = suri
        .parse()
        .map_err(|e| ChainError::Invalid(format!("secret uri: {e}")))?;
    Signer::from_uri(&uri).map_err(|e| ChainError::Invalid(format!("secret uri: {e}")))
}

/// The account of `signer`.
pub fn account_of(signer: &Signer) -> AccountId {
    AccountId::from(signer.public_key().0)
}

/// The outcome of a successful extrinsic.
#[derive(Clone, Debug)]
pub struct Included {
    /// Finalized block that holds it.
    pub block_hash: [u8; 32],
    /// That block's number.
    pub block_number: u64,
    /// The Synod events it emitted.
    pub events: Vec<SynodEvent>,
}

fn dispatch_error(d: DispatchError) -> ChainError {
    match d {
        DispatchError::Module(m) => match m.details() {
            Ok(det) => ChainError::Module {
                pallet: det.pallet.name().to_string(),
                error: det.variant.name.clone(),
                docs: det.variant.docs.join(" "),
            },
            Err(_) => ChainError::Dispatch(m.details_string()),
        },
        other => ChainError::Dispatch(other.to_string()),
    }
}

/// The `data` of the node's JSON-RPC error for a refused submission (e.g. `"Custom error: 3"`
/// for `InvalidTransaction::Custom(3)`), which the error's text leaves out.
fn rpc_error_data(e: &subxt::error::ExtrinsicError) -> Option<String> {
    use subxt::error::{BackendError, ExtrinsicError, RpcError};
    match e {
        ExtrinsicError::ErrorSubmittingTransaction(BackendError::Rpc(RpcError::ClientError(
            subxt::rpcs::Error::User(u),
        ))) => u
            .data
            .as_ref()
            .map(|d| d.get().trim_matches('"').to_string()),
        _ => None,
    }
}

/// The pallet error a duty refused by the transaction pool would have failed with: the
/// runtime's `CheckDutyCall` refuses a commit, void, vote or appeal that would fail with
/// `InvalidTransaction::Custom(index of the pallet error)`, here named through the metadata
/// (`pallet` is the call's). `None` if `msg` carries no such code.
async fn refused_duty(api: &OnlineClient<Config>, pallet: &str, msg: &str) -> Option<ChainError> {
    let index = refusal_code(msg)?;
    let metadata = api.at_current_block().await.ok()?.metadata();
    let variant = metadata
        .pallet_by_name(pallet)?
        .error_variant_by_index(index)?;
    Some(ChainError::Module {
        pallet: pallet.to_string(),
        error: variant.name.clone(),
        docs: variant.docs.join(" "),
    })
}

/// The code of `InvalidTransaction::Custom(code)` in a pool's refusal message: the legacy
/// author RPC's `"Custom error: 3"` (the JSON-RPC error's data), the `transactionWatch`
/// event's `"Invalid transaction with custom error: 3"`, or `"Custom(3)"` in a debug
/// rendering.
fn refusal_code(msg: &str) -> Option<u8> {
    let msg = msg.to_ascii_lowercase();
    let rest = ["custom error: ", "custom("]
        .iter()
        .find_map(|tag| msg.find(tag).map(|at| &msg[at + tag.len()..]))?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Whether a pool rejection means an earlier copy of the extrinsic already used the nonce.
fn nonce_used(msg: &str) -> bool {
    let m = msg.to_ascii_lowercase();
    m.contains("outdated")
        || m.contains("stale")
        || m.contains("already imported")
        || m.contains("too low")
        || m.contains("temporarily banned")
}

enum Attempt {
    Done(Result<Included, ChainError>),
    /// A re-send refused by the pool (e.g. its nonce used): an earlier send may have landed.
    ResendRefused(String),
    Retry(String),
}

impl Chain {
    /// The SCALE call data of `call` (pallet index, call index, arguments) encoded against the
    /// metadata of the chain's current runtime: what the signed extrinsic will carry. Checks
    /// that the pallet and the call exist and that the arguments have the call's names and
    /// types, without signing or submitting anything.
    ///
    /// # Errors
    /// [`ChainError::Invalid`] if `call` does not fit the metadata; [`ChainError::Rpc`] if the
    /// current block cannot be read.
    pub async fn call_data<C: Payload>(&self, call: &C) -> Result<Vec<u8>, ChainError> {
        let at = self
            .retrying("reading the current block", |api| async move {
                api.at_current_block().await.map_err(ChainError::rpc)
            })
            .await?;
        at.tx().call_data(call).map_err(|e| {
            ChainError::Invalid(format!("{}.{}: {e}", call.pallet_name(), call.call_name()))
        })
    }

    /// Signs `call` as `signer`, submits it and waits until it is in a finalized block. Waits
    /// first for any other submission through this client to reach a best block (not for its
    /// finality).
    ///
    /// # Errors
    /// [`ChainError::Module`] / [`ChainError::Dispatch`] if it was included and failed;
    /// [`ChainError::Rejected`] if the pool refused it, or another extrinsic used its nonce;
    /// [`ChainError::Timeout`] if a re-send's nonce is used but neither final nor free again
    /// (its era over) after [`ERA_WAIT`];
    /// [`ChainError::Rpc`] after `ATTEMPTS` failed sends of the same bytes.
    pub async fn submit<C: Payload>(
        &self,
        call: &C,
        signer: &Signer,
    ) -> Result<Included, ChainError> {
        let mut turn = Some(self.submitting.lock().await);
        let who = account_of(signer);
        let (nonce, signed_at, bytes) = self
            .retrying("signing", |api| {
                async move {
                    // The pool's view: our extrinsics still in flight have taken their nonces.
                    let nonce = self.pool_nonce(&who).await?;
                    let at = api.at_current_block().await.map_err(ChainError::rpc)?;
                    let params = PolkadotExtrinsicParamsBuilder::<Config>::new()
                        .nonce(nonce)
                        .mortal(MORTALITY)
                        .build();
                    let tx = at
                        .tx()
                        .create_signed(call, signer, params)
                        .await
                        .map_err(|e| {
                            ChainError::Invalid(format!(
                                "{}.{}: {e}",
                                call.pallet_name(),
                                call.call_name()
                            ))
                        })?;
                    Ok((nonce, at.block_number(), tx.encoded().to_vec()))
                }
            })
            .await?;
        let mut last = String::new();
        for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                tracing::warn!(
                    attempt,
                    "re-sending the same signed {}.{}: {last}",
                    call.pallet_name(),
                    call.call_name()
                );
                tokio::time::sleep(Duration::from_millis(500 << attempt.min(4))).await;
            }
            let (api, generation) = self.api();
            match Self::attempt(api.clone(), bytes.clone(), attempt > 0, &mut turn).await {
                Attempt::Done(Err(ChainError::Rejected(msg))) => {
                    return Err(refused_duty(&api, call.pallet_name(), &msg)
                        .await
                        .unwrap_or(ChainError::Rejected(msg)));
                }
                Attempt::Done(r) => return r,
                Attempt::Retry(e) => {
                    last = e;
                    // A lost connection: the next send goes through a fresh one.
                    self.reconnect(generation).await;
                }
                Attempt::ResendRefused(msg) => {
                    drop(turn.take());
                    return self
                        .landed(&who, nonce, signed_at, &bytes, &msg, call)
                        .await;
                }
            }
        }
        Err(ChainError::Rpc(format!(
            "{}.{} not confirmed after {ATTEMPTS} sends: {last}",
            call.pallet_name(),
            call.call_name()
        )))
    }

    /// Sends `bytes` once and follows them to a finalized block; gives `turn` back as soon as
    /// they are in a best block.
    async fn attempt<G>(
        api: OnlineClient<Config>,
        bytes: Vec<u8>,
        resend: bool,
        turn: &mut Option<G>,
    ) -> Attempt {
        let at = match api.at_current_block().await {
            Ok(at) => at,
            Err(e) => return Attempt::Retry(e.to_string()),
        };
        let mut progress = match at.tx().from_bytes(bytes).submit_and_watch().await {
            Ok(p) => p,
            Err(e) => {
                let msg = match rpc_error_data(&e) {
                    Some(data) => format!("{e}: {data}"),
                    None => e.to_string(),
                };
                // A first send refused for a transaction of the same tag in the pool (another
                // account's duty) is a refusal, as the watch stream reports it, not a lost
                // connection.
                if !resend && crate::error::too_low_priority(&msg) {
                    return Attempt::Done(Err(ChainError::Rejected(msg)));
                }
                if resend && (nonce_used(&msg) || msg.to_ascii_lowercase().contains("invalid")) {
                    return Attempt::ResendRefused(msg);
                }
                if msg.to_ascii_lowercase().contains("invalid") {
                    return Attempt::Done(Err(ChainError::Rejected(msg)));
                }
                return Attempt::Retry(msg);
            }
        };
        let in_block = loop {
            match progress.next().await {
                Some(Ok(TransactionStatus::InFinalizedBlock(b))) => break b,
                // In a block: the runtime took it, and the next nonce read at the best block
                // counts it. (Accepted into the pool is not enough: the runtime re-checks a
                // duty when it builds a block, and a dropped extrinsic would leave a gap that
                // holds every later one in the pool's future queue.)
                Some(Ok(TransactionStatus::InBestBlock(_))) => drop(turn.take()),
                Some(Ok(
                    TransactionStatus::Validated
                    | TransactionStatus::Broadcasted
                    | TransactionStatus::NoLongerInBestBlock,
                )) => {}
                Some(Ok(TransactionStatus::Invalid { message })) => {
                    return if resend {
                        Attempt::ResendRefused(message)
                    } else {
                        Attempt::Done(Err(ChainError::Rejected(message)))
                    };
                }
                Some(Ok(
                    TransactionStatus::Error { message } | TransactionStatus::Dropped { message },
                )) => return Attempt::Retry(message),
                Some(Err(e)) => return Attempt::Retry(e.to_string()),
                None => return Attempt::Retry("the status stream ended".into()),
            }
        };
        let block_hash = in_block.block_hash().0;
        let block_number = match in_block.at().await {
            Ok(at) => at.block_number(),
            // A resend of the same bytes finds them by their used nonce.
            Err(e) => return Attempt::Retry(e.to_string()),
        };
        match in_block.wait_for_success().await {
            Ok(evs) => Attempt::Done(included(block_hash, block_number, &evs)),
            Err(TransactionEventsError::ExtrinsicFailed(d)) => {
                Attempt::Done(Err(dispatch_error(d)))
            }
            Err(e) => Attempt::Retry(TransactionFinalizedSuccessError::from(e).to_string()),
        }
    }

    /// The outcome of our extrinsic `bytes` (nonce `nonce` of `who`, signed at finalized block
    /// `signed_at`, carrying `call`) whose re-send the pool refused with `msg`. If the nonce is
    /// used (at the finalized head, or at the best block or in the pool: then once that is
    /// final, within [`ERA_WAIT`]), the extrinsic is looked for in the finalized blocks of its
    /// era; if not, the refusal stands (a duty the runtime refuses named by its pallet error).
    /// A nonce used only in the pool that is still unused once the extrinsic's era is over
    /// was our extrinsic, dropped unincluded: nothing of ours is left in the pool.
    ///
    /// # Errors
    /// Its dispatch error if it landed and failed; [`ChainError::Rejected`] if another
    /// extrinsic used the nonce; the refusal ([`ChainError::Module`] for a refused duty,
    /// [`ChainError::Rejected`] otherwise) if the nonce is unused, or was ours and its era
    /// ended; [`ChainError::Timeout`] if a used nonce is neither final nor free after
    /// [`ERA_WAIT`].
    async fn landed<C: Payload>(
        &self,
        who: &AccountId,
        nonce: u64,
        signed_at: u64,
        bytes: &[u8],
        msg: &str,
        call: &C,
    ) -> Result<Included, ChainError> {
        let (mut used, mut head) = self.finalized_nonce(who).await?;
        if used <= nonce {
            if self.pool_nonce(who).await? <= nonce {
                let (api, _) = self.api();
                return Err(refused_duty(&api, call.pallet_name(), msg)
                    .await
                    .unwrap_or_else(|| ChainError::Rejected(msg.to_string())));
            }
            // The nonce is used at the best block or in the pool: wait for its finality, or
            // for our extrinsic's era to end (the pool then drops it). A later extrinsic of
            // ours must not meet it in the pool: a duty providing the same tag
            // (`CheckDutyCall`) with a higher priority (a fee under a risen multiplier) would
            // replace it and then wait for its nonce forever.
            (used, head) = self
                .wait_for("nonce to advance", ERA_WAIT, || async {
                    let (used, head) = self.finalized_nonce(who).await?;
                    Ok((used > nonce || head > signed_at + MORTALITY).then_some((used, head)))
                })
                .await?;
            if used <= nonce {
                return Err(ChainError::Rejected(format!(
                    "{}.{} (nonce {nonce} of {who}) left the pool unincluded: its era ended",
                    call.pallet_name(),
                    call.call_name()
                )));
            }
        }
        match self
            .find_included(bytes, signed_at + 1, head.min(signed_at + MORTALITY))
            .await?
        {
            Some(r) => r,
            None => Err(ChainError::Rejected(format!(
                "nonce {nonce} of {who} was used by another extrinsic: {}.{} did not land",
                call.pallet_name(),
                call.call_name()
            ))),
        }
    }

    /// The next nonce of `who` as the node counts it (`system_accountNextIndex`: the nonce at
    /// the best block plus the account's extrinsics ready in the pool).
    async fn pool_nonce(&self, who: &AccountId) -> Result<u64, ChainError> {
        self.retrying("next nonce", |_| async move {
            let (rpc, _) = self.rpc();
            rpc.request(
                "system_accountNextIndex",
                subxt::rpcs::rpc_params![who.to_string()],
            )
            .await
            .map_err(ChainError::rpc)
        })
        .await
    }

    /// The nonce of `who` at the finalized head, and the head's number.
    async fn finalized_nonce(&self, who: &AccountId) -> Result<(u64, u64), ChainError> {
        self.retrying("finalized nonce", |api| async move {
            let at = api.at_current_block().await.map_err(ChainError::rpc)?;
            let txc = at.tx();
            let nonce = txc.account_nonce(who).await.map_err(ChainError::rpc)?;
            Ok((nonce, at.block_number()))
        })
        .await
    }

    /// The outcome of the extrinsic `bytes` if a finalized block `from..=to` holds it: its
    /// block and events, or the error it failed with; `None` if none of them holds it.
    async fn find_included(
        &self,
        bytes: &[u8],
        from: u64,
        to: u64,
    ) -> Result<Option<Result<Included, ChainError>>, ChainError> {
        for number in from..=to {
            let found = self
                .retrying("reading a block's extrinsics", |api| async move {
                    let at = api.at_block(number).await.map_err(ChainError::rpc)?;
                    let extrinsics = at.extrinsics().fetch().await.map_err(ChainError::rpc)?;
                    for ext in extrinsics.iter() {
                        let ext = ext.map_err(|e| ChainError::decode("extrinsic", e))?;
                        if ext.bytes() != bytes {
                            continue;
                        }
                        let evs = ext.events().await.map_err(ChainError::rpc)?;
                        let failed = evs.iter().find_map(|ev| match ev {
                            Ok(ev)
                                if ev.pallet_name() == "System"
                                    && ev.event_name() == "ExtrinsicFailed" =>
                            {
                                Some(
                                    DispatchError::decode_from(ev.field_bytes(), at.metadata())
                                        .map_err(|e| ChainError::decode("dispatch error", e))
                                        .and_then(|d| Err(dispatch_error(d))),
                                )
                            }
                            _ => None,
                        });
                        let hash = at.block_hash().0;
                        return Ok(Some(failed.unwrap_or_else(|| included(hash, number, &evs))));
                    }
                    Ok(None)
                })
                .await?;
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }
}

/// An included extrinsic's outcome from its events.
fn included(
    block_hash: [u8; 32],
    block_number: u64,
    evs: &subxt::extrinsics::ExtrinsicEvents<Config>,
) -> Result<Included, ChainError> {
    let mut events = Vec::new();
    for ev in evs.iter() {
        let ev = ev.map_err(|e| ChainError::decode("event", e))?;
        if let Some(e) = decode(&ev)? {
            events.push(e);
        }
    }
    Ok(Included {
        block_hash,
        block_number,
        events,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_used_nonce_is_recognised_in_the_pool_s_answers() {
        assert!(nonce_used("Invalid Transaction: Transaction is outdated"));
        assert!(nonce_used("Transaction Already Imported"));
        assert!(nonce_used("Priority is too low: (1 vs 1)"));
        assert!(nonce_used(
            "The priority of the transaction is too low (pool 1 > current 1)"
        ));
        assert!(nonce_used("Transaction is temporarily banned"));
        assert!(!nonce_used(
            "Invalid Transaction: Inability to pay some fees"
        ));
    }

    #[test]
    fn a_refused_duty_s_error_code_is_read_from_the_pool_s_answer() {
        assert_eq!(
            refusal_code("Invalid Transaction (1010): Custom error: 12"),
            Some(12)
        );
        assert_eq!(refusal_code("Invalid(Custom(3))"), Some(3));
        assert_eq!(
            refusal_code("Invalid transaction with custom error: 7"),
            Some(7)
        );
        assert_eq!(refusal_code("Invalid Transaction: Custom error: 300"), None);
        assert_eq!(
            refusal_code("Invalid Transaction: Inability to pay some fees"),
            None
        );
    }

    #[test]
    fn secret_uris_parse_to_the_dev_accounts_and_bad_ones_are_typed_errors() {
        let bob = signer_from_suri("//Bob").unwrap();
        assert_eq!(
            account_of(&bob).to_string(),
            "5FHneW46xGXgs5mUiveU4sbTyGBzmstUspZC92UhjJM694ty"
        );
        assert!(matches!(
            signer_from_suri("not a uri //"),
            Err(ChainError::Invalid(_))
        ));
    }
}
