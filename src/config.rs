//! Flags, environment and config file, and their validation into typed settings.
//!
//! Every flag has an environment variable `LEASEHOLD_*`; an optional YAML file (`--config`) may
//! set the same keys (the long flag names). Flags beat the environment, which beats the file,
//! which beats the defaults. Every refusal names the flag, the value and the rule, and the
//! binary exits with code 2 before anything connects.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgAction, Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

use crate::elector::{EvictionMode, Timing, TimingError};
use crate::lease::{
    DEFAULT_KEY_PREFIX, LeaseName, LeaseOptions, OwnerId, Secret, TlsFiles, WaitReplicas,
    redact_url,
};

/// leasehold: leader election for the replicas of a Kubernetes Deployment, on a Redis lease.
#[derive(Debug, Parser)]
#[command(name = "leasehold", version, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
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
    StepDown(crate::ops_cli::StepDownArgs),
    /// Run a command once while holding the lease, for Jobs and CronJobs: exit with its code,
    /// 75 when the lock was not acquired within --wait, 76 when it was lost while the command ran.
    Lock(crate::ops_cli::LockArgs),
}

/// Where Redis is and how to talk to it.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Redis")]
pub struct RedisArgs {
    /// Redis URL: `redis://host:port/db`, `rediss://` for TLS, `redis+sentinel://s1:26379,s2:26379/
    /// <master>[/db]` to find the master through Sentinel, or `redis+cluster://n1:6379,n2:6379` for a
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
    /// After each acquire and renew, wait until this many replicas acknowledged it (WAIT);
    /// a term or renewal counts only then. 0 = do not wait.
    #[arg(long, env = "LEASEHOLD_REDIS_WAIT_REPLICAS", default_value_t = 0)]
    pub redis_wait_replicas: u32,
    /// How long WAIT may block; shorter than --retry-period.
    #[arg(long, env = "LEASEHOLD_REDIS_WAIT_TIMEOUT", default_value = "500ms", value_parser = parse_duration)]
    pub redis_wait_timeout: Duration,
    /// Prefix of every Redis key leasehold writes.
    #[arg(long, env = "LEASEHOLD_KEY_PREFIX", default_value = DEFAULT_KEY_PREFIX)]
    pub key_prefix: String,
    /// When Redis may evict the lease (a maxmemory with an evicting policy, read from INFO
    /// memory at start and once per lease duration): `warn` says so (log event, /leader,
    /// metric) and takes part; `refuse` also stays out of the election until Redis no longer
    /// evicts, with the reason in /readyz.
    #[arg(long, env = "LEASEHOLD_REDIS_EVICTION", value_enum, default_value_t = RedisEviction::Warn)]
    pub redis_eviction: RedisEviction,
}

/// What to do when Redis may evict the lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RedisEviction {
    /// Say so, and take part.
    Warn,
    /// Say so, and stay out of the election.
    Refuse,
}

impl From<RedisEviction> for EvictionMode {
    fn from(value: RedisEviction) -> Self {
        match value {
            RedisEviction::Warn => EvictionMode::Warn,
            RedisEviction::Refuse => EvictionMode::Refuse,
        }
    }
}

/// Which lease.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Lease")]
pub struct LeaseArgs {
    /// The lease: `<namespace>/<name>`, or `<name>` in --namespace. By default the name of the
    /// Deployment that owns this pod, found through the Kubernetes API.
    #[arg(long, env = "LEASEHOLD_LEASE_NAME")]
    pub lease_name: Option<String>,
    /// Namespace of the lease and of this pod [default: $POD_NAMESPACE, else `default`].
    #[arg(long, env = "LEASEHOLD_NAMESPACE")]
    pub namespace: Option<String>,
    /// YAML file with the same keys as the long flags (`lease-duration: 15s`).
    #[arg(long, env = "LEASEHOLD_CONFIG")]
    pub config: Option<PathBuf>,
}

/// Timing of the election.
#[derive(Debug, Clone, Args)]
#[command(
    next_help_heading = "Timing (rule: lease duration > renew deadline > retry period × 1.2)"
)]
pub struct TimingArgs {
    /// How long one acquire or renew keeps the lease alive (the TTL).
    #[arg(long, env = "LEASEHOLD_LEASE_DURATION", default_value = "15s", value_parser = parse_duration)]
    pub lease_duration: Duration,
    /// How long the leader retries a failing renewal before it steps down.
    #[arg(long, env = "LEASEHOLD_RENEW_DEADLINE", default_value = "10s", value_parser = parse_duration)]
    pub renew_deadline: Duration,
    /// The watchdog's renewal interval, and a follower's fallback retry interval.
    #[arg(long, env = "LEASEHOLD_RETRY_PERIOD", default_value = "2s", value_parser = parse_duration)]
    pub retry_period: Duration,
    /// Share of the lease duration held back for clock drift (plus 2 ms).
    #[arg(long, env = "LEASEHOLD_DRIFT_FACTOR", default_value_t = 0.01)]
    pub drift_factor: f64,
    /// Lead right away on a Redis that is new or lost its data, instead of waiting one lease
    /// duration. Only for a Redis whose persistence cannot lose an acknowledged write and that
    /// never fails over.
    #[arg(long, env = "LEASEHOLD_NO_DATA_LOSS_COOLDOWN", action = ArgAction::SetTrue)]
    pub no_data_loss_cooldown: bool,
}

