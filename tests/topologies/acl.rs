//! A Redis with exactly the ACL user docs/REFERENCE.md gives: everything leasehold does works; a user
//! missing a command gets an error that names the missing permission; a wrong password is a
//! clear error with back-off, not a retry storm. The rule and the errors that name a missing
//! permission are checked on each engine.

use std::sync::Arc;
use std::time::Duration;

use harness::contenders::{
    ActionLog, Contender, acting_work, fast_timing, handoff_gaps, idle, shut_down_all, summary,
    unique_lease, until_leading,
};
use leasehold::elector::Role;
use leasehold::lease::{
    Acquired, LeaseError, LeaseOptions, RedisLease, Released, Secret, minimal_acl_rule,
};
use testbed::on_engines;
use testbed::redis_server::{Engine, RedisServer};
use testbed::wait::{eventually, holds_for, until};

pub(crate) const CALL: Duration = Duration::from_secs(2);
pub(crate) const TTL: Duration = Duration::from_secs(1);

pub(crate) fn acl_lease(url: &str, name: &str, identity: &str, user: &str, pw: &str) -> RedisLease {
    harness::contenders::lease_with(url, name, identity, acl_options(user, pw))
}

/// The options of [`acl_lease`]: the user and its password.
fn acl_options(user: &str, pw: &str) -> LeaseOptions {
    LeaseOptions {
        username: Some(user.to_owned()),
        password: Some(Secret::new(pw)),
        ..LeaseOptions::default()
    }
}

/// An [`acl_lease`] without the data-loss cooldown, whose first acquire reaches the lease key.
fn acl_lease_at_once(url: &str, name: &str, user: &str, pw: &str) -> RedisLease {
    let options = LeaseOptions {
        cooldown_on_data_loss: false,
        ..acl_options(user, pw)
    };
    harness::contenders::lease_with(url, name, "pod-a", options)
}

on_engines!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn the_minimal_acl_user_can_do_everything_leasehold_needs);
async fn the_minimal_acl_user_can_do_everything_leasehold_needs(engine: Engine) {
    let redis = RedisServer::start_on(engine);
    redis.set_acl_user("leasehold", &minimal_acl_rule("leasehold:", true), "s3cret");
    let name = unique_lease("acl");
    let log: ActionLog = Arc::default();
    let timing = fast_timing();
    // Cooldown on: the marker, INFO for the run id, TIME; handoffs: release, PUBLISH, SUBSCRIBE.
    let contenders: Vec<Contender> = ["pod-a", "pod-b"]
        .iter()
        .map(|who| {
            let lease = acl_lease(&redis.url(), &name, who, "leasehold", "s3cret");
            Contender::spawn(
                lease,
                timing,
                acting_work(
                    log.clone(),
                    Duration::from_millis(5),
                    Some(Duration::from_millis(300)),
                ),
            )
        })
        .collect();
    eventually("three handoffs", Duration::from_secs(10), || async {
        (handoff_gaps(&log.lock().unwrap()).len() >= 3).then_some(())
    })
    .await;
    for c in &contenders {
        let s = c.status.borrow().clone();
        assert!(
            s.redis.subscribed,
            "SUBSCRIBE on the release channel is allowed"
        );
        assert_eq!(s.redis.last_error, None);
    }
    // The followers' probes went out (a `PUBLISH` on each one's probe channel inside its acquire
    // script) and none was refused: Redis logs every refused command and channel in its ACL log.
    eventually(
        "probes and release announcements",
        Duration::from_secs(5),
        || async { (redis.calls("publish") >= 4).then_some(()) },
    )
    .await;
    let refused: Vec<redis::Value> = redis.cmd(&["ACL", "LOG"]);
    assert!(refused.is_empty(), "the ACL refused: {refused:?}");
    let (log, _) = shut_down_all(contenders, &log).await;
    let gaps = handoff_gaps(&log);
    eprintln!("handoff as the minimal ACL user: {}", summary(&gaps));
    assert!(
        gaps.iter().all(|g| *g < Duration::from_millis(500)),
        "released and announced: {gaps:?}"
    );
    // The script cache was flushed? Then SCRIPT LOAD must be allowed too.
    redis.cmd::<String>(&["SCRIPT", "FLUSH"]);
    let lease = acl_lease(&redis.url(), &name, "pod-c", "leasehold", "s3cret");
    let outcome = lease.acquire(TTL, CALL).await.unwrap();
    let Acquired::Leader(grant) = outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(
        lease.release(grant.token, CALL).await.unwrap(),
        Released::Released
    );
    lease.observe(CALL).await.unwrap();
    // A URL that names a database: each connection's SELECT is allowed.
    let db = format!("{}/1", redis.url());
    let lease = acl_lease_at_once(&db, &unique_lease("acl-db"), "leasehold", "s3cret");
    let outcome = lease.acquire(TTL, CALL).await;
    assert!(matches!(outcome, Ok(Acquired::Leader(_))), "{outcome:?}");
    // A key of another type is named (TYPE is allowed), so that the error says which to delete.
    let lease = acl_lease_at_once(
        &redis.url(),
        &unique_lease("acl-type"),
        "leasehold",
        "s3cret",
    );
    redis.cmd::<i64>(&["HSET", &lease.keys().lease, "field", "value"]);
    let err = lease.acquire(TTL, CALL).await.unwrap_err();
    let named = format!("`{}` holds a hash, not a string", lease.keys().lease);
    assert!(err.to_string().contains(&named), "{err}");
    // And nothing more than needed: another key is out of reach.
    let mut conn = redis::Client::open(format!(
        "redis://leasehold:s3cret@127.0.0.1:{}",
        redis.port()
    ))
    .unwrap()
    .get_connection()
    .unwrap();
    let refused: redis::RedisResult<Option<String>> =
        redis::cmd("GET").arg("someone-elses-key").query(&mut conn);
    assert_eq!(refused.unwrap_err().code(), Some("NOPERM"));
}

