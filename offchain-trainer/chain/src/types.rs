//! The chain's types as the client sees them.
//!
//! * The round protocol's own types (the participant snapshot of a round, its timeline, the
//!   quorum rule) come from `synod-protocol`, the crate the pallets use: they are never copied
//!   here, and are decoded from SCALE bytes with the very `Decode` the runtime encodes with.
//! * The pallets' storage records (`PoolInfo`, `MemberInfo`, …) are decoded by name against the
//!   runtime metadata (`scale-decode`): fields the trainer does not need are skipped, and a
//!   renamed or retyped field fails to decode instead of being misread.

use scale_decode::DecodeAsType;
use scale_encode::EncodeAsType;

/// An account id (sr25519 public key, 32 bytes).
pub type AccountId = subxt::utils::AccountId32;

/// 1 SYN in planck (the runtime's `UNIT`, 12 decimals).
pub const UNIT: u128 = 1_000_000_000_000;

/// `PoolStatus` of `pallet-training-pools`: the protocol's own type, decoded by variant name.
pub use synod_protocol::PoolStatus;

/// `Perbill` (parts per billion).
#[derive(Clone, Copy, Debug, PartialEq, Eq, DecodeAsType, EncodeAsType)]
pub struct Perbill(pub u32);

/// A pool's job specification (`PoolSpec` of `pallet-training-pools`; argument of `create_pool`):
/// the terms every kind of pool shares and the kind.
#[derive(Clone, Debug, PartialEq, Eq, DecodeAsType, EncodeAsType)]
pub struct PoolSpec {
    /// Membership, stake, rewards and round timing.
    pub terms: PoolTerms,
    /// What the pool trains, and how.
    pub kind: PoolKind,
}

/// A pool's terms (`PoolTerms` of `pallet-training-pools`). Balances in planck, durations in
/// blocks.
#[derive(Clone, Debug, PartialEq, Eq, DecodeAsType, EncodeAsType)]
pub struct PoolTerms {
    /// Outer rounds.
    pub rounds: u32,
    /// Members needed before training starts.
    pub min_trainers: u32,
    /// Member cap.
    pub max_trainers: u32,
    /// Smallest stake a member may commit, in planck.
    pub min_stake: u128,
    /// Reward of one final round, in planck, split over its contributors pro rata to their
    /// snapshot stake.
    pub reward_per_round: u128,
    /// Share of the round's stake that must commit the same checkpoint.
    pub quorum: Perbill,
    /// Blocks after a round opens before it is voided if not final.
    pub round_timeout: u32,
    /// Blocks after finality during which late commits are accepted; challenges follow for as
    /// many blocks.
    pub challenge_window: u32,
    /// Blocks after a round opens before a commit to it is accepted (0: at once, and ahead of
    /// the round); at most half of `round_timeout`.
    pub min_round_length: u32,
    /// Accounts allowed to join; empty: anyone may.
    pub allowed_trainers: Vec<AccountId>,
}

/// What a pool trains, and how (`PoolKind` of `pallet-training-pools`, decoded by variant
/// name). A member runs the program of its pool's kind; `synod-trainer` runs DiLoCo pools.
///
/// A kind the runtime has and this client does not know decodes as [`PoolKind::Unknown`] with
/// its variant name (its fields skipped), so that reading every pool (`pool show`, `status`, the
/// member's own pool) goes on when a chain adds a kind; running such a pool fails with
/// [`UnsupportedKind`].
#[derive(Clone, Debug, PartialEq, Eq, EncodeAsType)]
pub enum PoolKind {
    /// DiLoCo: H inner steps per round, then an outer Nesterov step on the aggregated
    /// pseudo-gradient.
    DiLoCo(DilocoSpec),
    /// A kind this client does not know, by the runtime's name for it. Never encoded: a
    /// `create_pool` with it fails to encode.
    Unknown(String),
}

impl PoolKind {
    /// The runtime's name of the kind (its variant).
    pub fn name(&self) -> &str {
        match self {
            Self::DiLoCo(_) => "DiLoCo",
            Self::Unknown(name) => name,
        }
    }
}

/// Decodes a [`PoolKind`] by variant name, any unknown variant as [`PoolKind::Unknown`].
pub struct PoolKindVisitor<R>(std::marker::PhantomData<R>);

impl<R: scale_decode::TypeResolver> scale_decode::Visitor for PoolKindVisitor<R> {
    type Value<'scale, 'resolver> = PoolKind;
    type Error = scale_decode::Error;
    type TypeResolver = R;

