//! Gray failures (docs/DESIGN.md): one partly sick replica must never cost the group its
//! leader. Real `leasehold run` processes and a real redis-server; the sick replica's link goes
//! through the TCP fault proxy (replies late, replies reset) or its ACL user lacks one
//! permission. Each test starts from the defect as it was seen: a slow replica that took the
//! lease again and again without ever learning it led, a leader refused its renewals that won
//! again at every renew deadline (and later won one term it could not renew), a leader that
//! could not renew that took the next term back ahead of a healthy follower.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use harness::contenders::unique_lease;
use harness::replica::{Replica, TWO_SECOND_TERM};
use leasehold::lease::{LeaseKeys, LeaseName, minimal_acl_rule};
use nix::sys::signal::Signal;
use testbed::proxy::{Fault, FaultProxy};
use testbed::redis_server::RedisServer;
use testbed::wait::{holds_on_every_look, wait_for};

/// TTL 2 s, renew deadline 1.4 s, retry 400 ms, no data-loss cooldown.
const GRAY: [&str; 7] = TWO_SECOND_TERM;

/// The lease duration of [`GRAY`].
const LEASE: Duration = Duration::from_secs(2);

/// The retry period of [`GRAY`].
const GRAY_RETRY: Duration = Duration::from_millis(400);

/// Room for a loaded machine to start a process and for a log line to arrive, on top of a bound
/// that the design gives.
const SLACK: Duration = Duration::from_secs(1);

fn proxy_to(redis: &RedisServer) -> FaultProxy {
    FaultProxy::start(SocketAddr::from(([127, 0, 0, 1], redis.port())))
}

#[test]
fn a_replica_whose_replies_come_late_leaves_the_lease_to_a_healthy_one() {
    let redis = RedisServer::start();
    let proxy = proxy_to(&redis);
    let lease = unique_lease("gray-slow");
    let mut first = Replica::spawn(&redis.url(), &lease, "first", &GRAY, &[]);
    wait_for("the first replica to lead", 5 * LEASE, || {
        first.is_ready().then_some(())
    });
    // Replies take 600 ms, past the acquire bound of 467 ms; each request runs at once.
    proxy.set(Fault::DelayReplies(Duration::from_millis(600)));
    let slow = Replica::spawn(&proxy.url(), &lease, "slow", &GRAY, &[]);
    slow.wait_events("redis call failed", 1, 5 * LEASE);
    // A rolling update: the healthy leader leaves, and its replacement starts 2 s later.
    first.signal(Signal::SIGTERM);
    assert_eq!(first.wait_exit(5 * LEASE), 0, "{}", first.log_text());
    let freed = Instant::now();
    std::thread::sleep(LEASE);
    let second = Replica::spawn(&redis.url(), &lease, "second", &GRAY, &[]);
    // The goal of DESIGN's "Gray failures": a healthy replica leads within two lease durations of
    // the lease becoming free, and keeps leading; the slow one takes nothing from it.
    let bound = (freed + 2 * LEASE + SLACK).saturating_duration_since(Instant::now());
    wait_for(
        "a healthy replica to lead within two lease durations of the release",
        bound,
        || second.is_ready().then_some(()),
    );
    holds_on_every_look("the healthy replica's leadership", 2 * LEASE, || {
        second.is_ready()
    });
    // The slow replica says why it stays out: `/leader`, readiness, a warning, the metric.
    let view = slow.leader();
    assert_eq!(view["sitting_out"]["reason"], "slow_link", "{view}");
    let (code, words) = slow.get("/readyz").expect("/readyz answers");
    assert_eq!(code, 503);
    assert!(words.contains("sitting out of the election"), "{words}");
    let said = slow.wait_events("sitting out of the election", 1, SLACK);
    assert_eq!(said[0]["level"], "WARN", "{said:?}");
    assert_eq!(
        slow.metric("leasehold_sitting_out{reason=\"slow_link\"}"),
        Some(1.0)
    );
    assert!(
        slow.events("became leader").is_empty(),
        "the slow replica never learns that it leads, so it must not lead"
    );
}

