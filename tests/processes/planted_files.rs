//! Files planted where leasehold keeps its own, as anyone who may write a shared directory
//! (`/dev/shm`, `/tmp`) can: a FIFO in place of the guard file, which `leasehold guard` must
//! answer about rather than wait on for ever, a hard link in place of the guard file's lock
//! file, which `run` must refuse rather than truncate the file it links to, and anything that
//! leasehold did not write at the guard or status file's own path.

use std::process::Command;
use std::time::Duration;

use harness::leasehold_bin;
use harness::replica::{exit_within, run_without_redis};

#[test]
fn a_fifo_in_place_of_the_guard_file_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let fifo = dir.path().join("guard");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).expect("mkfifo");
    let mut guard = Command::new(leasehold_bin());
    guard.args(["guard", "--guard-file"]).arg(&fifo);
    let (code, stderr) = exit_within(guard, Duration::from_secs(5));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("not a regular file"), "{stderr}");
}

#[test]
fn a_hard_link_in_place_of_the_lock_file_is_refused_not_truncated() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "somebody's data\n").expect("write the victim");
    std::fs::hard_link(&victim, dir.path().join(".guard.lock")).expect("link");
    let guard = dir.path().join("guard");
    let guard = guard.display().to_string();
    let run = run_without_redis(&[
        "--http-addr",
        "127.0.0.1:0",
        "--guard-file",
        &guard,
        "--",
        "true",
    ]);
    let (code, stderr) = exit_within(run, Duration::from_secs(5));
    let kept = std::fs::read_to_string(&victim).expect("read the victim");
    assert_eq!(
        kept, "somebody's data\n",
        "the linked file was written: {stderr}"
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--guard-file"), "{stderr}");
}

/// Whatever stands at the guard or status file's path that leasehold did not write (somebody's
/// file, a FIFO, a symbolic link) is refused at start and left as it was: each write replaces
/// what is at the path, and the guard file is removed at exit. (One run replaced a machine's
/// `/dev/null` so.)
#[test]
fn what_leasehold_did_not_write_at_its_file_is_refused_and_kept() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let data = dir.path().join("data");
    std::fs::write(&data, "somebody's data\n").expect("write the data");
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).expect("mkfifo");
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&data, &link).expect("symlink");
    // Naming the format is not starting with it.
    let notes = dir.path().join("notes");
    std::fs::write(&notes, "# leasehold-guard and leasehold-status\n").expect("write notes");
    for flag in ["--guard-file", "--status-file"] {
        for path in [&data, &fifo, &link, &notes] {
            let path = path.display().to_string();
            let run = run_without_redis(&["--http-addr", "127.0.0.1:0", flag, &path, "--", "true"]);
            let (code, stderr) = exit_within(run, Duration::from_secs(5));
            assert_eq!(code, Some(2), "{flag} {path}: {stderr}");
            assert!(
                stderr.contains(&format!("{flag} {path}: holds")),
                "{stderr}"
            );
        }
        let kept = std::fs::read_to_string(&data).expect("read the data");
        assert_eq!(kept, "somebody's data\n", "{flag}");
        let kind = |p: &std::path::Path| {
            std::fs::symlink_metadata(p)
                .expect("still there")
                .file_type()
        };
        assert!(kind(&fifo).is_fifo() && kind(&link).is_symlink(), "{flag}");
    }
    // 0.1.0's status file, `/leader`'s JSON, is leasehold's: taken over (the run goes on).
    let old = dir.path().join("status.json");
    std::fs::write(&old, r#"{"identity":"a","lease":"default/web"}"#).expect("write");
    let old = old.display().to_string();
    let run = run_without_redis(&["--http-addr", "127.0.0.1:0", "--status-file", &old]);
    let (code, stderr) = exit_within(run, Duration::from_secs(2));
    assert_eq!(code, None, "refused 0.1.0's status file: {stderr}");
}

/// A renewal that cannot publish its term (here a directory planted at the guard file's
/// temporary name) zeroes the file, or removes it: the record it leaves may carry an earlier,
/// later deadline than the term now has (a renewal that measured a fast Redis clock shortens
/// it). The file kept the last record published, and `leasehold guard` went on passing. (The
/// replica then steps down: `full_disk.rs`.)
#[test]
fn a_term_the_guard_file_cannot_publish_is_withdrawn_from_it() {
    use harness::replica::{FAST, Replica};
    use leasehold::guard::{GuardRecord, read_guard_file};
    use testbed::wait::wait_for;
    let redis = testbed::RedisServer::start();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let guard = dir.path().join("guard");
    let mut args = FAST.to_vec();
    let path = guard.display().to_string();
    args.extend(["--guard-file", &path]);
    let lease = harness::contenders::unique_lease("guard-unpublished");
    let a = Replica::spawn(&redis.url(), &lease, "a", &args, &["sleep", "60"]);
    wait_for("a term in the guard file", Duration::from_secs(10), || {
        matches!(read_guard_file(&guard), Ok(GuardRecord::Term { .. })).then_some(())
    });
    std::fs::create_dir(dir.path().join(".guard.next")).expect("plant a directory");
    a.wait_events(
        "could not publish the term in the guard file; the command's checks refuse until it is written",
        1,
        Duration::from_secs(10),
    );
    let left = read_guard_file(&guard);
    assert!(
        !matches!(left, Ok(GuardRecord::Term { .. })),
        "the file still holds a term: {left:?}"
    );
}
