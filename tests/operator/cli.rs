//! Bad input through the real binary: every validation rule answers with one message that
//! names the flag, the value and the rule, and exit code 2, before anything connects.

use std::process::Command;
use std::time::Duration;

use harness::leasehold_bin;
use harness::replica::{assert_in_plain_words, exit_within, run_to_end};

fn refused(args: &[&str], env: &[(&str, &str)], want: &str) {
    let (code, _stdout, stderr) = run_to_end(args, env);
    assert_refusal(args, code, &stderr, want);
}

/// The run of `args` ended with exit code 2 and one message in plain words that says `want`.
fn assert_refusal(args: &[&str], code: i32, stderr: &str, want: &str) {
    assert_eq!(code, 2, "{args:?} exited {code}; stderr:\n{stderr}");
    assert!(
        stderr.contains(want),
        "{args:?}\n got: {stderr}\nwant: {want}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_in_plain_words(stderr);
}

/// `leasehold run` with a lease name from the environment (so that only the rule under test
/// can fail, and a flag can still override it) and `args`.
fn run_refused(args: &[&str], want: &str) {
    let mut full = vec!["run", "--kubernetes", "off"];
    full.extend_from_slice(args);
    refused(&full, &[("LEASEHOLD_LEASE_NAME", "web")], want);
}

#[test]
fn every_flag_rule_is_refused_with_exit_code_2() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--lease-duration", "15x"],
            "invalid value '15x' for '--lease-duration <LEASE_DURATION>'",
        ),
        (
            &["--lease-duration", "5s"],
            "--lease-duration 5s must be greater than --renew-deadline 10s (rule: lease duration > renew deadline > retry period × 1.2)",
        ),
        (
            &["--renew-deadline", "2s"],
            "--renew-deadline 2s must be greater than --retry-period × 1.2 2.4s",
        ),
        (
            &["--retry-period", "1ms"],
            "--retry-period 1ms is too short: it must be at least 10ms",
        ),
        (
            &["--drift-factor", "0.7"],
            "--drift-factor 0.7 must be at least 0 and below 0.5",
        ),
        (
            &[
                "--lease-duration",
                "100ms",
                "--renew-deadline",
                "60ms",
                "--retry-period",
                "49ms",
                "--drift-factor",
                "0.49",
            ],
            "the drift margin plus --retry-period",
        ),
        (
            &["--redis-url", "http://x"],
            "--redis-url `http://x`: the scheme must be redis://, rediss:// (TLS), unix://, redis+sentinel:// or redis+cluster://",
        ),
        (
            &["--redis-url", "redis://:hunter2@x"],
            "--redis-url `redis://:***@x`: a password on the command line shows in `ps`",
        ),
        (
            &["--redis-url", "redis://x:notaport"],
            "--redis-url `redis://x:notaport`:",
        ),
        (
            &["--redis-password-file", "/nonexistent/pw"],
            "--redis-password-file /nonexistent/pw: cannot read it",
        ),
        (
            &["--redis-username", " "],
            "--redis-username ``: must not be empty when given",
        ),
        (
            &["--lease-name", "a{b}"],
            "--lease-name `a{b}`: lease name `default/a{b}` contains '{'",
        ),
        (
            &["--key-prefix", "lh{}:"],
            "--key-prefix `lh{}:`: key prefix `lh{}:` contains '{'; braces are not allowed",
        ),
        (
            &["--key-prefix", "lh :"],
            "--key-prefix `lh :`: key prefix `lh :` contains ' '",
        ),
        (
            &["--namespace", "Bad_NS"],
            "--namespace `Bad_NS`: must be a DNS label",
        ),
        (
            &["--identity", "has space"],
            "--identity `has space`: identity `has space` contains ' '",
        ),
        (
            &["--leader-label", "bad key!"],
            "--leader-label `bad key!`: must be a Kubernetes label key",
        ),
        (
            &["--http-addr", "8080"],
            "invalid value '8080' for '--http-addr <HTTP_ADDR>'",
        ),
        (
            &["--readiness", "always"],
            "invalid value 'always' for '--readiness <READINESS>'",
        ),
        (
            &["--log-format", "xml"],
            "invalid value 'xml' for '--log-format <LOG_FORMAT>'",
        ),
        (
            &["--log", "leasehold=loud"],
            "--log `leasehold=loud`: not a valid filter",
        ),
        (
            &["--restart-command"],
            "--restart-command: needs a command after `--`",
        ),
        (
            &["--grace-period", "0s", "--", "sh"],
            "--grace-period 0s: must be greater than zero",
        ),
        (
            &["--", "no-such-program-x"],
            "-- CMD `no-such-program-x`: not found",
        ),
        (
            &["--", ""],
            "-- CMD: the command after `--` must not be empty",
        ),
        (&["--no-such-flag"], "unexpected argument '--no-such-flag'"),
        (
            &["--redis-url", "redis+sentinel://s1:26379"],
            "name the master after the Sentinels: redis+sentinel://host:26379/mymaster",
        ),
        (
            &["--redis-url", "redis+sentinel://s1/m/x"],
            "the database after the master name must be a number",
        ),
        (
            &["--redis-url", "redis+cluster://n1:7000/2"],
            "a Redis Cluster has only database 0",
        ),
        (
            &["--redis-username", "a", "--redis-username-file", "/x"],
            "the argument '--redis-username <REDIS_USERNAME>' cannot be used with '--redis-username-file <REDIS_USERNAME_FILE>'",
        ),
        (
            &["--redis-username-file", "/nonexistent/u"],
            "--redis-username-file /nonexistent/u: cannot read it",
        ),
        (
            &[
                "--redis-ca-file",
                "/nonexistent/ca.pem",
                "--redis-url",
                "rediss://x",
            ],
            "--redis-ca-file /nonexistent/ca.pem: cannot read it",
        ),
        (
            &[
                "--redis-client-cert-file",
                "/etc/hostname",
                "--redis-url",
                "rediss://x",
            ],
            "mutual TLS needs both --redis-client-cert-file and --redis-client-key-file",
        ),
        (
            &["--redis-wait-replicas", "1", "--redis-wait-timeout", "3s"],
            "--redis-wait-timeout 3s must be shorter than --retry-period 2s",
        ),
        (
            &["--redis-wait-replicas", "1", "--redis-wait-timeout", "0s"],
            "--redis-wait-timeout 0s: must be greater than zero",
        ),
        (
            &["--redis-wait-replicas", "many"],
            "invalid value 'many' for '--redis-wait-replicas <REDIS_WAIT_REPLICAS>'",
        ),
        (
            &["--redis-eviction", "ignore"],
            "invalid value 'ignore' for '--redis-eviction <REDIS_EVICTION>'",
        ),
    ];
    for (args, want) in cases {
        run_refused(args, want);
    }
}

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