#[test]
fn a_replica_refused_what_renewals_need_never_takes_the_lease_and_a_healthy_one_leads() {
    let redis = RedisServer::start();
    // docs/REFERENCE.md's rule without `+pexpire`: every renewal would be refused, so the acquire,
    // which asks for it before it grants, is refused too.
    let rule = minimal_acl_rule("leasehold:", false).replace(" +pexpire", "");
    redis.set_acl_user("renewless", &rule, "pw");
    let lease = unique_lease("gray-refused");
    let refused_url = format!("redis://renewless:pw@{}", redis.addr());
    // A password goes in the environment, not on the command line.
    let env = [("LEASEHOLD_REDIS_URL", refused_url.as_str())];
    let refused = Replica::spawn_with_env("", &lease, "refused", &GRAY, &[], &env);
    // It says what to fix, at error level.
    let pexpire_refused = || {
        refused.logs().into_iter().find(|l| {
            l["level"] == "ERROR" && l["error"].as_str().unwrap_or("").contains("`pexpire`")
        })
    };
    wait_for("the refusal of pexpire", 5 * LEASE, pexpire_refused);
    let healthy = Replica::spawn(&redis.url(), &lease, "healthy", &GRAY, &[]);
    wait_for("the healthy replica to lead", 2 * LEASE + SLACK, || {
        healthy.is_ready().then_some(())
    });
    holds_on_every_look("the healthy replica's leadership", 3 * LEASE, || {
        healthy.is_ready()
    });
    assert!(
        refused.events("became leader").is_empty(),
        "the refused replica took a term it could not renew:\n{}",
        refused.log_text()
    );
}

/// A permission taken away from a leader that has led longer than one lease duration: its
/// next renewal is refused, and it must not take the lease back at once (it would win the race
/// against a follower whose link is not instant, and be refused again at its first renewal).
#[test]
fn a_leader_refused_its_renewals_after_a_long_term_sits_out_at_once() {
    let redis = RedisServer::start();
    let rule = minimal_acl_rule("leasehold:", false);
    redis.set_acl_user("revoked", &rule, "pw");
    let lease = unique_lease("gray-revoked");
    let revoked_url = format!("redis://revoked:pw@{}", redis.addr());
    let env = [("LEASEHOLD_REDIS_URL", revoked_url.as_str())];
    let revoked = Replica::spawn_with_env("", &lease, "revoked", &GRAY, &[], &env);
    wait_for("the replica to lead", 5 * LEASE, || {
        revoked.is_ready().then_some(())
    });
    let follower_link = proxy_to(&redis);
    follower_link.set(Fault::Delay(Duration::from_millis(20)));
    let healthy = Replica::spawn(&follower_link.url(), &lease, "healthy", &GRAY, &[]);
    healthy.wait_events("following leader", 1, 5 * LEASE);
    // Eight renewals 400 ms apart: the term has outlasted one lease duration.
    revoked.wait_events("renewed", 8, 5 * LEASE);
    redis.set_acl_user("revoked", &rule.replace(" +pexpire", ""), "pw");
    let stepped = revoked.wait_events("stepped down", 1, 5 * LEASE);
    assert_eq!(stepped[0]["reason"], "renew_refused", "{stepped:?}");
    wait_for("the healthy replica to lead", 2 * LEASE + SLACK, || {
        healthy.is_ready().then_some(())
    });
    assert_eq!(
        revoked.events("became leader").len(),
        1,
        "the refused replica took the lease back:\n{}",
        revoked.log_text()
    );
    let sat = revoked.wait_events("sitting out of the election", 1, SLACK);
    assert_eq!(sat[0]["reason"], "renew_refused", "{sat:?}");
}

/// TTL 6 s, renew deadline 4 s, retry 400 ms: room for a second replica to start and follow a
/// term before it expires.
const SIX_SECOND_TERM: [&str; 7] = [
    "--lease-duration",
    "6s",
    "--renew-deadline",
    "4s",
    "--retry-period",
    "400ms",
    "--no-data-loss-cooldown",
];

