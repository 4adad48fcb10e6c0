//! The elector: turns the lease primitives into leadership.
//!
//! A follower tries to acquire and otherwise sleeps until the holder's TTL runs out, a release
//! is announced, or (without the release channel) the retry period passes. A leader runs its
//! work and a watchdog that renews every retry period, and steps down at once when the lease is
//! not ours any more, the renew deadline or the validity deadline passed, the work ended, or
//! the process shuts down. Step-down is one sequence: mark not-leader (the guard refuses,
//! readiness flips), cancel the work, record the reason, wait for the work to stop (never past
//! the validity deadline), then release the lease if it may still be ours.
//!
//! Here: the elector, its options and its run loop. The follower's side is in `follow.rs`, one
//! term as leader in `lead.rs`, their decisions in `decide.rs` (pure, table-tested).

/// The pure core: the elector's decisions as functions of time and of what Redis said. Public
/// (and hidden from the docs) only so that the model checker in `tests/model` calls the very
/// functions the elector calls; not a stable API.
#[doc(hidden)]
pub mod decide;
mod eviction;
mod follow;
mod gate;
mod guard_file;
mod herd;
mod lead;
mod leadership;
mod notify;
mod status;
mod timing;
mod watchers;

use std::fmt::Display;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::info;

pub use eviction::EvictionMode;
pub use leadership::{Leadership, NotLeader};
pub use status::{
    Candidacy, Eviction, LeaderInfo, RedisHealth, Role, Status, StepDown, StepDownReason,
};
pub use timing::{TIMING_RULE, Timing, TimingBound, TimingError, TimingField};
pub use watchers::Watchers;

use crate::lease::{LeaseError, RedisLease};

/// The outcome of one renewal, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RenewalOutcome {
    /// The lease was ours and was extended.
    Renewed,
    /// The lease was not ours any more.
    Lost,
    /// No answer, or an error.
    Failed,
}

impl RenewalOutcome {
    /// A stable label.
    pub fn as_label(self) -> &'static str {
        match self {
            RenewalOutcome::Renewed => "renewed",
            RenewalOutcome::Lost => "lost",
            RenewalOutcome::Failed => "failed",
        }
    }
}

/// Hooks for metrics. Every method has an empty default; they are called on the elector's task
/// and must not block.
pub trait Observer: Send + Sync + 'static {
    /// A renewal finished after `latency`.
    fn renewal(&self, _outcome: RenewalOutcome, _latency: Duration) {}
    /// This replica became leader.
    fn acquired(&self, _token: crate::lease::FencingToken) {}
    /// This replica stepped down.
    fn stepped_down(&self, _reason: StepDownReason) {}
    /// A Redis call failed.
    fn redis_error(&self, _op: &'static str, _error: &LeaseError) {}
    /// Redis's eviction policy was read: `policy` is `maxmemory-policy` as Redis names it, and
    /// `may_evict` says whether it can evict the lease (a `maxmemory` is set and the policy is
    /// not `noeviction`).
    fn eviction_policy(&self, _policy: &str, _may_evict: bool) {}
    /// The candidate check has just put this replica out of the election.
    fn candidate_unhealthy(&self) {}
}

struct NoObserver;
impl Observer for NoObserver {}

/// The leader elector for one lease.
pub struct Elector {
    lease: Arc<RedisLease>,
    timing: Timing,
    status: watch::Sender<Status>,
    observer: Arc<dyn Observer>,
    stop_when_work_ends: bool,
    followers: FollowerStrategy,
    eviction: EvictionMode,
    guard: Option<Arc<crate::guard::GuardFile>>,
    candidacy: Option<watch::Receiver<Candidacy>>,
    watchers: Watchers,
    /// `Some(wait)`: one term only, and give up contending once `wait` has passed.
    one_term: Option<Duration>,
}

