//! The rate of Redis's clock against the boot clock, bounded from the leader's own renewals
//! (docs/DESIGN.md, "Validity").
//!
//! Two replies `a` and `b` bound the rate: Redis counted `b.redis - a.redis` while the boot clock
//! counted at least `b.sent - a.received` and at most `b.received - a.sent`. The longer the
//! baseline, the narrower the bound (a 1 ms round trip over 10 s is 0.01 %), so the window pairs
//! its oldest reply with the newest, and forgets replies older than its span; a clock whose rate
//! just changed shows first in the shorter baselines, which that pair averages away, so each
//! narrow one counts too.

use std::collections::VecDeque;
use std::time::Duration;

use crate::elector::{FIXED_DRIFT, Timing};

pub use crate::lease::Reading;

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

    /// Whether the bound says anything beside a `drift_factor`: it is narrower than that, or its
    /// low end alone is beyond it. A wide bound (a short baseline over slow round trips) that
    /// does not prove Redis fast is jitter.
    pub fn says_something(&self, drift_factor: f64) -> bool {
        self.width() <= drift_factor || self.low > 1.0 + drift_factor
    }
}

/// The fastest a clock is slewed rather than stepped: Linux lets `adjtimex` move a clock 10 %
/// off (chrony slews by at most a twelfth). A rate may change to it between two replies, so
/// only an advance beyond it is a step; a smaller one shows in the rate's bound instead.
pub const FASTEST_SLEW: f64 = 0.1;

/// What a reply showed of Redis's clock besides its rate: nothing, or a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jump {
    /// No step.
    None,
    /// Redis's clock advanced this much more than the boot clock's interval allows at the
    /// fastest rate known (the bound's high end, at least `FASTEST_SLEW`'s), beyond the fixed
    /// margin. The first two replies give the rate, up to the fastest a term could renew under.
    Forward(Duration),
    /// Redis's clock went back this much: keys live longer, which is harmless to a lease.
    Back(Duration),
}

/// The readings of one term's renewals within a span of the newest.
#[derive(Debug, Clone)]
pub struct RateWindow {
    span: Duration,
    drift_factor: f64,
    readings: VecDeque<Reading>,
    /// Once a step, a late reply or a freeze started the window anew: the high end of the last
    /// bound before that said something, which holds the first reply after it (none: the first
    /// pair's rule, as in a fresh window; the rate 1 would take every pair of a clock faster
    /// than a slew for a step, and the rate would never be bounded).
    before_restart: Option<f64>,
    /// What holds a window's first pair otherwise: the fastest rate under which a term is still
    /// valid for two retry periods, so that its first renewal comes with one to spare.
    renewable: f64,
}

impl RateWindow {
    /// A window of a few lease durations: long enough for a narrow bound, short enough to follow
    /// a clock whose rate changes.
    pub fn new(timing: &Timing) -> Self {
        Self {
            span: timing.lease_duration.saturating_mul(3),
            drift_factor: timing.drift_factor,
            readings: VecDeque::new(),
            before_restart: None,
            renewable: timing.lease_duration.as_secs_f64()
                / timing.retry_period.saturating_mul(2).as_secs_f64(),
        }
    }

    /// Adds a reply, and says whether Redis's clock stepped since the last one. A step, or a
    /// reply sent before the last one (a late reply), starts the window anew: no earlier reading
    /// bounds anything after it.
    pub fn record(&mut self, reading: Reading) -> Jump {
        let last = self.readings.back().copied();
        let jump = last.map_or(Jump::None, |last| self.jump(last, reading));
        if jump != Jump::None || last.is_some_and(|last| reading.sent < last.sent) {
            self.forget();
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
        jump
    }

    /// Forgets every reply, as after a freeze (time the boot clock did not count passed since):
    /// no baseline across it bounds the rate, nor shows a step.
    pub fn forget(&mut self) {
        let known = self.bound().filter(|b| b.says_something(self.drift_factor));
        self.before_restart = known.map(|b| b.high).or(self.before_restart);
        self.readings.clear();
    }

    /// The bound with the highest high end, once two replies are in: of the longest baseline
    /// when it [says something](RateBound::says_something), and of each baseline to the newest
    /// reply narrower than the drift factor; otherwise the longest's.
    pub fn bound(&self) -> Option<RateBound> {
        let newest = *self.readings.back()?;
        let longest = RateBound::between(*self.readings.front()?, newest);
        let narrow = (self.readings.iter())
            .filter_map(|&r| RateBound::between(r, newest))
            .filter(|b| b.width() <= self.drift_factor);
        longest
            .filter(|b| b.says_something(self.drift_factor))
            .into_iter()
            .chain(narrow)
            .max_by(|a, b| a.high.total_cmp(&b.high))
            .or(longest)
    }

    /// Whether Redis's clock stepped between the replies `last` and `new`.
    fn jump(&self, last: Reading, new: Reading) -> Jump {
        let Some(advanced) = new.redis_us.checked_sub(last.redis_us) else {
            return Jump::Back(Duration::from_micros(last.redis_us - new.redis_us));
        };
        let Some(longest) = new
            .received
            .since_boot()
            .checked_sub(last.sent.since_boot())
        else {
            return Jump::None;
        };
        // Without a bound that says something yet (a pair a moment apart says nothing), an
        // advance is the rate's (a clock that runs fast from the start shrinks the validity
        // instead of ending term after term), unless the window started anew (the rate bounded
        // before holds it) or no term could renew at it: a rate that ends each term before its
        // first renewal would never be measured again (docs/DESIGN.md, "Validity").
        let fastest = match self.bound() {
            Some(bound) if bound.says_something(self.drift_factor) => bound.high,
            _ => self.before_restart.unwrap_or(self.renewable),
        }
        .max(1.0 + self.drift_factor.max(FASTEST_SLEW));
        let allowed = longest.mul_f64(fastest) + FIXED_DRIFT;
        match Duration::from_micros(advanced).checked_sub(allowed) {
            Some(step) if !step.is_zero() => Jump::Forward(step),
            _ => Jump::None,
        }
    }
}

/// The validity of a term sent to a Redis whose clock runs at most `bound.high` times the boot
/// clock: the TTL as the boot clock counts it, less [`FIXED_DRIFT`]; the configured validity when
/// shorter, or without a bound that [says something](RateBound::says_something).
pub fn validity_at(timing: &Timing, bound: Option<RateBound>) -> Duration {
    let configured = timing.validity();
    match bound {
        Some(bound) if bound.says_something(timing.drift_factor) => {
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
