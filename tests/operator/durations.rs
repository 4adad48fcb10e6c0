//! Durations refused through the real binary: one that does not parse is answered with what a
//! duration is, and one past its upper bound (an hour) is refused where a binary without the
//! rule would run with it.

use crate::refusal::{refused, run_refused, run_refused_not_run};

#[test]
fn a_duration_that_does_not_parse_is_answered_with_what_a_duration_is() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--lease-duration", "soon"],
            "invalid value 'soon' for '--lease-duration <LEASE_DURATION>': not a number and a unit; expected a duration such as 15s, 500ms or 2m",
        ),
        (
            &["--renew-deadline", "1,5s"],
            "invalid value '1,5s' for '--renew-deadline <RENEW_DEADLINE>': not a number and a unit; expected a duration such as 15s, 500ms or 2m",
        ),
        (
            &["--retry-period", ""],
            "invalid value '' for '--retry-period <RETRY_PERIOD>': empty; expected a duration such as 15s, 500ms or 2m",
        ),
        (
            &["--retry-period", "0s"],
            "--retry-period 0s is too short: it must be at least 10ms",
        ),
        (
            &["--lease-duration", "0s"],
            "--lease-duration 0s is too short: it must be at least 10ms",
        ),
    ];
    for (args, want) in cases {
        run_refused(args, want);
    }
    refused(
        &["run", "--lease-name", "web", "--kubernetes", "off"],
        &[("LEASEHOLD_GRACE_PERIOD", "s")],
        "invalid value 's' for '--grace-period <GRACE_PERIOD>': not a number and a unit",
    );
}

#[test]
fn durations_past_their_upper_bound_are_refused_with_exit_code_2() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--lease-duration", "1000000h"],
            "--lease-duration 114years 28days 4h: must be at most 1h: a leader that dies without releasing holds the lease this long",
        ),
        (
            &["--lease-duration", "1h 1s"],
            "--lease-duration 1h 1s: must be at most 1h",
        ),
        (
            &["--renew-deadline", "2h"],
            "--renew-deadline 2h: must be at most 1h, like the lease duration that it must be shorter than",
        ),
        (
            &["--retry-period", "2h"],
            "--retry-period 2h: must be at most 1h, like the lease duration",
        ),
        (
            &["--redis-wait-timeout", "2h"],
            "--redis-wait-timeout 2h: must be at most 1h",
        ),
        (
            &[
                "--grace-period",
                "100000000000s",
                "--",
                "sh",
                "-c",
                "sleep 60",
            ],
            "--grace-period 3168years 9months 21days 10h 44m 16s: must be at most 1h: the shutdown bound and the pod's terminationGracePeriodSeconds are computed from it",
        ),
        (
            &["--grace-period", "2h"],
            "--grace-period 2h: must be at most 1h",
        ),
    ];
    for (args, want) in cases {
        run_refused_not_run(args, want);
    }
    refused(
        &[
            "guard",
            "--guard-file",
            "/nonexistent/guard",
            "--valid-for",
            "2h",
        ],
        &[],
        "--valid-for 2h: must be at most 1h: no term stays valid longer than a lease duration",
    );
}

/// The command is killed 100 ms before its term's validity deadline, and a renewal moves that
/// deadline only when its answer comes, a retry period after the last and as late as an
/// attempt's bound: with a lease shorter than all three, every term would start the command and
/// kill it at once. 124 ms passed a rule without the attempt's bound, and restarted the command
/// about 20 times a second against a local Redis.
#[test]
fn a_lease_too_short_for_its_command_is_refused() {
    let timing = [
        "--lease-duration",
        "124ms",
        "--renew-deadline",
        "100ms",
        "--retry-period",
        "20ms",
    ];
    let mut with_command = timing.to_vec();
    with_command.extend(["--", "sh", "-c", "sleep 60"]);
    run_refused_not_run(
        &with_command,
        "--lease-duration `124ms`: with a command after `--`, must be greater than 156.902357ms (the drift margin, --retry-period, a renewal attempt's bound and 100 ms)",
    );
}
