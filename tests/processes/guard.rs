//! The guard file: leasehold publishes the term's token and validity deadline (boot clock) for
//! its command, updated at every renewal and zeroed first at step-down, so that the command can
//! ask whether the term is valid without a round trip and without leasehold running.
//!
//! Shown here against real processes: a command that asks `leasehold guard` before each write
//! makes no write after its term's validity deadline with the pod frozen (leasehold and the
//! command SIGSTOPped together past the TTL) and with only leasehold frozen; a successor sees
//! its own guard valid and the frozen leader's invalid; the guard refuses from step-down on
//! while the command still runs in its grace period; the file is where the docs say; a second
//! leasehold given the same file is refused at start; and a frozen leader's command is refused
//! once the file holds another term. The answers for each record, and the elector's order of
//! steps, are in `guard_check.rs`.

use std::path::Path;
use std::time::{Duration, Instant};

use harness::contenders::unique_lease;
use harness::guarded_command::{Counts, Kind, Resource, env, judge, script};
use harness::replica::{FAST, Replica, run_to_end};
use harness::{RunCommand, leasehold_bin};
use leasehold::clock::{BootInstant, WallLead};
use leasehold::guard::{GuardError, GuardRecord, Refusal, check_guard_file, read_guard_file};
use leasehold::lease::{FencingToken, LeaseName};
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use testbed::redis_server::RedisServer;
use testbed::wait::wait_for;

/// How much longer than the check the term must stay valid (`leasehold guard --valid-for`):
/// it covers the few hundred microseconds between the guard's decision and the shell's append
/// (the check's process exits, the shell wakes up). A write that a check allowed can still land
/// after the deadline when a pause falls in that gap; fencing is for that.
const MARGIN: &str = "50ms";
/// How far past the validity deadline a frozen replica stays frozen: past the TTL in Redis
/// (the lease expires one drift after the deadline).
const PAST_THE_TTL: Duration = Duration::from_millis(400);
const ROUNDS: usize = 5;

fn args(guard: &Path) -> Vec<String> {
    let mut args: Vec<String> = FAST.iter().map(|s| s.to_string()).collect();
    args.extend(["--no-data-loss-cooldown".into(), "--guard-file".into()]);
    args.push(guard.display().to_string());
    args
}

/// `leasehold run --guard-file GUARD -- bash -c <the guarded loop>`, leading.
fn guarded_replica(
    redis: &RedisServer,
    lease: &str,
    name: &str,
    guard: &Path,
    out: &Resource,
) -> Replica {
    guarded_replica_with(redis, lease, name, &args(guard), out, false)
}

fn guarded_replica_with(
    redis: &RedisServer,
    lease: &str,
    name: &str,
    args: &[String],
    out: &Resource,
    trap_term: bool,
) -> Replica {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let script = script(trap_term);
    let env = env(&out.path, leasehold_bin(), MARGIN);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Replica::spawn_with_env(
        &redis.url(),
        lease,
        name,
        &args,
        &["bash", "-c", &script],
        &env,
    )
}

/// Waits for a command of a term not in `seen` that has written at least three times: its
/// token and process group.
fn wait_new_term(out: &Resource, seen: &[FencingToken], replica: &Replica) -> (FencingToken, i32) {
    let found = (|| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(&(token, pid)) = out.starts().iter().rev().find(|(t, _)| !seen.contains(t))
                && out.count(token, Kind::Write) >= 3
            {
                return Some((token, pid));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        None
    })();
    found.unwrap_or_else(|| {
        panic!(
            "no new term wrote within 20 s; the resource:\n{}\nleasehold:\n{}",
            std::fs::read_to_string(&out.path).unwrap_or_default(),
            replica.log_text()
        )
    })
}

/// The term the guard file says, read while leasehold is frozen (so nothing moves it).
fn published_term(guard: &Path) -> (FencingToken, BootInstant) {
    match read_guard_file(guard) {
        Ok(GuardRecord::Term {
            token, valid_until, ..
        }) => (token, valid_until),
        other => panic!("the guard file of a frozen leader holds no term: {other:?}"),
    }
}

