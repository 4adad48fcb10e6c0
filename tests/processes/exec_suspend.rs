//! A simulated suspend of the singleton command's supervisor, in process with a shifted boot
//! clock: a jump past the validity deadline kills the command at once rather than when a tokio
//! timer fires, during the grace period, while leading, and when the elector aborts the term.

use std::time::{Duration, Instant};

use harness::clock::ShiftedClock;
use harness::contenders::{lease_with, unique_lease};
use harness::timings::THIRTY_SECOND_TERM;
use leasehold::elector::{Elector, Leadership, Timing};
use leasehold::exec::ExecSettings;
use leasehold::exec::Supervisor;
use leasehold::lease::LeaseOptions;
use testbed::process_tree::{PidFile, is_gone, is_running, stat, wait_pids};
use testbed::redis_server::RedisServer;
use testbed::wait::first_instant;
use tokio_util::sync::CancellationToken;

/// Long enough that no tokio timer of the elector or the supervisor fires during the test.
fn slow_timing() -> Timing {
    THIRTY_SECOND_TERM
}

/// A command that notes SIGTERM and runs on.
const STUBBORN: &str =
    r#"echo $$ >> "$PIDS"; trap 'echo term >> "$PIDS.term"' TERM; while :; do sleep 0.05; done"#;

struct InProcess {
    /// Kept running; paused where a renewal must land only after the command's kill.
    redis: RedisServer,
    clock: ShiftedClock,
    shutdown: CancellationToken,
    elector: tokio::task::JoinHandle<()>,
    /// Aborts the supervisor's task of the current term (its future is dropped).
    terms: tokio::sync::mpsc::UnboundedReceiver<tokio::task::AbortHandle>,
    /// Each term's leadership, as its work got it.
    leaderships: tokio::sync::mpsc::UnboundedReceiver<Leadership>,
    status: tokio::sync::watch::Receiver<leasehold::elector::Status>,
    supervisor: Supervisor,
    pids: PidFile,
    command: i32,
}

/// An in-process elector on a shifted clock whose work runs `script` through a supervisor, on
/// a task of its own.
async fn in_process_leader(test: &str, script: &str) -> InProcess {
    in_process_leader_with(test, script, slow_timing()).await
}

async fn in_process_leader_with(test: &str, script: &str, timing: Timing) -> InProcess {
    let redis = RedisServer::start();
    let clock = ShiftedClock::new();
    let lease = lease_with(
        &redis.url(),
        &unique_lease(test),
        "a",
        LeaseOptions {
            cooldown_on_data_loss: false,
            clock: std::sync::Arc::new(clock.clone()),
            ..LeaseOptions::default()
        },
    );
    let pids = PidFile::new();
    let (key, path) = pids.env();
    let supervisor = Supervisor::new(
        ExecSettings {
            command: vec![
                "env".into(),
                format!("{key}={path}"),
                "sh".into(),
                "-c".into(),
                script.into(),
            ],
            grace_period: Duration::from_secs(60),
            restart: false,
        },
        "a",
        test,
    );
    // As in `leasehold run` without `--restart-command`: a term whose work ended is the last.
    let elector = Elector::new(lease, timing).unwrap().stop_when_work_ends();
    let status = elector.status();
    let shutdown = CancellationToken::new();
    let (terms_tx, terms) = tokio::sync::mpsc::unbounded_channel();
    let (leaderships_tx, leaderships) = tokio::sync::mpsc::unbounded_channel();
    let ours = supervisor.clone();
    let work = move |leadership: Leadership| {
        let supervisor = supervisor.clone();
        let _ = leaderships_tx.send(leadership.clone());
        let term = tokio::spawn(async move { supervisor.lead(leadership).await });
        let _ = terms_tx.send(term.abort_handle());
        async move {
            match term.await {
                Ok(result) => result.map_err(|e| e.to_string()),
                Err(join) => Err(join.to_string()),
            }
        }
    };
    let elector = tokio::spawn(elector.run(shutdown.clone(), work));
    let path = pids.path.clone();
    let command = tokio::task::spawn_blocking(move || wait_pids(&path, 1, Duration::from_secs(10)))
        .await
        .unwrap()[0];
    InProcess {
        redis,
        clock,
        shutdown,
        elector,
        terms,
        leaderships,
        status,
        supervisor: ours,
        pids,
        command,
    }
}

impl InProcess {
    /// Shuts the elector down. The lease was still this replica's on Redis (only its clock
    /// jumped), so after stepping down it may have won a new term at once and started the
    /// stubborn command again, whose grace period would hold the shutdown until that term's
    /// deadline: a second jump ends it.
    async fn stop(self) {
        self.shutdown.cancel();
        self.clock.advance(Duration::from_secs(3600));
        tokio::time::timeout(Duration::from_secs(15), self.elector)
            .await
            .expect("the elector stops")
            .unwrap();
    }
}

async fn stubborn_leader(test: &str) -> InProcess {
    in_process_leader(test, STUBBORN).await
}

