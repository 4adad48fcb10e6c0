//! The command line: the clap tree of flags (each with its `LEASEHOLD_*` variable), the YAML
//! file that may set the same keys, and their validation into the settings the commands run
//! with. Flags beat the environment, which beats the file, which beats the defaults. Every
//! refusal names the flag, the value and the rule, and the binary exits with code 2 before
//! anything connects.

mod candidacy;
mod error;
mod file;
mod help;
mod http;
mod ops;
mod redis;
mod resolve;
mod secrets;
mod settings;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

pub use error::CliError;
pub use file::{command, parse_from};
pub use help::{CompletionsArgs, completions};
pub use http::HttpArgs;
pub use ops::{LockArgs, RemoveKeysArgs, StepDownArgs};
pub use resolve::invocation;
pub use settings::{
    ContenderSettings, Environment, Invocation, LeaseSource, LockSettings, RedisSettings,
    RemoveKeysSettings, RunSettings, StatusSettings, StepDownSettings,
};

use crate::eviction::EvictionMode;
use crate::k8s::KubernetesMode;
use crate::lease::DEFAULT_KEY_PREFIX;
use crate::telemetry::LogFormat;

/// Parses and validates the command line of the current process, with its environment and
/// any config file.
pub fn from_process() -> Result<Invocation, CliError> {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let cli = parse_from(&argv)?;
    invocation(cli, &Environment::from_process(&argv)?)
}

/// What `--version` says: the crate's version and the commit it was built from (build.rs), as
/// `0.2.0 (4ce6637)`.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("LEASEHOLD_COMMIT"),
    ")"
);

/// leasehold: leader election for the replicas of a Kubernetes Deployment, on a Redis lease.
#[derive(Debug, Parser)]
#[command(name = "leasehold", version = VERSION, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// Where each value that was not typed came from, by long flag: `$VARIABLE`, or the key in
    /// the `--config` file; a refusal of it says so.
    #[arg(skip)]
    pub sources: BTreeMap<String, String>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
#[allow(
    clippy::large_enum_variant,
    reason = "parsed once per process; boxing would only add noise"
)]
pub enum Command {
    /// Contend for the lease; while leading, run the reconcile loop and (after `--`) a singleton
    /// command. Steps down, flips readiness and says why the moment leadership cannot be proven.
    Run(RunArgs),
    /// Show who holds the lease now, its fencing token and the time left, read from Redis.
    Status(StatusArgs),
    /// For the singleton command: exit 0 while the guard file says this term is valid by the
    /// boot clock right now, 1 when it does not (stepped down, expired, no file), 2 on bad
    /// input. Asks no one, so it answers also while leasehold is frozen: `leasehold guard &&
    /// write`.
    Guard(GuardArgs),
    /// Ask the leader to hand over (through Redis), and wait until another replica (or the
    /// one named by --to) leads: exit 0 with who and the new token, 1 when it did not happen
    /// within --wait, 2 on bad input.
    StepDown(ops::StepDownArgs),
    /// Remove the lease's keys from Redis, once its Deployment is uninstalled: refused (exit 1)
    /// while a term may be valid, unless --force; prints each key it removed.
    RemoveKeys(ops::RemoveKeysArgs),
    /// Run a command once while holding the lease, for Jobs and CronJobs: exit with its code,
    /// 75 when the lock was not acquired within --wait, 76 when it was lost while the command ran.
    Lock(ops::LockArgs),
    /// Print a completion script for bash, zsh or fish: `leasehold completions bash >
    /// /etc/bash_completion.d/leasehold`, or `source <(leasehold completions bash)`.
    Completions(CompletionsArgs),
}

