//! Values from the environment, refused like flags through the real binary: the message names
//! the variable they came from, and switches read as Kubernetes users write them (`true`, `1`,
//! `yes`, `on` and their opposites, in any case).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use harness::replica::run_to_end;

use crate::refusal::{refused, refused_with};

#[test]
fn environment_values_are_validated_like_flags() {
    refused(
        &["run", "--lease-name", "web", "--kubernetes", "off"],
        &[("LEASEHOLD_LEASE_DURATION", "soon")],
        "invalid value 'soon' for '--lease-duration <LEASE_DURATION>'",
    );
    refused(
        &["run", "--lease-name", "web", "--kubernetes", "off"],
        &[("LEASEHOLD_RENEW_DEADLINE", "20s")],
        "--lease-duration 15s must be greater than --renew-deadline 20s (rule: lease duration > renew deadline > retry period × 1.2) (the value comes from $LEASEHOLD_RENEW_DEADLINE)",
    );
}

#[test]
fn a_bad_value_from_the_environment_names_the_variable() {
    let base = ["run", "--kubernetes", "off", "--lease-name", "web"];
    for (variable, value, want) in [
        (
            "LEASEHOLD_LEASE_DURATION",
            "soon",
            "invalid value 'soon' for '--lease-duration",
        ),
        (
            "LEASEHOLD_DRIFT_FACTOR",
            "much",
            "invalid value 'much' for '--drift-factor",
        ),
        (
            "LEASEHOLD_NO_EVENTS",
            "maybe",
            "invalid value 'maybe' for '--no-events",
        ),
    ] {
        refused(&base, &[(variable, value)], want);
        refused(
            &base,
            &[(variable, value)],
            &format!("the value comes from ${variable}"),
        );
    }
}

/// A value typed on the command line, by its short flag too, is not said to come from the
/// variable that holds the same value.
#[test]
fn a_typed_value_is_not_said_to_come_from_the_variable() {
    for typed in [&["--output", "nope"][..], &["-o", "nope"], &["-onope"]] {
        let args = [&["status", "--lease-name", "web"][..], typed].concat();
        let (code, _, stderr) = run_to_end(&args, &[("LEASEHOLD_OUTPUT", "nope")]);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(
            stderr.contains("invalid value 'nope' for '--output"),
            "{stderr}"
        );
        assert!(!stderr.contains("LEASEHOLD_OUTPUT"), "{args:?}: {stderr}");
    }
}

/// A value that clap takes and a later rule refuses names its variable too, and clap's refusal
/// names the variable of the subcommand that was run (`lock`'s `--wait`, not `step-down`'s).
#[test]
fn a_value_from_the_environment_refused_after_parsing_names_the_variable() {
    refused(
        &["status", "--lease-name", "web"],
        &[("LEASEHOLD_KEY_PREFIX", "a b")],
        "(the value comes from $LEASEHOLD_KEY_PREFIX)",
    );
    // An empty variable (a ConfigMap's empty key) would put this replica's lease under other
    // keys than its peers'.
    refused(
        &["status", "--lease-name", "web"],
        &[("LEASEHOLD_KEY_PREFIX", "")],
        "--key-prefix ``: must not be empty (the default is `leasehold:`) (the value comes from $LEASEHOLD_KEY_PREFIX)",
    );
    refused(
        &["run", "--kubernetes", "off", "--lease-name", "web"],
        &[("LEASEHOLD_REDIS_URL", "http://x")],
        "(the value comes from $LEASEHOLD_REDIS_URL)",
    );
    refused(
        &[
            "lock",
            "--kubernetes",
            "off",
            "--lease-name",
            "web",
            "--",
            "true",
        ],
        &[("LEASEHOLD_LOCK_WAIT", "-2s")],
        "the value comes from $LEASEHOLD_LOCK_WAIT",
    );
}

#[test]
fn switches_in_the_environment_read_as_kubernetes_users_write_them() {
    let base = ["run", "--kubernetes", "off", "--lease-name", "web"];
    for on in ["true", "TRUE", "True", "1", "yes", "Yes", "on", "ON"] {
        refused(
            &base,
            &[("LEASEHOLD_RESTART_COMMAND", on)],
            "--restart-command: needs a command after `--`",
        );
    }
    // Off, the switch lets the run go on to the next rule, the status file's.
    let mut with_status_file = base.to_vec();
    with_status_file.extend(["--status-file", "/nonexistent/dir/status"]);
    for off in ["false", "FALSE", "0", "no", "No", "off", "OFF"] {
        refused(
            &with_status_file,
            &[("LEASEHOLD_RESTART_COMMAND", off)],
            "--status-file `/nonexistent/dir/status`",
        );
    }
}

/// A variable leasehold reads that is not UTF-8 is refused by name, never read as unset: a
/// namespace or pod name taken as absent would put this replica on another lease (`default/…`)
/// or under another identity than its peers'.
#[test]
fn a_variable_that_is_not_utf8_is_refused_by_name() {
    let garbled = OsStr::from_bytes(b"pr\xffd");
    let redis = ["--redis-url", "redis://127.0.0.1:1"];
    let status = [&["status", "--lease-name", "web"][..], &redis].concat();
    refused_with(
        &status,
        &[("POD_NAMESPACE", garbled)],
        "--namespace `pr\u{fffd}d`: must be UTF-8 text (the value comes from $POD_NAMESPACE)",
    );
    let lock = [
        &["lock", "--kubernetes", "off", "--lease-name", "web"][..],
        &redis,
        &["--", "true"],
    ]
    .concat();
    refused_with(
        &lock,
        &[("POD_NAME", garbled)],
        "--identity `pr\u{fffd}d`: must be UTF-8 text (the value comes from $POD_NAME)",
    );
    refused_with(
        &status,
        &[("LEASEHOLD_KEY_PREFIX", garbled)],
        "the value of $LEASEHOLD_KEY_PREFIX is not UTF-8",
    );
    // A flag of a few possible values says the value it could not read, and where it is.
    refused_with(
        &status,
        &[("LEASEHOLD_OUTPUT", garbled)],
        "the value of $LEASEHOLD_OUTPUT is not UTF-8",
    );
    let run = [&["run", "--lease-name", "web"][..], &redis].concat();
    refused_with(
        &run,
        &[("LEASEHOLD_REDIS_EVICTION", garbled)],
        "the value of $LEASEHOLD_REDIS_EVICTION is not UTF-8",
    );
}
