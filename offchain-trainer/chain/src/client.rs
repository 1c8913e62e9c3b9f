//! Reads at the finalized head and the finalized-block subscription.

use std::time::{Duration, Instant};

use scale_decode::DecodeAsType;
use subxt::{OnlineClient, PolkadotConfig};
use tokio::sync::mpsc;

use crate::events::{decode, SynodEvent};
use crate::types::{
    AccountId, ChallengeInfo, FinalCheckpoint, FormerMemberRecord, Ledger, MemberInfo,
    MemberRecord, Participant, PoolInfo, Verdict,
};
use crate::ChainError;

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
    /// Held by [`Chain::submit`] from signing to finality: one extrinsic of this process in
    /// flight at a time, so two never take the same nonce (a background commit and a
    /// challenge, say, would otherwise invalidate each other).
    pub(crate) submitting: std::sync::Arc<tokio::sync::Mutex<()>>,
}

/// The connection shared by a [`Chain`] and its clones.
struct Shared {
    endpoints: Vec<String>,
    /// The client, its generation (incremented at every reconnection) and endpoint index.
    current: std::sync::RwLock<(OnlineClient<Config>, u64, usize)>,
    /// Taken while reconnecting, so that concurrent failures reconnect once.
    reconnecting: tokio::sync::Mutex<()>,
}

/// A finalized block and the Synod events in it.
#[derive(Clone, Debug)]
pub struct FinalizedBlock {
    /// Block number.
    pub number: u64,
    /// Synod events in block order.
    pub events: Vec<SynodEvent>,
}

#[derive(DecodeAsType)]
struct AccountInfo {
    nonce: u32,
    data: AccountData,
}

