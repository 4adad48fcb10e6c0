//! Steps of Redis's clock (docs/DESIGN.md, "Validity"): a real redis-server whose clock
//! libfaketime moves by an offset file, and real `leasehold run` replicas. A step forward ends
//! the term it falls in (`clock_step`), and it never passes for a rate that would leave the
//! terms after it too short to renew.

use std::time::{Duration, Instant};

use harness::contenders::unique_lease;
use harness::replica::{Replica, TWO_SECOND_TERM};
use nix::sys::signal::Signal;
use testbed::redis_server::RedisServer;
use testbed::wait::wait_for;

use super::clock::{hand_to, valid_only_while_redis_keeps_the_lease};

/// TTL 2 s, renew deadline 1.4 s, retry 400 ms, no data-loss cooldown.
const TIMING: [&str; 7] = TWO_SECOND_TERM;

const LEASE: Duration = Duration::from_secs(2);

/// A Redis whose clock libfaketime moves by an offset file, and that file (at `+0 x1.0`); the
/// directory holds it.
fn redis_on_a_clock_file() -> (tempfile::TempDir, std::path::PathBuf, RedisServer) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let offset = dir.path().join("offset");
    std::fs::write(&offset, "+0 x1.0").expect("write the clock's offset");
    let redis = RedisServer::builder().clock_file(&offset).start();
    (dir, offset, redis)
}

#[test]
fn a_leader_whose_redis_clock_steps_forward_steps_down_at_the_first_renewal_after_it() {
    let (_dir, offset, redis) = redis_on_a_clock_file();
    let lease = unique_lease("clock-step");
    let leader = Replica::spawn(&redis.url(), &lease, "leader", &TIMING, &[]);
    wait_for("the leader to lead", 5 * LEASE, || {
        leader.is_ready().then_some(())
    });
    leader.wait_events("renewed", 3, 5 * LEASE);
    // Redis's clock jumps 3 s forward: the lease (TTL 2 s) expires at once on Redis.
    std::fs::write(&offset, "+3 x1.0").expect("step the clock");
    let stepped = leader.wait_events("stepped down", 1, LEASE);
    assert_eq!(stepped[0]["reason"], "clock_step", "{stepped:?}");
    let detail = stepped[0]["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("stepped") && detail.contains("ms forward"),
        "{detail}"
    );
    let said = leader.wait_events(
        "redis's clock stepped forward; the lease expired early by about the step",
        1,
        LEASE,
    );
    let step_ms = said[0]["step_ms"].as_u64().expect("the step");
    assert!((2_500..=3_000).contains(&step_ms), "stepped {step_ms} ms");
    // The next term goes on at the stepped clock's rate 1.
    wait_for("the leader to lead again", 5 * LEASE, || {
        (leader.events("became leader").len() == 2).then_some(())
    });
}

/// Redis's clock steps 20 s back, then forward again (a failover to a host whose clock is
/// behind, and back): the forward step lands where the rate's window holds one reply since the
/// step back. Taken for a rate, it was far too fast for a useful term: each term begun with it
/// was valid for far less than a retry period and ended before its first renewal, which alone
/// could measure again. It is a step (`clock_step`), and the terms after it renew.
#[test]
fn a_step_forward_right_after_a_step_back_is_a_step_not_a_rate() {
    let (_dir, offset, redis) = redis_on_a_clock_file();
    let lease = unique_lease("clock-step-as-rate");
    let leader = Replica::spawn(&redis.url(), &lease, "leader", &TIMING, &[]);
    leader.wait_events("renewed", 3, 5 * LEASE);
    std::fs::write(&offset, "-20 x1.0").expect("step the clock back");
    leader.wait_events(
        "redis's clock stepped back; keys live longer, the term goes on",
        1,
        LEASE,
    );
    std::fs::write(&offset, "+0 x1.0").expect("step the clock forward");
    let stepped = leader.wait_events("stepped down", 1, 5 * LEASE);
    assert_eq!(stepped[0]["reason"], "clock_step", "{stepped:?}");
    let renewed = leader.events("renewed").len();
    // The gate's pause, a rate window's span, and three renewals.
    wait_for("terms that renew again", 10 * LEASE, || {
        (leader.events("renewed").len() >= renewed + 3).then_some(())
    });
}

