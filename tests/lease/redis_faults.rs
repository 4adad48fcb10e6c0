//! The elector when Redis is not as it left it, against a real redis-server with all contenders
//! in this process: a fresh Redis (nobody leads during the cooldown), Redis gone (the leader
//! steps down before its deadline) and back empty (a higher token, after the cooldown), the
//! lease overwritten by someone else (a step-down with reason lost), a key of the wrong type
//! (in the status, and nobody leads), a failover behind one address (the term goes on), and too
//! few replicas acknowledging each win (tried at the retry period, not at each give-back).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use harness::contenders::{
    ActionLog, Contender, Did, acting_contenders, acting_work, fast_timing, last_valid_until,
    lease, record_statuses, shut_down_all, unique_lease, until_leading, until_led_by,
};
use leasehold::clock::BootInstant;
use leasehold::elector::{Role, StepDownReason};
use testbed::proxy::FaultProxy;
use testbed::redis_server::RedisServer;
use testbed::wait::{eventually, until};

fn leader_of(contenders: &[Contender]) -> Option<usize> {
    let leaders: Vec<usize> = (0..contenders.len())
        .filter(|&i| contenders[i].is_leader())
        .collect();
    assert!(leaders.len() <= 1, "two leaders at once: {leaders:?}");
    leaders.first().copied()
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
    // Nor does a follower name one once the TTL it last saw, plus a lease duration for a renewal
    // just before it, has run out unconfirmed: it named the old leader (in `/leader`,
    // `leasehold_leader`) for as long as Redis stayed away.
    for (i, contender) in contenders.iter().enumerate() {
        let mut status = contender.status.clone();
        until(
            &format!("contender {i} to name no leader"),
            &mut status,
            timing.lease_duration * 4,
            |s| matches!(&s.role, Role::Follower { leader: None, .. }),
        )
        .await;
    }

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
    shut_down_all(contenders, &log).await;
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

/// A failover behind one address (a Service or a cloud endpoint that moves to the promoted
/// replica): the leader's kept connection still reaches the old master, now a replica that
/// answers READONLY, while a fresh dial reaches the new master, which holds the replicated
/// term. The leader renews there and keeps its term, instead of stepping down as refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_behind_one_address_keeps_the_leaders_term() {
    failover_behind_one_address(|old, new| {
        old.cmd::<String>(&["REPLICAOF", "127.0.0.1", &new.port().to_string()]);
    })
    .await;
}

/// The same, with the old master cut off from every master and told not to serve stale data:
/// it answers MASTERDOWN, as much a replica's word as READONLY. The leader kept that connection
/// and renewed on it until its renew deadline, then stepped down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_behind_one_address_to_a_cut_off_old_master_keeps_the_leaders_term() {
    failover_behind_one_address(|old, _| {
        old.cmd::<String>(&["CONFIG", "SET", "replica-serve-stale-data", "no"]);
        // Port 1: nothing listens there (no test binds a port below 1024).
        old.cmd::<String>(&["REPLICAOF", "127.0.0.1", "1"]);
    })
    .await;
}

/// A leader on `old` behind one address, which then moves to `new`, its replica promoted, once
/// `demote` has made `old` a replica: the term lives on.
async fn failover_behind_one_address(demote: impl Fn(&RedisServer, &RedisServer)) {
    // Its replica syncs at once, not after the default 5 s wait for more replicas.
    let old = RedisServer::builder()
        .args(["--repl-diskless-sync-delay", "0"])
        .start();
    let port = old.port().to_string();
    let new = RedisServer::builder()
        .args(["--replicaof", "127.0.0.1", &port])
        .start();
    let proxy = FaultProxy::start(old.addr());
    let name = unique_lease("failover-one-address");
    let log: ActionLog = Arc::default();
    let c = Contender::spawn(
        lease(&proxy.url(), &name, "pod-a", false),
        fast_timing(),
        acting_work(log.clone(), Duration::from_millis(5), None),
    );
    let mut status = c.status.clone();
    let led = until_leading("a to lead", &mut status, Duration::from_secs(5)).await;
    let key = format!("leasehold:{{{name}}}");
    eventually(
        "the term on the replica",
        Duration::from_secs(5),
        || async { new.cmd::<Option<String>>(&["GET", &key]) },
    )
    .await;
    // The replica is promoted, the old master follows it, and the address moves.
    new.cmd::<String>(&["REPLICAOF", "NO", "ONE"]);
    demote(&old, &new);
    proxy.point_new_connections_at(new.addr());
    let moved = BootInstant::now();
    // Only a renewal sent after the move extends the term a whole lease duration past it.
    let ttl = fast_timing().lease_duration;
    let after = until(
        "a renewal after the move, or a step-down",
        &mut status,
        Duration::from_secs(5),
        |s| match s.role {
            Role::Leader { valid_until, .. } => valid_until > moved.saturating_add(ttl),
            _ => true,
        },
    )
    .await;
    assert_eq!(after.last_step_down, None, "{after:?}");
    assert_eq!(after.token(), led.token(), "{after:?}");
    let held: Option<String> = new.cmd(&["GET", &key]);
    assert!(
        held.is_some_and(|v| v.starts_with(&c.owner)),
        "the term lives on"
    );
    shut_down_all([c], &log).await;
}

