//! Leaders in real child processes: SIGKILLed (crash failover close to the TTL) and
//! SIGSTOPped past the TTL (the resumed process refuses through its guard, steps down with
//! "validity deadline passed", and never takes the lease back).

use std::sync::Arc;
use std::time::Duration;

use harness::contenders::{
    ActionLog, ChildContender, Contender, acting_work, lease, unique_lease, until_leading,
    until_led_by,
};
use leasehold::clock::BootInstant;
use leasehold::elector::{Role, Timing};
use nix::sys::signal::Signal;
use testbed::redis_server::RedisServer;
use testbed::wait::holds_for;

fn timing() -> Timing {
    harness::contenders::steady_timing()
}

/// A child leader, then an in-process follower that sees it.
async fn child_leader_and_follower(
    test: &str,
) -> (RedisServer, String, ChildContender, Contender, ActionLog) {
    let redis = RedisServer::start();
    let name = unique_lease(test);
    let child = ChildContender::spawn(&redis.url(), &name, "child", timing(), false);
    child.wait_line("the child to lead", Duration::from_secs(10), |l| {
        l.starts_with("leader token=")
    });
    let log: ActionLog = Arc::default();
    let mut follower = Contender::spawn(
        lease(&redis.url(), &name, "follower", false),
        timing(),
        acting_work(log.clone(), Duration::from_millis(5), None),
    );
    until_led_by(
        "the follower to see the child lead",
        &mut follower.status,
        Duration::from_secs(5),
        "child",
    )
    .await;
    (redis, name, child, follower, log)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_leader_is_replaced_within_about_the_ttl() {
    let (redis, name, child, mut follower, _log) = child_leader_and_follower("crash").await;
    let key = format!("leasehold:{{{name}}}");
    child.signal(Signal::SIGKILL);
    let killed_at = BootInstant::now();
    // The lease's remaining TTL when the leader died bounds when the follower may lead.
    let pttl: i64 = redis.cmd(&["PTTL", &key]);
    let expires_at = killed_at.saturating_add(Duration::from_millis(pttl.max(0) as u64));
    until_leading(
        "the follower to lead",
        &mut follower.status,
        timing().lease_duration * 2,
    )
    .await;
    let led_at = BootInstant::now();
    let took = led_at.saturating_duration_since(killed_at);
    let past_expiry = led_at.saturating_duration_since(expires_at);
    eprintln!(
        "crash failover: {took:?} after SIGKILL, {past_expiry:?} after the lease expired (TTL {:?})",
        timing().lease_duration
    );
    assert!(
        took <= timing().lease_duration + Duration::from_millis(300),
        "took {took:?}"
    );
    follower.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_leader_refuses_after_resume_steps_down_and_never_takes_the_lease_back() {
    let (redis, name, child, mut follower, log) = child_leader_and_follower("pause").await;
    let key = format!("leasehold:{{{name}}}");
    let child_token: u64 = child
        .wait_line("the child's token", Duration::from_secs(1), |l| {
            l.starts_with("leader token=")
        })
        .trim_start_matches("leader token=")
        .parse()
        .unwrap();

    child.signal(Signal::SIGSTOP);
    let stopped_at = BootInstant::now();
    until_leading(
        "the follower to take over",
        &mut follower.status,
        timing().lease_duration * 2,
    )
    .await;
    let paused_for = BootInstant::now().saturating_duration_since(stopped_at);
    eprintln!("takeover from a paused leader after {paused_for:?}");
    // The fault itself: keep the child frozen until the pause is twice the TTL.
    tokio::time::sleep((timing().lease_duration * 2).saturating_sub(paused_for)).await;

    let mark = child.line_count();
    child.signal(Signal::SIGCONT);
    let resumed = std::time::Instant::now();
    let stepped = child.wait_line_after(
        mark,
        "the child to step down",
        Duration::from_secs(5),
        |l| l.starts_with("stepped_down"),
    );
    eprintln!("resume → step-down line seen: {:?}", resumed.elapsed());
    assert_eq!(
        stepped,
        format!("stepped_down token={child_token} reason=validity_deadline_passed")
    );
    let after: Vec<String> = child.lines()[mark..].to_vec();
    assert!(
        !after.iter().any(|l| l.starts_with("action")),
        "the resumed child acted without its guard refusing: {after:?}"
    );
    eprintln!("the resumed child printed: {after:?}");

    // The follower keeps the lease: the resumed child's renewal could not take it back.
    holds_for(
        "the follower to keep leading",
        &mut follower.status,
        timing().lease_duration * 2,
        |s| matches!(s.role, Role::Leader { .. }),
    )
    .await;
    let holder: String = redis.cmd(&["GET", &key]);
    assert_eq!(leasehold::lease::split_term(&holder).0, follower.owner);
    let late: Vec<String> = child.lines()[mark..].to_vec();
    assert!(
        !late.iter().any(|l| l.starts_with("leader token=")),
        "the resumed child led again: {late:?}"
    );
    assert!(
        late.iter().any(|l| l == "following leader=follower"),
        "the resumed child follows the new leader: {late:?}"
    );
    assert!(!log.lock().unwrap().is_empty(), "the follower acted");
    follower.shutdown().await;
}
