//! From flags to settings: every rule a value must keep, checked before anything connects,
//! including the upper bounds of durations (see [`MAX_DURATION`]).

use std::time::Duration;

use super::secrets::{read_pem, read_secret};
use super::settings::{
    Environment, Invocation, LeaseSource, RedisSettings, RunSettings, StatusSettings,
};
use super::{
    Cli, CliError, Command, GuardArgs, LeaseArgs, LogArgs, RedisArgs, RunArgs, StatusArgs,
};
use crate::elector::Timing;
use crate::exec::{ExecSettings, find_program};
use crate::guard::caller::{self, CallerError, CallerTerm};
use crate::guard::check::GuardCheck;
use crate::k8s::{KubeSettings, names};
use crate::lease::{
    LeaseError, LeaseName, LeaseOptions, OwnerId, RedisTarget, TlsFiles, WaitReplicas,
    check_sentinels, redact_url,
};
use crate::telemetry::LogSettings;

/// The longest duration any flag takes: one hour. The lease duration is the longest duration
/// that means something (every other is shorter by the timing rule, or cannot pass once it
/// outlasts a term), and an hour is already far past any failover a Deployment waits for;
/// without a bound, `--lease-duration 1000000h` went to Redis as a `PX` of 3.6e12 ms and
/// `--grace-period` fed a shutdown bound of centuries.
pub const MAX_DURATION: Duration = Duration::from_secs(3600);

const LEASE_DURATION_BOUND: &str = "must be at most 1h: a leader that dies without releasing holds the lease this long, and after Redis lost its data every replica waits this long";
const BELOW_LEASE_DURATION_BOUND: &str =
    "must be at most 1h, like the lease duration that it must be shorter than";
const GRACE_PERIOD_BOUND: &str = "must be at most 1h: the shutdown bound and the pod's terminationGracePeriodSeconds are computed from it, and a rollout waits that long for each pod";
const VALID_FOR_BOUND: &str =
    "must be at most 1h: no term stays valid longer than a lease duration, which is at most 1h";

/// Refuses a duration over [`MAX_DURATION`], with the flag's reason.
pub(super) fn at_most(
    flag: &'static str,
    value: Duration,
    rule: &'static str,
) -> Result<(), CliError> {
    if value > MAX_DURATION {
        return Err(CliError::Duration { flag, value, rule });
    }
    Ok(())
}

/// Validates a parsed command line into what to run. `url_from_command_line` says whether
/// --redis-url was typed on the command line (where a password would show in `ps`).
pub fn invocation(
    cli: Cli,
    env: &Environment,
    url_from_command_line: bool,
) -> Result<Invocation, CliError> {
    let invocation = match cli.command {
        Command::Run(args) => Invocation::Run(
            args.resolve(env, url_from_command_line)?,
            args.log.settings(env),
        ),
        Command::Status(args) => Invocation::Status(
            args.resolve(env, url_from_command_line)?,
            args.log.settings(env),
        ),
        Command::Guard(args) => Invocation::Guard(args.check()?),
        Command::StepDown(args) => Invocation::StepDown(
            args.resolve(env, url_from_command_line)?,
            args.status.log.settings(env),
        ),
        Command::Lock(args) => Invocation::Lock(
            args.resolve(env, url_from_command_line)?,
            args.log.settings(env),
        ),
    };
    if let Some(redis) = invocation.redis() {
        sentinels_at_start(redis)?;
    }
    Ok(invocation)
}

/// For a `redis+sentinel://` URL: the Sentinels its hosts resolve to now, refused when they are
/// not an odd number of three or more (unless --allow-unsafe-sentinel-count accepts it) or a
/// host does not resolve (see [`check_sentinels`]). The one rule checked against the network
/// rather than the input alone, so kept out of the `resolve` methods, which the chart's tests
/// run on rendered values. No runtime exists yet: it resolves on a small one of its own, which
/// it leaves without waiting for a resolver thread that outlived its bound.
fn sentinels_at_start(redis: &RedisSettings) -> Result<(), CliError> {
    if !redis.target.is_sentinel() {
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| {
            CliError::Failed(
                anyhow::Error::new(e).context("cannot start a runtime to resolve the Sentinels"),
            )
        })?;
    let checked = runtime.block_on(check_sentinels(&redis.target));
    runtime.shutdown_background();
    checked.map_err(|e| match e {
        LeaseError::BadUrl { url, reason } => CliError::RedisUrl { url, rule: reason },
        other => CliError::RedisUrl {
            url: redis.redacted_url().to_owned(),
            rule: other.to_string(),
        },
    })
}

