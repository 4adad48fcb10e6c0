//! The guard file without frozen processes: what `leasehold guard` answers for each record (and
//! for a caller of another term or lease) and how it refuses bad input, the documented shell
//! check against the same records, a guard file that cannot be written or that another process
//! owns refused at start (by `run` and by `lock`), and the elector's order: the term published
//! before the work starts, moved by renewals, and zeroed before anything else at step-down.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use harness::contenders::{fast_timing, lease, unique_lease};
use harness::replica::run_to_end;
use leasehold::clock::{BootInstant, WallLead};
use leasehold::elector::{Elector, Leadership, Role};
use leasehold::guard::{GuardError, GuardFile, GuardHooks, GuardRecord, read_guard_file};
use leasehold::lease::{FencingToken, LeaseName};
use testbed::redis_server::RedisServer;

#[test]
fn a_guard_file_that_cannot_be_written_is_refused_at_start() {
    let (code, _, stderr) = run_to_end(
        &[
            "run",
            "--lease-name",
            "x",
            "--kubernetes",
            "off",
            "--guard-file",
            "/nonexistent/dir/guard",
            "--",
            "true",
        ],
        &[],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--guard-file /nonexistent/dir/guard"),
        "{stderr}"
    );
}

fn write_record(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

const LEASE: &str = "shop/web";

fn named(name: &str) -> LeaseName {
    LeaseName::new(name).unwrap()
}

fn term_record(token: u64, valid_until: BootInstant) -> String {
    GuardRecord::Term {
        lease: named(LEASE),
        token: FencingToken(token),
        valid_until,
        wall_until: WallLead::now().wall_at(valid_until),
    }
    .encode()
}

/// A term whose deadline is `boot_left` away on the boot clock and `wall_left` (negative: past)
/// on the wall clock, as after a freeze that the boot clock did not count.
fn frozen_record(token: u64, boot_left: Duration, wall_past: Duration) -> String {
    let valid_until = BootInstant::now().saturating_add(boot_left);
    let wall_now = WallLead::now().wall_at(BootInstant::now());
    GuardRecord::Term {
        lease: named(LEASE),
        token: FencingToken(token),
        valid_until,
        wall_until: wall_now - u64::try_from(wall_past.as_nanos()).unwrap(),
    }
    .encode()
}

fn no_term_record() -> String {
    GuardRecord::NoTerm {
        lease: named(LEASE),
    }
    .encode()
}

#[test]
fn the_guard_subcommand_says_valid_zeroed_expired_or_missing_and_refuses_garbage() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("guard");
    let path = file.to_str().unwrap();
    let guard = |extra: &[&str]| {
        let mut args = vec!["guard", "--guard-file", path];
        args.extend_from_slice(extra);
        run_to_end(&args, &[])
    };
    let soon = BootInstant::now().saturating_add(Duration::from_secs(30));

    write_record(&file, &term_record(42, soon));
    assert_eq!(
        guard(&[]),
        (0, String::new(), String::new()),
        "valid: silent, exit 0"
    );
    let (code, _, stderr) = guard(&["--verbose"]);
    assert_eq!(code, 0);
    assert!(stderr.contains("token 42"), "{stderr}");
    let (code, _, _) = run_to_end(&["guard"], &[("LEASEHOLD_GUARD_FILE", path)]);
    assert_eq!(
        code, 0,
        "the path from the environment, as leasehold run sets it"
    );
    assert_eq!(
        guard(&["--valid-for", "1m"]).0,
        1,
        "not valid for a minute more"
    );

    write_record(&file, &no_term_record());
    assert_eq!(
        guard(&[]),
        (1, String::new(), String::new()),
        "zeroed: silent, exit 1"
    );
    let (_, _, stderr) = guard(&["-v"]);
    assert!(stderr.contains("no term"), "{stderr}");

    let past = BootInstant::now().saturating_sub(Duration::from_millis(1));
    write_record(&file, &term_record(42, past));
    assert_eq!(guard(&[]).0, 1, "expired");
    // Valid for 30 s by the boot clock, but the wall clock passed the deadline 5 s ago.
    write_record(
        &file,
        &frozen_record(42, Duration::from_secs(30), Duration::from_secs(5)),
    );
    let (code, _, stderr) = guard(&["-v"]);
    assert_eq!(code, 1, "past the wall deadline: {stderr}");
    assert!(stderr.contains("passed"), "{stderr}");

    std::fs::remove_file(&file).unwrap();
    assert_eq!(guard(&[]).0, 1, "missing");

    for garbage in [
        "",
        "leasehold-guard 3 42",
        "leasehold-guard 3 42 99x 100 shop/web\n",
        "leasehold-guard 2 42 1000 shop/web\n",
        "leasehold-guard 1 42 1000\n",
        "hello\n",
    ] {
        write_record(&file, garbage);
        let (code, _, stderr) = guard(&[]);
        assert_eq!(code, 2, "{garbage:?}: {stderr}");
        assert!(stderr.contains(&format!("--guard-file {path}")), "{stderr}");
    }

    let (code, _, stderr) = run_to_end(&["guard"], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--guard-file") && stderr.contains("LEASEHOLD_GUARD_FILE"),
        "{stderr}"
    );
    let (code, _, stderr) = guard(&["--valid-for", "soon"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--valid-for"), "{stderr}");
}

#[test]
fn the_guard_refuses_a_record_of_another_term_or_lease_than_the_callers() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("guard");
    let path = file.to_str().unwrap();
    let guard = |extra: &[&str], env: &[(&str, &str)]| {
        let mut args = vec!["guard", "--guard-file", path];
        args.extend_from_slice(extra);
        run_to_end(&args, env)
    };
    let soon = BootInstant::now().saturating_add(Duration::from_secs(30));
    write_record(&file, &term_record(42, soon));

    // The command's environment, as leasehold run sets it.
    let mine = [
        ("LEASEHOLD_FENCING_TOKEN", "42"),
        ("LEASEHOLD_LEASE", LEASE),
    ];
    assert_eq!(guard(&[], &mine).0, 0, "its own term");
    let (code, _, stderr) = guard(&["-v"], &mine);
    assert_eq!(code, 0);
    assert!(stderr.contains("the caller's term"), "{stderr}");
    let (code, _, stderr) = guard(&["-v"], &[]);
    assert_eq!(code, 0, "no token known: any term of the file");
    assert!(stderr.contains("any term"), "{stderr}");

    let older = [
        ("LEASEHOLD_FENCING_TOKEN", "41"),
        ("LEASEHOLD_LEASE", LEASE),
    ];
    assert_eq!(
        guard(&[], &older),
        (1, String::new(), String::new()),
        "another term: silent, exit 1"
    );
    let (code, _, stderr) = guard(&["--verbose"], &older);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("not valid: the file holds term 42, not the caller's term 41"),
        "{stderr}"
    );
    assert_eq!(guard(&["--token", "41"], &[]).0, 1, "the flag");
    assert_eq!(
        guard(&["--token", "42"], &older).0,
        0,
        "the flag beats the variable"
    );

    let (code, _, stderr) = guard(&["-v"], &[("LEASEHOLD_LEASE", "shop/api")]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("the file is lease shop/web's, not the caller's lease shop/api"),
        "{stderr}"
    );
    assert_eq!(guard(&["--lease", "shop/api"], &[]).0, 1);
    // An empty variable is no value (a shell that exports it empty).
    assert_eq!(guard(&[], &[("LEASEHOLD_FENCING_TOKEN", "")]).0, 0);

    for (args, env, said) in [
        (
            &["--token", "x"][..],
            &[][..],
            "--token `x`: must be a fencing token",
        ),
        (
            &[][..],
            &[("LEASEHOLD_FENCING_TOKEN", "0")][..],
            "--token `0`: must be a fencing token",
        ),
        (&["--lease", "a b"][..], &[][..], "--lease `a b`:"),
    ] {
        let (code, _, stderr) = guard(args, env);
        assert_eq!(code, 2, "{args:?} {env:?}: {stderr}");
        assert!(stderr.contains(said), "{stderr}");
        // Which of the flag and its variable held the value.
        let from_variable = stderr.contains("(the value comes from $LEASEHOLD_FENCING_TOKEN)");
        assert_eq!(from_variable, !env.is_empty(), "{stderr}");
    }
}

