//! The flags of the candidate check and of the status file (`leasehold run`), and their
//! validation into a [`CandidateCheck`]: each refusal names the flag, the value and the rule.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::candidacy::{
    CandidateCheck, DEFAULT_FAILURE_THRESHOLD, DEFAULT_PERIOD, DEFAULT_SUCCESS_THRESHOLD,
    DEFAULT_TIMEOUT, Probe, Scope,
};

/// Health-gated candidacy and the status file.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Candidate check")]
pub struct CandidacyArgs {
    /// Stand for election only while `GET URL` answers 2xx: `http://127.0.0.1:PORT/PATH`
    /// (loopback only: the check is this pod's own). With a command after `--`, it checks the
    /// command, only while leading.
    #[arg(
        long,
        env = "LEASEHOLD_CANDIDATE_CHECK",
        value_name = "URL",
        conflicts_with = "candidate_check_command"
    )]
    pub candidate_check: Option<String>,
    /// Stand for election only while `/bin/sh -c CMD` exits 0 (the check's other form).
    #[arg(long, env = "LEASEHOLD_CANDIDATE_CHECK_COMMAND", value_name = "CMD")]
    pub candidate_check_command: Option<String>,
    /// Time between two checks (Kubernetes' periodSeconds) [default: 10s].
    #[arg(long, env = "LEASEHOLD_CANDIDATE_CHECK_PERIOD", value_parser = parse_duration)]
    pub candidate_check_period: Option<Duration>,
    /// The longest a check may take; longer is a failure (timeoutSeconds) [default: 1s].
    #[arg(long, env = "LEASEHOLD_CANDIDATE_CHECK_TIMEOUT", value_parser = parse_duration)]
    pub candidate_check_timeout: Option<Duration>,
    /// Failures in a row that put this replica out of the election; a leader steps down
    /// (failureThreshold) [default: 3].
    #[arg(
        long,
        env = "LEASEHOLD_CANDIDATE_CHECK_FAILURE_THRESHOLD",
        value_name = "N"
    )]
    pub candidate_check_failure_threshold: Option<u32>,
    /// Successes in a row that bring it back (successThreshold) [default: 1].
    #[arg(
        long,
        env = "LEASEHOLD_CANDIDATE_CHECK_SUCCESS_THRESHOLD",
        value_name = "N"
    )]
    pub candidate_check_success_threshold: Option<u32>,
    /// Time before the first check (initialDelaySeconds): from start, or with a command from the
    /// start of each term, as the command's start-up grace [default: 0s].
    #[arg(long, env = "LEASEHOLD_CANDIDATE_CHECK_INITIAL_DELAY", value_parser = parse_duration)]
    pub candidate_check_initial_delay: Option<Duration>,
    /// Keep the election's state in this file (format `leasehold-status 2`: until when this
    /// replica leads, on the boot clock, with the reader's rule), rewritten atomically (a
    /// temporary file renamed over it) at every change and every renewal; for apps that share a
    /// volume with leasehold.
    #[arg(
        long,
        env = "LEASEHOLD_STATUS_FILE",
        value_name = "PATH",
        help_heading = "HTTP"
    )]
    pub status_file: Option<PathBuf>,
}

/// A refused candidate check or status file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--{flag} `{value}`: {rule}")]
pub struct CandidacyError {
    /// The flag.
    pub flag: &'static str,
    /// The value as given.
    pub value: String,
    /// The rule it breaks.
    pub rule: String,
}

fn refuse(flag: &'static str, value: impl ToString, rule: impl Into<String>) -> CandidacyError {
    CandidacyError {
        flag,
        value: value.to_string(),
        rule: rule.into(),
    }
}

fn parse_duration(value: &str) -> Result<Duration, String> {
    humantime::parse_duration(value.trim())
        .map_err(|e| format!("{e}; expected a duration such as 10s, 500ms or 1m"))
}

const LOOPBACK_RULE: &str = "must be an http:// URL to a loopback address (127.0.0.1, [::1] or localhost) with an optional port and path: the check is this pod's own";

impl CandidacyArgs {
    /// The validated check, or `None` without one. `command` says whether a singleton command
    /// runs (the check is then the command's); `lease_duration` is its hold-off after an
    /// unhealthy term.
    pub fn resolve(
        &self,
        command: bool,
        lease_duration: Duration,
    ) -> Result<Option<CandidateCheck>, CandidacyError> {
        let probe = match (&self.candidate_check, &self.candidate_check_command) {
            (Some(url), _) => Some(parse_url(url)?),
            (None, Some(cmd)) if cmd.trim().is_empty() => {
                return Err(refuse(
                    "candidate-check-command",
                    cmd,
                    "must not be empty: a shell command that exits 0 while healthy",
                ));
            }
            (None, Some(cmd)) => Some(Probe::Command(cmd.clone())),
            (None, None) => None,
        };
        let Some(probe) = probe else {
            return self.refuse_tuning_without_a_check().map(|()| None);
        };
        let period = self.candidate_check_period.unwrap_or(DEFAULT_PERIOD);
        let timeout = self.candidate_check_timeout.unwrap_or(DEFAULT_TIMEOUT);
        if period.is_zero() {
            return Err(refuse(
                "candidate-check-period",
                humantime::format_duration(period),
                "must be greater than zero",
            ));
        }
        if timeout.is_zero() || timeout > period {
            return Err(refuse(
                "candidate-check-timeout",
                humantime::format_duration(timeout),
                format!(
                    "must be greater than zero and no longer than --candidate-check-period ({})",
                    humantime::format_duration(period)
                ),
            ));
        }
        let threshold = |flag, value: Option<u32>, default| match value.unwrap_or(default) {
            0 => Err(refuse(flag, 0, "must be at least 1")),
            n => Ok(n),
        };
        Ok(Some(CandidateCheck {
            probe,
            period,
            timeout,
            failure_threshold: threshold(
                "candidate-check-failure-threshold",
                self.candidate_check_failure_threshold,
                DEFAULT_FAILURE_THRESHOLD,
            )?,
            success_threshold: threshold(
                "candidate-check-success-threshold",
                self.candidate_check_success_threshold,
                DEFAULT_SUCCESS_THRESHOLD,
            )?,
            initial_delay: self.candidate_check_initial_delay.unwrap_or_default(),
            scope: if command {
                Scope::Command {
                    hold_off: lease_duration,
                }
            } else {
                Scope::Replica
            },
        }))
    }

