//! What a lease keeps between calls: what Redis's replies said, and a rate for a renewal to note.

use std::time::Duration;

use super::{Reading, RedisLease};
use crate::clock::BootInstant;
use crate::locked::locked;

impl RedisLease {
    /// The longest lease duration that Redis has said a term of this lease runs with, while a
    /// term of it may still run: zero until an acquire was answered, and again once twice that
    /// duration has passed since the last reply that said it (its claim in Redis lasts as long).
    /// The cooldown covers it (docs/DESIGN.md, "Mixed lease durations").
    pub fn longest_seen(&self) -> Duration {
        longest_at(*locked(&self.longest_seen), self.clock.now())
    }

    /// Keeps what an acquire's reply said of the longest live claim ([`keep_longest`]).
    pub(super) fn keep_longest(&self, told: Duration) {
        let mut kept = locked(&self.longest_seen);
        *kept = keep_longest(*kept, told, self.clock.now());
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

/// The longest claim a lease was told of, and until when it counts.
pub type LongestKept = (Duration, BootInstant);

/// What `kept` counts at `now`: nothing once it lapsed.
pub fn longest_at((longest, until): LongestKept, now: BootInstant) -> Duration {
    if now < until { longest } else { Duration::ZERO }
}

/// `kept` after a reply at `now` told `told` (zero: no live claim): the same or a longer claim
/// counts for twice its duration from now, as its claim in Redis may last; a shorter one only
/// once the longer has lapsed.
pub fn keep_longest(kept: LongestKept, told: Duration, now: BootInstant) -> LongestKept {
    if !told.is_zero() && (told >= kept.0 || now >= kept.1) {
        (told, now.saturating_add(told.saturating_mul(2)))
    } else {
        kept
    }
}
