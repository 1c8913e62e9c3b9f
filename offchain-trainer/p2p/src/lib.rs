//! # synod-p2p
//!
//! Synod's peer-to-peer layer on rust-libp2p (no tch dependency):
//!
//! * transports TCP and QUIC, Noise, Yamux; identify; Kademlia discovery from bootnodes;
//! * gossipsub topic `synod/pool/<id>` for small signed messages ([`message`]): heartbeats every
//!   2 s that also announce `(pool, round, member, peer id, payload digest, size)`, and leaves;
//! * `/synod/pseudograd/2` and `/synod/checkpoint/2` ([`protocol`]): one `libp2p-stream`
//!   stream per payload or checkpoint (a framed request, a framed header, the raw bytes), off
//!   the swarm's event loop, with stall and rate bounds on both sides;
//! * ML-DSA-65 identities ([`identity`]): every message is signed over its pool, round, member,
//!   peer id and digest, and accepted only from the member set the caller supplies (the chain's
//!   `join_pool` registrations); invalid senders are banned;
//! * [`exchange::all_gather`]: the fault-tolerant exchange of a round's pseudo-gradients; it
//!   returns each included member's payload as a [`Gathered`] (member, bytes), which the trainer
//!   hands to DiLoCo's aggregation.
#![deny(missing_docs)]

pub mod baseline;
pub mod exchange;
pub mod identity;
pub mod members;
pub mod message;
pub mod network;
pub mod protocol;

pub use exchange::{all_gather, finish, ExchangeConfig, ExchangeOutcome, Gathered};
pub use identity::{MemberKey, PublicKey, SignatureError};
pub use members::{Member, MemberSet};
pub use network::{
    spawn, Announced, Client, Equivocation, NetConfig, Security, Snapshot, CONTENDED_PER_MEMBER,
    EQUIVOCATION_ROUNDS, EVIDENCE_HOLD, EVIDENCE_PER_MEMBER, MAX_SERVED_CHECKPOINTS,
    MAX_SERVED_PER_PEER, MAX_SERVED_STREAMS, PINNED_CHECKPOINTS, RESERVED_PER_MEMBER,
};
pub use protocol::Limits;

pub use libp2p::{identity as libp2p_identity, Multiaddr, PeerId};

/// Errors of the network layer.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// Bad configuration (listen address, transport).
    #[error("network configuration: {0}")]
    Config(String),
    /// The node's event loop has stopped.
    #[error("network node stopped")]
    Stopped,
    /// A request failed (timeout, connection closed, malformed answer).
    #[error("request failed: {0}")]
    Request(String),
    /// The peer refused the request: not for us or this protocol, or over its per-member bound
    /// on transfers (evidence goes first); asking again once a transfer ends may succeed.
    #[error("refused by the peer")]
    Refused,
    /// The peer does not hold the object.
    #[error("not found at the peer")]
    NotFound,
    /// The object is larger than the caller allows.
    #[error("object of {0} bytes is over the limit")]
    TooLarge(u64),
    /// The fetched bytes do not hash to the announced digest.
    #[error("fetched bytes do not match the announced digest")]
    DigestMismatch,
    /// No such member.
    #[error("member {0} is not in the member set")]
    NotMember(u32),
    /// We saw no announcement of the member's payload for the round: we do not know which
    /// bytes to ask for.
    #[error("member {member}'s payload of round {round} was never announced to us")]
    NotAnnounced {
        /// The round.
        round: u32,
        /// The member.
        member: u32,
    },
}
