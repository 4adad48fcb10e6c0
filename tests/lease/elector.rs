//! The elector against a real redis-server, all contenders in this process: mutual exclusion
//! under contention, graceful handoff, step-down on work end, panic and shutdown, Redis going
//! away and coming back empty.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use harness::contenders::{
    ActionLog, Contender, Did, acting_contenders, acting_work, assert_no_overlap, fast_timing,
    handoff_gaps, last_valid_until, leader_and_follower, lease, record_statuses, summary,
    unique_lease, until_leading, until_led_by,
};
use harness::timings::{TEN_SECOND_TERM, TEN_SECOND_TERM_QUICK_RETRY};
use leasehold::clock::BootInstant;
use leasehold::elector::{Leadership, Role, StepDownReason, Timing};
use testbed::redis_server::{RedisServer, command_calls};
use testbed::wait::{eventually, until};

fn leader_of(contenders: &[Contender]) -> Option<usize> {
    let leaders: Vec<usize> = (0..contenders.len())
        .filter(|&i| contenders[i].is_leader())
        .collect();
    assert!(leaders.len() <= 1, "two leaders at once: {leaders:?}");
    leaders.first().copied()
}

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
    for c in contenders {
        c.shutdown().await;
    }
    let log = log.lock().unwrap().clone();
    let tokens = assert_no_overlap(&log);
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
    for c in contenders {
        c.shutdown().await;
    }
    let log = log.lock().unwrap().clone();
    assert_no_overlap(&log);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_releases_the_lease_and_a_follower_takes_over_at_once() {
    let redis = RedisServer::start();
    let name = unique_lease("shutdown");
    let log: ActionLog = Arc::default();
    let timing = TEN_SECOND_TERM;
    let (a, mut b) = leader_and_follower(
        lease(&redis.url(), &name, "pod-a", false),
        lease(&redis.url(), &name, "pod-b", false),
        timing,
        &log,
        Duration::from_millis(5),
    )
    .await;
    let a_status = a.status.clone();

    let stopped_at = BootInstant::now();
    a.shutdown().await;
    let a_final = a_status.borrow().clone();
    assert_eq!(a_final.role, Role::Stopped);
    assert_eq!(
        a_final.last_step_down.as_ref().map(|s| s.reason),
        Some(StepDownReason::Shutdown)
    );
    until_leading("b to lead", &mut b.status, Duration::from_secs(3)).await;
    let took = BootInstant::now().saturating_duration_since(stopped_at);
    eprintln!("shutdown → follower leads: {took:?}");
    assert!(
        took < Duration::from_secs(3),
        "took {took:?}; expiry would take up to 10 s"
    );
    b.shutdown().await;
    assert_no_overlap(&log.lock().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_that_ends_fails_or_panics_steps_down_and_releases() {
    let redis = RedisServer::start();
    let name = unique_lease("work-ends");
    let terms = Arc::new(AtomicU32::new(0));
    let counter = terms.clone();
    let work = move |leadership: Leadership| {
        let term = counter.fetch_add(1, Ordering::SeqCst);
        async move {
            match term {
                0 => Ok(()),
                1 => Err(format!(
                    "reconcile failed with token {}",
                    leadership.token()
                )),
                2 => panic!("boom in term {term}"),
                _ => {
                    leadership.lost().await;
                    Ok(())
                }
            }
        }
    };
    let c = Contender::spawn(
        lease(&redis.url(), &name, "pod-a", false),
        fast_timing(),
        work,
    );
    let history = record_statuses(c.status.clone());
    let mut status = c.status.clone();
    until("a fourth term", &mut status, Duration::from_secs(10), |s| {
        matches!(s.role, Role::Leader { .. }) && s.transitions >= 7
    })
    .await;
    let steps: Vec<(StepDownReason, Option<String>)> = {
        let mut seen = Vec::new();
        for (_, s) in history.lock().unwrap().iter() {
            if let Some(step) = &s.last_step_down {
                let entry = (step.reason, step.detail.clone());
                if seen.last() != Some(&entry) {
                    seen.push(entry);
                }
            }
        }
        seen
    };
    assert_eq!(steps.len(), 3, "{steps:?}");
    assert_eq!(steps[0].0, StepDownReason::WorkEnded);
    assert_eq!(steps[1].0, StepDownReason::WorkFailed);
    assert!(
        steps[1]
            .1
            .as_deref()
            .unwrap_or("")
            .starts_with("reconcile failed with token")
    );
    assert_eq!(steps[2].0, StepDownReason::WorkPanicked);
    assert_eq!(steps[2].1.as_deref(), Some("boom in term 2"));
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_leads_during_the_cooldown_of_a_fresh_redis() {
    let redis = RedisServer::start();
    let name = unique_lease("fresh");
    let log: ActionLog = Arc::default();
    let timing = fast_timing();
    let started = BootInstant::now();
    let contenders = acting_contenders(&redis.url(), &name, 3, timing, true, &log, None);
    // The status says "leader" before the work's first entry: wait for the entry itself.
    let first = eventually(
        "a leader's first act after the cooldown",
        Duration::from_secs(5),
        || async { log.lock().unwrap().first().copied() },
    )
    .await;
    let waited = first.at.saturating_duration_since(started);
    eprintln!(
        "first election on a fresh redis after {waited:?} (lease duration {:?})",
        timing.lease_duration
    );
    assert!(
        waited >= timing.lease_duration,
        "led after {waited:?}, inside the cooldown"
    );
    for c in contenders {
        c.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_going_away_makes_the_leader_step_down_and_an_empty_restart_elects_again() {
    let mut redis = RedisServer::start();
    let name = unique_lease("redis-down");
    let log: ActionLog = Arc::default();
    let timing = fast_timing();
    let contenders = acting_contenders(&redis.url(), &name, 3, timing, true, &log, None);
    let first = eventually("a first leader", Duration::from_secs(5), || async {
        leader_of(&contenders)
    })
    .await;
    let first_token = contenders[first].token().expect("leader token");
    let history = record_statuses(contenders[first].status.clone());

    redis.kill();
    let killed_at = BootInstant::now();
    let mut status = contenders[first].status.clone();
    let after = until(
        "the leader to step down",
        &mut status,
        timing.lease_duration * 2,
        |s| !matches!(s.role, Role::Leader { .. }),
    )
    .await;
    // Taken right after the wait saw the step-down: an upper bound of the step-down instant.
    let stepped = BootInstant::now();
    let step = after.last_step_down.expect("a step-down");
    assert_eq!(step.reason, StepDownReason::RenewDeadlinePassed, "{step:?}");
    let last_valid_until = last_valid_until(&history.lock().unwrap()).expect("a leader status");
    assert!(
        stepped < last_valid_until,
        "stepped down at {stepped:?}, deadline {last_valid_until:?}"
    );
    let last_act = log
        .lock()
        .unwrap()
        .iter()
        .filter(|a| a.token == first_token && a.did == Did::Act)
        .map(|a| a.at)
        .max()
        .expect("actions");
    assert!(
        last_act < last_valid_until,
        "acted at {last_act:?} past the deadline {last_valid_until:?}"
    );
    eprintln!(
        "redis killed → leader stepped down after {:?}",
        stepped.saturating_duration_since(killed_at)
    );
    assert_eq!(leader_of(&contenders), None, "nobody leads without redis");

    redis.restart_empty();
    let restarted_at = BootInstant::now();
    let second = eventually(
        "a leader on the restarted redis",
        Duration::from_secs(10),
        || async { leader_of(&contenders) },
    )
    .await;
    let second_token = contenders[second].token().expect("token");
    assert!(second_token > first_token, "{second_token} > {first_token}");
    // The token is seen as soon as the term starts; its work may not have had a turn yet.
    let first_act = eventually(
        "the new leader's first action",
        Duration::from_secs(5),
        || async {
            log.lock()
                .unwrap()
                .iter()
                .filter(|a| a.token == second_token)
                .map(|a| a.at)
                .min()
        },
    )
    .await;
    let waited = first_act.saturating_duration_since(restarted_at);
    assert!(
        waited >= timing.lease_duration - Duration::from_millis(50),
        "led {waited:?} after the empty restart: inside the cooldown"
    );
    for c in contenders {
        c.shutdown().await;
    }
    assert_no_overlap(&log.lock().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stolen_lease_makes_the_leader_step_down_with_reason_lost() {
    let redis = RedisServer::start();
    let name = unique_lease("stolen");
    let log: ActionLog = Arc::default();
    let c = Contender::spawn(
        lease(&redis.url(), &name, "pod-a", false),
        fast_timing(),
        acting_work(log.clone(), Duration::from_millis(5), None),
    );
    let mut status = c.status.clone();
    until_leading("a to lead", &mut status, Duration::from_secs(5)).await;
    let key = c.status.borrow().lease.clone();
    // Someone overwrites the lease (an operator, or a Redis that lost and re-gained the key).
    redis.cmd::<String>(&[
        "SET",
        &format!("leasehold:{{{key}}}"),
        "intruder",
        "PX",
        "60000",
    ]);
    let after = until("a to step down", &mut status, Duration::from_secs(2), |s| {
        !matches!(s.role, Role::Leader { .. })
    })
    .await;
    assert_eq!(
        after.last_step_down.map(|s| s.reason),
        Some(StepDownReason::Lost)
    );
    until_led_by(
        "a to see the intruder",
        &mut status,
        Duration::from_secs(2),
        "intruder",
    )
    .await;
    c.shutdown().await;
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
async fn a_key_of_the_wrong_type_shows_in_the_status_and_nobody_leads() {
    let redis = RedisServer::start();
    let name = unique_lease("wrongtype-elector");
    redis.cmd::<i64>(&["LPUSH", &format!("leasehold:{{{name}}}"), "x"]);
    let c = Contender::spawn(
        lease(&redis.url(), &name, "pod-a", false),
        fast_timing(),
        acting_work(
            Arc::new(Mutex::new(Vec::new())),
            Duration::from_millis(5),
            None,
        ),
    );
    let mut status = c.status.clone();
    let s = until(
        "the error in the status",
        &mut status,
        Duration::from_secs(5),
        |s| s.redis.last_error.is_some(),
    )
    .await;
    let error = s.redis.last_error.unwrap();
    assert!(error.contains("not a string"), "{error}");
    // Redis answered, with a refusal: reachable, and the error says what it refuses.
    assert!(s.redis.reachable);
    assert!(!matches!(s.role, Role::Leader { .. }));
    c.shutdown().await;
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
            .with_follower_strategy(leasehold::elector::benchmark_only::FollowerStrategy::Polling)
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
    // The one INFO commandstats of `before`, and two INFO inside each try's script (the
    // server's identity): the rest the electors sent.
    let info_sent = info.saturating_sub(1 + 2 * tries);
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
