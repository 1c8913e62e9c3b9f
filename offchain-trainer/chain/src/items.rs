//! Every storage item the client reads, named once: pallet, item, key types and value type.
//! [`crate::Chain`]'s reads take an [`Item`] (decoded against the metadata's type, record fields
//! by name), a [`ScaleItem`] (decoded with the protocol type's own SCALE `Decode`) or a
//! [`PresenceItem`] (only whether a value is stored), never a pallet and item name. A unit test checks every item against the runtime's own metadata
//! (`every_storage_item_the_client_reads_is_the_runtimes`): the item exists, takes as many
//! keys, and a value of its metadata type decodes as the client decodes it, so a renamed or
//! reshaped item fails the tests, not a trainer's first read on a live node.

use core::marker::PhantomData;

use scale_decode::DecodeAsType;
use subxt::storage::DynamicAddress;

use crate::types::{
    AccountId, AgreedSet, AppealInfo, ChallengeInfo, FinalCheckpoint, FormerMemberRecord, Ledger,
    MemberRecord, OpenRound, Participant, PendingRound, PoolInfo, Verdict,
};

/// A storage item `pallet.name` keyed by `K` (a tuple: one element per key of the item, `()`
/// for a plain value) holding `V`, decoded against the metadata's type (`DecodeAsType`).
pub struct Item<K, V> {
    pallet: &'static str,
    name: &'static str,
    _types: PhantomData<fn(K) -> V>,
}

/// A storage item `pallet.name` keyed by `K` holding a round-protocol type `V`
/// (`synod-protocol`), decoded with `V`'s own SCALE `Decode`, the code the runtime encodes with.
pub struct ScaleItem<K, V> {
    pallet: &'static str,
    name: &'static str,
    _types: PhantomData<fn(K) -> V>,
}

/// A storage item `pallet.name` keyed by `K` of which the client reads only whether a value is
/// stored (`V` = `()`), whatever the value's type.
pub struct PresenceItem<K, V> {
    pallet: &'static str,
    name: &'static str,
    _types: PhantomData<fn(K) -> V>,
}

macro_rules! item_kind {
    ($kind:ident) => {
        impl<K, V> $kind<K, V> {
            const fn new(pallet: &'static str, name: &'static str) -> Self {
                Self {
                    pallet,
                    name,
                    _types: PhantomData,
                }
            }

            /// The pallet's name in the runtime (`TrainingPools`, `Checkpoints`, …).
            pub fn pallet(&self) -> &'static str {
                self.pallet
            }

            /// The item's name in its pallet (`Pools`, `OpenRounds`, …).
            pub fn name(&self) -> &'static str {
                self.name
            }
        }

        impl<K, V> Clone for $kind<K, V> {
            fn clone(&self) -> Self {
                *self
            }
        }

        impl<K, V> Copy for $kind<K, V> {}
    };
}

item_kind!(Item);
item_kind!(ScaleItem);
item_kind!(PresenceItem);

/// The dynamic address of an item whose keys the client iterates.
macro_rules! iterable {
    ($kind:ident) => {
        impl<K, V> $kind<K, V> {
            /// The item's dynamic address with its keys `K`, its values read as any
            /// [`subxt::dynamic::Value`] (iterations over its keys).
            pub(crate) fn any_value(&self) -> DynamicAddress<K, subxt::dynamic::Value>
            where
                K: subxt::ext::frame_decode::storage::IntoEncodableValues,
            {
                subxt::dynamic::storage(self.pallet, self.name)
            }
        }
    };
}

iterable!(Item);
iterable!(ScaleItem);

/// `System.Account`'s value, the two fields the client reads.
#[derive(DecodeAsType)]
pub(crate) struct AccountInfo {
    /// The account's next nonce.
    pub(crate) nonce: u32,
    /// Its balances.
    pub(crate) data: AccountData,
}

/// `System.Account`'s balances, the one field the client reads.
#[derive(DecodeAsType)]
pub(crate) struct AccountData {
    /// Free balance, planck.
    pub(crate) free: u128,
}

/// A check of one item against a runtime's metadata: `(pallet, item, number of keys, decode)`,
/// `decode` decoding a value's SCALE bytes of the given metadata type as the client does.
#[cfg(test)]
pub(crate) type Check = (
    &'static str,
    &'static str,
    usize,
    fn(&[u8], u32, &scale_info::PortableRegistry) -> Result<(), String>,
);

