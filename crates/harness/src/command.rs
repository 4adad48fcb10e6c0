//! The command line of a `leasehold run` replica: who it is, which lease on which Redis, its
//! HTTP address and timing, and what it runs while leading; Kubernetes off and JSON logs unless
//! the caller says otherwise.

use std::ffi::{OsStr, OsString};
use std::net::SocketAddr;
use std::process::Command;

use leasehold::elector::Timing;

/// The variables of the caller's environment that leasehold would read as its own: its flags'
/// variables (`LEASEHOLD_*`) and the pod's name and namespace.
fn is_leaseholds(key: &OsStr) -> bool {
    let key = key.to_string_lossy();
    key.starts_with("LEASEHOLD_") || key == "POD_NAME" || key == "POD_NAMESPACE"
}

/// `program` (the leasehold binary) as a command whose environment holds none of the caller's
/// leasehold variables, so that only what the caller passes configures it.
pub fn leasehold_command(program: impl AsRef<OsStr>) -> Command {
    scrubbed(Command::new(program))
}

fn scrubbed(mut cmd: Command) -> Command {
    for (key, _) in std::env::vars_os() {
        if is_leaseholds(&key) {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// The flags of `timing`: `--lease-duration`, `--renew-deadline` and `--retry-period` in
/// milliseconds, and `--drift-factor` when it is not leasehold's default.
pub fn timing_flags(timing: &Timing) -> Vec<String> {
    let mut flags = vec![
        "--lease-duration".into(),
        format!("{}ms", timing.lease_duration.as_millis()),
        "--renew-deadline".into(),
        format!("{}ms", timing.renew_deadline.as_millis()),
        "--retry-period".into(),
        format!("{}ms", timing.retry_period.as_millis()),
    ];
    if timing.drift_factor != Timing::default().drift_factor {
        flags.extend(["--drift-factor".into(), timing.drift_factor.to_string()]);
    }
    flags
}

/// `leasehold run` for one replica, built flag by flag; [`build`](Self::build) gives the
/// command.
pub struct RunCommand {
    cmd: Command,
    flags: Vec<OsString>,
    command: Vec<OsString>,
}

impl RunCommand {
    /// `leasehold run` with the binary at `program`.
    pub fn new(program: impl AsRef<OsStr>) -> Self {
        Self::wrapping(Command::new(program))
    }

    /// `leasehold run` from `cmd`: the binary, or a command that runs it with the arguments
    /// added to it (as `testbed::hosts::Hosts::command` does). Its environment loses the
    /// caller's leasehold variables.
    pub fn wrapping(cmd: Command) -> Self {
        let mut cmd = scrubbed(cmd);
        cmd.arg("run");
        Self {
            cmd,
            flags: Vec::new(),
            command: Vec::new(),
        }
    }

    /// `--redis-url`.
    pub fn redis_url(self, url: &str) -> Self {
        self.args(["--redis-url", url])
    }

    /// `--lease-name`.
    pub fn lease(self, name: &str) -> Self {
        self.args(["--lease-name", name])
    }

    /// `--identity`.
    pub fn identity(self, name: &str) -> Self {
        self.args(["--identity", name])
    }

    /// `--http-addr`.
    pub fn http_addr(self, addr: SocketAddr) -> Self {
        self.args(["--http-addr".to_owned(), addr.to_string()])
    }

    /// The timing's flags ([`timing_flags`]).
    pub fn timing(self, timing: &Timing) -> Self {
        self.args(timing_flags(timing))
    }

    /// More flags, as they are.
    pub fn args(mut self, args: impl IntoIterator<Item = impl AsRef<OsStr>>) -> Self {
        self.flags
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// `flag value`, unless a flag given so far names `flag` (as `--flag value` or
    /// `--flag=value`).
    pub fn default_arg(self, flag: &str, value: &str) -> Self {
        if self.names(flag) {
            self
        } else {
            self.args([flag, value])
        }
    }

    /// Whether a flag given so far is `flag`.
    pub fn names(&self, flag: &str) -> bool {
        self.flags.iter().any(|a| {
            let a = a.to_string_lossy();
            a == flag
                || a.strip_prefix(flag)
                    .is_some_and(|rest| rest.starts_with('='))
        })
    }

    /// The command leasehold runs while it leads (exec mode), after `--`; none when empty.
    pub fn command(mut self, command: impl IntoIterator<Item = impl AsRef<OsStr>>) -> Self {
        self.command
            .extend(command.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// The command: the flags given, `--kubernetes off` and `--log-format json` unless given,
    /// then `--` and the leader's command when there is one.
    pub fn build(self) -> Command {
        let this = self
            .default_arg("--kubernetes", "off")
            .default_arg("--log-format", "json");
        let mut cmd = this.cmd;
        cmd.args(this.flags);
        if !this.command.is_empty() {
            cmd.arg("--").args(this.command);
        }
        cmd
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn args(cmd: &Command) -> Vec<String> {
        cmd.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn a_replica_gets_kubernetes_off_and_json_logs_unless_it_says_otherwise() {
        let plain = RunCommand::new("leasehold").identity("a").build();
        assert_eq!(
            args(&plain),
            [
                "run",
                "--identity",
                "a",
                "--kubernetes",
                "off",
                "--log-format",
                "json"
            ]
        );
        let own = RunCommand::new("leasehold")
            .args(["--kubernetes=auto", "--log-format", "text"])
            .command(["sleep", "1"])
            .build();
        assert_eq!(
            args(&own),
            [
                "run",
                "--kubernetes=auto",
                "--log-format",
                "text",
                "--",
                "sleep",
                "1"
            ]
        );
    }

    #[test]
    fn the_timing_is_three_flags_in_milliseconds_and_the_drift_only_when_not_the_default() {
        let timing = Timing {
            lease_duration: Duration::from_millis(1500),
            renew_deadline: Duration::from_millis(900),
            retry_period: Duration::from_millis(250),
            ..Timing::default()
        };
        assert_eq!(
            timing_flags(&timing),
            [
                "--lease-duration",
                "1500ms",
                "--renew-deadline",
                "900ms",
                "--retry-period",
                "250ms"
            ]
        );
        let drifting = Timing {
            drift_factor: 0.05,
            ..timing
        };
        assert_eq!(timing_flags(&drifting)[6..], ["--drift-factor", "0.05"]);
    }

    #[test]
    fn the_callers_leasehold_variables_are_not_handed_down() {
        let cmd = leasehold_command("leasehold");
        for (key, value) in cmd.get_envs() {
            assert!(value.is_none() || !is_leaseholds(key), "{key:?}");
        }
    }
}
