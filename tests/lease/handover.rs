//! Handover on demand: `leasehold step-down` against real `leasehold run` replicas and a real
//! redis-server (to any replica, to a named one, with the leader's subscription blackholed), and
//! the Redis side of it (a request bound to its term, the reservation) against the primitives.
//! A handover to any replica runs on each engine.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use harness::contenders::{lease, unique_lease};
use harness::replica::{FAST, Replica, step_down};
use leasehold::lease::{Acquired, HandoverRequested, Holder, Renewed, Reservation};
use nix::sys::signal::Signal;
use testbed::on_engines;
use testbed::proxy::{Fault, FaultProxy};
use testbed::redis_server::{Engine, RedisServer};
use testbed::wait::wait_for;

const TTL: Duration = Duration::from_millis(1500);
const CALL: Duration = Duration::from_secs(2);
/// The retry period of [`FAST`].
const RETRY: Duration = Duration::from_millis(250);
/// The bound on a wait for a log line that the test knows was written.
pub(super) const WAIT: Duration = Duration::from_secs(5);

fn args() -> Vec<&'static str> {
    let mut args = FAST.to_vec();
    args.push("--no-data-loss-cooldown");
    args
}

pub(super) fn spawn(url: &str, lease: &str, names: &[&str]) -> Vec<Replica> {
    spawn_with(url, lease, names, &args())
}

fn spawn_with(url: &str, lease: &str, names: &[&str], args: &[&str]) -> Vec<Replica> {
    names
        .iter()
        .map(|name| Replica::spawn(url, lease, name, args, &[]))
        .collect()
}

/// The one ready replica (readiness `leader`), waiting for there to be exactly one.
pub(super) fn leader_of(replicas: &[Replica]) -> usize {
    wait_for("exactly one leader", Duration::from_secs(10), || {
        let ready: Vec<usize> = (0..replicas.len())
            .filter(|&i| replicas[i].is_ready())
            .collect();
        (ready.len() == 1).then(|| ready[0])
    })
}

/// A replica that leads, then frozen (it neither hands over nor takes the lease back, so the
/// request stays stored), and `step-down --wait <wait>` asked of it on a thread of its own, once
/// its request is stored; the lease key.
pub(super) fn asked_of_a_frozen_leader(
    redis: &RedisServer,
    name: &str,
    wait: &'static str,
) -> (
    Vec<Replica>,
    std::thread::JoinHandle<(i32, serde_json::Value, String)>,
    String,
) {
    let (replicas, lease) = frozen_leader(redis, name);
    let (url, asked_lease) = (redis.url(), lease.clone());
    let asked = std::thread::spawn(move || step_down(&url, &asked_lease, &["--wait", wait]));
    let key = format!("leasehold:{{{lease}}}");
    wait_for("the request to be stored", WAIT, || {
        (redis.cmd::<i64>(&["EXISTS", &format!("{key}:handover")]) == 1).then_some(())
    });
    (replicas, asked, key)
}

/// A replica that leads a lease named after `name`, then frozen; the lease.
pub(super) fn frozen_leader(redis: &RedisServer, name: &str) -> (Vec<Replica>, String) {
    let lease = unique_lease(name);
    let replicas = spawn(&redis.url(), &lease, &["web-a"]);
    leader_of(&replicas);
    replicas[0].signal(Signal::SIGSTOP);
    (replicas, lease)
}

fn token_of(replica: &Replica) -> u64 {
    replica.leader()["token"]
        .as_u64()
        .expect("a leader's token")
}

