//! A Redis that answers but cannot hold the lease, on each engine leasehold runs against: a
//! replica (Redis 6.2 words a READONLY inside a script as a script error, 7.0 and Valkey as
//! READONLY) and a Redis with scripting renamed away (each words the unknown command its way).
//! Readiness and `leasehold status` say what Redis refuses, never "unreachable"; the log says
//! it once, at error level. A master that Sentinels watch, named by its own address rather than
//! through them, is refused too: after a failover it would grant terms beside the new master's.

use std::time::Duration;

use harness::contenders::unique_lease;
use harness::replica::{FAST, Replica, run_to_end};
use leasehold::lease::minimal_acl_rule;
use testbed::on_engines;
use testbed::proxy::Fault;
use testbed::redis_server::{Engine, RedisServer};
use testbed::sentinel::{MASTER_NAME, SentinelSet};
use testbed::wait::wait_for;

/// `FAST` timings, and readiness that says why in either role.
fn member() -> Vec<&'static str> {
    let mut args = FAST.to_vec();
    args.extend(["--readiness", "member"]);
    args
}

on_engines!(#[test] fn a_replica_is_named_a_replica);
fn a_replica_is_named_a_replica(engine: Engine) {
    let master = RedisServer::builder().engine(engine).start();
    let port = master.port().to_string();
    let replica = RedisServer::builder()
        .engine(engine)
        .args(["--replicaof", "127.0.0.1", &port])
        .start();
    let a = Replica::spawn(
        &replica.url(),
        &unique_lease("on-a-replica"),
        "a",
        &member(),
        &[],
    );
    let body = a.wait_not_ready_reason(Duration::from_secs(5));
    assert!(
        body.starts_with("not ready: redis answered as a replica (READONLY or MASTERDOWN)")
            && body.contains("connected to a replica, not the master"),
        "{}: {body}",
        engine.name()
    );
}

/// The words every refusal of a Redis without scripting holds: what is missing and what
/// leasehold needs.
const NO_SCRIPTING: [&str; 3] = [
    "redis has no scripting",
    "leasehold needs EVALSHA and SCRIPT LOAD",
    "TIME and INFO server|replication|memory",
];

on_engines!(#[test] fn a_redis_without_scripting_says_what_leasehold_needs);
fn a_redis_without_scripting_says_what_leasehold_needs(engine: Engine) {
    says_what_leasehold_needs(engine, &["EVALSHA", "EVAL"]);
}

on_engines!(#[test] fn a_redis_without_a_command_the_scripts_call_says_what_leasehold_needs);
/// A command the scripts call renamed away: each engine words it its own way inside a script
/// (Valkey without "Redis" in it).
fn a_redis_without_a_command_the_scripts_call_says_what_leasehold_needs(engine: Engine) {
    says_what_leasehold_needs(engine, &["TIME"]);
}

/// A replica on a Redis with `renamed` renamed away: readiness, the log (once, at error level)
/// and `leasehold status` say that scripting is missing and what leasehold needs.
fn says_what_leasehold_needs(engine: Engine, renamed: &[&str]) {
    let mut redis = RedisServer::builder().engine(engine);
    for command in renamed {
        redis = redis.args(["--rename-command", *command, ""]);
    }
    let redis = redis.start();
    let a = Replica::spawn(
        &redis.url(),
        &unique_lease("no-scripting"),
        "a",
        &member(),
        &[],
    );
    let body = a.wait_not_ready_reason(Duration::from_secs(5));
    assert!(!body.contains("unreachable"), "{}: {body}", engine.name());
    for words in NO_SCRIPTING {
        assert!(
            body.contains(words),
            "{}: want {words:?} in: {body}",
            engine.name()
        );
    }
    refusal_said(&a, Duration::from_secs(5));
    // Said once: two more refused tries later, still one error.
    wait_for("two more refused tries", Duration::from_secs(10), || {
        let tries =
            a.metric("leasehold_redis_errors_total{op=\"acquire\",kind=\"no_scripting\"}")?;
        (tries >= 3.0).then_some(())
    });
    let said = a.events("redis refuses leasehold; backing off until it is fixed");
    assert_eq!(said.len(), 1, "{}: said once: {said:?}", engine.name());

    let (code, _, stderr) = run_to_end(
        &["status", "--lease-name", "web", "--redis-url", &redis.url()],
        &[],
    );
    assert_eq!(code, 1, "{}: {stderr}", engine.name());
    for words in NO_SCRIPTING {
        assert!(
            stderr.contains(words),
            "{}: want {words:?} in: {stderr}",
            engine.name()
        );
    }
}

/// A URL naming a database the Redis does not have: Redis's refusal in plain words and what to
/// change, not the client library's type names.
#[test]
fn a_database_the_redis_does_not_have_is_named_in_plain_words() {
    let redis = RedisServer::start();
    let url = format!("{}/99", redis.url());
    let (code, _, stderr) =
        run_to_end(&["status", "--lease-name", "web", "--redis-url", &url], &[]);
    assert_eq!(code, 1, "{stderr}");
    for words in [
        "while reading the lease",
        "Redis server refused to switch database: DB index is out of range",
        "the URL's database (the number after the host) must be one this Redis has (`databases` in its config, 16 by default)",
    ] {
        assert!(stderr.contains(words), "want {words:?} in:\n{stderr}");
    }
    harness::replica::assert_in_plain_words(&stderr);

    // A replica run against it: a refusal that lasts until the URL or Redis is fixed, said once
    // at error level and backed off, and an answer in readiness, not an unreachable Redis (which
    // would fire the alert for an outage).
    let a = Replica::spawn(&url, &unique_lease("no-database"), "a", &member(), &[]);
    let body = a.wait_not_ready_reason(Duration::from_secs(5));
    assert!(!body.contains("unreachable"), "{body}");
    assert!(body.contains("must be one this Redis has"), "{body}");
    refusal_said(&a, Duration::from_secs(5));
    a.metric("leasehold_redis_errors_total{op=\"acquire\",kind=\"no_database\"}")
        .expect("the refusals counted as no_database");
}

/// Sentinels that refuse the Sentinel password (here: they have none, and one is given) are a
/// refusal that lasts until someone fixes it, said once at error level and backed off; they were
/// said as Sentinels that could not be reached, tried again at the usual pace for ever.
#[test]
fn sentinels_that_refuse_the_sentinel_password_are_a_refusal() {
    let set = SentinelSet::start();
    let dir = tempfile::tempdir().unwrap();
    let password = dir.path().join("sentinel-password");
    std::fs::write(&password, "not-theirs\n").unwrap();
    let mut args = member();
    let password = password.to_str().unwrap();
    args.extend(["--sentinel-password-file", password]);
    let a = Replica::spawn(&set.url(), &unique_lease("sentinel-auth"), "a", &args, &[]);
    let error = refusal_said(&a, Duration::from_secs(10));
    assert!(error.contains("Sentinel"), "{error}");
    let body = a.wait_not_ready_reason(Duration::from_secs(5));
    assert!(!body.contains("unreachable"), "{body}");
}

/// Sentinels whose ACL refuses `SENTINEL MYID` (an upgrade that kept the rule of a version that
/// did not ask it) are a refusal that names the command, backed off and said once at error
/// level; they were said as Sentinels that could not be reached, and readiness as unreachable.
#[test]
fn sentinels_that_refuse_sentinel_myid_are_a_refusal_naming_it() {
    let set = SentinelSet::start();
    set.on_every_sentinel(&["ACL", "SETUSER", "default", "-sentinel|myid"]);
    let a = Replica::spawn(
        &set.url(),
        &unique_lease("sentinel-myid"),
        "a",
        &member(),
        &[],
    );
    let error = refusal_said(&a, Duration::from_secs(10));
    assert!(error.contains("sentinel|myid"), "{error}");
    let body = a.wait_not_ready_reason(Duration::from_secs(5));
    assert!(!body.contains("unreachable"), "{body}");
    a.metric("leasehold_redis_errors_total{op=\"acquire\",kind=\"no_permission\"}")
        .expect("the refusals counted as no_permission");
}

on_engines!(#[test] fn a_redis_that_cannot_persist_is_an_answer);
/// A Redis that cannot persist (a failed background save with `stop-writes-on-bgsave-error`, as
/// when its disk is full) refuses every write with `MISCONF` until a save succeeds: Redis
/// answered, so readiness says its words, and `leasehold_redis_up` stays 1; it was said as
/// "redis unreachable". Redis tries the save again every few seconds, so the leader renews on
/// until its deadline, as before, and does not end its term at once.
fn a_redis_that_cannot_persist_is_an_answer(engine: Engine) {
    // A directory it cannot write in: every background save fails.
    let redis = RedisServer::builder()
        .engine(engine)
        .args(["--dir", "/proc"])
        .start();
    let a = Replica::spawn(
        &redis.url(),
        &unique_lease("cannot-persist"),
        "a",
        &member(),
        &[],
    );
    a.wait_events("became leader", 1, Duration::from_secs(10));
    fail_a_save(&redis);
    let stepped = a.wait_events("stepped down", 1, Duration::from_secs(10));
    assert_eq!(stepped[0]["reason"], "renew_deadline_passed", "{stepped:?}");
    said_as_an_answer(&a, "MISCONF", "renew");
}

/// A master below its `min-replicas-to-write` refuses every write with `NOREPLICAS` until a
/// replica is back: Redis answered, so readiness says so, not "redis unreachable", and
/// `leasehold_redis_up` stays 1.
#[test]
fn a_master_without_its_replicas_refusing_writes_is_an_answer() {
    let redis = RedisServer::builder()
        .args(["--min-replicas-to-write", "1"])
        .start();
    let a = Replica::spawn(
        &redis.url(),
        &unique_lease("no-replicas"),
        "a",
        &member(),
        &[],
    );
    said_as_an_answer(&a, "NOREPLICAS", "acquire");
}

/// A replica whose ACL lets it hear the release channel but not its own probe channel keeps its
/// subscription alive with `PING`, which a Redis that cannot persist refuses too (`MISCONF`):
/// that refusal is an answer, and the link works. The subscription was taken for silent and
/// made again at every keepalive, each time waking the followers.
#[test]
fn a_ping_refused_by_a_redis_that_cannot_persist_keeps_the_subscription() {
    let redis = RedisServer::builder().args(["--dir", "/proc"]).start();
    fail_a_save(&redis);
    let lease = unique_lease("ping-misconf");
    let channels = format!("&leasehold:{{{lease}}}:released");
    let rule = minimal_acl_rule("leasehold:", false).replace("&leasehold:*", &channels);
    redis.set_acl_user("no-probe", &rule, "pw");
    let url = format!("redis://no-probe:pw@{}", redis.addr());
    let env = [("LEASEHOLD_REDIS_URL", url.as_str())];
    let a = Replica::spawn_with_env("", &lease, "a", &member(), &[], &env);
    // Keepalives every retry period (250 ms): a dozen refused PINGs.
    wait_for("a dozen refused PINGs", Duration::from_secs(10), || {
        (redis.rejected_calls("ping") >= 12).then_some(())
    });
    let silent =
        a.events("release channel went silent (a probe or PING not heard back); subscribing again");
    assert!(silent.is_empty(), "{silent:?}");
}

/// Makes `redis`, started with a directory it cannot write in (`--dir /proc`), refuse writes
/// with `MISCONF`: a save point, then a background save that fails.
fn fail_a_save(redis: &RedisServer) {
    let _: String = redis.cmd(&["CONFIG", "SET", "save", "3600 1"]);
    let _: String = redis.cmd(&["BGSAVE"]);
    wait_for("the save to fail", Duration::from_secs(10), || {
        let info: String = redis.cmd(&["INFO", "persistence"]);
        info.contains("rdb_last_bgsave_status:err").then_some(())
    });
}

/// `a`'s readiness says Redis's error reply (`code`), not "redis unreachable"; it counts Redis
/// as up and the replies of `op` as `error_reply`.
fn said_as_an_answer(a: &Replica, code: &str, op: &str) {
    let body = a.wait_not_ready_reason(Duration::from_secs(5));
    assert!(!body.contains("unreachable"), "{body}");
    assert!(body.contains(code), "{body}");
    assert_eq!(a.metric("leasehold_redis_up"), Some(1.0));
    let counted = format!("leasehold_redis_errors_total{{op=\"{op}\",kind=\"error_reply\"}}");
    a.metric(&counted)
        .expect("the replies counted as error_reply");
}

/// The line `a` logs once Redis refuses it for good, within `within`, at error level: its error.
fn refusal_said(a: &Replica, within: Duration) -> String {
    let refused = a.wait_events(
        "redis refuses leasehold; backing off until it is fixed",
        1,
        within,
    );
    assert_eq!(refused[0]["level"], "ERROR", "{:?}", refused[0]);
    refused[0]["error"].as_str().unwrap_or_default().to_owned()
}

/// A replica that reaches a Sentinel-watched master directly wins no term: a failover would
/// leave it leading on a deposed master beside those that follow the Sentinels (a review saw
/// two valid leaders for 8 s, and for ever with the old master cut off from the Sentinels).
/// A replica on the Sentinels' URL leads there. Once the Sentinels' links to the master are
/// gone (as a master cut off from them closes them), the refusal stands.
#[test]
fn a_master_that_sentinels_watch_is_refused_by_its_own_address() {
    let set = SentinelSet::start();
    let lease = unique_lease("sentinel-direct");
    let direct = Replica::spawn(&set.master.url(), &lease, "direct", &member(), &[]);
    let body = wait_for(
        "the direct replica to say why",
        Duration::from_secs(8),
        || {
            direct
                .get("/readyz")
                .filter(|(code, body)| *code == 503 && body.contains("sentinels watch this redis"))
                .map(|(_, body)| body)
        },
    );
    assert!(
        body.starts_with(
            "not ready: redis fails over (while taking the lease): 3 sentinels watch this redis"
        ) && body.contains("redis+sentinel://"),
        "{body}"
    );
    let through = Replica::spawn(&set.url(), &lease, "through", &member(), &[]);
    wait_for(
        "the replica on the Sentinels' URL to lead",
        Duration::from_secs(10),
        || (through.leader()["leader"] == "through").then_some(()),
    );
    assert!(
        direct.events("became leader").is_empty(),
        "{}",
        direct.log_text()
    );

    for sentinel in 0..3 {
        set.signal_sentinel(sentinel, nix::sys::signal::Signal::SIGKILL);
    }
    wait_for(
        "the Sentinels' links to close",
        Duration::from_secs(10),
        || {
            let listening: Vec<redis::Value> =
                set.master.cmd(&["PUBSUB", "NUMSUB", "__sentinel__:hello"]);
            (listening.get(1) == Some(&redis::Value::Int(0))).then_some(())
        },
    );
    let refusals = || {
        let (_, body) = direct.get("/metrics")?;
        body.lines()
            .find(|l| l.starts_with("leasehold_redis_errors_total") && l.contains("fails_over"))?
            .rsplit(' ')
            .next()?
            .parse::<f64>()
            .ok()
    };
    let before = refusals();
    wait_for(
        "another try of the direct replica",
        Duration::from_secs(40),
        || (refusals() > before).then_some(()),
    );
    assert!(
        direct.events("became leader").is_empty(),
        "{}",
        direct.log_text()
    );
}

/// `--no-data-loss-cooldown` is only for a Redis that never fails over; the URL's scheme said
/// so for Sentinel and Cluster URLs, but a Cluster node named by its own address was accepted,
/// whose promoted replica may lack the last term. The acquire refuses it.
#[test]
fn a_cluster_node_by_its_own_address_refuses_a_lease_without_the_cooldown() {
    let node = RedisServer::builder()
        .args(["--cluster-enabled", "yes"])
        .start();
    node.cmd::<String>(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
    wait_for(
        "the one-node cluster to serve",
        Duration::from_secs(10),
        || {
            node.cmd::<String>(&["CLUSTER", "INFO"])
                .contains("cluster_state:ok")
                .then_some(())
        },
    );
    let mut args = member();
    args.push("--no-data-loss-cooldown");
    let a = Replica::spawn(
        &node.url(),
        &unique_lease("cluster-direct"),
        "a",
        &args,
        &[],
    );
    let body = wait_for("the replica to say why", Duration::from_secs(8), || {
        a.get("/readyz")
            .filter(|(code, body)| *code == 503 && body.contains("a Cluster node"))
            .map(|(_, body)| body)
    });
    assert!(body.contains("--no-data-loss-cooldown"), "{body}");
    assert!(a.events("became leader").is_empty(), "{}", a.log_text());
}

/// The same master, reached by its own address by a replica that won while no Sentinel
/// watched it (each one's link cut, as while they all restart): once they watch it again, the
/// leader's next renewal is refused, the term ends, and no later try is let in.
#[test]
fn a_leader_on_a_master_that_sentinels_come_to_watch_steps_down() {
    let set = SentinelSet::start_with_a_proxied_master();
    // No failover while their links are cut: the master stays the master.
    set.on_every_sentinel(&[
        "SENTINEL",
        "SET",
        MASTER_NAME,
        "down-after-milliseconds",
        "600000",
    ]);
    let watching = || {
        let counted: Vec<redis::Value> =
            set.master.cmd(&["PUBSUB", "NUMSUB", "__sentinel__:hello"]);
        match counted.get(1) {
            Some(redis::Value::Int(n)) => *n,
            other => panic!("NUMSUB: {other:?}"),
        }
    };
    set.master_proxy().set(Fault::Drop);
    wait_for(
        "the Sentinels' links to close",
        Duration::from_secs(10),
        || (watching() == 0).then_some(()),
    );
    let lease = unique_lease("sentinels-come");
    let direct = Replica::spawn(&set.master.url(), &lease, "direct", &member(), &[]);
    wait_for(
        "the direct replica to lead",
        Duration::from_secs(10),
        || (direct.leader()["leader"] == "direct").then_some(()),
    );
    set.master_proxy().set(Fault::Pass);
    wait_for(
        "the Sentinels to watch again",
        Duration::from_secs(10),
        || (watching() == 3).then_some(()),
    );
    let ended = direct.wait_events("stepped down", 1, Duration::from_secs(5));
    assert_eq!(ended[0]["reason"], "renew_refused", "{:?}", ended[0]);
    // The renewal that first finds one of them watching ends the term.
    let detail = ended[0]["detail"].as_str().unwrap_or_default();
    let watched = |n| detail.contains(&format!("{n} sentinels watch this redis"));
    assert!((1..=3).any(watched), "{detail}");
    // Sitting out, then refused by every later acquire, in the acquire's words.
    let body = wait_for("the acquire's refusal", Duration::from_secs(5), || {
        direct
            .get("/readyz")
            .filter(|(code, body)| *code == 503 && body.contains("(while taking the lease)"))
            .map(|(_, body)| body)
    });
    assert!(body.contains("sentinels watch this redis"), "{body}");
    assert_eq!(
        direct.events("became leader").len(),
        1,
        "{}",
        direct.log_text()
    );
}
