//! A replica that a gate keeps out of the election sends no try, so its elector hears nothing
//! from Redis: the eviction policy's reads, once a lease duration while it is out, are what
//! `/leader` and `leasehold_redis_up` say of Redis. Here the gate is a candidate check that never
//! passes, from the start: Redis shows up, then down while it is paused, then up again.

use std::time::Duration;

use harness::contenders::unique_lease;
use harness::replica::{FAST, Replica};
use testbed::RedisServer;
use testbed::wait::wait_for;

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
    assert_eq!(a.leader()["is_leader"], false);
}
