//! The rate of this host's boot clock against its oscillator: a slew by the time service.
//!
//! `CLOCK_MONOTONIC_RAW` counts the oscillator's ticks as they come; `CLOCK_BOOTTIME` is the
//! monotonic clock plus the time suspended, and the monotonic clock is what NTP or chrony slews
//! (by up to a twelfth with chrony's default `maxslewrate`, 10 % as Linux allows). Their ratio
//! over a baseline says how fast the time service moves the boot clock. A suspend stops both the
//! raw and the monotonic clock, so the ratio is taken on the monotonic clock: the boot clock's
//! rate, a suspend aside.
//!
//! Each sample is two clock reads; a thread preempted between them would put an error of the
//! preemption into the ratio, so a read of the oscillator on each side bounds it, and a sample
//! read over more than `READ_WITHIN` is read again. Under a baseline of [`MIN_BASELINE`] the
//! window says nothing: the reads' error over it stays below a hundredth of a 1 % margin.

use std::collections::VecDeque;
use std::time::Duration;

/// The longest one sample's reads may take: its error on the ratio's baseline.
const READ_WITHIN: Duration = Duration::from_micros(100);

/// The shortest baseline that says a ratio: twice `READ_WITHIN` over it is 0.02 %.
pub const MIN_BASELINE: Duration = Duration::from_secs(1);

/// How many samples a window keeps at most: a sample closer to the last kept one than a share
/// of the span is compared with the oldest, not kept.
const KEPT: u32 = 64;

/// Both clocks at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// `CLOCK_MONOTONIC_RAW`: the oscillator.
    pub raw: Duration,
    /// `CLOCK_MONOTONIC`: the boot clock less the time suspended, slewed as it is.
    pub slewed: Duration,
}

impl Sample {
    /// Reads both clocks, `None` when a read fails or no try read them close enough together.
    pub fn now() -> Option<Self> {
        use nix::time::{ClockId, clock_gettime};
        let read = |id| clock_gettime(id).ok().map(Duration::from);
        (0..3).find_map(|_| {
            let before = read(ClockId::CLOCK_MONOTONIC_RAW)?;
            let slewed = read(ClockId::CLOCK_MONOTONIC)?;
            let after = read(ClockId::CLOCK_MONOTONIC_RAW)?;
            let took = after.checked_sub(before)?;
            (took <= READ_WITHIN).then(|| Self {
                raw: before + took / 2,
                slewed,
            })
        })
    }

    /// Slewed seconds per raw second from `earlier` to this sample, once the oscillator counted
    /// at least [`MIN_BASELINE`] between them.
    fn ratio_since(self, earlier: Sample) -> Option<f64> {
        let raw = self.raw.checked_sub(earlier.raw)?;
        let slewed = self.slewed.checked_sub(earlier.slewed)?;
        (raw >= MIN_BASELINE).then(|| slewed.as_secs_f64() / raw.as_secs_f64())
    }
}

/// The samples within a span of the newest.
#[derive(Debug, Clone)]
pub struct SlewWindow {
    span: Duration,
    samples: VecDeque<Sample>,
}

impl SlewWindow {
    /// A window over `span` of the oscillator's time.
    pub fn new(span: Duration) -> Self {
        Self {
            span,
            samples: VecDeque::new(),
        }
    }

    /// Adds a sample and gives the ratio over the window's longest baseline, `None` while it is
    /// shorter than [`MIN_BASELINE`]. A sample older than the last one (clocks do not go back;
    /// a sample read out of order does) starts the window anew.
    pub fn record(&mut self, sample: Sample) -> Option<f64> {
        if self
            .samples
            .back()
            .is_some_and(|last| sample.raw < last.raw)
        {
            self.samples.clear();
        }
        while self
            .samples
            .front()
            .is_some_and(|oldest| sample.raw.saturating_sub(oldest.raw) > self.span)
        {
            self.samples.pop_front();
        }
        let ratio = self
            .samples
            .front()
            .and_then(|&oldest| sample.ratio_since(oldest));
        let step = self.span / KEPT;
        if self
            .samples
            .back()
            .is_none_or(|last| sample.raw.saturating_sub(last.raw) >= step)
        {
            self.samples.push_back(sample);
        }
        ratio
    }
}

/// What to say of a ratio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Say {
    /// Nothing new: within the margin, as before.
    Nothing,
    /// Beyond the margin, said at warn: the first time, and again after [`REPEAT`].
    Warn,
    /// Still beyond the margin, said at warn a moment ago: at debug.
    Still,
    /// Back within the margin.
    Back,
}

/// Whether a boot clock running `ratio` times as fast as its oscillator is slewed beyond the
/// drift margin.
pub fn beyond_margin(ratio: f64, drift_factor: f64) -> bool {
    (ratio - 1.0).abs() > drift_factor
}

/// How long a slew that lasts goes without another warning.
pub const REPEAT: Duration = Duration::from_secs(600);

/// Whether the boot clock was beyond the margin, and when that was last said at warn (on the
/// oscillator's clock).
#[derive(Debug, Clone, Copy, Default)]
pub struct Telling {
    warned: Option<Duration>,
}