/// What readiness means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReadinessMode {
    /// `/readyz` is 200 only on the leader: a Service routes to it alone.
    Leader,
    /// `/readyz` is 200 on every replica that reaches Redis and takes part in the election.
    Member,
}

/// The HTTP endpoints.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "HTTP (/healthz /readyz /leader /metrics)")]
pub struct HttpArgs {
    /// Address of the HTTP endpoints.
    #[arg(long, env = "LEASEHOLD_HTTP_ADDR", default_value = "0.0.0.0:8080")]
    pub http_addr: SocketAddr,
    /// What `/readyz` reports. `member` is the default because with `leader` only one pod of a
    /// Deployment is ever ready, which stalls rolling updates (route to the leader with a
    /// Service that selects the leader label instead).
    #[arg(long, env = "LEASEHOLD_READINESS", value_enum, default_value_t = ReadinessMode::Member)]
    pub readiness: ReadinessMode,
}

/// Whether to use the Kubernetes API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KubernetesMode {
    /// On when an in-cluster config or a kubeconfig is found, else off with one log line.
    Auto,
    /// On; fail when no cluster configuration is found.
    On,
    /// Off.
    Off,
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
    #[arg(long, env = "LEASEHOLD_NO_LEADER_LABEL", action = ArgAction::SetTrue)]
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
    /// deadline.
    #[arg(long, env = "LEASEHOLD_GRACE_PERIOD", default_value = "10s", value_parser = parse_duration)]
    pub grace_period: Duration,
    /// Start the command again when it exits while leading, instead of stepping down and
    /// exiting with its exit code.
    #[arg(long, env = "LEASEHOLD_RESTART_COMMAND", action = ArgAction::SetTrue)]
    pub restart_command: bool,
}

/// Log output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// JSON when stderr is not a terminal, text when it is.
    Auto,
    /// One JSON object per line.
    Json,
    /// Human-readable text.
    Text,
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
    pub redis: RedisArgs,
    #[command(flatten)]
    pub lease: LeaseArgs,
    /// This replica's name [default: $POD_NAME, else the hostname].
    #[arg(long, env = "LEASEHOLD_IDENTITY", help_heading = "Lease")]
    pub identity: Option<String>,
    #[command(flatten)]
    pub timing: TimingArgs,
    #[command(flatten)]
    pub http: HttpArgs,
    #[command(flatten)]
    pub kube: KubeArgs,
    #[command(flatten)]
    pub exec: ExecArgs,
    #[command(flatten)]
    pub log: LogArgs,
    /// Where to publish the term's token and validity deadline for the command (`leasehold
    /// guard`, or any reader of the format in the README) [default: a file named after the lease
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
    #[arg(long, short, env = "LEASEHOLD_OUTPUT", value_enum, default_value_t = OutputFormat::Text)]
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
    /// action takes.
    #[arg(long, env = "LEASEHOLD_GUARD_VALID_FOR", default_value = "0s", value_parser = parse_duration)]
    pub valid_for: Duration,
    /// Say on stderr what the guard file says (by default only the exit code does).
    #[arg(long, short, env = "LEASEHOLD_GUARD_VERBOSE", action = ArgAction::SetTrue)]
    pub verbose: bool,
}

impl GuardArgs {
    /// What to check.
    pub fn check(&self) -> crate::guard::check::GuardCheck {
        crate::guard::check::GuardCheck {
            path: self.guard_file.clone(),
            valid_for: self.valid_for,
            verbose: self.verbose,
        }
    }
}

/// Parses `15s`, `500ms`, `2m`, `1h 30m`.
pub(crate) fn parse_duration(value: &str) -> Result<Duration, String> {
    humantime::parse_duration(value.trim())
        .map_err(|e| format!("{e}; expected a duration such as 15s, 500ms or 2m"))
}