fn until_boot(instant: BootInstant, what: &str) {
    wait_for(what, Duration::from_secs(10), || {
        (BootInstant::now() >= instant).then_some(())
    });
}

fn report(scenario: &str, rounds: &[(FencingToken, BootInstant, Counts)]) {
    for (i, (token, _, c)) in rounds.iter().enumerate() {
        println!(
            "{scenario} round {}: token {token}: {} writes before the deadline, {} after; {} checks refused after it",
            i + 1,
            c.before,
            c.after,
            c.refused_after
        );
    }
}

/// Stops `replica` (its command writes no more), judges each round's term against its validity
/// deadline, prints the counts, and asserts: no write at or after the deadline, some before
/// it, and some check refused after it (so the scenario did happen).
fn assert_no_write_after_the_deadline(
    scenario: &str,
    replica: Replica,
    rounds: &[(FencingToken, BootInstant)],
    out: &Resource,
) {
    drop(replica);
    let entries = out.entries();
    let rounds: Vec<_> = rounds
        .iter()
        .map(|&(t, d)| (t, d, judge(&entries, t, d)))
        .collect();
    report(scenario, &rounds);
    out.clocks().assert_unchanged();
    for (token, deadline, c) in &rounds {
        let late: Vec<String> = entries
            .iter()
            .filter(|e| e.token == *token && e.kind == Kind::Write && e.at >= *deadline)
            .map(|e| {
                format!(
                    "{:?} after the deadline",
                    e.at.saturating_duration_since(*deadline)
                )
            })
            .collect();
        assert_eq!(
            c.after, 0,
            "{scenario}: term {token} wrote after its deadline: {late:?}"
        );
        assert!(
            c.before > 0,
            "{scenario}: term {token} never wrote: the guard refused all along"
        );
        assert!(
            c.refused_after > 0,
            "{scenario}: term {token}: no check after the deadline, the scenario did not happen"
        );
    }
}

/// The tests below judge the command's writes by the deadline leasehold published: it must be no
/// later than Redis keeps the lease, not taken on leasehold's word alone.
fn assert_within_the_lease_on_redis(redis: &RedisServer, lease: &str, deadline: BootInstant) {
    let pttl: i64 = redis.cmd(&["PTTL", &format!("leasehold:{{{lease}}}")]);
    let ms = u64::try_from(pttl).expect("the lease key lives, with a TTL");
    let expires = BootInstant::now().saturating_add(Duration::from_millis(ms));
    assert!(
        deadline <= expires,
        "the guard file's deadline is {:?} past the lease's expiry on Redis",
        deadline.saturating_duration_since(expires)
    );
}

#[test]
fn a_command_that_asks_its_guard_writes_nothing_after_the_deadline_when_the_pod_is_frozen() {
    let redis = RedisServer::start();
    let out = Resource::new();
    let dir = tempfile::tempdir().unwrap();
    let guard = dir.path().join("guard");
    let lease = unique_lease("pod-frozen");
    let replica = guarded_replica(&redis, &lease, "a", &guard, &out);
    let leasehold = replica.pid();
    let mut rounds = Vec::new();
    let mut seen = Vec::new();
    for _ in 0..ROUNDS {
        let (token, pgid) = wait_new_term(&out, &seen, &replica);
        seen.push(token);
        // Freeze right after a write, while the command sleeps: its next step after the resume
        // is a check. (A freeze between a check and its write is the gap fencing covers.)
        let writes = out.count(token, Kind::Write);
        wait_for("the next write", Duration::from_secs(5), || {
            (out.count(token, Kind::Write) > writes).then_some(())
        });
        kill(leasehold, Signal::SIGSTOP).unwrap();
        killpg(Pid::from_raw(pgid), Signal::SIGSTOP).unwrap();
        let (published, deadline) = published_term(&guard);
        assert_eq!(published, token, "the guard file names the command's term");
        assert_within_the_lease_on_redis(&redis, &lease, deadline);
        until_boot(
            deadline.saturating_add(PAST_THE_TTL),
            "the frozen term's TTL to pass",
        );
        // The worst order: the command first, leasehold only once the command has checked.
        killpg(Pid::from_raw(pgid), Signal::SIGCONT).unwrap();
        wait_for(
            "the resumed command's first check",
            Duration::from_secs(5),
            || {
                out.entries()
                    .iter()
                    .any(|e| e.token == token && e.t0 >= deadline)
                    .then_some(())
            },
        );
        kill(leasehold, Signal::SIGCONT).unwrap();
        rounds.push((token, deadline));
    }
    assert_no_write_after_the_deadline("pod frozen", replica, &rounds, &out);
}

