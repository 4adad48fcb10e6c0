//! What the commands run with: the settings that [`resolve`](super::resolve) validated.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::{CliError, OutputFormat};
use crate::candidacy::CandidateCheck;
use crate::elector::Timing;
use crate::eviction::EvictionMode;
use crate::exec::ExecSettings;
use crate::guard::check::GuardCheck;
use crate::http::{Limits, ReadinessMode};
use crate::k8s::KubeSettings;
use crate::lease::{LeaseError, LeaseName, LeaseOptions, OwnerId, RedisLease, RedisTarget};
use crate::telemetry::LogSettings;

/// A validated command line: what to do, and with which settings.
#[derive(Debug, Clone)]
#[allow(
    clippy::large_enum_variant,
    reason = "built once per process; boxing would only add noise"
)]
pub enum Invocation {
    Run(RunSettings, LogSettings),
    Status(StatusSettings, LogSettings),
    /// `leasehold guard`: no runtime, no logs, no connection.
    Guard(GuardCheck),
    StepDown(StepDownSettings, LogSettings),
    Lock(LockSettings, LogSettings),
    RemoveKeys(RemoveKeysSettings, LogSettings),
    /// `leasehold completions`: no runtime, no logs, no connection.
    Completions(clap_complete::Shell),
}

impl Invocation {
    /// The logs to start, when the command logs.
    pub fn log(&self) -> Option<&LogSettings> {
        match self {
            Invocation::Run(_, log)
            | Invocation::Status(_, log)
            | Invocation::StepDown(_, log)
            | Invocation::RemoveKeys(_, log)
            | Invocation::Lock(_, log) => Some(log),
            Invocation::Guard(_) | Invocation::Completions(_) => None,
        }
    }

    /// The Redis the command talks to, when it talks to one.
    pub fn redis(&self) -> Option<&RedisSettings> {
        match self {
            Invocation::Run(RunSettings { contender, .. }, _)
            | Invocation::Lock(LockSettings { contender, .. }, _) => Some(&contender.redis),
            Invocation::Status(status, _)
            | Invocation::StepDown(StepDownSettings { status, .. }, _)
            | Invocation::RemoveKeys(RemoveKeysSettings { status, .. }, _) => Some(&status.redis),
            Invocation::Guard(_) | Invocation::Completions(_) => None,
        }
    }
}

/// Where the lease name comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseSource {
    /// Given by flag.
    Named(LeaseName),
    /// The workload that owns pod `pod` in `namespace`, found through the Kubernetes API: its
    /// Deployment for `run`, `status` and `step-down`, its Job (or CronJob) for `lock`.
    OwningWorkload { namespace: String, pod: String },
    /// Neither a name nor a pod to start from.
    Unknown,
}

/// Validated Redis settings.
#[derive(Debug, Clone)]
pub struct RedisSettings {
    /// Where the lease lives, parsed once with the credentials and TLS of `options`.
    pub target: RedisTarget,
    pub options: LeaseOptions,
}

impl RedisSettings {
    /// The lease `name` for `owner` on this Redis (nothing connects yet).
    pub fn lease(&self, name: LeaseName, owner: OwnerId) -> Result<RedisLease, LeaseError> {
        RedisLease::on(&self.target, name, owner, self.options.clone())
    }

    /// A one-shot command's Redis failure, with the URL it tried (password redacted): the
    /// command ends on it, and the user sees which Redis did not answer.
    pub fn failed(&self, e: impl Into<anyhow::Error>) -> anyhow::Error {
        e.into()
            .context(format!("redis at {}", self.target.redacted_url()))
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
    pub hostname: Option<String>,
    /// Whether --redis-url was typed on the command line, where a password shows in `ps`.
    pub redis_url_on_command_line: bool,
    /// Where --redis-url came from when it was not typed (`$LEASEHOLD_REDIS_URL`, a key of
    /// the --config file): what a refused password names.
    pub redis_url_from: Option<String>,
}

impl Environment {
    /// Reads the real environment; `argv` is the process's command line, read once. A variable
    /// that is not UTF-8 is refused, not taken as unset: a namespace or pod name taken as absent
    /// would put this replica on another lease or identity than its peers'.
    pub fn from_process(argv: &[std::ffi::OsString]) -> Result<Self, CliError> {
        let var = |name: &str, flag| match std::env::var(name) {
            Ok(v) => Ok(Some(v).filter(|v| !v.is_empty())),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(v)) => {
                Err(
                    CliError::value(flag, v.to_string_lossy(), "must be UTF-8 text")
                        .came_from(format!("${name}")),
                )
            }
        };
        Ok(Self {
            pod_name: var("POD_NAME", "identity")?,
            pod_namespace: var("POD_NAMESPACE", "namespace")?,
            rust_log: var("RUST_LOG", "log")?,
            hostname: nix::unistd::gethostname()
                .ok()
                .and_then(|h| h.into_string().ok())
                .filter(|h| !h.is_empty()),
            redis_url_on_command_line: super::on_command_line(argv, &["redis-url"]),
            // Known once the command line is parsed (`invocation`).
            redis_url_from: None,
        })
    }
}

/// What every contender for the lease runs with, `leasehold run`'s and `leasehold lock`'s.
#[derive(Debug, Clone)]
pub struct ContenderSettings {
    pub redis: RedisSettings,
    /// What to do when Redis may evict the lease.
    pub eviction: EvictionMode,
    pub lease: LeaseSource,
    /// The namespace of this pod and of the lease mirror, events and labels.
    pub namespace: String,
    /// This replica's identity (the pod name in Kubernetes).
    pub identity: String,
    /// This pod's name (`$POD_NAME`), when running in a pod.
    pub pod: Option<String>,
    pub timing: Timing,
    pub kube: KubeSettings,
    /// The command, if any (always one for `lock`).
    pub exec: Option<ExecSettings>,
    /// The guard file given by `--guard-file` (else a default one when there is a command).
    pub guard_file: Option<PathBuf>,
}

/// Validated settings of `leasehold run`.
#[derive(Debug, Clone)]
pub struct RunSettings {
    pub contender: ContenderSettings,
    pub http_addr: SocketAddr,
    pub readiness: ReadinessMode,
    pub http_limits: Limits,
    pub candidacy: Option<CandidateCheck>,
    /// The status file given by `--status-file`.
    pub status_file: Option<PathBuf>,
}

/// Validated settings of `leasehold lock`.
#[derive(Debug, Clone)]
pub struct LockSettings {
    /// What it has of every contender, the command included.
    pub contender: ContenderSettings,
    pub wait: Duration,
}

/// Validated settings of `leasehold status`.
#[derive(Debug, Clone)]
pub struct StatusSettings {
    pub redis: RedisSettings,
    pub lease: LeaseSource,
    pub output: OutputFormat,
}

/// Validated settings of `leasehold remove-keys`.
#[derive(Debug, Clone)]
pub struct RemoveKeysSettings {
    /// Redis, the lease and the output format, as for `leasehold status`.
    pub status: StatusSettings,
    /// Remove even while a term may be valid.
    pub force: bool,
}

/// Validated settings of `leasehold step-down`.
#[derive(Debug, Clone)]
pub struct StepDownSettings {
    /// Redis, the lease and the output format, as for `leasehold status`.
    pub status: StatusSettings,
    pub to: Option<String>,
    pub wait: Duration,
}
