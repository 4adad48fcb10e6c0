//! Two leaders in ways the lease's own model did not try: a release from an old term landing
//! late, the lease key vanishing before its time (an operator's `DEL`, `FLUSHDB`, eviction under
//! `maxmemory`), a suspend that tokio's timers do not see, and work that fails at once. Each
//! against a real redis-server, with in-process contenders that act through their guard.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use harness::clock::ShiftedClock;
use harness::contenders::{
    ActionLog, ChildContender, Contender, Did, acting_work, fast_timing, lease, lease_on_clock,
    shut_down_all, unique_lease, until_leading, until_led_by,
};
use harness::timings::{FIFTEEN_SECOND_TERM, TEN_SECOND_TERM_SLOW_RETRY, THREE_SECOND_TERM};
use leasehold::clock::{BootInstant, WallLead};
use leasehold::elector::decide::FollowerStrategy;
use leasehold::elector::{Elector, Leadership, NotLeader, Role, Timing};
use leasehold::lease::{Acquired, LeaseError, Released};
use testbed::proxy::{Fault, FaultProxy};
use testbed::redis_server::RedisServer;
use testbed::wait::{eventually, until};

/// A leader that renews only every second: after its lease vanished, it notices late, so a
/// replica that takes the lease at once overlaps it for certain.
fn slow_renewing() -> Timing {
    THREE_SECOND_TERM
}

const ACT_EVERY: Duration = Duration::from_millis(5);

fn acting(
    log: &ActionLog,
) -> impl FnMut(
    Leadership,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send>>
+ Send
+ 'static {
    acting_work(log.clone(), ACT_EVERY, None)
}

/// A contender with the data-loss cooldown on, acting through its guard into `log`.
fn acting_replica(
    redis: &RedisServer,
    name: &str,
    identity: &str,
    timing: Timing,
    log: &ActionLog,
) -> Contender {
    Contender::spawn(
        lease(&redis.url(), name, identity, true),
        timing,
        acting(log),
    )
}