/// A refused configuration. Each message names the flag (or config key), the value and the
/// rule.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Clap refused the command line (its message names the flag); printed as clap prints it.
    #[error("{0}")]
    Cli(#[from] clap::Error),
    /// The config file could not be read.
    #[error("--config {path}: cannot read it: {source}")]
    ConfigUnreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The config file is not a YAML mapping of flag names to values.
    #[error("--config {path}: {reason}")]
    ConfigInvalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A key of the config file is no flag of this subcommand.
    #[error(
        "--config {path}: unknown key `{key}`; the keys are the long flag names of `leasehold {subcommand}`: {known}"
    )]
    ConfigUnknownKey {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
        /// The subcommand.
        subcommand: String,
        /// The accepted keys.
        known: String,
    },
    /// The durations break the timing rule.
    #[error(transparent)]
    Timing(#[from] TimingError),
    /// The Redis URL.
    #[error("--redis-url `{url}`: {rule}")]
    RedisUrl {
        /// The URL with its password redacted.
        url: String,
        /// The rule.
        rule: String,
    },
    /// A file given by a flag (password, certificate, key).
    #[error("--{flag} {path}: {rule}")]
    File {
        /// The flag.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        rule: String,
    },
    /// A duration that must be shorter than another.
    #[error("--{flag} {value:?} must be shorter than {other} {other_value:?}")]
    Order {
        /// The flag.
        flag: &'static str,
        /// Its value.
        value: Duration,
        /// The other flag.
        other: &'static str,
        /// Its value.
        other_value: Duration,
    },
    /// A name that cannot be used.
    #[error("{} `{value}`: {rule}", flag_words(flag))]
    Name {
        /// The flag.
        flag: &'static str,
        /// The value.
        value: String,
        /// The rule.
        rule: String,
    },
    /// A duration outside its range.
    #[error("--{flag} {value:?}: {rule}")]
    Duration {
        /// The flag.
        flag: &'static str,
        /// The value.
        value: Duration,
        /// The rule.
        rule: &'static str,
    },
    /// The singleton command's arguments.
    #[error("{flag}: {rule}")]
    Exec {
        /// The flag.
        flag: &'static str,
        /// The rule.
        rule: &'static str,
    },
}

/// `--flag` for a flag name, or the words as they are (`-- CMD`).
fn flag_words(flag: &str) -> String {
    if flag.starts_with('-') {
        flag.to_owned()
    } else {
        format!("--{flag}")
    }
}

impl ConfigError {
    /// The exit code for this error: 0 for `--help`/`--version`, 2 for everything else.
    pub fn exit_code(&self) -> i32 {
        match self {
            ConfigError::Cli(e) => e.exit_code(),
            _ => 2,
        }
    }
}

/// Parses the command line of the current process (with the environment and any config file).
pub fn parse() -> Result<Cli, ConfigError> {
    parse_from(std::env::args_os())
}

/// Parses `argv` (with the environment and any config file given by `--config` or
/// `LEASEHOLD_CONFIG`): flags beat the environment, which beats the file, which beats the
/// defaults.
pub fn parse_from<I, T>(argv: I) -> Result<Cli, ConfigError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let argv: Vec<OsString> = argv.into_iter().map(Into::into).collect();
    let command = Cli::command();
    let matches = command.clone().try_get_matches_from(&argv)?;
    let Some((subcommand, sub_matches)) = matches.subcommand() else {
        return Ok(Cli::from_arg_matches(&matches)?);
    };
    // Not every subcommand has --config (`guard` does not).
    let config = sub_matches.try_get_one::<PathBuf>("config").ok().flatten();
    let Some(path) = config.cloned() else {
        return Ok(Cli::from_arg_matches(&matches)?);
    };
    let file = read_config_file(&path)?;
    let sub_command = command
        .find_subcommand(subcommand)
        .expect("clap matched this subcommand");
    let mut extra: Vec<OsString> = Vec::new();
    for (key, value) in file {
        let arg = sub_command
            .get_arguments()
            .find(|a| a.get_long() == Some(key.as_str()) && key != "config")
            .ok_or_else(|| ConfigError::ConfigUnknownKey {
                path: path.clone(),
                known: sub_command
                    .get_arguments()
                    .filter_map(|a| a.get_long())
                    .filter(|l| *l != "config" && *l != "help")
                    .collect::<Vec<_>>()
                    .join(", "),
                key: key.clone(),
                subcommand: subcommand.to_owned(),
            })?;
        let given = matches!(
            sub_matches.value_source(arg.get_id().as_str()),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        );
        if given {
            continue;
        }
        let is_switch = matches!(arg.get_action(), ArgAction::SetTrue);
        match (is_switch, value) {
            (true, FileValue::Bool(true)) => extra.push(format!("--{key}").into()),
            (true, FileValue::Bool(false)) => {}
            (true, other) => {
                return Err(ConfigError::ConfigInvalid {
                    path,
                    reason: format!("`{key}` takes true or false, not {other}"),
                });
            }
            (false, FileValue::Bool(b)) => extra.push(format!("--{key}={b}").into()),
            (false, FileValue::Text(text)) => extra.push(format!("--{key}={text}").into()),
        }
    }
    // The file's values go right after the subcommand, before any `--`.
    let position = argv
        .iter()
        .position(|a| a.to_str() == Some(subcommand))
        .map_or(argv.len(), |i| i + 1);
    let mut merged = argv[..position].to_vec();
    merged.extend(extra);
    merged.extend_from_slice(&argv[position..]);
    let matches = command.try_get_matches_from(merged)?;
    Ok(Cli::from_arg_matches(&matches)?)
}