    fn visit_variant<'scale, 'resolver>(
        self,
        value: &mut scale_decode::visitor::types::Variant<'scale, 'resolver, R>,
        _type_id: R::TypeId,
    ) -> Result<PoolKind, scale_decode::Error> {
        use scale_decode::IntoVisitor;
        if value.name() != "DiLoCo" {
            // Its fields are skipped by the decoder.
            return Ok(PoolKind::Unknown(value.name().to_string()));
        }
        let fields = value.fields().remaining();
        if fields != 1 {
            return Err(
                scale_decode::Error::new(scale_decode::error::ErrorKind::WrongLength {
                    actual_len: fields,
                    expected_len: 1,
                })
                .at_variant("DiLoCo"),
            );
        }
        let spec = value
            .fields()
            .decode_item(DilocoSpec::into_visitor::<R>())
            .transpose()
            .map_err(|e| e.at_variant("DiLoCo"))?
            .ok_or_else(|| scale_decode::Error::custom_str("DiLoCo without its spec"))?;
        Ok(PoolKind::DiLoCo(spec))
    }
}

impl scale_decode::IntoVisitor for PoolKind {
    type AnyVisitor<R: scale_decode::TypeResolver> = PoolKindVisitor<R>;

    fn into_visitor<R: scale_decode::TypeResolver>() -> Self::AnyVisitor<R> {
        PoolKindVisitor(std::marker::PhantomData)
    }
}

/// A pool of a kind this trainer does not run.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("the pool is of kind {0}, which this trainer does not run (it runs DiLoCo pools)")]
pub struct UnsupportedKind(pub String);

/// A DiLoCo job (`DilocoSpec` of `pallet-training-pools`). Hashes are blake3.
#[derive(Clone, Debug, PartialEq, Eq, DecodeAsType, EncodeAsType)]
pub struct DilocoSpec {
    /// blake3 of the training recipe (model preset, seed, batch, optimizer settings).
    pub model_config_hash: [u8; 32],
    /// blake3 of the initial weights file (round 0's checkpoint).
    pub initial_weights_hash: [u8; 32],
    /// Dataset identifier, at most 64 bytes (e.g. `tinyshakespeare`).
    pub dataset_id: Vec<u8>,
    /// blake3 of the dataset bytes.
    pub dataset_hash: [u8; 32],
    /// Inner steps H per outer round.
    pub inner_steps: u32,
}

impl PoolSpec {
    /// The DiLoCo job of this spec.
    ///
    /// # Errors
    /// [`UnsupportedKind`] for a pool of another kind.
    pub fn diloco(&self) -> Result<&DilocoSpec, UnsupportedKind> {
        match &self.kind {
            PoolKind::DiLoCo(job) => Ok(job),
            PoolKind::Unknown(name) => Err(UnsupportedKind(name.clone())),
        }
    }
}

/// A pool's state (`PoolInfo` of `pallet-training-pools`).
#[derive(Clone, Debug, PartialEq, Eq, DecodeAsType)]
pub struct PoolInfo {
    /// Creator (pays the rewards).
    pub creator: AccountId,
    /// The job specification.
    pub spec: PoolSpec,
    /// Lifecycle state.
    pub status: PoolStatus,
    /// The round being committed (0 while `Open`).
    pub current_round: u32,
    /// Current number of members.
    pub member_count: u32,
    /// Sum of the members' committed stake, in planck.
    pub total_stake: u128,
    /// Budget still on hold, in planck.
    pub budget_held: u128,
}

/// A member's registration (`MemberInfo` of `pallet-training-pools`).
#[derive(Clone, Debug, PartialEq, Eq, DecodeAsType)]
pub struct MemberRecord {
    /// Position in the pool (aggregation order).
    pub index: u32,
    /// libp2p peer id (multihash bytes).
    pub peer_id: Vec<u8>,
    /// ML-DSA-65 public key (1952 bytes).
    pub ml_dsa_key: Vec<u8>,
    /// Committed stake, in planck.
    pub stake: u128,
    /// First round it takes part in.
    pub from_round: u32,
}

/// A former member's registration (`FormerMember` of `pallet-training-pools`): kept while
/// challenges of the rounds it was in are possible.
#[derive(Clone, Debug, PartialEq, Eq, DecodeAsType)]
pub struct FormerMemberRecord {
    /// Its account.
    pub who: AccountId,
    /// libp2p peer id (multihash bytes).
    pub peer_id: Vec<u8>,
    /// ML-DSA-65 public key (1952 bytes).
    pub ml_dsa_key: Vec<u8>,
}

/// A participant of a round's frozen snapshot (`synod_protocol::Participant`): index,
/// account and weight in planck.
pub type Participant = synod_protocol::Participant<AccountId>;

/// A member with its account.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberInfo {
    /// The member's account.
    pub account: AccountId,
    /// Its registration.
    pub record: MemberRecord,
}

