//! The trainer's events: one JSON line each in `metrics.jsonl` (and on stdout), the input of
//! the Prometheus exporter ([`crate::prometheus::Exporter::observe`]).
//!
//! Every line is an object whose `"event"` key names the variant in `snake_case`, followed by
//! the variant's fields under their own names. A non-finite `f64` (a loss not measured yet, the
//! distance of a payload that does not decode) is written as `null` and read back as NaN.
//! `Option` fields are written as `null` when `None`, except those marked as absent from the
//! line when `None`.

use std::path::PathBuf;

use serde::{Deserialize, Deserializer, Serialize};

/// One event of a trainer: `train`'s evaluations, and a pool member's joining, rounds,
/// commits, verification duties and end; the dashboard's start.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum TrainerEvent {
    /// One evaluation point of a run: the initial checkpoint (round 0) or an outer round
    /// (a data-parallel run: one block of inner steps) just completed.
    Round {
        /// "diloco" or "ddp".
        method: String,
        /// Outer round (data parallel: block of inner steps) just completed; 0 = before
        /// training.
        round: u32,
        /// Tokens consumed so far by all workers (pools: by the included members) together.
        tokens: u64,
        /// Validation loss of the global parameters (nats per token); NaN (null) when not
        /// evaluated.
        #[serde(deserialize_with = "f64_or_nan")]
        val_loss: f64,
        /// Mean training loss over the block's inner steps and workers (nats per token); NaN
        /// (null) before any training.
        #[serde(deserialize_with = "f64_or_nan")]
        train_loss: f64,
        /// Bytes each worker has sent (its encoded pseudo-gradients, or its f32 gradients for
        /// data parallel): so far for local runs, this round's payload for pools.
        bytes_sent_per_worker: u64,
        /// blake3 of this round's canonical checkpoint (hex; DiLoCo only, absent otherwise).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        checkpoint_hash: Option<String>,
        /// Member indices aggregated this round (DiLoCo only; absent when empty).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        included: Vec<u32>,
        /// Seconds of compute in the block (inner phases, or data-parallel steps).
        #[serde(deserialize_with = "f64_or_nan")]
        compute_secs: f64,
        /// Seconds of encode, decode, aggregation, outer step and checkpoint (DiLoCo only).
        #[serde(deserialize_with = "f64_or_nan")]
        outer_secs: f64,
        /// Seconds of the peer-to-peer exchange (pools only; 0 elsewhere).
        #[serde(deserialize_with = "f64_or_nan")]
        exchange_secs: f64,
        /// Wall-clock seconds of the round. Local runs: from the start of its inner phase to
        /// its checkpoint. Pools: since the previous round's event.
        #[serde(deserialize_with = "f64_or_nan")]
        wall_secs: f64,
        /// Inner-phase seconds that ran within `wall_secs` divided by `wall_secs` (0..1; 0
        /// before any compute).
        #[serde(deserialize_with = "f64_or_nan")]
        compute_utilisation: f64,
        /// Seconds evaluating this round's checkpoint (pools only; 0 elsewhere).
        #[serde(deserialize_with = "f64_or_nan")]
        eval_secs: f64,
        /// Seconds the duty worker spent (replays, jury votes, challenges, equivocation
        /// reports) beside the round since the previous round's event (pools only; 0 elsewhere).
        #[serde(deserialize_with = "f64_or_nan")]
        duty_secs: f64,
        /// Members left out of the round, each with the reason (pools only; absent
        /// when empty).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        excluded: Vec<(u32, String)>,
    },
    /// A round we committed closed on-chain: final or voided.
    Closed {
        /// The round.
        round: u32,
        /// blake3 of our first commit's checkpoint (hex).
        hash: String,
        /// How it closed: `final: our checkpoint`, `final: our checkpoint over the agreed
        /// included set`, `final at HASH (ours lost the vote)` or `voided`.
        detail: String,
    },
    /// Our commit of a round's checkpoint was processed (or failed).
    Commit {
        /// Why it failed; `None` (null) when it succeeded.
        error: Option<String>,
        /// blake3 of the committed checkpoint (hex).
        hash: String,
        /// "ok" or "failed".
        outcome: String,
        /// The round.
        round: u32,
    },
    /// We recorded the final checkpoint of a round that aggregated our payload without a commit
    /// of ours, after its late-commit window (unpaid; so that the chain does not leak us as a
    /// silent included member when the round is settled).
    Attest {
        /// Why the chain refused it (`outcome` "refused" only; absent otherwise).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// blake3 of the final checkpoint (hex).
        hash: String,
        /// "ok" or "refused".
        outcome: String,
        /// The round.
        round: u32,
    },
    /// A second commit of a split round, over the included set the chain agreed on.
    Recommit {
        /// The agreed included set (member indices, ascending).
        agreed: Vec<u32>,
        /// Why it failed (`outcome` "failed" only; absent otherwise).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// Member indices of the payloads we fetched for it (`outcome` "ok" only; absent
        /// otherwise).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fetched: Option<Vec<u32>>,
        /// blake3 of the checkpoint committed (hex; `outcome` "ok" only, absent otherwise).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hash: Option<String>,
        /// "ok" or "failed".
        outcome: String,
        /// The round.
        round: u32,
    },
    /// A round's pseudo-gradients were all-gathered.
    Exchange {
        /// Bytes of the other members' payloads in the included set.
        bytes_received: u64,
        /// libp2p peers connected once the exchange ended.
        peers_connected: u64,
        /// The round.
        round: u32,
    },
    /// We joined (or rejoined) a pool.
    Joined {
        /// Our account (SS58).
        account: String,
        /// The first round we may contribute to.
        from_round: u32,
        /// Our libp2p listen addresses (multiaddrs).
        listen: Vec<String>,
        /// Our member index.
        member: u32,
        /// Our libp2p peer id.
        peer_id: String,
        /// The pool's id.
        pool: u32,
        /// URL of our Prometheus metrics; `None` (null) without an exporter (`MemberConfig::prometheus`).
        prometheus: Option<String>,
        /// Whether we were a member already (a restart).
        resumed: bool,
        /// Stake committed to the pool, in planck (a decimal string: it does not fit a JSON
        /// number).
        stake: String,
    },
    /// We loaded a checkpoint to train from (catching up, or after a lost vote or a voided
    /// round).
    Synced {
        /// The round whose checkpoint this is (0: θ₀); training goes on from the next one.
        round: u32,
        /// The checkpoint's blake3 (hex).
        hash: String,
        /// Where it came from: "local file" or "fetched from a peer".
        detail: String,
    },
    /// The pool ended: our summary.
    Done {
        /// The checkpoint of `last_final_round` (blake3, hex).
        final_checkpoint: String,
        /// Where that checkpoint's file is kept.
        final_checkpoint_file: PathBuf,
        /// The pool's last final round (0: none, θ₀).
        last_final_round: u32,
        /// The last round this process trained.
        last_round_trained: u32,
        /// The pool's id.
        pool: u32,
        /// The pool's on-chain status (`Completed`, `Cancelled`, …).
        status: String,
    },
    /// We replayed a sampled contribution to a final round (verification).
    Verified {
        /// The contributor's account (SS58).
        account: String,
        /// Relative L2 distance between the claimed and the replayed pseudo-gradient; infinite
        /// (null) for a payload that breaks the rules outright.
        #[serde(deserialize_with = "f64_or_nan")]
        distance: f64,
        /// The part of the contributor's trace a failed check found wrong, when the whole
        /// replay confirmed the contribution dishonest and that part decides alone
        /// ([`dispute_name`]): what our challenge of it names; `None` (null) otherwise (the
        /// challenge disputes the whole phase).
        failed: Option<String>,
        /// Whether `distance` is within `tolerance`.
        honest: bool,
        /// The contributor's member index.
        member: u32,
        /// Wall-clock seconds of the replay.
        #[serde(deserialize_with = "f64_or_nan")]
        replay_secs: f64,
        /// The round.
        round: u32,
        /// Segments of the contributor's trace replayed; 0 for a whole inner phase.
        segments: u32,
        /// The protocol's replay tolerance (relative L2 distance).
        #[serde(deserialize_with = "f64_or_nan")]
        tolerance: f64,
        /// Why the whole inner phase was replayed ("asked", "no_trace", "unserved",
        /// "refused", "mismatch"); `None` (null) when the trace's segments decided.
        whole_replay: Option<String>,
    },
    /// A final round we did not verify.
    VerifySkipped {
        /// Why: its challenge window closed (with the block).
        detail: String,
        /// The round.
        round: u32,
    },
    /// A pass at opening a challenge against a contribution we found dishonest.
    Challenge {
        /// The accused's account (SS58).
        account: String,
        /// What the challenge disputes ([`dispute_name`]): `phase`, `encoding` or `segment i`.
        #[serde(default)]
        dispute: String,
        /// The replay's relative L2 distance; infinite (null) for a payload that breaks the
        /// rules outright.
        #[serde(deserialize_with = "f64_or_nan")]
        distance: f64,
        /// The accused's member index.
        member: u32,
        /// `opened`, `retrying: …`, `failed: …` (the error) or `not opened: …` (why).
        outcome: String,
        /// The disputed round.
        round: u32,
    },
    /// Jury duty: our vote on a challenge, or why we abstained.
    Vote {
        /// Why we did not vote (absent when we voted).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        abstained: Option<String>,
        /// The accused's account (SS58; absent when we abstained).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        accused: Option<String>,
        /// The challenge's id.
        challenge: u32,
        /// What the challenge disputes ([`dispute_name`]; absent when we abstained).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dispute: Option<String>,
        /// Our replay's relative L2 distance; infinite (null) when the kept payload is not
        /// the disputed one (absent when we abstained).
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "some_f64_or_nan"
        )]
        distance: Option<f64>,
        /// Our vote (absent when we abstained).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        guilty: Option<bool>,
        /// The accused's member index (absent when we abstained).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        member: Option<u32>,
        /// Whether the replay behind the vote ran earlier (our verification of the same
        /// payload, or our vote on another challenge of the same part), so none ran for this
        /// vote: `distance` and `whole_replay` are that replay's (absent when false).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        reused: bool,
        /// The disputed round.
        round: u32,
        /// Why our replay ran the whole inner phase (`asked`, `unserved`, …, as in
        /// `verified`); absent when the disputed part of the trace decided, or we abstained.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        whole_replay: Option<String>,
    },
    /// A pass at reporting an equivocation (two payloads one member signed for one round).
    Equivocation {
        /// The accused's account (SS58); `None` (null) while unknown.
        account: Option<String>,
        /// The accused's member index.
        member: u32,
        /// "reported", "already reported", "refused: …", "failed: …", "waiting for the round
        /// to open", …
        outcome: String,
        /// The round.
        round: u32,
    },
    /// The dashboard listens (printed on stdout once).
    Dashboard {
        /// The page's URL.
        url: String,
    },
}

