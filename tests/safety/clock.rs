//! Clock honesty (docs/DESIGN.md, "Clocks"): Redis expires the lease on its own clock, which NTP
//! may slew faster than the configured drift allows. A real redis-server whose clock runs 10 %
//! fast (libfaketime), a real `leasehold run`: the leader bounds the rate from its renewals'
//! replies and is valid only while Redis keeps its lease. The rate it measured shows in its
//! `/leader` and status file (`redis_clock`), and its own clock's slew in its metrics.

use std::time::{Duration, Instant};

use harness::contenders::{Contender, unique_lease};
use harness::replica::{Replica, TWO_SECOND_TERM, lease_status, lease_status_json, run_to_end};
use harness::timings::SIXTY_SECOND_TERM_QUICK_RETRY;
use leasehold::clock::BootInstant;
use leasehold::elector::{Leadership, Role, Status, Timing};
use testbed::redis_server::RedisServer;
use testbed::wait::{until, wait_for};

/// TTL 2 s, renew deadline 1.4 s, retry 400 ms, no data-loss cooldown.
const TIMING: [&str; 7] = TWO_SECOND_TERM;

const LEASE: Duration = Duration::from_secs(2);

/// How fast the Redis clock runs.
const RATE: f64 = 1.10;

#[test]
fn a_leader_on_a_redis_whose_clock_runs_fast_is_valid_only_while_redis_keeps_its_lease() {
    let redis = RedisServer::builder().clock_rate(RATE).start();
    let lease = unique_lease("clock-fast");
    let key = format!("leasehold:{{{lease}}}");
    let leader = Replica::spawn(&redis.url(), &lease, "leader", &TIMING, &[]);
    wait_for("the leader to lead", 5 * LEASE, || {
        leader.is_ready().then_some(())
    });
    // A few renewals in, the rate is bounded.
    leader.wait_events("renewed", 6, 5 * LEASE);
    let rate = leader
        .metric("leasehold_redis_clock_rate")
        .expect("the rate is exported");
    assert!((rate - RATE).abs() < 0.01, "measured {rate}, ran at {RATE}");
    // Without the measured rate, it outlasted Redis's by about 160 ms.
    valid_only_while_redis_keeps_the_lease(&leader, &redis, &key, RATE);
}

/// Asks `leader` ten times, about 100 ms apart, how long it may still act, and Redis, whose clock
/// runs `rate` times as fast, how long it keeps the lease at `key`, both in this machine's time.
/// The two answers come a moment apart, and either may come from any instant of its question:
/// only a validity longer than Redis's by more than the time both questions took proves the
/// leader valid past the lease (1 ms more for PTTL's rounding).
pub(super) fn valid_only_while_redis_keeps_the_lease(
    leader: &Replica,
    redis: &RedisServer,
    key: &str,
    rate: f64,
) {
    for _ in 0..10 {
        let asked = Instant::now();
        let view = leader.leader();
        let valid_for_ms = view["valid_for_ms"].as_u64().expect("a leader's validity");
        let pttl: i64 = redis.cmd(&["PTTL", key]);
        let kept_ms = pttl as f64 / rate;
        let asking_ms = asked.elapsed().as_secs_f64() * 1_000.0 + 1.0;
        assert!(
            valid_for_ms as f64 <= kept_ms + asking_ms,
            "valid for {valid_for_ms} ms, but Redis drops the lease in {kept_ms:.0} ms (asked \
             in {asking_ms:.1} ms): {view}"
        );
        std::thread::sleep(Duration::from_millis(97));
    }
}

/// Hands the lease to `to` with `leasehold step-down` and waits until it leads.
pub(super) fn hand_to(redis: &RedisServer, lease: &str, to: &Replica, name: &str) {
    let (code, _, err) = run_to_end(
        &[
            "step-down",
            "--redis-url",
            &redis.url(),
            "--lease-name",
            lease,
            "--to",
            name,
        ],
        &[],
    );
    assert_eq!(code, 0, "step-down to {name}: {err}");
    wait_for("the successor to lead", 5 * LEASE, || {
        to.is_ready().then_some(())
    });
}