#[test]
fn a_command_that_asks_its_guard_writes_nothing_after_the_deadline_when_only_leasehold_is_frozen() {
    let redis = RedisServer::start();
    let out = Resource::new();
    let dir = tempfile::tempdir().unwrap();
    let guard = dir.path().join("guard");
    let lease = unique_lease("leasehold-frozen");
    let replica = guarded_replica(&redis, &lease, "a", &guard, &out);
    let leasehold = replica.pid();
    let mut rounds = Vec::new();
    let mut seen = Vec::new();
    for _ in 0..ROUNDS {
        let (token, _) = wait_new_term(&out, &seen, &replica);
        seen.push(token);
        kill(leasehold, Signal::SIGSTOP).unwrap();
        let (published, deadline) = published_term(&guard);
        assert_eq!(published, token, "the guard file names the command's term");
        assert_within_the_lease_on_redis(&redis, &lease, deadline);
        // The command runs on: its checks must start failing at the deadline by themselves.
        wait_for(
            "a check refused after the deadline",
            Duration::from_secs(10),
            || {
                out.entries()
                    .iter()
                    .any(|e| e.token == token && e.kind == Kind::Refused && e.t0 >= deadline)
                    .then_some(())
            },
        );
        until_boot(
            deadline.saturating_add(PAST_THE_TTL),
            "the frozen term's TTL to pass",
        );
        kill(leasehold, Signal::SIGCONT).unwrap();
        rounds.push((token, deadline));
    }
    assert_no_write_after_the_deadline("leasehold frozen", replica, &rounds, &out);
}

#[test]
fn a_successor_sees_its_own_guard_valid_and_the_frozen_leaders_invalid() {
    let redis = RedisServer::start();
    let out = Resource::new();
    let dir = tempfile::tempdir().unwrap();
    let (guard_a, guard_b) = (dir.path().join("a"), dir.path().join("b"));
    let lease = unique_lease("successor");
    let a = guarded_replica(&redis, &lease, "a", &guard_a, &out);
    wait_for("a to lead", Duration::from_secs(10), || {
        a.is_ready().then_some(())
    });
    let (token_a, _) = wait_new_term(&out, &[], &a);
    let b = guarded_replica(&redis, &lease, "b", &guard_b, &out);
    a.signal(Signal::SIGSTOP);
    let (_, deadline_a) = published_term(&guard_a);
    wait_for("b to lead", Duration::from_secs(10), || {
        b.is_ready().then_some(())
    });
    let (token_b, _) = wait_new_term(&out, &[token_a], &b);
    assert!(token_b > token_a);

    // While a is still frozen: b's command may act, a's may not.
    let guard = |path: &Path| run_to_end(&["guard", "--guard-file", path.to_str().unwrap()], &[]).0;
    assert_eq!(guard(&guard_b), 0, "the successor's guard");
    assert_eq!(guard(&guard_a), 1, "the frozen leader's guard");
    assert_eq!(check_guard_file(&guard_b).unwrap(), token_b);
    assert!(
        matches!(check_guard_file(&guard_a), Err(GuardError::Refused { refusal: Refusal::Expired { token, .. }, .. }) if token == token_a),
        "{:?}",
        check_guard_file(&guard_a)
    );

    let entries = out.entries();
    let last_a = entries
        .iter()
        .filter(|e| e.token == token_a && e.kind == Kind::Write)
        .map(|e| e.at)
        .max()
        .unwrap();
    let first_b = entries
        .iter()
        .filter(|e| e.token == token_b && e.kind == Kind::Write)
        .map(|e| e.at)
        .min()
        .unwrap();
    println!(
        "the frozen leader's last write came {:?} before its deadline; the successor's first write {:?} after it",
        deadline_a.saturating_duration_since(last_a),
        first_b.saturating_duration_since(deadline_a)
    );
    assert!(last_a < deadline_a, "a wrote after its deadline");
    assert!(first_b > deadline_a, "b wrote before a's deadline");

    a.signal(Signal::SIGCONT);
    wait_for("a to zero its guard file", Duration::from_secs(10), || {
        matches!(read_guard_file(&guard_a), Ok(GuardRecord::NoTerm { .. })).then_some(())
    });
    assert_eq!(guard(&guard_a), 1);
    assert_eq!(guard(&guard_b), 0);
}

