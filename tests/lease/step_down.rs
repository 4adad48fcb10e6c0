//! A term ended by the elector's own side, against a real redis-server with all contenders in
//! this process: shutdown releases the lease and a follower takes over at once; work that ends,
//! fails or panics steps down with that reason and releases; work that does not stop is aborted
//! at the deadline and its lease left to expire.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use harness::clock::ShiftedClock;
use harness::contenders::{
    ActionLog, Contender, fast_timing, idle, leader_and_follower, lease, lease_on_clock,
    shut_down_all, unique_lease, until_leading, until_stepped_down,
};
use harness::timings::TEN_SECOND_TERM;
use leasehold::clock::BootInstant;
use leasehold::elector::{Elector, Leadership, Role, StepDownReason, TermHooks};
use leasehold::lease::FencingToken;
use testbed::proxy::{Fault, FaultProxy};
use testbed::redis_server::RedisServer;
use testbed::wait::{eventually, until};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

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
    shut_down_all([b], &log).await;
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
    // The same owner may take its next term without a release: the hooks say whether each
    // term's end released the lease.
    let releases = Arc::new(Releases::default());
    let elector = Elector::new(lease(&redis.url(), &name, "pod-a", false), fast_timing())
        .unwrap()
        .with_hooks(releases.clone());
    let c = Contender::spawn_elector(elector, work);
    let mut status = c.status.clone();
    until("a fourth term", &mut status, Duration::from_secs(10), |s| {
        matches!(s.role, Role::Leader { .. }) && s.transitions >= 7
    })
    .await;
    let steps: Vec<(StepDownReason, Option<String>)> = {
        let mut seen = Vec::new();
        for s in releases.1.lock().unwrap().iter() {
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
    let released = releases.0.lock().unwrap()[..3].to_vec();
    assert_eq!(
        released, [true; 3],
        "each of the three terms released the lease"
    );
    c.shutdown().await;
}

/// The `released` of every term's end, in order, and every status the elector told (each
/// change, in order: a watch of the status may skip one that a quick next term replaced).
#[derive(Default)]
struct Releases(
    std::sync::Mutex<Vec<bool>>,
    std::sync::Mutex<Vec<leasehold::elector::Status>>,
    /// The moments heard, in order: `ending` and `ended`.
    std::sync::Mutex<Vec<&'static str>>,
);

impl TermHooks for Releases {
    fn ending(&self, _token: FencingToken, _reason: StepDownReason) -> bool {
        self.2.lock().unwrap().push("ending");
        true
    }
    fn ended(&self, _token: FencingToken, _reason: StepDownReason, released: bool) {
        self.0.lock().unwrap().push(released);
        self.2.lock().unwrap().push("ended");
    }
    fn status(&self, status: &leasehold::elector::Status) {
        self.1.lock().unwrap().push(status.clone());
    }
}

/// A work closure that panics when called, before it returns its future, ends the term as one
/// whose future panicked: the step-down runs, the lease is released, and a follower takes over
/// at once rather than after the 10 s lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_work_closure_that_panics_when_called_steps_down_and_releases() {
    let redis = RedisServer::start();
    let name = unique_lease("closure-panics");
    let mut a = Contender::spawn(
        lease(&redis.url(), &name, "pod-a", false),
        TEN_SECOND_TERM,
        |leadership: Leadership| -> std::future::Ready<Result<(), String>> {
            panic!("boom before the future, term {}", leadership.token())
        },
    );
    let step = until_stepped_down("a's term to end", &mut a.status, Duration::from_secs(5)).await;
    assert_eq!(step.reason, StepDownReason::WorkPanicked);
    assert!(
        step.detail
            .as_deref()
            .unwrap_or("")
            .starts_with("boom before the future"),
        "{step:?}"
    );
    let mut b = Contender::spawn(
        lease(&redis.url(), &name, "pod-b", false),
        TEN_SECOND_TERM,
        idle,
    );
    until_leading("b to lead", &mut b.status, Duration::from_secs(3)).await;
    b.shutdown().await;
    a.shutdown().await;
}

