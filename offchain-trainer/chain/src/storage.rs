//! Typed reads of the Synod pallets' storage at the finalized head: pools and members
//! (`TrainingPools`), rounds (`Checkpoints`), rewards (`Rewards`), challenges and juries
//! (`Challenges`), balances and bonds (`System`, `TrainerStaking`), each of an item named in
//! [`crate::items`]. Each read retries and reconnects as [`Chain`] describes.

use scale_decode::DecodeAsType;

use crate::items::{self, Item, PresenceItem, ScaleItem};
use crate::types::{
    AccountId, AppealInfo, ChallengeInfo, FinalCheckpoint, FormerMemberRecord, MemberInfo,
    MemberRecord, OpenRound, Participant, PendingRound, PoolInfo, Verdict,
};
use crate::{Chain, ChainError};

/// The keys of a storage item: a tuple of one value per key, encoded against the metadata.
pub(crate) trait Keys:
    subxt::ext::frame_decode::storage::IntoEncodableValues
    + subxt::ext::frame_decode::storage::IntoDecodableValues
    + Clone
    + Send
{
}

impl<K> Keys for K where
    K: subxt::ext::frame_decode::storage::IntoEncodableValues
        + subxt::ext::frame_decode::storage::IntoDecodableValues
        + Clone
        + Send
{
}

/// The storage-read primitives every typed read below uses: one item at the finalized head,
/// retried and reconnected as [`Chain`] describes.
impl Chain {
    /// Reads `pallet.entry(keys)` at the finalized head and decodes it with `decode`.
    async fn fetch_with<K, V, T, E>(
        &self,
        (pallet, entry): (&'static str, &'static str),
        keys: K,
        decode: impl Fn(&subxt::storage::StorageValue<'_, V>) -> Result<T, E>,
    ) -> Result<Option<T>, ChainError>
    where
        K: Keys,
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

    /// Storage item `item` at `keys`: a pallet record, decoded by field name against the
    /// metadata (see [`crate::types`]); `None` if absent.
    pub(crate) async fn fetch<K, V>(
        &self,
        item: Item<K, V>,
        keys: K,
    ) -> Result<Option<V>, ChainError>
    where
        K: Keys,
        V: DecodeAsType,
    {
        self.fetch_with::<K, V, V, _>((item.pallet(), item.name()), keys, |v| v.decode_as::<V>())
            .await
    }

    /// Value-query storage item `item` at `keys`: its value, or the type's default when absent
    /// (as the runtime reads it).
    pub(crate) async fn fetch_or_default<K, V>(
        &self,
        item: Item<K, V>,
        keys: K,
    ) -> Result<V, ChainError>
    where
        K: Keys,
        V: DecodeAsType + Default,
    {
        Ok(self.fetch(item, keys).await?.unwrap_or_default())
    }

    /// Storage item `item` at `keys` holding a round-protocol type (`synod-protocol`): the
    /// value's SCALE bytes decoded with the type's `Decode`, the one the runtime encodes with;
    /// `None` if absent.
    pub(crate) async fn fetch_scale<K, V>(
        &self,
        item: ScaleItem<K, V>,
        keys: K,
    ) -> Result<Option<V>, ChainError>
    where
        K: Keys,
        V: parity_scale_codec::Decode,
    {
        self.fetch_with::<_, subxt::dynamic::Value, _, _>((item.pallet(), item.name()), keys, |v| {
            V::decode(&mut v.bytes())
        })
        .await
    }

    /// Whether storage item `item` holds a value at `keys` (the value is not decoded).
    pub(crate) async fn exists<K>(
        &self,
        item: PresenceItem<K, ()>,
        keys: K,
    ) -> Result<bool, ChainError>
    where
        K: Keys,
    {
        Ok(self
            .fetch_with::<_, subxt::dynamic::Value, _, _>(
                (item.pallet(), item.name()),
                keys,
                |_| Ok::<(), std::convert::Infallible>(()),
            )
            .await?
            .is_some())
    }
}

impl Chain {
    /// `TrainingPools.Pools(pool)`.
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn pool(&self, pool: u32) -> Result<Option<PoolInfo>, ChainError> {
        self.fetch(items::POOLS, (pool,)).await
    }