/// A scalar value of the config file.
#[derive(Debug)]
enum FileValue {
    Bool(bool),
    Text(String),
}

impl std::fmt::Display for FileValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileValue::Bool(b) => write!(f, "{b}"),
            FileValue::Text(t) => write!(f, "`{t}`"),
        }
    }
}

fn read_config_file(path: &Path) -> Result<BTreeMap<String, FileValue>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::ConfigUnreadable {
        path: path.to_owned(),
        source,
    })?;
    let invalid = |reason: String| ConfigError::ConfigInvalid {
        path: path.to_owned(),
        reason,
    };
    let doc: serde_yaml::Value =
        serde_yaml::from_str(&text).map_err(|e| invalid(format!("not valid YAML: {e}")))?;
    let mapping = match doc {
        serde_yaml::Value::Mapping(m) => m,
        serde_yaml::Value::Null => return Ok(BTreeMap::new()),
        _ => return Err(invalid("must be a mapping of flag names to values".into())),
    };
    let mut out = BTreeMap::new();
    for (key, value) in mapping {
        let key = key
            .as_str()
            .ok_or_else(|| invalid(format!("key {key:?} is not a string")))?
            .to_owned();
        let value = match value {
            serde_yaml::Value::Bool(b) => FileValue::Bool(b),
            serde_yaml::Value::String(s) => FileValue::Text(s),
            serde_yaml::Value::Number(n) => FileValue::Text(n.to_string()),
            other => {
                return Err(invalid(format!(
                    "`{key}` must be a string, number or boolean, not {other:?}"
                )));
            }
        };
        out.insert(key, value);
    }
    Ok(out)
}

/// Where the lease name comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseSource {
    /// Given by flag.
    Named(LeaseName),
    /// The Deployment that owns pod `pod` in `namespace`, found through the Kubernetes API.
    OwningDeployment {
        /// The pod's namespace.
        namespace: String,
        /// The pod's name.
        pod: String,
    },
    /// Neither a name nor a pod to start from.
    Unknown,
}

/// Validated Redis settings.
#[derive(Debug, Clone)]
pub struct RedisSettings {
    /// The URL (may carry a password when it came from the environment or a file).
    pub url: String,
    /// Options of the lease.
    pub options: LeaseOptions,
    /// What to do when Redis may evict the lease.
    pub eviction: EvictionMode,
}

impl RedisSettings {
    /// The lease `name` for `owner` on this Redis (nothing connects yet).
    pub fn lease(
        &self,
        name: LeaseName,
        owner: OwnerId,
    ) -> Result<crate::lease::RedisLease, crate::lease::LeaseError> {
        crate::lease::RedisLease::new(&self.url, name, owner, self.options.clone())
    }

    /// The URL with its password redacted, for logs.
    pub fn redacted_url(&self) -> String {
        redact_url(&self.url)
    }
}

/// The process environment that settings fall back on; a struct so tests can supply their own.
#[derive(Debug, Clone, Default)]
pub struct Environment {
    /// `$POD_NAME` (downward API).
    pub pod_name: Option<String>,
    /// `$POD_NAMESPACE` (downward API).
    pub pod_namespace: Option<String>,
    /// `$RUST_LOG`.
    pub rust_log: Option<String>,
    /// The hostname.
    pub hostname: Option<String>,
}

impl Environment {
    /// Reads the real environment.
    pub fn from_process() -> Self {
        let var = |name| std::env::var(name).ok().filter(|v: &String| !v.is_empty());
        Self {
            pod_name: var("POD_NAME"),
            pod_namespace: var("POD_NAMESPACE"),
            rust_log: var("RUST_LOG"),
            hostname: nix::unistd::gethostname()
                .ok()
                .and_then(|h| h.into_string().ok())
                .filter(|h| !h.is_empty()),
        }
    }
}

