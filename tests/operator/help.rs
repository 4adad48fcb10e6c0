//! `leasehold COMMAND --help` (and `-h`): every flag group under its heading, each flag under
//! its own group's, and never a secret that the environment holds.

use harness::replica::run_to_end;

#[test]
fn help_documents_every_flag_group_and_exits_zero() {
    let (code, stdout, _) = run_to_end(&["run", "--help"], &[]);
    assert_eq!(code, 0);
    for heading in [
        "Redis:",
        "Lease:",
        "Timing",
        "HTTP",
        "Kubernetes:",
        "Singleton command",
        "Logs:",
    ] {
        assert!(stdout.contains(heading), "missing {heading} in:\n{stdout}");
    }
    for flag in [
        "--redis-url",
        "--redis-password-file",
        "--lease-duration",
        "--readiness",
        "--grace-period",
        "[env: LEASEHOLD_LEASE_DURATION]",
    ] {
        assert!(stdout.contains(flag), "missing {flag}");
    }
}

/// The heading each flag shows under in `leasehold COMMAND -h`: a flag declared after a group
/// of flags must not fall under that group's heading.
#[test]
fn each_flag_shows_under_its_own_heading() {
    let cases: &[(&str, &str, &str)] = &[
        ("run", "--lease-duration", "Timing"),
        ("run", "--http-addr", "Status: HTTP"),
        ("run", "--grace-period", "Singleton command"),
        ("run", "--guard-file", "Singleton command"),
        ("status", "--lease-name", "Lease"),
        ("status", "--output", "Output"),
        ("step-down", "--output", "Output"),
        ("step-down", "--to", "Handover"),
        ("remove-keys", "--output", "Output"),
        ("lock", "--wait", "Lock"),
    ];
    for (command, flag, heading) in cases {
        let (code, stdout, stderr) = run_to_end(&[command, "-h"], &[]);
        assert_eq!(code, 0, "{command}: {stderr}");
        let mut under = None;
        for line in stdout.lines() {
            if !line.starts_with(' ') && line.ends_with(':') {
                under = Some(line);
            } else if line.trim_start().starts_with('-')
                && line.split([' ', ',']).any(|word| word == *flag)
            {
                break;
            }
        }
        assert!(
            under.is_some_and(|h| h.starts_with(heading)),
            "{command} -h shows {flag} under {under:?}, not {heading}:\n{stdout}"
        );
    }
}

/// Help shows which variable each flag reads, never the value it holds: in a pod the chart fills
/// `LEASEHOLD_REDIS_URL` from a Secret, and `leasehold status --help` printed its password. A
/// refused health-check URL hides its query's values as the logs do (one may be a token).
#[test]
fn help_and_refusals_never_show_a_secret_from_the_environment() {
    let env = [
        ("LEASEHOLD_REDIS_URL", "redis://:hunter2@redis:6379"),
        (
            "LEASEHOLD_CANDIDATE_CHECK",
            "http://127.0.0.1:8081/h?token=abc123",
        ),
    ];
    for args in [&["status", "-h"][..], &["run", "--help"], &["lock", "-h"]] {
        let (code, stdout, stderr) = run_to_end(args, &env);
        assert_eq!(code, 0, "{args:?}: {stderr}");
        for secret in ["hunter2", "abc123"] {
            assert!(
                !stdout.contains(secret),
                "{args:?} shows {secret}:\n{stdout}"
            );
        }
    }
    let check = [(
        "LEASEHOLD_CANDIDATE_CHECK",
        "http://10.0.0.1:1/?token=SECRETTOK",
    )];
    let (code, _, stderr) = run_to_end(
        &["run", "--kubernetes", "off", "--lease-name", "web"],
        &check,
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("loopback") && !stderr.contains("SECRETTOK"),
        "{stderr}"
    );
}

/// `--version` (`-V`) says the same for every subcommand as for the binary, as REFERENCE shows
/// it (`leasehold 0.2.0 (4ce6637)`), not clap's `leasehold-status 0.2.0 (…)`.
#[test]
fn every_subcommand_says_its_version_as_the_binary_does() {
    let (code, binary, _) = run_to_end(&["--version"], &[]);
    assert_eq!(code, 0);
    assert!(binary.starts_with("leasehold "), "{binary}");
    for command in ["run", "status", "guard", "step-down", "remove-keys", "lock"] {
        let (code, stdout, stderr) = run_to_end(&[command, "-V"], &[]);
        assert_eq!(code, 0, "{command}: {stderr}");
        assert_eq!(stdout, binary, "{command} -V");
    }
}
