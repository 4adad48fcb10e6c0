//! Files and programs named on the command line, checked at start through the real binary: a
//! CA file that is not PEM, TLS files for a URL without TLS, an empty password file, a Sentinel
//! password file for a URL without Sentinels, a singleton command that is not executable, is a
//! directory or is not found, and one file given as both the guard file and the status file.

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
    // A unix socket has no TLS either: the files were ignored without a word.
    run_refused_not_run(
        &[
            "--redis-url",
            "unix:///run/redis/redis.sock",
            "--redis-ca-file",
            "/etc/ssl/certs/ca-certificates.crt",
        ],
        "TLS files are given but a unix socket has no TLS: leave them out",
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

/// TLS files that are PEM but hold no certificate or key rustls can use, or a key that is not
/// the certificate's, are refused at start naming their own flag, not the URL, nor found at the
/// first dial.
#[test]
fn tls_files_that_rustls_cannot_use_are_refused_naming_their_flag() {
    let pki = testbed::pki::Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let bad_ca = write(
        "ca.pem",
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    );
    let bad_key = write(
        "key.pem",
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    );
    let (cert, other_key) = (
        pki.client_cert.to_str().unwrap(),
        pki.server_key.to_str().unwrap(),
    );
    let url = ["--redis-url", "rediss://127.0.0.1:1"];
    let cases = [
        (
            vec!["--redis-ca-file", &bad_ca],
            format!("--redis-ca-file {bad_ca}: "),
        ),
        (
            vec![
                "--redis-client-cert-file",
                cert,
                "--redis-client-key-file",
                &bad_key,
            ],
            format!("--redis-client-key-file {bad_key}: "),
        ),
        (
            vec![
                "--redis-client-cert-file",
                cert,
                "--redis-client-key-file",
                other_key,
            ],
            format!("--redis-client-key-file {other_key}: "),
        ),
    ];
    for (files, want) in cases {
        let mut args = url.to_vec();
        args.extend(files);
        run_refused_not_run(&args, &want);
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

/// The kernel refuses an ELF file that is cut short, no program or built for another machine
/// (`execvp` then hands it to `/bin/sh`, which fails with 2 or 127 at every term, and `lock`
/// would exit with the shell's code): each is refused at start, with what is wrong.
#[test]
fn a_binary_this_machine_cannot_run_is_refused_at_start() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let program = std::fs::read("/bin/true").unwrap();
    let (other, other_name) = match std::env::consts::ARCH {
        "aarch64" => (62u16, "x86-64"),
        _ => (183, "AArch64"),
    };
    let with = |at: usize, value: u16| {
        let mut changed = program.clone();
        changed[at..at + 2].copy_from_slice(&value.to_le_bytes());
        changed
    };
    // A 32-bit header whose one program header would follow it.
    let mut narrow = b"\x7fELF\x01\x01\x01".to_vec();
    narrow.resize(52, 0);
    for (at, value) in [(0x10, 2u16), (0x12, 3), (0x1c, 52), (0x2a, 32), (0x2c, 1)] {
        narrow[at..at + 2].copy_from_slice(&value.to_le_bytes());
    }
    let cases: [(&str, &[u8], String); 7] = [
        (
            "garbage",
            b"\x7fELF garbage",
            "its ELF header is cut short or corrupt".into(),
        ),
        (
            "headers",
            &program[..100],
            "it is cut short: its program headers".into(),
        ),
        (
            "narrow",
            &narrow,
            "it is cut short: its program headers".into(),
        ),
        // A binary's last loadable segment ends in its second half.
        (
            "segments",
            &program[..program.len() / 2],
            "it is cut short: a segment ends past".into(),
        ),
        (
            "object",
            &with(0x10, 1),
            "it is an ELF file but no program".into(),
        ),
        (
            "no headers",
            &with(0x38, 0),
            "its program headers are corrupt".into(),
        ),
        (
            "foreign",
            &with(0x12, other),
            format!("it is built for {other_name} (ELF machine {other}, 64-bit), and this one is"),
        ),
    ];
    for (name, bytes, words) in cases {
        let path = dir.path().join(name.replace(' ', "-"));
        std::fs::write(&path, bytes).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = path.to_str().unwrap();
        run_refused_not_run(
            &["--", path],
            &format!("-- CMD `{path}`: is not a program this machine can run: {words}"),
        );
    }
}

/// A candidate check command runs by `/bin/sh -c`: where there is none (leasehold's own image
/// is `FROM scratch`) every check would fail and no replica ever lead, so it is refused at start.
/// The shell is hidden by a bind mount in a mount namespace of the run's own.
#[test]
fn a_candidate_check_command_without_a_shell_is_refused_at_start() {
    let run = format!(
        "mount --bind /dev/null /bin/sh && exec {} run --kubernetes off --redis-url redis://127.0.0.1:1 --http-addr 127.0.0.1:0 --candidate-check-command true",
        harness::leasehold_bin()
    );
    let mut cmd = std::process::Command::new("unshare");
    cmd.args(["--mount", "sh", "-c", &run]);
    let (code, stderr) = harness::replica::exit_within(cmd, std::time::Duration::from_secs(20));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--candidate-check-command `true`: runs by /bin/sh -c, and /bin/sh is not a regular file"),
        "{stderr}"
    );
}

/// One file given as both `--guard-file` and `--status-file`, however it is spelled, is refused
/// naming both flags: the status file is rewritten whole at every change, and the guard file is
/// the command's, so one file cannot be both.
#[test]
fn one_file_as_guard_and_status_file_is_refused_naming_both_flags() {
    let dir = tempfile::tempdir().expect("temp dir");
    let real = dir.path().join("real");
    std::fs::create_dir(&real).expect("a folder");
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&real, &link).expect("a link to the folder");
    let path = |p: std::path::PathBuf| p.to_str().expect("a UTF-8 path").to_owned();
    let status = path(real.join("state"));
    for guard in [
        status.clone(),
        path(real.join(".").join("state")),
        path(link.join("state")),
    ] {
        run_refused_not_run(
            &[
                "--guard-file",
                &guard,
                "--status-file",
                &status,
                "--",
                "true",
            ],
            &format!(
                "--status-file {status}: is the file --guard-file names ({guard}): a status file and a guard file must be two files"
            ),
        );
    }
}

/// A named pipe that nothing writes to would hold the start for ever: it is refused, while a
/// pipe with a writer (`--redis-password-file <(…)`) is still read.
#[test]
fn a_named_pipe_with_nothing_written_to_it_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.unwrap().success());
    let fifo = fifo.to_str().unwrap();
    let unwritten = "is a pipe with nothing written to it";
    run_refused_not_run(
        &["--config", fifo],
        &format!("--config {fifo}: {unwritten}"),
    );
    run_refused_not_run(
        &["--redis-password-file", fifo],
        &format!("--redis-password-file {fifo}: {unwritten}"),
    );
    let written = format!(
        "exec {} status --lease-name ns/x --redis-url redis://127.0.0.1:1 --redis-password-file <(echo pw)",
        harness::leasehold_bin()
    );
    let mut cmd = std::process::Command::new("bash");
    cmd.args(["-c", &written]);
    let (code, stderr) = harness::replica::exit_within(cmd, std::time::Duration::from_secs(20));
    assert_eq!(code, Some(1), "read, then no Redis at port 1: {stderr}");
}