/// Work that does not stop when its term ends is aborted at the validity deadline. Nothing then
/// says that what it started is gone (a command's processes outlive the abort until they are
/// seen dead), so the lease is left to expire, a moment later, rather than released for a
/// successor to start beside them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_aborted_at_the_deadline_leaves_the_lease_to_expire() {
    let redis = RedisServer::start();
    let name = unique_lease("work-aborted");
    let releases = Arc::new(Releases::default());
    let elector = Elector::new(lease(&redis.url(), &name, "pod-a", false), fast_timing())
        .unwrap()
        .with_hooks(releases.clone());
    let mut a = Contender::spawn_elector(elector, |_: Leadership| {
        std::future::pending::<Result<(), String>>()
    });
    until_leading("a to lead", &mut a.status, Duration::from_secs(5)).await;
    // A handover request ends the term while Redis answers: the release would land.
    let call = Duration::from_secs(2);
    let asker = lease(&redis.url(), &name, "operator", false);
    let holder = asker.observe(call).await.unwrap().holder.expect("a's term");
    asker
        .request_handover(&holder, None, Duration::from_secs(30), call)
        .await
        .unwrap();
    let released = eventually("a's term to end", Duration::from_secs(5), || async {
        releases.0.lock().unwrap().first().copied()
    })
    .await;
    let step = a
        .status
        .borrow()
        .last_step_down
        .clone()
        .expect("a step-down");
    assert_eq!(step.reason, StepDownReason::Handover);
    assert!(!released, "the lease of aborted work was released");
    a.shutdown().await;
}

/// A renewal stalled on its connection (its request held on the way, a link gone gray for that
/// connection) and cut short at the renew deadline by the boot clock (a suspend that tokio's
/// timers did not see) leaves that connection out of the step-down: the release goes out on a
/// fresh one and lands, so that a follower need not wait for the lease to expire. It went out
/// behind the stalled renewal, ran out of its bound, and the lease was left to expire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_cut_short_by_the_boot_clock_leaves_its_stalled_connection_out_of_the_release() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr());
    let clock = ShiftedClock::new();
    let name = unique_lease("stalled-renewal");
    let releases = Arc::new(Releases::default());
    let leased = lease_on_clock(&proxy.url(), &name, "pod-a", &clock);
    let elector = Elector::new(leased, TEN_SECOND_TERM)
        .unwrap()
        .with_hooks(releases.clone());
    let mut a = Contender::spawn_elector(elector, idle);
    until_leading("a to lead", &mut a.status, Duration::from_secs(5)).await;
    let source = leasehold::lease::script_source("renew").expect("the renew script");
    let sha: String = redis.cmd(&["SCRIPT", "LOAD", &source]);
    let sha: [u8; 40] = sha.as_bytes().try_into().expect("a SHA1 in hex");
    proxy.set(Fault::DelayScript {
        sha,
        delay: Duration::from_secs(60),
    });
    let bound = Duration::from_secs(10);
    eventually("a renewal to be held", bound, || async {
        (proxy.scripts_held() >= 1).then_some(())
    })
    .await;
    // Past the renew deadline (6 s after the term's start), not its validity (10 s).
    clock.advance(Duration::from_secs(5));
    let released = eventually("a's term to end", bound, || async {
        releases.0.lock().unwrap().first().copied()
    })
    .await;
    let step = a.status.borrow().last_step_down.clone();
    assert_eq!(
        step.map(|s| s.reason),
        Some(StepDownReason::RenewDeadlinePassed)
    );
    assert!(released, "the release went out behind the stalled renewal");
    let left = lease(&redis.url(), &name, "operator", false)
        .observe(Duration::from_secs(2))
        .await
        .unwrap();
    assert!(left.holder.is_none(), "{left:?}");
    a.shutdown().await;
}

