//! A test clock: the boot clock plus an offset that can only grow, so that a test simulates a
//! system suspend (or a pause the boot clock did not count) without suspending the machine. A
//! lease takes it through `LeaseOptions::clock` ([`lease_on_clock`](crate::contenders::lease_on_clock)).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use leasehold::clock::{BootClock, BootInstant, Clock, Sleep, WallLead};

/// The boot clock plus an offset that can only grow: `advance(1h)` looks, to everything that
/// reads this clock, exactly like a one-hour system suspend (tokio's timers do not see it,
/// just as they do not see a real suspend).
#[derive(Debug, Clone, Default)]
pub struct ShiftedClock {
    offset_nanos: Arc<AtomicU64>,
    /// What the wall clock gained on the boot clock: time that passed unseen by it.
    unseen_nanos: Arc<AtomicU64>,
    /// Wakes sleepers at every jump, as the kernel wakes boot-clock timers on resume.
    jumped: Arc<tokio::sync::Notify>,
}

impl ShiftedClock {
    /// A clock that starts equal to the boot clock.
    pub fn new() -> Self {
        Self::default()
    }

    /// Jumps this clock (and every clone of it) forward by `d`.
    pub fn advance(&self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.offset_nanos.fetch_add(nanos, Ordering::SeqCst);
        self.jumped.notify_waiters();
    }

    /// A pause the boot clock does not count (a VM frozen by its hypervisor): the wall clock's
    /// lead gains `d`; this clock's instants do not move.
    pub fn pass_unseen(&self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.unseen_nanos.fetch_add(nanos, Ordering::SeqCst);
        self.jumped.notify_waiters();
    }
}

impl Clock for ShiftedClock {
    fn now(&self) -> BootInstant {
        let offset = Duration::from_nanos(self.offset_nanos.load(Ordering::SeqCst));
        BootInstant::now().saturating_add(offset)
    }

    /// A suspend (`advance`) moves the wall clock with the boot clock; only `pass_unseen`
    /// moves it ahead.
    fn wall_lead(&self) -> WallLead {
        let unseen = i64::try_from(self.unseen_nanos.load(Ordering::SeqCst)).unwrap_or(i64::MAX);
        WallLead::from_nanos(WallLead::now().as_nanos().saturating_add(unseen))
    }

    fn sleep_until(&self, deadline: BootInstant) -> Sleep {
        let clock = self.clone();
        Box::pin(async move {
            loop {
                let jumped = clock.jumped.notified();
                let mut jumped = std::pin::pin!(jumped);
                // Registered before the clock is read, so a jump in between is not missed.
                jumped.as_mut().enable();
                let left = clock.now().until(deadline);
                if left.is_zero() {
                    return;
                }
                tokio::select! {
                    _ = jumped => {}
                    _ = BootClock.sleep_until(BootInstant::now().saturating_add(left)) => {}
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shifted_clock_jumps_like_a_suspend() {
        let clock = ShiftedClock::new();
        let before = clock.now();
        clock.clone().advance(Duration::from_secs(3600));
        let after = clock.now();
        assert!(after.saturating_duration_since(before) >= Duration::from_secs(3600));
    }

    #[tokio::test]
    async fn a_jump_of_the_shifted_clock_wakes_its_sleepers_at_once() {
        let clock = ShiftedClock::new();
        let deadline = clock.now().saturating_add(Duration::from_secs(3600));
        let sleeper = tokio::spawn(clock.sleep_until(deadline));
        tokio::task::yield_now().await;
        assert!(!sleeper.is_finished());
        clock.advance(Duration::from_secs(3601));
        tokio::time::timeout(Duration::from_secs(5), sleeper)
            .await
            .expect("the jump woke the sleeper")
            .expect("the sleeper did not panic");
    }
}
