//! The lease primitives' typed errors against a real redis-server: a key of the wrong type, a
//! corrupt fence, a replica's `READONLY`, a loading Redis, a paused one (a timeout, then a new
//! connection) and a dead one.

use std::time::Duration;

use harness::contenders::{lease, unique_lease};
use leasehold::lease::{Acquired, CooldownState, FencingToken, LeaseError, PreviousTerm, Renewed};
use testbed::on_engines;
use testbed::redis_server::{Engine, Persistence, RedisServer};

use crate::primitives::{CALL, TTL, must_lead};

on_engines!(#[tokio::test] async fn a_key_of_the_wrong_type_is_a_clear_error);
async fn a_key_of_the_wrong_type_is_a_clear_error(engine: Engine) {
    let redis = RedisServer::start_on(engine);
    let a = lease(&redis.url(), &unique_lease("wrongtype"), "pod-a", false);
    redis.cmd::<i64>(&["HSET", &a.keys().lease, "field", "value"]);
    let err = a.acquire(TTL, CALL).await.unwrap_err();
    assert!(matches!(err, LeaseError::WrongType { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains(&format!("`{}` holds a hash, not a string", a.keys().lease)),
        "{text}"
    );
    assert!(
        text.contains(&a.keys().lease),
        "the message names the key: {text}"
    );
    assert!(matches!(
        a.renew(FencingToken(1), TTL, CALL).await.unwrap_err(),
        LeaseError::WrongType { .. }
    ));
}

on_engines!(#[tokio::test] async fn a_handover_key_of_the_wrong_type_refuses_the_term_not_its_renewal);
/// Every renewal reads the handover request: a `:handover` key of another type refuses each one.
/// The acquire reads it before its first write, so that a term is not won only to end at its
/// first renewal (a `lock` ran its command and had it killed half a second later).
async fn a_handover_key_of_the_wrong_type_refuses_the_term_not_its_renewal(engine: Engine) {
    let redis = RedisServer::start_on(engine);
    let a = lease(
        &redis.url(),
        &unique_lease("wrongtype-handover"),
        "pod-a",
        false,
    );
    let handover = &a.keys().handover;
    redis.cmd::<i64>(&["RPUSH", handover, "x"]);
    let err = a.acquire(TTL, CALL).await.unwrap_err();
    assert!(matches!(err, LeaseError::WrongType { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains(&format!("`{handover}` holds a list")),
        "{err}"
    );
    let exists: i64 = redis.cmd(&["EXISTS", &a.keys().lease]);
    assert_eq!(exists, 0, "no term begun");
}

#[tokio::test]
async fn a_corrupt_fence_is_refused_and_leaves_no_lease_behind() {
    let redis = RedisServer::start();
    let a = lease(&redis.url(), &unique_lease("corrupt"), "pod-a", false);
    redis.cmd::<String>(&["SET", &a.keys().fence, "banana"]);
    let err = a.acquire(TTL, CALL).await.unwrap_err();
    assert!(matches!(err, LeaseError::Corrupt { .. }), "{err:?}");
    assert!(
        err.to_string().contains("holds banana, not a token"),
        "{err}"
    );
    let exists: i64 = redis.cmd(&["EXISTS", &a.keys().lease]);
    assert_eq!(exists, 0);
    // Nor does it touch anything before the refusal: a handover's reservation for this very
    // replica stays, for the try after the fence is mended.
    let reserved = &a.keys().reserved;
    redis.cmd::<String>(&["SET", reserved, "pod-a", "PX", "60000"]);
    let err = a.acquire(TTL, CALL).await.unwrap_err();
    assert!(matches!(err, LeaseError::Corrupt { .. }), "{err:?}");
    let kept: i64 = redis.cmd(&["PTTL", reserved]);
    assert!(
        kept > 0,
        "the reservation went with a refused acquire: {kept}"
    );
    // Numbers Lua reads but INCR does not: refused as corrupt too, before any write (they
    // passed the check and failed at INCR, an `other` error naming no key).
    for foreign in ["9000000000000000.0", "2e15", " 9000000000000000", "0x1F"] {
        redis.cmd::<String>(&["SET", &a.keys().fence, foreign]);
        let err = a.acquire(TTL, CALL).await.unwrap_err();
        assert!(
            matches!(err, LeaseError::Corrupt { .. }),
            "{foreign}: {err:?}"
        );
    }
}

#[tokio::test]
async fn a_replica_answers_readonly() {
    let master = RedisServer::start();
    let port = master.port().to_string();
    let replica = RedisServer::builder()
        .args(["--replicaof", "127.0.0.1", &port])
        .start();
    let a = lease(&replica.url(), &unique_lease("readonly"), "pod-a", false);
    let err = a.acquire(TTL, CALL).await.unwrap_err();
    assert!(matches!(err, LeaseError::ReadOnly { .. }), "{err:?}");
    assert!(err.to_string().contains("connected to a replica"), "{err}");
}

on_engines!(#[tokio::test] async fn a_writable_replica_answers_readonly_too);
/// A replica that takes writes (`replica-read-only no`) is still a replica: a term won or kept
/// there is not on the master, which every other replica reads. The acquire and the removal
/// are refused as on a read-only replica (they won and removed there); and so is the renewal of
/// a leader whose master became such a replica, here of a master it cannot reach (it renewed
/// there, its term kept alive on a copy nobody else reads).
async fn a_writable_replica_answers_readonly_too(engine: Engine) {
    let master = RedisServer::start_on(engine);
    let port = master.port().to_string();
    let replica = (RedisServer::builder().engine(engine))
        .args([
            "--replicaof",
            "127.0.0.1",
            &port,
            "--replica-read-only",
            "no",
        ])
        .start();
    let a = lease(
        &replica.url(),
        &unique_lease("writable-replica"),
        "pod-a",
        false,
    );
    let err = a.acquire(TTL, CALL).await.unwrap_err();
    assert!(matches!(err, LeaseError::ReadOnly { .. }), "{err:?}");
    let err = a.remove_keys(true, CALL).await.unwrap_err();
    assert!(matches!(err, LeaseError::ReadOnly { .. }), "{err:?}");

    let b = lease(
        &master.url(),
        &unique_lease("writable-demoted"),
        "pod-b",
        false,
    );
    let token = must_lead(&b).await;
    master.cmd::<String>(&["CONFIG", "SET", "replica-read-only", "no"]);
    // Port 1: nothing listens there; the old master keeps its data and takes writes.
    master.cmd::<String>(&["REPLICAOF", "127.0.0.1", "1"]);
    let err = b.renew(token, TTL, CALL).await.unwrap_err();
    assert!(matches!(err, LeaseError::ReadOnly { .. }), "{err:?}");
}

/// A replica of `master` that announces `announced` as its address, once the master lists it.
fn announcing_replica(master: &RedisServer, engine: Engine, announced: &str) -> RedisServer {
    let port = master.port().to_string();
    let replica = (RedisServer::builder().engine(engine))
        .args(["--replicaof", "127.0.0.1", &port])
        .args(["--replica-announce-ip", announced])
        .start();
    testbed::wait::wait_for("the replica listed", Duration::from_secs(10), || {
        let info: String = master.cmd(&["INFO", "replication"]);
        info.contains(&format!("ip={announced},")).then_some(())
    });
    replica
}

on_engines!(#[tokio::test] async fn a_master_is_told_by_its_role_line_not_by_a_replicas_words);
/// A master lists each replica in `INFO replication` by the address the replica announces,
/// whatever it is: a replica announcing `role:slave` made the master look like a replica to a
/// check that searched the whole text, and no term could be won or renewed there.
async fn a_master_is_told_by_its_role_line_not_by_a_replicas_words(engine: Engine) {
    let master = RedisServer::start_on(engine);
    let _replica = announcing_replica(&master, engine, "role:slave");
    let a = lease(
        &master.url(),
        &unique_lease("announced-role"),
        "pod-a",
        false,
    );
    let token = must_lead(&a).await;
    assert!(matches!(
        a.renew(token, TTL, CALL).await,
        Ok(Renewed::Held(_))
    ));
}

on_engines!(#[tokio::test] async fn a_replicas_announced_address_does_not_rename_its_master);
/// The same for the server's identity, which the state record keeps: a replica announcing
/// `master_replid:…` came before the master's own field in `INFO replication`, and the master
/// took the new id for another dataset (a term that ended by its release said `data_loss`,
/// and with the cooldown on, nobody would have led for a lease duration).
async fn a_replicas_announced_address_does_not_rename_its_master(engine: Engine) {
    let master = RedisServer::start_on(engine);
    // A master gets a new replication id with its first replica: that one comes before.
    let _first = announcing_replica(&master, engine, "127.0.0.1");
    let a = lease(
        &master.url(),
        &unique_lease("announced-replid"),
        "pod-a",
        false,
    );
    let token = must_lead(&a).await;
    let _forged = announcing_replica(&master, engine, "master_replid:0123456789abcdef");
    a.release(token, CALL).await.unwrap();
    match a.acquire(TTL, CALL).await.unwrap() {
        Acquired::Leader(grant) => assert_eq!(grant.previous, PreviousTerm::Released),
        other => panic!("expected to lead, got {other:?}"),
    }
}

on_engines!(#[tokio::test] async fn a_long_call_without_the_password_is_said_as_no_password);
/// A Redis that asks for a password, given none, refuses a command of more than ten arguments
/// before it would say `NOAUTH` (`Protocol error: unauthenticated multibulk length`) and closes
/// the connection; the acquire and the removal send that many. Said as a read's `NOAUTH` is:
/// no password was given.
async fn a_long_call_without_the_password_is_said_as_no_password(engine: Engine) {
    let redis = (RedisServer::builder().engine(engine))
        .args(["--requirepass", "s3cret"])
        .start();
    let a = lease(&redis.url(), &unique_lease("no-password"), "pod-a", false);
    let acquired = a.acquire(TTL, CALL).await.unwrap_err();
    let removed = a.remove_keys(true, CALL).await.unwrap_err();
    for err in [acquired, removed] {
        assert!(matches!(err, LeaseError::Authentication { .. }), "{err:?}");
        assert!(err.to_string().contains("none was given"), "{err}");
    }
}

#[tokio::test]
async fn a_loading_redis_is_a_typed_error_then_works() {
    let mut redis = RedisServer::builder()
        .persistence(Persistence::AofAlways)
        .start();
    let a = lease(&redis.url(), &unique_lease("loading"), "pod-a", false);
    // 20 000 keys, loaded at 100 µs each after the restart: about two seconds of LOADING.
    let mut conn = redis.connection();
    for chunk in 0..20 {
        let mut pipe = redis::pipe();
        for i in 0..1000 {
            pipe.cmd("SET")
                .arg(format!("filler:{chunk}:{i}"))
                .arg("x")
                .ignore();
        }
        let _: () = pipe.query(&mut conn).unwrap();
    }
    redis.set_extra_args(&["--key-load-delay", "100"]);
    redis.restart_without_waiting();
    let err = a.acquire(TTL, CALL).await.unwrap_err();
    assert!(matches!(err, LeaseError::Loading { .. }), "{err:?}");
    let outcome = testbed::wait::eventually(
        "redis to finish loading",
        Duration::from_secs(20),
        || async { a.acquire(TTL, CALL).await.ok() },
    )
    .await;
    assert!(matches!(outcome, Acquired::Leader(_)), "{outcome:?}");
}

#[tokio::test]
async fn a_paused_redis_times_out_and_the_connection_recovers() {
    let redis = RedisServer::start();
    let a = lease(&redis.url(), &unique_lease("pause"), "pod-a", false);
    let t = must_lead(&a).await;
    redis.pause();
    let started = std::time::Instant::now();
    let err = a
        .renew(t, TTL, Duration::from_millis(200))
        .await
        .unwrap_err();
    assert!(matches!(err, LeaseError::Timeout { .. }), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "bounded by the timeout"
    );
    redis.resume();
    // The timed-out connection was thrown away; the next call dials a new one.
    let renewed = a.renew(t, TTL, CALL).await.unwrap();
    assert!(matches!(renewed, Renewed::Held(_)), "{renewed:?}");
}

#[tokio::test]
async fn a_dead_redis_is_a_connection_error_and_observe_reports_the_holder() {
    let mut redis = RedisServer::start();
    let name = unique_lease("observe");
    let a = lease(&redis.url(), &name, "pod-a", false);
    let t = must_lead(&a).await;
    let seen = a.observe(CALL).await.unwrap();
    let holder = seen.holder.expect("a holder");
    assert_eq!(holder.identity(), "pod-a");
    assert_eq!(seen.token, Some(t));
    assert_eq!(seen.cooldown, CooldownState::Idle);

    redis.kill();
    let err = a.observe(CALL).await.unwrap_err();
    assert!(
        matches!(
            err,
            LeaseError::Connection { .. } | LeaseError::Timeout { .. }
        ),
        "{err:?}"
    );
}
