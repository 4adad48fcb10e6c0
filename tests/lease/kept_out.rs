//! A replica that a gate keeps out of the election sends no try, so its elector hears nothing
//! from Redis: the eviction policy's reads, once a lease duration while it is out, are what
//! `/leader` and `leasehold_redis_up` say of Redis, until it stands again. Here the gate is a
//! candidate check.

use std::time::Duration;

use harness::contenders::unique_lease;
use harness::replica::{FAST, Replica};
use leasehold::lease::minimal_acl_rule;
use testbed::RedisServer;
use testbed::wait::wait_for;

use crate::candidacy::{CHECK, set_healthy};
use crate::eviction::as_acl_user;

/// A check that never passes, from the start: Redis shows up, then down while it is paused, then
/// up again.
#[test]
fn a_replica_kept_out_from_its_start_still_says_whether_redis_answers() {
    let redis = RedisServer::start();
    let mut args = FAST.to_vec();
    args.extend(["--candidate-check-command", "false"]);
    let a = Replica::spawn(&redis.url(), &unique_lease("kept-out"), "a", &args, &[]);
    let up = |want: f64, what: &str| {
        wait_for(what, Duration::from_secs(10), || {
            (a.metric("leasehold_redis_up") == Some(want)).then_some(())
        })
    };
    wait_for("the check to keep a out", Duration::from_secs(10), || {
        a.get("/readyz")
            .filter(|(code, body)| *code == 503 && body.contains("candidate check"))
    });
    up(1.0, "redis shown up");
    redis.pause();
    up(0.0, "redis shown down while paused");
    let view = a.leader();
    assert_eq!(view["redis"]["reachable"], false, "{view}");
    redis.resume();
    up(1.0, "redis shown up again");
}

/// What a read heard while the replica was out ends with the gate. With an ACL without
/// `+info|memory` the read is refused while the check keeps `a` out; once it passes, `a`'s next
/// try finds things as they were (following `l`), which changes nothing in its elector's
/// status, and `a` must still be ready again, not kept at the read's refusal.
#[test]
fn what_a_read_heard_while_out_ends_when_the_replica_stands_again() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let rule = minimal_acl_rule("leasehold:", false).replace(" +info|memory", "");
    let args = as_acl_user(&redis, &rule, dir.path());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let lease = unique_lease("kept-out-heard");
    let l = Replica::spawn(&redis.url(), &lease, "l", &args, &[]);
    let within = Duration::from_secs(10);
    wait_for("l to lead", within, || {
        (l.leader()["is_leader"] == true).then_some(())
    });
    set_healthy(dir.path(), "a", true);
    let check = format!("test -f {}/a-healthy", dir.path().display());
    let mut checked = args.clone();
    checked.extend(CHECK);
    checked.extend(["--readiness", "member", "--candidate-check-command", &check]);
    let a = Replica::spawn(&redis.url(), &lease, "a", &checked, &[]);
    wait_for("a ready as a member", within, || a.is_ready().then_some(()));
    set_healthy(dir.path(), "a", false);
    wait_for("the refused read shown while a is out", within, || {
        let error = a.leader()["redis"]["last_error"]
            .as_str()
            .map(str::to_lowercase);
        error
            .is_some_and(|e| e.contains("permission"))
            .then_some(())
    });
    set_healthy(dir.path(), "a", true);
    wait_for("a ready again", within, || a.is_ready().then_some(()));
}

/// The check's command is shown on the unauthenticated port (`/readyz`, `/leader`) as the
/// command leasehold supervises is logged: without a secret's value.
#[test]
fn a_check_command_is_shown_without_its_secrets() {
    let redis = RedisServer::start();
    let mut args = FAST.to_vec();
    args.extend(["--candidate-check-command", "TOKEN=s3cret false"]);
    let a = Replica::spawn(
        &redis.url(),
        &unique_lease("kept-out-secret"),
        "a",
        &args,
        &[],
    );
    let (_, readyz) = wait_for(
        "the failed check in /readyz",
        Duration::from_secs(10),
        || {
            a.get("/readyz")
                .filter(|(code, body)| *code == 503 && body.contains("exit code"))
        },
    );
    let reason = a.leader()["candidacy"]["reason"].to_string();
    for shown in [&readyz, &reason] {
        assert!(shown.contains("TOKEN=***"), "{shown}");
        assert!(!shown.contains("s3cret"), "{shown}");
    }
}

/// A replica that a gate keeps out stops looking at the lease, so it stops naming the leader it
/// saw last: that leader may stop or be replaced meanwhile. It went on naming it (in `/leader`,
/// `leasehold_leader`, `leasehold_fencing_token`) for as long as it was out, a second leader to
/// a query over every replica once another took over.
#[test]
fn a_replica_kept_out_no_longer_names_the_leader_it_saw() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let lease = unique_lease("kept-out-leader");
    let l = Replica::spawn(&redis.url(), &lease, "l", &FAST, &[]);
    let within = Duration::from_secs(10);
    wait_for("l to lead", within, || {
        (l.leader()["is_leader"] == true).then_some(())
    });
    set_healthy(dir.path(), "a", true);
    let check = format!("test -f {}/a-healthy", dir.path().display());
    let mut args = FAST.to_vec();
    args.extend(CHECK);
    args.extend(["--candidate-check-command", &check]);
    let a = Replica::spawn(&redis.url(), &lease, "a", &args, &[]);
    wait_for("a to follow l", within, || {
        (a.leader()["leader"] == "l" && a.metric("leasehold_fencing_token") > Some(0.0))
            .then_some(())
    });
    set_healthy(dir.path(), "a", false);
    wait_for("a, kept out, to name no leader", within, || {
        let view = a.leader();
        (view["candidacy"]["stands"] == false
            && view["leader"].is_null()
            && a.metric("leasehold_fencing_token") == Some(0.0))
        .then_some(())
    });
}
