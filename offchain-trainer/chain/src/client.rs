//! The connection (endpoints, reconnection and retries), constants, randomness and the
//! finalized-block subscription; storage reads are in [`crate::storage`].

use std::time::{Duration, Instant};

use subxt::{OnlineClient, PolkadotConfig};
use tokio::sync::mpsc;

use crate::events::{decode, SynodEvent};
use crate::{items, ChainError};

/// The client configuration: the runtime uses Polkadot's address, signature and header types
/// (`MultiAddress<AccountId32, ()>`, `MultiSignature`, `u32` block numbers, blake2-256).
pub type Config = PolkadotConfig;

/// A connection to one of a list of nodes. Cheap to clone (clones share the connection, the
/// reconnection state and the submission lock).
///
/// **Resilience**: every read and every submission that fails with [`ChainError::Rpc`] (a
/// dropped connection, a restarting node) reconnects — to the next endpoint of the list in
/// turn, with backoff from 0.5 s doubling to 8 s — and retries, for up to [`Chain::PATIENCE`];
/// only then does the error reach the caller.
#[derive(Clone)]
pub struct Chain {
    /// The RPC address connected to first.
    pub url: String,
    inner: std::sync::Arc<Shared>,
    /// Held by [`Chain::submit`] from reading the nonce until the node's transaction pool has
    /// accepted the extrinsic: two extrinsics of this process never take the same nonce (a
    /// background commit and a challenge, say, would otherwise invalidate each other), and
    /// neither waits for the other's finality.
    pub(crate) submitting: std::sync::Arc<tokio::sync::Mutex<()>>,
}

/// The connection shared by a [`Chain`] and its clones.
struct Shared {
    endpoints: Vec<String>,
    /// The connection in use.
    current: std::sync::RwLock<Conn>,
    /// Taken while reconnecting, so that concurrent failures reconnect once.
    reconnecting: tokio::sync::Mutex<()>,
}

/// One connection to one endpoint.
struct Conn {
    /// The client over `rpc`.
    api: OnlineClient<Config>,
    /// The raw JSON-RPC client, for the node's own methods (`system_accountNextIndex`).
    rpc: subxt::rpcs::RpcClient,
    /// Incremented at every reconnection.
    generation: u64,
    /// Index in `Shared::endpoints`.
    endpoint: usize,
}

impl Conn {
    /// Connects to `url`.
    async fn open(url: &str, generation: u64, endpoint: usize) -> Result<Self, String> {
        let rpc = subxt::rpcs::RpcClient::from_insecure_url(url)
            .await
            .map_err(|e| e.to_string())?;
        let api = OnlineClient::<Config>::from_rpc_client(rpc.clone())
            .await
            .map_err(|e| e.to_string())?;
        Ok(Self {
            api,
            rpc,
            generation,
            endpoint,
        })
    }
}

/// A finalized block and the Synod events in it.
#[derive(Clone, Debug)]
pub struct FinalizedBlock {
    /// Block number.
    pub number: u64,
    /// Synod events in block order.
    pub events: Vec<SynodEvent>,
}

impl Chain {
    /// How long reads and submissions keep reconnecting and retrying after RPC errors before
    /// returning them.
    pub const PATIENCE: Duration = Duration::from_secs(300);

    /// Connects to `url` (`ws://host:port`; plain ws is accepted), retrying every 500 ms for up
    /// to `wait` while the node starts.
    ///
    /// # Errors
    /// [`ChainError::Connect`] with the last error once `wait` has passed.
    pub async fn connect(url: &str, wait: Duration) -> Result<Self, ChainError> {
        Self::connect_any(&[url.to_string()], wait).await
    }