/// A replica over `proxy` that took the free lease without learning it: it follows a holder
/// whose key the test wrote (3 s), its link's requests take 1.5 s from the last 1.5 s of that
/// key on (when the follower only waits for the expiry), and at the expiry its acquire (bound:
/// 1 s) runs in Redis and wins, unanswered; so does every read it probes with.
fn won_unknowingly(
    redis: &RedisServer,
    proxy: &FaultProxy,
    lease: &str,
    env: &[(&str, &str)],
) -> Replica {
    let keys = LeaseKeys::new("leasehold:", &LeaseName::new(lease).unwrap()).unwrap();
    redis.cmd::<String>(&[
        "SET",
        &keys.lease,
        "someone-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e#1",
        "PX",
        "3000",
    ]);
    let url = if env.is_empty() {
        proxy.url()
    } else {
        String::new()
    };
    let slow = Replica::spawn_with_env(&url, lease, "slow", &SIX_SECOND_TERM, &[], env);
    let following = slow.wait_events("following leader", 1, 5 * LEASE);
    assert_eq!(following[0]["leader"], "someone", "{following:?}");
    wait_for("the holder's key to near its expiry", 5 * LEASE, || {
        (redis.cmd::<i64>(&["PTTL", &keys.lease]) <= 1500).then_some(())
    });
    proxy.set(Fault::DelayRequests(Duration::from_millis(1500)));
    wait_for("the slow replica to win unknowingly", 5 * LEASE, || {
        let holder = redis
            .try_cmd::<Option<String>>(&["GET", &keys.lease])
            .ok()??;
        holder.starts_with("slow-").then_some(())
    });
    assert!(
        slow.events("became leader").is_empty(),
        "the slow replica heard of its win"
    );
    slow
}

/// Stopped while it probes, the replica gives back the term its unanswered acquire won: a
/// healthy follower takes the lease at its release, not when it expires.
#[test]
fn a_replica_stopped_while_its_acquire_is_unanswered_gives_back_the_term_it_won() {
    let redis = RedisServer::start();
    let proxy = proxy_to(&redis);
    let lease = unique_lease("gray-stopped-unanswered");
    let slow = won_unknowingly(&redis, &proxy, &lease, &[]);
    let healthy = Replica::spawn(&redis.url(), &lease, "healthy", &SIX_SECOND_TERM, &[]);
    healthy.wait_events("following leader", 1, 5 * LEASE);
    // Requests 700 ms late: a new connection's handshake is answered within a call's 1 s, so a
    // release is sent (and runs, late: its script is in Redis's cache, as a release before it
    // would have left it); a read on it is still answered too late (1.4 s).
    let release = leasehold::lease::script_source("release").expect("the release script");
    redis.cmd::<String>(&["SCRIPT", "LOAD", &release]);
    proxy.set(Fault::DelayRequests(Duration::from_millis(700)));
    slow.signal(Signal::SIGTERM);
    let led = healthy.wait_events("became leader", 1, 5 * LEASE);
    assert_eq!(
        led[0]["previous_term"],
        "released",
        "the term was left to expire:\n{}",
        slow.log_text()
    );
}

/// While it probes, Redis comes to refuse the replica's password: a refusal is an answer, so the
/// replica stops probing, and its tries say the refusal at error level and back off.
#[test]
fn a_refusal_while_an_acquire_is_unanswered_is_said_and_backed_off() {
    let redis = RedisServer::start();
    let rule = minimal_acl_rule("leasehold:", false);
    redis.set_acl_user("rotated", &rule, "old");
    let proxy = proxy_to(&redis);
    let lease = unique_lease("gray-refused-unanswered");
    let url = format!("redis://rotated:old@{}", proxy.addr());
    let slow = won_unknowingly(
        &redis,
        &proxy,
        &lease,
        &[("LEASEHOLD_REDIS_URL", url.as_str())],
    );
    redis.set_acl_user("rotated", &rule, "new");
    proxy.set(Fault::Pass);
    let said = slow.wait_events(
        "redis refuses leasehold; backing off until it is fixed",
        1,
        5 * LEASE,
    );
    assert_eq!(said[0]["level"], "ERROR", "{said:?}");
    assert_eq!(said[0]["failures"], 1, "{said:?}");
    // Each try after it waits twice as long as the one before: the retry period, then twice
    // it, then four times (with jitter on top). Tries without back-off come every 0.4–0.9 s,
    // so the fourth try's gap (at least 1.6 s) is the one that tells them apart.
    let tries = wait_for("three more refused tries", 10 * LEASE, || {
        let tries: Vec<_> = (2..=4)
            .filter_map(|n| {
                slow.events("redis call failed").into_iter().find(|l| {
                    let error = l["error"].as_str().unwrap_or("");
                    l["failures"] == n
                        && error.contains("while taking the lease")
                        && error.contains("refused the password")
                })
            })
            .collect();
        (tries.len() == 3).then_some(tries)
    });
    let at = |l: &serde_json::Value| Replica::logged_at(l).expect("a timestamp");
    let mut before = at(&said[0]);
    for (n, tried) in (1u32..).zip(&tries) {
        let gap = at(tried).duration_since(before).unwrap_or_default();
        assert!(
            gap >= GRAY_RETRY * (1 << (n - 1)),
            "try {}: {gap:?} after the one before",
            n + 1
        );
        before = at(tried);
    }
}

