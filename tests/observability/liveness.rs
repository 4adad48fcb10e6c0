//! `/healthz` sees a wedged elector: real electors on a real redis-server, their endpoints
//! served over HTTP, one loop wedged for real by a term hook that blocks (the hooks run on
//! the elector's task and must not block; this one does, as a deadlocked user hook would), and
//! the idle leader and follower that must stay live meanwhile. Each wait is bounded.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use harness::contenders::{Contender, lease, steady_timing, unique_lease};
use leasehold::board::Board;
use leasehold::elector::{Elector, RenewalOutcome, TermHooks, Timing};
use leasehold::heartbeat::Heartbeat;
use leasehold::http::{self, Endpoints, ReadinessMode};
use leasehold::metrics::Metrics;
use testbed::RedisServer;
use testbed::http::http_get;
use testbed::wait::wait_for;
use tokio_util::sync::CancellationToken;

/// Term hooks whose renewal hook blocks its caller, the elector's task, once asked to, until
/// the test lets it go (drops the sender).
struct Wedging {
    armed: AtomicBool,
    gate: Mutex<mpsc::Receiver<()>>,
}

impl TermHooks for Wedging {
    fn renewal(&self, _outcome: RenewalOutcome, _latency: Duration) {
        if self.armed.load(Ordering::SeqCst) {
            let _ = self.gate.lock().expect("the gate").recv();
        }
    }
}

/// The elector's endpoints on a free loopback port, served by a runtime of their own: the
/// wedge blocks a thread of the elector's runtime, and liveness must still be asked.
fn serve(elector: Elector, name: &str) -> (Elector, SocketAddr, CancellationToken) {
    let board = Board::new(elector.status().borrow().clone());
    let heartbeat = Heartbeat::new(elector.timing().lease_duration);
    let elector = elector
        .with_hooks(Arc::new(board.clone()))
        .with_hooks(Arc::new(heartbeat.clone()));
    let endpoints = Endpoints::new(
        board.subscribe(),
        Arc::new(Metrics::new(name, name)),
        ReadinessMode::Member,
        elector.lease().keys().lease.clone(),
        elector.lease().clock().clone(),
    )
    .with_heartbeat(heartbeat);
    let stop = CancellationToken::new();
    let (tx, rx) = mpsc::channel();
    let halt = stop.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            let (addr, serve) = http::bind("127.0.0.1:0".parse().unwrap(), endpoints, halt)
                .await
                .expect("bind");
            tx.send(addr).expect("hand the address over");
            let _ = serve.await;
        });
    });
    (elector, rx.recv().expect("the address"), stop)
}

fn healthz(addr: SocketAddr) -> (u16, String) {
    http_get(addr, "/healthz").expect("/healthz answers")
}

/// `/healthz` answers 200 at every look, 50 ms apart, for `window`.
fn live_throughout(addrs: &[(&str, SocketAddr)], window: Duration) {
    let end = Instant::now() + window;
    while Instant::now() < end {
        for (who, addr) in addrs {
            let (code, body) = healthz(*addr);
            assert_eq!(code, 200, "{who}: /healthz said {body:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_leader_and_an_idle_follower_stay_live() {
    let redis = RedisServer::start();
    let name = unique_lease("live-idle");
    let timing: Timing = steady_timing();
    let a = Elector::new(lease(&redis.url(), &name, "a", false), timing).unwrap();
    let b = Elector::new(lease(&redis.url(), &name, "b", false), timing).unwrap();
    let (a, a_http, _a_stop) = serve(a, "a");
    let (b, b_http, _b_stop) = serve(b, "b");
    // Work that never ends: the leader keeps its term and renews.
    let hold = |_| std::future::pending::<Result<(), String>>();
    let a = Contender::spawn_elector(a, hold);
    wait_for("a leads", Duration::from_secs(10), || {
        a.is_leader().then_some(())
    });
    let b = Contender::spawn_elector(b, hold);
    wait_for("b follows a", Duration::from_secs(10), || {
        (b.status.borrow().leader_identity() == Some("a")).then_some(())
    });
    // Four lease durations: the follower sleeps up to one between its tries, the leader renews
    // every retry period; neither is ever overdue.
    live_throughout(
        &[("leader", a_http), ("follower", b_http)],
        timing.lease_duration * 4,
    );
    assert!(a.is_leader(), "a still leads");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_loop_is_wedged_fails_liveness_within_its_bound_and_recovers() {
    let redis = RedisServer::start();
    let name = unique_lease("live-wedged");
    let timing: Timing = steady_timing();
    let (release, gate) = mpsc::channel::<()>();
    let wedging = Arc::new(Wedging {
        armed: AtomicBool::new(false),
        gate: Mutex::new(gate),
    });
    let elector = Elector::new(lease(&redis.url(), &name, "a", false), timing)
        .unwrap()
        .with_hooks(wedging.clone());
    let (elector, addr, _stop) = serve(elector, "a");
    let a = Contender::spawn_elector(elector, |_| std::future::pending::<Result<(), String>>());
    wait_for("a leads", Duration::from_secs(10), || {
        a.is_leader().then_some(())
    });
    assert_eq!(healthz(addr).0, 200);

    // The next renewal's hook blocks the loop: no more turns.
    wedging.armed.store(true, Ordering::SeqCst);
    let armed_at = Instant::now();
    // The loop promised to be back by its next renewal (a retry period); liveness fails once
    // it is a lease duration late. Bound: retry period + a renewal + lease duration + the
    // polling, with room for a loaded machine.
    let bound = timing.retry_period + timing.lease_duration * 2 + Duration::from_secs(1);
    let body = wait_for("/healthz to fail", bound, || {
        let (code, body) = healthz(addr);
        (code == 503).then_some(body)
    });
    let failed_after = armed_at.elapsed();
    assert!(body.starts_with("wedged: "), "{body}");
    assert!(
        failed_after >= timing.lease_duration,
        "failed after {failed_after:?}, before a lease duration had passed"
    );
    eprintln!("wedged loop failed liveness {failed_after:?} after the wedge: {body:?}");

    // Let the hook go: the loop turns again (steps down, its deadline passed) and is live.
    drop(release);
    wait_for("/healthz to pass again", Duration::from_secs(5), || {
        (healthz(addr).0 == 200).then_some(())
    });
    drop(a);
}