/// Where Redis is and how to talk to it. `Debug` shows the URL without its password.
#[derive(Clone, Args)]
#[command(next_help_heading = "Redis")]
pub struct RedisArgs {
    /// Redis URL: `redis://host:port/db`, `rediss://` for TLS, `redis+sentinel://s1:26379,s2:26379,
    /// s3:26379/<master>[/db]` to find the master through Sentinel (each address a host resolves to
    /// is one Sentinel: an odd number, three or more), or `redis+cluster://n1:6379,n2:6379` for a
    /// Redis Cluster (`rediss+…` with TLS). Put no password here on the command line (it would
    /// show in `ps`): use --redis-password-file.
    #[arg(
        long,
        env = "LEASEHOLD_REDIS_URL",
        default_value = "redis://127.0.0.1:6379"
    )]
    pub redis_url: String,
    /// ACL user name.
    #[arg(long, env = "LEASEHOLD_REDIS_USERNAME")]
    pub redis_username: Option<String>,
    /// File holding the ACL user name (instead of --redis-username).
    #[arg(
        long,
        env = "LEASEHOLD_REDIS_USERNAME_FILE",
        conflicts_with = "redis_username"
    )]
    pub redis_username_file: Option<PathBuf>,
    /// File holding the Redis password (a mounted Secret); trailing newlines are ignored.
    #[arg(long, env = "LEASEHOLD_REDIS_PASSWORD_FILE")]
    pub redis_password_file: Option<PathBuf>,
    /// CA bundle (PEM) that signs the Redis server's certificate, for rediss:// [default: the
    /// system's roots].
    #[arg(long, env = "LEASEHOLD_REDIS_CA_FILE")]
    pub redis_ca_file: Option<PathBuf>,
    /// Client certificate (PEM) for mutual TLS; goes with --redis-client-key-file.
    #[arg(long, env = "LEASEHOLD_REDIS_CLIENT_CERT_FILE")]
    pub redis_client_cert_file: Option<PathBuf>,
    /// Client key (PEM) for mutual TLS; goes with --redis-client-cert-file.
    #[arg(long, env = "LEASEHOLD_REDIS_CLIENT_KEY_FILE")]
    pub redis_client_key_file: Option<PathBuf>,
    /// File holding the Sentinels' own password, when they require one (redis+sentinel://).
    #[arg(long, env = "LEASEHOLD_SENTINEL_PASSWORD_FILE")]
    pub sentinel_password_file: Option<PathBuf>,
    /// Accept a redis+sentinel:// URL whose hosts resolve to fewer than three Sentinels, or to an
    /// even number (refused at start otherwise), and say so once in the log. What it gives up:
    /// with one Sentinel its word alone names the master, and one Sentinel's word made two
    /// leaders after a failover it missed; with two, either one down stops every election; a
    /// majority of an even number survives no more failures than a majority of one fewer.
    #[arg(long, env = "LEASEHOLD_ALLOW_UNSAFE_SENTINEL_COUNT", action = ArgAction::SetTrue)]
    pub allow_unsafe_sentinel_count: bool,
    /// Prefix of every Redis key leasehold writes.
    #[arg(long, env = "LEASEHOLD_KEY_PREFIX", default_value = DEFAULT_KEY_PREFIX)]
    pub key_prefix: String,
}

/// What a contender asks of Redis beyond a connection (`run` and `lock`; `status` and
/// `step-down` only read).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Redis")]
pub struct ContenderRedisArgs {
    /// After each acquire and renew, wait until this many replicas acknowledged it (WAIT);
    /// a term or renewal counts only then. 0 = do not wait.
    #[arg(
        long,
        env = "LEASEHOLD_REDIS_WAIT_REPLICAS",
        default_value_t = 0,
        allow_negative_numbers = true
    )]
    pub redis_wait_replicas: u32,
    /// How long WAIT may block; shorter than --retry-period (at most 1h).
    #[arg(long, env = "LEASEHOLD_REDIS_WAIT_TIMEOUT", default_value = "500ms", value_parser = parse_duration, allow_hyphen_values = true)]
    pub redis_wait_timeout: Duration,
    /// When Redis may evict the lease (a maxmemory with an evicting policy, read from INFO
    /// memory at start, then every few lease durations): `warn` says so (log event, /leader,
    /// metric) and takes part; `refuse` also stays out of the election until Redis no longer
    /// evicts, with the reason in /readyz.
    #[arg(
        long,
        env = "LEASEHOLD_REDIS_EVICTION",
        value_enum,
        default_value = "warn"
    )]
    pub redis_eviction: EvictionMode,
}

