//! The boot-time clock: instants that keep counting while the machine is suspended.
//!
//! std's and tokio's `Instant` stop during a system suspend, so every safety decision compares
//! [`BootInstant`]s (docs/DESIGN.md, "Validity"); a tokio timer may wake a task, but what it
//! decides is decided against this clock.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
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

    /// Nanoseconds since boot, as files for other processes carry the instant (the guard file,
    /// the status file); saturating at `u64::MAX`, some 584 years after boot.
    pub fn as_nanos(self) -> u64 {
        u64::try_from(self.0.as_nanos()).unwrap_or(u64::MAX)
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

/// How far the wall clock (`CLOCK_REALTIME`) runs ahead of the boot clock. What it gained since a
/// reading passed unseen by the boot clock, and the term counts it (docs/DESIGN.md, "Pauses the
/// boot clock did not count").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WallLead(i64);

impl WallLead {
    /// Reads both clocks: the wall clock between two reads of the boot clock, taken against
    /// their middle, so that a preemption between two reads does not pass for a lead gained.
    pub fn now() -> Self {
        let before = read_boot_clock();
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let boot = before + read_boot_clock().saturating_sub(before) / 2;
        let nanos = |d: Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
        Self(nanos(wall).saturating_sub(nanos(boot)))
    }

    /// The lead in nanoseconds, as files for other processes carry it (the guard file).
    pub const fn as_nanos(self) -> i64 {
        self.0
    }

    /// The lead of `nanos` nanoseconds, as [`as_nanos`](Self::as_nanos) wrote it.
    pub const fn from_nanos(nanos: i64) -> Self {
        Self(nanos)
    }

    /// The wall clock's instant (nanoseconds since the epoch, at least 1) that `at` on the boot
    /// clock is under this lead: a deadline on both clocks, for a reader in another process.
    pub fn wall_at(self, at: BootInstant) -> u64 {
        let boot = i64::try_from(at.as_nanos()).unwrap_or(i64::MAX);
        u64::try_from(boot.saturating_add(self.0))
            .unwrap_or(0)
            .max(1)
    }

    /// What the lead gained since `earlier`: time that passed without the boot clock counting
    /// it. Zero when it did not gain (a wall clock set back changes nothing here).
    pub fn gained_since(self, earlier: WallLead) -> Duration {
        Duration::from_nanos(u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0))
    }
}