#[test]
fn a_leader_that_could_not_renew_lets_a_healthy_follower_take_the_next_term() {
    let redis = RedisServer::start();
    let proxy = proxy_to(&redis);
    // The follower's link is healthy but not instant (20 ms each way, far inside every bound):
    // a replica that tries again the moment its term ended would win every such race.
    let follower_link = proxy_to(&redis);
    follower_link.set(Fault::Delay(Duration::from_millis(20)));
    let lease = unique_lease("gray-reset");
    let proxied = Replica::spawn(&proxy.url(), &lease, "proxied", &GRAY, &[]);
    wait_for("the proxied replica to lead", 5 * LEASE, || {
        proxied.is_ready().then_some(())
    });
    let follower = Replica::spawn(&follower_link.url(), &lease, "follower", &GRAY, &[]);
    follower.wait_events("following leader", 1, 5 * LEASE);
    // Every renewal reaches Redis and runs; its reply is reset on the way back.
    proxy.set(Fault::ResetReplies);
    let stepped = proxied.wait_events("stepped down", 1, 5 * LEASE);
    proxy.set(Fault::Pass);
    assert_eq!(stepped[0]["reason"], "renew_deadline_passed", "{stepped:?}");
    wait_for("the healthy follower to lead", 2 * LEASE + SLACK, || {
        follower.is_ready().then_some(())
    });
    holds_on_every_look("the healthy follower's leadership", LEASE, || {
        follower.is_ready()
    });
    assert_eq!(
        proxied.events("became leader").len(),
        1,
        "the replica that could not renew took the next term back:\n{}",
        proxied.log_text()
    );
}

#[test]
fn a_lone_leader_that_could_not_renew_takes_the_next_term_at_once() {
    let redis = RedisServer::start();
    let lease = unique_lease("gray-alone");
    let alone = Replica::spawn(&redis.url(), &lease, "alone", &GRAY, &[]);
    wait_for("the lone replica to lead", 5 * LEASE, || {
        alone.is_ready().then_some(())
    });
    // Its renewals count nobody else on the release channel: no follower to go first.
    alone.wait_events("renewed", 2, 5 * LEASE);
    let (stepped, again) = frozen_past_its_term_leads_again_at_once(&redis, &lease, &alone);
    let gap = Replica::logged_at(&again)
        .zip(Replica::logged_at(&stepped))
        .and_then(|(won, stepped)| won.duration_since(stepped).ok())
        .expect("both events have a timestamp, in order");
    assert!(
        gap < GRAY_RETRY,
        "led again {gap:?} after stepping down: {}",
        alone.log_text()
    );
}

/// Freezes `leader` past its term (a long pause, a starved host): the lease expires in Redis, and
/// the release after the step-down finds nothing to release, so it wakes nobody. With nobody
/// else to go first, holding off (a retry period after its release, which found the term in the
/// state record, a lease duration and a yield when the release goes unanswered) would leave the
/// singleton without a leader for nobody's benefit: it tries again at once. Its step-down and
/// its next `became leader`.
fn frozen_past_its_term_leads_again_at_once(
    redis: &RedisServer,
    lease: &str,
    leader: &Replica,
) -> (serde_json::Value, serde_json::Value) {
    let keys = LeaseKeys::new("leasehold:", &LeaseName::new(lease).unwrap()).unwrap();
    leader.signal(Signal::SIGSTOP);
    wait_for("the leader to stop", 5 * LEASE, || {
        testbed::process_tree::is_stopped(leader.pid().as_raw()).then_some(())
    });
    wait_for("its term to expire in Redis", 5 * LEASE, || {
        (redis.cmd::<i64>(&["EXISTS", &keys.lease]) == 0).then_some(())
    });
    leader.signal(Signal::SIGCONT);
    let stepped = leader.wait_events("stepped down", 1, 5 * LEASE);
    assert_eq!(
        stepped[0]["reason"], "validity_deadline_passed",
        "{stepped:?}"
    );
    let again = wait_for("the leader to lead again", 5 * LEASE, || {
        let won = leader.events("became leader");
        (won.len() == 2).then(|| won[1].clone())
    });
    assert!(
        leader
            .events("could not renew; letting the others try first")
            .is_empty(),
        "{}",
        leader.log_text()
    );
    (stepped[0].clone(), again)
}