/// Which lease.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Lease")]
pub struct LeaseArgs {
    /// The lease: `<namespace>/<name>`, or `<name>` in --namespace. By default the name of the
    /// Deployment that owns this pod, found through the Kubernetes API.
    #[arg(
        long,
        visible_alias = "leader-elect-resource-name",
        env = "LEASEHOLD_LEASE_NAME"
    )]
    pub lease_name: Option<String>,
    /// Namespace of the lease and of this pod [default: $POD_NAMESPACE, else `default`].
    #[arg(
        long,
        visible_alias = "leader-elect-resource-namespace",
        env = "LEASEHOLD_NAMESPACE"
    )]
    pub namespace: Option<String>,
    /// YAML file with the same keys as the long flags (`lease-duration: 15s`).
    #[arg(long, env = "LEASEHOLD_CONFIG")]
    pub config: Option<PathBuf>,
}

/// The flags of every contender for the lease, `run`'s and `lock`'s.
#[derive(Debug, Clone, Args)]
pub struct ContenderArgs {
    #[command(flatten)]
    pub redis: RedisArgs,
    #[command(flatten)]
    pub contender_redis: ContenderRedisArgs,
    #[command(flatten)]
    pub lease: LeaseArgs,
    /// This replica's name [default: $POD_NAME, else the hostname].
    #[arg(long, env = "LEASEHOLD_IDENTITY", help_heading = "Lease")]
    pub identity: Option<String>,
    #[command(flatten)]
    pub timing: TimingArgs,
}

/// Timing of the election. client-go's flags (`--leader-elect-lease-duration`, …) are
/// aliases: they mean the same.
#[derive(Debug, Clone, Args)]
#[command(
    next_help_heading = "Timing (rule: lease duration > renew deadline > retry period × 1.2)"
)]
pub struct TimingArgs {
    /// How long one acquire or renew keeps the lease alive (the TTL); at most 1h.
    #[arg(long, visible_alias = "leader-elect-lease-duration", env = "LEASEHOLD_LEASE_DURATION", default_value = "15s", value_parser = parse_duration, allow_hyphen_values = true)]
    pub lease_duration: Duration,
    /// How long the leader retries a failing renewal before it steps down; at most 1h.
    #[arg(long, visible_alias = "leader-elect-renew-deadline", env = "LEASEHOLD_RENEW_DEADLINE", default_value = "10s", value_parser = parse_duration, allow_hyphen_values = true)]
    pub renew_deadline: Duration,
    /// The watchdog's renewal interval, and a follower's fallback retry interval; at most 1h.
    #[arg(long, visible_alias = "leader-elect-retry-period", env = "LEASEHOLD_RETRY_PERIOD", default_value = "2s", value_parser = parse_duration, allow_hyphen_values = true)]
    pub retry_period: Duration,
    /// Share of the lease duration held back for clock drift (plus 2 ms).
    #[arg(
        long,
        env = "LEASEHOLD_DRIFT_FACTOR",
        default_value_t = 0.01,
        allow_negative_numbers = true
    )]
    pub drift_factor: f64,
    /// Lead right away on a Redis that is new or lost its data, instead of waiting one lease
    /// duration. Only for a Redis whose persistence cannot lose an acknowledged write and that
    /// never fails over.
    #[arg(long, env = "LEASEHOLD_NO_DATA_LOSS_COOLDOWN", action = ArgAction::SetTrue)]
    pub no_data_loss_cooldown: bool,
}

