//! The leader's link to Redis goes bad (through a real TCP fault proxy): blackholed, slow, reset.
//! The leader must step down before its validity deadline, and a follower on a good link must
//! take over without overlap. A follower whose release channel alone is blackholed notices at its
//! next try (within a lease duration) and subscribes again.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use harness::contenders::{
    ActionLog, Contender, Did, acting_work, fast_timing, last_valid_until, leader_and_follower,
    lease, record_statuses, shut_down_all, unique_lease, until_leading,
};
use harness::timings::{SIX_SECOND_TERM, TEN_SECOND_TERM_SLOW_RETRY};
use leasehold::clock::BootInstant;
use leasehold::elector::{Role, StepDownReason};
use leasehold::lease::{Acquired, Released};
use testbed::proxy::{Fault, FaultProxy};
use testbed::redis_server::RedisServer;
use testbed::wait::{eventually, holds_for, until};

struct Setup {
    _redis: RedisServer,
    proxy: FaultProxy,
    log: ActionLog,
    leader: Contender,
    follower: Contender,
}

/// A leader that reaches Redis through the proxy, and a follower with a direct link.
async fn leader_behind_proxy(test: &str) -> Setup {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(SocketAddr::from(([127, 0, 0, 1], redis.port())));
    let name = unique_lease(test);
    let log: ActionLog = Arc::default();
    let (leader, follower) = leader_and_follower(
        lease(&proxy.url(), &name, "proxied", false),
        lease(&redis.url(), &name, "direct", false),
        fast_timing(),
        &log,
        Duration::from_millis(2),
    )
    .await;
    Setup {
        _redis: redis,
        proxy,
        log,
        leader,
        follower,
    }
}

