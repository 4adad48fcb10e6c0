//! Files and programs named on the command line, checked at start through the real binary: a
//! CA file that is not PEM, TLS files for a URL without TLS, an empty password file, a Sentinel
//! password file for a URL without Sentinels, and a singleton command that is not executable, is
//! a directory or is not found.

use crate::refusal::{refused, run_refused, run_refused_not_run};

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
    // A file named by mistake (a log, a disk image) is refused, not read whole.
    let big = dir.path().join("big");
    std::fs::write(&big, vec![b'a'; 2 << 20]).unwrap();
    let big = big.to_str().unwrap();
    run_refused_not_run(
        &["--redis-password-file", big],
        &format!("--redis-password-file {big}: is larger than 1 MiB"),
    );
    run_refused(
        &["--sentinel-password-file", "/etc/hostname"],
        "--sentinel-password-file: is only for redis+sentinel:// URLs",
    );
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