/// `leasehold run` without Kubernetes, against a Redis that is not there, with `args`.
fn run_without_redis(args: &[&str]) -> Command {
    let mut cmd = Command::new(leasehold_bin());
    cmd.args([
        "run",
        "--kubernetes",
        "off",
        "--redis-url",
        "redis://127.0.0.1:1",
    ])
    .args(args);
    cmd
}

/// Like [`run_refused`], for values that a binary without the rule would accept and then run
/// with: such a run is stopped after a bound and reported as accepted.
fn run_refused_not_run(args: &[&str], want: &str) {
    let mut cmd = run_without_redis(&["--http-addr", "127.0.0.1:0"]);
    cmd.args(args);
    let (code, stderr) = exit_within(cmd, Duration::from_secs(20));
    let Some(code) = code else {
        panic!("{args:?} was accepted: still running after 20s; stderr:\n{stderr}");
    };
    assert_refusal(args, code, &stderr, want);
}

#[test]
fn durations_past_their_upper_bound_are_refused_with_exit_code_2() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--lease-duration", "1000000h"],
            "--lease-duration 3600000000s: must be at most 1h: a leader that dies without releasing holds the lease this long",
        ),
        (
            &["--lease-duration", "1h 1s"],
            "--lease-duration 3601s: must be at most 1h",
        ),
        (
            &["--renew-deadline", "2h"],
            "--renew-deadline 7200s: must be at most 1h, like the lease duration that it must be shorter than",
        ),
        (
            &["--retry-period", "2h"],
            "--retry-period 7200s: must be at most 1h, like the lease duration",
        ),
        (
            &["--redis-wait-timeout", "2h"],
            "--redis-wait-timeout 7200s: must be at most 1h",
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
            "--grace-period 100000000000s: must be at most 1h: the shutdown bound and the pod's terminationGracePeriodSeconds are computed from it",
        ),
        (
            &["--grace-period", "2h"],
            "--grace-period 7200s: must be at most 1h",
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
        "--valid-for 7200s: must be at most 1h: no term stays valid longer than a lease duration",
    );
}

