//! The allowed member set of a pool (on-chain: `join_pool` registrations).

use libp2p::PeerId;

use crate::PublicKey;

/// One registered member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Member index (the chain's order; aggregation order).
    pub index: u32,
    /// Registered libp2p peer id.
    pub peer_id: PeerId,
    /// Registered ML-DSA-65 public key.
    pub key: PublicKey,
}

/// The members allowed to contribute to a pool, supplied by the caller (the chain client).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberSet {
    /// Pool id.
    pub pool: u64,
    members: Vec<Member>,
}

impl MemberSet {
    /// A set for `pool` (members sorted by index; later duplicates of an index are dropped).
    pub fn new(pool: u64, mut members: Vec<Member>) -> Self {
        members.sort_by_key(|m| m.index);
        members.dedup_by_key(|m| m.index);
        Self { pool, members }
    }

    /// The member with `index`.
    pub fn get(&self, index: u32) -> Option<&Member> {
        self.members
            .binary_search_by_key(&index, |m| m.index)
            .ok()
            .and_then(|i| self.members.get(i))
    }

    /// The member registered with `peer`.
    pub fn by_peer(&self, peer: &PeerId) -> Option<&Member> {
        self.members.iter().find(|m| m.peer_id == *peer)
    }

    /// All members, ascending index.
    pub fn iter(&self) -> impl Iterator<Item = &Member> {
        self.members.iter()
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }
}