#[test]
fn run_and_lock_refuse_a_guard_file_another_live_process_owns() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("guard");
    let owner = GuardFile::create(&file, &named(LEASE)).unwrap();
    let soon = BootInstant::now().saturating_add(Duration::from_secs(30));
    owner
        .publish(FencingToken(42), soon, WallLead::now())
        .unwrap();
    let path = file.to_str().unwrap();
    for subcommand in ["run", "lock"] {
        let (code, _, stderr) = run_to_end(
            &[
                subcommand,
                "--lease-name",
                "x",
                "--kubernetes",
                "off",
                "--guard-file",
                path,
                "--",
                "true",
            ],
            &[],
        );
        assert_eq!(code, 2, "{subcommand}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "--guard-file {path}: another live leasehold writes this file: pid {} (lease {LEASE})",
                std::process::id()
            )),
            "{subcommand}: {stderr}"
        );
        assert!(
            matches!(
                read_guard_file(&file).unwrap(),
                GuardRecord::Term { lease, token: FencingToken(42), valid_until, .. }
                    if lease == named(LEASE) && valid_until == soon
            ),
            "{subcommand} left the owner's record alone"
        );
    }
}

/// The lines of shell in the singleton-command section of docs/REFERENCE.md, up to the end of
/// their code block.
fn documented_shell_check() -> String {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/REFERENCE.md")).unwrap();
    let lines: Vec<&str> = readme.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with("read -r magic version token until"))
        .expect("docs/REFERENCE.md shows the shell check");
    let end = start
        + lines[start..]
            .iter()
            .position(|l| l.starts_with("```"))
            .expect("the shell check's code block ends");
    lines[start..end].join("\n")
}