    /// Connects to the first of `urls` that answers (trying them in turn, every 500 ms a round,
    /// for up to `wait`); later reconnections go round the list.
    ///
    /// # Errors
    /// [`ChainError::Connect`] with the last error once `wait` has passed, or for an empty list.
    pub async fn connect_any(urls: &[String], wait: Duration) -> Result<Self, ChainError> {
        let start = Instant::now();
        if urls.is_empty() {
            return Err(ChainError::Connect {
                url: String::new(),
                reason: "no RPC endpoint given".into(),
            });
        }
        let mut i = 0usize;
        loop {
            let at = i % urls.len();
            let url = &urls[at];
            match Conn::open(url, 0, at).await {
                Ok(conn) => {
                    return Ok(Self {
                        url: url.clone(),
                        inner: std::sync::Arc::new(Shared {
                            endpoints: urls.to_vec(),
                            current: std::sync::RwLock::new(conn),
                            reconnecting: tokio::sync::Mutex::new(()),
                        }),
                        submitting: Default::default(),
                    })
                }
                Err(e) if start.elapsed() >= wait => {
                    return Err(ChainError::Connect {
                        url: urls.join(","),
                        reason: e,
                    })
                }
                Err(e) => tracing::debug!("node at {url} not ready: {e}"),
            }
            i += 1;
            if i.is_multiple_of(urls.len()) {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }

    /// The current client and its generation.
    pub(crate) fn api(&self) -> (OnlineClient<Config>, u64) {
        let g = self
            .inner
            .current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (g.api.clone(), g.generation)
    }

    /// The current raw JSON-RPC client and its generation.
    pub(crate) fn rpc(&self) -> (subxt::rpcs::RpcClient, u64) {
        let g = self
            .inner
            .current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (g.rpc.clone(), g.generation)
    }

    /// Replaces the client of generation `failed` by a connection to the next endpoint that
    /// answers (round the list; backoff 0.5 s doubling to 8 s; for at most `PATIENCE`). Does
    /// nothing if another task already reconnected since `failed`.
    pub(crate) async fn reconnect(&self, failed: u64) {
        let _one = self.inner.reconnecting.lock().await;
        let (generation, from) = {
            let g = self
                .inner
                .current
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            (g.generation, g.endpoint)
        };
        if generation != failed {
            return;
        }
        let eps = &self.inner.endpoints;
        let start = Instant::now();
        let mut backoff = Duration::from_millis(500);
        let mut i = from + 1;
        while start.elapsed() < Self::PATIENCE {
            let at = i % eps.len();
            match Conn::open(&eps[at], generation + 1, at).await {
                Ok(conn) => {
                    tracing::info!("reconnected to {}", eps[at]);
                    let mut g = self
                        .inner
                        .current
                        .write()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    *g = conn;
                    return;
                }
                Err(e) => tracing::warn!("reconnecting to {}: {e}", eps[at]),
            }
            i += 1;
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(8));
        }
    }

    /// Runs `op` on the current client; after a [`ChainError::Rpc`] reconnects and runs it
    /// again, until it succeeds, fails otherwise, or `PATIENCE` has passed.
    pub(crate) async fn retrying<T, F, Fut>(&self, what: &str, mut op: F) -> Result<T, ChainError>
    where
        F: FnMut(OnlineClient<Config>) -> Fut,
        Fut: std::future::Future<Output = Result<T, ChainError>>,
    {
        let start = Instant::now();
        let mut backoff = Duration::from_millis(250);
        loop {
            let (api, generation) = self.api();
            match op(api).await {
                Err(ChainError::Rpc(e)) if start.elapsed() < Self::PATIENCE => {
                    tracing::warn!("{what}: {e}; reconnecting");
                    self.reconnect(generation).await;
                    // An error that is not the connection's comes back at once: no hot loop.
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(8));
                }
                other => return other,
            }
        }
    }

    /// The node's chain type (`system_chainType`): `Development`, `Local`, `Live`, or
    /// `Custom` for any other.
    ///
    /// # Errors
    /// [`ChainError::Rpc`] if the node cannot be reached.
    pub async fn chain_type(&self) -> Result<String, ChainError> {
        let (rpc, _) = self.rpc();
        // `Custom(name)` is a JSON object, not a string: anything but a plain name is Custom.
        let kind: Result<String, _> = rpc
            .request("system_chainType", subxt::rpcs::rpc_params![])
            .await;
        Ok(kind.unwrap_or_else(|_| "Custom".to_string()))
    }

    /// Seconds per block: the runtime's `Aura.SlotDuration` constant (milliseconds).
    ///
    /// # Errors
    /// [`ChainError::Rpc`]; [`ChainError::Decode`] if the runtime has no such constant or it
    /// is 0.
    pub async fn block_secs(&self) -> Result<f64, ChainError> {
        let ms: u64 = self.constant("Aura", "SlotDuration").await?;
        if ms == 0 {
            return Err(ChainError::decode("Aura.SlotDuration", "0 ms"));
        }
        Ok(ms as f64 / 1000.0)
    }

    /// The bonds a dispute holds from free balance, in planck: (`Challenges.ChallengeBond`,
    /// held by a challenger; `Challenges.AppealBond`, held by an appellant).
    ///
    /// # Errors
    /// [`ChainError::Rpc`]; [`ChainError::Decode`] if the runtime has no such constants.
    pub async fn dispute_bonds(&self) -> Result<(u128, u128), ChainError> {
        Ok((
            self.constant("Challenges", "ChallengeBond").await?,
            self.constant("Challenges", "AppealBond").await?,
        ))
    }

