//! The flags of the operator commands `leasehold step-down` (handover on demand), `leasehold
//! remove-keys` (a lease's keys, after uninstalling) and `leasehold lock` (a one-shot lock for
//! Jobs and CronJobs), validated into settings like the others.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args};

use super::resolve::{ContenderParts, at_least, at_most};
use super::settings::{Environment, LockSettings, RemoveKeysSettings, StepDownSettings};
use super::{CliError, ContenderArgs, KubeArgs, LogArgs, StatusArgs, parse_duration};
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
    /// How long to wait for another replica (or the named one) to lead, at least 1s; exit code 1
    /// after. The request to the leader lives as long.
    #[arg(long, env = "LEASEHOLD_STEP_DOWN_WAIT", default_value = "30s", value_parser = parse_duration, allow_hyphen_values = true, help_heading = "Handover")]
    pub wait: Duration,
}

impl StepDownArgs {
    /// Validates the step-down settings.
    pub fn resolve(&self, env: &Environment) -> Result<StepDownSettings, CliError> {
        let status = self.status.resolve(env)?;
        if let Some(to) = &self.to {
            if to == "-" {
                let rule = "is how the request says any replica: leave --to out for that";
                return Err(CliError::value("to", to, rule));
            }
            OwnerId::check_identity(to).map_err(|e| {
                CliError::value(
                    "to",
                    to,
                    format!("must be a replica's identity (its pod name): {e}"),
                )
            })?;
        }
        at_most(
            "wait",
            self.wait,
            "must be at most 1h: the request to the leader lives as long",
        )?;
        at_least(
            "wait",
            self.wait,
            Duration::from_secs(1),
            "must be at least 1s: the leader ends its term when it sees the request (at once, or at its next renewal when its release channel is down) and the successor leads a moment later; a wait too short to see that ends the term and then says the handover failed",
        )?;
        Ok(StepDownSettings {
            status,
            to: self.to.clone(),
            wait: self.wait,
        })
    }
}

/// `leasehold remove-keys`.
#[derive(Debug, Clone, Args)]
pub struct RemoveKeysArgs {
    #[command(flatten)]
    pub status: StatusArgs,
    /// Remove the keys even while a term may be valid (a holder, a term the state record
    /// names, a data-loss cooldown): only once every replica of the lease is gone, or a
    /// value that leasehold did not write must go.
    #[arg(long, env = "LEASEHOLD_REMOVE_KEYS_FORCE", action = ArgAction::SetTrue, help_heading = "Removal")]
    pub force: bool,
}

impl RemoveKeysArgs {
    /// Validates the removal settings.
    pub fn resolve(&self, env: &Environment) -> Result<RemoveKeysSettings, CliError> {
        Ok(RemoveKeysSettings {
            status: self.status.resolve(env)?,
            force: self.force,
        })
    }
}

/// `leasehold lock`.
#[derive(Debug, Clone, Args)]
pub struct LockArgs {
    #[command(flatten)]
    pub contender: ContenderArgs,
    #[command(flatten)]
    pub kube: KubeArgs,
    /// How long to try for the lock before giving up with exit code 75 [default: one try].
    #[arg(long, env = "LEASEHOLD_LOCK_WAIT", default_value = "0s", value_parser = parse_duration, allow_hyphen_values = true, help_heading = "Lock")]
    pub wait: Duration,
    /// Time the command gets between SIGTERM and SIGKILL when the lock is lost; never past the
    /// validity deadline.
    #[arg(long, env = "LEASEHOLD_GRACE_PERIOD", default_value = "10s", value_parser = parse_duration, allow_hyphen_values = true, help_heading = "Lock")]
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

impl LockArgs {
    /// Validates the lock settings: a contender's, as for `leasehold run` (the same rules, the
    /// same messages), and a command.
    pub fn resolve(&self, env: &Environment) -> Result<LockSettings, CliError> {
        at_most(
            "wait",
            self.wait,
            "must be at most 1h: a Job that waits longer for its lock should run later instead",
        )?;
        if self.command.is_empty() {
            return Err(CliError::Misplaced {
                flag: "-- CMD",
                rule: "`leasehold lock` needs the command to run after `--`",
            });
        }
        let parts = ContenderParts {
            kube: &self.kube,
            command: &self.command,
            grace_period: self.grace_period,
            restart_command: false,
            guard_file: self.guard_file.as_ref(),
        };
        Ok(LockSettings {
            contender: self.contender.resolve(parts, env)?,
            wait: self.wait,
        })
    }
}