/// Redis errors of the acquire, by the boot-clock instant each was told.
#[derive(Default)]
struct AcquireErrors(Mutex<Vec<BootInstant>>);

impl leasehold::elector::TermHooks for AcquireErrors {
    fn redis_error(&self, op: &'static str, _error: &leasehold::lease::LeaseError) {
        if op == "acquire" {
            self.0.lock().unwrap().push(BootInstant::now());
        }
    }
}

/// With `--redis-wait-replicas` unmet, each win is given back, and its release announced: the
/// follower tried again at that announcement of its own, once per `WAIT` timeout (100 ms here)
/// rather than once per retry period (1 s), a term and a token burned at each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_few_replicas_are_tried_again_at_the_retry_period_not_at_each_give_back() {
    use leasehold::lease::{LeaseOptions, WaitReplicas};
    let redis = RedisServer::start();
    let options = LeaseOptions {
        cooldown_on_data_loss: false,
        wait_replicas: Some(WaitReplicas {
            replicas: 1,
            timeout: Duration::from_millis(100),
        }),
        ..LeaseOptions::default()
    };
    let lease = harness::contenders::lease_with(
        &redis.url(),
        &unique_lease("too-few-replicas"),
        "pod-a",
        options,
    );
    let errors = Arc::new(AcquireErrors::default());
    let timing = harness::timings::THREE_SECOND_TERM;
    let elector = leasehold::elector::Elector::new(lease, timing)
        .unwrap()
        .with_hooks(errors.clone());
    let a = Contender::spawn_elector(elector, harness::contenders::idle);
    let seen = eventually("four refused tries", Duration::from_secs(15), || async {
        let seen = errors.0.lock().unwrap().clone();
        (seen.len() >= 4).then_some(seen)
    })
    .await;
    // The release channel, subscribed after the first try, wakes the follower once (a release
    // may have gone unheard before): the gaps after the second try are the retries.
    for pair in seen[1..].windows(2) {
        let gap = pair[1].saturating_duration_since(pair[0]);
        assert!(
            gap >= timing.retry_period,
            "tried again {gap:?} after a refused try, within the retry period: {seen:?}"
        );
    }
    a.shutdown().await;
}

/// Renewals that Redis refuses with a passing error (`NOREPLICAS` below `min-replicas-to-write`)
/// end the term at the renew deadline; the step-down says what the last renewal heard, where it
/// used to say nothing (the cause only in an earlier warning, and `redis_up` stays 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_term_that_could_not_renew_says_what_the_last_renewal_heard() {
    let redis = RedisServer::start();
    let mut a = Contender::spawn(
        lease(
            &redis.url(),
            &unique_lease("renew-refused-why"),
            "pod-a",
            false,
        ),
        fast_timing(),
        harness::contenders::idle,
    );
    until_leading("a to lead", &mut a.status, Duration::from_secs(5)).await;
    redis.cmd::<String>(&["CONFIG", "SET", "min-replicas-to-write", "1"]);
    let step = harness::contenders::until_stepped_down(
        "a's term to end",
        &mut a.status,
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(step.reason, StepDownReason::RenewDeadlinePassed);
    let detail = step.detail.unwrap_or_default();
    assert!(
        detail.starts_with("the last renewal failed: ") && detail.contains("NOREPLICAS"),
        "{detail}"
    );
    a.shutdown().await;
}
