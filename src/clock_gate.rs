//! The clock-rate gate: a replica whose Redis's clock runs so far off its own boot clock that a
//! renewal cannot keep a useful term ([`leaves_a_useful_term`]) stays out of the election
//! ([`CLOCK_RATE`]): a leader steps down with `clock_rate`, and the replica tries again after a
//! pause that doubles with each term the rate ended, from the retry period up to 30 s, since only
//! a term can measure the rate again. Said at warn the first time, then at debug until a term's
//! rate is back within reach. It changes nothing when a term begins or ends, so it lives outside
//! the core: the core measures the rate and tells it through [`TermHooks::clock_rate`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::elector::{
    RateBound, Standing, TermHooks, Timing, leaves_a_useful_term, pause_after_term,
};
use crate::gates::CLOCK_RATE;

/// The gate: a term hook in, a standing out.
pub struct ClockRateGate {
    timing: Timing,
    standing: Arc<watch::Sender<Standing>>,
    /// Terms in a row that the rate ended.
    ended: AtomicU32,
}

impl ClockRateGate {
    /// The gate for an elector with `timing`, and the standing it gives
    /// ([`Elector::with_gate`](crate::elector::Elector::with_gate)).
    pub fn new(timing: Timing) -> (Arc<Self>, watch::Receiver<Standing>) {
        let (standing, said) = watch::channel(Standing::Stands);
        let gate = Arc::new(Self {
            timing,
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
        let detail = format!(
            "redis's clock runs {:.3} to {:.3} times as fast as this replica's: a TTL of {} ms \
             lasts at most {} ms here, less than the renew deadline ({} ms); contending again in \
             {} ms. Check the time service on the Redis host",
            bound.low,
            bound.high,
            self.timing.lease_duration.as_millis(),
            self.timing.lease_duration.div_f64(bound.high).as_millis(),
            self.timing.renew_deadline.as_millis(),
            pause.as_millis()
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
