//! Clock honesty (docs/DESIGN.md point 19): Redis expires the lease on its own clock, which NTP
//! may slew faster than the configured drift allows. A real redis-server whose clock runs 10 %
//! fast (libfaketime), a real `leasehold run`: the leader bounds the rate from its renewals'
//! replies and is valid only while Redis keeps its lease.

use std::time::Duration;

use harness::contenders::unique_lease;
use harness::replica::Replica;
use testbed::redis_server::RedisServer;
use testbed::wait::wait_for;

/// TTL 2 s, renew deadline 1.4 s, retry 400 ms: a renewal every 400 ms.
const TIMING: [&str; 7] = [
    "--lease-duration",
    "2s",
    "--renew-deadline",
    "1400ms",
    "--retry-period",
    "400ms",
    "--no-data-loss-cooldown",
];

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
    // How long the leader may still act, then how long Redis keeps the lease, in this machine's
    // time. The leader keeps 2 ms and the renewal's round trip in hand; the two questions are a
    // few milliseconds apart, which the comparison allows. Without the measured rate, the
    // leader's validity outlasted Redis's by about 160 ms.
    const ASKING: f64 = 10.0;
    for _ in 0..10 {
        let view = leader.leader();
        let valid_for_ms = view["valid_for_ms"].as_u64().expect("a leader's validity");
        let pttl: i64 = redis.cmd(&["PTTL", &key]);
        let kept_ms = pttl as f64 / RATE;
        assert!(
            valid_for_ms as f64 <= kept_ms + ASKING,
            "valid for {valid_for_ms} ms, but Redis drops the lease in {kept_ms:.0} ms: {view}"
        );
        std::thread::sleep(Duration::from_millis(97));
    }
}
