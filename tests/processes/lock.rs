//! `leasehold lock -- CMD`, the one-shot lock, as a real process against a real redis-server:
//! winning and exiting with the command's code, not acquired in time (exit 75 and the holder
//! named), waiting for a release, and lost while the command runs (exit 76, command stopped).

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use harness::contenders::{lease, unique_lease};
use harness::leasehold_bin;
use harness::replica::FAST;
use leasehold::cmd::lock::{LOST, NOT_ACQUIRED, REDIS_FAILED};
use leasehold::lease::{Acquired, Grant, RedisLease};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use testbed::Guarded;
use testbed::RedisServer;
use testbed::proxy::{Fault, FaultProxy};
use testbed::wait::wait_for;

const TTL: Duration = Duration::from_millis(1500);
const CALL: Duration = Duration::from_secs(2);

/// A running `leasehold lock` with its output collected.
struct Lock {
    process: Guarded,
}

impl Lock {
    fn spawn(url: &str, lease: &str, extra: &[&str], command: &[&str]) -> Self {
        Self::spawn_timed(url, lease, &FAST, extra, command)
    }

    /// [`spawn`](Self::spawn) with `timing` instead of [`FAST`].
    fn spawn_timed(
        url: &str,
        lease: &str,
        timing: &[&str],
        extra: &[&str],
        command: &[&str],
    ) -> Self {
        let mut cmd = Command::new(leasehold_bin());
        cmd.args(["lock", "--redis-url", url, "--lease-name", lease])
            .args(["--kubernetes", "off", "--no-data-loss-cooldown"])
            .args(["--identity", "cron-run", "--log-format", "json"])
            .args(timing)
            .args(extra)
            .arg("--")
            .args(command)
            .env_remove("POD_NAME")
            .env_remove("POD_NAMESPACE");
        Self {
            process: Guarded::spawn(cmd, "leasehold lock").expect("spawn leasehold lock"),
        }
    }

    fn wait(&mut self, timeout: Duration) -> i32 {
        match self.process.wait_exit(timeout).expect("poll the exit") {
            Some(code) => code,
            None => panic!(
                "leasehold lock did not exit within {timeout:?}:\n{}",
                self.logs()
            ),
        }
    }

    /// Waits up to `timeout` for the lock to end "not acquired", its command never run (it
    /// prints `ran` when it runs).
    fn not_acquired_within(&mut self, timeout: Duration) {
        assert_eq!(self.wait(timeout), NOT_ACQUIRED, "{}", self.logs());
        let printed = self.stdout();
        assert!(printed.is_empty(), "the command ran: {printed:?}");
    }

    fn stdout(&self) -> Vec<String> {
        self.process.stdout.snapshot()
    }

    fn logs(&self) -> String {
        self.process.stderr.text()
    }

    fn events(&self, message: &str) -> Vec<serde_json::Value> {
        self.process
            .stderr
            .snapshot()
            .iter()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|l| l["message"] == message)
            .collect()
    }
}

