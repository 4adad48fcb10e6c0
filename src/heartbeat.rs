//! The elector loop's heartbeat, which `/healthz` reads: at each turn the loop says by when it
//! will be back (now plus the wait it is about to sleep; [`TermHooks::beat`]), and a loop that
//! is overdue by more than the slack has wedged (client-go's `HealthzAdaptor`, which fails a leader whose lease
//! was not renewed within the lease duration plus a timeout; here followers count too).
//!
//! The slack is one lease duration: between two beats the loop sleeps what it promised and then
//! makes at most one Redis call, each bounded by a timeout no longer than the renew deadline
//! (`Timing::call_timeout`, `renew_attempt_timeout`), which is shorter than the lease duration;
//! a step-down promises the time left to its validity deadline plus the release's timeout. So a
//! healthy loop is never overdue by a lease duration, and a wedged one is seen within one lease
//! duration (plus the probe's period) of its promise.
//!
//! The clock is the monotonic one, not the boot clock: a machine's suspend stops it, as it stops
//! the loop's tokio timers, so a resumed replica is not reported wedged for sleeping. A beat is
//! one clock read and one atomic store: nothing on the hot path waits for it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::elector::TermHooks;

/// No promise to be back: not running yet, or parked on an event with no bound (a gate keeps
/// the replica out until it changes).
const PARKED: u64 = u64::MAX;

/// A shared view of the loop's last promise; clones share it. Add it to the elector with
/// [`Elector::with_hooks`](crate::elector::Elector::with_hooks).
#[derive(Clone, Debug)]
pub struct Heartbeat(Arc<Beats>);

#[derive(Debug)]
struct Beats {
    origin: Instant,
    /// Nanoseconds after `origin` by which the loop promised to be back, or [`PARKED`].
    back_by: AtomicU64,
    slack: Duration,
}

impl Heartbeat {
    /// A heartbeat that counts as wedged `slack` after a missed promise (one lease duration:
    /// see above); parked until the first beat.
    pub fn new(slack: Duration) -> Self {
        Self(Arc::new(Beats {
            origin: Instant::now(),
            back_by: AtomicU64::new(PARKED),
            slack,
        }))
    }

    /// How long the loop is overdue beyond the slack, if it is: it has wedged.
    pub fn wedged(&self) -> Option<Duration> {
        self.wedged_at(self.0.origin.elapsed())
    }

    fn wedged_at(&self, elapsed: Duration) -> Option<Duration> {
        let back_by = self.0.back_by.load(Ordering::Relaxed);
        if back_by == PARKED {
            return None;
        }
        let late = elapsed.checked_sub(Duration::from_nanos(back_by))?;
        (late > self.0.slack).then_some(late)
    }
}

impl TermHooks for Heartbeat {
    /// The loop is at a turn and will be back within `wait` (plus one bounded call); without a
    /// wait it waits for an event with no bound of its own (parked: not a wedge).
    fn beat(&self, wait: Option<Duration>) {
        let back_by = wait.map_or(PARKED, |wait| {
            let at = self.0.origin.elapsed().saturating_add(wait);
            u64::try_from(at.as_nanos()).map_or(PARKED - 1, |n| n.min(PARKED - 1))
        });
        self.0.back_by.store(back_by, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overdue_beyond_the_slack_is_wedged_and_parked_never_is() {
        let slack = Duration::from_secs(15);
        let h = Heartbeat::new(slack);
        let at = |s: u64| h.wedged_at(h.0.origin.elapsed() + Duration::from_secs(s));
        assert_eq!(at(1_000), None, "parked before the first beat");
        h.beat(Some(Duration::from_secs(2)));
        assert_eq!(at(0), None);
        assert_eq!(at(16), None, "late by less than the slack");
        assert!(at(18).is_some_and(|late| late > slack));
        h.beat(None);
        assert_eq!(at(1_000), None);
        h.beat(Some(Duration::MAX));
        assert_eq!(at(1_000), None, "a promise too far to count saturates");
    }
}
