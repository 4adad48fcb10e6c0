//! The elector's decisions as pure functions of the time and of what Redis said: no I/O, so
//! every case is a row in a table test (one `#[test]` per decision, each row a sentence).

mod between;
mod channel;
mod follower;
mod gray;
mod herd;
mod rate;
mod sighting;
mod watchdog;

use std::time::Duration;

pub use between::{
    HoldOff, TermEnd, between_terms, contends_again, held_off_wait, nobody_else_listens,
    pause_after_term, reservation,
};
pub(crate) use channel::Wakeup;
pub use channel::{Keepalive, keepalive, resubscribe_backoff};
pub use follower::{FollowerStrategy, Seen, follower_wait, next_try, seen_by};
pub use gray::{link_fits, outcome_unknown, unknown_term_of_ours, won_too_late};
pub(crate) use herd::herd_delay;
pub use rate::{Jump, RateBound, RateWindow, Reading, validity_at};
pub use sighting::{GiveBack, give_back, leader_changed, observation_stands, observed_for};
pub(crate) use sighting::{announces_release, own_release};
pub use watchdog::{
    Deadlines, WatchdogStep, WorkStop, after_renewal, label_work_end, retry_after_failure,
    watchdog_step, within_validity, work_stop,
};

/// The longest a misconfigured Redis (wrong password, missing permission) is left alone, and
/// the longest pause between short terms.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The pause after the `failures`-th fault in a row: `base` after the first, doubling with each
/// one after, up to `MAX_BACKOFF` (never below `base`). The one backoff of a fault that repeats,
/// also for the calls the product makes to other systems.
pub fn backoff(base: Duration, failures: u32) -> Duration {
    base.saturating_mul(1u32 << failures.saturating_sub(1).min(16))
        .min(MAX_BACKOFF.max(base))
}

#[cfg(test)]
mod tests;
