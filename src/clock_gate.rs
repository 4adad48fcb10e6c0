//! The clock-rate gate: a replica whose Redis's clock runs so far off its own boot clock that a
//! renewal cannot keep a useful term ([`leaves_a_useful_term`]) stays out of the election
//! ([`CLOCK_RATE`]): a leader steps down with `clock_rate`, and the replica tries again after a
//! pause that doubles with each term the rate ended, from the retry period up to 30 s, since only
//! a term can measure the rate again. Said at warn the first time, then at debug until a term's
//! rate is back within reach. It changes nothing when a term begins or ends, so it lives outside
//! the core: the core measures the rate and tells it through [`TermHooks::clock_rate`]. The rate
//! is Redis's clock against this host's, so its words name the host to look at: this one when
//! its own boot clock is slewed beyond the margin ([`ClockWatch`]), else the Redis host.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::clock_watch::ClockWatch;
use crate::elector::{
    RateBound, Standing, TermHooks, Timing, leaves_a_useful_term, pause_after_term,
    useful_validity, validity_at,
};
use crate::gates::CLOCK_RATE;

/// The gate: a term hook in, a standing out.
pub struct ClockRateGate {
    timing: Timing,
    /// This host's clocks: whether its own boot clock is slewed.
    clocks: Arc<ClockWatch>,
    standing: Arc<watch::Sender<Standing>>,
    /// Terms in a row that the rate ended.
    ended: AtomicU32,
}

impl ClockRateGate {
    /// The gate for an elector with `timing`, whose host's clocks `clocks` watches, and the
    /// standing it gives ([`Elector::with_gate`](crate::elector::Elector::with_gate)).
    pub fn new(timing: Timing, clocks: Arc<ClockWatch>) -> (Arc<Self>, watch::Receiver<Standing>) {
        let (standing, said) = watch::channel(Standing::Stands);
        let gate = Arc::new(Self {
            timing,
            clocks,
            standing: Arc::new(standing),
            ended: AtomicU32::new(0),
        });
        (gate, said)
    }
}

impl TermHooks for ClockRateGate {
    fn clock_rate(&self, bound: RateBound) {
        if leaves_a_useful_term(&self.timing, bound) {
            self.ended.store(0, Ordering::Relaxed);
            return;
        }
        if !self.standing.borrow().stands() {
            return;
        }
        let ended = self.ended.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        let pause = pause_after_term(ended, &self.timing);
        let needed = useful_validity(&self.timing);
        let detail = format!(
            "redis's clock runs {:.3} to {:.3} times as fast as this replica's: a TTL of {} ms \
             leaves a term of at most {} ms here, less than {} ({} ms); contending again in {} \
             ms. {}",
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
            pause.as_millis(),
            where_to_look(self.clocks.local_slew_beyond_margin())
        );
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
        self.standing.send_replace(Standing::Out {
            gate: CLOCK_RATE,
            detail: Some(detail),
        });
        let standing = Arc::clone(&self.standing);
        tokio::spawn(async move {
            tokio::time::sleep(pause).await;
            standing.send_replace(Standing::Stands);
            info!("contending again to measure redis's clock");
        });
    }
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
}