    /// `TrainingPools.NextPoolId`: the id the next `create_pool` gets.
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn next_pool_id(&self) -> Result<u32, ChainError> {
        self.fetch_or_default(items::NEXT_POOL_ID, ()).await
    }

    /// The pool's current members with their registrations, ascending index.
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn members(&self, pool: u32) -> Result<Vec<MemberInfo>, ChainError> {
        let list: Vec<AccountId> = self.fetch_or_default(items::MEMBER_LIST, (pool,)).await?;
        let mut out = Vec::with_capacity(list.len());
        for account in list {
            if let Some(record) = self.fetch(items::MEMBERS, (pool, account)).await? {
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
        self.fetch(items::MEMBERS, (pool, *who)).await
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
        self.fetch(items::FORMER_MEMBERS, (pool, index)).await
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
        self.fetch_scale(items::SNAPSHOTS, ((pool, round),)).await
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
        self.fetch(items::FINAL_CHECKPOINTS, (pool, round)).await
    }

    /// Whether `who` has a commit recorded for `round` of `pool` (`Checkpoints.Commits((pool,
    /// round), who)`): kept until the round is settled (final) or closed (voided).
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn committed(
        &self,
        pool: u32,
        round: u32,
        who: &AccountId,
    ) -> Result<bool, ChainError> {
        self.exists(items::COMMITS, ((pool, round), *who)).await
    }

    /// `Checkpoints.AgreedSets((pool, round))`: the included set the chain fixed for open
    /// `round` after its members' sets split (`synod_protocol::agreement`), ascending member
    /// indices; `None` if the round has not split (or is closed).
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn agreed_set(&self, pool: u32, round: u32) -> Result<Option<Vec<u32>>, ChainError> {
        Ok(self
            .fetch(items::AGREED_SETS, ((pool, round),))
            .await?
            .map(|a| a.included))
    }

    /// `Checkpoints.OpenRounds(pool)`: the pool's open round; `None` while it has none.
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn open_round(&self, pool: u32) -> Result<Option<OpenRound>, ChainError> {
        self.fetch(items::OPEN_ROUNDS, (pool,)).await
    }

    /// `Checkpoints.LastFinal(pool)`: the last final round and its hash.
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn last_final(&self, pool: u32) -> Result<Option<(u32, [u8; 32])>, ChainError> {
        self.fetch(items::LAST_FINAL, (pool,)).await
    }

    /// Whether `round` of `pool` was voided (`Checkpoints.Voided`).
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn voided(&self, pool: u32, round: u32) -> Result<bool, ChainError> {
        Ok(self.fetch(items::VOIDED, (pool, round)).await?.is_some())
    }

    /// Whether `round` of `pool` has undecided unmatched commits (voided) or silent included
    /// members (final and settled) (`Checkpoints.UnmatchedCommits((pool, round))`).
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn unmatched_commits_pending(
        &self,
        pool: u32,
        round: u32,
    ) -> Result<bool, ChainError> {
        Ok(self
            .fetch_scale(items::UNMATCHED_COMMITS, ((pool, round),))
            .await?
            .is_some())
    }

    /// The rounds of `pool` with undecided unmatched commits or silent included members (every
    /// `Checkpoints.UnmatchedCommits` entry of the pool, also those whose round's snapshot is no
    /// longer kept), ascending. Iterates the whole map (its keys are hashed whole, so there is
    /// no per-pool prefix) and reads each entry's pool and round from its key: the SCALE
    /// encoding of `(pool, round)` (two `u32` LE) behind its `Twox64Concat` hash. The values
    /// (each a round's unmatched members) come along with the keys.
    ///
    /// # Errors
    /// [`ChainError::Rpc`].
    pub async fn unmatched_rounds(&self, pool: u32) -> Result<Vec<u32>, ChainError> {
        self.retrying("Checkpoints.UnmatchedCommits", |api| async move {
            let at = api.at_current_block().await.map_err(ChainError::rpc)?;
            let addr = items::UNMATCHED_COMMITS.any_value();
            let mut it = at.storage().iter(addr, ()).await.map_err(ChainError::rpc)?;
            let mut rounds = Vec::new();
            while let Some(entry) = it.next().await {
                let entry = entry.map_err(ChainError::rpc)?;
                if let Some((p, round)) = pool_round_of_key(entry.key_bytes()) {
                    if p == pool {
                        rounds.push(round);
                    }
                }
            }
            rounds.sort_unstable();
            Ok(rounds)
        })
        .await
    }

    /// `Checkpoints.KeptSnapshots(pool)`: the voided rounds whose snapshot is kept for
    /// equivocation reports, each with the block from which it no longer counts (its stake may
    /// be withdrawn), oldest first; empty if none.
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn kept_snapshots(&self, pool: u32) -> Result<Vec<(u32, u32)>, ChainError> {
        Ok(self
            .fetch_scale(items::KEPT_SNAPSHOTS, (pool,))
            .await?
            .unwrap_or_default())
    }

    /// `Rewards.Claimable(pool, who)`, in planck.
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn claimable(&self, pool: u32, who: &AccountId) -> Result<u128, ChainError> {
        self.fetch_or_default(items::CLAIMABLE, (pool, *who)).await
    }

    /// `Rewards.Unsettled(pool, round)`: `round`'s reward waiting for its settlement; `None` if
    /// it is settled (or not final).
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn pending_round(
        &self,
        pool: u32,
        round: u32,
    ) -> Result<Option<PendingRound>, ChainError> {
        self.fetch(items::UNSETTLED, (pool, round)).await
    }

    /// Final rounds of `pool` whose rewards are not settled yet (`Rewards.Unsettled` keys),
    /// ascending. A round's number is read from the end of its key (`Twox64Concat` of the
    /// SCALE `u32`).
    ///
    /// # Errors
    /// [`ChainError::Rpc`]; [`ChainError::Decode`] for a key too short to end with a round.
    pub async fn unsettled_rounds(&self, pool: u32) -> Result<Vec<u32>, ChainError> {
        self.retrying("Rewards.Unsettled", |api| async move {
            let at = api.at_current_block().await.map_err(ChainError::rpc)?;
            let addr = items::UNSETTLED.any_value();
            let mut it = at
                .storage()
                .iter(addr, (pool,))
                .await
                .map_err(ChainError::rpc)?;
            let mut rounds = Vec::new();
            while let Some(e) = it.next().await {
                let e = e.map_err(ChainError::rpc)?;
                let round = round_of_key(e.key_bytes())
                    .ok_or_else(|| ChainError::decode("Rewards.Unsettled key", "too short"))?;
                rounds.push(round);
            }
            rounds.sort_unstable();
            Ok(rounds)
        })
        .await
    }

    /// `Challenges.NextChallengeId`: the id the next challenge gets (ids count from 0).
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn next_challenge_id(&self) -> Result<u32, ChainError> {
        self.fetch_or_default(items::NEXT_CHALLENGE_ID, ()).await
    }

    /// `Challenges.OpenChallenges(id)`: `None` once resolved (or never opened).
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn challenge(&self, id: u32) -> Result<Option<ChallengeInfo>, ChainError> {
        self.fetch(items::OPEN_CHALLENGES, (id,)).await
    }

    /// `Challenges.Appeals(id)`: the ruling and appeal of open challenge `id` (`None` in a pool
    /// without appeals, or once the challenge is closed).
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn appeal_of(&self, id: u32) -> Result<Option<AppealInfo>, ChainError> {
        self.fetch(items::APPEALS, (id,)).await
    }

    /// `Challenges.Disputes(id)`: what open challenge `id` disputes ([`synod_protocol::Dispute::Phase`], the
    /// whole inner phase, when nothing narrower is recorded).
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn dispute_of(&self, id: u32) -> Result<synod_protocol::Dispute, ChainError> {
        Ok(self
            .fetch_scale(items::DISPUTES, (id,))
            .await?
            .unwrap_or_default())
    }

    /// `Challenges.Votes(id, who)`: `who`'s vote on challenge `id` (`true` = guilty).
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn vote_of(&self, id: u32, who: &AccountId) -> Result<Option<bool>, ChainError> {
        self.fetch(items::VOTES, (id, *who)).await
    }

    /// `Challenges.OptedOut(who)`: whether `who` opted out of juries.
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn opted_out_of_juries(&self, who: &AccountId) -> Result<bool, ChainError> {
        self.exists(items::OPTED_OUT, (*who,)).await
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
        self.fetch_or_default(items::OPEN_AGAINST, ((pool, round, *who),))
            .await
    }

    /// `Challenges.Verdicts(pool, round, who)`: `Some(Guilty)` once that contribution is
    /// convicted (the chain stores no other verdict: those are `ChallengeClosed` events).
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn verdict(
        &self,
        pool: u32,
        round: u32,
        who: &AccountId,
    ) -> Result<Option<Verdict>, ChainError> {
        self.fetch_scale(items::VERDICTS, (pool, round, *who)).await
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
        self.fetch_scale(items::EQUIVOCATIONS, (pool, round, *who))
            .await
    }

    /// `who`'s free balance, in planck.
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn free_balance(&self, who: &AccountId) -> Result<u128, ChainError> {
        Ok(self
            .fetch(items::ACCOUNT, (*who,))
            .await?
            .map_or(0, |a| a.data.free))
    }

    /// `who`'s next nonce at the finalized head.
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn nonce(&self, who: &AccountId) -> Result<u32, ChainError> {
        Ok(self
            .fetch(items::ACCOUNT, (*who,))
            .await?
            .map_or(0, |a| a.nonce))
    }

    /// `who`'s active bonded stake, in planck.
    ///
    /// # Errors
    /// [`ChainError::Rpc`], [`ChainError::Decode`].
    pub async fn active_stake(&self, who: &AccountId) -> Result<u128, ChainError> {
        Ok(self
            .fetch(items::LEDGER, (*who,))
            .await?
            .map_or(0, |l| l.active))
    }
}

/// The `(pool, round)` a storage key keyed by `Twox64Concat((PoolId, RoundIndex))` ends with
/// (two `u32` LE); `None` for a key too short to hold it.
fn pool_round_of_key(key: &[u8]) -> Option<(u32, u32)> {
    let tail: &[u8; 8] = key.get(key.len().checked_sub(8)?..)?.try_into().ok()?;
    let (pool, round) = tail.split_at(4);
    Some((
        u32::from_le_bytes(pool.try_into().ok()?),
        u32::from_le_bytes(round.try_into().ok()?),
    ))
}

/// The round a storage key whose last part is `Twox64Concat(RoundIndex)` ends with (one `u32`
/// LE); `None` for a key too short to hold it.
fn round_of_key(key: &[u8]) -> Option<u32> {
    let tail: [u8; 4] = key.get(key.len().checked_sub(4)?..)?.try_into().ok()?;
    Some(u32::from_le_bytes(tail))
}

#[cfg(test)]
mod tests {
    use super::{pool_round_of_key, round_of_key};

    #[test]
    fn a_pool_and_round_are_read_from_the_end_of_their_key() {
        // Pallet and item prefix (32 bytes), the Twox64 hash (8), then SCALE (pool, round).
        let mut key = vec![0xAB; 40];
        key.extend_from_slice(&7u32.to_le_bytes());
        key.extend_from_slice(&300u32.to_le_bytes());
        assert_eq!(pool_round_of_key(&key), Some((7, 300)));
        assert_eq!(pool_round_of_key(&key[..7]), None);
        // `Rewards.Unsettled(pool, round)`: the round's Twox64 hash, then its SCALE bytes.
        let mut key = vec![0xAB; 56];
        key.extend_from_slice(&300u32.to_le_bytes());
        assert_eq!(round_of_key(&key), Some(300));
        assert_eq!(round_of_key(&key[..3]), None);
    }
}
