//! The flags of the operator commands `leasehold step-down` (handover on demand) and `leasehold
//! lock` (a one-shot lock for Jobs and CronJobs), validated into settings like the others: every
//! refusal names the flag, the value and the rule, and the binary exits with code 2.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::candidacy::CandidacyArgs;
use super::resolve::at_most;
use super::{
    CliError, Environment, ExecArgs, HttpArgs, KubeArgs, LeaseArgs, LogArgs, RedisArgs, RunArgs,
    RunSettings, StatusArgs, StatusSettings, TimingArgs, parse_duration,
};
use crate::http::ReadinessMode;
use crate::lease::OwnerId;

/// `leasehold step-down`.
#[derive(Debug, Clone, Args)]
pub struct StepDownArgs {
    #[command(flatten)]
    pub status: StatusArgs,
    /// Hand the next term to this replica (its identity, the pod name): it alone may take the
    /// lease for two retry periods, then anyone may [default: any replica but the leader].
    #[arg(long, env = "LEASEHOLD_STEP_DOWN_TO", help_heading = "Handover")]
    pub to: Option<String>,
    /// How long to wait for another replica (or the named one) to lead; exit code 1 after.
    /// The request to the leader lives as long.
    #[arg(long, env = "LEASEHOLD_STEP_DOWN_WAIT", default_value = "30s", value_parser = parse_duration, help_heading = "Handover")]
    pub wait: Duration,
}

/// Validated settings of `leasehold step-down`.
#[derive(Debug, Clone)]
pub struct StepDownSettings {
    /// Redis, the lease and the output format, as for `leasehold status`.
    pub status: StatusSettings,
    /// The replica to hand to, if named.
    pub to: Option<String>,
    /// How long to wait for the new leader.
    pub wait: Duration,
}

impl StepDownArgs {
    /// Validates the step-down settings.
    pub fn resolve(
        &self,
        env: &Environment,
        url_from_command_line: bool,
    ) -> Result<StepDownSettings, CliError> {
        let status = self.status.resolve(env, url_from_command_line)?;
        if let Some(to) = &self.to {
            OwnerId::check_identity(to).map_err(|e| CliError::Name {
                flag: "to",
                value: to.clone(),
                rule: format!("must be a replica's identity (its pod name): {e}"),
            })?;
        }
        at_most(
            "wait",
            self.wait,
            "must be at most 1h: the request to the leader lives as long",
        )?;
        if self.wait.is_zero() {
            return Err(CliError::Duration {
                flag: "wait",
                value: self.wait,
                rule: "must be greater than zero: the leader needs up to a retry period to see the request",
            });
        }
        Ok(StepDownSettings {
            status,
            to: self.to.clone(),
            wait: self.wait,
        })
    }
}

/// `leasehold lock`.
#[derive(Debug, Clone, Args)]
pub struct LockArgs {
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
    pub kube: KubeArgs,
    /// How long to try for the lock before giving up with exit code 75 [default: one try].
    #[arg(long, env = "LEASEHOLD_LOCK_WAIT", default_value = "0s", value_parser = parse_duration, help_heading = "Lock")]
    pub wait: Duration,
    /// Time the command gets between SIGTERM and SIGKILL when the lock is lost; never past the
    /// validity deadline.
    #[arg(long, env = "LEASEHOLD_GRACE_PERIOD", default_value = "10s", value_parser = parse_duration, help_heading = "Lock")]
    pub grace_period: Duration,
    /// Where to publish the term's token and validity deadline for the command [default: a file
    /// in $XDG_RUNTIME_DIR, /dev/shm or the temporary directory]. In $LEASEHOLD_GUARD_FILE.
    #[arg(long, env = "LEASEHOLD_GUARD_FILE", help_heading = "Lock")]
    pub guard_file: Option<PathBuf>,
    #[command(flatten)]
    pub log: LogArgs,
    /// The command and its arguments: run once while holding the lock.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Validated settings of `leasehold lock`.
#[derive(Debug, Clone)]
pub struct LockSettings {
    /// The settings `leasehold run` would have with the same flags and the command.
    pub run: RunSettings,
    /// How long to try for the lock.
    pub wait: Duration,
}

impl LockArgs {
    /// Validates the lock settings: those of `leasehold run` with the same flags (the same
    /// rules, the same messages), and a command.
    pub fn resolve(
        &self,
        env: &Environment,
        url_from_command_line: bool,
    ) -> Result<LockSettings, CliError> {
        at_most(
            "wait",
            self.wait,
            "must be at most 1h: a Job that waits longer for its lock should run later instead",
        )?;
        if self.command.is_empty() {
            return Err(CliError::Exec {
                flag: "-- CMD",
                rule: "`leasehold lock` needs the command to run after `--`",
            });
        }
        let run = RunArgs {
            redis: self.redis.clone(),
            lease: self.lease.clone(),
            identity: self.identity.clone(),
            timing: self.timing.clone(),
            // No endpoints: a lock serves nothing.
            http: HttpArgs {
                http_addr: ([127, 0, 0, 1], 0).into(),
                readiness: ReadinessMode::Member,
            },
            kube: self.kube.clone(),
            exec: ExecArgs {
                grace_period: self.grace_period,
                restart_command: false,
            },
            candidacy: CandidacyArgs::default(),
            log: self.log.clone(),
            guard_file: self.guard_file.clone(),
            command: self.command.clone(),
        }
        .resolve(env, url_from_command_line)?;
        Ok(LockSettings {
            run,
            wait: self.wait,
        })
    }
}