    /// The least `min_round_length` (blocks) the chain accepts for a pool of `inner_steps`
    /// inner steps per round: `TrainingPools.SpecLimits`'s `⌈inner_steps /
    /// max_inner_steps_per_block⌉` ([`synod_protocol::SpecLimits::min_round_length_floor`]).
    ///
    /// # Errors
    /// [`ChainError::Rpc`]; [`ChainError::Decode`] if the runtime has no such constant.
    pub async fn min_round_length_floor(&self, inner_steps: u32) -> Result<u64, ChainError> {
        self.retrying("spec limits", |api| async move {
            let at = api.at_current_block().await.map_err(ChainError::rpc)?;
            let bytes = at
                .constants()
                .entry_bytes(subxt::dynamic::constant::<subxt::dynamic::Value>(
                    "TrainingPools",
                    "SpecLimits",
                ))
                .map_err(|e| ChainError::decode("TrainingPools.SpecLimits", e))?;
            let limits =
                <synod_protocol::SpecLimits as parity_scale_codec::Decode>::decode(&mut &bytes[..])
                    .map_err(|e| ChainError::decode("TrainingPools.SpecLimits", e))?;
            Ok(limits.min_round_length_floor(inner_steps))
        })
        .await
    }

    /// How many blocks a decision of the chain's per-block queue may spill over when a
    /// block's list is full: `Checkpoints.MaxDeadlinesPerBlock`.
    ///
    /// # Errors
    /// [`ChainError::Rpc`]; [`ChainError::Decode`] if the runtime has no such constant.
    pub async fn deadline_spill_blocks(&self) -> Result<u64, ChainError> {
        Ok(u64::from(
            self.constant::<u32>("Checkpoints", "MaxDeadlinesPerBlock")
                .await?,
        ))
    }

    /// The timeline of a pool with `terms`, exactly as the runtime builds it
    /// (`pallet_training_pools::Pallet::timeline`): the pool's round timeout, challenge window
    /// and minimum round length, with the runtime's `TrainingPools.JuryDelay`, `VoteMargin` and
    /// `AppealPeriod` constants (blocks). The member runs the protocol's round state machine
    /// ([`synod_protocol::RoundState`]) on it, so it reaches each phase at the block the chain
    /// does.
    ///
    /// # Errors
    /// [`ChainError::Rpc`]; [`ChainError::Decode`] if the runtime lacks one of the constants.
    pub async fn timeline(
        &self,
        terms: &crate::types::PoolTerms,
    ) -> Result<synod_protocol::Timeline, ChainError> {
        let jury = synod_protocol::JuryTiming {
            jury_delay: self
                .constant::<u32>("TrainingPools", "JuryDelay")
                .await?
                .into(),
            vote_margin: self
                .constant::<u32>("TrainingPools", "VoteMargin")
                .await?
                .into(),
            appeal_period: self
                .constant::<u32>("TrainingPools", "AppealPeriod")
                .await?
                .into(),
        };
        Ok(synod_protocol::Timeline::of_pool(
            u64::from(terms.round_timeout),
            u64::from(terms.challenge_window),
            u64::from(terms.min_round_length),
            jury,
        ))
    }

    /// The runtime's `pallet.name` constant, decoded as `T` (a `u32` for block numbers and
    /// counts, a `u128` for planck).
    async fn constant<T: scale_decode::DecodeAsType + Send>(
        &self,
        pallet: &'static str,
        name: &'static str,
    ) -> Result<T, ChainError> {
        self.retrying("a constant", |api| async move {
            let at = api.at_current_block().await.map_err(ChainError::rpc)?;
            at.constants()
                .entry(subxt::dynamic::constant::<T>(pallet, name))
                .map_err(|e| ChainError::decode(&format!("{pallet}.{name}"), e))
        })
        .await
    }

    /// The randomness fixed by block `number` (`Randomness.History`: its author's VRF output
    /// chained over its parent's, which no author can grind), `None` if the runtime no longer
    /// keeps it (`KeptBlocks`, 2 400 blocks) or the block is not final yet.
    ///
    /// # Errors
    /// [`ChainError::Rpc`] (after reconnecting for `PATIENCE`), [`ChainError::Decode`].
    pub async fn randomness_at(&self, number: u64) -> Result<Option<[u8; 32]>, ChainError> {
        let Ok(number) = u32::try_from(number) else {
            return Ok(None);
        };
        self.fetch(items::RANDOMNESS_HISTORY, (number,)).await
    }