#[test]
fn the_guard_refuses_from_step_down_on_while_the_command_runs_out_its_grace_period() {
    let redis = RedisServer::start();
    let out = Resource::new();
    let dir = tempfile::tempdir().unwrap();
    let guard = dir.path().join("guard");
    let mut args = args(&guard);
    args.extend(["--grace-period".into(), "5s".into()]);
    let mut replica = guarded_replica_with(&redis, &unique_lease("grace"), "a", &args, &out, true);
    let (token, _) = wait_new_term(&out, &[], &replica);
    replica.signal(Signal::SIGTERM);
    assert_eq!(replica.wait_exit(Duration::from_secs(15)), 0);
    let entries = out.entries();
    // The command hears SIGTERM only after the step-down began, and the file was zeroed first.
    let term = entries
        .iter()
        .find(|e| e.token == token && e.kind == Kind::Term)
        .expect("the command got SIGTERM")
        .at;
    let after_term = |kind| {
        entries
            .iter()
            .filter(|e| e.token == token && e.kind == kind && e.t0 > term)
            .count()
    };
    let (writes, refused) = (after_term(Kind::Write), after_term(Kind::Refused));
    println!(
        "after SIGTERM the command checked {refused} times, all refused; it wrote {writes} times"
    );
    assert_eq!(writes, 0, "the command wrote after step-down");
    assert!(
        refused >= 3,
        "the command did not run on into its grace period"
    );
    assert!(!guard.exists(), "the guard file is removed at exit");
}

#[test]
fn the_command_finds_its_guard_file_in_the_runtime_dir_and_it_is_removed_at_exit() {
    let redis = RedisServer::start();
    let runtime = tempfile::tempdir().unwrap();
    let out = runtime.path().join("out");
    let script = r#"echo "$LEASEHOLD_GUARD_FILE" > "$OUT.path"; "$LH" guard && echo valid > "$OUT"; exec sleep 300"#;
    let mut replica = Replica::spawn_with_env(
        &redis.url(),
        &unique_lease("runtime-dir"),
        "a",
        &FAST,
        &["sh", "-c", script],
        &[
            ("XDG_RUNTIME_DIR", runtime.path().to_str().unwrap()),
            ("OUT", out.to_str().unwrap()),
            ("LH", leasehold_bin()),
        ],
    );
    wait_for("the command's check", Duration::from_secs(10), || {
        std::fs::read_to_string(&out)
            .ok()
            .filter(|s| s == "valid\n")
    });
    let path = std::fs::read_to_string(runtime.path().join("out.path")).unwrap();
    let path = Path::new(path.trim_end());
    assert_eq!(path.parent(), Some(runtime.path()), "{path:?}");
    let name = path.file_name().unwrap().to_str().unwrap();
    assert!(
        name.contains("runtime-dir"),
        "named after the lease: {name}"
    );
    assert!(
        name.ends_with(&format!("-{}", replica.pid())),
        "and the pid: {name}"
    );
    assert!(check_guard_file(path).is_ok());
    replica.signal(Signal::SIGTERM);
    assert_eq!(replica.wait_exit(Duration::from_secs(15)), 0);
    assert!(!path.exists(), "removed at exit");
}