on_engines!(#[test] fn step_down_hands_over_to_another_replica_and_the_old_leader_goes_last);
fn step_down_hands_over_to_another_replica_and_the_old_leader_goes_last(engine: Engine) {
    let redis = RedisServer::start_on(engine);
    let lease = unique_lease("handover-any");
    let mut replicas = spawn(&redis.url(), &lease, &["web-a", "web-b", "web-c"]);
    let old = leader_of(&replicas);
    let old_token = token_of(&replicas[old]);
    let (code, json, stderr) = step_down(&redis.url(), &lease, &["--wait", "10s"]);
    assert_eq!(code, 0, "step-down failed: {stderr}\n{json}");
    let new = leader_of(&replicas);
    assert_ne!(new, old);
    assert_eq!(json["handed_over"], true, "{json}");
    assert_eq!(json["previous"], replicas[old].identity.as_str(), "{json}");
    assert_eq!(json["leader"], replicas[new].identity.as_str(), "{json}");
    let new_token = json["token"].as_u64().expect("new token");
    assert!(new_token > old_token, "{new_token} after {old_token}");
    eprintln!("handover to any replica took {} ms", json["waited_ms"]);
    let stepped = replicas[old].wait_events("stepped down", 1, WAIT);
    assert_eq!(stepped.last().expect("a step-down")["reason"], "handover");
    assert_eq!(
        replicas[old]
            .wait_events("handed over; holding off before contending again", 1, WAIT)
            .len(),
        1
    );
    // The new leader goes away at once: the replica that is not holding off goes first, the one
    // that handed over a moment ago yields to it.
    let third = 3 - old - new;
    replicas[new].signal(Signal::SIGTERM);
    assert_eq!(replicas[new].wait_exit(Duration::from_secs(10)), 0);
    let next = wait_for("the next leader", Duration::from_secs(5), || {
        [old, third].into_iter().find(|&i| replicas[i].is_ready())
    });
    assert_eq!(
        next, third,
        "the replica holding off took the lease before the one that was not"
    );
    // And once that one goes too, the replica holding off is the only one left: it takes the
    // lease instead of leaving it leaderless for the rest of its hold-off.
    replicas[third].signal(Signal::SIGTERM);
    assert_eq!(replicas[third].wait_exit(Duration::from_secs(10)), 0);
    wait_for(
        "the replica that handed over to lead",
        Duration::from_secs(10),
        || replicas[old].is_ready().then_some(()),
    );
}

/// Three replicas with a hold-off long enough that waiting it out shows: the `leasehold step-down`
/// calls below are given much less than a lease duration to see the next leader.
const SLOW: [&str; 7] = [
    "--lease-duration",
    "6s",
    "--renew-deadline",
    "4s",
    "--retry-period",
    "1s",
    "--no-data-loss-cooldown",
];

#[test]
fn step_down_to_a_replica_that_handed_over_a_moment_ago_gives_it_the_term() {
    let redis = RedisServer::start();
    let lease = unique_lease("handover-back");
    let names = ["web-a", "web-b", "web-c"];
    let replicas = spawn_with(&redis.url(), &lease, &names, &SLOW);
    let first = leader_of(&replicas);
    let (code, json, stderr) = step_down(&redis.url(), &lease, &["--wait", "10s"]);
    assert_eq!(code, 0, "{stderr}\n{json}");
    // Handed back at once: the named replica holds off, yet takes what is handed to it.
    let (code, json, stderr) = step_down(
        &redis.url(),
        &lease,
        &["--to", names[first], "--wait", "3s"],
    );
    assert_eq!(code, 0, "{stderr}\n{json}");
    assert_eq!(json["leader"], names[first], "{json}");
    assert_eq!(leader_of(&replicas), first);
}

#[test]
fn rotating_the_leader_with_step_down_never_waits_out_a_hold_off() {
    let redis = RedisServer::start();
    let lease = unique_lease("handover-rotate");
    let names = ["web-a", "web-b", "web-c"];
    let replicas = spawn_with(&redis.url(), &lease, &names, &SLOW);
    let mut leader = leader_of(&replicas);
    // Round three finds both followers holding off (each handed over in the rounds before):
    // one of them takes the lease rather than leave it leaderless for the rest of a lease
    // duration (6 s), and never the replica that has just handed over.
    for round in 0..4 {
        let (code, json, stderr) = step_down(&redis.url(), &lease, &["--wait", "3s"]);
        assert_eq!(code, 0, "round {round}: {stderr}\n{json}");
        assert_eq!(json["handed_over"], true, "round {round}: {json}");
        assert_ne!(json["leader"], names[leader], "round {round}: {json}");
        eprintln!("round {round}: handover took {} ms", json["waited_ms"]);
        leader = leader_of(&replicas);
    }
}
#[test]
fn step_down_to_a_named_replica_gives_it_the_next_term() {
    let redis = RedisServer::start();
    let lease = unique_lease("handover-to");
    let names = ["web-a", "web-b", "web-c", "web-d"];
    let replicas = spawn(&redis.url(), &lease, &names);
    // Four times, to the followers in turn: two other followers contend every time, so that
    // the named one winning by chance every round would take luck four times (1 in 81). From
    // the second round on, the named replica may be one that handed over in a round before.
    let mut old = leader_of(&replicas);
    // Each replica's step-downs so far: the line of this round's is the next one.
    let mut steps = [0; 4];
    for round in 0..4 {
        let followers: Vec<usize> = (0..names.len()).filter(|&i| i != old).collect();
        let to = followers[round % followers.len()];
        let (code, json, stderr) =
            step_down(&redis.url(), &lease, &["--to", names[to], "--wait", "10s"]);
        assert_eq!(code, 0, "round {round}: {stderr}\n{json}");
        assert_eq!(json["leader"], names[to], "round {round}: {json}");
        assert_eq!(leader_of(&replicas), to, "round {round}");
        steps[old] += 1;
        let reserved = replicas[old].wait_events("stepped down", steps[old], WAIT);
        assert_eq!(
            reserved.last().expect("a step-down")["detail"],
            format!("handing over to {}", names[to])
        );
        eprintln!(
            "round {round}: handover to {} took {} ms",
            names[to], json["waited_ms"]
        );
        old = to;
    }
}

#[test]
fn step_down_names_the_leader_itself_as_bad_input() {
    let redis = RedisServer::start();
    let lease = unique_lease("handover-self");
    let replicas = spawn(&redis.url(), &lease, &["web-a"]);
    leader_of(&replicas);
    let (code, _, stderr) = step_down(&redis.url(), &lease, &["--to", "web-a"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--to `web-a`") && stderr.contains("is the leader already"),
        "{stderr}"
    );
    assert!(
        replicas[0].is_ready(),
        "the leader must not have stepped down"
    );
}

/// A lease key that never expires was not written by leasehold: there is no leader to ask, and
/// `step-down` says so at once instead of storing a request and waiting out `--wait`.
#[test]
fn step_down_refuses_a_lease_key_that_leasehold_did_not_write() {
    let redis = RedisServer::start();
    let lease = unique_lease("handover-foreign");
    let key = format!("leasehold:{{{lease}}}");
    redis.cmd::<String>(&["SET", &key, "garbage"]);
    let (code, json, stderr) = step_down(&redis.url(), &lease, &["--wait", "30s"]);
    assert_eq!(code, 1, "{stderr}\n{json}");
    assert!(stderr.contains("never expires"), "{stderr}");
    let request: i64 = redis.cmd(&["EXISTS", &format!("{key}:handover")]);
    assert_eq!(
        request, 0,
        "a handover request was stored for a key nobody holds"
    );
    // With an expiry it is no replica's term either (no owner id and token): nobody to ask. It
    // was asked all the same, and said to lead.
    redis.cmd::<String>(&["SET", &key, "cron-lock", "PX", "60000"]);
    let (code, json, stderr) = step_down(&redis.url(), &lease, &["--wait", "2s"]);
    assert_eq!(code, 1, "{stderr}\n{json}");
    assert!(
        stderr.contains("holds `cron-lock`, no term of a replica"),
        "{stderr}"
    );
    let request: i64 = redis.cmd(&["EXISTS", &format!("{key}:handover")]);
    assert_eq!(
        request, 0,
        "a handover request was stored for a foreign value"
    );
}

/// A value without expiry written over the lease key during the wait is nobody's term: not a
/// handover (it used to print `garbage leads` and exit 0).
#[test]
fn step_down_does_not_take_a_key_without_expiry_for_the_successor() {
    let redis = RedisServer::start();
    let (replicas, asked, key) = asked_of_a_frozen_leader(&redis, "handover-overwritten", "5s");
    redis.cmd::<String>(&["SET", &key, "garbage"]);
    let (code, json, stderr) = asked.join().expect("step-down ran");
    replicas[0].signal(Signal::SIGCONT);
    assert_eq!(code, 1, "{stderr}\n{json}");
    assert_eq!(json["handed_over"], false, "{json}");
    assert_eq!(json["leader"], serde_json::Value::Null, "{json}");
    assert!(stderr.contains("never expires"), "{stderr}");
}

/// The wait is driven by the old term's release: while the leader has not released (frozen
/// here), `step-down` looks about once a second, not twenty times.
#[test]
fn step_down_looks_about_once_a_second_until_it_hears_the_release() {
    let redis = RedisServer::start();
    let (replicas, lease) = frozen_leader(&redis, "handover-quiet");
    let before = redis.calls("evalsha");
    let (code, json, stderr) = step_down(&redis.url(), &lease, &["--wait", "3s"]);
    let sent = redis.calls("evalsha") - before;
    replicas[0].signal(Signal::SIGCONT);
    assert_eq!(code, 1, "{stderr}\n{json}");
    assert!(sent <= 8, "{sent} scripts in a wait of 3 s");
}

#[test]
fn step_down_times_out_with_exit_code_1_when_nobody_else_can_lead() {
    let redis = RedisServer::start();
    let lease = unique_lease("handover-alone");
    let replicas = spawn(&redis.url(), &lease, &["web-a"]);
    leader_of(&replicas);
    let (code, json, stderr) = step_down(&redis.url(), &lease, &["--wait", "1s"]);
    assert_eq!(code, 1, "{stderr}\n{json}");
    assert_eq!(json["handed_over"], false, "{json}");
    assert!(stderr.contains("within --wait 1s"), "{stderr}");
}

#[test]
fn a_handover_reaches_a_leader_whose_subscription_is_blackholed_within_about_a_retry_period() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(SocketAddr::from(([127, 0, 0, 1], redis.port())));
    let lease = unique_lease("handover-blackholed");
    // Only the leader goes through the proxy; it leads before the followers start.
    let mut replicas = vec![Replica::spawn(&proxy.url(), &lease, "web-a", &args(), &[])];
    assert_eq!(leader_of(&replicas), 0);
    replicas.extend(spawn(&redis.url(), &lease, &["web-b", "web-c"]));
    let pubsub = wait_for("the leader's subscription", Duration::from_secs(5), || {
        redis
            .subscribed_client_ports(&proxy.upstream_ports())
            .first()
            .copied()
    });
    // Its pub/sub link alone goes silent: the nudge is lost, the renewals still get through.
    proxy.set_one(pubsub, Fault::Blackhole);
    let (code, json, stderr) = step_down(&redis.url(), &lease, &["--wait", "10s"]);
    assert_eq!(code, 0, "{stderr}\n{json}");
    assert_ne!(json["leader"], "web-a", "{json}");
    let took = Duration::from_millis(json["waited_ms"].as_u64().expect("waited_ms"));
    eprintln!("handover with the leader's subscription blackholed took {took:?}");
    // The request waits for the next renewal (at most a retry period), then the release and the
    // followers' wake-up; the rest is slack for a loaded machine.
    assert!(took < RETRY + Duration::from_millis(1500), "{took:?}");
    assert_eq!(
        replicas[0]
            .wait_events("stepped down", 1, WAIT)
            .last()
            .expect("a step-down")["reason"],
        "handover"
    );
}

fn holder_of(observed: Option<Holder>) -> Holder {
    observed.expect("a holder")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_for_an_earlier_term_does_not_end_a_later_one() {
    let redis = RedisServer::start();
    let name = unique_lease("handover-stale");
    let a = lease(&redis.url(), &name, "web-a", false);
    let asker = lease(&redis.url(), &name, "operator", false);
    let Acquired::Leader(first) = a.acquire(TTL, CALL).await.unwrap() else {
        panic!("the first term")
    };
    let term1 = holder_of(asker.observe(CALL).await.unwrap().holder);
    assert_eq!(term1.token, Some(first.token));
    // The request for term 1 is stored while term 1 holds; term 1 then ends without seeing it
    // (a release that does not name it cannot clear it), and the same process wins term 2.
    assert_eq!(
        asker
            .request_handover(&term1, None, Duration::from_secs(30), CALL)
            .await
            .unwrap(),
        HandoverRequested::Requested
    );
    let key = a.keys().handover.clone();
    redis.cmd::<()>(&["DEL", &a.keys().lease]);
    let Acquired::Leader(second) = a.acquire(TTL, CALL).await.unwrap() else {
        panic!("the second term")
    };
    assert!(second.token > first.token);
    let stored: Option<String> = redis.cmd(&["GET", &key]);
    assert!(
        stored.is_some(),
        "the stale request is still there to be ignored"
    );
    // Term 2's renewals are plain renewals: the request names term 1.
    for _ in 0..3 {
        let renewed = a.renew(second.token, TTL, CALL).await.unwrap();
        assert!(matches!(renewed, Renewed::Held(_)), "{renewed:?}");
    }
    // A request for term 1 made now stores nothing.
    assert_eq!(
        asker
            .request_handover(&term1, None, Duration::from_secs(30), CALL)
            .await
            .unwrap(),
        HandoverRequested::TermEnded
    );
    // One for term 2 is answered by term 2's next renewal.
    let term2 = holder_of(asker.observe(CALL).await.unwrap().holder);
    asker
        .request_handover(&term2, Some("web-b"), Duration::from_secs(30), CALL)
        .await
        .unwrap();
    let renewed = a.renew(second.token, TTL, CALL).await.unwrap();
    assert!(
        matches!(&renewed, Renewed::HandoverRequested { to: Some(to), .. } if to == "web-b"),
        "{renewed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_lets_only_the_named_replica_acquire_then_anyone() {
    let redis = RedisServer::start();
    let name = unique_lease("handover-reserved");
    let a = lease(&redis.url(), &name, "web-a", false);
    let b = lease(&redis.url(), &name, "web-b", false);
    let c = lease(&redis.url(), &name, "web-c", false);
    let Acquired::Leader(grant) = a.acquire(TTL, CALL).await.unwrap() else {
        panic!("a leads")
    };
    let reserve = Reservation {
        identity: "web-c".into(),
        duration: Duration::from_millis(400),
    };
    a.release_handing_over(grant.token, Some(&reserve), CALL)
        .await
        .unwrap();
    match b.acquire(TTL, CALL).await.unwrap() {
        Acquired::Reserved {
            identity,
            remaining,
        } => {
            assert_eq!(identity, "web-c");
            assert!(
                remaining.is_some_and(|r| r <= reserve.duration),
                "{remaining:?}"
            );
        }
        other => panic!("b must find the term reserved, got {other:?}"),
    }
    assert!(matches!(
        a.acquire(TTL, CALL).await.unwrap(),
        Acquired::Reserved { .. }
    ));
    let Acquired::Leader(c_term) = c.acquire(TTL, CALL).await.unwrap() else {
        panic!("the named replica acquires")
    };
    // Its win clears the reservation: after c releases, b may lead at once.
    c.release(c_term.token, CALL).await.unwrap();
    assert!(matches!(
        b.acquire(TTL, CALL).await.unwrap(),
        Acquired::Leader(_)
    ));
    // Unclaimed, a reservation runs out and anyone may lead.
    let b_token = match b.observe(CALL).await.unwrap().holder {
        Some(h) => h.token.expect("token"),
        None => panic!("b leads"),
    };
    b.release_handing_over(b_token, Some(&reserve), CALL)
        .await
        .unwrap();
    assert!(matches!(
        a.acquire(TTL, CALL).await.unwrap(),
        Acquired::Reserved { .. }
    ));
    let waited = Instant::now();
    let granted = loop {
        match a.acquire(TTL, CALL).await.unwrap() {
            Acquired::Leader(g) => break g,
            Acquired::Reserved {
                remaining: Some(remaining),
                ..
            } => tokio::time::sleep(remaining).await,
            other => panic!("{other:?}"),
        }
        assert!(waited.elapsed() < Duration::from_secs(5), "never free");
    };
    assert!(granted.token > b_token);
}