#[test]
fn tls_and_sentinel_files_are_checked_before_anything_connects() {
    let dir = tempfile::tempdir().unwrap();
    let not_pem = dir.path().join("ca.pem");
    std::fs::write(&not_pem, "hello\n").unwrap();
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "\n").unwrap();
    let (not_pem, empty) = (not_pem.to_str().unwrap(), empty.to_str().unwrap());
    run_refused(
        &["--redis-url", "rediss://x", "--redis-ca-file", not_pem],
        &format!("--redis-ca-file {not_pem}: is not PEM (no -----BEGIN block)"),
    );
    run_refused(
        &[
            "--redis-url",
            "redis://x",
            "--redis-ca-file",
            "/etc/ssl/certs/ca-certificates.crt",
        ],
        "TLS files are given but the URL does not use TLS: use rediss://",
    );
    run_refused(
        &["--redis-password-file", empty],
        &format!("--redis-password-file {empty}: the file is empty"),
    );
    run_refused(
        &["--sentinel-password-file", "/etc/hostname"],
        "--sentinel-password-file: is only for redis+sentinel:// URLs",
    );
}

#[test]
fn a_missing_lease_name_is_refused() {
    refused(
        &["run", "--kubernetes", "off"],
        &[],
        "no lease name: pass --lease-name",
    );
    // In a pod, but without a Kubernetes API to find its Deployment.
    refused(
        &["run", "--kubernetes", "off"],
        &[("POD_NAME", "web-7d4f-x2x9"), ("POD_NAMESPACE", "shop")],
        "no lease name: pass --lease-name (there is no Kubernetes API",
    );
}

#[test]
fn kubernetes_on_without_a_cluster_is_refused() {
    refused(
        &["run", "--lease-name", "web", "--kubernetes", "on"],
        &[
            ("KUBECONFIG", "/nonexistent/kubeconfig"),
            ("HOME", "/nonexistent"),
        ],
        "--kubernetes on: no cluster configuration found",
    );
}

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
        "--lease-duration 15s must be greater than --renew-deadline 20s",
    );
}

