//! The guard and status files on a filesystem that stops answering (a hung network or FUSE
//! volume), as real processes: the files' writes wait, and nothing else may. The process keeps
//! answering and renewing, its command is still killed by the term's deadline, a guard file
//! that cannot be zeroed keeps the lease until the deadline it names (no early release lets
//! a successor's term overlap it), and the shutdown is done within its bound.

use std::path::Path;
use std::time::{Duration, Instant};

use harness::contenders::unique_lease;
use harness::replica::{Replica, TWO_SECOND_TERM, step_down};
use leasehold::clock::BootInstant;
use leasehold::guard::{GuardRecord, check_guard_file, read_guard_file};
use testbed::proxy::{Fault, FaultProxy};
use testbed::redis_server::RedisServer;
use testbed::stalling_dir::StallingDir;
use testbed::wait::wait_for;

use crate::binary::{fast, process_alive};

/// The shutdown bound of a replica at `fast()` timings without a command: a release (1 s), the
/// slack (5 s) and the Kubernetes notes (2 s).
const FAST_SHUTDOWN_BOUND: Duration = Duration::from_secs(8);

fn plain() -> Vec<String> {
    fast().iter().map(|s| s.to_string()).collect()
}

fn with_file(flag: &str, path: &Path) -> Vec<String> {
    with_file_at(&plain(), flag, path)
}

/// `timing` (flags) with `flag path`.
fn with_file_at(timing: &[String], flag: &str, path: &Path) -> Vec<String> {
    let mut args = timing.to_vec();
    args.extend([flag.to_owned(), path.display().to_string()]);
    args
}

/// The deadline of the term that the frozen guard file `name` of `stalling` names, as it will
/// be read once thawed.
fn frozen_deadline(stalling: &StallingDir, name: &str, a: &Replica) -> BootInstant {
    match read_guard_file(stalling.behind().join(name)) {
        Ok(GuardRecord::Term { valid_until, .. }) => valid_until,
        other => panic!("a's guard file holds no term: {other:?}\n{}", a.log_text()),
    }
}

fn spawn(url: &str, lease: &str, name: &str, args: &[String], command: &[&str]) -> Replica {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Replica::spawn(url, lease, name, &args, command)
}

/// `a` leading with its guard file on a filesystem that can be frozen, and `b` following it
/// with its own guard file (`b_guard`), both at `timing`.
struct Pair {
    redis: RedisServer,
    lease: String,
    stalling: StallingDir,
    a: Replica,
    /// Kept running: b takes the next term.
    _b: Replica,
    b_guard: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

fn a_leads_and_b_follows(test: &str, timing: &[String]) -> Pair {
    let redis = RedisServer::start();
    let lease = unique_lease(test);
    let stalling = StallingDir::mount();
    let dir = tempfile::tempdir().unwrap();
    let b_guard = dir.path().join("guard");
    let a_args = with_file_at(timing, "--guard-file", &stalling.path().join("guard"));
    let a = spawn(&redis.url(), &lease, "a", &a_args, &[]);
    wait_for("a to lead", Duration::from_secs(10), || {
        a.is_ready().then_some(())
    });
    let b_args = with_file_at(timing, "--guard-file", &b_guard);
    let b = spawn(&redis.url(), &lease, "b", &b_args, &[]);
    wait_for("b to follow a", Duration::from_secs(5), || {
        (b.leader()["leader"] == "a").then_some(())
    });
    Pair {
        redis,
        lease,
        stalling,
        a,
        _b: b,
        b_guard,
        _dir: dir,
    }
}

/// When `b`'s guard file first said its term is valid (polled from now on).
fn b_valid_from(b_guard: &Path) -> BootInstant {
    wait_for("b's term", Duration::from_secs(10), || {
        check_guard_file(b_guard).ok().map(|_| BootInstant::now())
    })
}

fn renewals(replica: &Replica) -> f64 {
    replica
        .metric("leasehold_renewals_total{result=\"renewed\"}")
        .unwrap_or(0.0)
}

/// A leader whose guard file's filesystem hangs still answers its probes and renews; when it
/// then loses Redis, its command is killed by the term's validity deadline, before the next
/// leader's term begins. (Before, the guard's write held a runtime worker and then, through
/// the writer's lock, every other: the process froze and its command ran on beside the next
/// leader.)
#[test]
fn a_hung_guard_file_holds_up_neither_the_process_nor_the_deadline_kill() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr());
    let lease = unique_lease("hung-guard");
    let stalling = StallingDir::mount();
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let script = format!(
        "echo $$ > {}; while :; do sleep 0.05; done",
        pid_file.display()
    );
    let args = with_file("--guard-file", &stalling.path().join("guard"));
    let a = spawn(&proxy.url(), &lease, "a", &args, &["sh", "-c", &script]);
    wait_for("a to lead", Duration::from_secs(10), || {
        a.is_ready().then_some(())
    });
    let command: i32 = wait_for("the command's pid", Duration::from_secs(5), || {
        std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok()
    });
    stalling.freeze();
    // Three renewals later, the process still answers and leads.
    let before = renewals(&a);
    wait_for("a to renew three times", Duration::from_secs(5), || {
        (renewals(&a) >= before + 3.0).then_some(())
    });
    assert!(
        a.is_ready(),
        "the leader stopped leading:\n{}",
        a.log_text()
    );
    // Then Redis goes out of reach: the term ends, and its command with it.
    let b = spawn(&redis.url(), &lease, "b", &plain(), &[]);
    proxy.set(Fault::Blackhole);
    wait_for("b to lead", Duration::from_secs(10), || {
        b.is_ready().then_some(())
    });
    assert!(
        !process_alive(command),
        "a's command still runs beside the next leader:\n{}",
        a.log_text()
    );
    stalling.thaw();
}

