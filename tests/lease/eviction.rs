//! A Redis that may evict the lease, said out loud: read from `INFO memory` at start and once
//! per lease duration; `--redis-eviction warn` (the default) says so and takes part,
//! `--redis-eviction refuse` stays out of the election with the reason in `/readyz` until Redis
//! no longer evicts; an ACL without `+info|memory` does not stop leasehold in `warn` mode, and
//! keeps it out in `refuse` mode (the policy is not known). The policy is read
//! on each engine.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use harness::contenders::{lease, steady_timing, unique_lease};
use harness::leasehold_bin;
use harness::replica::{FAST, Replica, exit_within};
use harness::timings::THIRTY_SECOND_TERM;
use leasehold::board::Board;
use leasehold::elector::{Elector, Standing, Timing};
use leasehold::eviction::{Eviction, EvictionMode, EvictionWatch};
use leasehold::gates::CANDIDACY;
use leasehold::lease::minimal_acl_rule;
use testbed::on_engines;
use testbed::redis_server::{Engine, RedisServer};
use testbed::wait::{holds_on_every_look, wait_for};
use tokio_util::sync::CancellationToken;

/// `FAST` as the ACL user `leasehold` of `redis`, made with `rule` and a password that a file in
/// `dir` holds.
pub(crate) fn as_acl_user(redis: &RedisServer, rule: &str, dir: &std::path::Path) -> Vec<String> {
    redis.set_acl_user("leasehold", rule, "s3cret");
    let pw = dir.join("pw");
    std::fs::write(&pw, "s3cret\n").unwrap();
    let mut args: Vec<String> = FAST.iter().map(|a| a.to_string()).collect();
    args.extend(["--redis-username", "leasehold", "--redis-password-file"].map(String::from));
    args.push(pw.to_str().unwrap().to_owned());
    args
}

fn evicting_redis(engine: Engine) -> RedisServer {
    RedisServer::builder()
        .engine(engine)
        .args(["--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"])
        .start()
}

