//! The elector: turns the lease primitives into leadership.
//!
//! A follower tries to acquire and otherwise sleeps until the holder's TTL runs out, a release
//! is announced, or (without the release channel) the retry period passes. A leader runs its
//! work and a watchdog that renews every retry period, and steps down at once when the lease is
//! not ours any more, the renew deadline or the validity deadline passed, the work ended, or
//! the process shuts down. Step-down is one sequence: mark not-leader (the guard refuses,
//! readiness flips), cancel the work, record the reason, wait for the work to stop (never past
//! the validity deadline), then release the lease if it may still be ours.

mod decide;
mod eviction;
mod guard_file;
mod leadership;
mod notify;
mod status;
mod timing;

use std::fmt::Display;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;
use tokio::task::{JoinError, JoinHandle};
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

pub use eviction::EvictionMode;
pub use leadership::{Leadership, NotLeader};
pub use status::{Eviction, LeaderInfo, RedisHealth, Role, Status, StepDown, StepDownReason};
pub use timing::{TIMING_RULE, Timing, TimingError};

use crate::clock::BootInstant;
use crate::lease::{Acquired, Grant, Holder, LeaseError, RedisLease, Released, Renewed, Retry};
use decide::{Seen, WatchdogStep};
use notify::Releases;

/// How long work whose validity deadline passed before its step-down (a pause) may take to
/// stop on its own before it is aborted: enough for a task to be scheduled and finish acting on
/// its cancellation. The supervisor sends SIGKILL the moment it runs; this is its time to see
/// every process gone, reap them and say so. Its guard refuses throughout.
const LAST_TURN: Duration = Duration::from_millis(100);

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

/// How a term ended, with any words about it.
struct Ending {
    reason: StepDownReason,
    detail: Option<String>,
}