/// The Kubernetes side.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Kubernetes")]
pub struct KubeArgs {
    /// Use the Kubernetes API (leader label, Lease mirror, events, Deployment discovery).
    #[arg(long, env = "LEASEHOLD_KUBERNETES", value_enum, default_value_t = KubernetesMode::Auto)]
    pub kubernetes: KubernetesMode,
    /// Label set to `true` on the leader's pod and removed from the others.
    #[arg(
        long,
        env = "LEASEHOLD_LEADER_LABEL",
        default_value = "leasehold.io/leader"
    )]
    pub leader_label: String,
    /// Do not keep the leader label on pods.
    #[arg(long, env = "LEASEHOLD_NO_LEADER_LABEL", action = ArgAction::SetTrue, conflicts_with = "leader_label")]
    pub no_leader_label: bool,
    /// Do not mirror leadership into a coordination.k8s.io/v1 Lease.
    #[arg(long, env = "LEASEHOLD_NO_LEASE_MIRROR", action = ArgAction::SetTrue)]
    pub no_lease_mirror: bool,
    /// Do not record Kubernetes Events on leadership changes.
    #[arg(long, env = "LEASEHOLD_NO_EVENTS", action = ArgAction::SetTrue)]
    pub no_events: bool,
}

/// The singleton command.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Singleton command (after --)")]
pub struct ExecArgs {
    /// Time the command gets between SIGTERM and SIGKILL at step-down; never past the validity
    /// deadline. At most 1h.
    #[arg(long, env = "LEASEHOLD_GRACE_PERIOD", default_value = "10s", value_parser = parse_duration, allow_hyphen_values = true)]
    pub grace_period: Duration,
    /// Start the command again when it exits while leading, instead of stepping down and
    /// exiting with its exit code.
    #[arg(long, env = "LEASEHOLD_RESTART_COMMAND", action = ArgAction::SetTrue)]
    pub restart_command: bool,
}

/// Logging.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Logs")]
pub struct LogArgs {
    /// Log format.
    #[arg(long, env = "LEASEHOLD_LOG_FORMAT", value_enum, default_value_t = LogFormat::Auto)]
    pub log_format: LogFormat,
    /// Log filter in RUST_LOG syntax (`info`, `leasehold=debug,kube=warn`) [default: $RUST_LOG,
    /// else `info`].
    #[arg(long, env = "LEASEHOLD_LOG")]
    pub log: Option<String>,
}

/// `leasehold run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub contender: ContenderArgs,
    #[command(flatten)]
    pub http: HttpArgs,
    #[command(flatten)]
    pub kube: KubeArgs,
    #[command(flatten)]
    pub exec: ExecArgs,
    #[command(flatten)]
    pub candidacy: candidacy::CandidacyArgs,
    #[command(flatten)]
    pub log: LogArgs,
    /// Where to publish the term's token and validity deadline for the command (`leasehold
    /// guard`, or any reader of the format in docs/REFERENCE.md) [default: a file named after the lease
    /// and the pid in $XDG_RUNTIME_DIR, /dev/shm or the temporary directory, when there is a
    /// command]. The command finds it in $LEASEHOLD_GUARD_FILE; removed at exit.
    #[arg(
        long,
        env = "LEASEHOLD_GUARD_FILE",
        help_heading = "Singleton command (after --)"
    )]
    pub guard_file: Option<PathBuf>,
    /// The singleton command and its arguments: started only while this replica leads.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Output format of `leasehold status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Aligned text.
    Text,
    /// One JSON object.
    Json,
}

/// `leasehold status`.
#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub redis: RedisArgs,
    #[command(flatten)]
    pub lease: LeaseArgs,
    /// Output format.
    #[arg(long, short, env = "LEASEHOLD_OUTPUT", value_enum, default_value_t = OutputFormat::Text, help_heading = "Output")]
    pub output: OutputFormat,
    #[command(flatten)]
    pub log: LogArgs,
}