/// A renewal refused by a Redis whose clock stepped back meanwhile (a failover to a node whose
/// clock is behind, without the key) ends the term as `lost`, and is not first said to let the
/// term go on.
#[test]
fn a_refusal_that_shows_a_step_back_is_a_loss_not_a_term_that_goes_on() {
    let (_dir, offset, redis) = redis_on_a_clock_file();
    let lease = unique_lease("clock-back-refused");
    let leader = Replica::spawn(&redis.url(), &lease, "leader", &TIMING, &[]);
    leader.wait_events("renewed", 3, 5 * LEASE);
    // Frozen a moment, so that its next renewal meets both the step and another holder.
    leader.signal(Signal::SIGSTOP);
    std::fs::write(&offset, "-5 x1.0").expect("step the clock back");
    let key = format!("leasehold:{{{lease}}}");
    redis.cmd::<String>(&["SET", &key, "elsewhere-1#1", "PX", "3000"]);
    leader.signal(Signal::SIGCONT);
    let stepped = leader.wait_events("stepped down", 1, LEASE);
    assert_eq!(stepped[0]["reason"], "lost", "{stepped:?}");
    let said = leader.events("redis's clock stepped back; keys live longer, the term goes on");
    assert!(said.is_empty(), "{said:?}");
}

/// Redis's clock steps 60 s forward between the first two tries of a replica that just handed
/// over (its successor frozen, the key expired by the step), and the replica is left alone.
/// Taken for a rate (some forty times as fast), the pair made each of its terms valid for less
/// than a retry period, ending before the first renewal that alone could measure again: nobody
/// led for good.
#[test]
fn a_step_between_a_followers_first_two_tries_is_a_step_not_a_rate() {
    let (_dir, offset, redis) = redis_on_a_clock_file();
    let lease = unique_lease("clock-step-following");
    let key = format!("leasehold:{{{lease}}}");
    let first = Replica::spawn(&redis.url(), &lease, "first", &TIMING, &[]);
    wait_for("first to lead", 5 * LEASE, || {
        first.is_ready().then_some(())
    });
    let holder = Replica::spawn(&redis.url(), &lease, "holder", &TIMING, &[]);
    hand_to(&redis, &lease, &holder, "holder");
    // The first try of the window that `first` follows in again: it sees the holder.
    first.wait_events("following leader", 1, 5 * LEASE);
    holder.signal(Signal::SIGSTOP);
    let left: i64 = redis.cmd(&["PTTL", &key]);
    std::fs::write(&offset, "+60 x1.0").expect("step the clock");
    assert!(
        left > 0,
        "the premise: the step, not the TTL, expired the holder's key ({left} ms left)"
    );
    holder.signal(Signal::SIGKILL);
    the_next_term_is_whole_and_renews(&first);
    let stepped = first.events("stepped down");
    assert_eq!(stepped.len(), 1, "only the handover: {stepped:?}");
}

/// Redis's clock steps 60 s forward between a lone replica's grant and its first renewal. The
/// renewal puts the expired key back (the record still names the term), and the pair passed for
/// a rate some 150 times as fast: the clock-rate gate took the term, and every term after it
/// carried that rate, valid for some 10 ms and ended before its first renewal. It is a step.
#[test]
fn a_step_between_a_grant_and_its_first_renewal_is_a_step_not_a_rate() {
    let (_dir, offset, redis) = redis_on_a_clock_file();
    let lease = unique_lease("clock-step-granted");
    let replica = Replica::spawn(&redis.url(), &lease, "alone", &TIMING, &[]);
    replica.wait_events("became leader", 1, 5 * LEASE);
    std::fs::write(&offset, "+60 x1.0").expect("step the clock");
    assert!(
        replica.events("renewed").is_empty(),
        "the premise: the step comes before the term's first renewal"
    );
    let stepped = replica.wait_events("stepped down", 1, 5 * LEASE);
    assert_eq!(stepped[0]["reason"], "clock_step", "{stepped:?}");
    the_next_term_is_whole_and_renews(&replica);
}

