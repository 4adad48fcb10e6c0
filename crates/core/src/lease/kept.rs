//! What a lease keeps between calls: what Redis's replies said, and a rate for a renewal to note.

use std::time::Duration;

use super::{Reading, RedisLease};
use crate::locked::locked;

impl RedisLease {
    /// The longest lease duration that Redis has said a term of this lease runs with (zero until
    /// an acquire was answered): the cooldown covers it (docs/DESIGN.md, "Mixed lease durations").
    pub fn longest_seen(&self) -> Duration {
        Duration::from_millis(self.longest_seen.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Redis's `TIME` as the last answered acquire carried it, between its call's send and reply:
    /// a follower's tries bound the clock rate too (docs/DESIGN.md, "Validity").
    pub fn last_reading(&self) -> Option<Reading> {
        *locked(&self.last_reading)
    }

    /// Has the next renewal note that Redis's clock runs between `low` and `high` times as fast as
    /// this process's, for `leasehold status` (the leader notes about once per lease duration).
    pub fn note_rate(&self, low: f64, high: f64) {
        *locked(&self.rate_note) = Some(format!("{low:.6} {high:.6}"));
    }
}
