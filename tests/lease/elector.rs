//! The elector against a real redis-server, all contenders in this process: mutual exclusion
//! under contention, graceful handoff well within the TTL (and the polling baseline, which waits
//! for its next poll instead of the release), what an idle leader and follower send, and bad
//! timings refused when the elector is built.

use std::sync::Arc;
use std::time::Duration;

use harness::contenders::{
    ActionLog, Did, acting_contenders, acting_work, assert_no_overlap, fast_timing, handoff_gaps,
    leader_and_follower, lease, shut_down_all, summary, unique_lease, until_leading,
};
use harness::timings::{TEN_SECOND_TERM, TEN_SECOND_TERM_QUICK_RETRY};
use leasehold::elector::Timing;
use testbed::redis_server::{RedisServer, command_calls};
use testbed::wait::{eventually, until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_four_contenders_never_overlap_across_many_handoffs() {
    let redis = RedisServer::start();
    let name = unique_lease("exclusion");
    let log: ActionLog = Arc::default();
    let timing = fast_timing();
    // Each term acts for 40 ms, then hands over.
    let contenders = acting_contenders(
        &redis.url(),
        &name,
        24,
        timing,
        false,
        &log,
        Some(Duration::from_millis(40)),
    );

    eventually("60 terms", Duration::from_secs(60), || async {
        let terms = log
            .lock()
            .unwrap()
            .iter()
            .filter(|a| a.did == Did::End)
            .count();
        (terms >= 60).then_some(())
    })
    .await;
    let (log, tokens) = shut_down_all(contenders, &log).await;
    assert!(tokens.len() >= 60, "{} terms acted", tokens.len());
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "tokens strictly increase"
    );
    // Every term that acted had started; a term may start and not act when the shutdown at
    // the end revokes it between its start and its first check.
    let started: std::collections::HashSet<_> = log
        .iter()
        .filter(|a| a.did == Did::Start)
        .map(|a| a.token)
        .collect();
    assert!(tokens.iter().all(|t| started.contains(t)));
    // At most one such term per contender shut down.
    assert!(
        started.len() <= tokens.len() + 24,
        "{} terms started, {} acted",
        started.len(),
        tokens.len()
    );
    eprintln!("handoff under contention: {}", summary(&handoff_gaps(&log)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_handoff_reaches_a_follower_well_within_the_ttl() {
    let redis = RedisServer::start();
    let name = unique_lease("handoff");
    let log: ActionLog = Arc::default();
    // A long TTL: a handoff that waited for expiry instead of the release would take seconds.
    let timing = TEN_SECOND_TERM;
    let contenders = acting_contenders(
        &redis.url(),
        &name,
        3,
        timing,
        false,
        &log,
        Some(Duration::from_millis(100)),
    );
    eventually("20 handoffs", Duration::from_secs(30), || async {
        (handoff_gaps(&log.lock().unwrap()).len() >= 20).then_some(())
    })
    .await;
    let (log, _) = shut_down_all(contenders, &log).await;
    let gaps = handoff_gaps(&log);
    eprintln!(
        "graceful handoff (work end → next work start): {}",
        summary(&gaps)
    );
    let worst = gaps.iter().max().copied().unwrap_or_default();
    assert!(
        worst < Duration::from_secs(1),
        "a handoff took {worst:?}; the TTL is 10 s"
    );
}

#[test]
fn bad_timings_are_refused_when_the_elector_is_built() {
    let lease = lease("redis://127.0.0.1:1", "test/bad-timing", "pod-a", false);
    let timing = Timing {
        renew_deadline: Duration::from_secs(20),
        ..Timing::default()
    };
    let err = leasehold::elector::Elector::new(lease, timing)
        .err()
        .expect("refused");
    assert_eq!(
        err.to_string(),
        "lease_duration 15s must be greater than renew_deadline 20s (rule: lease duration > renew deadline > retry period × 1.2)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_polling_baseline_waits_for_its_next_poll_instead_of_the_release() {
    // The comparison baseline must behave like client-go: a release wakes nobody.
    let redis = RedisServer::start();
    let name = unique_lease("polling");
    let log: ActionLog = Arc::default();
    let timing = TEN_SECOND_TERM_QUICK_RETRY;
    let spawn = |who: &str, hold| {
        let lease = lease(&redis.url(), &name, who, false);
        let elector = leasehold::elector::Elector::new(lease, timing)
            .unwrap()
            .with_follower_strategy(leasehold::elector::decide::FollowerStrategy::Polling)
            .stop_when_work_ends();
        let status = elector.status();
        let shutdown = tokio_util::sync::CancellationToken::new();
        let work = acting_work(log.clone(), Duration::from_millis(5), hold);
        let task = tokio::spawn(elector.run(shutdown.clone(), work));
        (status, shutdown, task)
    };
    let (mut a_status, a_stop, a_task) = spawn("pod-a", Some(Duration::from_millis(1500)));
    until_leading("a to lead", &mut a_status, Duration::from_secs(5)).await;
    let (mut b_status, b_stop, b_task) = spawn("pod-b", None);
    until_leading(
        "b to lead after a's work ended",
        &mut b_status,
        Duration::from_secs(6),
    )
    .await;
    assert!(
        !b_status.borrow().redis.subscribed,
        "the baseline never subscribes"
    );
    a_stop.cancel();
    b_stop.cancel();
    a_task.await.unwrap();
    b_task.await.unwrap();
    let log = log.lock().unwrap().clone();
    assert_no_overlap(&log);
    let gaps = handoff_gaps(&log);
    // b's next poll picks it up (up to 2.2 retry periods later); the benchmark measures it.
    eprintln!("polling handoff: {}", summary(&gaps));
    assert_eq!(gaps.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_follower_sends_only_its_tries_and_the_leader_only_its_renewals() {
    let redis = RedisServer::start();
    let name = unique_lease("idle-cost");
    let timing = harness::timings::STEADY; // TTL 1.5 s, retry 250 ms
    let (leader, mut follower) = leader_and_follower(
        lease(&redis.url(), &name, "a", false),
        lease(&redis.url(), &name, "b", false),
        timing,
        &ActionLog::default(),
        Duration::from_millis(5),
    )
    .await;
    until(
        "b to follow a, subscribed",
        &mut follower.status,
        Duration::from_secs(5),
        |s| s.leader_identity() == Some("a") && s.redis.subscribed,
    )
    .await;
    // Past the start: the first reads of the eviction policy, b's try on subscribing.
    tokio::time::sleep(timing.lease_duration).await;
    // One INFO commandstats per snapshot, whose own call the next one counts.
    const NAMES: [&str; 4] = ["evalsha", "pexpire", "ping", "info"];
    let calls = |redis: &RedisServer| {
        let calls = command_calls(&redis.cmd::<String>(&["INFO", "commandstats"]));
        NAMES.map(|name| calls.get(name).copied().unwrap_or(0))
    };
    let before = calls(&redis);
    let window = timing.lease_duration * 4;
    tokio::time::sleep(window).await;
    let after = calls(&redis);
    let [evalsha, renewals, pings, info] =
        std::array::from_fn(|i| after[i].saturating_sub(before[i]));
    let tries = evalsha - renewals;
    // The one INFO commandstats of `before`, two INFO inside each try's script (the server's
    // identity) and one inside each renewal's (its role): the rest the electors sent.
    let info_sent = info.saturating_sub(1 + 2 * tries + renewals);
    let counted = format!(
        "over {window:?}: {tries} tries, {renewals} renewals, {pings} PING, {info_sent} INFO sent"
    );
    eprintln!("{counted}");
    assert_eq!(
        pings, 0,
        "no keepalive PING: each try proves the channel; {counted}"
    );
    // About one try per lease duration (at the holder's expiry, which a renewal moves on).
    assert!((3..=6).contains(&tries), "{counted}");
    // About one renewal per retry period.
    let periods = (window.as_millis() / timing.retry_period.as_millis()) as u64;
    assert!(
        renewals.abs_diff(periods) <= 3,
        "{periods} retry periods; {counted}"
    );
    // The leader reads the eviction policy every four lease durations, a follower rarely.
    assert!(info_sent <= 2, "{counted}");
    follower.shutdown().await;
    leader.shutdown().await;
}