#[test]
fn the_documented_shell_check_agrees_with_the_guard() {
    let check = documented_shell_check();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("guard");
    let sh = |shell: &str| {
        std::process::Command::new(shell)
            .args(["-c", &check])
            .env("LEASEHOLD_GUARD_FILE", &file)
            .env("LEASEHOLD_FENCING_TOKEN", "7")
            .env("LEASEHOLD_LEASE", LEASE)
            .status()
            .unwrap()
            .code()
    };
    for shell in ["sh", "bash"] {
        write_record(
            &file,
            &term_record(
                7,
                BootInstant::now().saturating_add(Duration::from_secs(30)),
            ),
        );
        assert_eq!(sh(shell), Some(0), "{shell}: valid");
        write_record(
            &file,
            &term_record(
                7,
                BootInstant::now().saturating_sub(Duration::from_millis(1)),
            ),
        );
        assert_eq!(sh(shell), Some(1), "{shell}: expired");
        write_record(
            &file,
            &frozen_record(7, Duration::from_secs(30), Duration::from_secs(5)),
        );
        assert_eq!(sh(shell), Some(1), "{shell}: past the wall deadline");
        write_record(
            &file,
            &term_record(
                8,
                BootInstant::now().saturating_add(Duration::from_secs(30)),
            ),
        );
        assert_ne!(sh(shell), Some(0), "{shell}: another term");
        write_record(&file, &no_term_record());
        assert_ne!(sh(shell), Some(0), "{shell}: zeroed");
        std::fs::remove_file(&file).unwrap();
        assert_ne!(sh(shell), Some(0), "{shell}: missing");
    }
}