/// Validated settings of `leasehold run`.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// Redis.
    pub redis: RedisSettings,
    /// The lease.
    pub lease: LeaseSource,
    /// The namespace of this pod and of the lease mirror, events and labels.
    pub namespace: String,
    /// This replica's identity (the pod name in Kubernetes).
    pub identity: String,
    /// This pod's name (`$POD_NAME`), when running in a pod.
    pub pod: Option<String>,
    /// The election's timing.
    pub timing: Timing,
    /// HTTP address.
    pub http_addr: SocketAddr,
    /// Readiness mode.
    pub readiness: ReadinessMode,
    /// Kubernetes mode and parts.
    pub kube: KubeSettings,
    /// The singleton command, if any.
    pub exec: Option<ExecSettings>,
    /// The guard file given by `--guard-file` (else a default one when there is a command).
    pub guard_file: Option<PathBuf>,
}

/// Which Kubernetes parts run.
#[derive(Debug, Clone)]
pub struct KubeSettings {
    /// Auto, on or off.
    pub mode: KubernetesMode,
    /// The leader label key, or `None` when off.
    pub leader_label: Option<String>,
    /// Mirror into a coordination.k8s.io Lease.
    pub lease_mirror: bool,
    /// Record Events.
    pub events: bool,
}

/// The singleton command.
#[derive(Debug, Clone)]
pub struct ExecSettings {
    /// Program and arguments.
    pub command: Vec<String>,
    /// SIGTERM → SIGKILL grace.
    pub grace_period: Duration,
    /// Restart instead of exiting when it exits while leading.
    pub restart: bool,
}

/// Validated settings of `leasehold status`.
#[derive(Debug, Clone)]
pub struct StatusSettings {
    /// Redis.
    pub redis: RedisSettings,
    /// The lease.
    pub lease: LeaseSource,
    /// Output format.
    pub output: OutputFormat,
}

/// The log filter: `--log`, else `$RUST_LOG`, else `info`.
pub fn log_filter(args: &LogArgs, env: &Environment) -> String {
    args.log
        .clone()
        .or_else(|| env.rust_log.clone())
        .unwrap_or_else(|| "info".to_owned())
}

impl RedisArgs {
    fn resolve(&self, url_from_command_line: bool) -> Result<RedisSettings, ConfigError> {
        let url = self.redis_url.trim().to_owned();
        let bad = |rule: &str| ConfigError::RedisUrl {
            url: redact_url(&url),
            rule: rule.to_owned(),
        };
        if redact_url(&url) != url && url_from_command_line {
            return Err(bad(
                "a password on the command line shows in `ps`; put it in a file and pass --redis-password-file (or set LEASEHOLD_REDIS_URL)",
            ));
        }
        let password = self
            .redis_password_file
            .as_deref()
            .map(|p| read_secret("redis-password-file", p))
            .transpose()?;
        let username = match (&self.redis_username, &self.redis_username_file) {
            (Some(name), _) if name.trim().is_empty() => {
                return Err(ConfigError::Name {
                    flag: "redis-username",
                    value: String::new(),
                    rule: "must not be empty when given".into(),
                });
            }
            (Some(name), _) => Some(name.trim().to_owned()),
            (None, Some(path)) => Some(
                read_secret("redis-username-file", path)?
                    .expose()
                    .to_owned(),
            ),
            (None, None) => None,
        };
        let tls = self.tls_files()?;
        let sentinel_password = self
            .sentinel_password_file
            .as_deref()
            .map(|p| read_secret("sentinel-password-file", p))
            .transpose()?;
        if sentinel_password.is_some() && !url.contains("+sentinel://") {
            return Err(ConfigError::Exec {
                flag: "--sentinel-password-file",
                rule: "is only for redis+sentinel:// URLs",
            });
        }
        if self.redis_wait_replicas > 0 && self.redis_wait_timeout.is_zero() {
            return Err(ConfigError::Duration {
                flag: "redis-wait-timeout",
                value: self.redis_wait_timeout,
                rule: "must be greater than zero",
            });
        }
        let wait_replicas = (self.redis_wait_replicas > 0).then_some(WaitReplicas {
            replicas: self.redis_wait_replicas,
            timeout: self.redis_wait_timeout,
        });
        let options = LeaseOptions {
            key_prefix: self.key_prefix.clone(),
            username,
            password,
            tls,
            sentinel_password,
            wait_replicas,
            ..LeaseOptions::default()
        };
        // Let the target parser judge the rest of the URL now, before anything connects.
        crate::lease::check_target(&url, &options).map_err(|e| match e {
            crate::lease::LeaseError::BadUrl { reason, .. } => bad(&reason),
            other => bad(&other.to_string()),
        })?;
        Ok(RedisSettings {
            url,
            options,
            eviction: self.redis_eviction.into(),
        })
    }