#[derive(DecodeAsType)]
struct AccountData {
    free: u128,
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
            match OnlineClient::<Config>::from_insecure_url(url).await {
                Ok(api) => {
                    return Ok(Self {
                        url: url.clone(),
                        inner: std::sync::Arc::new(Shared {
                            endpoints: urls.to_vec(),
                            current: std::sync::RwLock::new((api, 0, at)),
                            reconnecting: tokio::sync::Mutex::new(()),
                        }),
                        submitting: Default::default(),
                    })
                }
                Err(e) if start.elapsed() >= wait => {
                    return Err(ChainError::Connect {
                        url: urls.join(","),
                        reason: e.to_string(),
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
        (g.0.clone(), g.1)
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
            (g.1, g.2)
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
            match OnlineClient::<Config>::from_insecure_url(&eps[at]).await {
                Ok(api) => {
                    tracing::info!("reconnected to {}", eps[at]);
                    let mut g = self
                        .inner
                        .current
                        .write()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    *g = (api, generation + 1, at);
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

    /// Reads `pallet.entry(keys)` at the finalized head and decodes it with `decode`.
    async fn fetch_with<K, V, T, E>(
        &self,
        pallet: &str,
        entry: &str,
        keys: K,
        decode: impl Fn(&subxt::storage::StorageValue<'_, V>) -> Result<T, E>,
    ) -> Result<Option<T>, ChainError>
    where
        K: subxt::ext::frame_decode::storage::IntoEncodableValues
            + subxt::ext::frame_decode::storage::IntoDecodableValues
            + Clone
            + Send,
        V: DecodeAsType,
        E: std::fmt::Display,
    {
        self.retrying(entry, |api| {
            let (keys, decode) = (keys.clone(), &decode);
            async move {
                let at = api.at_current_block().await.map_err(ChainError::rpc)?;
                let addr = subxt::dynamic::storage::<K, V>(pallet, entry);
                match at
                    .storage()
                    .try_fetch(addr, keys)
                    .await
                    .map_err(ChainError::rpc)?
                {
                    Some(v) => {
                        Ok(Some(decode(&v).map_err(|e| {
                            ChainError::decode(&format!("{pallet}.{entry}"), e)
                        })?))
                    }
                    None => Ok(None),
                }
            }
        })
        .await
    }

    /// A pallet record, decoded by field name against the metadata (see [`crate::types`]).
    async fn fetch<K, V>(&self, pallet: &str, entry: &str, keys: K) -> Result<Option<V>, ChainError>
    where
        K: subxt::ext::frame_decode::storage::IntoEncodableValues
            + subxt::ext::frame_decode::storage::IntoDecodableValues
            + Clone
            + Send,
        V: DecodeAsType,
    {
        self.fetch_with::<K, V, V, _>(pallet, entry, keys, |v| v.decode_as::<V>())
            .await
    }

    /// A value-query storage item: its value, or the type's default when absent (as the
    /// runtime reads it).
    async fn fetch_or_default<K, V>(
        &self,
        pallet: &str,
        entry: &str,
        keys: K,
    ) -> Result<V, ChainError>
    where
        K: subxt::ext::frame_decode::storage::IntoEncodableValues
            + subxt::ext::frame_decode::storage::IntoDecodableValues
            + Clone
            + Send,
        V: DecodeAsType + Default,
    {
        Ok(self.fetch(pallet, entry, keys).await?.unwrap_or_default())
    }

    /// A round-protocol type (`synod-protocol`): the value's SCALE bytes decoded with the
    /// type's `Decode`, the one the runtime encodes with.
    async fn fetch_scale<K, V>(
        &self,
        pallet: &str,
        entry: &str,
        keys: K,
    ) -> Result<Option<V>, ChainError>
    where
        K: subxt::ext::frame_decode::storage::IntoEncodableValues
            + subxt::ext::frame_decode::storage::IntoDecodableValues
            + Clone
            + Send,
        V: parity_scale_codec::Decode,
    {
        self.fetch_with::<_, subxt::dynamic::Value, _, _>(pallet, entry, keys, |v| {
            V::decode(&mut v.bytes())
        })
        .await
    }

    /// The node's chain type (`system_chainType`): `Development`, `Local`, `Live`, or
    /// `Custom` for any other.
    ///
    /// # Errors
    /// [`ChainError::Rpc`] if the node cannot be reached.
    pub async fn chain_type(&self) -> Result<String, ChainError> {
        let rpc = subxt::rpcs::RpcClient::from_insecure_url(&self.current_url())
            .await
            .map_err(ChainError::rpc)?;
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
        self.retrying("slot duration", |api| async move {
            let at = api.at_current_block().await.map_err(ChainError::rpc)?;
            let ms = at
                .constants()
                .entry(subxt::dynamic::constant::<u64>("Aura", "SlotDuration"))
                .map_err(|e| ChainError::decode("Aura.SlotDuration", e))?;
            if ms == 0 {
                return Err(ChainError::decode("Aura.SlotDuration", "0 ms"));
            }
            Ok(ms as f64 / 1000.0)
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
        self.fetch("Randomness", "History", (number,)).await
    }

    /// The endpoint connected to now.
    fn current_url(&self) -> String {
        let g = self
            .inner
            .current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.inner.endpoints[g.2].clone()
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

    /// `TrainingPools.Pools(pool)`.
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn pool(&self, pool: u32) -> Result<Option<PoolInfo>, ChainError> {
        self.fetch("TrainingPools", "Pools", (pool,)).await
    }

    /// `TrainingPools.NextPoolId`: the id the next `create_pool` gets.
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn next_pool_id(&self) -> Result<u32, ChainError> {
        self.fetch_or_default::<(), u32>("TrainingPools", "NextPoolId", ())
            .await
    }

    /// The pool's current members with their registrations, ascending index.
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn members(&self, pool: u32) -> Result<Vec<MemberInfo>, ChainError> {
        let list: Vec<AccountId> = self
            .fetch_or_default("TrainingPools", "MemberList", (pool,))
            .await?;
        let mut out = Vec::with_capacity(list.len());
        for account in list {
            if let Some(record) = self
                .fetch::<_, MemberRecord>("TrainingPools", "Members", (pool, account))
                .await?
            {
                out.push(MemberInfo { account, record });
            }
        }
        out.sort_by_key(|m| m.record.index);
        Ok(out)
    }

    /// `who`'s registration in `pool`, if a member.
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn member(
        &self,
        pool: u32,
        who: &AccountId,
    ) -> Result<Option<MemberRecord>, ChainError> {
        self.fetch("TrainingPools", "Members", (pool, *who)).await
    }

    /// `TrainingPools.FormerMembers(pool, index)`: the registration of a member that left or
    /// was dropped, while its key may still be needed.
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn former_member(
        &self,
        pool: u32,
        index: u32,
    ) -> Result<Option<FormerMemberRecord>, ChainError> {
        self.fetch("TrainingPools", "FormerMembers", (pool, index))
            .await
    }

    /// `Checkpoints.Snapshots((pool, round))`: the participants of `round`, frozen when it
    /// opened (ascending member index); `None` before it opens and after it is pruned (at
    /// settlement; a voided round's is kept while its stake is slashable, see
    /// `Checkpoints.KeptSnapshots`).
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn round_snapshot(
        &self,
        pool: u32,
        round: u32,
    ) -> Result<Option<Vec<Participant>>, ChainError> {
        self.fetch_scale("Checkpoints", "Snapshots", ((pool, round),))
            .await
    }

    /// `Checkpoints.FinalCheckpoints(pool, round)`.
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn final_checkpoint(
        &self,
        pool: u32,
        round: u32,
    ) -> Result<Option<FinalCheckpoint>, ChainError> {
        self.fetch("Checkpoints", "FinalCheckpoints", (pool, round))
            .await
    }

    /// `Checkpoints.AgreedSets((pool, round))`: the included set the chain fixed for open
    /// `round` after its members' sets split (`synod_protocol::agreement`), ascending member
    /// indices; `None` if the round has not split (or is closed).
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn agreed_set(&self, pool: u32, round: u32) -> Result<Option<Vec<u32>>, ChainError> {
        self.fetch_scale("Checkpoints", "AgreedSets", ((pool, round),))
            .await
    }

    /// `Checkpoints.LastFinal(pool)`: the last final round and its hash.
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn last_final(&self, pool: u32) -> Result<Option<(u32, [u8; 32])>, ChainError> {
        self.fetch("Checkpoints", "LastFinal", (pool,)).await
    }

    /// Whether `round` of `pool` was voided (`Checkpoints.Voided`).
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn voided(&self, pool: u32, round: u32) -> Result<bool, ChainError> {
        Ok(self
            .fetch::<_, u32>("Checkpoints", "Voided", (pool, round))
            .await?
            .is_some())
    }

    /// `Checkpoints.KeptSnapshots(pool)`: the voided rounds whose snapshot is kept for
    /// equivocation reports, each with the block from which it no longer counts (its stake may
    /// be withdrawn), oldest first; empty if none.
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn kept_snapshots(&self, pool: u32) -> Result<Vec<(u32, u32)>, ChainError> {
        Ok(self
            .fetch_scale("Checkpoints", "KeptSnapshots", (pool,))
            .await?
            .unwrap_or_default())
    }

    /// `Rewards.Claimable(pool, who)`, in planck.
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn claimable(&self, pool: u32, who: &AccountId) -> Result<u128, ChainError> {
        self.fetch_or_default("Rewards", "Claimable", (pool, *who))
            .await
    }

    /// Final rounds of `pool` whose rewards are not settled yet (`Rewards.Unsettled` entries).
    ///
    /// # Errors
    /// [`ChainError::Rpc`].
    pub async fn unsettled_rounds(&self, pool: u32) -> Result<usize, ChainError> {
        self.retrying("Rewards.Unsettled", |api| async move {
            let at = api.at_current_block().await.map_err(ChainError::rpc)?;
            let addr = subxt::dynamic::storage::<(u32, u32), subxt::dynamic::Value>(
                "Rewards",
                "Unsettled",
            );
            let mut it = at
                .storage()
                .iter(addr, (pool,))
                .await
                .map_err(ChainError::rpc)?;
            let mut n = 0;
            while let Some(e) = it.next().await {
                e.map_err(ChainError::rpc)?;
                n += 1;
            }
            Ok(n)
        })
        .await
    }

    /// `Challenges.NextChallengeId`: the id the next challenge gets (ids count from 0).
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn next_challenge_id(&self) -> Result<u32, ChainError> {
        self.fetch_or_default::<(), u32>("Challenges", "NextChallengeId", ())
            .await
    }

    /// `Challenges.OpenChallenges(id)`: `None` once resolved (or never opened).
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn challenge(&self, id: u32) -> Result<Option<ChallengeInfo>, ChainError> {
        self.fetch("Challenges", "OpenChallenges", (id,)).await
    }

    /// `Challenges.Votes(id, who)`: `who`'s vote on challenge `id` (`true` = guilty).
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn vote_of(&self, id: u32, who: &AccountId) -> Result<Option<bool>, ChainError> {
        self.fetch("Challenges", "Votes", (id, *who)).await
    }

    /// `Challenges.OpenAgainst((pool, round, who))`: challenges open against that contribution.
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn open_against(
        &self,
        pool: u32,
        round: u32,
        who: &AccountId,
    ) -> Result<u32, ChainError> {
        self.fetch_or_default::<_, u32>("Challenges", "OpenAgainst", ((pool, round, *who),))
            .await
    }

    /// `Challenges.Verdicts(pool, round, who)`: the verdict on that contribution, if any.
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn verdict(
        &self,
        pool: u32,
        round: u32,
        who: &AccountId,
    ) -> Result<Option<Verdict>, ChainError> {
        self.fetch_scale("Challenges", "Verdicts", (pool, round, *who))
            .await
    }

    /// `Challenges.Equivocations(pool, round, who)`: the two payload digests `who` was
    /// proved to have signed for that round, if reported.
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn equivocation(
        &self,
        pool: u32,
        round: u32,
        who: &AccountId,
    ) -> Result<Option<([u8; 32], [u8; 32])>, ChainError> {
        self.fetch_scale("Challenges", "Equivocations", (pool, round, *who))
            .await
    }

    /// `Challenges.Jurors`: the registered jurors.
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn jurors(&self) -> Result<Vec<AccountId>, ChainError> {
        self.fetch_or_default::<(), Vec<AccountId>>("Challenges", "Jurors", ())
            .await
    }

    /// `who`'s free balance, in planck.
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn free_balance(&self, who: &AccountId) -> Result<u128, ChainError> {
        Ok(self
            .fetch::<_, AccountInfo>("System", "Account", (*who,))
            .await?
            .map_or(0, |a| a.data.free))
    }

    /// `who`'s next nonce at the finalized head.
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn nonce(&self, who: &AccountId) -> Result<u32, ChainError> {
        Ok(self
            .fetch::<_, AccountInfo>("System", "Account", (*who,))
            .await?
            .map_or(0, |a| a.nonce))
    }

    /// `who`'s active bonded stake, in planck.
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn active_stake(&self, who: &AccountId) -> Result<u128, ChainError> {
        Ok(self
            .fetch::<_, Ledger>("TrainerStaking", "Ledger", (*who,))
            .await?
            .map_or(0, |l| l.active))
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
    /// heads; every 500 ms if the subscription fails) until it returns `Some`. State is re-read
    /// each time, so nothing is missed between subscribing and the first block.
    ///
    /// # Errors
    /// [`ChainError::Timeout`] after `timeout`; errors of `check`.
    pub async fn wait_for<T, F, Fut>(
        &self,
        what: &str,
        timeout: Duration,
        mut check: F,
    ) -> Result<T, ChainError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<Option<T>, ChainError>>,
    {
        let start = Instant::now();
        let mut blocks = self.api().0.stream_blocks().await.ok();
        loop {
            if let Some(v) = check().await? {
                return Ok(v);
            }
            let left = timeout.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Err(ChainError::Timeout {
                    what: what.to_string(),
                    secs: timeout.as_secs(),
                });
            }
            match blocks.as_mut() {
                Some(b) => {
                    match tokio::time::timeout(left.min(Duration::from_secs(10)), b.next()).await {
                        Ok(Some(Ok(_))) | Err(_) => {}
                        Ok(Some(Err(e))) => {
                            tracing::debug!(
                                "finalized-block subscription failed ({e}); polling instead"
                            );
                            blocks = None;
                        }
                        Ok(None) => blocks = None,
                    }
                }
                None => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{calls, ChainError};

    #[test]
    fn join_pool_rejects_oversized_peer_ids_and_wrong_key_lengths() {
        let key = vec![0u8; calls::ML_DSA_65_PUBLIC_KEY_LEN];
        assert!(calls::join_pool(0, 1, vec![0; calls::MAX_PEER_ID_LEN], &key).is_ok());
        assert!(matches!(
            calls::join_pool(0, 1, vec![0; calls::MAX_PEER_ID_LEN + 1], &key),
            Err(ChainError::Invalid(_))
        ));
        assert!(matches!(
            calls::join_pool(0, 1, vec![0; 38], &key[1..]),
            Err(ChainError::Invalid(_))
        ));
    }

    #[test]
    fn module_errors_are_matched_by_pallet_and_name() {
        let e = ChainError::Module {
            pallet: "Checkpoints".into(),
            error: "AlreadyCommitted".into(),
            docs: String::new(),
        };
        assert!(e.is_module("Checkpoints", "AlreadyCommitted"));
        assert!(!e.is_module("Checkpoints", "RoundClosed"));
        assert!(!ChainError::Rpc("x".into()).is_module("Checkpoints", "AlreadyCommitted"));
    }
}