/// A term's first validity, from its `became leader` event.
fn began_valid_for(replica: &Replica, terms: usize) -> u64 {
    let began = replica.wait_events("became leader", terms, 5 * LEASE);
    began[terms - 1]["valid_for_ms"]
        .as_u64()
        .expect("the term's validity")
}

/// A Redis clock faster than a slew goes (10 %) is measured by a follower's tries too. Its first
/// two tries come a moment apart (the second once its probe channel is subscribed), and the
/// bound of so short a pair says nothing: the next pair was then held to the rate 1 and taken
/// for a step, and so was every pair after it, and the term it won began with the configured
/// drift, valid about 470 ms past Redis's expiry of its lease.
#[test]
fn a_follower_bounds_a_redis_clock_20_percent_fast_from_its_tries() {
    const RATE: f64 = 1.2;
    let redis = RedisServer::builder().clock_rate(RATE).start();
    let lease = unique_lease("clock-follower");
    // A fresh Redis: both start in the data-loss cooldown, as the review's run did.
    let timing = [
        "--lease-duration",
        "3s",
        "--renew-deadline",
        "2s",
        "--retry-period",
        "500ms",
    ];
    let replicas = [
        Replica::spawn(&redis.url(), &lease, "a", &timing, &[]),
        Replica::spawn(&redis.url(), &lease, "b", &timing, &[]),
    ];
    let leader = wait_for("a leader", 10 * LEASE, || {
        replicas.iter().position(Replica::is_ready)
    });
    let (leader, follower) = (&replicas[leader], &replicas[1 - leader]);
    // Three of the follower's tries, one about every lease duration.
    leader.wait_events("renewed", 18, 10 * LEASE);
    leader.signal(nix::sys::signal::Signal::SIGTERM);
    let kept_ms = (3_000.0 / RATE) as u64;
    let valid = began_valid_for(follower, 1);
    assert!(
        valid <= kept_ms,
        "began valid for {valid} ms, past the {kept_ms} ms Redis keeps the lease"
    );
}

#[test]
fn a_term_begins_with_the_rate_its_replica_measured_following_or_leading() {
    let redis = RedisServer::builder().clock_rate(RATE).start();
    let lease = unique_lease("clock-carried");
    let a = Replica::spawn(&redis.url(), &lease, "a", &TIMING, &[]);
    wait_for("a to lead", 5 * LEASE, || a.is_ready().then_some(()));
    let b = Replica::spawn(&redis.url(), &lease, "b", &TIMING, &[]);
    // b follows for several of its tries (one about every lease duration).
    a.wait_events("renewed", 20, 10 * LEASE);
    hand_to(&redis, &lease, &b, "b");
    b.wait_events("renewed", 4, 5 * LEASE);
    let rate = |r: &Replica| r.metric("leasehold_redis_clock_rate").unwrap_or(-1.0);
    assert!(
        (rate(&b) - RATE).abs() < 0.01,
        "b's term measured {}",
        rate(&b)
    );
    hand_to(&redis, &lease, &a, "a");
    // A rate is a term's: b, following again, exports none (an alert on it resolves).
    assert_eq!(rate(&b), 0.0, "b exports its last term's rate");
    // TTL 2 s: the configured drift leaves 1,978 ms; Redis at 1.10 keeps the lease 1,818 ms.
    let kept_ms = (LEASE.as_secs_f64() * 1_000.0 / RATE) as u64;
    let first = began_valid_for(&a, 1);
    assert!(
        first > kept_ms,
        "a's first term knew no rate yet: {first} ms"
    );
    for (who, replica, term) in [("b, from its tries", &b, 1), ("a, from its term", &a, 2)] {
        let valid = began_valid_for(replica, term);
        assert!(
            valid <= kept_ms,
            "{who}: began valid for {valid} ms, past the {kept_ms} ms Redis keeps the lease"
        );
    }
}