/// How a follower decides when to try again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FollowerStrategy {
    /// leasehold's way: wake on a release announcement, at the holder's TTL expiry, or (only
    /// while the release channel is down) every retry period.
    #[default]
    Notified,
    /// client-go's way, for comparison: try every retry period with jitter (× 1.2), with no
    /// release channel and no TTL wake-up. Graceful handoff and crash failover then wait for
    /// the next poll.
    Polling,
}

impl Elector {
    /// An elector for `lease` with `timing`; refuses timings that break [`TIMING_RULE`].
    pub fn new(lease: RedisLease, timing: Timing) -> Result<Self, TimingError> {
        timing.validate()?;
        let status = Status {
            lease: lease.name().to_string(),
            identity: lease.owner().identity().to_owned(),
            owner: lease.owner().to_string(),
            role: Role::Starting,
            transitions: 0,
            last_step_down: None,
            redis: RedisHealth::default(),
            candidacy: Candidacy::Unchecked,
        };
        let status = watch::Sender::new(status);
        Ok(Self {
            lease: Arc::new(lease),
            timing,
            watchers: Watchers::new(status.subscribe()),
            status,
            observer: Arc::new(NoObserver),
            stop_when_work_ends: false,
            followers: FollowerStrategy::Notified,
            eviction: EvictionMode::Warn,
            guard: None,
            candidacy: None,
            one_term: None,
        })
    }

    /// Gates candidacy on a check: while `candidacy` does not [stand](Candidacy::stands), a
    /// follower does not contend and a leader steps down with reason `unhealthy`.
    pub fn with_candidacy(mut self, candidacy: watch::Receiver<Candidacy>) -> Self {
        self.candidacy = Some(candidacy);
        self
    }

    /// The watchers of this elector's status: server-sent events, the status file.
    pub fn watchers(&self) -> Watchers {
        self.watchers.clone()
    }

    /// Makes [`run`](Self::run) return after a term whose work returned, failed or panicked
    /// on its own (after stepping down and releasing), instead of contending again. For work
    /// whose end means the process is done (a singleton command that exited).
    pub fn stop_when_work_ends(mut self) -> Self {
        self.stop_when_work_ends = true;
        self
    }

    /// Makes [`run`](Self::run) a one-shot lock: contend until this replica leads or `wait`
    /// has passed (after at least one try), lead at most one term, and return however that
    /// term ended. The status tells what happened (`transitions` 0: never led; else
    /// `last_step_down`).
    pub fn for_one_term(mut self, wait: Duration) -> Self {
        self.one_term = Some(wait);
        self
    }

    /// Chooses how followers wait (the default is [`FollowerStrategy::Notified`]; polling
    /// exists as a baseline for benchmarks).
    pub fn with_follower_strategy(mut self, strategy: FollowerStrategy) -> Self {
        self.followers = strategy;
        self
    }

    /// Chooses what to do when Redis may evict the lease (the default is to say so and take
    /// part; [`EvictionMode::Refuse`] stays out of the election).
    pub fn with_eviction_mode(mut self, mode: EvictionMode) -> Self {
        self.eviction = mode;
        self
    }