impl TrainerEvent {
    /// This event as one JSON line (without the newline).
    ///
    /// # Errors
    /// Only if a [`TrainerEvent::Done`] file path is not UTF-8.
    pub fn to_line(&self) -> serde_json::Result<String> {
        serde_json::to_string(self)
    }
}

/// How events name what a challenge disputes: `phase` (the whole inner phase), `encoding`
/// (the trace's ends) or `segment i`.
pub fn dispute_name(d: synod_chain::calls::Dispute) -> String {
    use synod_chain::calls::Dispute;
    match d {
        Dispute::Phase => "phase".into(),
        Dispute::Encoding => "encoding".into(),
        Dispute::Segment(i) => format!("segment {i}"),
    }
}

/// An `f64` written as a JSON number, or as `null` when it is not finite: `null` reads as NaN.
/// Read through a [`serde_json::Value`]: with serde_json's `arbitrary_precision` (enabled by a
/// dependency of the workspace) a number buffered by the internally tagged enum arrives as a
/// map that only `Value` understands.
fn f64_or_nan<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(serde_json::Value::deserialize(d)?
        .as_f64()
        .unwrap_or(f64::NAN))
}

/// [`f64_or_nan`] for a field absent from the line when `None`: present, even as `null`, it is
/// `Some`.
fn some_f64_or_nan<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    f64_or_nan(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn keys(e: &TrainerEvent) -> Vec<String> {
        match serde_json::to_value(e).unwrap() {
            Value::Object(m) => m.keys().cloned().collect(),
            v => panic!("not an object: {v}"),
        }
    }

    #[test]
    fn the_tag_comes_first_and_none_is_null_or_absent_per_field() {
        let commit = TrainerEvent::Commit {
            error: None,
            hash: "ab".into(),
            outcome: "ok".into(),
            round: 2,
        };
        assert_eq!(
            commit.to_line().unwrap(),
            r#"{"event":"commit","error":null,"hash":"ab","outcome":"ok","round":2}"#
        );
        let failed = TrainerEvent::Recommit {
            agreed: vec![0, 2],
            error: Some("gone".into()),
            fetched: None,
            hash: None,
            outcome: "failed".into(),
            round: 3,
        };
        assert_eq!(
            failed.to_line().unwrap(),
            r#"{"event":"recommit","agreed":[0,2],"error":"gone","outcome":"failed","round":3}"#
        );
        let abstained = TrainerEvent::Vote {
            abstained: Some("another pool".into()),
            accused: None,
            challenge: 4,
            dispute: None,
            distance: None,
            guilty: None,
            member: None,
            reused: false,
            round: 1,
            whole_replay: None,
        };
        assert_eq!(
            keys(&abstained),
            ["abstained", "challenge", "event", "round"]
        );
        let unknown = TrainerEvent::Equivocation {
            account: None,
            member: 1,
            outcome: "waiting for the round to open".into(),
            round: 5,
        };
        assert_eq!(
            keys(&unknown),
            ["account", "event", "member", "outcome", "round"]
        );
    }

    #[test]
    fn a_round_line_keeps_its_keys_and_reads_back() {
        let r = crate::train::RoundRecord::diloco(0, 0).event();
        let line = r.to_line().unwrap();
        assert!(
            line.starts_with(r#"{"event":"round","method":"diloco","round":0,"#),
            "{line}"
        );
        assert!(
            line.contains(r#""val_loss":null,"train_loss":null,"#),
            "{line}"
        );
        assert!(
            !line.contains("checkpoint_hash") && !line.contains("included"),
            "{line}"
        );
        let back: TrainerEvent = serde_json::from_str(&line).unwrap();
        let TrainerEvent::Round { val_loss: v, .. } = back else {
            panic!("not a round: {line}");
        };
        assert!(v.is_nan());
        let verified = TrainerEvent::Verified {
            account: "5Grw".into(),
            distance: 0.001,
            failed: None,
            honest: true,
            member: 2,
            replay_secs: 1.5,
            round: 3,
            segments: 2,
            tolerance: 0.01,
            whole_replay: None,
        };
        let back: TrainerEvent = serde_json::from_str(&verified.to_line().unwrap()).unwrap();
        assert_eq!(back, verified);
        let voted = TrainerEvent::Vote {
            abstained: None,
            accused: Some("5Grw".into()),
            challenge: 1,
            dispute: Some(dispute_name(synod_chain::calls::Dispute::Segment(4))),
            distance: Some(f64::INFINITY),
            guilty: Some(true),
            member: Some(2),
            reused: true,
            round: 3,
            whole_replay: None,
        };
        let line = voted.to_line().unwrap();
        assert!(line.contains(r#""distance":null,"#), "{line}");
        assert!(line.contains(r#""reused":true,"#), "{line}");
        assert!(line.contains(r#""dispute":"segment 4","#), "{line}");
        let back: TrainerEvent = serde_json::from_str(&line).unwrap();
        let TrainerEvent::Vote {
            distance: Some(d), ..
        } = back
        else {
            panic!("no distance: {line}");
        };
        assert!(d.is_nan());
    }
}
