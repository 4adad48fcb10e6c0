//! Mistakes in the `--config` file, refused through the real binary: an unknown key (answered
//! with the nearest flag, and the keys of the command it was given to), a file that is no
//! mapping or no YAML, a value of the wrong shape, a value a flag's parser or conflict refuses,
//! and a file that cannot be read.

use crate::refusal::{refused, run_refused, run_refused_not_run};

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
            "`no-events` takes true or false (or 1/0, yes/no, on/off), not `sometimes`",
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
        (
            "lease-duration: soon\n",
            "the value comes from `lease-duration` in --config {}",
        ),
        (
            "key-prefix: a b\n",
            "contains ' '; braces, whitespace and control characters are not allowed: the lease name is the Redis Cluster hash tag of every key, and a key prefix or an identity is one word of the keys and values leasehold writes (the value comes from `key-prefix` in --config {})",
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
    // A file named by mistake (a log, a device) is refused, not read whole.
    let big = dir.path().join("big.yaml");
    std::fs::write(
        &big,
        format!("lease-name: web\n# {}\n", "a".repeat(2 << 20)),
    )
    .unwrap();
    let big = big.to_str().unwrap();
    run_refused_not_run(
        &["--config", big],
        &format!("--config {big}: is larger than 1 MiB"),
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
        // A variable's spelling and a client-go alias name their flag; a key too short to be
        // near any flag is answered with the list alone.
        (
            "LEASEHOLD_LEASE_DURATION: 30s\n",
            &["run"],
            "unknown key `LEASEHOLD_LEASE_DURATION`; the keys are the long flag names of `leasehold run`; did you mean `lease-duration`?",
        ),
        (
            "leader-elect-retry-period: 3s\n",
            &["run"],
            "unknown key `leader-elect-retry-period`; the keys are the long flag names of `leasehold run`; did you mean `retry-period`?",
        ),
        (
            "to: web-b\n",
            &["run"],
            "unknown key `to`; the keys are the long flag names of `leasehold run`: redis-url, ",
        ),
        // A key of no command at all, given to status; `guard`'s key given to `run` (a slip
        // for `lease-name`); `run`'s key given to `lock`.
        (
            "redis-wait-replicaz: 1\n",
            &["status"],
            "unknown key `redis-wait-replicaz`; the keys are the long flag names of `leasehold status`",
        ),
        (
            "lease: shop/web\n",
            &["run"],
            "unknown key `lease`; the keys are the long flag names of `leasehold run`; did you mean `lease-name`?",
        ),
        (
            "readiness: leader\n",
            &["lock", "--", "true"],
            "unknown key `readiness`; the keys are the long flag names of `leasehold lock`",
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

/// One file serves `run` and the operator commands run in its pod (`kubectl exec … leasehold
/// status` inherits `LEASEHOLD_CONFIG`): a key of another command is left to it.
#[test]
fn one_config_file_serves_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("leasehold.yaml");
    let text = "identity: web-a\nlease-duration: 30s\nredis-wait-replicas: 1\nlease-name: web\nredis-url: redis://127.0.0.1:1\n";
    std::fs::write(&path, text).unwrap();
    let (code, _stdout, stderr) =
        harness::replica::run_to_end(&["status"], &[("LEASEHOLD_CONFIG", path.to_str().unwrap())]);
    assert_eq!(
        code, 1,
        "status read the file and tried the Redis it names: {stderr}"
    );
    assert!(stderr.contains("redis at redis://127.0.0.1:1"), "{stderr}");
}

/// A key that `lock` reads with another meaning (`wait`: how long to try for the lock) is the
/// lock's in a file that serves both: `step-down` took it for its own wait, and a lock's
/// `wait: 0s` refused every step-down (exit 2), a `wait: 10m` held it for ten minutes.
#[test]
fn a_locks_wait_in_a_shared_file_is_not_step_downs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("leasehold.yaml");
    let text = "wait: 0s\nlease-name: web\nredis-url: redis://127.0.0.1:1\n";
    std::fs::write(&path, text).unwrap();
    let env = [("LEASEHOLD_CONFIG", path.to_str().unwrap())];
    let (code, _stdout, stderr) = harness::replica::run_to_end(&["step-down"], &env);
    assert_eq!(
        code, 1,
        "step-down tried the Redis the file names: {stderr}"
    );
    assert!(stderr.contains("redis at redis://127.0.0.1:1"), "{stderr}");
}

/// A file of deeply nested brackets takes the YAML reader time quadratic in the depth (minutes
/// for the largest file read) before it could be refused: it is refused by its count of them.
#[test]
fn a_config_file_of_nested_brackets_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deep.yaml");
    std::fs::write(
        &path,
        format!("lease-name: {}{}\n", "[".repeat(2000), "]".repeat(2000)),
    )
    .unwrap();
    let p = path.to_str().unwrap();
    run_refused(
        &["--config", p],
        &format!(
            "--config {p}: holds 2000 opening brackets (`[` or `{{`), more than the 1000 that a file of flags could need"
        ),
    );
}