/// `leasehold guard`.
#[derive(Debug, Clone, Args)]
pub struct GuardArgs {
    /// The guard file that `leasehold run` publishes (it sets $LEASEHOLD_GUARD_FILE for its
    /// command).
    #[arg(long, env = "LEASEHOLD_GUARD_FILE")]
    pub guard_file: Option<PathBuf>,
    /// Exit 0 only when the term stays valid at least this much longer: the time the guarded
    /// action takes (at most 1h).
    #[arg(long, env = "LEASEHOLD_GUARD_VALID_FOR", default_value = "0s", value_parser = parse_duration, allow_hyphen_values = true)]
    pub valid_for: Duration,
    /// The fencing token of the caller's term: a file that holds another term is refused
    /// [default: $LEASEHOLD_FENCING_TOKEN, which leasehold run gives its command]. Without
    /// either, any term of the file passes.
    #[arg(long, env = "LEASEHOLD_FENCING_TOKEN")]
    pub token: Option<String>,
    /// The caller's lease (`<namespace>/<name>`): a file of another lease is refused
    /// [default: $LEASEHOLD_LEASE, which leasehold run gives its command].
    #[arg(long, env = "LEASEHOLD_LEASE")]
    pub lease: Option<String>,
    /// Say on stderr what the guard file says (by default only the exit code does).
    #[arg(long, short, env = "LEASEHOLD_GUARD_VERBOSE", action = ArgAction::SetTrue)]
    pub verbose: bool,
}

/// Parses `15s`, `500ms`, `2m`, `1h 30m`: every duration flag's parser. Each of those flags
/// allows a value that starts with `-`, so that `-5s` reaches this parser and its refusal names
/// the flag, instead of clap taking it for a flag of its own.
fn parse_duration(value: &str) -> Result<Duration, String> {
    const EXPECTED: &str = "expected a duration such as 15s, 500ms or 2m";
    let value = value.trim();
    if value.starts_with('-') {
        return Err(format!("a duration cannot be negative; {EXPECTED}"));
    }
    humantime::parse_duration(value).map_err(|e| {
        // The parser's own words for these name a byte offset (`expected number at 0`).
        let what = match e {
            humantime::DurationError::Empty => "empty".to_owned(),
            humantime::DurationError::NumberExpected(_)
            | humantime::DurationError::InvalidCharacter(_) => "not a number and a unit".to_owned(),
            other => other.to_string(),
        };
        format!("{what}; {EXPECTED}")
    })
}

/// Parses a switch's value, as Kubernetes users write one in a variable: `true`/`false`, `1`/`0`,
/// `yes`/`no`, `on`/`off`, in any case (clap's own parser takes only `true` and `false`).
fn parse_switch(value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err("a switch takes true or false (or 1/0, yes/no, on/off)".to_owned()),
    }
}

/// Parses `ip:port`, or `host:port` resolved now, at start, to the first address the host
/// resolves to.
fn parse_socket_addr(value: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = value.parse() {
        return Ok(addr);
    }
    let expected =
        "expected ip:port or host:port, such as 0.0.0.0:8080, [::]:8080 or localhost:8080";
    match value.to_socket_addrs() {
        Ok(mut addrs) => addrs
            .next()
            .ok_or_else(|| format!("cannot resolve it: the host has no address; {expected}")),
        Err(e) => Err(format!("cannot resolve it: {e}; {expected}")),
    }
}

/// Whether one of the flags `names` (long ones without their dashes; one of a single letter is
/// the short flag, as in `-o json` or `-ojson`) was typed on the command line of `argv`, before
/// any `--`.
fn on_command_line<I, T>(argv: I, names: &[&str]) -> bool
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    argv.into_iter()
        .map(Into::into)
        .take_while(|a| a != "--")
        .any(|a| {
            // The name is ASCII: a value that is not UTF-8 after `=` still names its flag.
            let a = a.to_string_lossy();
            match (a.strip_prefix("--"), a.strip_prefix('-')) {
                (Some(long), _) => names.contains(&long.split_once('=').map_or(long, |(f, _)| f)),
                (None, Some(short)) => names.iter().any(|n| n.len() == 1 && short.starts_with(n)),
                (None, None) => false,
            }
        })
}

#[cfg(test)]
mod tests;