#[test]
fn config_file_mistakes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "lease-durration: 30s\n",
            "--config {}: unknown key `lease-durration`; the keys are the long flag names of `leasehold run`",
        ),
        (
            "- a\n",
            "--config {}: must be a mapping of flag names to values",
        ),
        (
            "no-events: sometimes\n",
            "`no-events` takes true or false, not `sometimes`",
        ),
        (
            "lease-duration: 3s\n",
            "--lease-duration 3s must be greater than --renew-deadline 10s",
        ),
        ("a: [\n", "not valid YAML"),
        (
            "lease-duration: [1, 2]\n",
            "--config {}: `lease-duration` must be a string, number or boolean, not a list",
        ),
        (
            "lease-duration: {a: 1}\n",
            "--config {}: `lease-duration` must be a string, number or boolean, not a mapping",
        ),
        (
            "lease-duration:\n",
            "--config {}: `lease-duration` must be a string, number or boolean, not empty",
        ),
        (
            "1: 30s\n",
            "--config {}: a key must be a long flag name, not `1`",
        ),
    ];
    for (i, (text, want)) in cases.into_iter().enumerate() {
        let path = dir.path().join(format!("c{i}.yaml"));
        std::fs::write(&path, text).unwrap();
        let p = path.to_str().unwrap();
        run_refused(&["--config", p], &want.replace("{}", p));
    }
    run_refused(
        &["--config", "/nonexistent/c.yaml"],
        "--config /nonexistent/c.yaml: cannot read it",
    );
}

#[test]
fn an_unknown_config_key_is_answered_with_the_nearest_flag() {
    let dir = tempfile::tempdir().unwrap();
    // (file, command and flags, refusal); `{}` is the file's path.
    let cases: &[(&str, &[&str], &str)] = &[
        (
            "lease-durration: 30s\n",
            &["run"],
            "--config {}: unknown key `lease-durration`; the keys are the long flag names of `leasehold run`; did you mean `lease-duration`? (all: redis-url, ",
        ),
        (
            "xyzzy: 1\n",
            &["run"],
            "--config {}: unknown key `xyzzy`; the keys are the long flag names of `leasehold run`: redis-url, ",
        ),
        // A command's keys are its own flags: status waits for no replicas.
        (
            "redis-wait-replicas: 1\n",
            &["status"],
            "unknown key `redis-wait-replicas`; the keys are the long flag names of `leasehold status`",
        ),
        // The file's values meet the flags' parsers and conflicts.
        (
            "lease-duration: 15x\n",
            &["run"],
            "invalid value '15x' for '--lease-duration <LEASE_DURATION>'",
        ),
        (
            "candidate-check: http://127.0.0.1:8081/healthz\n",
            &["run", "--candidate-check-command", "true"],
            "--config {}: `candidate-check` cannot be used with --candidate-check-command, which is given",
        ),
        (
            "redis-username: a\nredis-username-file: /etc/hostname\n",
            &["run"],
            "--config {}: `redis-username-file` cannot be used with `redis-username`, also in the file",
        ),
    ];
    for (i, (text, args, want)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("c{i}.yaml"));
        std::fs::write(&path, text).unwrap();
        let p = path.to_str().unwrap();
        let mut full = vec![args[0], "--config", p];
        full.extend_from_slice(&args[1..]);
        refused(
            &full,
            &[("LEASEHOLD_LEASE_NAME", "web")],
            &want.replace("{}", p),
        );
    }
}

#[test]
fn status_refuses_bad_input_too() {
    refused(
        &["status", "--redis-url", "ftp://x", "--lease-name", "web"],
        &[],
        "--redis-url `ftp://x`: the scheme must be",
    );
    refused(
        &["status", "--output", "yaml", "--lease-name", "web"],
        &[],
        "invalid value 'yaml' for '--output <OUTPUT>'",
    );
    refused(
        &["status", "--key-prefix", "a}", "--lease-name", "web"],
        &[],
        "--key-prefix `a}`: key prefix `a}` contains '}'",
    );
    refused(&["status"], &[], "no lease name");
}

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
        "[env: LEASEHOLD_LEASE_DURATION=",
    ] {
        assert!(stdout.contains(flag), "missing {flag}");
    }
}

#[test]
fn lease_names_that_kubernetes_cannot_hold_are_refused() {
    let long_name = format!("shop/{}", "x".repeat(254));
    let long_namespace = format!("{}/web", "x".repeat(64));
    let cases: &[(&str, &str)] = &[
        ("", "--lease-name ``: must not be empty"),
        (
            "shop/",
            "--lease-name `shop/`: the name after the `/` must not be empty",
        ),
        (
            "/web",
            "--lease-name `/web`: the namespace before the `/` must not be empty",
        ),
        (
            &long_name,
            "is 254 bytes long; a Kubernetes object name is at most 253",
        ),
        (
            &long_namespace,
            "is 64 bytes long; a Kubernetes namespace is at most 63",
        ),
    ];
    for (name, want) in cases {
        run_refused(&["--lease-name", name], want);
    }
}