macro_rules! items {
    ($(
        $(#[$doc:meta])*
        $kind:ident $const:ident = $pallet:literal . $name:literal [$($key:ty),*] => $value:ty;
    )*) => {
        $(
            $(#[$doc])*
            pub(crate) const $const: $kind<($($key,)*), $value> = $kind::new($pallet, $name);
        )*

        /// Every item of this module, for the metadata test.
        #[cfg(test)]
        pub(crate) fn all() -> Vec<Check> {
            vec![$((
                $pallet,
                $name,
                0usize $(+ items!(@one $key))*,
                items!(@decode $kind $value),
            )),*]
        }
    };
    (@decode Item $value:ty) => {
        |bytes, ty, types| {
            let mut input = bytes;
            <$value as DecodeAsType>::decode_as_type(&mut input, ty, types)
                .map_err(|e| e.to_string())?;
            whole(input)
        }
    };
    (@one $key:ty) => {
        1
    };
    (@decode PresenceItem $value:ty) => {
        |_, _, _| Ok(())
    };
    (@decode ScaleItem $value:ty) => {
        |bytes, _, _| {
            let mut input = bytes;
            <$value as parity_scale_codec::Decode>::decode(&mut input)
                .map_err(|e| e.to_string())?;
            whole(input)
        }
    };
}

/// `Ok` if decoding left nothing of its input.
#[cfg(test)]
fn whole(rest: &[u8]) -> Result<(), String> {
    if rest.is_empty() {
        Ok(())
    } else {
        Err(format!("{} bytes left undecoded", rest.len()))
    }
}

items! {
    /// `TrainingPools.Pools(pool)`.
    Item POOLS = "TrainingPools"."Pools" [u32] => PoolInfo;
    /// `TrainingPools.NextPoolId`.
    Item NEXT_POOL_ID = "TrainingPools"."NextPoolId" [] => u32;
    /// `TrainingPools.MemberList(pool)`: the pool's current members' accounts.
    Item MEMBER_LIST = "TrainingPools"."MemberList" [u32] => Vec<AccountId>;
    /// `TrainingPools.Members(pool, who)`.
    Item MEMBERS = "TrainingPools"."Members" [u32, AccountId] => MemberRecord;
    /// `TrainingPools.FormerMembers(pool, index)`.
    Item FORMER_MEMBERS = "TrainingPools"."FormerMembers" [u32, u32] => FormerMemberRecord;
    /// `Checkpoints.Snapshots((pool, round))`.
    ScaleItem SNAPSHOTS = "Checkpoints"."Snapshots" [(u32, u32)] => Vec<Participant>;
    /// `Checkpoints.FinalCheckpoints(pool, round)`.
    Item FINAL_CHECKPOINTS = "Checkpoints"."FinalCheckpoints" [u32, u32] => FinalCheckpoint;
    /// `Checkpoints.Commits((pool, round), who)`: whether `who` committed.
    PresenceItem COMMITS = "Checkpoints"."Commits" [(u32, u32), AccountId] => ();
    /// `Checkpoints.AgreedSets((pool, round))`.
    Item AGREED_SETS = "Checkpoints"."AgreedSets" [(u32, u32)] => AgreedSet;
    /// `Checkpoints.OpenRounds(pool)`.
    Item OPEN_ROUNDS = "Checkpoints"."OpenRounds" [u32] => OpenRound;
    /// `Checkpoints.LastFinal(pool)`: the last final round and its hash.
    Item LAST_FINAL = "Checkpoints"."LastFinal" [u32] => (u32, [u8; 32]);
    /// `Checkpoints.Voided(pool, round)`: the block the round was voided at.
    Item VOIDED = "Checkpoints"."Voided" [u32, u32] => u32;
    /// `Checkpoints.UnmatchedCommits((pool, round))`.
    ScaleItem UNMATCHED_COMMITS = "Checkpoints"."UnmatchedCommits" [(u32, u32)] => Vec<Participant>;
    /// `Checkpoints.KeptSnapshots(pool)`: (voided round, block it stops counting at).
    ScaleItem KEPT_SNAPSHOTS = "Checkpoints"."KeptSnapshots" [u32] => Vec<(u32, u32)>;
    /// `Rewards.Claimable(pool, who)`, planck.
    Item CLAIMABLE = "Rewards"."Claimable" [u32, AccountId] => u128;
    /// `Rewards.Unsettled(pool, round)`.
    Item UNSETTLED = "Rewards"."Unsettled" [u32, u32] => PendingRound;
    /// `Challenges.NextChallengeId`.
    Item NEXT_CHALLENGE_ID = "Challenges"."NextChallengeId" [] => u32;
    /// `Challenges.OpenChallenges(id)`.
    Item OPEN_CHALLENGES = "Challenges"."OpenChallenges" [u32] => ChallengeInfo;
    /// `Challenges.Appeals(id)`.
    Item APPEALS = "Challenges"."Appeals" [u32] => AppealInfo;
    /// `Challenges.Disputes(id)`.
    ScaleItem DISPUTES = "Challenges"."Disputes" [u32] => synod_protocol::Dispute;
    /// `Challenges.Votes(id, who)`: `true` = guilty.
    Item VOTES = "Challenges"."Votes" [u32, AccountId] => bool;
    /// `Challenges.OptedOut(who)`: whether `who` opted out of juries.
    PresenceItem OPTED_OUT = "Challenges"."OptedOut" [AccountId] => ();
    /// `Challenges.OpenAgainst((pool, round, who))`.
    Item OPEN_AGAINST = "Challenges"."OpenAgainst" [(u32, u32, AccountId)] => u32;
    /// `Challenges.Verdicts(pool, round, who)`.
    ScaleItem VERDICTS = "Challenges"."Verdicts" [u32, u32, AccountId] => Verdict;
    /// `Challenges.Equivocations(pool, round, who)`: the two payload digests.
    ScaleItem EQUIVOCATIONS = "Challenges"."Equivocations" [u32, u32, AccountId] => ([u8; 32], [u8; 32]);
    /// `System.Account(who)`.
    Item ACCOUNT = "System"."Account" [AccountId] => AccountInfo;
    /// `TrainerStaking.Ledger(who)`.
    Item LEDGER = "TrainerStaking"."Ledger" [AccountId] => Ledger;
    /// `Randomness.History(block)`: a finalized block's randomness.
    Item RANDOMNESS_HISTORY = "Randomness"."History" [u32] => [u8; 32];
}

#[cfg(test)]
mod tests {
    use super::*;
    use scale_info::{PortableRegistry, TypeDef, TypeDefPrimitive};

    /// Which value of a type [`sample`] encodes.
    #[derive(Clone, Copy)]
    enum Size {
        /// Every sequence empty, every number 0, every enum its first variant (`None`).
        Smallest,
        /// Every sequence of one element, every number its largest, every enum its last
        /// variant (`Some`): the element types, the variants' fields and the integer widths
        /// are decoded too.
        Largest,
    }

    /// The SCALE bytes of the `size` value of type `id` in `types`.
    fn sample(types: &PortableRegistry, id: u32, size: Size) -> Vec<u8> {
        let ty = types
            .resolve(id)
            .unwrap_or_else(|| panic!("type {id} not in the registry"));
        let largest = matches!(size, Size::Largest);
        match &ty.type_def {
            TypeDef::Composite(c) => c
                .fields
                .iter()
                .flat_map(|f| sample(types, f.ty.id, size))
                .collect(),
            TypeDef::Variant(v) => {
                let pick = if largest {
                    v.variants.iter().max_by_key(|x| x.index)
                } else {
                    v.variants.iter().min_by_key(|x| x.index)
                };
                match pick {
                    Some(variant) => std::iter::once(variant.index)
                        .chain(
                            variant
                                .fields
                                .iter()
                                .flat_map(|f| sample(types, f.ty.id, size)),
                        )
                        .collect(),
                    None => Vec::new(),
                }
            }
            // Compact 1 is 0x04: one element.
            TypeDef::Sequence(s) if largest => std::iter::once(4)
                .chain(sample(types, s.type_param.id, size))
                .collect(),
            TypeDef::Sequence(_) | TypeDef::BitSequence(_) => vec![0],
            // Compact 0 (the client reads no compact number).
            TypeDef::Compact(_) => vec![0],
            TypeDef::Array(a) => (0..a.len)
                .flat_map(|_| sample(types, a.type_param.id, size))
                .collect(),
            TypeDef::Tuple(t) => t
                .fields
                .iter()
                .flat_map(|f| sample(types, f.id, size))
                .collect(),
            TypeDef::Primitive(p) => {
                let width = match p {
                    TypeDefPrimitive::Bool | TypeDefPrimitive::U8 | TypeDefPrimitive::I8 => 1,
                    TypeDefPrimitive::Str => return vec![0],
                    TypeDefPrimitive::U16 | TypeDefPrimitive::I16 => 2,
                    TypeDefPrimitive::Char | TypeDefPrimitive::U32 | TypeDefPrimitive::I32 => 4,
                    TypeDefPrimitive::U64 | TypeDefPrimitive::I64 => 8,
                    TypeDefPrimitive::U128 | TypeDefPrimitive::I128 => 16,
                    TypeDefPrimitive::U256 | TypeDefPrimitive::I256 => 32,
                };
                match p {
                    // `true`; the largest unsigned integers (a narrower client type refuses
                    // them).
                    TypeDefPrimitive::Bool if largest => vec![1],
                    TypeDefPrimitive::U8
                    | TypeDefPrimitive::U16
                    | TypeDefPrimitive::U32
                    | TypeDefPrimitive::U64
                    | TypeDefPrimitive::U128
                    | TypeDefPrimitive::U256
                        if largest =>
                    {
                        vec![0xff; width]
                    }
                    _ => vec![0; width],
                }
            }
        }
    }

    /// `check` against `metadata`: `Err` names what differs.
    fn against(metadata: &subxt::metadata::Metadata, check: &Check) -> Result<(), String> {
        let (pallet, name, keys, decode) = *check;
        let entry = metadata
            .pallet_by_name(pallet)
            .and_then(|p| p.storage())
            .and_then(|s| s.entry_by_name(name))
            .ok_or_else(|| format!("the runtime has no storage item {pallet}.{name}"))?;
        if entry.keys().len() != keys {
            return Err(format!(
                "{pallet}.{name} takes {} keys, the client gives {keys}",
                entry.keys().len()
            ));
        }
        for size in [Size::Smallest, Size::Largest] {
            let bytes = sample(metadata.types(), entry.value_ty(), size);
            decode(&bytes, entry.value_ty(), metadata.types()).map_err(|e| {
                let which = match size {
                    Size::Smallest => "smallest",
                    Size::Largest => "largest",
                };
                format!("{pallet}.{name}'s {which} value: {e}")
            })?;
        }
        Ok(())
    }

    /// Every storage item the client reads is one of the runtime's: it exists, takes as many
    /// keys as the client gives, and its smallest and largest values of its metadata type
    /// decode as the client decodes them (records by field name, sequences' elements, both
    /// ends of each enum, every integer at its width). The check can fail: an item the runtime
    /// does not have, another number of keys, a value of another type and a narrower integer
    /// are refused.
    #[test]
    fn every_storage_item_the_client_reads_is_the_runtimes() {
        let m = crate::calls::tests::runtime_metadata();
        let all = all();
        assert!(all.len() >= 28, "{} items", all.len());
        for check in &all {
            if let Err(e) = against(&m, check) {
                panic!("{e}");
            }
        }
        let pools = all
            .iter()
            .find(|c| c.1 == "Pools")
            .expect("TrainingPools.Pools is read")
            .3;
        assert!(against(&m, &("TrainingPools", "Pool", 1, pools)).is_err());
        assert!(against(&m, &("TrainingPools", "Pools", 2, pools)).is_err());
        // A pool record is not an open round's.
        assert!(against(&m, &("Checkpoints", "OpenRounds", 1, pools)).is_err());
        // `Checkpoints.Voided` holds a block number (u32): read as a u16, its largest value
        // does not fit.
        let narrow: fn(&[u8], u32, &PortableRegistry) -> Result<(), String> = |b, ty, types| {
            let mut input = b;
            u16::decode_as_type(&mut input, ty, types).map_err(|e| e.to_string())?;
            whole(input)
        };
        assert!(against(&m, &("Checkpoints", "Voided", 2, narrow)).is_err());
    }
}