#[test]
fn a_redis_clock_too_fast_for_a_useful_term_ends_it_and_keeps_the_replica_out_a_while() {
    // At 1.6, a TTL of 2 s lasts 1.25 s here: less than the renew deadline of 1.4 s.
    let redis = RedisServer::builder().clock_rate(1.6).start();
    let lease = unique_lease("clock-broken");
    let replica = Replica::spawn(&redis.url(), &lease, "broken", &TIMING, &[]);
    let stepped = replica.wait_events("stepped down", 1, 5 * LEASE);
    assert_eq!(stepped[0]["reason"], "clock_rate", "{stepped:?}");
    let detail = stepped[0]["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("times as fast") && detail.contains("renew deadline"),
        "{detail}"
    );
    // This machine's own clock is not slewed: the words send the reader to the Redis host.
    assert!(
        detail.ends_with("Check the time service on the Redis host"),
        "{detail}"
    );
    let said = replica.wait_events(
        "redis's clock runs too far off for a useful term; out of the election",
        1,
        LEASE,
    );
    assert_eq!(said[0]["level"], "WARN", "{said:?}");
    // It tries again after the retry period, measures again, and stays out longer each time.
    let again = replica.wait_events("stepped down", 3, 10 * LEASE);
    assert!(
        again.iter().all(|s| s["reason"] == "clock_rate"),
        "{again:?}"
    );
    assert_eq!(
        replica
            .events("redis's clock runs too far off for a useful term; out of the election")
            .len(),
        1,
        "said at warn once"
    );
    assert!(replica.metric("leasehold_step_downs_total{reason=\"clock_rate\"}") >= Some(3.0));
}

