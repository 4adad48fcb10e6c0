//! From flags to settings: every rule a value must keep, checked before anything connects,
//! including the upper bounds of durations ([`Timing::MAX`]: an hour, which kept
//! `--lease-duration 1000000h` from reaching Redis as a `PX` of 3.6e12 ms).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::settings::{
    ContenderSettings, Environment, Invocation, LeaseSource, RunSettings, StatusSettings,
};
use super::{
    Cli, CliError, Command, ContenderArgs, GuardArgs, KubeArgs, LeaseArgs, LogArgs, RunArgs,
    StatusArgs,
};
use crate::clock::shown;
use crate::elector::{FIXED_DRIFT, Timing};
use crate::exec::{ExecSettings, KILL_MARGIN, find_program};
use crate::guard::caller::{self, CallerError, CallerTerm};
use crate::guard::check::GuardCheck;
use crate::k8s::{KubeSettings, names};
use crate::lease::{LeaseName, OwnerId};
use crate::telemetry::{LogSettings, parse_filter};

const LEASE_DURATION_BOUND: &str = "must be at most 1h: a leader that dies without releasing holds the lease this long, and after Redis lost its data every replica waits this long";
const BELOW_LEASE_DURATION_BOUND: &str =
    "must be at most 1h, like the lease duration that it must be shorter than";
const GRACE_PERIOD_BOUND: &str = "must be at most 1h: the shutdown bound and the pod's terminationGracePeriodSeconds are computed from it, and a rollout waits that long for each pod";
const VALID_FOR_BOUND: &str =
    "must be at most 1h: no term stays valid longer than a lease duration, which is at most 1h";

/// Refuses a duration over [`Timing::MAX`], with the flag's reason.
pub(super) fn at_most(
    flag: &'static str,
    value: Duration,
    rule: &'static str,
) -> Result<(), CliError> {
    if value > Timing::MAX {
        return Err(CliError::Duration { flag, value, rule });
    }
    Ok(())
}

/// Refuses a zero duration.
pub(super) fn above_zero(flag: &'static str, value: Duration) -> Result<(), CliError> {
    let rule = "must be greater than zero";
    at_least(flag, value, Duration::from_nanos(1), rule)
}

/// Refuses a duration shorter than `min`, with the flag's reason.
pub(super) fn at_least(
    flag: &'static str,
    value: Duration,
    min: Duration,
    rule: &'static str,
) -> Result<(), CliError> {
    if value < min {
        return Err(CliError::Duration { flag, value, rule });
    }
    Ok(())
}

/// Validates a parsed command line into what to run.
pub fn invocation(mut cli: Cli, env: &Environment) -> Result<Invocation, CliError> {
    let sources = std::mem::take(&mut cli.sources);
    let env = &Environment {
        redis_url_from: sources.get("redis-url").cloned(),
        ..env.clone()
    };
    resolved(cli, env, &sources).map_err(|e| e.sourced(&sources))
}

fn resolved(
    cli: Cli,
    env: &Environment,
    sources: &BTreeMap<String, String>,
) -> Result<Invocation, CliError> {
    let invocation = match cli.command {
        Command::Run(args) => Invocation::Run(args.resolve(env)?, args.log.settings(env)?),
        Command::Status(args) => Invocation::Status(args.resolve(env)?, args.log.settings(env)?),
        Command::Guard(args) => Invocation::Guard(args.check(sources)?),
        Command::StepDown(args) => {
            Invocation::StepDown(args.resolve(env)?, args.status.log.settings(env)?)
        }
        Command::RemoveKeys(args) => {
            Invocation::RemoveKeys(args.resolve(env)?, args.status.log.settings(env)?)
        }
        Command::Lock(args) => Invocation::Lock(args.resolve(env)?, args.log.settings(env)?),
        Command::Completions(args) => Invocation::Completions(args.shell),
    };
    if let Some(redis) = invocation.redis() {
        redis.sentinels_at_start()?;
    }
    Ok(invocation)
}