/// A key prefix with characters that a Redis ACL pattern reads as glob syntax (`[`, `*`, `?`)
/// is escaped in the rule: unescaped, `~app[1]*?:*` did not cover the user's own keys, and the
/// user REFERENCE's rule made was refused on every call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_minimal_acl_rule_covers_a_prefix_with_glob_characters() {
    let redis = RedisServer::start();
    let prefix = "app[1]*?:";
    redis.set_acl_user("globbed", &minimal_acl_rule(prefix, false), "pw");
    let options = LeaseOptions {
        key_prefix: prefix.to_owned(),
        cooldown_on_data_loss: false,
        ..acl_options("globbed", "pw")
    };
    let name = unique_lease("acl-glob");
    let lease = harness::contenders::lease_with(&redis.url(), &name, "pod-a", options);
    let acquired = lease.acquire(TTL, CALL).await;
    assert!(matches!(acquired, Ok(Acquired::Leader(_))), "{acquired:?}");
}

on_engines!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn a_user_missing_a_command_gets_an_error_naming_it);
async fn a_user_missing_a_command_gets_an_error_naming_it(engine: Engine) {
    let redis = RedisServer::start_on(engine);
    let full = minimal_acl_rule("leasehold:", false);
    redis.set_acl_user("no-info", &full.replace(" +info|server", ""), "pw");
    redis.set_acl_user("no-publish", &full.replace(" +publish", ""), "pw");
    // Redis 6.2 and 7.0 word a channel refused inside a script in words of their own.
    let elsewhere = full.replace("&leasehold:*", "&elsewhere:*");
    redis.set_acl_user("no-channel", &elsewhere, "pw");
    let name = unique_lease("noperm");

    let lease = acl_lease(&redis.url(), &name, "pod-a", "no-info", "pw");
    let err = lease.acquire(TTL, CALL).await.unwrap_err();
    assert!(matches!(err, LeaseError::NoPermission { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.starts_with("redis refused while taking the lease: the user lacks a permission"),
        "{text}"
    );
    assert!(text.contains("`info|server`"), "names the command: {text}");
    assert!(
        text.contains("docs/REFERENCE.md, \"ACL user with least privilege\""),
        "points at the rule: {text}"
    );
    let reference =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/REFERENCE.md"))
            .expect("docs/REFERENCE.md");
    assert!(
        reference.contains("**ACL user with least privilege.**"),
        "the section the error points at is in docs/REFERENCE.md"
    );

    // A lease of its own: the refused announcement leaves the cooldown it started.
    let other = unique_lease("noperm-channel");
    let lease = acl_lease(&redis.url(), &other, "pod-a", "no-channel", "pw");
    let err = lease.acquire(TTL, CALL).await.unwrap_err();
    assert!(matches!(err, LeaseError::NoPermission { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("the script's `publish` is refused the lease's channels"),
        "names the command and the channel: {err}"
    );

    let lease = acl_lease(&redis.url(), &name, "pod-a", "no-publish", "pw");
    // The acquire that finds Redis new announces it on the channel: refused, naming the command
    // (the cooldown it started still runs; only the announcement was refused).
    let err = lease.acquire(TTL, CALL).await.unwrap_err();
    assert!(matches!(err, LeaseError::NoPermission { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("the script's `publish` is not allowed"),
        "names the command: {err}"
    );
    let granted = eventually(
        "a grant after the cooldown",
        Duration::from_secs(5),
        || async {
            match lease.acquire(TTL, CALL).await.unwrap() {
                Acquired::Leader(g) => Some(g),
                _ => None,
            }
        },
    )
    .await;
    assert!(granted.token.0 > 0);
    let err = lease.release(granted.token, CALL).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, LeaseError::NoPermission { .. }), "{err:?}");
    assert!(
        text.contains("the script's `publish` is not allowed"),
        "names the command: {text}"
    );
}

// A user refused a command that a renewal adds to an acquire's (PEXPIRE, PUBSUB NUMSUB) is
// refused the term at its acquire, before the lease is written: it never wins a term it could
// not keep (docs/DESIGN.md, "Gray failures").
on_engines!(#[tokio::test] async fn a_user_that_could_not_renew_is_refused_the_term);
async fn a_user_that_could_not_renew_is_refused_the_term(engine: Engine) {
    let redis = RedisServer::start_on(engine);
    let full = minimal_acl_rule("leasehold:", false);
    for (user, command) in [("no-pexpire", "pexpire"), ("no-numsub", "pubsub|numsub")] {
        redis.set_acl_user(user, &full.replace(&format!(" +{command}"), ""), "pw");
        let lease = acl_lease_at_once(&redis.url(), &unique_lease(user), user, "pw");
        let err = lease.acquire(TTL, CALL).await.unwrap_err();
        assert!(
            matches!(err, LeaseError::NoPermission { .. }),
            "{user}: {err:?}"
        );
        assert!(err.to_string().contains(&format!("`{command}`")), "{err}");
        let seen = lease.observe(CALL).await.unwrap();
        assert!(
            seen.holder.is_none(),
            "{user}: a term was written: {seen:?}"
        );
    }
}

/// The `object` of every entry in the ACL log whose `reason` is `reason`.
fn refused(redis: &RedisServer, reason: &str) -> Vec<String> {
    let log: Vec<Vec<redis::Value>> = redis.cmd(&["ACL", "LOG"]);
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        _ => String::new(),
    };
    log.iter()
        .filter_map(|entry| {
            let field = |name: &str| {
                let at = entry.iter().position(|v| text(v) == name)?;
                entry.get(at + 1).map(text)
            };
            (field("reason")? == reason).then(|| field("object"))?
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_for_the_release_channel_alone_and_without_ping_keeps_the_release_channel() {
    // A user set up with an older rule: only the release channel (so the probe channel is
    // refused) and no `+ping`. The subscription then proves itself with a PING, and a refused
    // PING is still an answer from Redis: the subscription counts as alive and is kept.
    let redis = RedisServer::start();
    let name = unique_lease("no-ping");
    let rule = minimal_acl_rule("leasehold:", false)
        .replace(" +ping", "")
        .replace("&leasehold:*", &format!("&leasehold:{{{name}}}:released"));
    redis.set_acl_user("leasehold", &rule, "pw");
    let c = Contender::spawn(
        acl_lease(&redis.url(), &name, "pod-a", "leasehold", "pw"),
        fast_timing(),
        acting_work(ActionLog::default(), Duration::from_millis(5), None),
    );
    let mut status = c.status.clone();
    until("subscribed", &mut status, Duration::from_secs(5), |s| {
        s.redis.subscribed
    })
    .await;
    eventually(
        "a refused probe channel and a refused PING",
        Duration::from_secs(5),
        || async {
            let channels = refused(&redis, "channel");
            let commands = refused(&redis, "command");
            (channels.iter().any(|c| c.contains(":probe:")) && commands.iter().any(|c| c == "ping"))
                .then_some(())
        },
    )
    .await;
    // Keepalives every 100 ms of quiet: a second would be ten chances to resubscribe.
    holds_for(
        "the subscription",
        &mut status,
        Duration::from_secs(1),
        |s| s.redis.subscribed,
    )
    .await;
    assert!(status.borrow().role != Role::Starting, "and it takes part");
    c.shutdown().await;
}

#[test]
fn the_reference_gives_the_rule_the_tests_use() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/REFERENCE.md")).unwrap();
    let rule = minimal_acl_rule("leasehold:", false);
    assert!(
        readme.contains(&rule),
        "docs/REFERENCE.md must give the ACL rule:\n{rule}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_minimal_acl_user_can_ask_for_a_handover_and_hand_over() {
    let redis = RedisServer::start();
    redis.set_acl_user(
        "leasehold",
        &minimal_acl_rule("leasehold:", false),
        "s3cret",
    );
    let name = unique_lease("acl-handover");
    let timing = fast_timing();
    let acl = |who: &str| acl_lease(&redis.url(), &name, who, "leasehold", "s3cret");
    let a = Contender::spawn(acl("pod-a"), timing, idle);
    let mut a_status = a.status.clone();
    until_leading("pod-a to lead", &mut a_status, Duration::from_secs(10)).await;
    let b = Contender::spawn(acl("pod-b"), timing, idle);
    let c = Contender::spawn(acl("pod-c"), timing, idle);
    // The request (its key and the nudge on the channel), the renewal that reads it, the release
    // that reserves the next term, and the acquire that honours the reservation.
    let operator = acl("operator");
    let holder = operator
        .observe(CALL)
        .await
        .unwrap()
        .holder
        .expect("a holder");
    assert_eq!(
        operator
            .request_handover(&holder, Some("pod-c"), Duration::from_secs(10), CALL)
            .await
            .unwrap(),
        leasehold::lease::HandoverRequested::Requested
    );
    let mut c_status = c.status.clone();
    until_leading("pod-c to lead", &mut c_status, Duration::from_secs(5)).await;
    assert!(!b.is_leader());
    let log: Vec<redis::Value> = redis.cmd(&["ACL", "LOG"]);
    assert!(log.is_empty(), "the ACL refused something: {log:?}");
    for contender in [a, b, c] {
        contender.shutdown().await;
    }
}
