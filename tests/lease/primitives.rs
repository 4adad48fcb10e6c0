//! The lease primitives against a real redis-server: atomic acquire with fencing, compare-and-set
//! renew and release, the release channel and the data-loss cooldown (typed errors in
//! `typed_errors.rs`). What reads the server (acquire, renew and release, tokens from `TIME`,
//! the run id that tells a restart, the channel) runs on each engine.

use std::time::Duration;

use futures_util::StreamExt;
use harness::contenders::{lease, unique_lease};
use leasehold::lease::{
    Acquired, CooldownState, FencingToken, Heard, LeaseError, RedisLease, Released, Renewal,
    Renewed,
};
use testbed::on_engines;
use testbed::proxy::{Fault, FaultProxy};
use testbed::redis_server::{Engine, Persistence, RedisServer};
use testbed::wait::eventually;

pub(crate) const TTL: Duration = Duration::from_millis(1000);
pub(crate) const CALL: Duration = Duration::from_secs(2);

fn server_time_us(redis: &RedisServer) -> u64 {
    let t: Vec<u64> = redis.cmd(&["TIME"]);
    t[0] * 1_000_000 + t[1]
}

pub(crate) async fn must_lead(lease: &RedisLease) -> FencingToken {
    match lease.acquire(TTL, CALL).await.unwrap() {
        Acquired::Leader(grant) => grant.token,
        other => panic!("expected to lead, got {other:?}"),
    }
}

