//! The clock-rate gate: a replica whose Redis's clock runs so far off its own boot clock that a
//! renewal cannot keep a useful term (`leaves_a_useful_term`) stays out of the election
//! ([`CLOCK_RATE`]): a leader steps down with `clock_rate`, and the replica tries again after a
//! pause that doubles with each term the rate ended, from the retry period up to 30 s, since only
//! a term can measure the rate again. The pause counts from the step-down's end, which a command
//! slow to stop may hold until the term's deadline. Said at warn the first time, then at debug until a term's
//! rate is back within reach. It changes nothing when a term begins or ends, so it lives outside
//! the core: the core measures the rate and tells it through [`TermHooks::clock_rate`]. The rate
//! is Redis's clock against this host's, so its words name the host to look at: this one when
//! its own boot clock is slewed beyond the margin ([`ClockWatch`]), else the Redis host.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::clock_watch::ClockWatch;
use crate::elector::{RateBound, Standing, StepDownReason, TermHooks, Timing, validity_at};
use crate::gates::{CLOCK_RATE, TermBackoff};
use crate::lease::FencingToken;

/// The gate: a term hook in, a standing out.
pub struct ClockRateGate {
    timing: Timing,
    /// This host's clocks: whether its own boot clock is slewed.
    clocks: Arc<ClockWatch>,
    /// Out for the terms in a row that the rate ended.
    backoff: Arc<TermBackoff>,
}

impl ClockRateGate {
    /// The gate for an elector with `timing`, whose host's clocks `clocks` watches, and the
    /// standing it gives ([`Elector::with_gate`](crate::elector::Elector::with_gate)).
    pub fn new(timing: Timing, clocks: Arc<ClockWatch>) -> (Arc<Self>, watch::Receiver<Standing>) {
        let (backoff, said) = TermBackoff::new(CLOCK_RATE, timing);
        let gate = Arc::new(Self {
            timing,
            clocks,
            backoff,
        });
        (gate, said)
    }
}

impl TermHooks for ClockRateGate {
    fn clock_rate(&self, bound: RateBound) {
        if leaves_a_useful_term(&self.timing, bound) {
            self.backoff.clear();
            return;
        }
        let needed = useful_validity(&self.timing);
        let Some((ended, pause)) = self.backoff.close(|p| {
            format!(
                "redis's clock runs {:.3} to {:.3} times as fast as this replica's: a TTL of {} \
                 ms leaves a term of at most {} ms here, less than {} ({} ms); contending again \
                 in {} ms. {}",
                bound.low,
                bound.high,
                self.timing.lease_duration.as_millis(),
                validity_at(&self.timing, Some(bound)).as_millis(),
                if needed < self.timing.renew_deadline {
                    "the validity the drift factor leaves"
                } else {
                    "the renew deadline"
                },
                needed.as_millis(),
                p.as_millis(),
                where_to_look(self.clocks.local_slew_beyond_margin())
            )
        }) else {
            return;
        };
        if ended == 1 {
            warn!(
                low = bound.low,
                high = bound.high,
                pause_ms = pause.as_millis() as u64,
                "redis's clock runs too far off for a useful term; out of the election"
            );
        } else {
            debug!(
                low = bound.low,
                high = bound.high,
                ended,
                pause_ms = pause.as_millis() as u64,
                "redis's clock still runs too far off"
            );
        }
    }

    fn ended(&self, _token: FencingToken, _reason: StepDownReason, _released: bool) {
        self.backoff
            .term_ended(|| info!("contending again to measure redis's clock"));
    }
}

/// Whether a Redis clock running within `bound` leaves a term worth holding: its validity (as
/// [`validity_at`] gives it) at least [`useful_validity`]. Beyond that, Redis's clock is broken
/// rather than slewed.
fn leaves_a_useful_term(timing: &Timing, bound: RateBound) -> bool {
    validity_at(timing, Some(bound)) >= useful_validity(timing)
}

/// The validity a useful term reaches: the renew deadline, or the configured validity when a
/// drift margin so wide makes it shorter (the term then ends at it before the renew deadline,
/// however true Redis's clock runs).
fn useful_validity(timing: &Timing) -> Duration {
    timing.renew_deadline.min(timing.validity())
}

/// Which host's time service to check, given this host's boot clock slew when it is beyond the
/// margin: a rate measured against a slewed clock is that slew as much as Redis's.
fn where_to_look(local_slew: Option<f64>) -> String {
    match local_slew {
        None => "Check the time service on the Redis host".to_owned(),
        Some(ratio) => format!(
            "This host's own boot clock runs {ratio:.3} times as fast as its oscillator, beyond \
             the drift margin: check the time service on this host first, then the Redis host's"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_name_this_host_when_its_own_clock_is_slewed_and_the_redis_host_otherwise() {
        assert_eq!(
            where_to_look(None),
            "Check the time service on the Redis host"
        );
        let slewed = where_to_look(Some(0.92));
        assert!(slewed.contains("runs 0.920 times as fast"), "{slewed}");
        assert!(
            slewed.contains("check the time service on this host first"),
            "{slewed}"
        );
    }

    #[test]
    fn a_term_is_useful_while_its_validity_reaches_the_renew_deadline_or_a_shorter_validity() {
        let ms = Duration::from_millis;
        let t = Timing {
            lease_duration: ms(2_000),
            renew_deadline: ms(1_400),
            retry_period: ms(400),
            drift_factor: 0.01,
        };
        // 2 s × 0.6 − 2 ms = 1.198 s of validity, under the renew deadline of 1.4 s.
        let wide = Timing {
            drift_factor: 0.4,
            ..t
        };
        assert_eq!(useful_validity(&t), ms(1_400));
        assert_eq!(useful_validity(&wide), ms(1_198));
        // (timing, high end of the bound) -> useful
        let cases = [
            (t, 1.0, true, "the rate 1"),
            (t, 1.10, true, "10 % fast: 1.816 s of validity"),
            (t, 1.42, true, "2 s / 1.42 - 2 ms = 1.406 s"),
            (t, 1.43, false, "1.397 s, under the renew deadline"),
            (t, 3.0, false, "a broken clock"),
            (wide, 1.0, true, "a true clock under a wide margin"),
            (wide, 1.66, true, "2 s / 1.66 - 2 ms = 1.203 s"),
            (wide, 1.68, false, "1.188 s, under the validity"),
        ];
        for (timing, high, want, why) in cases {
            let bound = RateBound {
                low: high - 0.001,
                high,
            };
            assert_eq!(leaves_a_useful_term(&timing, bound), want, "{why}");
        }
    }
}