/// A pool's open round (`OpenRound` of `pallet-checkpoints`).
#[derive(Clone, Debug, PartialEq, Eq, DecodeAsType)]
pub struct OpenRound {
    /// Round number.
    pub round: u32,
    /// Block in which it opened.
    pub opened_at: u32,
    /// Block at which it is voided unless final.
    pub deadline: u32,
    /// Block whose `on_initialize` voids it; `None` if the chain's per-block queue was full
    /// (it is then voided by the deadline queue or by `void_expired_round` from its deadline on).
    pub scheduled_at: Option<u32>,
}

impl OpenRound {
    /// Whether a member waiting for `round` to close should call `void_expired_round`, at
    /// finalized block `finalized`: the open round is `round`, its deadline has passed and the
    /// chain's queue, if it scheduled the void, had a block to do it in first, and `slack`
    /// blocks more have passed (members wait different slacks, so that few calls race).
    pub fn needs_void(&self, round: u32, finalized: u64, slack: u64) -> bool {
        let due = self
            .scheduled_at
            .map_or(self.deadline, |at| at.max(self.deadline));
        self.round == round && finalized > u64::from(due).saturating_add(slack)
    }
}

/// A split open round's agreed included set (`AgreedSet` of `pallet-checkpoints`).
#[derive(Clone, Debug, PartialEq, Eq, DecodeAsType)]
pub struct AgreedSet {
    /// Member indices, ascending.
    pub included: Vec<u32>,
    /// Block in which the chain fixed it.
    pub fixed_at: u32,
}

/// A final checkpoint (`FinalCheckpoint` of `pallet-checkpoints`).
#[derive(Clone, Debug, PartialEq, Eq, DecodeAsType)]
pub struct FinalCheckpoint {
    /// blake3 of the checkpoint file.
    pub hash: [u8; 32],
    /// The previous final hash.
    pub parent: [u8; 32],
    /// Included set agreed on (member indices, ascending).
    pub included: Vec<u32>,
    /// Members in `included` that committed this hash.
    pub contributors: Vec<AccountId>,
    /// Block in which the round became final.
    pub finalized_at: u32,
    /// Stake that had committed it at finality, in planck.
    pub committed_stake: u128,
    /// The round's stake (quorum denominator), in planck.
    pub round_stake: u128,
}

/// A final round's reward waiting for its settlement (`PendingRound` of `pallet-rewards`).
#[derive(Clone, Debug, PartialEq, Eq, DecodeAsType)]
pub struct PendingRound {
    /// Reward reserved for the round, in planck.
    pub reserved: u128,
    /// Block from which the round may be settled.
    pub settle_at: u32,
    /// Whether the chain settles it in `settle_at`'s `on_initialize`; otherwise it is settled
    /// lazily: by a claim that finds it among the entries it reads, or by anyone's
    /// `Rewards.settle_round` ([`crate::calls::settle_round`]).
    pub scheduled: bool,
}

/// A staking ledger (`StakingLedger` of `pallet-trainer-staking`), balances in planck.
#[derive(Clone, Debug, PartialEq, Eq, DecodeAsType)]
pub struct Ledger {
    /// Bonded stake that is not unbonding.
    pub active: u128,
}

/// An open challenge (`Challenge` of `pallet-challenges`).
#[derive(Clone, Debug, PartialEq, Eq, DecodeAsType)]
pub struct ChallengeInfo {
    /// Pool.
    pub pool_id: u32,
    /// Final round whose contribution is disputed.
    pub round: u32,
    /// The contributor accused.
    pub accused: AccountId,
    /// Who opened it.
    pub challenger: AccountId,
    /// blake3 of the disputed payload (from the verified evidence).
    pub payload_digest: [u8; 32],
    /// Block at which it expires without a verdict.
    pub expires_at: u32,
    /// The committee: each drawn juror once with its seats; empty until drawn.
    pub jury: Vec<Seat>,
}

/// The appeal side of an open challenge in a pool with appeals (`Appeal` of
/// `pallet-challenges`, read by field name).
#[derive(Clone, Debug, PartialEq, Eq, DecodeAsType)]
pub struct AppealInfo {
    /// The first committee's ruling and the block at which it executes unless appealed; `None`
    /// before it is reached and once the appeal committee is drawn.
    pub ruling: Option<(Verdict, u32)>,
    /// Who appealed, and the bond it holds in planck.
    pub appellant: Option<(AccountId, u128)>,
}

/// A juror of a challenge's committee (`synod_protocol::Seated`, read by field name; its stake
/// is not needed here).
#[derive(Clone, Debug, PartialEq, Eq, DecodeAsType)]
pub struct Seat {
    /// The juror.
    pub who: AccountId,
    /// Seats it holds: its vote counts this many times.
    pub seats: u32,
}