    /// Number of the last finalized block.
    ///
    /// # Errors
    /// [`ChainError::Rpc`].
    pub async fn finalized_number(&self) -> Result<u64, ChainError> {
        self.retrying("finalized head", |api| async move {
            Ok(api
                .at_current_block()
                .await
                .map_err(ChainError::rpc)?
                .block_number())
        })
        .await
    }

    /// The chain's genesis block hash (what a peer-id proof signs: [`synod_protocol::peer`]),
    /// as the client read it when it connected.
    pub fn genesis_hash(&self) -> [u8; 32] {
        self.api().0.genesis_hash().0
    }

    /// Follows finalized blocks from now on: one [`FinalizedBlock`] per block (with its Synod
    /// events), delivered on a channel of 64. The subscription runs on the current tokio
    /// runtime; when the connection fails it reconnects and subscribes again (blocks finalized
    /// meanwhile are skipped: callers re-read state with the getters, so no state is lost). It
    /// ends when the receiver is dropped or reconnecting fails for `PATIENCE`.
    ///
    /// # Errors
    /// [`ChainError::Rpc`] if the first subscription cannot start.
    pub async fn follow(
        &self,
    ) -> Result<mpsc::Receiver<Result<FinalizedBlock, ChainError>>, ChainError> {
        let (api, mut generation) = self.api();
        let mut blocks = api.stream_blocks().await.map_err(ChainError::rpc)?;
        let (tx, rx) = mpsc::channel(64);
        let chain = self.clone();
        tokio::spawn(async move {
            loop {
                while let Some(b) = blocks.next().await {
                    let out = async {
                        let b = b.map_err(ChainError::rpc)?;
                        let at = b.at().await.map_err(ChainError::rpc)?;
                        let evs = at.events().fetch().await.map_err(ChainError::rpc)?;
                        let mut events = Vec::new();
                        for ev in evs.iter() {
                            let ev = ev.map_err(|e| ChainError::decode("event", e))?;
                            if let Some(e) = decode(&ev)? {
                                events.push(e);
                            }
                        }
                        Ok(FinalizedBlock {
                            number: b.number(),
                            events,
                        })
                    }
                    .await;
                    match out {
                        Ok(b) => {
                            if tx.send(Ok(b)).await.is_err() {
                                return;
                            }
                        }
                        Err(ChainError::Rpc(e)) => {
                            tracing::warn!("finalized-block subscription: {e}");
                            break;
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e)).await;
                            return;
                        }
                    }
                }
                if tx.is_closed() {
                    return;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
                chain.reconnect(generation).await;
                let (api, g) = chain.api();
                generation = g;
                match api.stream_blocks().await {
                    Ok(b) => blocks = b,
                    Err(e) => {
                        let _ = tx.send(Err(ChainError::rpc(e))).await;
                        return;
                    }
                }
            }
        });
        Ok(rx)
    }

    /// Runs `check` now and again at every new finalized block (subscription to finalized
    /// heads; every 500 ms if the subscription fails) until it returns `Some`
    /// ([`crate::wait::wait_until`]). State is re-read each time, so nothing is missed between
    /// subscribing and the first block.
    ///
    /// # Errors
    /// [`ChainError::Timeout`] after `timeout`; errors of `check`.
    pub async fn wait_for<T, F, Fut>(
        &self,
        what: &str,
        timeout: Duration,
        check: F,
    ) -> Result<T, ChainError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<Option<T>, ChainError>>,
    {
        let mut blocks = FinalizedBlocks(self.api().0.stream_blocks().await.ok());
        crate::wait::wait_until(what, timeout, check, &mut blocks).await
    }
}

/// Wakes a wait at each finalized block (at most every 10 s), or every 500 ms once the
/// subscription has failed or ended.
struct FinalizedBlocks(Option<subxt::client::Blocks<Config>>);

impl crate::wait::Wake for FinalizedBlocks {
    async fn wake(&mut self, left: Duration) {
        let Some(b) = self.0.as_mut() else {
            tokio::time::sleep(left.min(Duration::from_millis(500))).await;
            return;
        };
        match tokio::time::timeout(left.min(Duration::from_secs(10)), b.next()).await {
            Ok(Some(Ok(_))) | Err(_) => {}
            Ok(Some(Err(e))) => {
                tracing::debug!("finalized-block subscription failed ({e}); polling instead");
                self.0 = None;
            }
            Ok(None) => self.0 = None,
        }
    }
}

#[cfg(test)]
mod tests;