async fn gone_within(pid: i32, bound: Duration) -> Option<Duration> {
    tokio::task::spawn_blocking(move || {
        let from = Instant::now();
        first_instant(bound, || is_gone(pid)).map(|t| t.saturating_duration_since(from))
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspend_during_the_grace_period_kills_the_command_at_once() {
    let t = stubborn_leader("suspend-grace").await;
    t.shutdown.cancel();
    let term = t.pids.sibling("pids.term");
    let noted = tokio::task::spawn_blocking(move || {
        first_instant(Duration::from_secs(5), || term.exists())
    })
    .await
    .unwrap();
    assert!(noted.is_some(), "the command got SIGTERM");
    assert!(is_running(t.command), "it runs on through its grace period");

    // A suspend past the validity deadline: 30 s of TTL still to go on the tokio timers.
    t.clock.advance(Duration::from_secs(3600));
    let took = gone_within(t.command, Duration::from_secs(3)).await;
    eprintln!("jump past the deadline → command gone: {took:?}");
    assert!(
        took.is_some(),
        "the command ran on after the deadline passed on the boot clock: {:?}",
        stat(t.command)
    );
    tokio::time::timeout(Duration::from_secs(10), t.elector)
        .await
        .expect("the elector stops")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspend_while_leading_kills_the_command_by_the_deadline() {
    let t = stubborn_leader("suspend-lead").await;
    // The watchdog sleeps on a tokio timer for a retry period (10 s); the command must not
    // wait for it.
    t.clock.advance(Duration::from_secs(3600));
    let took = gone_within(t.command, Duration::from_secs(3)).await;
    eprintln!("jump past the deadline while leading → command gone: {took:?}");
    assert!(
        took.is_some(),
        "the command ran on after the deadline passed on the boot clock: {:?}",
        stat(t.command)
    );
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_term_kills_the_group_worker_and_the_daemon_too() {
    let script = r#"echo $$ >> "$PIDS"; (trap "" TERM; exec sleep 300) & echo $! >> "$PIDS"; setsid sh -c 'echo $$ >> "$PIDS"; trap "" TERM; while :; do sleep 0.05; done' & wait"#;
    let mut t = in_process_leader("abort", script).await;
    let path = t.pids.path.clone();
    let pids = tokio::task::spawn_blocking(move || wait_pids(&path, 3, Duration::from_secs(5)))
        .await
        .unwrap();
    // The term's future is dropped without a step-down: what stops the command is the drop.
    t.terms.recv().await.expect("a term").abort();
    for pid in pids {
        // Killed is what counts here: with the term's supervisor dropped, a re-parented orphan
        // may stay a zombie until the next reap (a zombie runs nothing).
        let took = tokio::task::spawn_blocking(move || {
            let from = Instant::now();
            first_instant(Duration::from_secs(3), || {
                is_gone(pid) || stat(pid).is_some_and(|p| p.state == 'Z')
            })
            .map(|t| t.saturating_duration_since(from))
        })
        .await
        .unwrap();
        assert!(
            took.is_some(),
            "{pid} outlived the aborted term: {:?}",
            stat(pid)
        );
    }
    tokio::time::timeout(Duration::from_secs(10), t.elector)
        .await
        .expect("the elector stops after the failed term")
        .unwrap();
}

/// The supervisor kills the command 100 ms before the validity deadline; a renewal that lands
/// after the kill (sent in that window, or answered before a freeze and read after it, as on a
/// CPU-throttled node) extends the term, but the command is dead. The term ends then, as if its
/// deadline had passed: the command's death is no exit of its own, so leasehold neither counts
/// it as the work failing nor exits with its 137 (an OOM kill's code to Kubernetes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_killed_at_the_deadline_ends_the_term_as_the_deadline_though_a_renewal_landed() {
    // A renew deadline just short of the validity, so that the watchdog renews, not steps down,
    // inside the kill window.
    let timing = Timing {
        renew_deadline: Duration::from_millis(29_690),
        ..THIRTY_SECOND_TERM
    };
    let mut t = in_process_leader_with("killed-at-deadline", STUBBORN, timing).await;
    let leadership = t.leaderships.recv().await.expect("a term");
    let token = leadership.token();
    // Into the window: 50 ms before the deadline, after the supervisor's kill instant. The
    // watchdog renews at once too: with Redis paused, its renewal lands only after the kill
    // (on a loaded machine it could otherwise land first and move the kill instant on).
    t.redis.pause();
    let now = leadership.clock().now();
    t.clock.advance(
        leadership
            .valid_until()
            .saturating_duration_since(now)
            .saturating_sub(Duration::from_millis(50)),
    );
    let took = gone_within(t.command, Duration::from_secs(3)).await;
    t.redis.resume();
    assert!(took.is_some(), "the supervisor killed the command");
    let mut status = t.status.clone();
    let ended = tokio::time::timeout(
        Duration::from_secs(10),
        status.wait_for(|s| s.last_step_down.as_ref().is_some_and(|d| d.token == token)),
    )
    .await
    .expect("the term ends within 10 s, not at its renewed deadline")
    .expect("the elector runs")
    .last_step_down
    .clone()
    .expect("a step-down");
    assert_eq!(
        ended.reason,
        leasehold::elector::StepDownReason::ValidityDeadlinePassed,
        "{ended:?}"
    );
    assert_eq!(
        t.supervisor.exit_code(),
        None,
        "leasehold would exit with the code of the command it killed itself"
    );
    t.stop().await;
}