impl GuardArgs {
    /// What to check; `sources` says which flags' values came from a variable.
    pub fn check(&self, sources: &BTreeMap<String, String>) -> Result<GuardCheck, CliError> {
        at_most("valid-for", self.valid_for, VALID_FOR_BOUND)?;
        // An empty value is no value when a variable gives it: a shell that exports it empty
        // means "not set". Typed empty, it is refused: it would let any term pass.
        let given = |flag: &'static str, v: &Option<String>| match v.as_deref() {
            Some("") if !sources.contains_key(flag) => Err(CliError::value(
                flag,
                "",
                "must not be empty: it would let any term pass; leave the flag out to compare none",
            )),
            _ => Ok(v.clone().filter(|v| !v.is_empty())),
        };
        let refused = |e: CallerError| CliError::value(e.source, e.value, e.rule);
        let caller = CallerTerm {
            lease: given("lease", &self.lease)?
                .map(|v| caller::parse_lease("--lease", &v))
                .transpose()
                .map_err(refused)?,
            token: given("token", &self.token)?
                .map(|v| caller::parse_token("--token", &v))
                .transpose()
                .map_err(refused)?,
        };
        Ok(GuardCheck {
            path: self.guard_file.clone(),
            valid_for: self.valid_for,
            caller,
            verbose: self.verbose,
        })
    }
}

impl LogArgs {
    /// The log settings: the filter is `--log`, else `$RUST_LOG`, else `info`; refused when it
    /// does not parse or keeps nothing ([`parse_filter`]).
    pub fn settings(&self, env: &Environment) -> Result<LogSettings, CliError> {
        let (filter, rust_log) = match (&self.log, &env.rust_log) {
            (Some(log), _) => (log.clone(), false),
            (None, Some(rust_log)) => (rust_log.clone(), true),
            (None, None) => ("info".to_owned(), false),
        };
        parse_filter(&filter).map_err(|e| match rust_log {
            true => CliError::from(e).came_from("$RUST_LOG"),
            false => e.into(),
        })?;
        Ok(LogSettings {
            format: self.log_format,
            filter,
        })
    }
}

impl LeaseArgs {
    fn namespace(&self, env: &Environment) -> String {
        self.namespace
            .clone()
            .or_else(|| env.pod_namespace.clone())
            .unwrap_or_else(|| "default".to_owned())
    }

    fn resolve(&self, env: &Environment) -> Result<LeaseSource, CliError> {
        let namespace = self.namespace(env);
        check_dns_label("namespace", &namespace).map_err(|e| match &self.namespace {
            None if env.pod_namespace.is_some() => e.came_from("$POD_NAMESPACE"),
            _ => e,
        })?;
        match &self.lease_name {
            Some(name) => {
                let full = if name.contains('/') {
                    name.clone()
                } else {
                    format!("{namespace}/{name}")
                };
                if name.is_empty() {
                    return Err(CliError::value(
                        "lease-name",
                        name,
                        "must not be empty: `<namespace>/<name>`, or `<name>` in --namespace",
                    ));
                }
                check_lease_parts(&full)
                    .map_err(|rule| CliError::value("lease-name", name, rule))?;
                // A namespace given twice, two ways, would leave one of them unused in silence.
                if let (Some(given), Some((named, _))) = (&self.namespace, name.split_once('/'))
                    && given != named
                {
                    return Err(CliError::value(
                        "lease-name",
                        name,
                        format!(
                            "names the namespace `{named}`, but --namespace is `{given}`: give the name alone, or the same namespace"
                        ),
                    ));
                }
                LeaseName::new(full)
                    .map(LeaseSource::Named)
                    .map_err(|e| CliError::value("lease-name", name, e.to_string()))
            }
            None => Ok(match &env.pod_name {
                Some(pod) => LeaseSource::OwningWorkload {
                    namespace,
                    pod: pod.clone(),
                },
                None => LeaseSource::Unknown,
            }),
        }
    }
}

/// The two parts of a lease name `<namespace>/<name>`, each present and no longer than
/// Kubernetes allows a namespace and an object name (the Deployment the lease is named for).
fn check_lease_parts(full: &str) -> Result<(), String> {
    let (namespace, name) = full.split_once('/').unwrap_or(("", full));
    let too_long = |part: &str, len: usize, what: &str, max: usize| {
        format!("the {part} is {len} bytes long; a Kubernetes {what} is at most {max}")
    };
    if namespace.is_empty() {
        Err("the namespace before the `/` must not be empty".to_owned())
    } else if name.is_empty() {
        Err("the name after the `/` must not be empty".to_owned())
    } else if namespace.len() > names::MAX_NAMESPACE_LEN {
        Err(too_long(
            "namespace before the `/`",
            namespace.len(),
            "namespace",
            names::MAX_NAMESPACE_LEN,
        ))
    } else if name.len() > names::MAX_OBJECT_NAME_LEN {
        Err(too_long(
            "name after the `/`",
            name.len(),
            "object name",
            names::MAX_OBJECT_NAME_LEN,
        ))
    } else {
        Ok(())
    }
}

