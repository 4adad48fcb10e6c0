//! The flags of the candidate check (`leasehold run`), and their validation into a
//! [`CandidateCheck`]: each refusal names the flag, the value and the rule.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use clap::Args;

use super::resolve::at_most;
use super::{CliError, parse_duration};
use crate::candidacy::{
    CandidateCheck, DEFAULT_FAILURE_THRESHOLD, DEFAULT_PERIOD, DEFAULT_SUCCESS_THRESHOLD,
    DEFAULT_TIMEOUT, Probe, Scope,
};
use crate::elector::Timing;

/// Health-gated candidacy.
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
    #[arg(long, env = "LEASEHOLD_CANDIDATE_CHECK_PERIOD", value_parser = parse_duration, allow_hyphen_values = true)]
    pub candidate_check_period: Option<Duration>,
    /// The longest a check may take; longer is a failure (timeoutSeconds) [default: 1s].
    #[arg(long, env = "LEASEHOLD_CANDIDATE_CHECK_TIMEOUT", value_parser = parse_duration, allow_hyphen_values = true)]
    pub candidate_check_timeout: Option<Duration>,
    /// Failures in a row that put this replica out of the election; a leader steps down
    /// (failureThreshold) [default: 3].
    #[arg(
        long,
        env = "LEASEHOLD_CANDIDATE_CHECK_FAILURE_THRESHOLD",
        value_name = "N",
        allow_negative_numbers = true
    )]
    pub candidate_check_failure_threshold: Option<u32>,
    /// Successes in a row that bring it back (successThreshold) [default: 1].
    #[arg(
        long,
        env = "LEASEHOLD_CANDIDATE_CHECK_SUCCESS_THRESHOLD",
        value_name = "N",
        allow_negative_numbers = true
    )]
    pub candidate_check_success_threshold: Option<u32>,
    /// Time before the first check (initialDelaySeconds): from start, or with a command from each
    /// start of the command, as its start-up grace [default: 0s].
    #[arg(long, env = "LEASEHOLD_CANDIDATE_CHECK_INITIAL_DELAY", value_parser = parse_duration, allow_hyphen_values = true)]
    pub candidate_check_initial_delay: Option<Duration>,
}

const CHECK_BOUND: &str =
    "must be at most 1h: a check that slow never puts a sick replica out of the election";

const LOOPBACK_RULE: &str = "must be an http:// URL to a loopback address (127.0.0.1, [::1] or localhost) with an optional port and path: the check is this pod's own";

impl CandidacyArgs {
    /// The validated check, or `None` without one. `command` says whether a singleton command
    /// runs (the check is then the command's); `lease_duration` is its hold-off after an
    /// unhealthy term.
    pub fn resolve(
        &self,
        command: bool,
        lease_duration: Duration,
    ) -> Result<Option<CandidateCheck>, CliError> {
        let probe = match (&self.candidate_check, &self.candidate_check_command) {
            (Some(url), _) => Some(parse_url(url)?),
            (None, Some(cmd)) if cmd.trim().is_empty() => {
                return Err(CliError::value(
                    "candidate-check-command",
                    cmd,
                    "must not be empty: a shell command that exits 0 while healthy",
                ));
            }
            (None, Some(cmd)) => {
                // Without a shell every check fails and no replica leads (leasehold's own image
                // has none).
                crate::exec::find_program("/bin/sh").map_err(|e| {
                    let rule = format!("runs by /bin/sh -c, and /bin/sh {e}: where there is no shell, use --candidate-check (HTTP)");
                    CliError::value("candidate-check-command", crate::exec::hidden(cmd), rule)
                })?;
                Some(Probe::Command(cmd.clone()))
            }
            (None, None) => None,
        };
        let Some(probe) = probe else {
            return self.refuse_tuning_without_a_check().map(|()| None);
        };
        let period = self.candidate_check_period.unwrap_or(DEFAULT_PERIOD);
        let timeout = self.candidate_check_timeout.unwrap_or(DEFAULT_TIMEOUT);
        // Each check forks a shell or opens a connection: a period of nanoseconds is a core
        // kept busy forking, so both are bounded below as the lease's timing is.
        if period < Timing::MIN {
            return Err(CliError::value(
                "candidate-check-period",
                humantime::format_duration(period),
                "must be at least 10ms",
            ));
        }
        if timeout < Timing::MIN || timeout > period {
            return Err(CliError::value(
                "candidate-check-timeout",
                humantime::format_duration(timeout),
                format!(
                    "must be at least 10ms and no longer than --candidate-check-period ({})",
                    humantime::format_duration(period)
                ),
            ));
        }
        at_most("candidate-check-period", period, CHECK_BOUND)?;
        let initial_delay = self.candidate_check_initial_delay.unwrap_or_default();
        at_most("candidate-check-initial-delay", initial_delay, CHECK_BOUND)?;
        // A replica is judged within threshold × period: at most an hour, as any duration.
        let threshold = |flag, value: Option<u32>, default| match value.unwrap_or(default) {
            0 => Err(CliError::value(flag, 0, "must be at least 1")),
            n if period.saturating_mul(n) > Timing::MAX => Err(CliError::value(
                flag,
                n,
                format!(
                    "times --candidate-check-period ({}) must be at most 1h: a check that takes longer to judge never puts a sick replica out",
                    humantime::format_duration(period)
                ),
            )),
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
            initial_delay,
            scope: if command {
                Scope::Command {
                    hold_off: lease_duration,
                }
            } else {
                Scope::Replica
            },
        }))
    }

    fn refuse_tuning_without_a_check(&self) -> Result<(), CliError> {
        let time = |d: Option<Duration>| d.map(|d| humantime::format_duration(d).to_string());
        let count = |n: Option<u32>| n.map(|n| n.to_string());
        let given = [
            ("candidate-check-period", time(self.candidate_check_period)),
            (
                "candidate-check-timeout",
                time(self.candidate_check_timeout),
            ),
            (
                "candidate-check-failure-threshold",
                count(self.candidate_check_failure_threshold),
            ),
            (
                "candidate-check-success-threshold",
                count(self.candidate_check_success_threshold),
            ),
            (
                "candidate-check-initial-delay",
                time(self.candidate_check_initial_delay),
            ),
        ];
        match given.into_iter().find_map(|(f, v)| v.map(|v| (f, v))) {
            Some((flag, value)) => Err(CliError::value(
                flag,
                value,
                "only with --candidate-check or --candidate-check-command",
            )),
            None => Ok(()),
        }
    }
}