on_engines!(#[test] fn a_redis_that_may_evict_is_reported_and_the_replica_still_leads_by_default);
fn a_redis_that_may_evict_is_reported_and_the_replica_still_leads_by_default(engine: Engine) {
    let redis = evicting_redis(engine);
    let a = Replica::spawn(&redis.url(), &unique_lease("evict-warn"), "a", &FAST, &[]);
    let eviction = wait_for(
        "/leader to show the policy",
        Duration::from_secs(10),
        || {
            let view = a.leader();
            (!view["redis"]["eviction"].is_null()).then(|| view["redis"]["eviction"].clone())
        },
    );
    assert_eq!(eviction["policy"], "allkeys-lru");
    assert_eq!(eviction["maxmemory"], 64 * 1024 * 1024);
    assert_eq!(eviction["may_evict"], true);
    assert_eq!(eviction["refused"], false);
    wait_for("a to lead", Duration::from_secs(10), || {
        (a.leader()["is_leader"] == true).then_some(())
    });
    let warned = a.wait_events("redis may evict the lease under memory pressure (maxmemory with an evicting policy); give leases a redis with maxmemory-policy noeviction", 1, Duration::from_secs(5));
    assert_eq!(
        warned.len(),
        1,
        "one warning, not one per read: {}",
        a.log_text()
    );
    assert_eq!(warned[0]["policy"], "allkeys-lru");
    let (_, metrics) = a.get("/metrics").expect("/metrics answers");
    assert!(
        metrics
            .lines()
            .any(|l| l == "leasehold_redis_eviction_possible{policy=\"allkeys-lru\"} 1"),
        "{metrics}"
    );
}

on_engines!(#[test] fn allkeys_eviction_without_the_data_loss_cooldown_is_refused_with_exit_code_2);
fn allkeys_eviction_without_the_data_loss_cooldown_is_refused_with_exit_code_2(engine: Engine) {
    // allkeys-* takes the state record too, and then only the cooldown keeps two leaders apart:
    // `run` and `lock` refuse to go on without it, naming the policy and the flag.
    let redis = evicting_redis(engine);
    let lease = unique_lease("evict-unsafe");
    let run: &[&str] = &["run", "--http-addr", "127.0.0.1:0"];
    let lock: &[&str] = &["lock", "--wait", "30s"];
    for (sub, command) in [(run, &["sleep", "30"]), (lock, &["sleep", "30"])] {
        let mut cmd = std::process::Command::new(leasehold_bin());
        cmd.args(sub)
            .args(["--redis-url", &redis.url(), "--lease-name", &lease])
            .args([
                "--kubernetes",
                "off",
                "--identity",
                "a",
                "--no-data-loss-cooldown",
            ])
            .args(FAST)
            .arg("--")
            .args(command);
        let (code, stderr) = exit_within(cmd, Duration::from_secs(10));
        assert_eq!(code, Some(2), "{}: {stderr}", sub[0]);
        for words in [
            "maxmemory-policy allkeys-lru",
            "--no-data-loss-cooldown",
            "two replicas could lead",
        ] {
            assert!(
                stderr.contains(words),
                "{}: no {words:?} in {stderr}",
                sub[0]
            );
        }
        // Refused before its first try: it never led, and its command never ran.
        for never in ["became leader", "started the command"] {
            assert!(!stderr.contains(never), "{}: {never:?} in {stderr}", sub[0]);
        }
        let key = format!("leasehold:{{{lease}}}");
        assert_eq!(redis.cmd::<i64>(&["EXISTS", &key]), 0, "{}", sub[0]);
    }
}

/// The same policy set while a replica leads: it steps down for the eviction gate, as the
/// step-down reasons' table says, then exits 2 (it used to step down as `shutdown`, which reads
/// as a stopped pod).
#[test]
fn allkeys_eviction_set_under_a_leader_without_the_cooldown_steps_it_down_as_eviction() {
    let redis = RedisServer::start();
    let mut args = FAST.to_vec();
    args.push("--no-data-loss-cooldown");
    let command = ["sh", "-c", "echo started; exec sleep 1000"];
    let mut a = Replica::spawn(
        &redis.url(),
        &unique_lease("evict-later"),
        "a",
        &args,
        &command,
    );
    wait_for("a to lead", Duration::from_secs(10), || {
        a.is_ready().then_some(())
    });
    redis.cmd::<String>(&["CONFIG", "SET", "maxmemory", "64mb"]);
    redis.cmd::<String>(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
    assert_eq!(a.wait_exit(Duration::from_secs(20)), 2, "{}", a.log_text());
    let steps = a.events("stepped down");
    assert_eq!(steps.len(), 1, "{}", a.log_text());
    assert_eq!(steps[0]["reason"], "redis_may_evict", "{}", a.log_text());
}

#[test]
fn cooldowns_are_counted_and_readiness_names_their_cause() {
    // With the cooldown on, allkeys-* is safe but each loss of the record starts a cooldown: the
    // replicas count them, and readiness says why nobody leads, naming the policy.
    let redis = evicting_redis(Engine::default());
    let lease = unique_lease("evict-cooldowns");
    let replicas: Vec<Replica> = ["a", "b"]
        .iter()
        .map(|name| Replica::spawn(&redis.url(), &lease, name, &FAST, &[]))
        .collect();
    let started = || -> f64 {
        replicas
            .iter()
            .map(|r| r.metric("leasehold_cooldowns_started_total").unwrap_or(0.0))
            .sum()
    };
    let cooling = |r: &Replica| {
        r.get("/readyz")
            .filter(|(code, body)| *code == 503 && body.contains("cooling down"))
            .map(|(_, body)| body)
    };
    // A fresh Redis: the first acquire finds no record and starts a cooldown.
    let body = wait_for(
        "readiness to name the cooldown",
        Duration::from_secs(10),
        || replicas.iter().find_map(cooling),
    );
    assert!(
        body.contains("`allkeys-lru` eviction under maxmemory"),
        "{body}"
    );
    wait_for("one cooldown counted", Duration::from_secs(10), || {
        (started() == 1.0).then_some(())
    });
    wait_for(
        "a leader after the cooldown",
        Duration::from_secs(10),
        || replicas.iter().any(Replica::is_ready).then_some(()),
    );
    // The record lost again (what an allkeys-* eviction does): a second cooldown.
    redis.cmd::<String>(&["FLUSHALL"]);
    wait_for("a second cooldown counted", Duration::from_secs(10), || {
        (started() == 2.0).then_some(())
    });
}

#[test]
fn refuse_keeps_the_replica_out_of_the_election_until_redis_stops_evicting() {
    let redis = evicting_redis(Engine::default());
    let mut args = FAST.to_vec();
    args.extend(["--redis-eviction", "refuse"]);
    let a = Replica::spawn(&redis.url(), &unique_lease("evict-refuse"), "a", &args, &[]);
    let body = wait_for("readiness to say why", Duration::from_secs(10), || {
        a.get("/readyz")
            .filter(|(code, body)| *code == 503 && body.contains("evict"))
            .map(|(_, body)| body)
    });
    assert_eq!(
        body.trim_end(),
        "not the leader: redis may evict the lease (maxmemory 67108864 bytes, maxmemory-policy allkeys-lru); --redis-eviction refuse keeps this replica out of the election"
    );
    // Out of the election: nobody has acquired the lease in the meantime.
    let key = format!("leasehold:{{{}}}", a.leader()["lease"].as_str().unwrap());
    assert_eq!(redis.cmd::<i64>(&["EXISTS", &key]), 0);
    assert_eq!(a.leader()["is_leader"], false);

    // Redis stops evicting: the next read (within a lease duration) lets the replica in.
    redis.cmd::<String>(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    wait_for(
        "a to lead once redis no longer evicts",
        Duration::from_secs(10),
        || (a.leader()["is_leader"] == true).then_some(()),
    );

    // And back: a leader steps down when Redis starts evicting again.
    redis.cmd::<String>(&["CONFIG", "SET", "maxmemory-policy", "volatile-lru"]);
    wait_for("a to step down", Duration::from_secs(10), || {
        let view = a.leader();
        (view["last_step_down"]["reason"] == "redis_may_evict").then_some(())
    });
    assert_eq!(a.leader()["is_leader"], false);
    // The step-down shows the instant the guard is revoked; the release follows it.
    wait_for("the lease to be released", Duration::from_secs(5), || {
        (redis.cmd::<i64>(&["EXISTS", &key]) == 0).then_some(())
    });
}

/// A gate that says no while an acquire runs begins no term: the won term is given back before
/// anything of a term happens. Here the first read of the policy races the first acquire, which
/// wins at once (a term before left the state record). The term began (a token, the guard
/// file, the status) and ended a millisecond later.
#[test]
fn a_gate_that_says_no_during_an_acquire_begins_no_term() {
    let redis = RedisServer::builder()
        .args(["--maxmemory", "64mb", "--maxmemory-policy", "noeviction"])
        .start();
    let lease = unique_lease("evict-race");
    let mut before = Replica::spawn(&redis.url(), &lease, "before", &FAST, &[]);
    wait_for("a term before", Duration::from_secs(10), || {
        (before.leader()["is_leader"] == true).then_some(())
    });
    before.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(before.wait_exit(Duration::from_secs(10)), 0);
    redis.cmd::<String>(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
    let mut args = FAST.to_vec();
    args.extend(["--redis-eviction", "refuse"]);
    let a = Replica::spawn(&redis.url(), &lease, "a", &args, &[]);
    wait_for("the refusal", Duration::from_secs(10), || {
        a.get("/readyz")
            .filter(|(code, body)| *code == 503 && body.contains("--redis-eviction refuse"))
    });
    assert!(a.events("became leader").is_empty(), "{}", a.log_text());
}

/// Kept out before its first try: without the data-loss cooldown the replica waits for the
/// policy before it tries, so its elector has never reached Redis when the refusal comes. The
/// reads go on all the same: they say whether Redis answers (the elector sends nothing), and
/// the fix lets the replica in.
#[test]
fn a_replica_kept_out_before_its_first_try_still_reads_the_fix() {
    let redis = RedisServer::builder()
        .args(["--maxmemory", "64mb", "--maxmemory-policy", "volatile-lru"])
        .start();
    let mut args = FAST.to_vec();
    args.extend(["--redis-eviction", "refuse", "--no-data-loss-cooldown"]);
    let a = Replica::spawn(&redis.url(), &unique_lease("evict-early"), "a", &args, &[]);
    wait_for("the refusal", Duration::from_secs(10), || {
        a.get("/readyz")
            .filter(|(code, body)| *code == 503 && body.contains("--redis-eviction refuse"))
    });
    let up = || a.metric("leasehold_redis_up");
    wait_for("redis shown up", Duration::from_secs(5), || {
        (up() == Some(1.0)).then_some(())
    });
    redis.pause();
    wait_for("redis shown down", Duration::from_secs(10), || {
        (up() == Some(0.0)).then_some(())
    });
    redis.resume();
    redis.cmd::<String>(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    wait_for("a to lead", Duration::from_secs(10), || {
        (a.leader()["is_leader"] == true).then_some(())
    });
}

/// A refusal stands until a read says Redis no longer evicts: a read that fails says nothing
/// about the policy. Here the ACL loses `INFO memory` after the refusal; the replica warns, and
/// stays out.
#[test]
fn a_failed_read_of_the_policy_does_not_lift_the_refusal() {
    let redis = RedisServer::builder()
        .args(["--maxmemory", "64mb", "--maxmemory-policy", "volatile-lru"])
        .start();
    let dir = tempfile::tempdir().unwrap();
    let args = as_acl_user(&redis, &minimal_acl_rule("leasehold:", false), dir.path());
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args.extend(["--redis-eviction", "refuse"]);
    let a = Replica::spawn(&redis.url(), &unique_lease("evict-unread"), "a", &args, &[]);
    wait_for("the refusal", Duration::from_secs(10), || {
        a.get("/readyz")
            .filter(|(code, body)| *code == 503 && body.contains("evict"))
    });
    redis.set_acl_user("leasehold", &without_info_memory(), "s3cret");
    let said = "cannot read the eviction policy (INFO memory); going by the last one read, if any";
    a.wait_events(said, 1, Duration::from_secs(10));
    let key = format!("leasehold:{{{}}}", a.leader()["lease"].as_str().unwrap());
    // Two lease durations: with the refusal lifted, a would lead within a retry period.
    holds_on_every_look("a stays out", Duration::from_secs(3), || {
        redis.cmd::<i64>(&["EXISTS", &key]) == 0 && a.leader()["is_leader"] == false
    });
}

/// docs/REFERENCE.md's ACL rule without `+info|memory`: the policy cannot be read.
fn without_info_memory() -> String {
    minimal_acl_rule("leasehold:", false).replace(" +info|memory", "")
}

/// Replica `a` of a new lease named after `test`, as that user (its password file in `dir`),
/// with `extra` flags.
fn policy_hidden_replica(redis: &RedisServer, test: &str, extra: &[&str], dir: &Path) -> Replica {
    let args = as_acl_user(redis, &without_info_memory(), dir);
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args.extend(extra);
    Replica::spawn(&redis.url(), &unique_lease(test), "a", &args, &[])
}

/// `refuse` is the fail-closed choice: a Redis whose ACL hides `INFO memory` from the start
/// keeps the replica out, the reason in `/readyz` (it led: "not known to evict" took part).
#[test]
fn refuse_with_an_acl_that_hides_the_policy_keeps_the_replica_out() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let extra = ["--redis-eviction", "refuse"];
    let a = policy_hidden_replica(&redis, "evict-hidden", &extra, dir.path());
    wait_for("the refusal", Duration::from_secs(10), || {
        a.get("/readyz")
            .filter(|(code, body)| *code == 503 && body.contains("policy unreadable"))
            .filter(|(_, body)| body.contains("redis does not say whether it evicts"))
    });
    // Past the cooldown (one lease duration, 1.5 s) and a retry period: a standing replica leads.
    holds_on_every_look("a stays out", Duration::from_secs(3), || {
        a.leader()["is_leader"] == false
    });
}

#[test]
fn an_acl_without_info_memory_is_said_once_and_leasehold_carries_on() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let a = policy_hidden_replica(&redis, "evict-acl", &[], dir.path());
    wait_for("a to lead", Duration::from_secs(10), || {
        (a.leader()["is_leader"] == true).then_some(())
    });
    let said = "cannot read the eviction policy (INFO memory); going by the last one read, if any";
    a.wait_events(said, 1, Duration::from_secs(5));
    // Reads go on (every 4 lease durations on the leader, 6 s), each refused; the warning is not
    // repeated.
    assert!(a.leader()["redis"]["eviction"].is_null());
    let before = redis.rejected_calls("info");
    wait_for("another refused read", Duration::from_secs(15), || {
        (redis.rejected_calls("info") > before).then_some(())
    });
    let warned = a.events(said);
    assert_eq!(warned.len(), 1, "{}", a.log_text());
    assert!(
        warned[0]["error"].as_str().unwrap().contains("permission"),
        "{:?}",
        warned[0]
    );
    assert_eq!(a.leader()["is_leader"], true);
}

/// Without the data-loss cooldown no try goes out before the policy is read, so the elector
/// never calls Redis: the gate's own failed reads are what says Redis cannot be reached. It said
/// nothing at all (a wrong port looked like a replica starting for ever).
#[test]
fn a_redis_that_cannot_be_reached_before_the_first_read_is_said() {
    let nowhere = "redis://127.0.0.1:1";
    let args = ["--no-data-loss-cooldown", "--retry-period", "200ms"];
    let a = Replica::spawn(nowhere, &unique_lease("evict-nowhere"), "a", &args, &[]);
    let said = "cannot read the eviction policy (INFO memory); going by the last one read, if any";
    let warned = a.wait_events(said, 1, Duration::from_secs(5));
    let error = warned[0]["error"].as_str().unwrap_or_default().to_owned();
    assert!(error.contains("refused"), "{error}");
    wait_for("/leader to show the error", Duration::from_secs(5), || {
        let redis = a.leader()["redis"].clone();
        (redis["reachable"] == false && redis["last_error"].is_string()).then_some(())
    });
    // Said once while it lasts.
    holds_on_every_look("no second warning", Duration::from_secs(1), || {
        a.events(said).len() == 1
    });
}

/// The eviction gate (warn mode) of `elector` with `timing`, started: the board it shows on,
/// and its task.
fn watched(elector: &Elector, timing: Timing) -> (Board, tokio::task::JoinHandle<()>) {
    let board = Board::new(elector.status().borrow().clone());
    let (watch, _standing) =
        EvictionWatch::new(elector.lease().clone(), timing, EvictionMode::Warn);
    let task = watch.spawn(
        elector.status(),
        elector.gates(),
        board.clone(),
        Arc::new(()),
        CancellationToken::new(),
    );
    (board, task)
}

/// A failed first read while another gate keeps the replica out is what the replica shows of
/// Redis; once the gates let it stand, the elector's word is shown again at once. The read's
/// error stood over every word of the elector's until the next read, a retry period later (a
/// readiness probe failed on it with Redis back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_first_read_shown_while_out_gives_way_once_the_replica_stands() {
    let nowhere = "redis://127.0.0.1:1";
    let timing = THIRTY_SECOND_TERM;
    let (gate, said) = tokio::sync::watch::channel(Standing::Out {
        gate: CANDIDACY,
        detail: None,
    });
    let lease = lease(nowhere, &unique_lease("evict-first-out"), "a", true);
    let elector = Elector::new(lease, timing)
        .expect("an elector")
        .with_gate(said);
    let (board, _task) = watched(&elector, timing);
    let mut shown = board.subscribe();
    let read_failed = |s: &leasehold::board::Shown| {
        s.redis
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("INFO"))
    };
    tokio::time::timeout(Duration::from_secs(5), shown.wait_for(read_failed))
        .await
        .expect("the failed read shown while out")
        .expect("the board is there");
    gate.send_replace(Standing::Stands);
    tokio::time::timeout(Duration::from_secs(3), shown.wait_for(|s| !read_failed(s)))
        .await
        .expect("the read's error gives way once the replica stands")
        .expect("the board is there");
}

/// The eviction gate runs beside the elector and ends with it: once the elector is gone (its
/// status closed), the watch returns by itself. It used to spin on the closed status until it
/// was told to stop, taking a core from Redis and the successor exactly while a leader that had
/// just released the lease was exiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_eviction_watch_ends_once_the_elector_is_gone() {
    let redis = RedisServer::start();
    let timing = steady_timing();
    let elector = Elector::new(
        lease(&redis.url(), &unique_lease("evict-ends"), "a", true),
        timing,
    )
    .expect("an elector");
    let (board, task) = watched(&elector, timing);
    let mut shown = board.subscribe();
    tokio::time::timeout(
        Duration::from_secs(10),
        shown.wait_for(|s| matches!(s.eviction, Eviction::Read(_))),
    )
    .await
    .expect("the policy is read")
    .expect("the board is there");
    drop(elector);
    tokio::time::timeout(Duration::from_secs(2), task)
        .await
        .expect("the watch ends by itself once the elector is gone")
        .expect("the watch does not panic");
}
