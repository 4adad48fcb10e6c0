//! The leader's side: one term, from its work's start through the watchdog to the step-down.

use std::fmt::Display;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::decide::{self, Deadlines, Jump, RateWindow, Reading, TermEnd, WatchdogStep, WorkStop};
use super::dropped::TermInFlight;
use super::ending::{Ending, clock_jumped, unseen_pause, work_ending};
use super::{
    Elector, FIXED_DRIFT, Leadership, RenewalOutcome, Role, Standing, StepDown, StepDownReason,
};
use crate::lease::{Grant, Released, Renewal, Renewed, Reservation};

impl Elector {
    pub(super) async fn lead<W, Fut, E>(
        &self,
        grant: Grant,
        work: &mut W,
        shutdown: &CancellationToken,
        nudges: &mut watch::Receiver<u64>,
    ) -> TermEnd
    where
        W: FnMut(Leadership) -> Fut,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Display + Send + 'static,
    {
        let timing = self.timing;
        let clock = self.lease.clock().clone();
        let identity = self.lease.owner().identity().to_owned();
        let lease_name = self.lease.name().to_string();
        // Until this term's replies bound Redis's clock rate, the last term's bound does: a
        // Redis clock beyond the drift margin then shortens the first validity too.
        let carried = self.kept_rate();
        let mut deadlines = Deadlines::valid_for(
            grant.sent_at,
            &timing,
            decide::validity_at(&timing, carried),
        );
        let valid_until = deadlines.valid_until;
        let leadership =
            Leadership::new(&grant, valid_until, &lease_name, &identity, clock.clone());
        self.hooks
            .each(|h| h.began(grant.token, valid_until, grant.lead));

        self.status.modify(|s| {
            s.role = Role::Leader {
                token: grant.token,
                acquired_at: SystemTime::now(),
                valid_until,
                lead: grant.lead,
            };
            s.transitions += 1;
        });
        info!(
            %identity,
            lease = %lease_name,
            token = grant.token.0,
            leader = %identity,
            valid_for_ms = clock.now().until(valid_until).as_millis() as u64,
            previous_term = grant.previous.as_label(),
            "became leader"
        );

        // A closure that panics when called ends the term as a panicking future does.
        let term = std::panic::catch_unwind(AssertUnwindSafe(|| work(leadership.clone())));
        let mut work_task = tokio::spawn(async move {
            let term = term.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            term.await.map_err(|err| err.to_string())
        });
        let mut in_flight = TermInFlight {
            elector: self,
            leadership: &leadership,
            work: work_task.abort_handle(),
            over: false,
        };
        let mut failures: u32 = 0;
        // What the last renewal heard, while renewals fail: said if the renew deadline passes.
        let mut last_failure: Option<String> = None;
        let mut alone = false;
        // The rate of Redis's clock, from this term's grant and renewals. The grant's reading
        // counts as received now: later than its reply, which only widens its interval.
        let mut rate = RateWindow::new(&timing);
        // When this term last had a renewal note the rate in Redis, for `leasehold status`.
        let mut rate_noted: Option<crate::clock::BootInstant> = None;
        rate.record(Reading {
            sent: grant.sent_at,
            received: clock.now(),
            redis_us: grant.redis_us,
        });
        // Nudges heard while following were for an earlier term.
        nudges.borrow_and_update();
        let mut gates = self.gates.clone();
        // The ending, and whether the work still runs.
        let (ending, work_running) = loop {
            let wait = clock.now().until(deadlines.next_renew);
            self.hooks.each(|h| h.beat(Some(wait)));
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => break (Ending::new(StepDownReason::Shutdown), true),
                // Only `Out` is not standing: the pattern always matches.
                Standing::Out { gate, detail } = gates.wait_until(|s| !s.stands()) => {
                    break (Ending::said(StepDownReason::Gate(gate), detail), true);
                }
                to = leadership.handover_asked() => break (Ending::handover(to), true),
                _ = leadership.missed() => {
                    break (Ending::new(StepDownReason::ValidityDeadlinePassed), true);
                }
                // A handover request was nudged on the channel, or a data loss told: renew now.
                // The renewal reads the request (which names its term), or finds the lease gone.
                Ok(()) = nudges.changed() => {}
                joined = &mut work_task => {
                    let ended = work_ending(joined);
                    let (reason, detail) = decide::label_work_end(
                        ended.reason,
                        ended.detail,
                        clock.now(),
                        deadlines.valid_until,
                    );
                    break (Ending::said(reason, detail), false);
                }
                // The boot clock, not a tokio timer: after a suspend this wakes at once, and the
                // step below ends the term whose deadline passed meanwhile.
                _ = clock.sleep_until(deadlines.next_renew) => {}
            }
            // Time the boot clock did not count, as the wall clock gained it, has passed too.
            let lead = clock.wall_lead();
            let unseen = lead.gained_since(leadership.lead());
            let boot_now = clock.now();
            let attempt_started = boot_now.saturating_add(unseen);
            let (valid_until, renew_by) = (deadlines.valid_until, deadlines.renew_by);
            let step = |at| {
                decide::watchdog_step(at, valid_until, renew_by, timing.renew_attempt_timeout())
            };
            let timeout = match step(attempt_started) {
                WatchdogStep::StepDown(reason) => {
                    // A deadline that the boot clock alone says passed is the reason.
                    let seen = match step(boot_now) {
                        WatchdogStep::StepDown(seen) => Some(seen),
                        WatchdogStep::Renew { .. } => None,
                    };
                    let mut ending = unseen_pause(reason, seen, unseen, &identity, &lease_name);
                    if ending.detail.is_none() {
                        ending.detail =
                            last_failure.map(|e| format!("the last renewal failed: {e}"));
                    }
                    break (ending, true);
                }
                WatchdogStep::Renew { timeout } => timeout,
            };
            let started = Instant::now();
            let renewed = tokio::select! {
                biased;
                _ = shutdown.cancelled() => break (Ending::new(StepDownReason::Shutdown), true),
                r = self.lease.renew(grant.token, timing.lease_duration, timeout) => r,
                // The call's own timeout runs on tokio's clock, which a suspend stops: the
                // first deadline on the boot clock cuts it short, and the step above decides.
                _ = clock.sleep_until(deadlines.first()) => continue,
            };
            let (latency, wall_lead, received) =
                (started.elapsed(), clock.wall_lead(), clock.now());
            // A requested handover is a renewal like any other, then the end of the term.
            let handover = match &renewed {
                Ok(Renewed::HandoverRequested { to, .. }) => Some(to.clone()),
                _ => None,
            };
            // A step of Redis's clock past the lease's expiry is refused, and its time shows.
            let (outcome, read) = match &renewed {
                Ok(Renewed::Held(r) | Renewed::HandoverRequested { renewal: r, .. }) => {
                    (RenewalOutcome::Renewed, Some((r.sent_at, r.redis_us)))
                }
                Ok(Renewed::NotHeld { sent_at, redis_us }) => {
                    (RenewalOutcome::Lost, Some((*sent_at, *redis_us)))
                }
                Err(_) => (RenewalOutcome::Failed, None),
            };
            self.hooks.each(|h| h.renewal(outcome, latency));
            if let Some((sent, redis_us)) = read {
                // Time the boot clock did not count since the last renewal was sent (a freeze,
                // or this host's wall clock set forward) is no step of Redis's clock, and no
                // baseline across it bounds the rate.
                if wall_lead.gained_since(leadership.lead()) > FIXED_DRIFT {
                    rate.forget();
                }
                let jump = match rate.record(Reading {
                    sent,
                    received,
                    redis_us,
                }) {
                    // A refusal ends the term whatever the clock did: only a step forward is
                    // its reason.
                    Jump::Back(_) if outcome == RenewalOutcome::Lost => Jump::None,
                    jump => jump,
                };
                if let Some(ending) = clock_jumped(jump, &identity, &lease_name, grant.token) {
                    break (ending, true);
                }
            }
            match renewed {
                Ok(Renewed::Held(renewal) | Renewed::HandoverRequested { renewal, .. }) => {
                    last_failure = None;
                    let subscribed = self.status.borrow().redis.subscribed;
                    alone = decide::nobody_else_listens(renewal.listeners, subscribed);
                    let Renewal {
                        sent_at, repaired, ..
                    } = renewal;
                    if let Some(bound) = rate.bound() {
                        self.hooks.each(|h| h.clock_rate(bound));
                        self.keep_rate(Some(bound));
                        // About once per lease duration: the next renewal writes it.
                        if rate_noted.is_none_or(|at| {
                            received.saturating_duration_since(at) >= timing.lease_duration
                        }) {
                            self.lease.note_rate(bound.low, bound.high);
                            rate_noted = Some(received);
                        }
                    }
                    self.redis_ok(&mut failures);
                    if repaired {
                        warn!(
                            %identity,
                            lease = %lease_name,
                            token = grant.token.0,
                            "the lease key had vanished before its time (evicted or deleted); the renewal put it back"
                        );
                    }
                    // This window's bound, or the last that said something while a step has
                    // started the window anew or its baseline is short.
                    let bound = self.kept_rate();
                    let unseen = wall_lead.gained_since(lead);
                    let now = received.saturating_add(unseen);
                    deadlines = match decide::after_renewal(now, sent_at, &timing, bound) {
                        Ok(deadlines) => deadlines,
                        // The reply came back after a pause longer than the TTL.
                        Err(reason) => {
                            let seen = decide::after_renewal(received, sent_at, &timing, bound);
                            break (
                                unseen_pause(reason, seen.err(), unseen, &identity, &lease_name),
                                true,
                            );
                        }
                    };
                    let valid_until = deadlines.valid_until;
                    leadership.extend(valid_until, lead);
                    self.hooks
                        .each(|h| h.extended(grant.token, valid_until, lead));
                    self.status.modify(|s| {
                        if let Role::Leader {
                            valid_until: v,
                            lead: l,
                            ..
                        } = &mut s.role
                        {
                            (*v, *l) = (valid_until, lead);
                        }
                    });
                    debug!(
                        %identity,
                        lease = %lease_name,
                        token = grant.token.0,
                        latency_us = latency.as_micros() as u64,
                        valid_for_ms = received.until(valid_until).as_millis() as u64,
                        "renewed"
                    );
                    if let Some(to) = handover {
                        break (Ending::handover(to), true);
                    }
                }
                Ok(Renewed::NotHeld { .. }) => {
                    self.redis_ok(&mut failures);
                    break (Ending::new(StepDownReason::Lost), true);
                }
                Err(err) => {
                    self.redis_failed("renew", &err, &mut failures);
                    last_failure = Some(err.to_string());
                    if err.is_lasting_refusal() {
                        // Retrying until the renew deadline would end the same way, and the
                        // next acquire (which Redis may allow) would start it all again.
                        let detail = Some(err.to_string());
                        break (Ending::said(StepDownReason::RenewRefused, detail), true);
                    }
                    deadlines.next_renew = decide::retry_after_failure(
                        attempt_started,
                        clock.now(),
                        &timing,
                        deadlines.valid_until,
                        deadlines.renew_by,
                    );
                }
            }
        };
        let (reason, released) = self
            .step_down(&leadership, ending, work_running.then_some(work_task))
            .await;
        in_flight.over = true;
        TermEnd {
            reason,
            released,
            alone,
        }
    }

    /// Step-down, in docs/DESIGN.md's order, the hooks told first. Returns the reason, and
    /// whether the release was announced.
    async fn step_down(
        &self,
        leadership: &Leadership,
        ending: Ending,
        work_task: Option<JoinHandle<Result<(), String>>>,
    ) -> (StepDownReason, bool) {
        let Ending {
            reason,
            detail,
            hand_to,
        } = ending;
        let token = leadership.token();
        // The wait for the work ends at the validity deadline, then one release.
        let left = self.lease.clock().now().until(leadership.valid_until());
        self.hooks
            .each(|h| h.beat(Some(left + self.timing.call_timeout())));
        // Before anything else: the guard file is zeroed here (the command checks it by itself,
        // also while this process is slow to reach the steps below).
        // Every hook is told, whatever an earlier one answered.
        let mut withdrawn = true;
        self.hooks.each(|h| withdrawn &= h.ending(token, reason));
        leadership.revoke(reason);
        self.status.modify(|s| {
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
        // In the same instant as the revocation: the hooks learn of it before the work does.
        leadership.cancel();
        let identity = self.lease.owner().identity();
        let lease = self.lease.name();
        info!(
            %identity,
            %lease,
            token = token.0,
            reason = reason.as_label(),
            detail = detail.as_deref().unwrap_or(""),
            "stepped down"
        );

        // Work aborted at the deadline is not known to be gone (a command's processes outlive
        // the abort until seen dead): its lease is left to expire, not released.
        let mut aborted = false;
        if let Some(mut task) = work_task {
            // Time the boot clock did not count has passed too: after a pause it may be over.
            let stopped = match decide::work_stop(leadership.now(), leadership.valid_until()) {
                // Past the deadline already (the process was paused): the supervisor kills its
                // command at once and has this long to see it gone.
                WorkStop::LastTurn(turn) => tokio::time::timeout(turn, &mut task).await.ok(),
                WorkStop::UntilDeadline => tokio::select! {
                    joined = &mut task => Some(joined),
                    _ = leadership.deadline_passed(Duration::ZERO) => None,
                },
            };
            // How a work stopped for this step-down ended is not its reason (a command's 143 at
            // SIGTERM): the step-down was said above, with its own detail.
            if stopped.is_none() {
                warn!(%identity, %lease, token = token.0, "leader work did not stop by the validity deadline; aborting it, and leaving the lease to expire");
                task.abort();
                let _ = task.await;
                aborted = true;
            }
        }

        // A term a hook still names (its guard file) is released only once its deadline passed,
        // so that no reader sees two valid terms; at shutdown not at all: it expires.
        let withheld = reason.may_still_hold() && !withdrawn;
        let shutdown = reason == StepDownReason::Shutdown;
        if withheld {
            warn!(%identity, %lease, token = token.0, shutdown, "a trace of the term could not be withdrawn; the lease is released at the term's deadline, or left to expire at shutdown");
            if !shutdown {
                leadership.deadline_passed(Duration::ZERO).await;
            }
        }
        let mut released = false;
        if reason.may_still_hold() && !(withheld && shutdown) && !aborted {
            let reserve = hand_to.map(|identity| Reservation {
                identity,
                duration: decide::reservation(&self.timing),
            });
            match self
                .lease
                .release_handing_over(token, reserve.as_ref(), self.timing.call_timeout())
                .await
            {
                Ok(Released::Released) => {
                    released = true;
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
        self.hooks.each(|h| h.ended(token, reason, released));
        (reason, released)
    }
}