impl Telling {
    /// What to say of `ratio`, seen at `raw`, against a `drift_factor`.
    pub fn tell(&mut self, ratio: f64, drift_factor: f64, raw: Duration) -> Say {
        match (beyond_margin(ratio, drift_factor), self.warned) {
            (false, None) => Say::Nothing,
            (false, Some(_)) => {
                self.warned = None;
                Say::Back
            }
            (true, Some(at)) if raw.saturating_sub(at) < REPEAT => Say::Still,
            (true, _) => {
                self.warned = Some(raw);
                Say::Warn
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(raw_ms: u64, slewed_ms: u64) -> Sample {
        Sample {
            raw: Duration::from_millis(raw_ms),
            slewed: Duration::from_millis(slewed_ms),
        }
    }

    #[test]
    fn the_ratio_of_two_samples_is_slewed_time_over_raw_time_once_the_baseline_is_long_enough() {
        let cases = [
            // (earlier, later, ratio)
            (at(0, 0), at(10_000, 10_000), Some(1.0)),
            (at(0, 0), at(10_000, 10_500), Some(1.05)),
            (at(0, 0), at(10_000, 9_000), Some(0.9)),
            (at(5_000, 7_000), at(7_000, 9_200), Some(1.1)),
            // A second of the oscillator is the shortest baseline that says anything.
            (at(0, 0), at(1_000, 1_010), Some(1.01)),
            (at(0, 0), at(999, 1_050), None),
            // Out of order: nothing.
            (at(10_000, 10_000), at(0, 0), None),
            (at(0, 10_000), at(10_000, 5_000), None),
        ];
        for (earlier, later, want) in cases {
            let got = later.ratio_since(earlier);
            match (got, want) {
                (Some(got), Some(want)) => {
                    assert!((got - want).abs() < 1e-9, "{earlier:?} {later:?}: {got}")
                }
                _ => assert_eq!(got, want, "{earlier:?} {later:?}"),
            }
        }
    }

    #[test]
    fn the_window_slides_compares_with_its_oldest_sample_and_says_nothing_on_a_short_baseline() {
        // A span of 10 s; a sample every 500 ms, the boot clock slewed 5 % fast from 20 s on.
        let mut window = SlewWindow::new(Duration::from_secs(10));
        let slewed_at = |raw_ms: u64| match raw_ms.checked_sub(20_000) {
            Some(since) => 20_000 + since + since / 20,
            None => raw_ms,
        };
        let mut seen = Vec::new();
        for raw_ms in (0..=40_000).step_by(500) {
            seen.push((raw_ms, window.record(at(raw_ms, slewed_at(raw_ms)))));
        }
        let ratio_at = |ms: u64| seen.iter().find(|(at, _)| *at == ms).and_then(|(_, r)| *r);
        // Under a second of baseline: nothing.
        assert_eq!(ratio_at(0), None);
        assert_eq!(ratio_at(500), None);
        // From the first second on, and through the first 20 s: 1.
        assert_eq!(ratio_at(1_000), Some(1.0));
        assert_eq!(ratio_at(19_500), Some(1.0));
        // The slew shows partly while the window still holds unslewed samples…
        let midway = ratio_at(25_000).expect("a ratio");
        assert!((midway - 1.025).abs() < 1e-9, "{midway}");
        // …and wholly once it slid past them.
        let slid = ratio_at(30_000).expect("a ratio");
        assert!((slid - 1.05).abs() < 1e-9, "{slid}");
        assert!((ratio_at(40_000).expect("a ratio") - 1.05).abs() < 1e-9);
    }

    #[test]
    fn a_window_keeps_a_bounded_number_of_samples_and_starts_anew_on_one_out_of_order() {
        let mut window = SlewWindow::new(Duration::from_secs(64));
        // A sample every 10 ms for 100 s: one kept per second of the span at most.
        for raw_ms in (0..100_000).step_by(10) {
            window.record(at(raw_ms, raw_ms));
        }
        assert!(
            window.samples.len() <= KEPT as usize + 1,
            "{}",
            window.samples.len()
        );
        assert_eq!(window.record(at(100_000, 100_000)), Some(1.0));
        // A sample from before the last: the window starts again from it.
        assert_eq!(window.record(at(50_000, 50_000)), None);
        assert_eq!(window.samples.len(), 1);
        assert_eq!(window.record(at(52_000, 52_100)), Some(1.05));
    }

    #[test]
    fn a_slew_beyond_the_margin_is_said_at_warn_once_then_rarely_and_its_end_once() {
        let mut telling = Telling::default();
        let s = Duration::from_secs;
        let rows = [
            // (ratio, at, say)
            (1.0, s(0), Say::Nothing),
            (1.009, s(1), Say::Nothing),
            (0.991, s(2), Say::Nothing),
            (1.05, s(3), Say::Warn),
            (1.05, s(4), Say::Still),
            (0.95, s(5), Say::Still),
            (1.05, s(3) + REPEAT - s(1), Say::Still),
            (1.05, s(3) + REPEAT, Say::Warn),
            (1.05, s(4) + REPEAT, Say::Still),
            (1.0, s(5) + REPEAT, Say::Back),
            (1.0, s(6) + REPEAT, Say::Nothing),
            (1.02, s(7) + REPEAT, Say::Warn),
        ];
        for (ratio, raw, want) in rows {
            assert_eq!(telling.tell(ratio, 0.01, raw), want, "{ratio} at {raw:?}");
        }
    }
}