    /// The status file, refused when its directory does not exist.
    pub fn status_file(&self) -> Result<Option<PathBuf>, CandidacyError> {
        let Some(path) = &self.status_file else {
            return Ok(None);
        };
        let rule = "must name a file in an existing directory";
        let name = path.file_name().filter(|n| !n.is_empty());
        let dir = path.parent().map(|p| {
            if p.as_os_str().is_empty() {
                std::path::Path::new(".")
            } else {
                p
            }
        });
        match (name, dir) {
            (Some(_), Some(dir)) if dir.is_dir() => Ok(Some(path.clone())),
            _ => Err(refuse("status-file", path.display(), rule)),
        }
    }

    fn refuse_tuning_without_a_check(&self) -> Result<(), CandidacyError> {
        let given: [(&'static str, Option<String>); 5] = [
            (
                "candidate-check-period",
                self.candidate_check_period
                    .map(|d| humantime::format_duration(d).to_string()),
            ),
            (
                "candidate-check-timeout",
                self.candidate_check_timeout
                    .map(|d| humantime::format_duration(d).to_string()),
            ),
            (
                "candidate-check-failure-threshold",
                self.candidate_check_failure_threshold
                    .map(|n| n.to_string()),
            ),
            (
                "candidate-check-success-threshold",
                self.candidate_check_success_threshold
                    .map(|n| n.to_string()),
            ),
            (
                "candidate-check-initial-delay",
                self.candidate_check_initial_delay
                    .map(|d| humantime::format_duration(d).to_string()),
            ),
        ];
        match given.into_iter().find_map(|(f, v)| v.map(|v| (f, v))) {
            Some((flag, value)) => Err(refuse(
                flag,
                value,
                "only with --candidate-check or --candidate-check-command",
            )),
            None => Ok(()),
        }
    }
}

/// `http://HOST[:PORT][/PATH]` with a loopback HOST, as a probe.
fn parse_url(url: &str) -> Result<Probe, CandidacyError> {
    let bad = |rule: &str| refuse("candidate-check", url, rule);
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| bad(LOOPBACK_RULE))?;
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("must not contain spaces or control characters"));
    }
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_owned()
    };
    if authority.contains('@') {
        return Err(bad("must not carry a user or password"));
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(']') || authority.starts_with('[') => {
            match port.parse::<u16>() {
                Ok(p) if p > 0 => (host, p),
                _ => return Err(bad("the port must be a number from 1 to 65535")),
            }
        }
        _ => (authority, 80),
    };
    let ip = match host {
        "localhost" => IpAddr::V4(Ipv4Addr::LOCALHOST),
        h => h
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .map_err(|_| bad(LOOPBACK_RULE))?,
    };
    if !ip.is_loopback() {
        return Err(bad(LOOPBACK_RULE));
    }
    Ok(Probe::Http {
        addr: SocketAddr::new(ip, port),
        host: authority.to_owned(),
        path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_table() {
        let ok = |url: &str, addr: &str, path: &str| {
            let Ok(Probe::Http {
                addr: a, path: p, ..
            }) = parse_url(url)
            else {
                panic!("{url} refused");
            };
            assert_eq!((a.to_string().as_str(), p.as_str()), (addr, path), "{url}");
        };
        ok(
            "http://127.0.0.1:8081/healthz",
            "127.0.0.1:8081",
            "/healthz",
        );
        ok("http://localhost:9000", "127.0.0.1:9000", "/");
        ok(
            "http://[::1]:8080/ready?full=1",
            "[::1]:8080",
            "/ready?full=1",
        );
        ok("http://127.0.0.2/", "127.0.0.2:80", "/");
        ok("http://127.0.0.1:8081?x", "127.0.0.1:8081", "/?x");
        for bad in [
            "https://127.0.0.1:8443/healthz",
            "http://10.0.0.7:8080/healthz",
            "http://example.com/healthz",
            "http://127.0.0.1:0/",
            "http://127.0.0.1:99999/",
            "http://user:pw@127.0.0.1/",
            "http://127.0.0.1/a b",
            "127.0.0.1:8080",
        ] {
            let err = parse_url(bad).expect_err(bad);
            assert_eq!(err.flag, "candidate-check", "{bad}");
            assert_eq!(err.value, bad);
        }
    }
}
