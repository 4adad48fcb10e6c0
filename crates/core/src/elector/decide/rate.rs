//! The rate of Redis's clock against the boot clock, bounded from the leader's own renewals.
//!
//! Redis expires the lease on its own clock. Each renewal's reply carries Redis's `TIME`, read
//! inside the script, so that instant lies between the renewal's send and its reply on the boot
//! clock. Two such replies `a` and `b` bound the rate: Redis counted `b.redis - a.redis` while
//! the boot clock counted at least `b.sent - a.received` and at most `b.received - a.sent`. The
//! longer the baseline, the narrower the bound (a 1 ms round trip over 10 s is 0.01 %): the
//! window pairs its oldest reply with the newest, and forgets replies older than its span, so
//! that a rate that changes (a clock slewed for a while) shows within a span.
//!
//! The validity follows the bound's upper end when it is faster than the configured drift
//! allows ([`validity_at`]); until two replies are in, or while the bound is too wide to say
//! anything, the configured drift stands.

use std::collections::VecDeque;
use std::time::Duration;

use crate::clock::BootInstant;
use crate::elector::{FIXED_DRIFT, Timing};

/// One reply: the boot clock's instants around it and Redis's `TIME` in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub sent: BootInstant,
    pub received: BootInstant,
    /// Redis's `TIME`, in microseconds.
    pub redis_us: u64,
}

/// Redis seconds per boot-clock second, between `low` and `high`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateBound {
    pub low: f64,
    pub high: f64,
}

impl RateBound {
    /// The bound of the rate between two readings, `None` when they cannot bound it (out of
    /// order, or so close that the round trips overlap).
    pub fn between(a: Reading, b: Reading) -> Option<Self> {
        let redis = Duration::from_micros(b.redis_us.checked_sub(a.redis_us)?);
        let shortest = b.sent.since_boot().checked_sub(a.received.since_boot())?;
        let longest = b.received.since_boot().checked_sub(a.sent.since_boot())?;
        if shortest.is_zero() {
            return None;
        }
        Some(Self {
            low: redis.as_secs_f64() / longest.as_secs_f64(),
            high: redis.as_secs_f64() / shortest.as_secs_f64(),
        })
    }

    /// How wide the bound is: `high - low`.
    pub fn width(&self) -> f64 {
        self.high - self.low
    }
}

/// The readings of one term's renewals within a span of the newest.
#[derive(Debug, Clone)]
pub struct RateWindow {
    span: Duration,
    readings: VecDeque<Reading>,
}

impl RateWindow {
    /// A window of a few lease durations: long enough for a narrow bound, short enough to follow
    /// a clock whose rate changes.
    pub fn new(timing: &Timing) -> Self {
        Self {
            span: timing.lease_duration.saturating_mul(3),
            readings: VecDeque::new(),
        }
    }

    /// Adds a reply. A Redis clock that went back (a step backward, another Redis behind the
    /// same address) starts the window anew: no earlier reading bounds anything after it.
    pub fn record(&mut self, reading: Reading) {
        if self
            .readings
            .back()
            .is_some_and(|last| reading.redis_us < last.redis_us || reading.sent < last.sent)
        {
            self.readings.clear();
        }
        self.readings.push_back(reading);
        // Keep the oldest reading within the span, and always two for a bound.
        while self.readings.len() > 2
            && self.readings.get(1).is_some_and(|second| {
                reading.received.saturating_duration_since(second.sent) >= self.span
            })
        {
            self.readings.pop_front();
        }
    }

    /// The bound over the window's longest baseline, once two replies are in.
    pub fn bound(&self) -> Option<RateBound> {
        RateBound::between(*self.readings.front()?, *self.readings.back()?)
    }
}

/// The validity of a term sent to a Redis whose clock runs at most `bound.high` times the boot
/// clock: the lease's TTL as the boot clock counts it, less the fixed part of the margin
/// ([`FIXED_DRIFT`]); the configured validity when that is shorter (the configured drift covers
/// the rate), or without a bound that says something: one narrower than the drift factor, or
/// one whose low end alone is beyond it. A wide bound (a short baseline over slow round trips)
/// that does not prove Redis fast is left alone, so that jitter cannot cut a term short.
pub fn validity_at(timing: &Timing, bound: Option<RateBound>) -> Duration {
    let configured = timing.validity();
    let assumed = 1.0 + timing.drift_factor;
    match bound {
        Some(bound) if bound.width() <= timing.drift_factor || bound.low > assumed => {
            let measured = timing
                .lease_duration
                .div_f64(bound.high.max(1.0))
                .saturating_sub(FIXED_DRIFT);
            configured.min(measured)
        }
        _ => configured,
    }
}

#[cfg(test)]
mod tests;