/// The pause the clock-rate gate asks for runs from the end of the step-down, not from the
/// moment the gate said no: a command that ignores SIGTERM keeps the step-down going until the
/// term's deadline (about 1.2 s here), longer than the first pauses (400 and 800 ms).
#[test]
fn the_clock_rate_pause_runs_after_a_slow_step_down_ended() {
    let redis = RedisServer::builder().clock_rate(1.6).start();
    let lease = unique_lease("clock-slow-stop");
    let mut args = TIMING.to_vec();
    args.extend(["--grace-period", "30s"]);
    let command = ["sh", "-c", r#"trap "" TERM; while :; do sleep 0.05; done"#];
    let replica = Replica::spawn(&redis.url(), &lease, "slow", &args, &command);
    let stepped = replica.wait_events("stepped down", 2, 10 * LEASE);
    let released = replica.wait_events("released the lease", 2, 5 * LEASE);
    let began = replica.wait_events("became leader", 3, 10 * LEASE);
    for term in 0..2 {
        let detail = stepped[term]["detail"].as_str().unwrap_or_default();
        let pause: u64 = detail
            .split("contending again in ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("no pause in {detail}"));
        let at = |e: &serde_json::Value| Replica::logged_at(e).expect("a timestamp");
        let out = at(&began[term + 1])
            .duration_since(at(&released[term]))
            .unwrap_or_default();
        assert!(
            out >= Duration::from_millis(pause),
            "term {}: contended again {out:?} after its step-down ended, asked {pause} ms",
            term + 1
        );
    }
}
/// A drift margin so wide that the validity (2 s × 0.6 − 2 ms) is shorter than the renew
/// deadline (1.4 s) is accepted, and on a Redis whose clock runs true the clock-rate gate must
/// not find the term useless: the term keeps renewing.
#[test]
fn a_validity_shorter_than_the_renew_deadline_does_not_make_a_true_redis_clock_too_fast() {
    let redis = RedisServer::start();
    let lease = unique_lease("clock-wide-drift");
    let mut args = TIMING.to_vec();
    args.extend(["--drift-factor", "0.4"]);
    let replica = Replica::spawn(&redis.url(), &lease, "wide", &args, &[]);
    // Each renewal past the second carries a bound of the rate to the gate: one was measured.
    replica.wait_events("renewed", 6, 5 * LEASE);
    let view = replica.leader();
    assert!(
        view["redis_clock"]["rate"].is_f64(),
        "no rate measured: {view}"
    );
    assert!(
        replica.events("stepped down").is_empty(),
        "{:?}",
        replica.events("stepped down")
    );
    assert_eq!(replica.events("became leader").len(), 1);
}

/// The `redis_clock` of `replica`'s `/leader` once its term renewed a few times, checked for a
/// bound of width that says something around `rate`, measured by the term `/leader` names.
fn measured_redis_clock(replica: &Replica, rate: f64) -> serde_json::Value {
    wait_for("the replica to lead", 5 * LEASE, || {
        replica.is_ready().then_some(())
    });
    replica.wait_events("renewed", 6, 5 * LEASE);
    let view = replica.leader();
    let clock = view["redis_clock"].clone();
    let number = |field: &str| clock[field].as_f64().unwrap_or(f64::NAN);
    let (measured, low, high, width) = (
        number("rate"),
        number("low"),
        number("high"),
        number("width"),
    );
    assert!(
        (measured - rate).abs() < 0.01,
        "measured {measured}, ran at {rate}: {view}"
    );
    assert!(low <= measured && measured <= high, "{view}");
    assert!(
        width < 0.01,
        "a bound as wide as the margin says nothing: {view}"
    );
    assert_eq!(
        clock["term"], view["token"],
        "measured by this term: {view}"
    );
    clock
}

#[test]
fn a_leaders_view_and_status_file_show_its_redis_clock_near_one_and_a_new_follower_none() {
    let redis = RedisServer::start();
    let lease = unique_lease("clock-view");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("status.json");
    let file_arg = file.display().to_string();
    let mut args = TIMING.to_vec();
    args.extend(["--status-file", &file_arg]);
    let leader = Replica::spawn(&redis.url(), &lease, "leader", &args, &[]);
    let clock = measured_redis_clock(&leader, 1.0);
    // The status file carries the same, rewritten at every renewal.
    wait_for("the status file to show the rate", 5 * LEASE, || {
        let text = std::fs::read_to_string(&file).ok()?;
        let json: serde_json::Value = serde_json::from_str(&text).ok()?;
        let rate = json["redis_clock"]["rate"].as_f64()?;
        ((rate - 1.0).abs() < 0.01 && json["redis_clock"]["term"] == clock["term"]).then_some(())
    });
    // This host's own clocks, over the same renewals: no slew beyond the margin.
    let slew = leader
        .metric("leasehold_local_clock_slew_ratio")
        .expect("the slew is exported");
    assert!((slew - 1.0).abs() < 0.01, "slew ratio {slew}");
    let said = leader
        .events("this host's clock is slewed beyond the drift margin: check its time service");
    assert!(said.is_empty(), "no false alarm: {said:?}");
    // A replica that never led has measured nothing: it shows no one else's rate.
    let follower = Replica::spawn(&redis.url(), &lease, "follower", &TIMING, &[]);
    wait_for("the follower to follow", 5 * LEASE, || {
        (follower.leader()["leader"] == "leader").then_some(())
    });
    let view = follower.leader();
    assert_eq!(view["redis_clock"], serde_json::Value::Null, "{view}");
}

#[test]
fn a_leaders_view_and_leasehold_status_read_a_redis_clock_that_runs_five_percent_fast_as_about_1_05()
 {
    let redis = RedisServer::builder().clock_rate(1.05).start();
    let lease = unique_lease("clock-view-fast");
    let leader = Replica::spawn(&redis.url(), &lease, "leader", &TIMING, &[]);
    let view = measured_redis_clock(&leader, 1.05);
    // The leader notes what it measured in Redis about once per lease duration, for
    // `leasehold status`, which reads Redis only.
    let noted = wait_for("leasehold status to show the rate", 3 * LEASE, || {
        lease_status_json(&redis.url(), &lease)
            .ok()
            .filter(|json| !json["redis_clock"].is_null())
    });
    let rate = noted["redis_clock"]["rate"].as_f64().unwrap_or(f64::NAN);
    assert!(
        (rate - 1.05).abs() < 0.01,
        "leasehold status read {rate}: {noted}"
    );
    assert_eq!(noted["redis_clock"]["term"], view["term"], "{noted}");
    assert_eq!(noted["redis_clock_by"], "leader", "{noted}");
    let text = lease_status(&redis.url(), &lease);
    let shown: Option<f64> = text
        .split("redis clock ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|rate| rate.parse().ok());
    assert!(
        shown.is_some_and(|rate| (rate - 1.05).abs() < 0.01) && text.contains("measured by leader"),
        "{text}"
    );
}

/// A 60 s lease renewed every 250 ms, led in this process on `redis` (on a clock 10 % fast,
/// its renewals bound the rate within a fraction of a percent); the work hands out its
/// [`Leadership`]. Its grant, on the configured drift, is valid for about 59.4 s, and its
/// renewals on such a clock for about 54.5 s: for its first 4.9 s they end the term sooner.
const IN_PROCESS: Timing = SIXTY_SECOND_TERM_QUICK_RETRY;

fn lead_in_process(
    redis: &RedisServer,
    test: &str,
) -> (Contender, tokio::sync::watch::Receiver<Option<Leadership>>) {
    let lease = harness::contenders::lease(&redis.url(), &unique_lease(test), "a", false);
    let (held, leadership) = tokio::sync::watch::channel(None);
    let contender = Contender::spawn(lease, IN_PROCESS, move |l: Leadership| {
        held.send_replace(Some(l.clone()));
        async move {
            l.lost().await;
            Ok(())
        }
    });
    (contender, leadership)
}

/// The validity deadline of a leader's status.
fn valid_until(s: &Status) -> Option<BootInstant> {
    match s.role {
        Role::Leader { valid_until, .. } => Some(valid_until),
        _ => None,
    }
}

/// What `check()` trusts is the watchdog's deadline, also when a renewal finds Redis's clock
/// fast and so ends the term sooner than the grant did. The work's own deadline must move back
/// with it (the command's supervisor and the step-down's wait for the work read it), or it
/// outlasts the lease on Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_that_finds_redis_clock_fast_moves_the_works_deadline_back() {
    let redis = RedisServer::builder().clock_rate(RATE).start();
    let (leader, mut leadership) = lead_in_process(&redis, "clock-back");
    let mut status = leader.status.clone();
    let term = leadership
        .wait_for(Option::is_some)
        .await
        .expect("the work began")
        .clone()
        .expect("a leadership");
    let granted = term.acquired_at().saturating_add(IN_PROCESS.validity());
    let sooner = until(
        "a renewal that ends the term sooner",
        &mut status,
        5 * LEASE,
        |s| valid_until(s).is_some_and(|v| v < granted),
    )
    .await;
    let sooner = valid_until(&sooner).expect("a leader");
    // Renewals within the grant's first seconds all end the term before the grant's deadline.
    let trusted = term.valid_until();
    assert!(
        trusted < granted,
        "check() trusts the grant's deadline, {:?} past the watchdog's",
        trusted.saturating_duration_since(sooner)
    );
    leader.shutdown().await;
}

/// A step back of a Redis clock that runs fast (NTP stepping back what it let run ahead) starts
/// the rate's window anew, and for the renewals before it bounds anything again the rate known
/// before stands: no renewal is valid longer than Redis, 10 % fast, keeps the lease (60 s / 1.1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_fast_redis_clock_steps_back_no_renewal_outlasts_the_lease_on_redis() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let offset = dir.path().join("offset");
    std::fs::write(&offset, format!("+0 x{RATE}")).expect("write the clock's offset");
    let redis = RedisServer::builder().clock_file(&offset).start();
    let (leader, _) = lead_in_process(&redis, "clock-back-step");
    let mut status = leader.status.clone();
    let kept = IN_PROCESS.lease_duration.div_f64(RATE);
    let valid_for = |s: &Status| valid_until(s).map(|v| BootInstant::now().until(v));
    until(
        "a renewal bounded by the rate",
        &mut status,
        5 * LEASE,
        |s| valid_for(s).is_some_and(|v| v < kept),
    )
    .await;
    std::fs::write(&offset, format!("-1 x{RATE}")).expect("step the clock back");
    // A dozen renewals: the step's, and those of the new window's short baselines.
    status.mark_unchanged();
    for renewal in 0..12 {
        tokio::time::timeout(LEASE, status.changed())
            .await
            .expect("a renewal within a lease")
            .expect("the elector runs");
        let left = valid_for(&status.borrow_and_update()).expect("still the leader");
        assert!(
            left <= kept,
            "renewal {renewal} after the step: valid for {left:?}, Redis keeps the lease {kept:?}"
        );
    }
    leader.shutdown().await;
}
