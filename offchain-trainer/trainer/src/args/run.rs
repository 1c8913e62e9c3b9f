//! Command-line arguments of `synod-trainer run` (a pool member) and `synod-trainer verify`
//! (one replay), and their conversion into [`MemberConfig`] and [`VerifyConfig`].

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use synod_member::config::{Fault, MemberConfig, VerifyConfig};

use super::chain::{positive, ChainArgs, LinkArgs};
use super::recipe::RecipeArgs;

/// `synod-trainer run`: be a member of a pool until it completes.
#[derive(Args, Clone, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub chain: ChainArgs,
    #[command(flatten)]
    pub recipe: RecipeArgs,
    /// Pool id.
    #[arg(long, default_value_t = 0)]
    pub pool: u32,
    /// Stake to commit to the pool, in SYN; bonded first if the account's active stake is short.
    #[arg(long, default_value_t = 100)]
    pub stake: u64,
    /// The trainer's base path: identity key, checkpoints of final rounds, metrics. Restarting
    /// with the same base path resumes as the same member.
    #[arg(long, default_value = "out/trainer")]
    pub base_path: PathBuf,
    /// libp2p listen address.
    #[arg(long, default_value = "/ip4/0.0.0.0/tcp/0")]
    pub listen: String,
    /// Addresses at which other members reach this trainer that it does not listen on itself
    /// (multiaddrs, repeatable: a NAT's public address with its port forward): announced with
    /// the listen address, and the proof that a member connecting to one reached this trainer.
    #[arg(long)]
    pub public_addr: Vec<synod_p2p::Multiaddr>,
    /// Peers to dial at start (multiaddrs), and again while not connected to them; others are
    /// found through Kademlia and the on-chain registrations (peer ids).
    #[arg(long)]
    pub bootnode: Vec<synod_p2p::Multiaddr>,
    /// Seconds after which a round's exchange stops waiting.
    #[arg(long, default_value_t = 300)]
    pub round_deadline: u64,
    /// Longest wait, in seconds, for any single read or write of a payload, checkpoint or
    /// trace-state transfer to make progress, both when fetching and when serving
    /// (`synod_p2p::Limits::stall`).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub transfer_stall: u64,
    /// Slowest transfer kept, in bytes per second after the first `--transfer-stall` seconds,
    /// both ways (`synod_p2p::Limits::min_rate`): a peer that falls behind is cut (a drip), and
    /// the next source is asked. Lower it on a link shared by many transfers at once (a node
    /// serves up to 64 shared streams plus 4 per member).
    #[arg(long, default_value_t = 250_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub min_transfer_rate: u64,
    #[command(flatten)]
    pub link: LinkArgs,
    /// Most upload rate this member's serving may take, in Mbit/s, all transfers together
    /// (`synod_p2p::NetConfig::max_upload`; evidence, the trace states and residuals that
    /// verifiers and jurors fetch, goes first); unset: as fast as the link goes.
    #[arg(long, value_parser = positive)]
    pub max_upload_mbit: Option<f64>,
    /// Hide the inner-step progress bar (drawn on stderr only when it is a terminal).
    #[arg(long)]
    pub quiet: bool,
    /// Fault injection for tests: announce a Byzantine pseudo-gradient instead of the honest
    /// one every round, copy another member's, or withhold ours from most peers. Refused
    /// unless the node's chain type is Development or Local. One of sign-flip, scale-x100,
    /// zeros, gaussian, copy, withhold, equivocate, late, mute (`synod_member::config::Fault`).
    #[arg(long, value_parser = fault, hide = true)]
    pub fault: Option<Fault>,
    /// Share of the other members of each final round's included set whose inner phase this
    /// trainer replays (0..=1; 0 switches verification off). Default: the smallest rate at
    /// which a contribution escapes every honest contributor with probability ≤ 1 %, counting
    /// only as many honest contributors as the round's stakes guarantee against an adversary
    /// with a third of its stake, however many seats it holds
    /// (`synod_diloco::verify::honest_verifiers_at_least`). A contribution outside the replay
    /// tolerance is challenged on-chain with its signed announcement as evidence.
    #[arg(long)]
    pub verify_rate: Option<f64>,
    /// Segments of each sampled contribution's Proof-of-Learning trace this trainer replays
    /// (of the recipe's `--trace-segments` S per inner phase, each ⌈H/S⌉ inner steps), after
    /// checking the trace's start and end against θ_{r−1} and the payload. A contribution
    /// without a trace, whose states its author does not serve, or that fails a check is
    /// replayed whole before any challenge. A phase has ⌈H / ⌈H/S⌉⌉ ≤ min(S, H) segments;
    /// that many or more: every segment (the cost of a whole replay). At least 1.
    #[arg(long, default_value_t = synod_member::config::DEFAULT_VERIFY_SEGMENTS, value_parser = clap::value_parser!(u32).range(1..))]
    pub verify_segments: u32,
    /// Opt out of juries (`Challenges.unregister_juror`). By default every member is a juror:
    /// it opts back in at start (`Challenges.register_juror`, if it had opted out) and votes automatically when drawn: it replays the disputed contribution and
    /// votes guilty iff it is outside the replay tolerance (innocent on its own). Committees
    /// are drawn from the challenged round's contributors that did not opt out and were in
    /// the previous round's contributors; a seated juror that lacks what a replay needs
    /// abstains, and the runtime slashes a seated juror that does not vote. The trainer opts
    /// out when it stops, after its last duties.
    #[arg(long = "no-jury", action = clap::ArgAction::SetFalse)]
    pub juror: bool,
    /// Port of the Prometheus exporter (`/metrics`: `synod_trainer_*` rounds, losses, seconds,
    /// bytes, replays, challenges, votes). A port in use only disables it, with a warning.
    #[arg(long, default_value_t = synod_member::prometheus::DEFAULT_PORT)]
    pub prometheus_port: u16,
    /// Serve Prometheus metrics on all interfaces (default: 127.0.0.1 only).
    #[arg(long)]
    pub prometheus_external: bool,
    /// Do not serve Prometheus metrics.
    #[arg(long)]
    pub no_prometheus: bool,
}