/// A Kubernetes namespace is a DNS label.
fn check_dns_label(flag: &'static str, value: &str) -> Result<(), CliError> {
    if names::is_dns_label(value) {
        Ok(())
    } else {
        Err(CliError::value(flag, value, names::DNS_LABEL_RULE))
    }
}

/// What `run` and `lock` give a contender besides [`ContenderArgs`], each under headings of
/// its own: the Kubernetes parts, the command after `--` and its guard file.
pub(super) struct ContenderParts<'a> {
    pub(super) kube: &'a KubeArgs,
    pub(super) command: &'a [String],
    pub(super) grace_period: Duration,
    /// `run`'s `--restart-command`.
    pub(super) restart_command: bool,
    pub(super) guard_file: Option<&'a PathBuf>,
}

impl ContenderArgs {
    /// Validates what a contender runs with.
    pub(super) fn resolve(
        &self,
        parts: ContenderParts<'_>,
        env: &Environment,
    ) -> Result<ContenderSettings, CliError> {
        for (flag, value, rule) in [
            (
                "lease-duration",
                self.timing.lease_duration,
                LEASE_DURATION_BOUND,
            ),
            (
                "renew-deadline",
                self.timing.renew_deadline,
                BELOW_LEASE_DURATION_BOUND,
            ),
            (
                "retry-period",
                self.timing.retry_period,
                BELOW_LEASE_DURATION_BOUND,
            ),
            (
                "redis-wait-timeout",
                self.contender_redis.redis_wait_timeout,
                BELOW_LEASE_DURATION_BOUND,
            ),
            ("grace-period", parts.grace_period, GRACE_PERIOD_BOUND),
        ] {
            at_most(flag, value, rule)?;
        }
        let timing = Timing {
            lease_duration: self.timing.lease_duration,
            renew_deadline: self.timing.renew_deadline,
            retry_period: self.timing.retry_period,
            drift_factor: self.timing.drift_factor,
        };
        timing.validate()?;
        let wait_replicas = self.contender_redis.wait_replicas(timing.retry_period)?;
        let mut redis = self.redis.resolve(env)?;
        redis.options.wait_replicas = wait_replicas;
        redis.options.cooldown_on_data_loss = !self.timing.no_data_loss_cooldown;
        let url = redis.target.redacted_url();
        if self.timing.no_data_loss_cooldown
            && (url.contains("+sentinel://") || url.contains("+cluster://"))
        {
            return Err(CliError::Misplaced {
                flag: "--no-data-loss-cooldown",
                rule: "is only for a Redis that never fails over, and a redis+sentinel:// or redis+cluster:// target does: a promoted replica may lack the last term, and only the cooldown keeps it from granting another while that one is valid",
            });
        }
        let lease = self.lease.resolve(env)?;
        let identity = self
            .identity
            .clone()
            .or_else(|| env.pod_name.clone())
            .or_else(|| env.hostname.clone())
            .ok_or_else(|| {
                CliError::value(
                    "identity",
                    "",
                    "no identity: pass --identity, or set POD_NAME (downward API)",
                )
            })?;
        OwnerId::check_identity(&identity).map_err(|e| {
            let refused = CliError::value("identity", &identity, e.to_string());
            match (&self.identity, &env.pod_name) {
                (Some(_), _) => refused,
                (None, Some(_)) => refused.came_from("$POD_NAME"),
                (None, None) => refused.came_from("the host name"),
            }
        })?;
        Ok(ContenderSettings {
            redis,
            eviction: self.contender_redis.redis_eviction,
            lease,
            namespace: self.lease.namespace(env),
            identity,
            pod: env.pod_name.clone(),
            timing,
            kube: parts.kube.settings()?,
            exec: exec(&parts, &timing)?,
            // Absolute: the command is told this path, and may change its directory.
            guard_file: parts
                .guard_file
                .map(|path| {
                    std::path::absolute(path).map_err(|e| CliError::File {
                        flag: "guard-file",
                        path: path.clone(),
                        rule: format!("cannot make it absolute: {e}"),
                    })
                })
                .transpose()?,
        })
    }
}