/// What the work of one term saw of the guard file: at its start, after a few renewals (only
/// when `renewals`), and the moment its own guard first refused; and what the file said when
/// readiness flipped.
async fn one_term(
    redis: &RedisServer,
    lease_name: &str,
    path: &Path,
    renewals: bool,
) -> (Vec<String>, Result<GuardRecord, GuardError>) {
    let guard = Arc::new(GuardFile::create(path, &LeaseName::new(lease_name).unwrap()).unwrap());
    assert!(
        matches!(read_guard_file(path), Ok(GuardRecord::NoTerm { .. })),
        "no term before the first"
    );
    let timing = fast_timing();
    let (hooks, standing) = GuardHooks::new(guard.clone(), "a", timing, true).unwrap();
    let elector = Elector::new(lease(&redis.url(), lease_name, "a", false), timing)
        .unwrap()
        .with_gate(standing)
        .with_hooks(hooks);
    let mut status = elector.status();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let spinning = Arc::new(tokio::sync::Notify::new());
    let shutdown = tokio_util::sync::CancellationToken::new();
    let work = {
        let (path, seen, spinning) = (path.to_owned(), seen.clone(), spinning.clone());
        move |leadership: Leadership| {
            let (path, seen, spinning) = (path.clone(), seen.clone(), spinning.clone());
            async move {
                let note = |s: String| seen.lock().unwrap().push(s);
                let first = read_guard_file(&path);
                note(format!("at start: {first:?}"));
                let Ok(GuardRecord::Term {
                    token, valid_until, ..
                }) = first
                else {
                    return Err("no term published before the work".to_owned());
                };
                if token != leadership.token() || valid_until != leadership.valid_until() {
                    note(format!(
                        "published {token}/{valid_until:?}, the term is {}/{:?}",
                        leadership.token(),
                        leadership.valid_until()
                    ));
                }
                if renewals {
                    // Renewals move the published deadline with the term's.
                    tokio::time::sleep(timing.retry_period * 3).await;
                    match read_guard_file(&path) {
                        Ok(GuardRecord::Term {
                            valid_until: later, ..
                        }) if later > valid_until => {}
                        other => note(format!("not renewed: {other:?}")),
                    }
                }
                // Spin on the guard on a thread of its own (the other core): the first refusal
                // must already find the file zeroed. (It ends: the guard refuses at the deadline.)
                let spinner = {
                    let (leadership, path) = (leadership.clone(), path.clone());
                    std::thread::spawn(move || {
                        while leadership.check().is_ok() {
                            std::hint::spin_loop();
                        }
                        read_guard_file(&path)
                    })
                };
                spinning.notify_one();
                let at_revoke = tokio::task::spawn_blocking(move || spinner.join()).await;
                match at_revoke {
                    Ok(Ok(read)) => note(format!("at revoke: {read:?}")),
                    _ => note("the spinner failed".to_owned()),
                }
                leadership.lost().await;
                Ok::<_, String>(())
            }
        }
    };
    let (saw_leader, watching) = tokio::sync::oneshot::channel::<()>();
    let watcher = {
        let path = path.to_owned();
        tokio::spawn(async move {
            status
                .wait_for(|s| matches!(s.role, Role::Leader { .. }))
                .await
                .unwrap();
            let _ = saw_leader.send(());
            status
                .wait_for(|s| !matches!(s.role, Role::Leader { .. }))
                .await
                .unwrap();
            read_guard_file(&path)
        })
    };
    let task = tokio::spawn(elector.run(shutdown.clone(), work));
    tokio::time::timeout(Duration::from_secs(10), spinning.notified())
        .await
        .expect("the work runs");
    // The watcher must have seen the term before it ends: a watch keeps only the latest value,
    // and a watcher scheduled late would miss the whole term.
    tokio::time::timeout(Duration::from_secs(10), watching)
        .await
        .expect("the watcher saw the term")
        .expect("the watcher runs");
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap();
    let at_readiness_flip = watcher.await.unwrap();
    let seen = seen.lock().unwrap().clone();
    (seen, at_readiness_flip)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_elector_publishes_the_term_before_the_work_and_zeroes_it_before_anything_else_at_step_down()
 {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("guard");
    let lease_name = unique_lease("hooks");
    // The window between a revoke and a zeroing in the wrong order is one rename long: a few
    // terms make sure that the spinning work would fall into it.
    for term in 0..12 {
        let (seen, at_readiness_flip) = one_term(&redis, &lease_name, &path, term == 0).await;
        assert!(
            seen[0].starts_with("at start: Ok(Term"),
            "term {term}: {seen:?}"
        );
        assert_eq!(seen.len(), 2, "term {term}: {seen:?}");
        assert!(
            seen[1].starts_with("at revoke: Ok(NoTerm"),
            "term {term}: {seen:?}"
        );
        assert!(
            matches!(at_readiness_flip, Ok(GuardRecord::NoTerm { .. })),
            "term {term}: {at_readiness_flip:?}"
        );
    }
}
