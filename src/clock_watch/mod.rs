//! The clocks as this replica sees them, kept for `/leader`, the status file and the metrics:
//! the last bound of Redis's clock rate that one of its terms measured, and the rate of its own
//! boot clock against the oscillator ([`slew`]), sampled at each term's start and renewal (no
//! timer of its own). A slew of the boot clock beyond the drift margin is said: at warn the
//! first time, again every [`REPEAT`](slew::REPEAT) while it lasts, at info when it ends.
//!
//! It changes nothing about when a term begins or ends, so it lives outside the core: the
//! validity deadline is taken on the boot clock, whose slew the measured Redis rate already
//! holds (docs/DESIGN.md, "Validity"); the oscillator only tells which of the two clocks moved.

pub mod slew;

use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde::Serialize;
use tracing::{debug, info, warn};

use crate::clock::{BootInstant, WallLead};
use crate::elector::{RateBound, TermHooks, Timing};
use crate::lease::FencingToken;
use leasehold_core::locked::locked;
use slew::{Sample, Say, SlewWindow, Telling};

/// The rate of Redis's clock in `/leader` and the status file: the bound one of this replica's
/// terms measured last. A follower shows its own last term's (`term` says which, `measured_at`
/// when), never another replica's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RedisClockView {
    /// Redis seconds per boot-clock second: the middle of the bound.
    pub rate: f64,
    /// The bound's low end.
    pub low: f64,
    /// The bound's high end.
    pub high: f64,
    /// `high - low`.
    pub width: f64,
    /// The term whose renewals measured it.
    pub term: Option<u64>,
    /// When, on the wall clock (RFC 3339), for display.
    pub measured_at: String,
}

impl RedisClockView {
    /// The view of a bound from `low` to `high` that term `term` measured at `at`.
    pub fn of(low: f64, high: f64, term: Option<u64>, at: SystemTime) -> Self {
        Self {
            rate: (low + high) / 2.0,
            low,
            high,
            width: high - low,
            term,
            measured_at: rfc3339(at),
        }
    }
}

/// `t` in RFC 3339 with milliseconds, as the JSON shows wall-clock times; one RFC 3339 cannot
/// write (past the year 9999, a value read from a key someone else wrote; before 1970, a wall
/// clock set that far back) as seconds from the epoch.
pub fn rfc3339(t: SystemTime) -> String {
    use std::fmt::Write;
    let since = match t.duration_since(std::time::UNIX_EPOCH) {
        Ok(since) => since,
        Err(before) => return format!("{}s before the epoch", before.duration().as_secs()),
    };
    let mut shown = String::new();
    if write!(shown, "{}", humantime::format_rfc3339_millis(t)).is_err() {
        shown = format!("{}s after the epoch", since.as_secs());
    }
    shown
}

/// The term hook that keeps what the clocks showed.
pub struct ClockWatch {
    drift_factor: f64,
    seen: Mutex<Seen>,
}

/// What the clocks showed so far.
struct Seen {
    /// The term that began last.
    term: Option<FencingToken>,
    redis: Option<RedisClockView>,
    window: SlewWindow,
    slew: Option<f64>,
    telling: Telling,
}

impl ClockWatch {
    /// A watch for an elector with `timing`: the boot clock's slew is taken over the span Redis's
    /// rate is (three lease durations) and told against the same drift margin.
    pub fn new(timing: &Timing) -> Arc<Self> {
        Arc::new(Self {
            drift_factor: timing.drift_factor,
            seen: Mutex::new(Seen {
                term: None,
                redis: None,
                window: SlewWindow::new(timing.lease_duration.saturating_mul(3)),
                slew: None,
                telling: Telling::default(),
            }),
        })
    }

    /// The last bound of Redis's clock rate that a term of this replica measured; `None` until a
    /// term had two renewals.
    pub fn redis_clock(&self) -> Option<RedisClockView> {
        locked(&self.seen).redis.clone()
    }

    /// The boot clock's seconds per oscillator second (a suspend aside) over the last window;
    /// `None` until a term renewed over a baseline of a second.
    pub fn local_slew(&self) -> Option<f64> {
        locked(&self.seen).slew
    }

    /// [`local_slew`](Self::local_slew), when it is beyond the drift margin: this host's time
    /// service moves its boot clock faster than the margin allows.
    pub fn local_slew_beyond_margin(&self) -> Option<f64> {
        self.local_slew()
            .filter(|ratio| slew::beyond_margin(*ratio, self.drift_factor))
    }