impl KubeArgs {
    fn settings(&self) -> Result<KubeSettings, CliError> {
        let leader_label = if self.no_leader_label {
            None
        } else {
            if !names::is_label_key(&self.leader_label) {
                return Err(CliError::value(
                    "leader-label",
                    &self.leader_label,
                    names::LABEL_KEY_RULE,
                ));
            }
            Some(self.leader_label.clone())
        };
        Ok(KubeSettings {
            mode: self.kubernetes,
            leader_label,
            lease_mirror: !self.no_lease_mirror,
            events: !self.no_events,
        })
    }
}

/// The command after `--`, if any, with its grace period. It is killed [`KILL_MARGIN`] before
/// its term's validity deadline, which a renewal moves only when its answer comes, a retry
/// period after the last and as late as a renewal attempt's bound: a lease shorter than all
/// three would start it and kill it at once, term after term.
fn exec(parts: &ContenderParts<'_>, timing: &Timing) -> Result<Option<ExecSettings>, CliError> {
    let Some(program) = parts.command.first() else {
        if parts.restart_command {
            return Err(CliError::Misplaced {
                flag: "--restart-command",
                rule: "needs a command after `--`",
            });
        }
        return Ok(None);
    };
    if program.trim().is_empty() {
        return Err(CliError::Misplaced {
            flag: "-- CMD",
            rule: "the command after `--` must not be empty",
        });
    }
    find_program(program).map_err(|e| CliError::value("-- CMD", program, e.to_string()))?;
    above_zero("grace-period", parts.grace_period)?;
    let renewed = timing.retry_period + timing.renew_attempt_timeout();
    if timing.validity() <= renewed + KILL_MARGIN {
        // The validity is `Timing::validity`, `lease × (1 − drift factor) − FIXED_DRIFT`,
        // solved for the lease.
        let needed = (renewed + KILL_MARGIN + FIXED_DRIFT).div_f64(1.0 - timing.drift_factor);
        return Err(CliError::value(
            "lease-duration",
            shown(timing.lease_duration),
            format!(
                "with a command after `--`, must be greater than {} (the drift margin, --retry-period, a renewal attempt's bound and 100 ms): the command is killed 100 ms before its term's validity deadline, which a renewal moves only when its answer comes",
                shown(needed)
            ),
        ));
    }
    Ok(Some(ExecSettings {
        command: parts.command.to_vec(),
        grace_period: parts.grace_period,
        restart: parts.restart_command,
    }))
}

impl RunArgs {
    /// Validates the run settings.
    pub fn resolve(&self, env: &Environment) -> Result<RunSettings, CliError> {
        let parts = ContenderParts {
            kube: &self.kube,
            command: &self.command,
            grace_period: self.exec.grace_period,
            restart_command: self.exec.restart_command,
            guard_file: self.guard_file.as_ref(),
        };
        let contender = self.contender.resolve(parts, env)?;
        let status_file = self.http.status_file()?;
        // The status file's folder exists (it was checked), so `None` never matches here.
        if let (Some(status), Some(guard)) = (&status_file, &self.guard_file)
            && place(status) == place(guard)
        {
            return Err(CliError::File {
                flag: "status-file",
                path: status.clone(),
                rule: format!(
                    "is the file --guard-file names ({}): a status file and a guard file must be two files",
                    guard.display()
                ),
            });
        }
        Ok(RunSettings {
            candidacy: self
                .candidacy
                .resolve(contender.exec.is_some(), contender.timing.lease_duration)?,
            status_file,
            http_addr: self.http.http_addr,
            readiness: self.http.readiness,
            http_limits: self.http.limits()?,
            contender,
        })
    }
}

/// A file's folder with its links resolved (`None` if there is no such folder) and its name:
/// the same for one file however it is spelled, whether it exists yet or not.
fn place(path: &Path) -> (Option<PathBuf>, Option<&OsStr>) {
    (folder(path).canonicalize().ok(), path.file_name())
}

/// A file's folder: `.` for a bare name.
pub(super) fn folder(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

impl StatusArgs {
    /// Validates the status settings.
    pub fn resolve(&self, env: &Environment) -> Result<StatusSettings, CliError> {
        Ok(StatusSettings {
            redis: self.redis.resolve(env)?,
            lease: self.lease.resolve(env)?,
            output: self.output,
        })
    }
}