on_engines!(#[tokio::test] async fn only_the_owner_can_renew_or_release);
async fn only_the_owner_can_renew_or_release(engine: Engine) {
    let redis = RedisServer::start_on(engine);
    let name = unique_lease("owner");
    let a = lease(&redis.url(), &name, "pod-a", false);
    let b = lease(&redis.url(), &name, "pod-b", false);

    let t1 = must_lead(&a).await;
    match b.acquire(TTL, CALL).await.unwrap() {
        Acquired::HeldBy(holder) => {
            assert_eq!(holder.owner, a.owner().as_str());
            assert_eq!(holder.identity(), "pod-a");
            assert_eq!(holder.token, Some(t1));
            let left = holder.remaining.expect("a TTL");
            assert!(left <= TTL && left > TTL / 2, "{left:?}");
        }
        other => panic!("b must lose the race, got {other:?}"),
    }
    assert!(matches!(
        b.renew(t1, TTL, CALL).await.unwrap(),
        Renewed::NotHeld { .. }
    ));
    assert_eq!(b.release(t1, CALL).await.unwrap(), Released::NotHeld);
    let stored: String = redis.cmd(&["GET", &a.keys().lease]);
    assert_eq!(
        stored,
        a.owner().term(t1),
        "b's release must not touch a's lease"
    );

    assert!(matches!(
        a.renew(t1, TTL, CALL).await.unwrap(),
        Renewed::Held(_)
    ));
    assert_eq!(a.release(t1, CALL).await.unwrap(), Released::Released);
    let t2 = must_lead(&b).await;
    assert!(t2 > t1, "{t2} > {t1}");
}

on_engines!(#[tokio::test] async fn a_renewal_puts_back_a_deleted_lease_but_not_an_expired_one);
/// A renewal puts back a lease key that vanished before its time (evicted, deleted), never one
/// that expired: a renewal queued behind a frozen Redis reached it after the term's expiry, put
/// the lease back for a holder that had stepped down, and the other replicas waited it out while
/// that holder took the next term.
async fn a_renewal_puts_back_a_deleted_lease_but_not_an_expired_one(engine: Engine) {
    let redis = RedisServer::start_on(engine);
    let a = lease(&redis.url(), &unique_lease("put-back"), "pod-a", false);
    let t = must_lead(&a).await;
    let _: i64 = redis.cmd(&["DEL", &a.keys().lease]);
    assert!(matches!(
        a.renew(t, TTL, CALL).await.unwrap(),
        Renewed::Held(Renewal { repaired: true, .. })
    ));
    let short = Duration::from_millis(50);
    let renewed_at = server_time_us(&redis);
    assert!(matches!(
        a.renew(t, short, CALL).await.unwrap(),
        Renewed::Held(Renewal {
            repaired: false,
            ..
        })
    ));
    // Redis's clock past the term's expiry (with a margin for the key's millisecond expiry).
    let expired = renewed_at + 60_000;
    testbed::wait::wait_for("the term to expire", Duration::from_secs(5), || {
        (server_time_us(&redis) > expired).then_some(())
    });
    assert!(matches!(
        a.renew(t, TTL, CALL).await.unwrap(),
        Renewed::NotHeld { .. }
    ));
    let left: i64 = redis.cmd(&["EXISTS", &a.keys().lease]);
    assert_eq!(left, 0, "the expired lease was put back");
}

on_engines!(#[tokio::test] async fn a_renewal_puts_back_a_lease_lost_with_the_data_while_a_follower_names_it);
/// After Redis lost its data, a follower that still observes the holder names its term in the
/// state record with its expiry unknown: the holder's renewal puts the key back (same term), as
/// it does for a key evicted or deleted.
async fn a_renewal_puts_back_a_lease_lost_with_the_data_while_a_follower_names_it(engine: Engine) {
    let redis = RedisServer::start_on(engine);
    let name = unique_lease("lost-data");
    let (a, b) = (
        lease(&redis.url(), &name, "pod-a", false),
        lease(&redis.url(), &name, "pod-b", false),
    );
    let t = must_lead(&a).await;
    let Acquired::HeldBy(holder) = b.acquire(TTL, CALL).await.unwrap() else {
        panic!("b must find a's term");
    };
    let _: () = redis.cmd(&["FLUSHALL"]);
    let kept = b
        .acquire_observing(TTL, CALL, Some(&holder), None)
        .await
        .unwrap();
    assert!(matches!(kept, Acquired::HeldBy(_)), "{kept:?}");
    let renewed = a.renew(t, TTL, CALL).await.unwrap();
    assert!(
        matches!(renewed, Renewed::Held(Renewal { repaired: true, .. })),
        "{renewed:?}"
    );
}

on_engines!(#[tokio::test] async fn renew_restarts_the_ttl_and_a_sent_at_precedes_the_reply);
async fn renew_restarts_the_ttl_and_a_sent_at_precedes_the_reply(engine: Engine) {
    let redis = RedisServer::start_on(engine);
    let a = lease(&redis.url(), &unique_lease("renew"), "pod-a", false);
    let t = must_lead(&a).await;
    redis.cmd::<i64>(&["PEXPIRE", &a.keys().lease, "100"]);
    let before = a.clock().now();
    let Renewed::Held(Renewal { sent_at, .. }) = a.renew(t, TTL, CALL).await.unwrap() else {
        panic!("renew must hold");
    };
    assert!(sent_at >= before && sent_at <= a.clock().now());
    let pttl: i64 = redis.cmd(&["PTTL", &a.keys().lease]);
    assert!(pttl > 900 && pttl <= 1000, "PTTL {pttl}");
}

on_engines!(#[tokio::test] async fn tokens_are_floored_at_the_server_clock_and_survive_data_loss);
async fn tokens_are_floored_at_the_server_clock_and_survive_data_loss(engine: Engine) {
    let mut redis = RedisServer::start_on(engine);
    let name = unique_lease("floor");
    let a = lease(&redis.url(), &name, "pod-a", false);
    let before = server_time_us(&redis);
    let t1 = must_lead(&a).await;
    assert!(
        t1.0 > before,
        "token {t1} must be above the server time {before}"
    );
    assert_eq!(a.release(t1, CALL).await.unwrap(), Released::Released);
    let t2 = must_lead(&a).await;
    assert!(t2 > t1, "{t2} > {t1}");

    redis.restart_empty();
    let fence_exists: i64 = redis.cmd(&["EXISTS", &a.keys().fence]);
    assert_eq!(fence_exists, 0, "the restart lost the counter");
    let t3 = must_lead(&a).await;
    assert!(
        t3 > t2,
        "after data loss the token still grows: {t3} > {t2}"
    );
}

on_engines!(#[tokio::test] async fn a_fresh_redis_cools_down_for_one_lease_duration);
async fn a_fresh_redis_cools_down_for_one_lease_duration(engine: Engine) {
    let redis = RedisServer::start_on(engine);
    let name = unique_lease("cooldown");
    let a = lease(&redis.url(), &name, "pod-a", true);
    let b = lease(&redis.url(), &name, "pod-b", true);

    match a.acquire(TTL, CALL).await.unwrap() {
        Acquired::CoolingDown { remaining, started } => {
            assert!(started, "the first acquire finds the state record missing");
            assert_eq!(remaining, TTL);
        }
        other => panic!("a fresh redis must cool down, got {other:?}"),
    }
    match b.acquire(TTL, CALL).await.unwrap() {
        Acquired::CoolingDown { remaining, started } => {
            assert!(!started);
            assert!(remaining <= TTL && remaining > Duration::ZERO);
        }
        other => panic!("b must see the same cooldown, got {other:?}"),
    }
    assert!(matches!(
        b.observe(CALL).await.unwrap().cooldown,
        CooldownState::Running(_)
    ));
    let token = testbed::wait::eventually("the cooldown to end", TTL * 3, || async {
        match b.acquire(TTL, CALL).await.unwrap() {
            Acquired::Leader(grant) => Some(grant.token),
            Acquired::CoolingDown { .. } => None,
            Acquired::HeldBy(h) => panic!("nobody may lead during the cooldown, yet {h:?} does"),
            Acquired::Reserved { identity, .. } => panic!("no handover reserved it for {identity}"),
            Acquired::NewerProtocol(p) => panic!("nobody wrote {p}"),
        }
    })
    .await;
    assert!(token.0 > 0);
    assert_eq!(b.observe(CALL).await.unwrap().cooldown, CooldownState::Idle);
}

on_engines!(#[tokio::test] async fn a_restart_that_kept_the_data_still_cools_down);
async fn a_restart_that_kept_the_data_still_cools_down(engine: Engine) {
    // AOF with fsync always keeps the state record, but another redis process answers now: an old
    // leader may believe in a lease this dataset never saw, so the cooldown starts again.
    let mut redis = RedisServer::builder()
        .engine(engine)
        .persistence(Persistence::AofAlways)
        .start();
    let name = unique_lease("restart-kept");
    let a = lease(&redis.url(), &name, "pod-a", false);
    let t = must_lead(&a).await;
    assert_eq!(a.release(t, CALL).await.unwrap(), Released::Released);
    let marker_before: String = redis.cmd(&["GET", &a.keys().state]);

    redis.restart();
    let marker_after: String = redis.cmd(&["GET", &a.keys().state]);
    assert_eq!(marker_before, marker_after, "the AOF kept the state record");
    let b = lease(&redis.url(), &name, "pod-b", true);
    match b.acquire(TTL, CALL).await.unwrap() {
        Acquired::CoolingDown { started: true, .. } => {}
        other => panic!("a restarted redis must cool down, got {other:?}"),
    }
}

#[tokio::test]
async fn the_holder_takes_back_its_own_lease_under_a_new_token() {
    let redis = RedisServer::start();
    let a = lease(&redis.url(), &unique_lease("own"), "pod-a", false);
    let t1 = must_lead(&a).await;
    let t2 = must_lead(&a).await;
    assert!(t2 > t1);
}

on_engines!(#[tokio::test] async fn release_is_announced_on_the_channel);
async fn release_is_announced_on_the_channel(engine: Engine) {
    let redis = RedisServer::start_on(engine);
    let name = unique_lease("channel");
    let a = lease(&redis.url(), &name, "pod-a", false);
    let b = lease(&redis.url(), &name, "pod-b", false);
    let mut releases = b.subscribe_releases(CALL).await.unwrap();
    let t = must_lead(&a).await;
    assert_eq!(a.release(t, CALL).await.unwrap(), Released::Released);
    let heard = tokio::time::timeout(Duration::from_secs(2), releases.next())
        .await
        .expect("a release message within 2 s")
        .expect("stream open");
    let Heard::Release(release) = heard else {
        panic!("a release, not {heard:?}");
    };
    assert_eq!(
        release.term,
        a.owner().term(t),
        "the released term is announced: {release:?}"
    );
    // A release that was not ours announces nothing.
    assert_eq!(a.release(t, CALL).await.unwrap(), Released::NotHeld);
    assert!(
        tokio::time::timeout(Duration::from_millis(200), releases.next())
            .await
            .is_err(),
        "no message for a release that changed nothing"
    );
}

on_engines!(#[tokio::test] async fn a_renewal_counts_the_replicas_listening_on_the_release_channel);
async fn a_renewal_counts_the_replicas_listening_on_the_release_channel(engine: Engine) {
    let redis = RedisServer::start_on(engine);
    let name = unique_lease("listeners");
    let a = lease(&redis.url(), &name, "pod-a", false);
    let b = lease(&redis.url(), &name, "pod-b", false);
    let t = must_lead(&a).await;
    let listeners = |renewed: Renewed| match renewed {
        Renewed::Held(renewal) => renewal.listeners,
        other => panic!("renew must hold: {other:?}"),
    };
    assert_eq!(listeners(a.renew(t, TTL, CALL).await.unwrap()), Some(0));
    let _own = a.subscribe_releases(CALL).await.unwrap();
    assert_eq!(listeners(a.renew(t, TTL, CALL).await.unwrap()), Some(1));
    let follower = b.subscribe_releases(CALL).await.unwrap();
    assert_eq!(listeners(a.renew(t, TTL, CALL).await.unwrap()), Some(2));
    drop(follower);
    let a = &a;
    let closed = move || async move {
        (listeners(a.renew(t, TTL, CALL).await.unwrap()) == Some(1)).then_some(())
    };
    testbed::wait::eventually(
        "the follower's subscription to close",
        Duration::from_secs(5),
        closed,
    )
    .await;
}

on_engines!(#[tokio::test] async fn a_try_with_a_probe_is_heard_on_its_own_subscription_and_nobody_elses);
async fn a_try_with_a_probe_is_heard_on_its_own_subscription_and_nobody_elses(engine: Engine) {
    let redis = RedisServer::start_on(engine);
    let name = unique_lease("probe");
    let a = lease(&redis.url(), &name, "pod-a", false);
    let b = lease(&redis.url(), &name, "pod-b", false);
    let mut mine = b.subscribe_releases(CALL).await.unwrap();
    let mut theirs = a.subscribe_releases(CALL).await.unwrap();
    assert!(
        mine.probes() && theirs.probes(),
        "the probe channels are subscribed"
    );
    must_lead(&a).await;
    // b's try loses, and its probe comes back to b alone, whatever the reply.
    let lost = b
        .acquire_observing(TTL, CALL, None, Some(41))
        .await
        .unwrap();
    assert!(matches!(lost, Acquired::HeldBy(_)), "{lost:?}");
    let heard = tokio::time::timeout(Duration::from_secs(2), mine.next())
        .await
        .expect("the probe within 2 s");
    assert_eq!(heard, Some(Heard::Probe(41)));
    assert!(
        tokio::time::timeout(Duration::from_millis(200), theirs.next())
            .await
            .is_err(),
        "another owner's subscription hears nothing of it"
    );
    // A try without a probe publishes nothing.
    b.acquire_observing(TTL, CALL, None, None).await.unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(200), mine.next())
            .await
            .is_err(),
        "no probe, nothing heard"
    );
}

#[tokio::test]
async fn a_subscription_answers_ping_and_a_paused_redis_does_not() {
    let redis = RedisServer::start();
    let a = lease(&redis.url(), &unique_lease("ping"), "pod-a", false);
    let releases = a.subscribe_releases(CALL).await.unwrap();
    releases.ping(CALL).await.unwrap();
    redis.pause();
    let err = releases.ping(Duration::from_millis(200)).await.unwrap_err();
    redis.resume();
    assert!(
        matches!(err, LeaseError::Timeout { op: "ping", .. }),
        "{err:?}"
    );
}

fn cached_scripts(redis: &RedisServer) -> String {
    let info: String = redis.cmd(&["INFO", "memory"]);
    info.lines()
        .find_map(|l| l.strip_prefix("number_of_cached_scripts:"))
        .expect("number_of_cached_scripts in INFO memory")
        .trim()
        .to_owned()
}

on_engines!(#[tokio::test] async fn scripts_are_reloaded_after_script_flush);
async fn scripts_are_reloaded_after_script_flush(engine: Engine) {
    let redis = RedisServer::start_on(engine);
    let a = lease(&redis.url(), &unique_lease("flush"), "pod-a", false);
    let t = must_lead(&a).await;
    redis.cmd::<String>(&["SCRIPT", "FLUSH"]);
    assert_eq!(cached_scripts(&redis), "0");
    assert!(matches!(
        a.renew(t, TTL, CALL).await.unwrap(),
        Renewed::Held(_)
    ));
    assert_eq!(
        cached_scripts(&redis),
        "1",
        "renew got NOSCRIPT and loaded itself again"
    );
    assert!(matches!(
        a.renew(t, TTL, CALL).await.unwrap(),
        Renewed::Held(_)
    ));
}

/// A call its caller gave up on (a `select!` or a timeout around it) may have run, and its reply
/// is on the way: each later call must still read its own reply, not that one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_its_caller_dropped_leaves_no_reply_for_the_next_call() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr());
    let a = lease(&proxy.url(), &unique_lease("dropped-call"), "pod-a", false);
    let token = must_lead(&a).await;
    // Both scripts loaded: the calls given up below run on the server, each one round trip.
    let renewed = a.renew(token, TTL, CALL).await;
    assert!(matches!(renewed, Ok(Renewed::Held(_))), "{renewed:?}");
    a.observe(CALL).await.unwrap();
    proxy.set(Fault::DelayReplies(Duration::from_millis(300)));
    let gave_up = Duration::from_millis(50);
    let ran = redis.calls("evalsha");
    let (renewal, observation) = (a.renew(token, TTL, CALL), a.observe(CALL));
    assert!(tokio::time::timeout(gave_up, renewal).await.is_err());
    assert!(tokio::time::timeout(gave_up, observation).await.is_err());
    // Both were sent, and their replies are on their way back.
    eventually("the server to run both", Duration::from_secs(2), || async {
        (redis.calls("evalsha") == ran + 2).then_some(())
    })
    .await;
    proxy.set(Fault::Pass);
    let released = a.release(token, CALL).await;
    assert!(matches!(released, Ok(Released::Released)), "{released:?}");
    let seen = a.observe(CALL).await.unwrap();
    assert!(seen.holder.is_none(), "{seen:?}");
    assert_eq!(seen.token, Some(token));
}