    /// Sends every renewal, transition and Redis error to `observer` (metrics).
    pub fn with_observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = observer;
        self
    }

    /// A live view of the elector's status.
    pub fn status(&self) -> watch::Receiver<Status> {
        self.status.subscribe()
    }

    /// The lease this elector contends for.
    pub fn lease(&self) -> &Arc<RedisLease> {
        &self.lease
    }

    /// The timing in force.
    pub fn timing(&self) -> Timing {
        self.timing
    }

    /// Contends for the lease until `shutdown` is cancelled. Each time this replica becomes
    /// leader, `work` is called with the [`Leadership`] of that term and runs on its own task;
    /// when it returns, fails or panics, the replica steps down and releases the lease, then
    /// contends again. On shutdown a leader steps down with reason `shutdown` and releases the
    /// lease, so that a follower takes over at once.
    pub async fn run<W, Fut, E>(self, shutdown: CancellationToken, mut work: W)
    where
        W: FnMut(Leadership) -> Fut,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Display + Send + 'static,
    {
        let stop_notify = shutdown.child_token();
        let (mut releases, notify_task) = match self.followers {
            FollowerStrategy::Notified => notify::spawn(
                self.lease.clone(),
                self.timing,
                self.status.clone(),
                stop_notify.clone(),
            ),
            FollowerStrategy::Polling => notify::none(stop_notify.clone()),
        };
        let eviction_task = eviction::spawn(
            self.lease.clone(),
            self.timing,
            self.eviction,
            self.status.clone(),
            self.observer.clone(),
            stop_notify.clone(),
        );
        let gate_task = self.candidacy.clone().map(|candidacy| {
            gate::spawn(
                candidacy,
                self.status.clone(),
                self.observer.clone(),
                stop_notify.clone(),
            )
        });
        let pump_task = self.spawn_pump(stop_notify.clone());
        let clock = self.lease.clock().clone();
        let give_up_at = self.one_term.map(|wait| clock.now().saturating_add(wait));
        let mut nudges = releases.handover_nudges();
        let mut short_terms: u32 = 0;
        while let Some(grant) = self.follow(&shutdown, &mut releases, give_up_at).await {
            let ending = self.lead(grant, &mut work, &shutdown, &mut nudges).await;
            let work_ended = matches!(
                ending,
                StepDownReason::WorkEnded
                    | StepDownReason::WorkFailed
                    | StepDownReason::WorkPanicked
            );
            if ending == StepDownReason::Shutdown
                || (work_ended && self.stop_when_work_ends)
                || self.one_term.is_some()
            {
                break;
            }
            let lasted = clock.now().saturating_duration_since(grant.sent_at);
            short_terms = if decide::is_short_term(ending, lasted, &self.timing) {
                short_terms.saturating_add(1)
            } else {
                0
            };
            let hold_off = decide::hold_off_after(ending, &self.timing);
            if !hold_off.is_zero() {
                info!(
                    identity = %self.lease.owner().identity(),
                    lease = %self.lease.name(),
                    token = grant.token.0,
                    hold_off_ms = hold_off.as_millis() as u64,
                    "handed over; holding off before contending again"
                );
            }
            let paced = decide::pause_after_term(short_terms, &self.timing);
            if !paced.is_zero() {
                info!(
                    identity = %self.lease.owner().identity(),
                    lease = %self.lease.name(),
                    token = grant.token.0,
                    short_terms,
                    pause_ms = paced.as_millis() as u64,
                    "the work failed soon after the term began; pausing before contending again"
                );
            }
            let pause = paced.max(hold_off);
            if !pause.is_zero() {
                tokio::select! {
                    biased;
                    _ = shutdown.cancelled() => break,
                    _ = clock.sleep_until(clock.now().saturating_add(pause)) => {}
                }
            }
        }
        stop_notify.cancel();
        let _ = notify_task.await;
        let _ = eviction_task.await;
        if let Some(task) = gate_task {
            let _ = task.await;
        }
        let _ = pump_task.await;
        self.status.send_modify(|s| s.role = Role::Stopped);
        self.watchers.publish();
        self.watchers.close();
        info!(
            identity = %self.lease.owner().identity(),
            lease = %self.lease.name(),
            "elector stopped"
        );
    }
}

impl Elector {
    /// Publishes every status change to the watchers. The two that must not wait for this
    /// task's turn (becoming leader, stepping down) are also published on the spot by the term
    /// itself; publishing twice sends one event.
    fn spawn_pump(&self, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
        let mut status = self.status.subscribe();
        let watchers = self.watchers.clone();
        tokio::spawn(async move {
            loop {
                status.borrow_and_update();
                watchers.publish();
                tokio::select! {
                    biased;
                    _ = stop.cancelled() => return,
                    changed = status.changed() => if changed.is_err() { return },
                }
            }
        })
    }
}
