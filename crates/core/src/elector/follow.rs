//! The follower's side: try to acquire, and otherwise wait for a release, the holder's TTL or the
//! retry period (docs/DESIGN.md, "Followers"); and what the follower tells the status.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{Level, debug, error, info, warn};

use super::board::set;
use super::decide::{self, GiveBack, Seen, Wakeup};
use super::notify::Releases;
use super::{Elector, LeaderInfo, Role, Standing};
use crate::clock::BootInstant;
use crate::lease::{Acquired, FencingToken, Grant, Holder, LeaseError, PreviousTerm, Retry};

impl Elector {
    /// The follower loop: returns a grant, or `None` at shutdown. `held`: the hold-off after a
    /// handover or a term it could not renew ([`decide::held_off_wait`]). `last_led`: the token
    /// of the last term it led, which tells a term of its own that an unanswered acquire won
    /// ([`Elector::resolve_unknown_acquire`]).
    pub(super) async fn follow(
        &self,
        shutdown: &CancellationToken,
        releases: &mut Releases,
        mut give_up_at: Option<BootInstant>,
        held: Option<decide::HoldOff>,
        last_led: Option<FencingToken>,
    ) -> Option<Grant> {
        let timing = self.timing;
        let clock = self.lease.clock().clone();
        let mut failures: u32 = 0;
        // A data-loss cooldown seen before the win, and no holder since: the term before ended
        // with Redis's data; unless Redis's clock stepped back, which revives an ended cooldown.
        let (mut cooled, mut stepped_back) = (false, false);
        // The holder seen last and until when it keeps its term as far as this follower knows,
        // and whether a release was announced since (client-go's observed-time rule).
        let mut observed: Option<(Holder, BootInstant)> = None;
        // The last instant the leader seen may still hold the lease: the TTL seen, plus one lease
        // duration for a renewal just before it ran out.
        let mut vouched_until: Option<BootInstant> = None;
        let mut announced = false;
        // Whether the last wake-up was anything but the announcement of our own release.
        let mut woken = false;
        let mut gates = self.gates.clone();
        let gates_heard_by = clock.now().saturating_add(timing.call_timeout());
        // Redis's clock rate from this replica's tries, so that a term it wins begins with it.
        let mut rate = decide::RateWindow::new(&timing);
        loop {
            self.hooks.each(|h| h.beat(Some(Duration::ZERO)));
            releases.mark_seen();
            if shutdown.is_cancelled() {
                return None;
            }
            if !gates.standing().stands() {
                // A gate keeps this replica out until it lets it stand, or a one-shot lock's
                // wait is over (it never got to try); gates get one call's time to say first.
                // It stops looking at the lease, so it names no leader it saw before.
                self.hooks.each(|h| h.beat(None));
                if matches!(self.status.borrow().role, Role::Follower { .. }) {
                    self.note_follower_view(None, None);
                }
                let given_up = async {
                    match give_up_at {
                        Some(at) => clock.sleep_until(at.max(gates_heard_by)).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    biased;
                    _ = shutdown.cancelled() => return None,
                    _ = gates.wait_until(Standing::stands) => {}
                    _ = given_up => return None,
                }
                continue;
            }
            let now = clock.now();
            observed =
                observed.filter(|(_, until)| decide::observation_stands(now, *until, announced));
            announced = false;
            if let Some(hold) = held {
                if !self.hold_off(shutdown, releases, hold, woken).await {
                    return None;
                }
                // It may have lasted a lease duration: a gate may have said no since.
                if !gates.standing().stands() {
                    continue;
                }
            }
            woken = false;
            // Not raced against shutdown (see `decide::give_back`). The try carries a probe,
            // which proves the release channel (see `notify`).
            let probe = releases.probe();
            let attempt = self
                .lease
                .acquire_observing(
                    timing.lease_duration,
                    timing.acquire_timeout(),
                    observed.as_ref().map(|(holder, _)| holder),
                    probe,
                )
                .await;
            if let (Some(n), Ok(_)) = (probe, &attempt) {
                releases.answered(n);
            }
            if shutdown.is_cancelled() {
                self.give_back(decide::give_back(&attempt)).await;
                return None;
            }
            // A win read too late to lead is no failure of Redis's (docs/DESIGN.md, "Gray
            // failures"); the validity is read for a win only.
            let validity = || decide::validity_at(&timing, self.kept_rate());
            let late = matches!(&attempt, Ok(Acquired::Leader(grant))
                if decide::won_too_late(grant.sent_at, clock.now(), validity(), &timing));
            let attempt = match attempt {
                Ok(Acquired::Leader(grant)) if late => {
                    debug!(
                        identity = %self.lease.owner().identity(),
                        lease = %self.lease.name(),
                        token = grant.token.0,
                        "won a term whose answer came too late to lead it; taken for an answer that never came"
                    );
                    let after = timing.acquire_timeout();
                    Err(LeaseError::Timeout {
                        op: "acquire",
                        after,
                    })
                }
                attempt => attempt,
            };
            if let Ok(acquired) = &attempt {
                self.hooks.each(|h| h.tried(acquired));
                if let Some(reading) = self.lease.last_reading() {
                    // A step seen while following ends nothing; the window starts anew.
                    stepped_back |= matches!(rate.record(reading), decide::Jump::Back(_));
                    self.keep_rate(rate.bound());
                }
                self.redis_ok(&mut failures);
            }
            let seen = match attempt {
                // A gate said no while the acquire ran: no term begins, the win goes back.
                Ok(Acquired::Leader(grant)) if !gates.standing().stands() => {
                    self.give_back(GiveBack::Term(grant.token)).await;
                    continue;
                }
                Ok(Acquired::Leader(mut grant)) => {
                    if cooled {
                        grant.previous = PreviousTerm::DataLoss;
                    }
                    return Some(grant);
                }
                Ok(Acquired::HeldBy(holder)) => {
                    // A term after the loss: the one before a later win is this holder's.
                    (cooled, stepped_back) = (false, false);
                    let left = holder.remaining.and_then(decide::observed_for);
                    vouched_until =
                        left.map(|left| clock.now().saturating_add(left + timing.lease_duration));
                    if let Some(left) = left {
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
                    cooled |= started || !stepped_back;
                    if started {
                        self.hooks.each(|h| h.cooldown_started());
                        warn!(
                            identity = %self.lease.owner().identity(),
                            lease = %self.lease.name(),
                            cooldown_ms = remaining.as_millis() as u64,
                            "redis is new or lost its data (state record missing or written by another redis process, as also at a lease name's first use); nobody leads until the cooldown ends"
                        );
                    }
                    self.note_follower_view(None, Some(remaining));
                    // A cooldown is no holder: a one-shot lock waits it out, and its try as it
                    // ends (the wait below) is its last.
                    let after =
                        decide::follower_wait(Seen::CoolingDown(remaining), true, &timing, 0.0);
                    give_up_at = give_up_at.map(|at| at.max(clock.now().saturating_add(after)));
                    Seen::CoolingDown(remaining)
                }
                Ok(Acquired::Reserved {
                    identity,
                    remaining,
                }) => {
                    debug!(
                        identity = %self.lease.owner().identity(),
                        lease = %self.lease.name(),
                        reserved_for = %identity,
                        remaining_ms = remaining.map(|r| r.as_millis() as u64),
                        "the next term is reserved for another replica by a handover"
                    );
                    self.note_follower_view(None, None);
                    // Like a holder whose TTL runs out then: try again at the reservation's end;
                    // one without expiry, like a key without TTL, at the retry period.
                    Seen::Held(remaining)
                }
                Ok(Acquired::NewerProtocol(_)) => {
                    self.note_follower_view(None, None);
                    // Out until the keys are ours to read: look again every retry period.
                    Seen::Held(None)
                }
                Err(err) => {
                    if !late {
                        self.redis_failed("acquire", &err, &mut failures);
                    }
                    self.forget_leader_after(vouched_until);
                    if decide::outcome_unknown(&err) {
                        // Before anything else (docs/DESIGN.md, "Gray failures").
                        let (led, vouched) = (last_led, vouched_until);
                        if !self
                            .resolve_unknown_acquire(shutdown, led, vouched, give_up_at, failures)
                            .await
                        {
                            // At shutdown, a term the acquire won is given back, not waited out.
                            if shutdown.is_cancelled() {
                                self.give_back(GiveBack::AnyTerm).await;
                            }
                            return None;
                        }
                        // Redis answered in time: the outage, if any, is over; try again at
                        // once, but not past a one-shot lock's wait (an acquire that keeps
                        // running out while reads answer, as behind a slow WAIT, tried for ever).
                        failures = 0;
                        decide::next_try(Duration::ZERO, clock.now(), give_up_at)?;
                        continue;
                    }
                    Seen::Failed {
                        retry: err.retry(),
                        failures,
                    }
                }
            };
            let seen = decide::seen_by(self.followers, seen);
            let subscribed = self.status.borrow().redis.subscribed;
            let wait = decide::follower_wait(seen, subscribed, &timing, rand::random());
            // `None`: a one-shot lock whose wait is over.
            let wait = decide::next_try(wait, clock.now(), give_up_at)?;
            self.hooks.each(|h| h.beat(Some(wait)));
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return None,
                wakeup = releases.next() => {
                    let holder = observed.as_ref().map(|(holder, _)| holder);
                    announced = decide::announces_release(&wakeup, holder);
                    woken = held.is_some() && wakes_held_off(&wakeup);
                }
                _ = tokio::time::sleep(wait) => {}
            }
            // A one-shot lock frozen past its wait (SIGSTOP, a paused VM) does not try as it
            // thaws: its last try was due at the wait's end, not a retry period or more after.
            if give_up_at.is_some_and(|at| clock.now() > at.saturating_add(timing.retry_period)) {
                return None;
            }
        }
    }

    /// A replica holding off waits before its try as [`decide::held_off_wait`] says; a wake-up
    /// ([`wakes_held_off`]) shortens the wait to a yield. `false` at shutdown.
    async fn hold_off(
        &self,
        shutdown: &CancellationToken,
        releases: &mut Releases,
        hold: decide::HoldOff,
        mut woken: bool,
    ) -> bool {
        let clock = self.lease.clock().clone();
        loop {
            let wait = decide::held_off_wait(clock.now(), hold, woken, &self.timing);
            if wait.is_zero() {
                return true;
            }
            self.hooks.each(|h| h.beat(Some(wait)));
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return false,
                wakeup = releases.next() => woken |= wakes_held_off(&wakeup),
                _ = clock.sleep_until(clock.now().saturating_add(wait)) => return true,
            }
        }
    }

