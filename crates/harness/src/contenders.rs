//! Electors for tests: in-process ones with shared action logs, and the `contender` example as
//! a real child process that can be SIGKILLed and SIGSTOPped.

use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::clock::ShiftedClock;
use crate::timings::{FAST, STEADY};
use leasehold::clock::{BootInstant, Clock, WallLead};
use leasehold::elector::{Elector, Leadership, Role, Status, StepDown, Timing};
use leasehold::k8s::Publisher;
use leasehold::lease::{FencingToken, LeaseName, LeaseOptions, OwnerId, RedisLease};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use testbed::Guarded;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Short durations so that tests finish quickly: TTL 1 s, renew deadline 600 ms, retry 150 ms.
pub fn fast_timing() -> Timing {
    FAST
}

/// Timings for tests with child processes or replicated Redis: TTL 1.5 s, renew deadline
/// 900 ms, retry 250 ms.
pub fn steady_timing() -> Timing {
    STEADY
}

/// A lease name unique to the calling test.
pub fn unique_lease(test: &str) -> String {
    format!("test/{test}-{}", uuid_suffix())
}

fn uuid_suffix() -> String {
    OwnerId::generate("x").unwrap().as_str()[2..10].to_owned()
}

pub fn lease(url: &str, name: &str, identity: &str, cooldown: bool) -> RedisLease {
    lease_with(
        url,
        name,
        identity,
        LeaseOptions {
            cooldown_on_data_loss: cooldown,
            ..LeaseOptions::default()
        },
    )
}

/// A lease without the data-loss cooldown whose instants are read on `clock` (a test's shifted
/// clock, to simulate a suspend or a pause the boot clock did not count).
pub fn lease_on_clock(url: &str, name: &str, identity: &str, clock: &ShiftedClock) -> RedisLease {
    let options = LeaseOptions {
        cooldown_on_data_loss: false,
        clock: Arc::new(clock.clone()),
        ..LeaseOptions::default()
    };
    lease_with(url, name, identity, options)
}

/// A lease with the given options.
pub fn lease_with(url: &str, name: &str, identity: &str, options: LeaseOptions) -> RedisLease {
    RedisLease::new(
        url,
        LeaseName::new(name).unwrap(),
        OwnerId::generate(identity).unwrap(),
        options,
    )
    .unwrap()
}
/// Runs `elector` with the Kubernetes publisher as each term's work, as `leasehold run` does
/// with `--kubernetes on`; the task ends when `shutdown` is cancelled.
pub fn spawn_publishing(
    elector: Elector,
    publisher: &Publisher,
    shutdown: &CancellationToken,
) -> JoinHandle<()> {
    let publisher = publisher.clone();
    tokio::spawn(
        elector.run(shutdown.clone(), move |leadership: Leadership| {
            let publisher = publisher.clone();
            async move {
                let stop = leadership.cancellation_token();
                publisher.lead(leadership, stop).await;
                Ok::<(), std::convert::Infallible>(())
            }
        }),
    )
}

/// `count` contenders `pod-0`, `pod-1`, … on `url`, each acting every 5 ms through its guard
/// into `log` and handing over after `hold` (never, without one).
pub fn acting_contenders(
    url: &str,
    name: &str,
    count: usize,
    timing: Timing,
    cooldown: bool,
    log: &ActionLog,
    hold: Option<Duration>,
) -> Vec<Contender> {
    (0..count)
        .map(|i| {
            let lease = lease(url, name, &format!("pod-{i}"), cooldown);
            Contender::spawn(
                lease,
                timing,
                acting_work(log.clone(), Duration::from_millis(5), hold),
            )
        })
        .collect()
}

/// Two contenders on one lease, each acting every `every` through its guard into `log` for as
/// long as its terms last: the one on `leader`, once it leads, then the one on `follower`, once
/// it names the first as the leader.
pub async fn leader_and_follower(
    leader: RedisLease,
    follower: RedisLease,
    timing: Timing,
    log: &ActionLog,
    every: Duration,
) -> (Contender, Contender) {
    let leader = Contender::spawn(leader, timing, acting_work(log.clone(), every, None));
    let mut status = leader.status.clone();
    until_leading(
        &format!("{} to lead", leader.identity),
        &mut status,
        Duration::from_secs(5),
    )
    .await;
    let mut follower = Contender::spawn(follower, timing, acting_work(log.clone(), every, None));
    until_led_by(
        &format!("{} to follow {}", follower.identity, leader.identity),
        &mut follower.status,
        Duration::from_secs(5),
        &leader.identity,
    )
    .await;
    (leader, follower)
}

/// What a leader's work did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Did {
    /// The work was handed its Leadership.
    Start,
    /// It acted after its guard said yes.
    Act,
    /// It returned on its own (its hold time was up).
    End,
}

/// One entry of a leader's work.
#[derive(Debug, Clone, Copy)]
pub struct Action {
    pub token: FencingToken,
    pub at: BootInstant,
    pub did: Did,
}