/// Redis's clock starts to run 8 % fast (as NTP slews it, no step) once a window of three lease
/// durations of renewals at rate 1 is full: the validity follows from the next renewals on.
/// The bound over the whole window averaged the new rate away (1.01 after two renewals), and
/// the leader outlasted the lease on Redis by about 120 ms.
#[test]
fn a_redis_clock_that_starts_to_run_fast_mid_term_shortens_the_validity_at_once() {
    const RATE: f64 = 1.08;
    // libfaketime counts a rate from the start of Redis: an offset of -(rate - 1) times the time
    // since then changes the rate without a step.
    let started = Instant::now();
    let (_dir, offset, redis) = redis_on_a_clock_file();
    let lease = unique_lease("clock-slews");
    let leader = Replica::spawn(&redis.url(), &lease, "leader", &TIMING, &[]);
    leader.wait_events("renewed", 16, 5 * LEASE);
    let since = started.elapsed().as_secs_f64();
    let slewed = format!("{:+.6} x{RATE}", -(RATE - 1.0) * since);
    std::fs::write(&offset, slewed).expect("slew the clock");
    let renewed = leader.events("renewed").len();
    leader.wait_events("renewed", renewed + 2, LEASE);
    let key = format!("leasehold:{{{lease}}}");
    valid_only_while_redis_keeps_the_lease(&leader, &redis, &key, RATE);
    assert!(
        leader.events("stepped down").is_empty(),
        "a slew is no step: {}",
        leader.log_text()
    );
}

/// `replica`'s second term begins valid for most of its TTL (the step was not taken for a rate)
/// and renews three times.
fn the_next_term_is_whole_and_renews(replica: &Replica) {
    let began = replica.wait_events("became leader", 2, 5 * LEASE);
    let valid_for_ms = began[1]["valid_for_ms"].as_u64().unwrap_or_default();
    assert!(
        valid_for_ms > 1_000,
        "the term began with the step taken for a rate: {began:?}"
    );
    let renewed = replica.events("renewed").len();
    wait_for("the term to renew", 5 * LEASE, || {
        (replica.events("renewed").len() >= renewed + 3).then_some(())
    });
}

/// Redis's clock steps back past the end of the data-loss cooldown a fresh Redis began with, and
/// the leader dies: the ended cooldown holds again for what the step gave back (DESIGN.md:
/// a step back costs liveness). That wait is said, and the term after it names the one before
/// as expired: the follower took the revived cooldown, which it did not start, for a loss of
/// Redis's data, and said nothing while nobody led.
#[test]
fn a_cooldown_that_a_step_back_revives_is_said_and_is_no_data_loss() {
    let (_dir, offset, redis) = redis_on_a_clock_file();
    let lease = unique_lease("clock-step-cooldown");
    // With the data-loss cooldown: a fresh Redis begins with one.
    let timing = &TIMING[..6];
    let a = Replica::spawn(&redis.url(), &lease, "a", timing, &[]);
    let b = Replica::spawn(&redis.url(), &lease, "b", timing, &[]);
    let (leader, follower) = wait_for("a leader", 10 * LEASE, || {
        (a.is_ready().then_some((&a, &b))).or_else(|| b.is_ready().then_some((&b, &a)))
    });
    leader.wait_events("renewed", 3, 5 * LEASE);
    // Far enough back that the cooldown's end, some seconds ago, lies ahead again.
    std::fs::write(&offset, "-15 x1.0").expect("step the clock back");
    leader.wait_events(
        "redis's clock stepped back; keys live longer, the term goes on",
        1,
        LEASE,
    );
    // The follower may have said it of the fresh Redis's cooldown, had the leader started it.
    const WAITING: &str = "waiting out a data-loss cooldown this replica did not start; no term begins until it ends (another replica found redis new or without its data, or redis's clock stepped back past the end of an earlier one)";
    let before = follower.events(WAITING).len();
    let cooldowns = || follower.metric("leasehold_cooldowns_started_total");
    let started = cooldowns();
    leader.signal(Signal::SIGKILL);
    let waiting = follower.wait_events(WAITING, before + 1, 5 * LEASE);
    assert!(
        waiting[before]["cooldown_ms"]
            .as_u64()
            .is_some_and(|ms| ms > 0),
        "{waiting:?}"
    );
    let began = follower.wait_events("became leader", 1, 15 * LEASE);
    assert_eq!(began[0]["previous_term"], "expired", "{began:?}");
    assert_eq!(cooldowns(), started, "the follower started no cooldown");
}