    /// After a failed call: the leader last seen is no longer named once nothing vouches for it
    /// (`vouched_until`: the TTL seen plus a lease duration; `None`, no TTL seen).
    pub(super) fn forget_leader_after(&self, vouched_until: Option<BootInstant>) {
        if vouched_until.is_none_or(|until| self.lease.clock().now() > until) {
            self.status.modify_if(|s| match &mut s.role {
                Role::Follower { leader, .. } => leader.take().is_some(),
                _ => false,
            });
        }
    }

    /// Records what a lost race showed, logging when the leader changes.
    fn note_follower_view(&self, leader: Option<LeaderInfo>, cooldown: Option<Duration>) {
        self.status.modify_if(|s| {
            let new_role = Role::Follower {
                leader: leader.clone(),
                cooldown,
            };
            let leader_changed = decide::leader_changed(&s.role, leader.as_ref());
            if leader_changed && let Some(l) = &leader {
                info!(
                    identity = %s.identity,
                    lease = %s.lease,
                    leader = %l.identity,
                    token = l.token.map(|t| t.0),
                    "following leader"
                );
            }
            set(&mut s.role, new_role)
        });
    }

    /// Redis answered: `failures`, the failed calls in a row, start again from none.
    pub(super) fn redis_ok(&self, failures: &mut u32) {
        *failures = 0;
        self.redis_seen(true, None);
    }