/// An elector whose `run` future is dropped in a term (a `select!` or a timeout around it, its
/// task aborted) ends the term there and then: `check()` refuses, `lost()` fires, the work is
/// dropped, the hooks hear `ending` then `ended`, and the release channel's reader is gone (a
/// follower's too), and so is the status's sender. The lease is left to expire: nothing can be
/// awaited any more, so nothing says the work's effects are over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elector_dropped_in_a_term_ends_it_there_and_then() {
    let redis = RedisServer::start();
    let name = unique_lease("dropped");
    let contender = |id: &str| Elector::new(lease(&redis.url(), &name, id, false), TEN_SECOND_TERM);
    let releases = Arc::new(Releases::default());
    let elector = contender("pod-a").unwrap().with_hooks(releases.clone());
    let channel = elector.lease().keys().channel.clone();
    let mut status = elector.status();
    let (terms, mut term) = mpsc::unbounded_channel::<(Leadership, oneshot::Receiver<()>)>();
    let work = move |leadership: Leadership| {
        let (alive, gone) = oneshot::channel::<()>();
        let _ = terms.send((leadership, gone));
        async move {
            let _alive = alive;
            std::future::pending::<Result<(), String>>().await
        }
    };
    let task = tokio::spawn(elector.run(CancellationToken::new(), work));
    until_leading("a to lead", &mut status, Duration::from_secs(5)).await;
    let (leadership, gone) = term.recv().await.expect("a's term");
    let listeners = || {
        redis
            .cmd::<(String, u64)>(&["PUBSUB", "NUMSUB", &channel])
            .1
    };
    let listening = |n: u64| async move { (listeners() == n).then_some(()) };
    let bound = Duration::from_secs(5);
    // A follower dropped stops reading too.
    let follower = contender("pod-b").unwrap();
    let mut follower_status = follower.status();
    let follower = tokio::spawn(follower.run(CancellationToken::new(), idle));
    eventually("both to read the release channel", bound, || listening(2)).await;
    follower.abort();
    let _ = follower.await;
    eventually("the follower's reader to go", bound, || listening(1)).await;
    let closed = tokio::time::timeout(bound, follower_status.wait_for(|_| false)).await;
    assert!(
        matches!(closed, Ok(Err(_))),
        "the follower's status lives on"
    );

    leadership
        .check()
        .expect("a's term, valid as it is dropped");
    task.abort();
    let _ = task.await;
    assert!(
        leadership.check().is_err(),
        "check() passes after the elector was dropped"
    );
    assert_eq!(
        leadership.step_down_reason(),
        Some(StepDownReason::Shutdown)
    );
    // Before the waits below, so that the 10 s term cannot have run out by itself.
    let left = lease(&redis.url(), &name, "operator", false)
        .observe(Duration::from_secs(2))
        .await
        .unwrap();
    assert!(left.holder.is_some(), "the lease was released");
    tokio::time::timeout(bound, leadership.lost())
        .await
        .expect("lost() did not fire after the elector was dropped");
    let _ = tokio::time::timeout(bound, gone)
        .await
        .expect("the work ran on after the elector was dropped");
    assert_eq!(*releases.2.lock().unwrap(), ["ending", "ended"]);
    assert_eq!(*releases.0.lock().unwrap(), [false], "a release was said");
    eventually("the leader's reader to go", bound, || listening(0)).await;
    let closed = tokio::time::timeout(bound, status.wait_for(|_| false)).await;
    assert!(matches!(closed, Ok(Err(_))), "the leader's status lives on");
}

/// A hook that panics as its term ends unwinds through `run`. The elector dropped on the way
/// tells the hooks nothing more: a second panic while unwinding would abort the process. The
/// hook's panic comes out of `run`, and the term is revoked.
#[test]
fn a_hook_that_panics_as_the_term_ends_is_not_told_again_on_the_way_out() {
    struct Panics;
    impl TermHooks for Panics {
        fn ending(&self, _token: FencingToken, _reason: StepDownReason) -> bool {
            panic!("a hook's own panic")
        }
    }
    let redis = RedisServer::start();
    let name = unique_lease("hook-panics");
    let elector = Elector::new(lease(&redis.url(), &name, "pod-a", false), TEN_SECOND_TERM)
        .unwrap()
        .with_hooks(Arc::new(Panics));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let shutdown = CancellationToken::new();
    // The term ends as it begins; a replica that never leads stops after 30 s, and its `run`
    // returns without the panic.
    let (stopping, backstop) = (shutdown.clone(), shutdown.clone());
    runtime.spawn(async move {
        tokio::time::sleep(Duration::from_secs(30)).await;
        backstop.cancel();
    });
    let (terms, mut term) = mpsc::unbounded_channel::<Leadership>();
    let work = move |leadership: Leadership| {
        let _ = terms.send(leadership.clone());
        stopping.cancel();
        idle(leadership)
    };
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(elector.run(shutdown, work))
    }));
    let panic = out.expect_err("the hook's panic came out of run");
    assert_eq!(panic.downcast_ref::<&str>(), Some(&"a hook's own panic"));
    let leadership = term.try_recv().expect("a's term");
    assert!(leadership.check().is_err(), "the term outlived its elector");
}