#[test]
fn a_lease_name_the_lease_mirror_cannot_take_is_refused_while_it_is_on() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n",
    )
    .unwrap();
    refused(
        &[
            "run",
            "--kubernetes",
            "on",
            "--redis-url",
            "redis://127.0.0.1:1",
            "--lease-name",
            "shop/Web_1",
        ],
        &[("KUBECONFIG", kubeconfig.to_str().unwrap())],
        "--lease-name `shop/Web_1`: the Lease mirror is named after it, and `Web_1` must be a DNS subdomain",
    );
}

#[test]
fn negative_values_reach_the_rule_of_their_flag() {
    run_refused(
        &["--lease-duration", "-5s"],
        "invalid value '-5s' for '--lease-duration <LEASE_DURATION>': a duration cannot be negative",
    );
    run_refused(
        &["--drift-factor", "-1"],
        "--drift-factor -1 must be at least 0 and below 0.5",
    );
    run_refused(
        &["--candidate-check-failure-threshold", "-1"],
        "invalid value '-1' for '--candidate-check-failure-threshold",
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

#[test]
fn client_go_leader_election_flags_are_aliases_of_ours() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--leader-elect-lease-duration", "5s"],
            "--lease-duration 5s must be greater than --renew-deadline 10s",
        ),
        (
            &["--leader-elect-renew-deadline", "20s"],
            "--lease-duration 15s must be greater than --renew-deadline 20s",
        ),
        (
            &["--leader-elect-retry-period", "1ms"],
            "--retry-period 1ms is too short",
        ),
        (
            &["--leader-elect-resource-name", ""],
            "--lease-name ``: must not be empty",
        ),
        (
            &["--leader-elect-resource-namespace", "Shop"],
            "--namespace `Shop`: must be a DNS label",
        ),
    ];
    for (args, want) in cases {
        run_refused(args, want);
    }
}

#[test]
fn a_command_that_cannot_be_executed_is_refused_at_start() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job");
    std::fs::write(&job, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&job, std::fs::Permissions::from_mode(0o644)).unwrap();
    let job = job.to_str().unwrap();
    let dir_path = dir.path().to_str().unwrap();
    run_refused(
        &["--", job],
        &format!("-- CMD `{job}`: is not executable (no x bit)"),
    );
    run_refused(
        &["--", dir_path],
        &format!("-- CMD `{dir_path}`: is a directory"),
    );
    let base = ["run", "--kubernetes", "off", "--lease-name", "web"];
    let mut on_path = base.to_vec();
    on_path.extend(["--", "job"]);
    refused(
        &on_path,
        &[("PATH", dir_path)],
        &format!("-- CMD `job`: found on $PATH as {job}, which is not executable (no x bit)"),
    );
    let mut missing = base.to_vec();
    missing.extend(["--", "no-such-program-anywhere"]);
    refused(
        &missing,
        &[],
        "-- CMD `no-such-program-anywhere`: not found",
    );
}

#[test]
fn the_http_address_may_name_a_host() {
    let cmd = run_without_redis(&["--http-addr", "localhost:0"]);
    let (code, stderr) = exit_within(cmd, Duration::from_secs(3));
    assert_eq!(code, None, "refused; stderr:\n{stderr}");
    assert!(stderr.contains("leasehold starting"), "{stderr}");
    run_refused(
        &["--http-addr", "no-such-host.invalid:8080"],
        "invalid value 'no-such-host.invalid:8080' for '--http-addr <HTTP_ADDR>': cannot resolve",
    );
}
