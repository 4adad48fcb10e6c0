//! `leasehold lock` not acquired, and which exit says why: 75 when it was held elsewhere or a
//! gate kept the lock out, 1 when Redis failed or refused it and nobody held it (down, frozen,
//! a wrong password, a missing permission, an acquire that ran out), against real redis-server
//! processes behind gates, ACL users and the fault proxy.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use harness::contenders::{lease, unique_lease};
use leasehold::cmd::lock::{NOT_ACQUIRED, REDIS_FAILED};
use leasehold::lease::{Grant, RedisLease};
use nix::sys::signal::Signal;
use testbed::RedisServer;
use testbed::proxy::{Fault, FaultProxy};
use testbed::wait::wait_for;

use crate::lock::{CALL, Lock, hold};

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
    let nobody = "redis://127.0.0.1:1".to_owned();
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
    let mut lock = Lock::spawn_in(
        Path::new("."),
        &proxy.url(),
        &name,
        &timing,
        &extra,
        &command,
    );
    lock.not_acquired_within(Duration::from_secs(15));
    let gave_back = lock.events("gave back a term whose acquire went unanswered");
    assert_eq!(gave_back.len(), 1, "{}", lock.logs());
}

/// A lease held for 30 s by `cron-other`, and a lock with `--wait 1s` on it (its command `echo
/// ran`) once its first try was answered (it logs whom it follows): the holder's lease, its
/// grant, the lock.
async fn a_lock_past_its_first_try(redis: &RedisServer, test: &str) -> (RedisLease, Grant, Lock) {
    let name = unique_lease(test);
    let other = lease(&redis.url(), &name, "cron-other", false);
    let grant = hold(&other, Duration::from_secs(30)).await;
    let lock = Lock::spawn(&redis.url(), &name, &["--wait", "1s"], &["echo", "ran"]);
    wait_for(
        "the lock's first try answered",
        Duration::from_secs(10),
        || (!lock.events("following leader").is_empty()).then_some(()),
    );
    (other, grant, lock)
}

/// A lock frozen (SIGSTOP, as a paused VM) past its `--wait` does not try as it thaws: its wait
/// is over, and it ends "not acquired" although the lease is free by then. It made one more try
/// as it thawed, however late, and ran its command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_frozen_past_its_wait_does_not_try_as_it_thaws() {
    let redis = RedisServer::start();
    let (other, grant, mut lock) = a_lock_past_its_first_try(&redis, "lock-frozen").await;
    lock.process.signal(Signal::SIGSTOP).expect("SIGSTOP");
    // Frozen past the wait (set-up, not the assertion): then the lease is free.
    tokio::time::sleep(Duration::from_secs(2)).await;
    other.release(grant.token, CALL).await.expect("release");
    lock.process.signal(Signal::SIGCONT).expect("SIGCONT");
    lock.not_acquired_within(Duration::from_secs(10));
    // Its line says why nobody was named: it waited through the pause, far past its wait.
    let said = lock.events("lock not acquired within --wait");
    let waited = said.first().and_then(|e| e["waited_ms"].as_u64());
    assert!(waited.is_some_and(|ms| ms >= 2_000), "{said:?}");
}

/// A reservation for another identity (a handover's `--to`) keeps the lock out: its line names
/// it, where it named neither a holder nor a cause.
#[test]
fn a_lock_kept_out_by_a_reservation_names_it() {
    let redis = RedisServer::start();
    let name = unique_lease("lock-reserved");
    let reserved = format!("leasehold:{{{name}}}:reserved");
    redis.cmd::<String>(&["SET", &reserved, "someone", "PX", "10000"]);
    let mut lock = Lock::spawn(&redis.url(), &name, &[], &["echo", "ran"]);
    lock.not_acquired_within(Duration::from_secs(10));
    let said = lock.events("lock not acquired within --wait");
    assert_eq!(
        said.first().map(|e| &e["reserved_for"]),
        Some(&"someone".into()),
        "{said:?}"
    );
}

/// A lock that saw the lease held and then could not read it at the end (Redis frozen) exits
/// 75, the lease held elsewhere: its line names that holder, where it named nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_that_cannot_read_at_its_end_names_the_holder_it_saw() {
    let redis = RedisServer::start();
    let (_other, _grant, mut lock) = a_lock_past_its_first_try(&redis, "lock-held-seen").await;
    redis.pause();
    lock.not_acquired_within(Duration::from_secs(15));
    redis.resume();
    let said = lock.events("lock not acquired within --wait");
    assert_eq!(
        said.first().map(|e| &e["holder"]),
        Some(&"cron-other".into()),
        "{said:?}"
    );
}