    /// A call failed: one more of `failures`, logged as loud as [`failure_log`] says.
    pub(super) fn redis_failed(&self, op: &'static str, err: &LeaseError, failures: &mut u32) {
        *failures = failures.saturating_add(1);
        let failures = *failures;
        self.hooks.each(|h| h.redis_error(op, err));
        let identity = self.lease.owner().identity();
        let lease = self.lease.name();
        let level = failure_log(err.retry(), failures);
        if level == Level::ERROR {
            error!(%identity, %lease, error = %err, failures, "redis refuses leasehold; backing off until it is fixed")
        } else if level == Level::WARN {
            warn!(%identity, %lease, error = %err, failures, "redis call failed")
        } else {
            debug!(%identity, %lease, error = %err, failures, "redis call failed")
        }
        self.redis_seen(err.is_answer(), Some(err.to_string()));
    }

    /// The same answer or failure again (an outage, every retry) is no news to the watchers.
    fn redis_seen(&self, reachable: bool, last_error: Option<String>) {
        self.status.modify_if(|s| {
            set(&mut s.redis.reachable, reachable) | set(&mut s.redis.last_error, last_error)
        });
    }

    /// Gives back what a try may have won, at shutdown ([`decide::give_back`]) or when a gate
    /// said no meanwhile; one that cannot be given back is said, and expires on its own.
    async fn give_back(&self, what: GiveBack) {
        let timeout = self.timing.call_timeout();
        let given = match what {
            GiveBack::Term(token) => self.lease.release(token, timeout).await,
            GiveBack::AnyTerm => self.lease.release_any_term(timeout).await,
            GiveBack::Nothing => return,
        };
        if let Err(err) = given {
            warn!(
                identity = %self.lease.owner().identity(),
                lease = %self.lease.name(),
                error = %err,
                "could not give back a term a try won or may have won (its answer lost) as the replica stopped or a gate said no; if won, it expires on its own"
            );
        }
    }
}