/// `synod-trainer verify`: replays one member's contribution to a final round from what a
/// member of that pool kept (`<base>/checkpoints`, `<base>/evidence`).
#[derive(Args, Clone, Debug)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub chain: ChainArgs,
    #[command(flatten)]
    pub recipe: RecipeArgs,
    /// Pool id.
    #[arg(long, default_value_t = 0)]
    pub pool: u32,
    /// Final round.
    #[arg(long)]
    pub round: u32,
    /// Member index of the contributor to replay.
    #[arg(long)]
    pub member: u32,
    /// Base path of a trainer of the pool (holds θ_{round−1} and the member's payload).
    #[arg(long, default_value = "out/trainer")]
    pub base_path: PathBuf,
    /// Open a challenge (signed with `--suri`) if the contribution is outside the tolerance.
    #[arg(long)]
    pub challenge: bool,
}

/// Parses `--fault`: one of [`Fault::ALL`] by its [`Fault::name`].
fn fault(s: &str) -> Result<Fault, String> {
    Fault::ALL
        .into_iter()
        .find(|f| f.name() == s)
        .ok_or_else(|| {
            let names: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
            format!("{s:?} is not a fault: one of {}", names.join(", "))
        })
}

impl RunArgs {
    /// The member's configuration.
    ///
    /// # Errors
    /// Recipe flags that make no recipe; a `--listen` that is not a multiaddr.
    pub fn config(&self) -> Result<MemberConfig> {
        let ip = if self.prometheus_external {
            Ipv4Addr::UNSPECIFIED
        } else {
            Ipv4Addr::LOCALHOST
        };
        Ok(MemberConfig {
            chain: self.chain.config(),
            recipe: self.recipe.config()?,
            pool: self.pool,
            stake: self.stake,
            base_path: self.base_path.clone(),
            listen: self.listen.parse().context("--listen")?,
            public_addr: self.public_addr.clone(),
            bootnode: self.bootnode.clone(),
            round_deadline: Duration::from_secs(self.round_deadline),
            transfer_stall: Duration::from_secs(self.transfer_stall),
            min_transfer_rate: self.min_transfer_rate,
            link_bytes_per_sec: self.link.bytes_per_sec(),
            max_upload_mbit: self.max_upload_mbit,
            quiet: self.quiet,
            fault: self.fault,
            verify_rate: self.verify_rate,
            verify_segments: self.verify_segments,
            juror: self.juror,
            prometheus: (!self.no_prometheus).then(|| SocketAddr::from((ip, self.prometheus_port))),
        })
    }
}

impl VerifyArgs {
    /// The replay's configuration.
    ///
    /// # Errors
    /// Recipe flags that make no recipe.
    pub fn config(&self) -> Result<VerifyConfig> {
        Ok(VerifyConfig {
            chain: self.chain.config(),
            recipe: self.recipe.config()?,
            pool: self.pool,
            round: self.round,
            member: self.member,
            base_path: self.base_path.clone(),
            challenge: self.challenge,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    #[test]
    fn every_fault_is_named_by_its_flag_and_an_unknown_one_is_refused() {
        for f in Fault::ALL {
            let a = Cli::try_parse_from(["t", "--fault", f.name()]).unwrap().run;
            assert_eq!(a.config().unwrap().fault, Some(f));
        }
        assert!(Cli::try_parse_from(["t", "--fault", "scale-x1000"]).is_err());
        let a = Cli::try_parse_from(["t", "--no-prometheus", "--no-jury"])
            .unwrap()
            .run;
        let c = a.config().unwrap();
        assert_eq!((c.fault, c.prometheus, c.juror), (None, None, false));
        let c = Cli::parse_from(["t", "--prometheus-external"])
            .run
            .config()
            .unwrap();
        assert_eq!(
            c.prometheus,
            Some(SocketAddr::from((
                Ipv4Addr::UNSPECIFIED,
                synod_member::prometheus::DEFAULT_PORT
            )))
        );
        assert!(Cli::parse_from(["t", "--listen", "nowhere"])
            .run
            .config()
            .is_err());
    }
}
