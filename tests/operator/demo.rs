//! scripts/demo.sh as a new user runs it: on a machine with nothing but a shell's basic tools
//! and a redis-server on `PATH` (no curl, python, npm, apt-get or the tests' tools), with the
//! binary this test was built with in place of the demo's own build.

use std::os::unix::fs::symlink;
use std::process::Command;
use std::time::Duration;

use testbed::Guarded;

/// What a fresh Debian machine has (coreutils, grep, sed, bash) plus redis-server and redis-cli:
/// the only commands the demo may call.
const FRESH_MACHINE: &[&str] = &[
    "bash",
    "sh",
    "env",
    "cat",
    "cut",
    "date",
    "dirname",
    "grep",
    "head",
    "id",
    "mktemp",
    "rm",
    "sed",
    "seq",
    "sleep",
    "tail",
    "tee",
    "redis-server",
    "redis-cli",
];

/// Finds `name` on this machine's `PATH`.
fn which(name: &str) -> std::path::PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| {
            panic!("{name} is not on PATH (scripts/ensure-tools.sh installs redis-server)")
        })
}

#[test]
fn the_demo_runs_with_only_basic_tools_and_a_redis_server() {
    let bin_dir = tempfile::tempdir().expect("temp dir");
    for name in FRESH_MACHINE {
        symlink(which(name), bin_dir.path().join(name)).expect("link a tool");
    }
    let repo = harness::repo();
    let mut cmd = Command::new(which("bash"));
    cmd.arg(repo.join("scripts/demo.sh"))
        .env_clear()
        .env("PATH", bin_dir.path())
        .env("HOME", bin_dir.path())
        .env("DEMO_LEASEHOLD_BIN", harness::leasehold_bin());
    let mut demo = Guarded::spawn(cmd, "scripts/demo.sh").expect("start the demo");
    // Three lease durations of 3 s (the cooldown, the crash, the handoff) and three 2 s pauses.
    let code = demo
        .wait_exit(Duration::from_secs(90))
        .expect("wait for the demo");
    let (out, err) = (demo.stdout.text(), demo.stderr.text());
    assert_eq!(code, Some(0), "the demo failed:\n{out}\n{err}");
    assert!(!err.contains("command not found"), "{err}");
    assert_eq!(
        out.matches("took over after").count(),
        2,
        "a crash failover and a graceful handoff:\n{out}"
    );
    assert!(
        out.contains("/readyz:") && out.contains("=200") && out.contains("=gone"),
        "the probes answered, and the killed replica's did not:\n{out}"
    );
    assert!(
        out.contains("\"is_leader\":true"),
        "/leader on the leader:\n{out}"
    );
    assert!(out.contains("== demo done"), "{out}");
}

#[test]
fn the_demo_shows_the_build_and_leaves_the_test_tools_to_the_test_command() {
    let script = std::fs::read_to_string(harness::repo().join("scripts/demo.sh")).expect("read");
    let code: Vec<&str> = script
        .lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .collect();
    let builds: Vec<&&str> = code.iter().filter(|l| l.contains("cargo build")).collect();
    assert_eq!(builds.len(), 1, "one build:\n{builds:?}");
    assert!(
        !builds[0].contains("--quiet") && !builds[0].contains(" -q"),
        "cargo's progress shows: {}",
        builds[0]
    );
    for tool in [
        "ensure-tools",
        "npm",
        "nextest",
        "helm",
        "prometheus",
        "postgresql",
        "podman",
    ] {
        assert!(
            !code.iter().any(|l| l.contains(tool)),
            "the demo needs no {tool}"
        );
    }
}
