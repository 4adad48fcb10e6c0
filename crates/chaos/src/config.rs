//! The harness's command line: `run` (the harness) and `child` (the leader's work, started by
//! leasehold), and the settings a run derives from it.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::kinds::FaultKind;
use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};
use leasehold::elector::Timing;

/// A chaos harness for leasehold: real redis-server, real leasehold replicas, a nemesis on a
/// seeded schedule, a fenced resource and an independent checker.
#[derive(Debug, Parser)]
#[command(name = "chaos")]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The roles of the binary.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the harness: start everything, inject the schedule's faults, check, report.
    Run(RunArgs),
    /// Check and report again on a run saved with --keep-logs (its raw/ directory).
    Check(CheckArgs),
    /// Run again only the faults of some kinds from a seed's schedule (same indices, same
    /// parameters), to reproduce in a minute what a long run found.
    Replay(RunArgs),
    /// The leader's work (started by leasehold): write to the fenced resource with the token.
    Child(ChildArgs),
}

/// Whether the resource refuses stale tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Fencing {
    /// Refuse tokens lower than the highest accepted: the real setup.
    On,
    /// Accept everything: the negative control, which the checker must report as violating.
    Off,
}

/// `chaos run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Seed of the schedule; the same seed replays the same faults.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Number of faults to inject (in rounds that hold every kind once).
    #[arg(long, default_value_t = 33, conflicts_with = "long")]
    pub faults: usize,
    /// The long run: 56 rounds of the kinds (1,512 faults on one redis-server, gray ones
    /// included; about 80 minutes).
    #[arg(long)]
    pub long: bool,
    /// Number of leasehold replicas.
    #[arg(long, default_value_t = 5)]
    pub replicas: usize,
    /// Lease duration (TTL) of every replica.
    #[arg(long, default_value = "1500ms", value_parser = humantime::parse_duration)]
    pub lease_duration: Duration,
    /// Renew deadline of every replica.
    #[arg(long, default_value = "900ms", value_parser = humantime::parse_duration)]
    pub renew_deadline: Duration,
    /// Retry period of every replica.
    #[arg(long, default_value = "250ms", value_parser = humantime::parse_duration)]
    pub retry_period: Duration,
    /// How often a leader's child writes to the fenced resource.
    #[arg(long, default_value = "20ms", value_parser = humantime::parse_duration)]
    pub write_interval: Duration,
    /// Fencing at the resource; `off` is the negative control: the run passes only if the
    /// checker reports violations.
    #[arg(long, value_enum, default_value_t = Fencing::On)]
    pub resource_fencing: Fencing,
    /// Directory for the report (report.md, timeline.svg, summary.json, schedule.json)
    /// [default: target/chaos/seed-<seed>].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The leasehold binary [default: `leasehold` beside this program's directory, that is
    /// target/<profile>/leasehold].
    #[arg(long)]
    pub leasehold: Option<PathBuf>,
    /// Keep the raw logs (replicas, redis) in <out>/raw even when the run passes.
    #[arg(long)]
    pub keep_logs: bool,
    /// Print the schedule and exit.
    #[arg(long)]
    pub dry_run: bool,
    /// Only the faults of these kinds (comma-separated, e.g. `eviction,vanish`), taken from
    /// the schedule the seed draws for --faults (or --long); required by `replay`.
    #[arg(long, value_delimiter = ',')]
    pub kinds: Vec<String>,
    /// PostgreSQL as a second fenced resource (needs Debian's postgresql package).
    #[arg(long, value_enum, default_value_t = Switch::On)]
    pub postgres: Switch,
    /// The Redis deployment; sentinel and cluster draw the process faults and their own.
    #[arg(long, value_enum, default_value_t = Topology::Single)]
    pub topology: Topology,
    /// The gray faults (one replica partly sick for several lease durations) on a single
    /// server: drawn with the whole faults (`on`), left out (`off`, the short run in the
    /// suite), or alone (`only`).
    #[arg(long, value_enum, default_value_t = Gray::On)]
    pub gray: Gray,
    /// One more option for every `leasehold run` (repeatable), e.g.
    /// `--leasehold-arg=--redis-wait-replicas=1`.
    #[arg(long, allow_hyphen_values = true)]
    pub leasehold_arg: Vec<String>,
}

/// The Redis deployment the replicas elect on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Topology {
    /// One redis-server, a fault proxy per replica.
    Single,
    /// A master, a replica and three Sentinels (the first can be muted).
    Sentinel,
    /// A Redis Cluster of three masters and three replicas.
    Cluster,
}

/// Whether a single-server run draws the gray faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Gray {
    /// With the whole faults.
    On,
    /// Not at all.
    Off,
    /// Only the gray faults.
    Only,
}

/// On or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Switch {
    /// On.
    On,
    /// Off.
    Off,
}