/// A duration as a message shows it: `Debug`'s compact form (`2.4s`, `500ms`, `7200s`), but
/// zero as people write it, `0s`, rather than `0ns`.
pub fn shown(d: Duration) -> String {
    if d.is_zero() {
        "0s".to_owned()
    } else {
        format!("{d:?}")
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn read_boot_clock() -> Duration {
    use nix::time::{ClockId, clock_gettime};
    match clock_gettime(ClockId::CLOCK_BOOTTIME) {
        Ok(ts) => Duration::new(ts.tv_sec() as u64, ts.tv_nsec() as u32),
        // CLOCK_BOOTTIME exists since Linux 2.6.39; should a kernel refuse it, the monotonic
        // clock, which stops during a suspend: the wall clock's lead then counts the suspend
        // (docs/DESIGN.md, "Pauses the boot clock did not count").
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

/// A future that a [`Clock`] resolves at an instant.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Where the elector and `Leadership::check` read the time from. The default is [`BootClock`];
/// tests inject one that jumps (the test kit's `ShiftedClock`) to simulate a suspend without
/// suspending the machine.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current instant on this clock.
    fn now(&self) -> BootInstant;

    /// Resolves once [`now`](Self::now) has reached `deadline`, also across a system suspend (a
    /// tokio timer would fire that much late). What ends a term waits on this.
    fn sleep_until(&self, deadline: BootInstant) -> Sleep;

    /// The wall clock's lead over this clock's boot clock now.
    fn wall_lead(&self) -> WallLead {
        WallLead::now()
    }
}

/// The real `CLOCK_BOOTTIME`.
#[derive(Debug, Clone, Copy, Default)]
pub struct BootClock;

impl Clock for BootClock {
    fn now(&self) -> BootInstant {
        BootInstant::now()
    }

    fn sleep_until(&self, deadline: BootInstant) -> Sleep {
        Box::pin(boot_timer::sleep_until(deadline))
    }
}

/// A one-shot `timerfd` on `CLOCK_BOOTTIME` with an absolute expiry: the kernel fires it at the
/// boot-clock instant itself, so a suspend cannot make it late.
#[cfg(any(target_os = "linux", target_os = "android"))]
mod boot_timer {
    use std::os::fd::{AsFd, AsRawFd, RawFd};

    use nix::sys::time::TimeSpec;
    use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
    use tokio::io::Interest;
    use tokio::io::unix::AsyncFd;

    use super::BootInstant;

    struct Timer(TimerFd);

    impl AsRawFd for Timer {
        fn as_raw_fd(&self) -> RawFd {
            self.0.as_fd().as_raw_fd()
        }
    }

    fn arm(deadline: BootInstant) -> nix::Result<Timer> {
        let fd = TimerFd::new(
            ClockId::CLOCK_BOOTTIME,
            TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
        )?;
        // A zero expiry would disarm the timer instead of firing it.
        let at = deadline
            .since_boot()
            .max(std::time::Duration::from_nanos(1));
        fd.set(
            Expiration::OneShot(TimeSpec::from_duration(at)),
            TimerSetTimeFlags::TFD_TIMER_ABSTIME,
        )?;
        Ok(Timer(fd))
    }

    pub(super) async fn sleep_until(deadline: BootInstant) {
        loop {
            let now = BootInstant::now();
            if now >= deadline {
                return;
            }
            let armed = arm(deadline)
                .map_err(std::io::Error::from)
                // SAFETY: the timer owns its file descriptor, which nothing else closes or
                // replaces while the AsyncFd holds it; both are dropped together below.
                .and_then(|t| unsafe {
                    Ok(AsyncFd::register_with_interest(t, Interest::READABLE)?)
                });
            match armed {
                Ok(fd) => {
                    if let Ok(mut ready) = fd.readable().await {
                        ready.clear_ready();
                    }
                }
                // No timerfd to be had (a seccomp profile that forbids it, no reactor):
                // re-check the boot clock at least every 100 ms, so a suspend makes us at most
                // that late.
                Err(_) => {
                    let slice = now
                        .until(deadline)
                        .min(std::time::Duration::from_millis(100));
                    tokio::time::sleep(slice).await;
                }
            }
        }
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod boot_timer {
    use super::BootInstant;

    pub(super) async fn sleep_until(deadline: BootInstant) {
        loop {
            let left = BootInstant::now().until(deadline);
            if left.is_zero() {
                return;
            }
            tokio::time::sleep(left.min(std::time::Duration::from_millis(100))).await;
        }
    }
}

/// A shared clock handle.
pub type SharedClock = Arc<dyn Clock>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_show_as_people_write_them() {
        for (d, want) in [
            (Duration::ZERO, "0s"),
            (Duration::from_millis(2400), "2.4s"),
            (Duration::from_millis(500), "500ms"),
            (Duration::from_secs(7200), "7200s"),
        ] {
            assert_eq!(shown(d), want);
        }
    }

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

    #[tokio::test]
    async fn boot_timers_fire_at_their_instant() {
        let start = BootInstant::now();
        let deadline = start.saturating_add(Duration::from_millis(30));
        BootClock.sleep_until(deadline).await;
        let woke = BootInstant::now();
        assert!(woke >= deadline, "woke {woke:?} before {deadline:?}");
        assert!(
            woke.saturating_duration_since(deadline) < Duration::from_millis(200),
            "woke {woke:?}, long after {deadline:?}"
        );
        // A deadline in the past resolves at once.
        BootClock.sleep_until(start).await;
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