    fn tls_files(&self) -> Result<Option<TlsFiles>, ConfigError> {
        let (ca, cert, key) = (
            &self.redis_ca_file,
            &self.redis_client_cert_file,
            &self.redis_client_key_file,
        );
        if ca.is_none() && cert.is_none() && key.is_none() {
            return Ok(None);
        }
        if cert.is_some() != key.is_some() {
            return Err(ConfigError::Exec {
                flag: "--redis-client-cert-file",
                rule: "mutual TLS needs both --redis-client-cert-file and --redis-client-key-file",
            });
        }
        Ok(Some(TlsFiles {
            ca_pem: ca
                .as_deref()
                .map(|p| read_pem("redis-ca-file", p))
                .transpose()?,
            client_cert_pem: cert
                .as_deref()
                .map(|p| read_pem("redis-client-cert-file", p))
                .transpose()?,
            client_key_pem: key
                .as_deref()
                .map(|p| read_secret("redis-client-key-file", p))
                .transpose()?,
        }))
    }
}

/// Reads a file a flag names; refuses an unreadable or empty one.
fn read_file(flag: &'static str, path: &Path) -> Result<Vec<u8>, ConfigError> {
    let bytes = std::fs::read(path).map_err(|e| ConfigError::File {
        flag,
        path: path.to_owned(),
        rule: format!("cannot read it: {e}"),
    })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ConfigError::File {
            flag,
            path: path.to_owned(),
            rule: "the file is empty".into(),
        });
    }
    Ok(bytes)
}

/// A secret from a file, trailing newlines removed.
fn read_secret(flag: &'static str, path: &Path) -> Result<Secret, ConfigError> {
    let bytes = read_file(flag, path)?;
    let text = String::from_utf8(bytes).map_err(|_| ConfigError::File {
        flag,
        path: path.to_owned(),
        rule: "is not UTF-8 text".into(),
    })?;
    Ok(Secret::new(text.trim_end_matches(['\n', '\r'])))
}

/// A PEM file: must hold at least one `-----BEGIN` block.
fn read_pem(flag: &'static str, path: &Path) -> Result<Vec<u8>, ConfigError> {
    let bytes = read_file(flag, path)?;
    if !bytes.windows(10).any(|w| w == b"-----BEGIN") {
        return Err(ConfigError::File {
            flag,
            path: path.to_owned(),
            rule: "is not PEM (no -----BEGIN block)".into(),
        });
    }
    Ok(bytes)
}

impl LeaseArgs {
    fn namespace(&self, env: &Environment) -> String {
        self.namespace
            .clone()
            .or_else(|| env.pod_namespace.clone())
            .unwrap_or_else(|| "default".to_owned())
    }

    fn resolve(&self, env: &Environment) -> Result<LeaseSource, ConfigError> {
        let namespace = self.namespace(env);
        check_dns_label("namespace", &namespace)?;
        match &self.lease_name {
            Some(name) => {
                let full = if name.contains('/') {
                    name.clone()
                } else {
                    format!("{namespace}/{name}")
                };
                LeaseName::new(full)
                    .map(LeaseSource::Named)
                    .map_err(|e| ConfigError::Name {
                        flag: "lease-name",
                        value: name.clone(),
                        rule: e.to_string(),
                    })
            }
            None => Ok(match &env.pod_name {
                Some(pod) => LeaseSource::OwningDeployment {
                    namespace,
                    pod: pod.clone(),
                },
                None => LeaseSource::Unknown,
            }),
        }
    }
}

/// A Kubernetes namespace is a DNS label: 1–63 of `a-z0-9-`, alphanumeric at both ends.
fn check_dns_label(flag: &'static str, value: &str) -> Result<(), ConfigError> {
    let ok = crate::k8s::names::is_dns_label(value);
    if ok {
        Ok(())
    } else {
        Err(ConfigError::Name {
            flag,
            value: value.to_owned(),
            rule: "must be a DNS label: 1 to 63 characters of a-z, 0-9 and '-', starting and ending with a letter or digit".into(),
        })
    }
}