/// Every 2 ms for `window`, how many of `contenders` claim leadership; panics at the first
/// sample with two.
async fn never_two_leaders(contenders: &[&Contender], window: Duration) {
    let until = tokio::time::Instant::now() + window;
    while tokio::time::Instant::now() < until {
        let (now, lead) = (BootInstant::now(), WallLead::now());
        let leading: Vec<&str> = contenders
            .iter()
            .filter(|c| c.status.borrow().is_leading_at(now, lead))
            .map(|c| c.identity.as_str())
            .collect();
        assert!(leading.len() <= 1, "two leaders at once: {leading:?}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

async fn wait_leader(c: &Contender) -> leasehold::lease::FencingToken {
    let mut status = c.status.clone();
    let s = until_leading("a leader", &mut status, Duration::from_secs(10)).await;
    match s.role {
        Role::Leader { token, .. } => token,
        _ => unreachable!(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_release_cannot_delete_the_next_term_of_the_same_process() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(std::net::SocketAddr::from(([127, 0, 0, 1], redis.port())));
    let name = unique_lease("late-release");
    let a = lease(&proxy.url(), &name, "pod-a", false);
    let b = lease(&redis.url(), &name, "pod-b", false);
    let ttl = Duration::from_secs(5);
    let call = Duration::from_millis(300);

    let Acquired::Leader(term1) = a.acquire(ttl, call).await.unwrap() else {
        panic!("a leads its first term");
    };
    // The release script is in Redis's cache (b's release of a lease it does not hold), so the
    // late release runs as it lands instead of asking for the script.
    assert_eq!(
        b.release(term1.token, call).await.unwrap(),
        Released::NotHeld
    );
    // The link slows beyond the call timeout: the release times out on the client, but its
    // bytes are on their way and will land.
    proxy.set(Fault::Delay(Duration::from_millis(1200)));
    let calls_before = redis.calls("evalsha");
    let late = a.release(term1.token, call).await;
    assert!(matches!(late, Err(LeaseError::Timeout { .. })), "{late:?}");
    // The link heals; the same process wins its next term before the old release lands.
    proxy.set(Fault::Pass);
    let term2 = match a.acquire(ttl, Duration::from_secs(2)).await.unwrap() {
        Acquired::Leader(grant) => grant.token,
        other => panic!("a must lead its second term, got {other:?}"),
    };
    eventually(
        "the late release to land",
        Duration::from_secs(5),
        || async { (redis.calls("evalsha") >= calls_before + 2).then_some(()) },
    )
    .await;
    // Term 2 must be untouched: nobody else can take it, and it still renews.
    match b.acquire(ttl, call).await.unwrap() {
        Acquired::HeldBy(holder) => assert_eq!(holder.token, Some(term2)),
        other => panic!("the late release of term 1 freed term 2: b got {other:?}"),
    }
    assert!(matches!(
        a.renew(term2, ttl, call).await.unwrap(),
        leasehold::lease::Renewed::Held(_)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_lease_is_not_taken_by_a_fresh_replica_while_its_holder_is_valid() {
    let redis = RedisServer::start();
    let name = unique_lease("deleted");
    let log: ActionLog = Arc::default();
    let a = acting_replica(&redis, &name, "pod-a", slow_renewing(), &log);
    let token = wait_leader(&a).await;
    let key = a_key(&name);
    // An operator deletes the lease; a replica starts at that very moment.
    assert_eq!(redis.cmd::<i64>(&["DEL", &key]), 1);
    let c = acting_replica(&redis, &name, "pod-c", fast_timing(), &log);
    never_two_leaders(&[&a, &c], Duration::from_millis(3500)).await;
    // The holder repaired its lease on renewal: no leader change at all.
    assert_eq!(a.token(), Some(token), "the holder keeps its term");
    let stored: String = redis.cmd(&["GET", &key]);
    assert!(
        stored.starts_with(&a.owner),
        "the lease key is back: {stored}"
    );
    shut_down_all([c, a], &log).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flushed_lease_is_not_taken_by_a_follower_before_the_ttl_it_observed() {
    let redis = RedisServer::start();
    let name = unique_lease("flushed");
    let log: ActionLog = Arc::default();
    let a = acting_replica(&redis, &name, "pod-a", slow_renewing(), &log);
    wait_leader(&a).await;
    // A follower that polls (client-go's way) and does not cool down after data loss: only the
    // TTL it saw protects the holder once the whole database is gone.
    let b = Contender::spawn_elector(
        Elector::new(lease(&redis.url(), &name, "pod-b", false), fast_timing())
            .unwrap()
            .with_follower_strategy(FollowerStrategy::Polling),
        acting(&log),
    );
    let mut seen = b.status.clone();
    until_led_by(
        "b to see a lead",
        &mut seen,
        Duration::from_secs(10),
        "pod-a",
    )
    .await;
    redis.cmd::<String>(&["FLUSHDB"]);
    never_two_leaders(&[&a, &b], Duration::from_millis(3500)).await;
    // With the lease gone for good, someone leads again (after the cooldown that a starts).
    eventually(
        "a leader after the flush",
        Duration::from_secs(15),
        || async { (a.is_leader() || b.is_leader()).then_some(()) },
    )
    .await;
    shut_down_all([b, a], &log).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_under_maxmemory_never_makes_two_leaders() {
    let redis = RedisServer::builder()
        .args(["--maxmemory", "3mb", "--maxmemory-policy", "volatile-ttl"])
        .start();
    let name = unique_lease("evicted");
    let log: ActionLog = Arc::default();
    let a = acting_replica(&redis, &name, "pod-a", slow_renewing(), &log);
    wait_leader(&a).await;
    let b = acting_replica(&redis, &name, "pod-b", fast_timing(), &log);
    let c = acting_replica(&redis, &name, "pod-c", fast_timing(), &log);

    // A flood of keys with long TTLs: under volatile-ttl the lease (the nearest expiry) goes
    // first, every time memory runs out.
    let flooding = Arc::new(AtomicBool::new(true));
    let flood = {
        let flooding = flooding.clone();
        let mut conn = redis.connection();
        std::thread::spawn(move || {
            let script = redis::Script::new(
                "for i = 1, 100 do redis.call('SET', ARGV[1] .. i, string.rep('x', 2000), 'EX', 3600) end return 1",
            );
            let mut round = 0u64;
            while flooding.load(Ordering::Relaxed) {
                round += 1;
                let _: redis::RedisResult<i64> =
                    script.arg(format!("flood:{round}:")).invoke(&mut conn);
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    never_two_leaders(&[&a, &b, &c], Duration::from_secs(4)).await;
    flooding.store(false, Ordering::Relaxed);
    flood.join().unwrap();
    let info: String = redis.cmd(&["INFO", "stats"]);
    let evicted: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("evicted_keys:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(evicted > 0, "the flood evicted nothing:\n{info}");
    let (_, tokens) = shut_down_all([c, b, a], &log).await;
    eprintln!(
        "eviction: {evicted} keys evicted; terms that acted: {}",
        tokens.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspend_ends_the_term_at_its_deadline_without_waiting_for_a_timer() {
    let redis = RedisServer::start();
    let clock = ShiftedClock::new();
    // The watchdog sleeps 5 s between renewals: on tokio's clock, a suspend would end the term
    // only when that sleep is over.
    let timing = FIFTEEN_SECOND_TERM;
    let log: ActionLog = Arc::default();
    let a = Contender::spawn(
        lease_on_clock(&redis.url(), &unique_lease("suspend"), "pod-a", &clock),
        timing,
        acting(&log),
    );
    let token = wait_leader(&a).await;
    // The machine "sleeps" for a minute: the boot clock jumps, tokio's timers do not see it.
    let resumed = BootInstant::now();
    clock.advance(Duration::from_secs(60));
    let mut status = a.status.clone();
    until(
        "the term to end",
        &mut status,
        Duration::from_secs(10),
        |s| !matches!(s.role, Role::Leader { token: t, .. } if t == token),
    )
    .await;
    let late = BootInstant::now().saturating_duration_since(resumed);
    eprintln!("suspend: the term ended {late:?} after resume");
    assert!(
        late < Duration::from_secs(1),
        "the term ended {late:?} after resume, on the next tokio timer instead of at once"
    );
    let reason = status.borrow().last_step_down.as_ref().map(|d| d.reason);
    assert_eq!(
        reason,
        Some(leasehold::elector::StepDownReason::ValidityDeadlinePassed)
    );
    a.shutdown().await;
}

/// `check()` reads the clock itself: after a suspend, or a pause the boot clock did not count,
/// that outlasted the term, it refuses at once, before the watchdog has run (on this one thread
/// nothing else runs between the jump and the check); an unseen pause shorter than the term
/// shortens what is left, and the term goes on.
#[tokio::test]
async fn check_refuses_at_once_after_a_suspend_or_an_unseen_pause_that_outlasted_the_term() {
    let redis = RedisServer::start();
    for (name, suspend) in [("check-suspend", true), ("check-unseen", false)] {
        let clock = ShiftedClock::new();
        let (tx, mut terms) = tokio::sync::mpsc::unbounded_channel();
        let a = Contender::spawn(
            lease_on_clock(&redis.url(), &unique_lease(name), "pod-a", &clock),
            FIFTEEN_SECOND_TERM,
            move |l: Leadership| {
                let _ = tx.send(l.clone());
                async move {
                    l.lost().await;
                    Ok(())
                }
            },
        );
        let l = tokio::time::timeout(Duration::from_secs(10), terms.recv())
            .await
            .expect("a term within 10 s")
            .expect("its leadership");
        let token = l.check().expect("valid once it leads");
        // Past the 15 s term by at least this much at the check.
        let late_by = if suspend {
            clock.advance(Duration::from_secs(60));
            Duration::from_secs(45)
        } else {
            let left = l.remaining();
            clock.pass_unseen(Duration::from_secs(4));
            assert_eq!(l.check(), Ok(token), "{name}");
            // (The wall clock's lead is read between two reads of the boot clock: a thread
            // preempted in between moves it by half the preemption.)
            let shortened = left.saturating_sub(l.remaining());
            assert!(
                shortened >= Duration::from_millis(3_500),
                "{name}: {shortened:?}"
            );
            clock.pass_unseen(Duration::from_secs(12));
            Duration::from_secs(1)
        };
        let refused = l.check();
        assert!(
            matches!(refused, Err(NotLeader::ValidityDeadlinePassed { late, .. }) if late >= late_by),
            "{name}: {refused:?}"
        );
        let words = refused.unwrap_err().to_string();
        assert!(words.contains("validity deadline passed"), "{words}");
        assert_eq!(l.remaining(), Duration::ZERO, "{name}");
        a.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_that_fails_at_once_does_not_spin_through_terms() {
    let redis = RedisServer::start();
    let name = unique_lease("spin");
    let log: ActionLog = Arc::default();
    let work = {
        let log = log.clone();
        move |l: Leadership| {
            let log = log.clone();
            async move {
                log.lock().unwrap().push(harness::contenders::Action {
                    token: l.token(),
                    at: BootInstant::now(),
                    did: Did::Start,
                });
                Err::<(), String>("cannot start".into())
            }
        }
    };
    let timing = fast_timing();
    let a = Contender::spawn(lease(&redis.url(), &name, "pod-a", false), timing, work);
    let window = Duration::from_millis(1500);
    eventually("a first term", Duration::from_secs(5), || async {
        (!log.lock().unwrap().is_empty()).then_some(())
    })
    .await;
    tokio::time::sleep(window).await; // the window we count terms in, not an assertion's wait
    let terms = log.lock().unwrap().len();
    a.shutdown().await;
    let most = (window.as_millis() / timing.retry_period.as_millis()) as usize + 2;
    eprintln!("failing work: {terms} terms in {window:?}");
    assert!(
        terms <= most,
        "{terms} terms in {window:?}: at most {most} with a pause of a retry period between terms"
    );
}

fn a_key(name: &str) -> String {
    format!("leasehold:{{{name}}}")
}

/// TTL 2 s, renew deadline 1.4 s, retry 400 ms: a contender configured much shorter than
/// [`TEN_SECOND_TERM_SLOW_RETRY`], as in a rolling change of `--lease-duration` or a
/// `leasehold lock` beside a Deployment configured longer.
const SHORT: Timing = Timing {
    lease_duration: Duration::from_secs(2),
    renew_deadline: Duration::from_millis(1400),
    retry_period: Duration::from_millis(400),
    drift_factor: 0.01,
};

/// Waits until `c` renewed (its validity deadline moved), so that a fault right after it falls
/// as far from its next renewal as the retry period allows.
async fn just_renewed(c: &Contender) {
    let mut status = c.status.clone();
    let before = status.borrow().role.clone();
    until("a renewal", &mut status, Duration::from_secs(10), |s| {
        matches!(s.role, Role::Leader { .. }) && s.role != before
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_leads_after_a_flush_before_a_longer_term_could_end() {
    let redis = RedisServer::start();
    let name = unique_lease("mixed-flush");
    let log: ActionLog = Arc::default();
    // The leader renews every 3 s for 10 s; a replica that starts after the data loss runs 2 s.
    let long = acting_replica(&redis, &name, "pod-long", TEN_SECOND_TERM_SLOW_RETRY, &log);
    // The first term on a fresh Redis waits out one lease duration of cooldown.
    eventually("the first term", Duration::from_secs(20), || async {
        long.is_leader().then_some(())
    })
    .await;
    just_renewed(&long).await;
    let Role::Leader { valid_until, .. } = long.status.borrow().role.clone() else {
        panic!("the long-configured replica leads")
    };
    let flushed_at = BootInstant::now();
    redis.cmd::<String>(&["FLUSHALL"]);
    let short = acting_replica(&redis, &name, "pod-short", SHORT, &log);
    // The short-configured replica finds the loss first; whoever leads next (either may win
    // once the cooldown is over), it is not before the long term could have ended.
    let first = eventually(
        "a term after the flush",
        Duration::from_secs(20),
        || async {
            log.lock()
                .unwrap()
                .iter()
                .find(|a| a.did == Did::Start && a.at > flushed_at)
                .map(|a| a.at)
        },
    )
    .await;
    assert!(
        first >= valid_until,
        "a replica led {:?} before the long term could end",
        first.until(valid_until)
    );
    shut_down_all([short, long], &log).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_that_saw_a_longer_term_keeps_the_cooldown_as_long_as_that_term() {
    let redis = RedisServer::start();
    let name = unique_lease("mixed-paused");
    let long = TEN_SECOND_TERM_SLOW_RETRY;
    // The long-configured leader is a child process, so that it can be frozen.
    let leader = ChildContender::spawn(&redis.url(), &name, "pod-long", long, true);
    leader.wait_line("the first term", Duration::from_secs(20), |l| {
        l.starts_with("leader token=")
    });
    let log: ActionLog = Arc::default();
    // A follower configured shorter sees the long term before the data loss.
    let follower = acting_replica(&redis, &name, "pod-follower", SHORT, &log);
    let mut seen = follower.status.clone();
    until_led_by(
        "the follower to see the leader",
        &mut seen,
        Duration::from_secs(10),
        "pod-long",
    )
    .await;
    // The leader freezes and Redis loses everything; a replica that
    // knows nothing of the long term starts, configured short too.
    let frozen_at = BootInstant::now();
    leader.signal(nix::sys::signal::Signal::SIGSTOP);
    redis.cmd::<String>(&["FLUSHALL"]);
    let fresh = acting_replica(&redis, &name, "pod-fresh", SHORT, &log);
    // The frozen leader's term may last until a lease duration after the freeze: nobody else
    // may lead before then.
    let valid_until = frozen_at.saturating_add(long.validity());
    let first = eventually(
        "a new leader after the flush",
        Duration::from_secs(20),
        || async {
            log.lock()
                .unwrap()
                .iter()
                .find(|a| a.did == Did::Start)
                .map(|a| a.at)
        },
    )
    .await;
    leader.signal(nix::sys::signal::Signal::SIGCONT);
    assert!(
        first >= valid_until,
        "a replica led {:?} before the frozen leader's term could end",
        first.until(valid_until)
    );
    fresh.shutdown().await;
    follower.shutdown().await;
}