/// Whether a wake-up calls a replica holding off to try (after a yield): anything but
/// [`Wakeup::Rejoined`]. Its own release's announcement, which would only hand the lease back to
/// it, wakes nobody (`notify`).
fn wakes_held_off(wakeup: &Wakeup) -> bool {
    *wakeup != Wakeup::Rejoined
}

/// How loud the `failures`-th failure in a row is, given whether it is worth retrying soon: an
/// error once at the first refusal of a run (a configuration fault; the elector backs off, and
/// readiness and `leasehold status` keep saying it while it lasts); a warning at the first
/// failure of a run and every tenth; debug for those in between, which would flood the log.
fn failure_log(retry: Retry, failures: u32) -> Level {
    match retry {
        Retry::BackOff if failures == 1 => Level::ERROR,
        Retry::Soon if failures == 1 || failures.is_multiple_of(10) => Level::WARN,
        Retry::BackOff | Retry::Soon => Level::DEBUG,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elector::Timing;
    use crate::lease::{LeaseName, LeaseOptions, OwnerId, RedisLease};

    #[test]
    fn a_replica_holding_off_is_woken_by_others_releases_and_resubscriptions_only() {
        // (wake-up) -> wakes a hold-off; its own release is never a wake-up (`notify`)
        let cases = [
            (
                Wakeup::Released("web-b-2#8".into()),
                true,
                "another's release",
            ),
            (Wakeup::Resubscribed, true, "a release may have been missed"),
            (Wakeup::DataLoss, true, "redis lost its data"),
            (Wakeup::Rejoined, false, "its own return to the election"),
        ];
        for (wakeup, want, why) in cases {
            assert_eq!(wakes_held_off(&wakeup), want, "{why}");
        }
    }

    #[tokio::test]
    async fn the_same_failure_again_changes_nothing_a_watcher_is_told() {
        let name = LeaseName::for_deployment("shop", "web").unwrap();
        let owner = OwnerId::generate("web-a").unwrap();
        let lease =
            RedisLease::new("redis://127.0.0.1:1", name, owner, LeaseOptions::default()).unwrap();
        let elector = Elector::new(lease, Timing::default()).unwrap();
        let mut status = elector.status();
        let refused = |detail: &str| LeaseError::Connection {
            op: "acquire",
            detail: detail.to_owned(),
        };
        let mut failures = 0;
        elector.redis_failed("acquire", &refused("connection refused"), &mut failures);
        assert!(status.has_changed().unwrap(), "the first failure is news");
        status.borrow_and_update();
        elector.redis_failed("acquire", &refused("connection refused"), &mut failures);
        assert!(
            !status.has_changed().unwrap(),
            "the same failure again is not"
        );
        elector.redis_failed("acquire", &refused("connection reset"), &mut failures);
        assert!(status.has_changed().unwrap(), "another failure is");
        assert_eq!(failures, 3, "each failure is counted");
    }

    #[test]
    fn redis_failures_are_loud_once_and_then_every_tenth_and_a_refusal_once() {
        const ERROR: Level = Level::ERROR;
        const WARN: Level = Level::WARN;
        const DEBUG: Level = Level::DEBUG;
        // (retry, failures in a row) -> log
        let cases = [
            (
                Retry::Soon,
                1,
                WARN,
                "the first failure of an outage is said",
            ),
            (Retry::Soon, 2, DEBUG, "the next ones are not"),
            (Retry::Soon, 9, DEBUG, "up to the ninth"),
            (Retry::Soon, 10, WARN, "the tenth is said again"),
            (Retry::Soon, 20, WARN, "and every tenth after"),
            (Retry::Soon, 21, DEBUG, "but not those in between"),
            (
                Retry::BackOff,
                1,
                ERROR,
                "a refusal is an error from the first",
            ),
            (
                Retry::BackOff,
                7,
                DEBUG,
                "and once: readiness and `leasehold status` keep saying it",
            ),
        ];
        for (retry, failures, want, why) in cases {
            assert_eq!(failure_log(retry, failures), want, "{why}");
        }
    }
}