impl RunArgs {
    /// Validates the run settings. `url_from_command_line` says whether --redis-url was typed
    /// on the command line (where a password would show in `ps`).
    pub fn resolve(
        &self,
        env: &Environment,
        url_from_command_line: bool,
    ) -> Result<RunSettings, ConfigError> {
        let timing = Timing {
            lease_duration: self.timing.lease_duration,
            renew_deadline: self.timing.renew_deadline,
            retry_period: self.timing.retry_period,
            drift_factor: self.timing.drift_factor,
        };
        timing.validate()?;
        if self.redis.redis_wait_replicas > 0
            && self.redis.redis_wait_timeout >= timing.retry_period
        {
            return Err(ConfigError::Order {
                flag: "redis-wait-timeout",
                value: self.redis.redis_wait_timeout,
                other: "--retry-period",
                other_value: timing.retry_period,
            });
        }
        let mut redis = self.redis.resolve(url_from_command_line)?;
        redis.options.cooldown_on_data_loss = !self.timing.no_data_loss_cooldown;
        let lease = self.lease.resolve(env)?;
        let identity = self
            .identity
            .clone()
            .or_else(|| env.pod_name.clone())
            .or_else(|| env.hostname.clone())
            .ok_or(ConfigError::Name {
                flag: "identity",
                value: String::new(),
                rule: "no identity: pass --identity, or set POD_NAME (downward API)".into(),
            })?;
        OwnerId::check_identity(&identity).map_err(|e| ConfigError::Name {
            flag: "identity",
            value: identity.clone(),
            rule: e.to_string(),
        })?;
        let leader_label = if self.kube.no_leader_label {
            None
        } else {
            check_label_key(&self.kube.leader_label)?;
            Some(self.kube.leader_label.clone())
        };
        let exec = if self.command.is_empty() {
            if self.exec.restart_command {
                return Err(ConfigError::Exec {
                    flag: "--restart-command",
                    rule: "needs a command after `--`",
                });
            }
            None
        } else {
            if self.command[0].trim().is_empty() {
                return Err(ConfigError::Exec {
                    flag: "-- CMD",
                    rule: "the command after `--` must not be empty",
                });
            }
            if !crate::exec::find_program(&self.command[0]) {
                return Err(ConfigError::Name {
                    flag: "-- CMD",
                    value: self.command[0].clone(),
                    rule: "not found (neither an existing path nor a program on $PATH)".into(),
                });
            }
            if self.exec.grace_period.is_zero() {
                return Err(ConfigError::Duration {
                    flag: "grace-period",
                    value: self.exec.grace_period,
                    rule: "must be greater than zero",
                });
            }
            Some(ExecSettings {
                command: self.command.clone(),
                grace_period: self.exec.grace_period,
                restart: self.exec.restart_command,
            })
        };
        Ok(RunSettings {
            redis,
            lease,
            namespace: self.lease.namespace(env),
            identity,
            pod: env.pod_name.clone(),
            timing,
            http_addr: self.http.http_addr,
            readiness: self.http.readiness,
            kube: KubeSettings {
                mode: self.kube.kubernetes,
                leader_label,
                lease_mirror: !self.kube.no_lease_mirror,
                events: !self.kube.no_events,
            },
            exec,
            guard_file: self.guard_file.clone(),
        })
    }
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name of 1–63 characters of
/// alphanumerics, `-`, `_` and `.`, alphanumeric at both ends.
fn check_label_key(key: &str) -> Result<(), ConfigError> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && name
            .bytes()
            .last()
            .is_some_and(|b| b.is_ascii_alphanumeric());
    let prefix_ok = prefix.is_none_or(crate::k8s::names::is_dns_subdomain);
    if name_ok && prefix_ok {
        Ok(())
    } else {
        Err(ConfigError::Name {
            flag: "leader-label",
            value: key.to_owned(),
            rule: "must be a Kubernetes label key: [prefix/]name, the name 1 to 63 characters of letters, digits, '-', '_' and '.' starting and ending with a letter or digit, the prefix a DNS subdomain".into(),
        })
    }
}

impl StatusArgs {
    /// Validates the status settings.
    pub fn resolve(
        &self,
        env: &Environment,
        url_from_command_line: bool,
    ) -> Result<StatusSettings, ConfigError> {
        Ok(StatusSettings {
            redis: self.redis.resolve(url_from_command_line)?,
            lease: self.lease.resolve(env)?,
            output: self.output,
        })
    }
}

