//! The boot-time clock: instants that keep counting while the machine is suspended.
//!
//! Leadership is only valid until `t0 + ttl − drift`, where `t0` is read just before a command is
//! sent. std's and tokio's `Instant` read `CLOCK_MONOTONIC`, which stops during a system suspend:
//! a laptop or VM resumed after an hour would believe a 15 s lease still valid. `CLOCK_BOOTTIME`
//! keeps counting, so every safety decision compares [`BootInstant`]s. Timers may still use tokio;
//! whatever a timer wakes up to decide is decided against this clock.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A point on the boot-time clock (time since boot, suspend included).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct BootInstant(Duration);

impl BootInstant {
    /// Reads `CLOCK_BOOTTIME`.
    pub fn now() -> Self {
        Self(read_boot_clock())
    }

    /// The instant `since_boot` after boot; mostly for tests and for values kept in atomics.
    pub const fn from_since_boot(since_boot: Duration) -> Self {
        Self(since_boot)
    }

    /// Time since boot, suspend included.
    pub const fn since_boot(self) -> Duration {
        self.0
    }

    /// How long after `earlier` this instant is; zero when it is not after it.
    pub fn saturating_duration_since(self, earlier: BootInstant) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    /// How long from this instant until `later`; zero when `later` has passed.
    pub fn until(self, later: BootInstant) -> Duration {
        later.saturating_duration_since(self)
    }

    /// This instant moved forward by `d` (saturating at the end of representable time).
    pub fn saturating_add(self, d: Duration) -> Self {
        Self(self.0.saturating_add(d))
    }

    /// This instant moved back by `d` (saturating at boot).
    pub fn saturating_sub(self, d: Duration) -> Self {
        Self(self.0.saturating_sub(d))
    }
}

impl fmt::Debug for BootInstant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "boot+{:?}", self.0)
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn read_boot_clock() -> Duration {
    use nix::time::{ClockId, clock_gettime};
    match clock_gettime(ClockId::CLOCK_BOOTTIME) {
        Ok(ts) => Duration::new(ts.tv_sec() as u64, ts.tv_nsec() as u32),
        // CLOCK_BOOTTIME exists since Linux 2.6.39; should a kernel refuse it, the monotonic
        // clock is the closest safe substitute (it can only make us believe *less* time passed
        // during a suspend, which the docs call out).
        Err(_) => monotonic_fallback(),
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn read_boot_clock() -> Duration {
    monotonic_fallback()
}

fn monotonic_fallback() -> Duration {
    use std::sync::OnceLock;
    use std::time::Instant;
    static ANCHOR: OnceLock<Instant> = OnceLock::new();
    ANCHOR.get_or_init(Instant::now).elapsed()
}

/// Where the elector and the guard read the time from. The default is [`BootClock`]; tests
/// inject a [`ShiftedClock`] to simulate a suspend without suspending the machine.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current instant on this clock.
    fn now(&self) -> BootInstant;
}

/// The real `CLOCK_BOOTTIME`.
#[derive(Debug, Clone, Copy, Default)]
pub struct BootClock;

impl Clock for BootClock {
    fn now(&self) -> BootInstant {
        BootInstant::now()
    }
}

/// The boot clock plus an offset that can only grow: `advance(1h)` looks, to everything that
/// reads this clock, exactly like a one-hour system suspend (tokio's timers do not see it,
/// just as they do not see a real suspend).
#[derive(Debug, Clone, Default)]
pub struct ShiftedClock {
    offset_nanos: Arc<AtomicU64>,
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
    }
}

impl Clock for ShiftedClock {
    fn now(&self) -> BootInstant {
        let offset = Duration::from_nanos(self.offset_nanos.load(Ordering::SeqCst));
        BootInstant::now().saturating_add(offset)
    }
}

/// A shared clock handle.
pub type SharedClock = Arc<dyn Clock>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_clock_never_goes_backwards() {
        let mut last = BootInstant::now();
        for _ in 0..10_000 {
            let now = BootInstant::now();
            assert!(now >= last, "{now:?} < {last:?}");
            last = now;
        }
    }

    #[test]
    fn boot_clock_keeps_pace_with_the_monotonic_clock_while_awake() {
        let (b0, m0) = (BootInstant::now(), std::time::Instant::now());
        std::thread::sleep(Duration::from_millis(20));
        let boot = BootInstant::now().saturating_duration_since(b0);
        let mono = m0.elapsed();
        let diff = boot.abs_diff(mono);
        assert!(
            diff < Duration::from_millis(5),
            "boot {boot:?} vs monotonic {mono:?}"
        );
    }

    #[test]
    fn shifted_clock_jumps_like_a_suspend() {
        let clock = ShiftedClock::new();
        let before = clock.now();
        clock.clone().advance(Duration::from_secs(3600));
        let after = clock.now();
        assert!(after.saturating_duration_since(before) >= Duration::from_secs(3600));
    }

    #[test]
    fn arithmetic_saturates_instead_of_panicking() {
        let t = BootInstant::from_since_boot(Duration::from_secs(1));
        assert_eq!(
            t.saturating_sub(Duration::from_secs(5)),
            BootInstant::default()
        );
        assert_eq!(t.until(BootInstant::default()), Duration::ZERO);
        assert_eq!(
            BootInstant::default().until(t),
            Duration::from_secs(1),
            "until() measures forward"
        );
    }
}
