//! What a lease keeps of Redis's replies between calls: the longest lease duration Redis
//! said a term runs with, the last `TIME` an acquire carried, and a clock-rate bound for the next
//! renewal to note.

use std::time::Duration;

use super::{Reading, RedisLease};

impl RedisLease {
    /// The longest lease duration that Redis has said a term of this lease runs with (zero
    /// until an acquire was answered). Contenders may run different lease durations; should
    /// Redis lose its data, this owner's data-loss cooldown covers the longest it was told.
    pub fn longest_seen(&self) -> Duration {
        Duration::from_millis(self.longest_seen.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Redis's `TIME` as the last answered acquire carried it, between the instants its call was
    /// sent and answered: a follower bounds Redis's clock rate from its tries, so that its first
    /// term begins with the rate known.
    pub fn last_reading(&self) -> Option<Reading> {
        *self
            .last_reading
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Has the next renewal note that Redis's clock runs between `low` and `high` times as fast as
    /// this process's, for `leasehold status` (the leader notes about once per lease duration).
    pub fn note_rate(&self, low: f64, high: f64) {
        *self
            .rate_note
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some(format!("{low:.6} {high:.6}"));
    }
}