/// Whether `--redis-url` was typed on the command line of `argv` (as opposed to coming from the
/// environment, the config file or the default).
pub fn redis_url_on_command_line<I, T>(argv: I) -> bool
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    argv.into_iter()
        .map(Into::into)
        .take_while(|a| a != "--")
        .any(|a| {
            a.to_str()
                .is_some_and(|s| s == "--redis-url" || s.starts_with("--redis-url="))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Environment {
        Environment {
            pod_name: Some("web-7d4f-x2x9".into()),
            pod_namespace: Some("shop".into()),
            rust_log: None,
            hostname: Some("host".into()),
        }
    }

    fn run(argv: &[&str]) -> Result<RunSettings, ConfigError> {
        let mut full = vec!["leasehold", "run"];
        full.extend_from_slice(argv);
        let cli = parse_from(&full)?;
        let Command::Run(args) = cli.command else {
            panic!("run")
        };
        args.resolve(&env(), redis_url_on_command_line(&full))
    }

    fn error(argv: &[&str]) -> String {
        match run(argv) {
            Ok(s) => panic!("{argv:?} was accepted: {s:?}"),
            Err(e) => {
                assert_eq!(e.exit_code(), 2, "{e}");
                e.to_string()
            }
        }
    }

    // Every refusal rule is tested through the real binary in tests/cli.rs.

    #[test]
    fn defaults_follow_the_design() {
        let s = run(&[]).unwrap();
        assert_eq!(s.timing, Timing::default());
        assert_eq!(s.identity, "web-7d4f-x2x9");
        assert_eq!(s.namespace, "shop");
        assert_eq!(
            s.lease,
            LeaseSource::OwningDeployment {
                namespace: "shop".into(),
                pod: "web-7d4f-x2x9".into()
            }
        );
        assert_eq!(s.readiness, ReadinessMode::Member);
        assert_eq!(s.http_addr, "0.0.0.0:8080".parse().unwrap());
        assert!(s.redis.options.cooldown_on_data_loss);
        assert_eq!(s.kube.leader_label.as_deref(), Some("leasehold.io/leader"));
        assert!(s.exec.is_none());
    }

    #[test]
    fn durations_read_like_people_write_them() {
        let s = run(&[
            "--lease-duration",
            "2m",
            "--renew-deadline",
            "90s",
            "--retry-period",
            "500ms",
        ])
        .unwrap();
        assert_eq!(s.timing.lease_duration, Duration::from_secs(120));
        assert_eq!(s.timing.renew_deadline, Duration::from_secs(90));
        assert_eq!(s.timing.retry_period, Duration::from_millis(500));
    }

    #[test]
    fn lease_names_take_the_namespace_when_short() {
        let s = run(&["--lease-name", "web"]).unwrap();
        assert_eq!(
            s.lease,
            LeaseSource::Named(LeaseName::new("shop/web").unwrap())
        );
        let s = run(&["--lease-name", "other/web"]).unwrap();
        assert_eq!(
            s.lease,
            LeaseSource::Named(LeaseName::new("other/web").unwrap())
        );
    }

    #[test]
    fn the_command_after_the_separator_is_the_singleton() {
        let s = run(&["--grace-period", "3s", "--", "sh", "-c", "worker --once"]).unwrap();
        let exec = s.exec.unwrap();
        assert_eq!(exec.command, vec!["sh", "-c", "worker --once"]);
        assert_eq!(exec.grace_period, Duration::from_secs(3));
    }

    #[test]
    fn the_password_file_is_read_and_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pw");
        std::fs::write(&path, "hunter2\n").unwrap();
        let s = run(&["--redis-password-file", path.to_str().unwrap()]).unwrap();
        assert_eq!(
            s.redis.options.password.as_ref().map(Secret::expose),
            Some("hunter2")
        );
        assert!(!format!("{s:?}").contains("hunter2"));
        std::fs::write(&path, "\n").unwrap();
        let err = error(&["--redis-password-file", path.to_str().unwrap()]);
        assert!(err.ends_with("the file is empty"), "{err}");
    }

    fn write_config(text: &str) -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("leasehold.yaml");
        std::fs::write(&path, text).unwrap();
        let p = path.to_str().unwrap().to_owned();
        (dir, p)
    }

    #[test]
    fn the_config_file_sets_what_flags_do_not() {
        let (_dir, path) = write_config(
            "lease-duration: 30s\nrenew-deadline: 20s\nreadiness: member\nno-events: true\nlease-name: web\n",
        );
        let s = run(&["--config", &path, "--lease-duration", "40s"]).unwrap();
        assert_eq!(
            s.timing.lease_duration,
            Duration::from_secs(40),
            "the flag wins"
        );
        assert_eq!(
            s.timing.renew_deadline,
            Duration::from_secs(20),
            "the file beats the default"
        );
        assert_eq!(s.readiness, ReadinessMode::Member);
        assert!(!s.kube.events);
        assert_eq!(
            s.lease,
            LeaseSource::Named(LeaseName::new("shop/web").unwrap())
        );
    }

    #[test]
    fn a_password_in_the_url_is_accepted_from_the_environment() {
        let cli = parse_from(["leasehold", "run"]).unwrap();
        let Command::Run(mut args) = cli.command else {
            panic!()
        };
        args.redis.redis_url = "redis://:hunter2@x:6379".into();
        let s = args.resolve(&env(), false).unwrap();
        assert_eq!(s.redis.redacted_url(), "redis://:***@x:6379");
    }

    #[test]
    fn label_keys_follow_kubernetes_rules() {
        for ok in ["leasehold.io/leader", "leader", "a.b-c/x_y.z"] {
            assert!(check_label_key(ok).is_ok(), "{ok}");
        }
        for bad in ["", "/x", "Bad.IO/x", "x/-a", "a/b/c d", &"x".repeat(64)] {
            assert!(check_label_key(bad).is_err(), "{bad}");
        }
    }
}