/// `http://HOST[:PORT][/PATH]` with a loopback HOST, as a probe.
fn parse_url(url: &str) -> Result<Probe, CliError> {
    let shown = crate::exec::hidden(url);
    let bad = |rule: &str| CliError::value("candidate-check", &shown, rule);
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| bad(LOOPBACK_RULE))?;
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("must not contain spaces or control characters"));
    }
    let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
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
    // An IPv6 address is in brackets; the port, if any, after them.
    let (host, port) = match authority.strip_prefix('[').and_then(|r| r.split_once(']')) {
        Some((ip, "")) => (ip, None),
        Some((ip, rest)) => (
            ip,
            Some(rest.strip_prefix(':').ok_or_else(|| bad(LOOPBACK_RULE))?),
        ),
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let port = match port.map(str::parse::<u16>) {
        None => 80,
        Some(Ok(p)) if p > 0 => p,
        Some(_) => return Err(bad("the port must be a number from 1 to 65535")),
    };
    let ip = match host {
        "localhost" => IpAddr::V4(Ipv4Addr::LOCALHOST),
        h => h.parse::<IpAddr>().map_err(|_| bad(LOOPBACK_RULE))?,
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
        ok("http://[::1]/healthz", "[::1]:80", "/healthz");
        ok("http://[::1]", "[::1]:80", "/");
        // A fragment is the client's own, never sent.
        ok(
            "http://127.0.0.1:8081/healthz#top",
            "127.0.0.1:8081",
            "/healthz",
        );
        ok("http://127.0.0.1:8081#top", "127.0.0.1:8081", "/");
        let shown = parse_url("http://127.0.0.1:8081/h?token=abc&full").map(|p| p.to_string());
        assert_eq!(
            shown.ok().as_deref(),
            Some("GET http://127.0.0.1:8081/h?token=***&full=***"),
            "a query's values are not shown: one may be a token"
        );
        for bad in [
            "http://[::1]x/",
            "http://::1/",
            "http://[::1]:/",
            "https://127.0.0.1:8443/healthz",
            "http://10.0.0.7:8080/healthz",
            "http://example.com/healthz",
            "http://127.0.0.1:0/",
            "http://127.0.0.1:99999/",
            "http://user:pw@127.0.0.1/",
            "http://127.0.0.1/a b",
            "127.0.0.1:8080",
        ] {
            let Err(CliError::Value { flag, value, .. }) = parse_url(bad) else {
                panic!("{bad} accepted");
            };
            assert_eq!(flag, "candidate-check", "{bad}");
            let shown = bad.replace(":pw@", ":***@");
            assert_eq!(value, shown, "the refusal shows no password");
        }
    }
}