/// The arguments of a replica whose candidate check (`check`, run every 100 ms) keeps it out at
/// its first failure.
fn gated(check: &str) -> Vec<String> {
    let mut args: Vec<String> = GRAY.iter().map(|a| a.to_string()).collect();
    for arg in [
        "--candidate-check-period",
        "100ms",
        "--candidate-check-timeout",
        "100ms",
        "--candidate-check-failure-threshold",
        "1",
        "--candidate-check-command",
        check,
    ] {
        args.push(arg.to_owned());
    }
    args
}

/// A leader whose fellow replicas are all kept out (their candidate check fails) has nobody to
/// go first after a term it could not renew: a replica out of the election does not listen on
/// the release channel, so the leader's renewals count nobody else and it leads again at once.
#[test]
fn replicas_kept_out_do_not_make_a_leader_that_could_not_renew_hold_off() {
    let redis = RedisServer::start();
    let lease = unique_lease("gray-alone-beside-out");
    let leader = Replica::spawn(&redis.url(), &lease, "leader", &GRAY, &[]);
    wait_for("the leader to lead", 5 * LEASE, || {
        leader.is_ready().then_some(())
    });
    let out = gated("false");
    let out: Vec<&str> = out.iter().map(String::as_str).collect();
    let kept_out = Replica::spawn(&redis.url(), &lease, "out", &out, &[]);
    wait_for("the other replica kept out", 5 * LEASE, || {
        (kept_out.leader()["candidacy"]["stands"] == false).then_some(())
    });
    // Renewals that counted the listeners while the other replica was out.
    let renewed = leader.events("renewed").len();
    leader.wait_events("renewed", renewed + 2, 5 * LEASE);
    frozen_past_its_term_leads_again_at_once(&redis, &lease, &leader);
}

/// A gate that says no while a replica holds off (after a term it could not renew) keeps it out
/// of the try that follows: its candidate check fails during the hold-off, and nobody else may
/// stand, so a try would win a term only to step down from it at once.
#[test]
fn a_gate_that_says_no_during_a_hold_off_keeps_the_replica_out_of_the_next_try() {
    let redis = RedisServer::start();
    let proxy = proxy_to(&redis);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let healthy = dir.path().join("healthy");
    std::fs::write(&healthy, "").expect("mark the replica healthy");
    let check = format!("test -f {}", healthy.display());
    let lease = unique_lease("gray-gate-hold-off");
    let args = gated(&check);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let proxied = Replica::spawn(&proxy.url(), &lease, "proxied", &args, &[]);
    wait_for("the proxied replica to lead", 5 * LEASE, || {
        proxied.is_ready().then_some(())
    });
    // Someone else listens on the release channel and never takes the lease (a replica that a
    // gate keeps out does not listen): the leader holds off.
    let keys = LeaseKeys::new("leasehold:", &LeaseName::new(&lease).unwrap()).unwrap();
    let mut listener = redis::Client::open(redis.url().as_str())
        .and_then(|c| c.get_connection())
        .expect("a connection to listen on");
    let mut listening = listener.as_pubsub();
    listening.subscribe(&keys.channel).expect("subscribe");
    proxied.wait_events("renewed", 4, 5 * LEASE);
    proxy.set(Fault::ResetReplies);
    proxied.wait_events(
        "could not renew; letting the others try first",
        1,
        5 * LEASE,
    );
    proxy.set(Fault::Pass);
    std::fs::remove_file(&healthy).expect("the check fails from now on");
    proxied.wait_events(
        "the candidate check failed; standing aside from the election",
        1,
        5 * LEASE,
    );
    holds_on_every_look("the proxied replica out", 3 * LEASE, || {
        proxied.events("became leader").len() == 1
    });
}