impl GuardArgs {
    /// What to check.
    pub fn check(&self) -> Result<GuardCheck, CliError> {
        at_most("valid-for", self.valid_for, VALID_FOR_BOUND)?;
        // An empty value is no value: a shell that exports the variable empty means "not set".
        let given = |v: &Option<String>| v.clone().filter(|v| !v.is_empty());
        let refused = |e: CallerError| CliError::Name {
            flag: e.source,
            value: e.value,
            rule: e.rule,
        };
        let caller = CallerTerm {
            lease: given(&self.lease)
                .map(|v| caller::parse_lease("--lease (or $LEASEHOLD_LEASE)", &v))
                .transpose()
                .map_err(refused)?,
            token: given(&self.token)
                .map(|v| caller::parse_token("--token (or $LEASEHOLD_FENCING_TOKEN)", &v))
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
    /// The log settings: the filter is `--log`, else `$RUST_LOG`, else `info`.
    pub fn settings(&self, env: &Environment) -> LogSettings {
        LogSettings {
            format: self.log_format,
            filter: self
                .log
                .clone()
                .or_else(|| env.rust_log.clone())
                .unwrap_or_else(|| "info".to_owned()),
        }
    }
}

impl RedisArgs {
    fn resolve(&self, url_from_command_line: bool) -> Result<RedisSettings, CliError> {
        let url = self.redis_url.trim().to_owned();
        let bad = |rule: &str| CliError::RedisUrl {
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
                return Err(CliError::Name {
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
            return Err(CliError::Exec {
                flag: "--sentinel-password-file",
                rule: "is only for redis+sentinel:// URLs",
            });
        }
        if self.allow_unsafe_sentinel_count && !url.contains("+sentinel://") {
            return Err(CliError::Exec {
                flag: "--allow-unsafe-sentinel-count",
                rule: "is only for redis+sentinel:// URLs",
            });
        }
        if self.redis_wait_replicas > 0 && self.redis_wait_timeout.is_zero() {
            return Err(CliError::Duration {
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
            allow_unsafe_sentinel_count: self.allow_unsafe_sentinel_count,
            wait_replicas,
            ..LeaseOptions::default()
        };
        // The target parser judges the rest of the URL now, before anything connects, and its
        // verdict is the target every lease of the command is made on.
        let target = RedisTarget::parse(&url, &options).map_err(|e| match e {
            LeaseError::BadUrl { reason, .. } => bad(&reason),
            other => bad(&other.to_string()),
        })?;
        Ok(RedisSettings {
            target,
            options,
            eviction: self.redis_eviction.into(),
        })
    }

    fn tls_files(&self) -> Result<Option<TlsFiles>, CliError> {
        let (ca, cert, key) = (
            &self.redis_ca_file,
            &self.redis_client_cert_file,
            &self.redis_client_key_file,
        );
        if ca.is_none() && cert.is_none() && key.is_none() {
            return Ok(None);
        }
        if cert.is_some() != key.is_some() {
            return Err(CliError::Exec {
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

impl LeaseArgs {
    fn namespace(&self, env: &Environment) -> String {
        self.namespace
            .clone()
            .or_else(|| env.pod_namespace.clone())
            .unwrap_or_else(|| "default".to_owned())
    }

    fn resolve(&self, env: &Environment) -> Result<LeaseSource, CliError> {
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
                    .map_err(|e| CliError::Name {
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

/// A Kubernetes namespace is a DNS label.
fn check_dns_label(flag: &'static str, value: &str) -> Result<(), CliError> {
    if names::is_dns_label(value) {
        Ok(())
    } else {
        Err(CliError::Name {
            flag,
            value: value.to_owned(),
            rule: names::DNS_LABEL_RULE.into(),
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
    ) -> Result<RunSettings, CliError> {
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
                self.redis.redis_wait_timeout,
                BELOW_LEASE_DURATION_BOUND,
            ),
            ("grace-period", self.exec.grace_period, GRACE_PERIOD_BOUND),
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
        if self.redis.redis_wait_replicas > 0
            && self.redis.redis_wait_timeout >= timing.retry_period
        {
            return Err(CliError::Order {
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
            .ok_or(CliError::Name {
                flag: "identity",
                value: String::new(),
                rule: "no identity: pass --identity, or set POD_NAME (downward API)".into(),
            })?;
        OwnerId::check_identity(&identity).map_err(|e| CliError::Name {
            flag: "identity",
            value: identity.clone(),
            rule: e.to_string(),
        })?;
        let leader_label = if self.kube.no_leader_label {
            None
        } else {
            if !names::is_label_key(&self.kube.leader_label) {
                return Err(CliError::Name {
                    flag: "leader-label",
                    value: self.kube.leader_label.clone(),
                    rule: names::LABEL_KEY_RULE.into(),
                });
            }
            Some(self.kube.leader_label.clone())
        };
        let exec = if self.command.is_empty() {
            if self.exec.restart_command {
                return Err(CliError::Exec {
                    flag: "--restart-command",
                    rule: "needs a command after `--`",
                });
            }
            None
        } else {
            if self.command[0].trim().is_empty() {
                return Err(CliError::Exec {
                    flag: "-- CMD",
                    rule: "the command after `--` must not be empty",
                });
            }
            if !find_program(&self.command[0]) {
                return Err(CliError::Name {
                    flag: "-- CMD",
                    value: self.command[0].clone(),
                    rule: "not found (neither an existing path nor a program on $PATH)".into(),
                });
            }
            if self.exec.grace_period.is_zero() {
                return Err(CliError::Duration {
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
            candidacy: self
                .candidacy
                .resolve(exec.is_some(), timing.lease_duration)?,
            status_file: self.candidacy.status_file()?,
            exec,
            guard_file: self.guard_file.clone(),
        })
    }
}

impl StatusArgs {
    /// Validates the status settings.
    pub fn resolve(
        &self,
        env: &Environment,
        url_from_command_line: bool,
    ) -> Result<StatusSettings, CliError> {
        Ok(StatusSettings {
            redis: self.redis.resolve(url_from_command_line)?,
            lease: self.lease.resolve(env)?,
            output: self.output,
        })
    }
}
