//! A Redis user that may not PUBLISH on the lease's channels: its release and its handover
//! request are refused at the PUBLISH that announces them, before they write anything, so that
//! what the replica and `step-down` say ("could not release the lease; it expires on its own", an
//! error and exit 1) is what Redis holds. (An acquire that starts a data-loss cooldown writes
//! first: a refused write must not send a notice that wakes every replica, itself included.)

use std::time::Duration;

use harness::contenders::unique_lease;
use harness::replica::{FAST, Replica, run_to_end};
use leasehold::lease::minimal_acl_rule;
use nix::sys::signal::Signal;
use testbed::redis_server::RedisServer;
use testbed::wait::wait_for;

/// The URL of `redis` as a user of docs/REFERENCE.md's rule without `+publish`.
fn mute_url(redis: &RedisServer) -> String {
    let rule = minimal_acl_rule("leasehold:", false).replace(" +publish", "");
    redis.set_acl_user("mute", &rule, "pw");
    format!("redis://mute:pw@{}", redis.addr())
}

/// A replica on `redis` as that user, leading: the user may `PUBLISH` until the replica leads.
/// (A user refused it from the start is refused its acquire's probe of the release channel
/// too, so it led only when its first try went out before its subscription was made.)
fn mute_leader(redis: &RedisServer, lease: &str, args: &[&str]) -> Replica {
    let url = mute_url(redis);
    redis.set_acl_user("mute", &minimal_acl_rule("leasehold:", false), "pw");
    let mut all = FAST.to_vec();
    all.extend(args);
    let env = [("LEASEHOLD_REDIS_URL", url.as_str())];
    let replica = Replica::spawn_with_env("", lease, "mute", &all, &[], &env);
    wait_for("the replica to lead", Duration::from_secs(10), || {
        replica.is_ready().then_some(())
    });
    let _: () = redis.cmd(&["ACL", "SETUSER", "mute", "-publish"]);
    replica
}

/// The release deleted the lease key, then was refused its PUBLISH: the replica said it could
/// not release while the lease was free, and no follower heard of it.
#[test]
fn a_release_refused_its_announcement_leaves_the_term_as_it_was() {
    let redis = RedisServer::start();
    let lease = unique_lease("mute-release");
    let mut a = mute_leader(&redis, &lease, &["--no-data-loss-cooldown"]);
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(Duration::from_secs(10)), 0, "{}", a.log_text());
    assert_eq!(
        a.events("could not release the lease; it expires on its own")
            .len(),
        1,
        "{}",
        a.log_text()
    );
    let key: i64 = redis.cmd(&["EXISTS", &format!("leasehold:{{{lease}}}")]);
    assert_eq!(
        key, 1,
        "it said the lease expires on its own, yet deleted it"
    );
}

/// `step-down` as that user: its request was stored before the refused nudge, so the leader
/// handed over while the command said it failed (exit 1).
#[test]
fn a_handover_request_refused_its_nudge_is_not_stored() {
    let redis = RedisServer::start();
    let lease = unique_lease("mute-handover");
    let mut args = FAST.to_vec();
    args.push("--no-data-loss-cooldown");
    let a = Replica::spawn(&redis.url(), &lease, "a", &args, &[]);
    wait_for("a to lead", Duration::from_secs(10), || {
        a.is_ready().then_some(())
    });
    let url = mute_url(&redis);
    let argv = ["step-down", "--lease-name", &lease, "--wait", "2s"];
    let (code, _, stderr) = run_to_end(&argv, &[("LEASEHOLD_REDIS_URL", &url)]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("`publish`"), "{stderr}");
    let request: i64 = redis.cmd(&["EXISTS", &format!("leasehold:{{{lease}}}:handover")]);
    assert_eq!(request, 0, "a request was stored by a refused step-down");
    assert!(a.events("stepped down").is_empty(), "{}", a.log_text());
}