    /// Samples both clocks, and says a slew beyond the margin.
    fn sample(&self) {
        let Some(sample) = Sample::now() else {
            return;
        };
        let mut seen = locked(&self.seen);
        let Some(ratio) = seen.window.record(sample) else {
            return;
        };
        seen.slew = Some(ratio);
        let say = seen.telling.tell(ratio, self.drift_factor, sample.raw);
        drop(seen);
        match say {
            Say::Nothing => {}
            Say::Warn => warn!(
                ratio,
                drift_factor = self.drift_factor,
                repeat_s = slew::REPEAT.as_secs(),
                "this host's clock is slewed beyond the drift margin: check its time service"
            ),
            Say::Still => debug!(ratio, "this host's clock is still slewed"),
            Say::Back => info!(
                ratio,
                "this host's clock runs within the drift margin again"
            ),
        }
    }
}

impl TermHooks for ClockWatch {
    fn began(&self, token: FencingToken, _valid_until: BootInstant, _lead: WallLead) {
        locked(&self.seen).term = Some(token);
        self.sample();
    }

    fn extended(&self, _token: FencingToken, _valid_until: BootInstant, _lead: WallLead) {
        self.sample();
    }

    fn clock_rate(&self, bound: RateBound) {
        let mut seen = locked(&self.seen);
        let term = seen.term.map(|t| t.0);
        seen.redis = Some(RedisClockView::of(
            bound.low,
            bound.high,
            term,
            SystemTime::now(),
        ));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn boot(secs: u64) -> BootInstant {
        BootInstant::from_since_boot(Duration::from_secs(secs))
    }

    #[test]
    fn a_time_rfc3339_cannot_write_is_shown_in_seconds_from_the_epoch() {
        let epoch = std::time::UNIX_EPOCH;
        let rows = [
            (
                epoch + Duration::from_millis(1_500),
                "1970-01-01T00:00:01.500Z",
            ),
            (
                epoch - Duration::from_secs(86_400),
                "86400s before the epoch",
            ),
            (
                epoch + Duration::from_secs(253_402_300_800),
                "253402300800s after the epoch",
            ),
        ];
        for (t, want) in rows {
            assert_eq!(rfc3339(t), want);
        }
    }

    #[test]
    fn a_replica_shows_the_last_rate_its_own_terms_measured_with_the_term_and_keeps_it_after() {
        let watch = ClockWatch::new(&Timing::default());
        assert_eq!(watch.redis_clock(), None, "never measured");
        watch.began(FencingToken(7), boot(10), WallLead::default());
        assert_eq!(watch.redis_clock(), None, "one reply bounds nothing");
        watch.clock_rate(RateBound {
            low: 1.04,
            high: 1.06,
        });
        let seen = watch.redis_clock().expect("a bound");
        assert!((seen.rate - 1.05).abs() < 1e-9, "{seen:?}");
        assert!((seen.width - 0.02).abs() < 1e-9, "{seen:?}");
        assert_eq!((seen.low, seen.high, seen.term), (1.04, 1.06, Some(7)));
        // The term ends, the replica follows: it still shows what term 7 measured.
        watch.ended(FencingToken(7), crate::elector::StepDownReason::Lost, true);
        assert_eq!(watch.redis_clock(), Some(seen.clone()));
        // Its next term shows term 7's until it measured anew.
        watch.began(FencingToken(9), boot(20), WallLead::default());
        assert_eq!(watch.redis_clock(), Some(seen));
        watch.clock_rate(RateBound {
            low: 0.999,
            high: 1.001,
        });
        let json = serde_json::to_value(watch.redis_clock()).unwrap();
        assert_eq!(json["term"], 9);
        assert_eq!(json["low"], 0.999);
        assert!(
            json["measured_at"]
                .as_str()
                .is_some_and(|at| at.ends_with('Z'))
        );
    }

    #[test]
    fn renewals_sample_this_hosts_clocks_and_a_second_of_them_gives_a_slew_near_one() {
        let watch = ClockWatch::new(&Timing::default());
        watch.began(FencingToken(1), boot(1), WallLead::default());
        assert_eq!(watch.local_slew(), None);
        std::thread::sleep(Duration::from_millis(1_050));
        watch.extended(FencingToken(1), boot(2), WallLead::default());
        let ratio = watch.local_slew().expect("a baseline of a second");
        assert!((ratio - 1.0).abs() < 0.01, "{ratio}");
    }
}