/// A log shared by every contender of a test.
pub type ActionLog = Arc<Mutex<Vec<Action>>>;

/// An elector running in this process.
pub struct Contender {
    pub identity: String,
    pub owner: String,
    pub status: watch::Receiver<Status>,
    shutdown: CancellationToken,
    task: JoinHandle<()>,
}

impl Contender {
    pub fn spawn<W, Fut>(lease: RedisLease, timing: Timing, work: W) -> Self
    where
        W: FnMut(Leadership) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<(), String>> + Send + 'static,
    {
        Self::spawn_elector(Elector::new(lease, timing).unwrap(), work)
    }

    /// Runs an elector set up by the test (a follower strategy, term hooks).
    pub fn spawn_elector<W, Fut>(elector: Elector, work: W) -> Self
    where
        W: FnMut(Leadership) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<(), String>> + Send + 'static,
    {
        let identity = elector.lease().owner().identity().to_owned();
        let owner = elector.lease().owner().to_string();
        let status = elector.status();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(elector.run(shutdown.clone(), work));
        Self {
            identity,
            owner,
            status,
            shutdown,
            task,
        }
    }

    pub fn is_leader(&self) -> bool {
        self.status
            .borrow()
            .is_leading_at(BootInstant::now(), WallLead::now())
    }

    pub fn token(&self) -> Option<FencingToken> {
        match self.status.borrow().role {
            Role::Leader { token, .. } => Some(token),
            _ => None,
        }
    }

    pub async fn shutdown(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("elector stops within 10 s of shutdown")
            .expect("elector task");
    }
}

/// A term's work that does nothing and holds the term until it is lost.
pub async fn idle(leadership: Leadership) -> Result<(), String> {
    leadership.lost().await;
    Ok(())
}

/// Waits until the watched status says this replica leads, or panics after `timeout` naming
/// `what`.
pub async fn until_leading(
    what: &str,
    status: &mut watch::Receiver<Status>,
    timeout: Duration,
) -> Status {
    testbed::wait::until(what, status, timeout, |s| {
        matches!(s.role, Role::Leader { .. })
    })
    .await
}

/// Waits until the watched status tells a step-down, or panics after `timeout` naming `what`;
/// the step-down.
pub async fn until_stepped_down(
    what: &str,
    status: &mut watch::Receiver<Status>,
    timeout: Duration,
) -> StepDown {
    let ended = testbed::wait::until(what, status, timeout, |s| s.last_step_down.is_some()).await;
    ended.last_step_down.expect("a step-down")
}

/// Waits until the watched status names `leader` as the leader (itself when it leads), or
/// panics after `timeout` naming `what`.
pub async fn until_led_by(
    what: &str,
    status: &mut watch::Receiver<Status>,
    timeout: Duration,
    leader: &str,
) -> Status {
    testbed::wait::until(what, status, timeout, |s| {
        s.leader_identity() == Some(leader)
    })
    .await
}

/// Work that acts every `every` through the guard, logging each action, until its term ends
/// or `hold` has passed (then it returns, which hands the lease over).
pub fn acting_work(
    log: ActionLog,
    every: Duration,
    hold: Option<Duration>,
) -> impl FnMut(
    Leadership,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send>>
+ Send
+ 'static {
    move |leadership: Leadership| {
        let log = log.clone();
        Box::pin(async move {
            let clock = leasehold::clock::BootClock;
            let token = leadership.token();
            let note = |did| {
                log.lock().unwrap().push(Action {
                    token,
                    at: clock.now(),
                    did,
                })
            };
            note(Did::Start);
            let started = tokio::time::Instant::now();
            loop {
                if let Some(hold) = hold
                    && started.elapsed() >= hold
                {
                    note(Did::End);
                    return Ok(());
                }
                match leadership.check() {
                    Ok(_) => note(Did::Act),
                    Err(_) => {
                        leadership.lost().await;
                        return Ok(());
                    }
                }
                tokio::select! {
                    _ = leadership.lost() => return Ok(()),
                    _ = tokio::time::sleep(every) => {}
                }
            }
        })
    }
}

/// Checks an action log: tokens never go backwards in time, and the terms' action spans
/// [first, last] never overlap. Returns the tokens in order.
pub fn assert_no_overlap(log: &[Action]) -> Vec<FencingToken> {
    let mut actions: Vec<Action> = log.iter().filter(|a| a.did == Did::Act).copied().collect();
    actions.sort_by_key(|a| a.at);
    let mut spans: Vec<(FencingToken, BootInstant, BootInstant)> = Vec::new();
    for a in &actions {
        match spans.last_mut() {
            Some((token, _, last)) if *token == a.token => *last = a.at,
            Some((token, _, _)) => {
                assert!(
                    a.token > *token,
                    "token went backwards: {} acted at {:?} after {} had acted",
                    a.token,
                    a.at,
                    token
                );
                spans.push((a.token, a.at, a.at));
            }
            None => spans.push((a.token, a.at, a.at)),
        }
    }
    let tokens: Vec<FencingToken> = spans.iter().map(|s| s.0).collect();
    let mut unique = tokens.clone();
    unique.dedup();
    assert_eq!(
        unique.len(),
        tokens.len(),
        "a term acted again after another term had acted"
    );
    tokens
}