/// `chaos check`.
#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// The run's raw/ directory, or its collected.json.
    #[arg(long)]
    pub raw: PathBuf,
    /// Where the report goes [default: the directory that holds raw/].
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// The variable that tells the leader's command where the fenced resource is.
pub const RESOURCE_ENV: &str = "CHAOS_RESOURCE";
/// The variable that tells the leader's command how often to write.
pub const WRITE_INTERVAL_ENV: &str = "CHAOS_WRITE_INTERVAL";
/// The variable that tells the leader's command where PostgreSQL is (unset: no PostgreSQL).
pub const PG_ENV: &str = "CHAOS_POSTGRES";
/// `off`: the command's PostgreSQL writes skip the fencing advance (the negative control).
pub const PG_FENCING_ENV: &str = "CHAOS_PG_FENCING";

/// `chaos child`. The harness sets its settings through the environment of each leasehold
/// (`CHAOS_RESOURCE`, `CHAOS_WRITE_INTERVAL`, `CHAOS_POSTGRES`, `CHAOS_PG_FENCING`), which
/// hands its environment down to the command.
#[derive(Debug, Clone, Args)]
pub struct ChildArgs {}

/// Everything a run needs, resolved.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The seed.
    pub seed: u64,
    /// How many faults.
    pub faults: usize,
    /// How many replicas.
    pub replicas: usize,
    /// The timing.
    pub timing: Timing,
    /// The children's write interval.
    pub write_interval: Duration,
    /// Whether the resource fences.
    pub fencing: bool,
    /// Where the report goes.
    pub out: PathBuf,
    /// The leasehold binary.
    pub leasehold: PathBuf,
    /// The leader's command: this program in its `child` role.
    pub child_command: Vec<OsString>,
    /// Keep the raw logs.
    pub keep_logs: bool,
    /// Only print the schedule.
    pub dry_run: bool,
    /// Only these kinds, by their names in schedule.json (empty: all); `run` checks them.
    pub kinds: Vec<String>,
    /// Run PostgreSQL as a second fenced resource.
    pub postgres: bool,
    /// The Redis deployment.
    pub topology: Topology,
    /// Whether a single-server run draws the gray faults.
    pub gray: Gray,
    /// More options for every `leasehold run`.
    pub leasehold_args: Vec<String>,
    /// The command line, for the report.
    pub command_line: String,
}

impl RunArgs {
    /// Resolves paths and presets.
    pub fn resolve(self) -> anyhow::Result<RunConfig> {
        if self.replicas < 2 {
            bail!(
                "--replicas {}: at least 2 are needed for a failover",
                self.replicas
            );
        }
        let harness = std::env::current_exe().context("cannot find this program's own path")?;
        let leasehold = match self.leasehold {
            Some(path) => path,
            None => harness
                .parent()
                .and_then(|examples| examples.parent())
                .map(|profile| profile.join("leasehold"))
                .context("cannot guess where the leasehold binary is: pass --leasehold")?,
        };
        if !leasehold.is_file() {
            bail!(
                "no leasehold binary at {}: build it (cargo build --bin leasehold) or pass --leasehold",
                leasehold.display()
            );
        }
        let out = self
            .out
            .unwrap_or_else(|| PathBuf::from(format!("target/chaos/seed-{}", self.seed)));
        // redis-server changes into its directory before it opens its log file there: a
        // relative path would name a file below that directory.
        let out = std::path::absolute(&out)
            .with_context(|| format!("cannot make {} an absolute path", out.display()))?;
        let faults = if self.long {
            LONG_ROUNDS * kinds(self.topology, self.gray).len()
        } else {
            self.faults
        };
        let args: Vec<String> = std::env::args().skip(1).collect();
        Ok(RunConfig {
            seed: self.seed,
            faults,
            replicas: self.replicas,
            timing: Timing {
                lease_duration: self.lease_duration,
                renew_deadline: self.renew_deadline,
                retry_period: self.retry_period,
                ..Timing::default()
            },
            write_interval: self.write_interval,
            fencing: self.resource_fencing == Fencing::On,
            out,
            leasehold,
            child_command: vec![harness.into_os_string(), "child".into()],
            keep_logs: self.keep_logs,
            dry_run: self.dry_run,
            kinds: self.kinds,
            postgres: self.postgres == Switch::On,
            topology: self.topology,
            gray: self.gray,
            leasehold_args: self.leasehold_arg,
            command_line: format!("cargo run --example chaos -- {}", args.join(" ")),
        })
    }
}

/// The rounds of the long run: 56 rounds of the single server's 27 kinds make 1,512 faults.
pub const LONG_ROUNDS: usize = 56;

/// The kinds a run on `topology` draws.
pub fn kinds(topology: Topology, gray: Gray) -> &'static [FaultKind] {
    match (topology, gray) {
        (Topology::Single, Gray::On) => &FaultKind::SINGLE_GRAY,
        (Topology::Single, Gray::Off) => &FaultKind::SINGLE,
        (Topology::Single, Gray::Only) => &FaultKind::GRAY,
        (Topology::Sentinel, _) => &FaultKind::SENTINEL,
        (Topology::Cluster, _) => &FaultKind::CLUSTER,
    }
}
