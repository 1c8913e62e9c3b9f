//! The Exporter's metric definitions: [`Exporter::new`] registers every `synod_trainer_*`
//! metric, with its name, help text and labels, at zero.

use anyhow::Result;
use substrate_prometheus_endpoint::{register, Counter, CounterVec, Gauge, Opts, Registry, U64};

use super::Exporter;

fn counter_vec(r: &Registry, name: &str, help: &str, label: &str) -> Result<CounterVec<U64>> {
    Ok(register(
        CounterVec::new(Opts::new(name, help), &[label])?,
        r,
    )?)
}

impl Exporter {
    /// A registry with every `synod_trainer_*` metric at zero.
    ///
    /// # Errors
    /// Only on a duplicate or malformed metric name (a bug).
    pub fn new() -> Result<Self> {
        let r = Registry::new();
        Ok(Self {
            pool: register(
                Gauge::new(
                    "synod_trainer_pool",
                    "Id of the pool this trainer is a member of",
                )?,
                &r,
            )?,
            finalized_height: register(
                Gauge::new(
                    "synod_trainer_finalized_height",
                    "Number of the last finalized block the trainer has seen",
                )?,
                &r,
            )?,
            peers: register(
                Gauge::new(
                    "synod_trainer_peers_connected",
                    "libp2p peers connected at the last exchange",
                )?,
                &r,
            )?,
            received_bytes: register(
                Counter::new(
                    "synod_trainer_payload_bytes_received_total",
                    "Bytes of the other members' pseudo-gradient payloads we aggregated",
                )?,
                &r,
            )?,
            stake: register(
                Gauge::new(
                    "synod_trainer_stake_syn",
                    "Stake committed to the pool as registered on-chain (its quorum weight), in \
                     SYN (10^12 planck)",
                )?,
                &r,
            )?,
            commits: counter_vec(
                &r,
                "synod_trainer_commits_total",
                "Checkpoint commits submitted (Checkpoints.commit_checkpoint), by outcome: ok, \
                 failed",
                "outcome",
            )?,
            rounds: counter_vec(
                &r,
                "synod_trainer_rounds_total",
                "Rounds closed on-chain, by outcome: final (our checkpoint), lost (final, \
                 another hash), voided",
                "outcome",
            )?,
            round: register(
                Gauge::new("synod_trainer_round", "Last outer round trained")?,
                &r,
            )?,
            inner_loss: register(
                Gauge::new(
                    "synod_trainer_inner_loss",
                    "Mean training loss of the last inner phase (nats per token)",
                )?,
                &r,
            )?,
            validation_loss: register(
                Gauge::new(
                    "synod_trainer_validation_loss",
                    "Validation loss of the last checkpoint (nats per token)",
                )?,
                &r,
            )?,
            tokens: register(
                Gauge::new(
                    "synod_trainer_tokens",
                    "Tokens trained on by the included members of the pool so far",
                )?,
                &r,
            )?,
            inner_seconds: register(
                Counter::new(
                    "synod_trainer_inner_seconds_total",
                    "Seconds spent in inner phases",
                )?,
                &r,
            )?,
            exchange_seconds: register(
                Counter::new(
                    "synod_trainer_exchange_seconds_total",
                    "Seconds spent exchanging pseudo-gradients",
                )?,
                &r,
            )?,
            outer_seconds: register(
                Counter::new(
                    "synod_trainer_outer_seconds_total",
                    "Seconds spent in outer steps (aggregation and checkpoint)",
                )?,
                &r,
            )?,
            compute_utilisation: register(
                Gauge::new(
                    "synod_trainer_compute_utilisation",
                    "Inner seconds / wall-clock seconds of the last round, chain waits included (0..1)",
                )?,
                &r,
            )?,
            payload_bytes: register(
                Counter::new(
                    "synod_trainer_payload_bytes_total",
                    "Bytes of the pseudo-gradient payloads we announced",
                )?,
                &r,
            )?,
            included: register(
                Gauge::new(
                    "synod_trainer_included_members",
                    "Members in the last round's included set",
                )?,
                &r,
            )?,
            excluded: counter_vec(
                &r,
                "synod_trainer_payloads_excluded_total",
                "Members left out of an included set, by reason",
                "reason",
            )?,
            replays: counter_vec(
                &r,
                "synod_trainer_replays_total",
                "Contributions we replayed (verification), by result: honest, dishonest",
                "result",
            )?,
            replay_seconds: register(
                Counter::new(
                    "synod_trainer_replay_seconds_total",
                    "Seconds spent replaying others' inner phases",
                )?,
                &r,
            )?,
            challenges: counter_vec(
                &r,
                "synod_trainer_challenges_total",
                "Challenges we tried to open, by outcome",
                "outcome",
            )?,
            votes: counter_vec(
                &r,
                "synod_trainer_votes_total",
                "Jury duties, by vote: guilty, innocent, abstained",
                "vote",
            )?,
            registry: r,
        })
    }
}