impl Ending {
    fn new(reason: StepDownReason) -> Self {
        Self {
            reason,
            detail: None,
        }
    }
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
        };
        Ok(Self {
            lease: Arc::new(lease),
            timing,
            status: watch::Sender::new(status),
            observer: Arc::new(NoObserver),
            stop_when_work_ends: false,
            followers: FollowerStrategy::Notified,
            eviction: EvictionMode::Warn,
            guard: None,
        })
    }

    /// Makes [`run`](Self::run) return after a term whose work returned, failed or panicked
    /// on its own (after stepping down and releasing), instead of contending again. For work
    /// whose end means the process is done (a singleton command that exited).
    pub fn stop_when_work_ends(mut self) -> Self {
        self.stop_when_work_ends = true;
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
        let clock = self.lease.clock().clone();
        let mut short_terms: u32 = 0;
        while let Some(grant) = self.follow(&shutdown, &mut releases).await {
            let ending = self.lead(grant, &mut work, &shutdown).await;
            let work_ended = matches!(
                ending,
                StepDownReason::WorkEnded
                    | StepDownReason::WorkFailed
                    | StepDownReason::WorkPanicked
            );
            if ending == StepDownReason::Shutdown || (work_ended && self.stop_when_work_ends) {
                break;
            }
            let lasted = clock.now().saturating_duration_since(grant.sent_at);
            short_terms = if decide::is_short_term(ending, lasted, &self.timing) {
                short_terms.saturating_add(1)
            } else {
                0
            };
            let pause = decide::pause_after_term(short_terms, &self.timing);
            if !pause.is_zero() {
                info!(
                    identity = %self.lease.owner().identity(),
                    lease = %self.lease.name(),
                    token = grant.token.0,
                    short_terms,
                    pause_ms = pause.as_millis() as u64,
                    "the work failed soon after the term began; pausing before contending again"
                );
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
        self.status.send_modify(|s| s.role = Role::Stopped);
        info!(
            identity = %self.lease.owner().identity(),
            lease = %self.lease.name(),
            "elector stopped"
        );
    }

    /// The follower loop: returns a grant, or `None` at shutdown.
    async fn follow(&self, shutdown: &CancellationToken, releases: &mut Releases) -> Option<Grant> {
        let timing = self.timing;
        let clock = self.lease.clock().clone();
        let mut failures: u32 = 0;
        // The holder seen last and until when it keeps its term as far as this follower knows,
        // and whether a release was announced since (client-go's observed-time rule).
        let mut observed: Option<(Holder, BootInstant)> = None;
        let mut announced = false;
        loop {
            releases.mark_seen();
            if shutdown.is_cancelled() {
                return None;
            }
            if self.status.borrow().redis.refused_for_eviction {
                // --redis-eviction refuse: out of the election until Redis no longer evicts.
                let mut status = self.status.subscribe();
                tokio::select! {
                    biased;
                    _ = shutdown.cancelled() => return None,
                    _ = status.wait_for(|s| !s.redis.refused_for_eviction) => {}
                }
                continue;
            }
            let now = clock.now();
            if observed
                .as_ref()
                .is_some_and(|(_, until)| !decide::observation_stands(now, *until, announced))
            {
                observed = None;
            }
            announced = false;
            // Not raced against shutdown: an acquire that Redis already executed must not be
            // abandoned, or the lease would sit unreleased for a whole TTL. It is bounded by
            // the call timeout; a grant that arrives after shutdown is given back at once.
            let attempt = self
                .lease
                .acquire_observing(
                    timing.lease_duration,
                    timing.acquire_timeout(),
                    observed.as_ref().map(|(holder, _)| holder),
                )
                .await;
            if shutdown.is_cancelled() {
                // A grant, or an answer that never came (the script may still have run): give
                // it back. Compare-and-delete on our own owner id is safe either way.
                // Any term of ours: no later term of this process can follow.
                match attempt {
                    Ok(Acquired::Leader(grant)) => {
                        let _ = self.lease.release(grant.token, timing.call_timeout()).await;
                    }
                    Err(_) => {
                        let _ = self.lease.release_any_term(timing.call_timeout()).await;
                    }
                    Ok(_) => {}
                }
                return None;
            }
            let seen = match attempt {
                Ok(Acquired::Leader(grant)) => {
                    self.redis_ok();
                    return Some(grant);
                }
                Ok(Acquired::HeldBy(holder)) => {
                    failures = 0;
                    self.redis_ok();
                    if let Some(left) = holder.remaining {
                        observed = Some((holder.clone(), clock.now().saturating_add(left)));
                    }
                    self.note_follower_view(
                        Some(LeaderInfo {
                            owner: holder.owner.clone(),
                            identity: holder.identity().to_owned(),
                            token: holder.token,
                        }),
                        None,
                    );
                    Seen::Held(holder.remaining)
                }
                Ok(Acquired::CoolingDown { remaining, started }) => {
                    failures = 0;
                    self.redis_ok();
                    if started {
                        warn!(
                            identity = %self.lease.owner().identity(),
                            lease = %self.lease.name(),
                            cooldown_ms = remaining.as_millis() as u64,
                            "redis is new or lost its data (marker missing or written by another redis process); nobody leads until one lease duration has passed"
                        );
                    }
                    self.note_follower_view(None, Some(remaining));
                    Seen::CoolingDown(remaining)
                }
                Err(err) => {
                    failures = failures.saturating_add(1);
                    self.redis_failed("acquire", &err, failures);
                    Seen::Failed {
                        retry: err.retry(),
                        failures,
                    }
                }
            };
            let seen = match (self.followers, seen) {
                // The polling baseline ignores the holder's TTL.
                (FollowerStrategy::Polling, Seen::Held(_)) => Seen::Held(None),
                (_, seen) => seen,
            };
            let subscribed = self.status.borrow().redis.subscribed;
            let wait = decide::follower_wait(seen, subscribed, &timing, rand::random());
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return None,
                _ = releases.next() => announced = true,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Records what a lost race showed, logging when the leader changes.
    fn note_follower_view(&self, leader: Option<LeaderInfo>, cooldown: Option<Duration>) {
        self.status.send_if_modified(|s| {
            let new_role = Role::Follower {
                leader: leader.clone(),
                cooldown,
            };
            let leader_changed = match (&s.role, &leader) {
                (
                    Role::Follower {
                        leader: Some(old), ..
                    },
                    Some(new),
                ) => old.owner != new.owner,
                (_, Some(_)) => true,
                _ => false,
            };
            if leader_changed && let Some(l) = &leader {
                info!(
                    identity = %s.identity,
                    lease = %s.lease,
                    leader = %l.identity,
                    token = l.token.map(|t| t.0),
                    "following leader"
                );
            }
            let changed = s.role != new_role;
            s.role = new_role;
            changed
        });
    }

    fn redis_ok(&self) {
        self.status.send_if_modified(|s| {
            let changed = !s.redis.reachable || s.redis.last_error.is_some();
            s.redis.reachable = true;
            s.redis.last_error = None;
            changed
        });
    }

    fn redis_failed(&self, op: &'static str, err: &LeaseError, failures: u32) {
        self.observer.redis_error(op, err);
        let identity = self.lease.owner().identity();
        let lease = self.lease.name();
        match err.retry() {
            Retry::BackOff => {
                error!(%identity, %lease, error = %err, failures, "redis refuses leasehold; backing off until it is fixed")
            }
            Retry::Soon if failures == 1 || failures.is_multiple_of(10) => {
                warn!(%identity, %lease, error = %err, failures, "redis call failed")
            }
            Retry::Soon => debug!(%identity, %lease, error = %err, failures, "redis call failed"),
        }
        let message = err.to_string();
        self.status.send_modify(|s| {
            s.redis.reachable = false;
            s.redis.last_error = Some(message);
        });
    }

    /// One term as leader: start the work, renew until something ends the term, step down.
    async fn lead<W, Fut, E>(
        &self,
        grant: Grant,
        work: &mut W,
        shutdown: &CancellationToken,
    ) -> StepDownReason
    where
        W: FnMut(Leadership) -> Fut,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Display + Send + 'static,
    {
        let timing = self.timing;
        let clock = self.lease.clock().clone();
        let identity = self.lease.owner().identity().to_owned();
        let lease_name = self.lease.name().to_string();
        let mut valid_until = grant.sent_at.saturating_add(timing.validity());
        let mut renew_by = grant.sent_at.saturating_add(timing.renew_deadline);
        let mut next_renew = grant.sent_at.saturating_add(timing.retry_period);
        let leadership =
            Leadership::new(&grant, valid_until, &lease_name, &identity, clock.clone());
        self.publish_term(grant.token, valid_until);

        self.status.send_modify(|s| {
            s.role = Role::Leader {
                token: grant.token,
                acquired_at: SystemTime::now(),
                valid_until,
            };
            s.transitions += 1;
        });
        info!(
            %identity,
            lease = %lease_name,
            token = grant.token.0,
            leader = %identity,
            valid_for_ms = clock.now().until(valid_until).as_millis() as u64,
            "became leader"
        );
        self.observer.acquired(grant.token);

        let term = work(leadership.clone());
        let mut work_task = tokio::spawn(async move { term.await.map_err(|err| err.to_string()) });
        let mut failures: u32 = 0;
        // The ending, and whether the work still runs.
        let mut refusal = self.status.subscribe();
        let (ending, work_running) = loop {
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => break (Ending::new(StepDownReason::Shutdown), true),
                _ = refusal.wait_for(|s| s.redis.refused_for_eviction) => {
                    break (Ending::new(StepDownReason::RedisMayEvict), true);
                }
                joined = &mut work_task => {
                    let ended = work_ending(joined);
                    // Work that gave up because its guard refused after a pause ended *because*
                    // the validity deadline passed: report the cause, keep the work's words.
                    if clock.now() >= valid_until {
                        let detail = ended.detail.or_else(|| Some(ended.reason.to_string()));
                        break (Ending { reason: StepDownReason::ValidityDeadlinePassed, detail }, false);
                    }
                    break (ended, false);
                }
                // The boot clock, not a tokio timer: after a suspend this wakes at once, and the
                // step below ends the term whose deadline passed meanwhile.
                _ = clock.sleep_until(next_renew) => {}
            }
            let attempt_started = clock.now();
            let timeout = match decide::watchdog_step(
                attempt_started,
                valid_until,
                renew_by,
                timing.renew_attempt_timeout(),
            ) {
                WatchdogStep::StepDown(reason) => break (Ending::new(reason), true),
                WatchdogStep::Renew { timeout } => timeout,
            };
            let started = Instant::now();
            let renewed = tokio::select! {
                biased;
                _ = shutdown.cancelled() => break (Ending::new(StepDownReason::Shutdown), true),
                r = self.lease.renew(grant.token, timing.lease_duration, timeout) => r,
                // The call's own timeout runs on tokio's clock, which a suspend stops: the
                // first deadline on the boot clock cuts it short, and the step above decides.
                _ = clock.sleep_until(valid_until.min(renew_by)) => continue,
            };
            let latency = started.elapsed();
            match renewed {
                Ok(Renewed::Held { sent_at, repaired }) => {
                    self.observer.renewal(RenewalOutcome::Renewed, latency);
                    failures = 0;
                    self.redis_ok();
                    if repaired {
                        warn!(
                            %identity,
                            lease = %lease_name,
                            token = grant.token.0,
                            "the lease key had vanished before its time (evicted or deleted); the renewal put it back"
                        );
                    }
                    let extended = sent_at.saturating_add(timing.validity());
                    if clock.now() >= extended {
                        // The reply came back after a pause longer than the TTL.
                        break (Ending::new(StepDownReason::ValidityDeadlinePassed), true);
                    }
                    valid_until = extended;
                    renew_by = sent_at.saturating_add(timing.renew_deadline);
                    next_renew = sent_at.saturating_add(timing.retry_period);
                    leadership.extend(valid_until);
                    self.publish_term(grant.token, valid_until);
                    self.status.send_modify(|s| {
                        if let Role::Leader { valid_until: v, .. } = &mut s.role {
                            *v = valid_until;
                        }
                    });
                    debug!(
                        %identity,
                        lease = %lease_name,
                        token = grant.token.0,
                        latency_us = latency.as_micros() as u64,
                        valid_for_ms = clock.now().until(valid_until).as_millis() as u64,
                        "renewed"
                    );
                }
                Ok(Renewed::NotHeld) => {
                    self.observer.renewal(RenewalOutcome::Lost, latency);
                    self.redis_ok();
                    break (Ending::new(StepDownReason::Lost), true);
                }
                Err(err) => {
                    self.observer.renewal(RenewalOutcome::Failed, latency);
                    failures = failures.saturating_add(1);
                    self.redis_failed("renew", &err, failures);
                    next_renew = decide::retry_after_failure(
                        attempt_started,
                        clock.now(),
                        &timing,
                        valid_until,
                        renew_by,
                    );
                }
            }
        };
        self.step_down(&leadership, ending, work_running.then_some(work_task))
            .await
    }

    /// Step-down, in order: zero the guard file, revoke (guard refuses, readiness flips), cancel
    /// the work, record the reason, wait for the work to stop (never past the validity
    /// deadline), release.
    async fn step_down(
        &self,
        leadership: &Leadership,
        ending: Ending,
        work_task: Option<JoinHandle<Result<(), String>>>,
    ) -> StepDownReason {
        let Ending { reason, mut detail } = ending;
        let token = leadership.token();
        // Before anything else: the command checks the file by itself, also while this
        // process is slow to reach the steps below.
        self.zero_guard_file(token);
        leadership.revoke(reason);
        self.status.send_modify(|s| {
            s.role = Role::Follower {
                leader: None,
                cooldown: None,
            };
            s.transitions += 1;
            s.last_step_down = Some(StepDown {
                reason,
                detail: detail.clone(),
                token,
                at: SystemTime::now(),
            });
        });
        leadership.cancel();
        let identity = self.lease.owner().identity();
        let lease = self.lease.name();
        info!(
            %identity,
            %lease,
            token = token.0,
            reason = %reason,
            detail = detail.as_deref().unwrap_or(""),
            "stepped down"
        );
        self.observer.stepped_down(reason);

        if let Some(mut task) = work_task {
            // Until the validity deadline the lease cannot pass on; the work may use all of it.
            let stopped = if leadership.remaining().is_zero() {
                // Past the deadline already (the process was paused): the work gets one short
                // turn to act on its cancellation (the supervisor kills its command at once),
                // then it is aborted.
                tokio::time::timeout(LAST_TURN, &mut task).await.ok()
            } else {
                tokio::select! {
                    joined = &mut task => Some(joined),
                    _ = leadership.deadline_passed(Duration::ZERO) => None,
                }
            };
            match stopped {
                Some(joined) => {
                    if let Ending {
                        detail: Some(d), ..
                    } = work_ending(joined)
                    {
                        detail.get_or_insert(d);
                    }
                }
                None => {
                    warn!(%identity, %lease, token = token.0, "leader work did not stop by the validity deadline; aborting it");
                    task.abort();
                    let _ = task.await;
                }
            }
        }

        if reason.may_still_hold() {
            match self.lease.release(token, self.timing.call_timeout()).await {
                Ok(Released::Released) => {
                    info!(%identity, %lease, token = token.0, "released the lease")
                }
                Ok(Released::NotHeld) => {
                    debug!(%identity, %lease, token = token.0, "lease was no longer ours to release")
                }
                Err(err) => {
                    warn!(%identity, %lease, token = token.0, error = %err, "could not release the lease; it expires on its own")
                }
            }
        }
        reason
    }
}

/// Maps how the work's task ended to a step-down.
fn work_ending(joined: Result<Result<(), String>, JoinError>) -> Ending {
    match joined {
        Ok(Ok(())) => Ending::new(StepDownReason::WorkEnded),
        Ok(Err(err)) => Ending {
            reason: StepDownReason::WorkFailed,
            detail: Some(err),
        },
        Err(join) if join.is_panic() => Ending {
            reason: StepDownReason::WorkPanicked,
            detail: Some(panic_message(join)),
        },
        Err(_) => Ending::new(StepDownReason::WorkEnded),
    }
}

fn panic_message(join: JoinError) -> String {
    let payload = join.into_panic();
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic with a non-string payload".to_owned())
}