/// A challenge's outcome (`synod_protocol::Verdict`), decoded with the runtime's own type.
pub use synod_protocol::Verdict;

#[cfg(test)]
mod tests {
    use super::{DilocoSpec, OpenRound, PoolKind, UnsupportedKind};
    use parity_scale_codec::Encode;
    use scale_decode::DecodeAsType;

    /// The runtime's kinds as a later runtime may have them: DiLoCo and one this client does not
    /// know (with fields of its own).
    #[derive(Encode, scale_info::TypeInfo)]
    struct LaterDiloco {
        model_config_hash: [u8; 32],
        initial_weights_hash: [u8; 32],
        dataset_id: Vec<u8>,
        dataset_hash: [u8; 32],
        inner_steps: u32,
    }

    /// As the runtime's `PoolKind`: `DiLoCo(DilocoSpec)`, one unnamed field.
    #[derive(Encode, scale_info::TypeInfo)]
    enum LaterKind {
        DiLoCo(LaterDiloco),
        AsyncRl {
            rollouts: u32,
            policy_hash: [u8; 32],
        },
    }

    /// (The pool's kind, a field after it): what a storage record holds.
    #[derive(Encode, scale_info::TypeInfo)]
    struct Record {
        kind: LaterKind,
        after: u32,
    }

    #[derive(Debug, PartialEq, DecodeAsType)]
    struct Decoded {
        kind: PoolKind,
        after: u32,
    }

    fn decode(record: &Record) -> Decoded {
        let mut registry = scale_info::Registry::new();
        let id = registry
            .register_type(&scale_info::meta_type::<Record>())
            .id;
        let types: scale_info::PortableRegistry = registry.into();
        Decoded::decode_as_type(&mut &record.encode()[..], id, &types).unwrap()
    }

    /// A chain that adds a kind of pool does not break reading its pools: the unknown kind is
    /// named, its fields skipped (the record's next field still decodes), and asking it for a
    /// DiLoCo job is a typed error.
    #[test]
    fn a_kind_this_client_does_not_know_decodes_by_name_and_is_refused_by_type() {
        let rl = decode(&Record {
            kind: LaterKind::AsyncRl {
                rollouts: 8,
                policy_hash: [7; 32],
            },
            after: 42,
        });
        assert_eq!(rl.kind, PoolKind::Unknown("AsyncRl".into()));
        assert_eq!(rl.after, 42, "the unknown kind's fields were skipped");
        let diloco = decode(&Record {
            kind: LaterKind::DiLoCo(LaterDiloco {
                model_config_hash: [1; 32],
                initial_weights_hash: [2; 32],
                dataset_id: b"tinyshakespeare".to_vec(),
                dataset_hash: [3; 32],
                inner_steps: 50,
            }),
            after: 43,
        });
        assert_eq!(
            diloco.kind,
            PoolKind::DiLoCo(DilocoSpec {
                model_config_hash: [1; 32],
                initial_weights_hash: [2; 32],
                dataset_id: b"tinyshakespeare".to_vec(),
                dataset_hash: [3; 32],
                inner_steps: 50,
            })
        );
        assert_eq!(diloco.after, 43);
        assert_eq!(rl.kind.name(), "AsyncRl");
        let spec = |kind| super::PoolSpec {
            terms: super::PoolTerms {
                rounds: 1,
                min_trainers: 1,
                max_trainers: 1,
                min_stake: 0,
                reward_per_round: 0,
                quorum: super::Perbill(0),
                round_timeout: 1,
                challenge_window: 1,
                min_round_length: 0,
                allowed_trainers: Vec::new(),
            },
            kind,
        };
        assert_eq!(
            spec(rl.kind).diloco(),
            Err(UnsupportedKind("AsyncRl".into()))
        );
        assert!(spec(diloco.kind).diloco().is_ok());
    }

    #[test]
    fn an_expired_round_needs_a_void_only_after_the_queue_had_its_block() {
        let unscheduled = OpenRound {
            round: 4,
            opened_at: 100,
            deadline: 160,
            scheduled_at: None,
        };
        assert!(
            !unscheduled.needs_void(4, 160, 0),
            "the deadline block itself"
        );
        assert!(unscheduled.needs_void(4, 161, 0));
        assert!(
            !unscheduled.needs_void(4, 162, 2),
            "a member with two blocks of slack"
        );
        assert!(unscheduled.needs_void(4, 163, 2));
        assert!(!unscheduled.needs_void(3, 200, 0), "another round is open");
        // Scheduled two blocks late (its block's queue was full): the queue voids it at 162.
        let late = OpenRound {
            scheduled_at: Some(162),
            ..unscheduled.clone()
        };
        assert!(!late.needs_void(4, 162, 0));
        assert!(late.needs_void(4, 163, 0));
    }
}
