//! Bad flags through the real binary: every rule of `leasehold run`'s flags answers with one
//! message that names the flag, the value and the rule, and exit code 2, before anything
//! connects. Negative values reach their flag's rule, client-go's leader-election flags are
//! aliases of ours, the HTTP address may name a host, and `leasehold status` refuses bad input
//! too.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use harness::replica::{exit_within, run_without_redis};

use crate::refusal::{refused, refused_saying, run_refused, run_refused_not_run};

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
            "--redis-url `http://x`: the scheme must be redis://, rediss:// (TLS), unix://, redis+sentinel:// or redis+cluster:// (rediss+… with TLS)",
        ),
        (
            &["--redis-url", "redis://:hunter2@x"],
            "--redis-url `redis://:***@x`: a password on the command line shows in `ps`",
        ),
        (
            &["--redis-url", "redis:/:hunter2@x"],
            "--redis-url `redis:***@x`: a password on the command line shows in `ps`",
        ),
        (
            &["--redis-url", "redis://x:notaport"],
            // What stands where the port goes may be a password (`redis://user:password`).
            "--redis-url `redis://x:***`:",
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
            "--key-prefix `lh{}:`: key prefix `lh{}:` contains '{'; braces, whitespace and control characters are not allowed",
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
        (
            &["--"],
            "-- CMD: nothing follows `--`: give the command after it, or leave `--` out",
        ),
        (&["--no-such-flag"], "unexpected argument '--no-such-flag'"),
        (
            &["--redis-url", "redis+sentinel://s1:26379"],
            "name the master after the Sentinels: redis+sentinel://host:26379/mymaster",
        ),
        (
            &["--redis-url", "redis+sentinel://s1/m/x"],
            "the database after the master name must be a number of 0 or more",
        ),
        (
            &["--redis-url", "redis+sentinel://s1/m/-1"],
            "the database after the master name must be a number of 0 or more",
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
    // A user name file of a no-break space alone trims to nothing, as a blank one does.
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("username");
    std::fs::write(&file, "\u{a0}\n").expect("write the file");
    let file = file.to_str().expect("a UTF-8 path");
    run_refused_not_run(
        &["--redis-username-file", file],
        &format!("--redis-username-file {file}: the file is empty"),
    );
    // A command whose interpreter is missing: a script's `#!` line, and a binary whose dynamic
    // loader is not there (here /bin/true with its loader's name changed). execve fails with
    // "No such file or directory" for both, at every leader's term (exit 127).
    let script = dir.path().join("script");
    std::fs::write(&script, "#!/nonexistent/python9\n").expect("write the script");
    let binary = dir.path().join("true");
    let mut elf = std::fs::read("/bin/true").expect("read /bin/true");
    let at = elf
        .windows(6)
        .position(|w| w == b"/lib64" || w == b"/lib/l")
        .expect("/bin/true names its loader");
    elf[at + 1] = b'X';
    std::fs::write(&binary, elf).expect("write the binary");
    for program in [&script, &binary] {
        std::fs::set_permissions(program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let program = program.to_str().expect("a UTF-8 path");
        run_refused_not_run(
            &["--", program],
            &format!("-- CMD `{program}`: is started by /"),
        );
    }
}

/// A log filter that keeps nothing of leasehold's (`--log ''`, `LEASEHOLD_LOG=`, `RUST_LOG=kube=debug`)
/// is refused: accepted, it kept no line of leasehold's, errors included. A filter that does not parse names where it came from.
#[test]
fn a_log_filter_that_keeps_nothing_or_does_not_parse_is_refused_naming_its_source() {
    let status = ["status", "--lease-name", "web"];
    refused(
        &[&status[..], &["--log", ""]].concat(),
        &[],
        "--log ``: not a valid filter",
    );
    refused_saying(
        &status,
        &[("LEASEHOLD_LOG", " ")],
        &["--log ` `: not a valid filter", "$LEASEHOLD_LOG"],
    );
    refused_saying(
        &status,
        &[("RUST_LOG", "info,foo=[")],
        &["--log `info,foo=[`: not a valid filter", "$RUST_LOG"],
    );
    // One that keeps only another crate's lines keeps none of leasehold's, errors included.
    refused_saying(
        &status,
        &[("RUST_LOG", "kube=debug")],
        &[
            "--log `kube=debug`: not a valid filter",
            "keeps no line of leasehold's",
            "$RUST_LOG",
        ],
    );
}

/// `guard --token ""` (a script's `--token "$SAVED"` with `$SAVED` unset) is refused: it beat
/// `$LEASEHOLD_FENCING_TOKEN`, counted as no term, and let any term of the file pass. So is an
/// empty `--lease`. Empty in the variable, it still means "not set".
#[test]
fn guard_refuses_an_empty_token_or_lease_typed_on_the_command_line() {
    let env = [
        ("LEASEHOLD_FENCING_TOKEN", "5"),
        ("LEASEHOLD_LEASE", "shop/web"),
    ];
    for flag in ["--token", "--lease"] {
        refused_saying(
            &["guard", "--guard-file", "/nonexistent/guard", flag, ""],
            &env,
            &[&format!("{flag} ``"), "must not be empty"],
        );
    }
}

/// A namespace or an identity refused names the variable it came from when no flag gave it, and
/// the identity's own rule (not the lease name's, which it once quoted).
#[test]
fn a_refused_namespace_or_identity_from_the_pod_names_its_variable() {
    refused_saying(
        &["status", "--lease-name", "web"],
        &[("POD_NAMESPACE", "Bad_NS")],
        &["--namespace `Bad_NS`", "$POD_NAMESPACE"],
    );
    refused_saying(
        &["run", "--kubernetes", "off", "--lease-name", "web"],
        &[("POD_NAME", "web a")],
        &[
            "--identity `web a`",
            "$POD_NAME",
            "an identity is one word of the keys and values leasehold writes",
        ],
    );
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

/// An IPv4 `--http-addr` of no address of this machine is the input's fault (exit 2), unlike a
/// port that another process holds (exit 1), or an IPv6 address, which may be one that is not
/// usable yet (duplicate address detection, a moment after the pod starts).
#[test]
fn an_http_address_not_of_this_machine_is_refused() {
    let run = |addr| {
        [
            "run",
            "--kubernetes",
            "off",
            "--lease-name",
            "web",
            "--http-addr",
            addr,
        ]
    };
    let (code, _, stderr) = harness::replica::run_to_end(&run("[2001:db8::1]:8080"), &[]);
    assert_eq!(code, 1, "{stderr}");
    refused(
        &run("192.0.2.1:8080"),
        &[],
        "--http-addr `192.0.2.1:8080`: is no address of this machine",
    );
}

/// Asked for a leader label and for none: the chart's `--leader-label` and a `--no-leader-label`
/// of extraArgs ran with none, the leader Service without an endpoint; refused. A switch whose
/// variable says false asks for nothing: `LEASEHOLD_NO_LEADER_LABEL=false` beside
/// `--leader-label` starts (clap counted the variable as given, in conflict).
#[test]
fn a_leader_label_and_no_leader_label_together_are_refused_unless_the_switch_is_false() {
    let label = ["--leader-label", "example.com/active"];
    run_refused_not_run(
        &[&label[..], &["--no-leader-label"]].concat(),
        "the argument '--leader-label <LEADER_LABEL>' cannot be used with '--no-leader-label'",
    );
    let mut run = run_without_redis(&[&label[..], &["--http-addr", "127.0.0.1:0"]].concat());
    run.env("LEASEHOLD_NO_LEADER_LABEL", "false");
    let (code, stderr) = exit_within(run, Duration::from_secs(3));
    assert_eq!(code, None, "refused; stderr:\n{stderr}");
    assert!(stderr.contains("leasehold starting"), "{stderr}");
}