/// Shuts `contenders` down in order, then checks what they did ([`assert_no_overlap`]): the log
/// as it ended, and the tokens in order.
pub async fn shut_down_all(
    contenders: impl IntoIterator<Item = Contender>,
    log: &ActionLog,
) -> (Vec<Action>, Vec<FencingToken>) {
    for c in contenders {
        c.shutdown().await;
    }
    let log = log.lock().unwrap().clone();
    let tokens = assert_no_overlap(&log);
    (log, tokens)
}

/// Handoff gaps: for each term that ended on its own, the time from its end to the next
/// term's start.
pub fn handoff_gaps(log: &[Action]) -> Vec<Duration> {
    let mut entries = log.to_vec();
    entries.sort_by_key(|a| a.at);
    let mut gaps = Vec::new();
    let mut last_end: Option<BootInstant> = None;
    for a in entries {
        match a.did {
            Did::End => last_end = Some(a.at),
            Did::Start => {
                if let Some(end) = last_end.take() {
                    gaps.push(a.at.saturating_duration_since(end));
                }
            }
            Did::Act => {}
        }
    }
    gaps
}

/// Records every status the watch shows (coalesced values may be skipped, transitions are not
/// lost because each transition changes the role).
pub fn record_statuses(mut rx: watch::Receiver<Status>) -> Arc<Mutex<Vec<(BootInstant, Status)>>> {
    let history = Arc::new(Mutex::new(vec![(
        BootInstant::now(),
        rx.borrow_and_update().clone(),
    )]));
    let sink = history.clone();
    tokio::spawn(async move {
        while rx.changed().await.is_ok() {
            let s = rx.borrow_and_update().clone();
            sink.lock().unwrap().push((BootInstant::now(), s));
        }
    });
    history
}

/// The validity deadline of the last leader status in a recorded history, if it has one.
pub fn last_valid_until(history: &[(BootInstant, Status)]) -> Option<BootInstant> {
    history.iter().rev().find_map(|(_, s)| match s.role {
        Role::Leader { valid_until, .. } => Some(valid_until),
        _ => None,
    })
}

/// Summary figures of a sample, for the test output.
pub fn summary(samples: &[Duration]) -> String {
    let mut s = samples.to_vec();
    s.sort();
    if s.is_empty() {
        return "no samples".into();
    }
    let pick = |q: f64| s[((s.len() - 1) as f64 * q).round() as usize];
    format!(
        "n={} min={:?} p50={:?} p99={:?} max={:?}",
        s.len(),
        s[0],
        pick(0.5),
        pick(0.99),
        s[s.len() - 1]
    )
}

/// The `contender` example as a child process, its stdout collected line by line.
pub struct ChildContender {
    /// The process; dropping it kills it and, when a test panics, prints its output.
    child: Guarded,
    pub owner: String,
}

impl ChildContender {
    pub fn spawn(url: &str, lease: &str, identity: &str, timing: Timing, cooldown: bool) -> Self {
        let mut cmd = Command::new(crate::target::example("contender"));
        cmd.arg(url)
            .arg(lease)
            .arg(identity)
            .arg(timing.lease_duration.as_millis().to_string())
            .arg(timing.renew_deadline.as_millis().to_string())
            .arg(timing.retry_period.as_millis().to_string());
        if !cooldown {
            cmd.arg("--no-cooldown");
        }
        cmd.env("RUST_LOG", "leasehold=debug").env("NO_COLOR", "1");
        let child = Guarded::spawn(cmd, &format!("contender {identity}")).expect("spawn contender");
        let mut this = Self {
            child,
            owner: String::new(),
        };
        let owner_line = this.wait_line("owner line", Duration::from_secs(10), |l| {
            l.starts_with("owner=")
        });
        this.owner = owner_line.trim_start_matches("owner=").to_owned();
        this
    }

    pub fn pid(&self) -> Pid {
        self.child.pid()
    }

    pub fn lines(&self) -> Vec<String> {
        self.child.stdout.snapshot()
    }

    pub fn line_count(&self) -> usize {
        self.child.stdout.len()
    }

    /// Waits for a line (among all so far) matching `pred`.
    pub fn wait_line(&self, what: &str, timeout: Duration, pred: impl Fn(&str) -> bool) -> String {
        self.wait_line_after(0, what, timeout, pred)
    }

    /// Waits for a line from index `from` on matching `pred`.
    pub fn wait_line_after(
        &self,
        from: usize,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> String {
        self.child
            .stdout
            .wait_from(from, what, timeout, |l| pred(l).then(|| l.to_owned()))
    }

    pub fn signal(&self, signal: Signal) {
        self.child.signal(signal).expect("signal contender");
    }
}