/// A guard file that cannot be zeroed at step-down still says the term is valid until its
/// deadline: the lease is kept until then rather than released, so a successor's term does
/// not begin while the file still vouches for this one. The shutdown stays within its bound.
#[test]
fn a_guard_file_that_cannot_be_zeroed_keeps_the_lease_to_its_deadline() {
    let mut p = a_leads_and_b_follows("unzeroed-guard", &plain());
    let (stalling, a, b_guard) = (&p.stalling, &mut p.a, &p.b_guard);
    stalling.freeze();
    let valid_until = frozen_deadline(stalling, "guard", a);
    a.signal(nix::sys::signal::Signal::SIGTERM);
    let sent = Instant::now();
    let valid = b_valid_from(b_guard);
    assert!(
        valid > valid_until,
        "b's term was valid {:?} before a's guard file stopped vouching for a's:\n{}",
        valid_until.since_boot().saturating_sub(valid.since_boot()),
        a.log_text()
    );
    stops_within_its_bound(a, sent, stalling);
    // At shutdown the lease was left to expire, not released at the deadline.
    assert!(
        a.events("released the lease").is_empty(),
        "{}",
        a.log_text()
    );
    let kept = "a trace of the term could not be withdrawn; the lease is released at the term's deadline, or left to expire at shutdown";
    assert_eq!(a.events(kept).len(), 1, "{}", a.log_text());
}

/// A status file whose filesystem hangs does not hold up the shutdown past its bound; the
/// release is not held up either.
#[test]
fn a_hung_status_file_does_not_hold_up_the_shutdown() {
    let redis = RedisServer::start();
    let lease = unique_lease("hung-status");
    let stalling = StallingDir::mount();
    let args = with_file("--status-file", &stalling.path().join("status.json"));
    let mut a = spawn(&redis.url(), &lease, "a", &args, &[]);
    wait_for("a to lead", Duration::from_secs(10), || {
        a.is_ready().then_some(())
    });
    let b = spawn(&redis.url(), &lease, "b", &plain(), &[]);
    wait_for("b to follow a", Duration::from_secs(5), || {
        (b.leader()["leader"] == "a").then_some(())
    });
    stalling.freeze();
    a.signal(nix::sys::signal::Signal::SIGTERM);
    let sent = Instant::now();
    a.wait_events("released the lease", 1, Duration::from_secs(5));
    stops_within_its_bound(&mut a, sent, &stalling);
}

