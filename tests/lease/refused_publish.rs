//! A Redis user that may not PUBLISH on the lease's channels: its release and its start of a
//! data-loss cooldown are refused at the PUBLISH that announces them. Neither may then have
//! written anything, so that what the replica says ("could not release the lease; it expires on
//! its own", "redis refuses leasehold") is what Redis holds.

use std::time::Duration;

use harness::contenders::unique_lease;
use harness::replica::{FAST, Replica};
use leasehold::lease::minimal_acl_rule;
use nix::sys::signal::Signal;
use testbed::redis_server::RedisServer;
use testbed::wait::wait_for;

/// A replica on `redis` as a user of docs/REFERENCE.md's rule without `+publish`.
fn mute_replica(redis: &RedisServer, lease: &str, args: &[&str]) -> Replica {
    let rule = minimal_acl_rule("leasehold:", false).replace(" +publish", "");
    redis.set_acl_user("mute", &rule, "pw");
    let url = format!("redis://mute:pw@{}", redis.addr());
    let mut all = FAST.to_vec();
    all.extend(args);
    Replica::spawn_with_env("", lease, "mute", &all, &[], &[("LEASEHOLD_REDIS_URL", &url)])
}

/// The release deleted the lease key, then was refused its PUBLISH: the replica said it could
/// not release while the lease was free, and no follower heard of it.
#[test]
fn a_release_refused_its_announcement_leaves_the_term_as_it_was() {
    let redis = RedisServer::start();
    let lease = unique_lease("mute-release");
    let mut a = mute_replica(&redis, &lease, &["--no-data-loss-cooldown"]);
    wait_for("the mute replica to lead", Duration::from_secs(10), || {
        a.is_ready().then_some(())
    });
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(Duration::from_secs(10)), 0, "{}", a.log_text());
    assert_eq!(
        a.events("could not release the lease; it expires on its own").len(),
        1,
        "{}",
        a.log_text()
    );
    let key: i64 = redis.cmd(&["EXISTS", &format!("leasehold:{{{lease}}}")]);
    assert_eq!(key, 1, "it said the lease expires on its own, yet deleted it");
}

/// On a fresh Redis the first try starts the data-loss cooldown and announces it; refused the
/// announcement, it must not have started it (it wrote the state record, then reported the
/// refusal, and never said that a cooldown runs).
#[test]
fn a_cooldown_refused_its_announcement_is_not_started() {
    let redis = RedisServer::start();
    let lease = unique_lease("mute-cooldown");
    let a = mute_replica(&redis, &lease, &[]);
    wait_for("the refusal", Duration::from_secs(10), || {
        a.logs().into_iter().find(|l| {
            l["level"] == "ERROR" && l["error"].as_str().unwrap_or("").contains("`publish`")
        })
    });
    for suffix in [":state", ":longest"] {
        let written: i64 = redis.cmd(&["EXISTS", &format!("leasehold:{{{lease}}}{suffix}")]);
        assert_eq!(written, 0, "{suffix} written by a refused try");
    }
}
