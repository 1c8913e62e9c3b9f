//! Whose payloads count in a round's exchange: the chain's frozen participant snapshot.

use std::collections::BTreeMap;

use synod_chain::types::{FormerMemberRecord, MemberInfo, Participant};

/// A registration the exchange checks payloads against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Registered {
    /// Member index (aggregation order).
    pub index: u32,
    /// libp2p peer id (multihash bytes).
    pub peer_id: Vec<u8>,
    /// ML-DSA-65 public key ([`synod_protocol::evidence::PUBLIC_KEY_LEN`] bytes).
    pub key: Vec<u8>,
    /// Weight in planck: snapshot stake, or committed stake before the round opens.
    pub stake: u128,
}

/// Indices of `snapshot` participants that are not current members under the same account
/// and index — they left, or left and rejoined under a new index — whose registration for the
/// round must be read from `TrainingPools.FormerMembers`.
pub(super) fn former_indices(snapshot: &[Participant], members: &[MemberInfo]) -> Vec<u32> {
    snapshot
        .iter()
        .filter(|p| {
            !members
                .iter()
                .any(|m| m.account == p.who && m.record.index == p.index)
        })
        .map(|p| p.index)
        .collect()
}

/// The members whose payloads count in `round` (ascending index).
///
/// Once `round` is open the chain has frozen its participants (`Checkpoints.Snapshots`,
/// `synod_protocol::snapshot`): exactly those count, with the registration of the current
/// members or, for a participant that left since the round opened, its `FormerMembers` record.
/// Every honest member therefore gathers from the same set however late it reads the chain,
/// and a payload of an account outside the snapshot (which could not be a contributor
/// on-chain) is never aggregated. Before `round` opens (the optimistic inner phase), the
/// prediction is the current members with `from_round ≤ round`.
pub(super) fn exchange_set(
    round: u32,
    snapshot: Option<&[Participant]>,
    members: &[MemberInfo],
    former: &BTreeMap<u32, FormerMemberRecord>,
) -> Vec<Registered> {
    let Some(snapshot) = snapshot else {
        return members
            .iter()
            .filter(|m| m.record.from_round <= round)
            .map(|m| Registered {
                index: m.record.index,
                peer_id: m.record.peer_id.clone(),
                key: m.record.ml_dsa_key.clone(),
                stake: m.record.stake,
            })
            .collect();
    };
    let mut out: Vec<Registered> = snapshot
        .iter()
        .filter_map(|p| {
            let current = members
                .iter()
                .find(|m| m.account == p.who && m.record.index == p.index)
                .map(|m| (m.record.peer_id.clone(), m.record.ml_dsa_key.clone()));
            let left = || {
                former
                    .get(&p.index)
                    .filter(|f| f.who == p.who)
                    .map(|f| (f.peer_id.clone(), f.ml_dsa_key.clone()))
            };
            current.or_else(left).map(|(peer_id, key)| Registered {
                index: p.index,
                peer_id,
                key,
                stake: p.stake,
            })
        })
        .collect();
    out.sort_by_key(|r| r.index);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use synod_chain::types::{AccountId, MemberRecord};

    fn account(i: u8) -> AccountId {
        AccountId::from([i; 32])
    }

    fn member(i: u8, from_round: u32) -> MemberInfo {
        MemberInfo {
            account: account(i),
            record: MemberRecord {
                index: u32::from(i),
                peer_id: vec![i; 38],
                ml_dsa_key: vec![i; synod_protocol::evidence::PUBLIC_KEY_LEN],
                stake: 100,
                from_round,
            },
        }
    }

    fn former_record(i: u8) -> FormerMemberRecord {
        FormerMemberRecord {
            who: account(i),
            peer_id: vec![i; 38],
            ml_dsa_key: vec![i; synod_protocol::evidence::PUBLIC_KEY_LEN],
        }
    }

    fn participant(i: u8, stake: u128) -> Participant {
        Participant {
            index: u32::from(i),
            who: account(i),
            stake,
        }
    }

    fn indices(set: &[Registered]) -> Vec<u32> {
        set.iter().map(|r| r.index).collect()
    }

    #[test]
    fn member_leaving_mid_round_cannot_split_the_included_set() {
        // Round 2 opened with members 0, 1, 2; member 2 leaves while the round runs. A trainer
        // that read the members before the leave and one that read them after must gather
        // from the same set, or their included sets (and checkpoint hashes) differ.
        let snapshot = [
            participant(0, 100),
            participant(1, 100),
            participant(2, 100),
        ];
        let before = [member(0, 1), member(1, 1), member(2, 1)];
        let after = [member(0, 1), member(1, 1)];
        let mut former = BTreeMap::new();
        former.insert(2, former_record(2));
        let a = exchange_set(2, Some(&snapshot), &before, &BTreeMap::new());
        let b = exchange_set(2, Some(&snapshot), &after, &former);
        assert_eq!(a, b);
        assert_eq!(indices(&a), vec![0, 1, 2]);
        // The prediction from current members alone (the rule before snapshots) would split.
        assert_ne!(
            indices(&exchange_set(2, None, &before, &BTreeMap::new())),
            indices(&exchange_set(2, None, &after, &BTreeMap::new()))
        );
    }

    #[test]
    fn member_rejoining_under_a_new_index_cannot_split_the_included_set() {
        // Member 2 is in round 2's snapshot, then leaves and rejoins mid-round as member 5
        // (from round 3): same account, new index. Its round-2 registration is a former one.
        let snapshot = [
            participant(0, 100),
            participant(1, 100),
            participant(2, 100),
        ];
        let before = [member(0, 1), member(1, 1), member(2, 1)];
        let mut rejoined = member(2, 3);
        rejoined.record.index = 5;
        let after = [member(0, 1), member(1, 1), rejoined];
        assert!(former_indices(&snapshot, &before).is_empty());
        assert_eq!(former_indices(&snapshot, &after), vec![2]);
        let mut former = BTreeMap::new();
        former.insert(2, former_record(2));
        assert_eq!(
            exchange_set(2, Some(&snapshot), &before, &BTreeMap::new()),
            exchange_set(2, Some(&snapshot), &after, &former)
        );
    }

    #[test]
    fn member_joining_mid_round_is_not_gathered_before_its_first_round() {
        // Member 3 joined during round 2 (from_round 3): not in round 2's snapshot.
        let snapshot = [participant(0, 100), participant(1, 100)];
        let members = [member(0, 1), member(1, 1), member(3, 3)];
        let set = exchange_set(2, Some(&snapshot), &members, &BTreeMap::new());
        assert_eq!(indices(&set), vec![0, 1]);
        assert_eq!(
            indices(&exchange_set(3, None, &members, &BTreeMap::new())),
            vec![0, 1, 3]
        );
    }

    #[test]
    fn account_outside_the_snapshot_cannot_borrow_a_participant_index() {
        // A former-member record under a participant's index but another account (a later
        // registration) is not that participant's key.
        let snapshot = [participant(0, 100), participant(1, 100)];
        let members = [member(0, 1)];
        let mut former = BTreeMap::new();
        former.insert(1, former_record(9));
        let set = exchange_set(2, Some(&snapshot), &members, &former);
        assert_eq!(indices(&set), vec![0]);
    }
}