/// `a`, sent SIGTERM at `sent`, has done all of its shutdown within the bound. Only the kernel
/// may keep the process from exiting then: a thread in a write to the hung filesystem waits
/// uninterruptibly (`D`), and no process exits before all of its threads have. Once the
/// filesystem answers again, it exits 0 at once.
fn stops_within_its_bound(a: &mut Replica, sent: Instant, stalling: &StallingDir) {
    let left = FAST_SHUTDOWN_BOUND.saturating_sub(sent.elapsed());
    a.wait_events("leasehold stopped", 1, left);
    stalling.thaw();
    let code = a.process.wait_exit(Duration::from_secs(5)).unwrap();
    assert_eq!(code, Some(0), "{}", a.log_text());
}

/// A handover asked of a leader whose guard file cannot be zeroed waits for the deadline the
/// file names, then goes to the replica it names (the reservation written with the release),
/// and `leasehold step-down` says so.
#[test]
fn a_handover_from_a_guard_file_that_cannot_be_zeroed_waits_for_its_deadline() {
    // Long enough a reservation (two retry periods, 800 ms) for b to take it on a loaded
    // machine: else c may, and step-down rightly fails.
    let timing: Vec<String> = TWO_SECOND_TERM.iter().map(|s| s.to_string()).collect();
    let p = a_leads_and_b_follows("unzeroed-handover", &timing);
    let (redis, lease, stalling, a, b_guard) = (&p.redis, &p.lease, &p.stalling, &p.a, &p.b_guard);
    let c = spawn(&redis.url(), lease, "c", &timing, &[]);
    wait_for("c to follow a", Duration::from_secs(5), || {
        (c.leader()["leader"] == "a").then_some(())
    });
    stalling.freeze();
    let valid_until = frozen_deadline(stalling, "guard", a);
    let (valid, (code, _, said)) = std::thread::scope(|s| {
        let b_valid = s.spawn(|| b_valid_from(b_guard));
        let asked = step_down(&redis.url(), lease, &["--to", "b"]);
        (b_valid.join().unwrap(), asked)
    });
    stalling.thaw();
    assert_eq!(code, 0, "{said}\n{}", a.log_text());
    assert!(
        valid > valid_until,
        "b's term was valid {:?} before a's guard file stopped vouching for a's",
        valid_until.since_boot().saturating_sub(valid.since_boot()),
    );
    a.wait_events("released the lease", 1, Duration::from_secs(5));
}

/// A command that ends by itself while its guard file cannot be zeroed (the process ends with
/// it): the lease is released once the term's deadline passed, not left to expire as at a
/// shutdown, and leasehold exits with the command's code.
#[test]
fn a_command_ending_beside_a_hung_guard_file_releases_at_the_deadline() {
    let redis = RedisServer::start();
    let lease = unique_lease("hung-guard-command-ends");
    let stalling = StallingDir::mount();
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let script = format!("while [ ! -e {} ]; do sleep 0.02; done", go.display());
    let args = with_file("--guard-file", &stalling.path().join("guard"));
    let mut a = spawn(&redis.url(), &lease, "a", &args, &["sh", "-c", &script]);
    // Frozen once the command runs. A command started while a write to the file is under way
    // waits in its exec until the filesystem answers: exec closes the descriptor the child
    // inherited, and a FUSE close waits for the daemon. Not handled yet.
    a.wait_events("started the command", 1, Duration::from_secs(10));
    stalling.freeze();
    let valid_until = frozen_deadline(&stalling, "guard", &a);
    std::fs::write(&go, "").unwrap();
    a.wait_events("released the lease", 1, Duration::from_secs(5));
    assert!(
        BootInstant::now() > valid_until,
        "released before the deadline the file names"
    );
    stalling.thaw();
    assert_eq!(
        a.process.wait_exit(Duration::from_secs(5)).unwrap(),
        Some(0),
        "{}",
        a.log_text()
    );
}