async fn hold(lease: &RedisLease, ttl: Duration) -> Grant {
    match lease.acquire(ttl, CALL).await.unwrap() {
        Acquired::Leader(grant) => grant,
        other => panic!("the test's holder did not lead: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_runs_the_command_once_with_its_token_and_exits_with_its_code() {
    let redis = RedisServer::start();
    let name = unique_lease("lock-wins");
    let mut lock = Lock::spawn(
        &redis.url(),
        &name,
        &[],
        &["sh", "-c", "echo token=$LEASEHOLD_FENCING_TOKEN; exit 7"],
    );
    assert_eq!(lock.wait(Duration::from_secs(10)), 7, "{}", lock.logs());
    let printed = lock.stdout();
    let token: u64 = printed
        .iter()
        .find_map(|l| l.strip_prefix("token="))
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no token printed: {printed:?}"));
    // Released at the end: the lease is free, and its last token was the command's.
    let seen = lease(&redis.url(), &name, "observer", false)
        .observe(CALL)
        .await
        .unwrap();
    assert!(seen.holder.is_none(), "{seen:?}");
    assert_eq!(seen.token.map(|t| t.0), Some(token));
    assert_eq!(
        printed.iter().filter(|l| l.starts_with("token=")).count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_held_by_another_exits_75_naming_the_holder_without_running_the_command() {
    let redis = RedisServer::start();
    let name = unique_lease("lock-held");
    let other = lease(&redis.url(), &name, "cron-other", false);
    let grant = hold(&other, TTL).await;
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let script = format!("touch {}", ran.display());
    let started = Instant::now();
    let mut lock = Lock::spawn(
        &redis.url(),
        &name,
        &["--wait", "300ms"],
        &["sh", "-c", &script],
    );
    assert_eq!(
        lock.wait(Duration::from_secs(10)),
        NOT_ACQUIRED,
        "{}",
        lock.logs()
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(!ran.exists(), "the command ran without the lock");
    let said = lock.events("lock not acquired within --wait");
    assert_eq!(said.len(), 1, "{}", lock.logs());
    assert_eq!(said[0]["holder"], "cron-other");
    assert_eq!(said[0]["token"], grant.token.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_with_a_wait_takes_the_lease_once_the_holder_releases_it() {
    let redis = RedisServer::start();
    let name = unique_lease("lock-waits");
    let other = lease(&redis.url(), &name, "cron-other", false);
    // Held for 30 s: only the release, not the lease running out, can end the 10 s wait well.
    let grant = hold(&other, Duration::from_secs(30)).await;
    let mut lock = Lock::spawn(
        &redis.url(),
        &name,
        &["--wait", "10s"],
        &["sh", "-c", "echo ran"],
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    other.release(grant.token, CALL).await.unwrap();
    assert_eq!(lock.wait(Duration::from_secs(10)), 0, "{}", lock.logs());
    assert_eq!(lock.stdout(), vec!["ran".to_owned()]);
}

/// A signal ends a lock with 128 + its number, as a shell reports it, also while it waits:
/// not 75, which tells a CronJob's wrapper to try again later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_ends_a_lock_with_its_own_exit_code() {
    let redis = RedisServer::start();
    let name = unique_lease("lock-signalled");
    let other = lease(&redis.url(), &name, "cron-other", false);
    hold(&other, Duration::from_secs(30)).await;
    let extra = ["--wait", "30s"];
    let mut waiting = Lock::spawn(&redis.url(), &name, &extra, &["sh", "-c", "echo ran"]);
    wait_for(
        "the lock to see the holder",
        Duration::from_secs(10),
        || (!waiting.events("following leader").is_empty()).then_some(()),
    );
    waiting.process.signal(Signal::SIGINT).unwrap();
    assert_eq!(
        waiting.wait(Duration::from_secs(10)),
        130,
        "{}",
        waiting.logs()
    );
    let said = waiting.events("lock stopped by a signal before it was acquired");
    assert_eq!(said.len(), 1, "{}", waiting.logs());
    assert!(waiting.events("lock not acquired within --wait").is_empty());
    // While the command runs: the command is stopped, and the signal's code is leasehold's.
    let name = unique_lease("lock-hung-up");
    let dir = tempfile::tempdir().unwrap();
    let started = dir.path().join("started");
    let script = format!("touch {}; exec sleep 60", started.display());
    let mut running = Lock::spawn(&redis.url(), &name, &[], &["sh", "-c", &script]);
    wait_for("the command to start", Duration::from_secs(10), || {
        started.exists().then_some(())
    });
    running.process.signal(Signal::SIGHUP).unwrap();
    assert_eq!(
        running.wait(Duration::from_secs(10)),
        129,
        "{}",
        running.logs()
    );
    let said = running.events(
        "lock released; exiting with 128 + the number of the signal that stopped leasehold",
    );
    assert_eq!(said.len(), 1, "{}", running.logs());
    assert_eq!(said[0]["code"], 129);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_lost_while_the_command_runs_stops_it_and_exits_76() {
    let redis = RedisServer::start();
    let name = unique_lease("lock-lost");
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let script = format!("echo $$ > {}; exec sleep 60", pid_file.display());
    let mut lock = Lock::spawn(&redis.url(), &name, &[], &["sh", "-c", &script]);
    let pid: i32 = wait_for("the command's pid", Duration::from_secs(10), || {
        std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
    });
    // Somebody else's value in the lease: the next renewal finds it not ours.
    let key = lease(&redis.url(), &name, "observer", false)
        .keys()
        .lease
        .clone();
    redis.cmd::<()>(&["SET", &key, "intruder-1#1", "PX", "60000"]);
    let started = Instant::now();
    assert_eq!(lock.wait(Duration::from_secs(10)), LOST, "{}", lock.logs());
    eprintln!("lost → leasehold lock exited after {:?}", started.elapsed());
    assert!(
        kill(Pid::from_raw(pid), None).is_err(),
        "the command (pid {pid}) still runs after the lock was lost"
    );
    let stepped = lock.events("stepped down");
    assert_eq!(stepped.last().expect("a step-down")["reason"], "lost");
    assert_eq!(
        lock.events("lock lost while the command ran; the command was stopped")
            .len(),
        1
    );
}

/// A command that ended on its own with 0 did its work: a term lost while leasehold stops what
/// it left running (a child that ignores SIGTERM, for the grace period) is cleanup's, and the
/// lock exits 0. It exited 76, "lost, the command was stopped", and a Job ran the work again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_lost_while_the_commands_leftovers_stop_exits_with_the_commands_code() {
    let redis = RedisServer::start();
    let name = unique_lease("lock-leftovers");
    let script = "sh -c 'trap \"\" TERM; sleep 30' & sleep 0.2; echo done; exit 0";
    let mut lock = Lock::spawn(
        &redis.url(),
        &name,
        &["--grace-period", "4s"],
        &["sh", "-c", script],
    );
    wait_for("the leftover's stop", Duration::from_secs(10), || {
        (!lock
            .events("stopping what the command left running")
            .is_empty())
        .then_some(())
    });
    let key = lease(&redis.url(), &name, "observer", false)
        .keys()
        .lease
        .clone();
    redis.cmd::<()>(&["SET", &key, "intruder-1#1", "PX", "60000"]);
    assert_eq!(lock.wait(Duration::from_secs(15)), 0, "{}", lock.logs());
    assert_eq!(lock.stdout(), ["done"]);
}

/// A lock taken inside another leasehold's command claims a guard file of its own: the
/// `LEASEHOLD_GUARD_FILE` it inherits names its parent's, which it took for its own
/// `--guard-file` and was refused (exit 2, "another live leasehold writes this file").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_inside_a_lock_takes_its_own_guard_file() {
    let redis = RedisServer::start();
    let (outer, inner) = (unique_lease("lock-outer"), unique_lease("lock-inner"));
    let script = format!(
        "{} lock --redis-url {} --lease-name {inner} --kubernetes off --no-data-loss-cooldown \
         -- sh -c 'echo inner ran; leasehold_guard=$LEASEHOLD_GUARD_FILE; [ \"$leasehold_guard\" != \"$0\" ] && echo own file' \"$LEASEHOLD_GUARD_FILE\"",
        leasehold_bin(),
        redis.url()
    );
    let mut lock = Lock::spawn(&redis.url(), &outer, &[], &["sh", "-c", &script]);
    assert_eq!(lock.wait(Duration::from_secs(20)), 0, "{}", lock.logs());
    assert_eq!(lock.stdout(), ["inner ran", "own file"], "{}", lock.logs());
}

/// So does one that inherits a config file whose `guard-file` names its parent's file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_inside_a_lock_takes_its_own_guard_file_whatever_the_config_file_says() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let guard = dir.path().join("guard");
    let config = dir.path().join("leasehold.yaml");
    std::fs::write(&config, format!("guard-file: {}\n", guard.display())).unwrap();
    let (outer, inner) = (unique_lease("conf-outer"), unique_lease("conf-inner"));
    let script = format!(
        "LEASEHOLD_CONFIG={} {} lock --redis-url {} --lease-name {inner} --kubernetes off \
         --no-data-loss-cooldown -- echo inner ran",
        config.display(),
        leasehold_bin(),
        redis.url()
    );
    let path = guard.display().to_string();
    let mut lock = Lock::spawn(
        &redis.url(),
        &outer,
        &["--guard-file", &path],
        &["sh", "-c", &script],
    );
    assert_eq!(lock.wait(Duration::from_secs(20)), 0, "{}", lock.logs());
    assert_eq!(lock.stdout(), ["inner ran"], "{}", lock.logs());
}

/// A config file's guard file of its own is still the nested lock's: only the parent's is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_inside_a_lock_keeps_the_guard_file_its_config_names() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let own = dir.path().join("inner-guard");
    let config = dir.path().join("inner.yaml");
    std::fs::write(&config, format!("guard-file: {}\n", own.display())).unwrap();
    let (outer, inner) = (unique_lease("own-outer"), unique_lease("own-inner"));
    let script = format!(
        "{} lock --config {} --redis-url {} --lease-name {inner} --kubernetes off \
         --no-data-loss-cooldown -- sh -c 'echo $LEASEHOLD_GUARD_FILE'",
        leasehold_bin(),
        config.display(),
        redis.url()
    );
    let mut lock = Lock::spawn(&redis.url(), &outer, &[], &["sh", "-c", &script]);
    assert_eq!(lock.wait(Duration::from_secs(20)), 0, "{}", lock.logs());
    assert_eq!(
        lock.stdout(),
        [own.display().to_string()],
        "{}",
        lock.logs()
    );
}

/// A Redis that may evict the lease, and a lock that `--redis-eviction refuse` keeps out of the
/// election for its `--wait` of `wait`, its command `echo ran`.
fn gated_lock(test: &str, wait: &str) -> (RedisServer, Lock) {
    let redis = RedisServer::builder()
        .args(["--maxmemory", "64mb", "--maxmemory-policy", "volatile-lru"])
        .start();
    let extra = ["--wait", wait, "--redis-eviction", "refuse"];
    let command = ["sh", "-c", "echo ran"];
    let lock = Lock::spawn(&redis.url(), &unique_lease(test), &extra, &command);
    (redis, lock)
}

/// `--wait` bounds the wait also while a gate keeps the lock out of the election and it never
/// gets to try: `--redis-eviction refuse` against a Redis that may evict the lease exits
/// "not acquired" once the wait is over, instead of waiting for the gate for ever.
#[test]
fn a_lock_kept_out_by_a_gate_gives_up_when_its_wait_is_over() {
    let (_redis, mut lock) = gated_lock("lock-gated", "1s");
    lock.not_acquired_within(Duration::from_secs(10));
    // Its one line says which gate kept it out, and why.
    let said = lock.events("lock not acquired within --wait");
    assert_eq!(said.len(), 1, "{}", lock.logs());
    assert_eq!(said[0]["kept_out_by"], "redis_may_evict", "{}", lock.logs());
    let why = said[0]["kept_out"].as_str().unwrap_or_default();
    assert!(why.contains("volatile-lru"), "{why}");
}

/// The lock's one line carries what its reads heard of Redis while the gate kept it out: here
/// Redis stops answering during the wait, and the elector, which never tried, heard nothing.
#[test]
fn a_lock_kept_out_by_a_gate_says_what_its_reads_heard_of_redis() {
    let (redis, mut lock) = gated_lock("lock-gated-unheard", "5s");
    let refused = "redis may evict the lease under memory pressure (maxmemory with an evicting policy); give leases a redis with maxmemory-policy noeviction";
    wait_for("the refusal", Duration::from_secs(10), || {
        (!lock.events(refused).is_empty()).then_some(())
    });
    redis.pause();
    let code = lock.process.wait_exit(Duration::from_secs(20));
    redis.resume();
    // Redis did not answer at the end: not "busy, try later" (75), a failure (1).
    assert_eq!(code.ok().flatten(), Some(REDIS_FAILED), "{}", lock.logs());
    let said = lock.events("lock not acquired within --wait");
    assert_eq!(said.len(), 1, "{}", lock.logs());
    let error = said[0]["redis_error"].as_str().unwrap_or_default();
    assert!(!error.is_empty(), "no redis_error: {}", lock.logs());
}

/// A lock that cannot read the lease at all, Redis down, frozen or refusing its password, fails
/// (exit 1) rather than saying "not acquired, try again later" (75), which a wrapper that skips
/// a busy lock would take for a lock held elsewhere, for ever. Frozen, Redis answers nothing
/// before the wait ends: the eviction gate, waiting for its first read, kept the lock from
/// trying, and the lock said 75 unless that read's own bound ran out first.
#[test]
fn a_lock_that_cannot_reach_redis_fails_instead_of_saying_try_later() {
    let nobody = format!("redis://{}", testbed::free_addr());
    let protected = RedisServer::builder()
        .args(["--requirepass", "theirs"])
        .start();
    let frozen = RedisServer::start();
    frozen.pause();
    let dir = tempfile::tempdir().unwrap();
    let password = dir.path().join("password");
    std::fs::write(&password, "not-theirs\n").unwrap();
    let password = ["--redis-password-file", password.to_str().unwrap()];
    let cases = [
        (nobody, &[][..]),
        (protected.url(), &password[..]),
        (frozen.url(), &[][..]),
    ];
    for (url, extra) in cases {
        let extra = [&["--wait", "0s"][..], extra].concat();
        let mut lock = Lock::spawn(&url, &unique_lease("lock-no-redis"), &extra, &["true"]);
        assert_eq!(
            lock.wait(Duration::from_secs(15)),
            REDIS_FAILED,
            "{}",
            lock.logs()
        );
        let said = lock.events("lock not acquired within --wait");
        assert!(
            said.len() == 1 && said[0]["redis_error"] != "",
            "{}",
            lock.logs()
        );
    }
}

/// A lock whose every try Redis refuses while it still answers reads fails too (exit 1): a user
/// without `+set` (a missing permission), a Redis out of memory, a replica's URL. No holder was
/// named, so nothing says the lock is held elsewhere; 75 sent the wrapper to try again later,
/// for ever.
#[test]
fn a_lock_whose_tries_redis_refuses_while_it_reads_fails() {
    let redis = RedisServer::start();
    let rule = leasehold::lease::minimal_acl_rule("leasehold:", false).replace(" +set", "");
    redis.set_acl_user("locker", &rule, "s3cret");
    let dir = tempfile::tempdir().unwrap();
    let password = dir.path().join("password");
    std::fs::write(&password, "s3cret\n").unwrap();
    let as_user = ["--redis-username", "locker", "--redis-password-file"];
    let extra = [&as_user[..], &[password.to_str().unwrap(), "--wait", "1s"]].concat();
    let command = ["sh", "-c", "echo ran"];
    let mut lock = Lock::spawn(
        &redis.url(),
        &unique_lease("lock-refused"),
        &extra,
        &command,
    );
    assert_eq!(
        lock.wait(Duration::from_secs(15)),
        REDIS_FAILED,
        "{}",
        lock.logs()
    );
    assert!(lock.stdout().is_empty(), "the command ran: {}", lock.logs());
    let said = lock.events("lock not acquired within --wait");
    assert_eq!(said.len(), 1, "{}", lock.logs());
    let error = said[0]["redis_error"].as_str().unwrap_or_default();
    assert!(error.contains("permission"), "{error}");
}

/// A lock that named a holder while it waited, and then lost Redis, says "not acquired" (75):
/// the lock was held elsewhere, as far as it knows.
#[test]
fn a_lock_that_saw_a_holder_before_redis_went_away_says_not_acquired() {
    let redis = RedisServer::start();
    let name = unique_lease("lock-seen-then-gone");
    let mut holder = Lock::spawn(&redis.url(), &name, &["--wait", "0s"], &["sleep", "30"]);
    wait_for("the holder's command", Duration::from_secs(10), || {
        (!holder.events("started the command").is_empty()).then_some(())
    });
    let proxy = FaultProxy::start(SocketAddr::from(([127, 0, 0, 1], redis.port())));
    let mut waiting = Lock::spawn(&proxy.url(), &name, &["--wait", "3s"], &["true"]);
    wait_for(
        "the waiting lock to follow",
        Duration::from_secs(10),
        || (!waiting.events("following leader").is_empty()).then_some(()),
    );
    proxy.set(Fault::Drop);
    assert_eq!(
        waiting.wait(Duration::from_secs(15)),
        NOT_ACQUIRED,
        "{}",
        waiting.logs()
    );
    holder.process.kill();
}

/// An acquire that runs out of its bound while reads answer in time (here its `WAIT` for a
/// replica that does not exist, over a link that delays each request 100 ms) is resolved by a
/// read, which gives its term back. `--wait 0s` is one try: the lock then ends "not acquired",
/// where it tried again at once, for ever.
#[test]
fn a_lock_whose_acquire_runs_out_while_reads_answer_tries_once() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(SocketAddr::from(([127, 0, 0, 1], redis.port())));
    proxy.set(Fault::DelayRequests(Duration::from_millis(100)));
    // The acquire bound is the retry period, 2 s, and the WAIT alone takes 1,990 ms; a read on
    // a new connection (three requests) fits half the bound.
    let timing = [
        "--lease-duration",
        "9s",
        "--renew-deadline",
        "6s",
        "--retry-period",
        "2s",
    ];
    let extra = ["--wait", "0s", "--redis-wait-replicas", "1"];
    let extra = [&extra[..], &["--redis-wait-timeout", "1990ms"]].concat();
    let command = ["sh", "-c", "echo ran"];
    let name = unique_lease("lock-slow-acquire");
    let mut lock = Lock::spawn_timed(&proxy.url(), &name, &timing, &extra, &command);
    lock.not_acquired_within(Duration::from_secs(15));
    let gave_back = lock.events("gave back a term whose acquire went unanswered");
    assert_eq!(gave_back.len(), 1, "{}", lock.logs());
}