#[test]
fn a_second_leasehold_given_the_same_guard_file_is_refused_naming_the_first() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let guard = dir.path().join("guard");
    let lease = unique_lease("shared-guard");
    let args = args(&guard);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut a = Replica::spawn(&redis.url(), &lease, "a", &args, &["sleep", "300"]);
    wait_for("a to lead", Duration::from_secs(10), || {
        a.is_ready().then_some(())
    });
    let token_a = check_guard_file(&guard).expect("a's term is in the guard file");

    // A follower given a's file used to take over and publish its own term there: refused.
    let b = RunCommand::new(leasehold_bin())
        .redis_url(&redis.url())
        .lease(&lease)
        .args(&args)
        .command(["sleep", "300"]);
    Replica::start(b, "b", &[]).assert_refused_for_a_file_of("--guard-file", &guard, a.pid());
    assert_eq!(
        check_guard_file(&guard).ok(),
        Some(token_a),
        "a's file untouched"
    );

    // The lock dies with its holder: after a SIGKILL the file is free for the next leasehold.
    a.signal(Signal::SIGKILL);
    a.wait_exit(Duration::from_secs(10));
    let c = Replica::spawn(&redis.url(), &lease, "c", &args, &["sleep", "300"]);
    wait_for("c to lead", Duration::from_secs(10), || {
        c.is_ready().then_some(())
    });
    wait_for(
        "c's term in the guard file",
        Duration::from_secs(10),
        || check_guard_file(&guard).ok().filter(|t| *t > token_a),
    );
}

#[test]
fn a_frozen_leaders_command_is_refused_once_the_guard_file_holds_another_term() {
    let redis = RedisServer::start();
    let out = Resource::new();
    let dir = tempfile::tempdir().unwrap();
    let guard = dir.path().join("guard");
    let lease = unique_lease("other-term");
    let replica = guarded_replica(&redis, &lease, "a", &guard, &out);
    let (token, _) = wait_new_term(&out, &[], &replica);
    replica.signal(Signal::SIGSTOP);
    // Another term's record, valid for long, in the file the frozen leader's command reads (as a
    // second writer of the file would leave it), replaced atomically as leasehold does.
    let other = GuardRecord::Term {
        lease: LeaseName::new(lease.as_str()).unwrap(),
        token: FencingToken(token.0 + 1),
        valid_until: BootInstant::now().saturating_add(Duration::from_secs(60)),
        wall_until: WallLead::now()
            .wall_at(BootInstant::now().saturating_add(Duration::from_secs(60))),
    };
    let next = dir.path().join("next");
    std::fs::write(&next, other.encode()).unwrap();
    std::fs::rename(&next, &guard).unwrap();
    let replaced = BootInstant::now();
    let checks_since = || {
        out.entries()
            .into_iter()
            .filter(|e| e.token == token && e.t0 >= replaced)
            .collect::<Vec<_>>()
    };
    let since = wait_for(
        "three checks of the command since",
        Duration::from_secs(10),
        || Some(checks_since()).filter(|c| c.len() >= 3),
    );
    replica.signal(Signal::SIGCONT);
    let writes = since.iter().filter(|e| e.kind == Kind::Write).count();
    assert_eq!(
        writes,
        0,
        "the frozen leader's command (term {token}) wrote {writes} times of {} checks under term {}'s record",
        since.len(),
        token.0 + 1
    );
}