/// After a fault: the leader stepped down with `reason` before its last validity deadline,
/// never acted past it, and the follower took over without overlap.
async fn assert_safe_failover(mut setup: Setup, reason: StepDownReason) {
    let history = record_statuses(setup.leader.status.clone());
    let mut status = setup.leader.status.clone();
    let after = until(
        "the leader to step down",
        &mut status,
        Duration::from_secs(3),
        |s| !matches!(s.role, Role::Leader { .. }),
    )
    .await;
    let stepped_at = BootInstant::now();
    assert_eq!(
        after.last_step_down.as_ref().map(|s| s.reason),
        Some(reason),
        "{after:?}"
    );
    let last_valid_until = last_valid_until(&history.lock().unwrap())
        .expect("the history starts with the leader's status");
    assert!(
        stepped_at <= last_valid_until.saturating_add(Duration::from_millis(20)),
        "stepped down late"
    );
    until_leading(
        "the follower to lead",
        &mut setup.follower.status,
        Duration::from_secs(3),
    )
    .await;
    // Its work runs on a task of its own: let it act once before everyone shuts down.
    let new_token = setup.follower.token();
    eventually("the new leader to act", Duration::from_secs(3), || async {
        let log = setup.log.lock().unwrap();
        log.iter()
            .any(|a| Some(a.token) == new_token && a.did == Did::Act)
            .then_some(())
    })
    .await;
    setup.proxy.set(Fault::Pass);
    let (log, tokens) = shut_down_all([setup.leader, setup.follower], &setup.log).await;
    assert_eq!(tokens.len(), 2, "one term each: {tokens:?}");
    let old_last = log
        .iter()
        .filter(|a| a.token == tokens[0] && a.did == Did::Act)
        .map(|a| a.at)
        .max();
    assert!(
        old_last.is_some_and(|last| last < last_valid_until),
        "the old leader acted at {old_last:?}, past its deadline {last_valid_until:?}"
    );
    let new_first = log
        .iter()
        .filter(|a| a.token == tokens[1] && a.did == Did::Act)
        .map(|a| a.at)
        .min();
    eprintln!(
        "{reason}: gap between the old leader's last action and the new leader's first: {:?}",
        new_first
            .zip(old_last)
            .map(|(n, o)| n.saturating_duration_since(o))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blackholed_link_makes_the_leader_step_down_before_its_validity_deadline() {
    let setup = leader_behind_proxy("blackhole").await;
    setup.proxy.set(Fault::Blackhole);
    assert_safe_failover(setup, StepDownReason::RenewDeadlinePassed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_slower_than_the_renew_deadline_makes_the_leader_step_down() {
    let setup = leader_behind_proxy("slow").await;
    // 400 ms each way: every renewal needs 800 ms, the renew deadline is 600 ms.
    setup.proxy.set(Fault::Delay(Duration::from_millis(400)));
    assert_safe_failover(setup, StepDownReason::RenewDeadlinePassed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_too_slow_to_renew_over_does_not_win_the_lease_again_and_again() {
    let redis = RedisServer::start();
    // Load the scripts directly first, so that a call through the proxy is one round trip.
    let warm = lease(&redis.url(), &unique_lease("warm-up"), "warm", false);
    warm.acquire(Duration::from_secs(1), Duration::from_secs(1))
        .await
        .unwrap();
    let proxy = FaultProxy::start(SocketAddr::from(([127, 0, 0, 1], redis.port())));
    // 120 ms each way: a round trip of 240 ms, more than a renewal attempt gets (200 ms with
    // these timings) and less than the 600 ms of a general call. An acquire that took the
    // general bound would win the lease, fail to renew it and step down, over and over.
    proxy.set(Fault::Delay(Duration::from_millis(120)));
    let mut alone = Contender::spawn(
        lease(&proxy.url(), &unique_lease("churn"), "slow", false),
        fast_timing(),
        acting_work(ActionLog::default(), Duration::from_millis(5), None),
    );
    holds_for(
        "the slow contender to stay a follower",
        &mut alone.status,
        Duration::from_secs(4),
        |s| s.transitions == 0,
    )
    .await;
    // A working link: it leads.
    proxy.set(Fault::Pass);
    until_leading(
        "it to lead once the link is fast",
        &mut alone.status,
        Duration::from_secs(5),
    )
    .await;
    alone.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_that_keeps_resetting_makes_the_leader_step_down() {
    let setup = leader_behind_proxy("reset").await;
    setup.proxy.set(Fault::Drop);
    assert_safe_failover(setup, StepDownReason::RenewDeadlinePassed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_but_working_link_keeps_the_leader() {
    let setup = leader_behind_proxy("slow-ok").await;
    // 40 ms each way is slow for loopback, well inside the 150 ms retry period.
    setup.proxy.set(Fault::Delay(Duration::from_millis(40)));
    let history = record_statuses(setup.leader.status.clone());
    let mut status = setup.leader.status.clone();
    let window = tokio::time::timeout(
        Duration::from_secs(3),
        status.wait_for(|s| !matches!(s.role, Role::Leader { .. })),
    )
    .await;
    if window.is_ok() {
        panic!(
            "the proxied leader stopped leading: {:#?}",
            history.lock().unwrap()
        );
    }
    assert!(!setup.follower.is_leader());
    setup.proxy.set(Fault::Pass);
    setup.leader.shutdown().await;
    setup.follower.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_blackhole_within_the_renew_deadline_is_survived() {
    let mut setup = leader_behind_proxy("blip").await;
    setup.proxy.set(Fault::Blackhole);
    let mut status = setup.leader.status.clone();
    until(
        "a renewal to fail",
        &mut status,
        Duration::from_secs(2),
        |s| s.redis.last_error.is_some(),
    )
    .await;
    setup.proxy.set(Fault::Pass);
    until(
        "renewals to succeed again",
        &mut status,
        Duration::from_secs(2),
        |s| s.redis.last_error.is_none(),
    )
    .await;
    holds_for(
        "the leader to keep leading",
        &mut setup.leader.status,
        Duration::from_secs(1),
        |s| matches!(s.role, Role::Leader { .. }),
    )
    .await;
    setup.leader.shutdown().await;
    setup.follower.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_during_an_acquire_in_flight_leaves_no_lease_behind() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(SocketAddr::from(([127, 0, 0, 1], redis.port())));
    let name = unique_lease("shutdown-in-flight");
    let timing = TEN_SECOND_TERM_SLOW_RETRY;
    // b holds the lease (direct link); a follows through the proxy, connected and subscribed.
    let b = lease(&redis.url(), &name, "holder", false);
    let Acquired::Leader(b_grant) = b
        .acquire(timing.lease_duration, Duration::from_secs(1))
        .await
        .unwrap()
    else {
        panic!("b must lead");
    };
    let mut a = Contender::spawn(
        lease(&proxy.url(), &name, "slow", false),
        timing,
        acting_work(ActionLog::default(), Duration::from_millis(5), None),
    );
    until(
        "a to follow b, subscribed",
        &mut a.status,
        Duration::from_secs(5),
        |s| s.leader_identity() == Some("holder") && s.redis.subscribed,
    )
    .await;
    // 300 ms each way from now on: a hears of the release 300 ms after it, and its acquire
    // reaches Redis 300 ms after it is sent.
    proxy.set(Fault::Delay(Duration::from_millis(300)));
    assert_eq!(
        b.release(b_grant.token, Duration::from_secs(1))
            .await
            .unwrap(),
        Released::Released
    );
    // The fault's timing: shut a down while its acquire is on its way to Redis.
    tokio::time::sleep(Duration::from_millis(450)).await;
    a.shutdown().await;
    let key = format!("leasehold:{{{name}}}");
    let left: Option<String> = redis.cmd(&["GET", &key]);
    assert_eq!(
        left, None,
        "the grant that landed after shutdown was given back"
    );
    let fence: u64 = redis.cmd(&["GET", &format!("{key}:fence")]);
    assert!(
        fence > b_grant.token.0,
        "a's acquire did land in Redis (the fence moved past b's token)"
    );
}

/// A holder on a direct link, and a follower that reaches Redis through the proxy, its command
/// connection and, dialled on its own, its pub/sub connection; with the port of the latter.
struct Silenced {
    redis: RedisServer,
    proxy: FaultProxy,
    log: ActionLog,
    /// Until it is shut down.
    leader: Option<Contender>,
    follower: Contender,
    pubsub: u16,
}

async fn follower_with_a_proxied_channel(test: &str) -> Silenced {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(SocketAddr::from(([127, 0, 0, 1], redis.port())));
    let name = unique_lease(test);
    // A lease much longer than the retry period: waiting for the holder's TTL would show.
    let timing = SIX_SECOND_TERM;
    let log: ActionLog = Arc::default();
    let (leader, mut follower) = leader_and_follower(
        lease(&redis.url(), &name, "holder", false),
        lease(&proxy.url(), &name, "behind", false),
        timing,
        &log,
        Duration::from_millis(5),
    )
    .await;
    until(
        "the follower to follow the holder, subscribed",
        &mut follower.status,
        Duration::from_secs(5),
        |s| s.leader_identity() == Some("holder") && s.redis.subscribed,
    )
    .await;
    let pubsub = eventually(
        "the follower's pub/sub connection in CLIENT LIST",
        Duration::from_secs(5),
        || async {
            match redis.subscribed_client_ports(&proxy.upstream_ports())[..] {
                [one] => Some(one),
                _ => None,
            }
        },
    )
    .await;
    // Once subscribed, the follower tries once more (a release may have passed unheard before);
    // let that try and its probe pass, so that the fault below meets a quiet subscription. The
    // fault's timing, not an assertion.
    tokio::time::sleep(Duration::from_millis(100)).await;
    Silenced {
        redis,
        proxy,
        log,
        leader: Some(leader),
        follower,
        pubsub,
    }
}

impl Silenced {
    /// Resolves once the follower is subscribed on a pub/sub connection other than the first.
    async fn subscribed_anew(&self, within: Duration) {
        eventually(
            "the follower to subscribe again on a fresh connection",
            within,
            || async {
                let now = self
                    .redis
                    .subscribed_client_ports(&self.proxy.upstream_ports());
                now.iter().any(|port| *port != self.pubsub).then_some(())
            },
        )
        .await;
    }

    /// Shuts the holder down, and returns what it takes for the follower to lead after that.
    async fn release_and_follow(&mut self, within: Duration) -> Duration {
        let released = BootInstant::now();
        if let Some(leader) = self.leader.take() {
            leader.shutdown().await;
        }
        let mut status = self.follower.status.clone();
        until_leading(
            "the follower to take over the released lease",
            &mut status,
            within,
        )
        .await;
        BootInstant::now().saturating_duration_since(released)
    }

    async fn finish(self) {
        shut_down_all(std::iter::once(self.follower).chain(self.leader), &self.log).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_whose_release_channel_went_silent_takes_over_within_a_lease_duration() {
    let mut setup = follower_with_a_proxied_channel("silent-channel").await;
    // Its pub/sub link alone goes silent; its command link stays fine. The release is not heard:
    // the follower's next try, at the holder's expiry by its own clock, finds the lease free.
    setup.proxy.set_one(setup.pubsub, Fault::Blackhole);
    let took = setup
        .release_and_follow(SIX_SECOND_TERM.lease_duration + Duration::from_secs(1))
        .await;
    eprintln!("release with the follower's channel blackholed → follower leads after {took:?}");
    // That try's probe went unheard: the subscription is made anew.
    setup.subscribed_anew(Duration::from_secs(3)).await;
    setup.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_release_channel_is_made_anew_by_the_next_try_before_a_handoff_needs_it() {
    let mut setup = follower_with_a_proxied_channel("silent-repaired").await;
    setup.proxy.set_one(setup.pubsub, Fault::Blackhole);
    // The follower's next try comes within a lease duration (at the holder's expiry); its probe
    // is not heard back, and the follower subscribes again.
    setup
        .subscribed_anew(SIX_SECOND_TERM.lease_duration + Duration::from_secs(2))
        .await;
    let mut status = setup.follower.status.clone();
    until(
        "the follower's new subscription",
        &mut status,
        Duration::from_secs(2),
        |s| s.redis.subscribed,
    )
    .await;
    // A graceful handoff now is heard at once, not at the holder's expiry.
    let took = setup
        .release_and_follow(SIX_SECOND_TERM.retry_period + Duration::from_secs(1))
        .await;
    eprintln!("release after the channel was made anew → follower leads after {took:?}");
    setup.finish().await;
}
