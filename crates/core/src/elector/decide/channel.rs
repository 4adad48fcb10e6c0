//! The release channel's decisions: what wakes a follower, how long a probe or a `PING` may go
//! unanswered, when a quiet subscription is pinged, and how long to wait before subscribing again.

use std::time::Duration;

use crate::elector::Timing;

/// What woke the follower.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Wakeup {
    /// A release was announced: the released term, as the release script published it.
    Released(String),
    /// The channel was (re)subscribed: a release may have been missed while it was not.
    Resubscribed,
    /// The same, as the replica came back into the election (out, it does not listen): it
    /// wakes a follower's wait, but not one holding off, since the others still go first.
    Rejoined,
    /// An acquire found that Redis lost its data and started the cooldown: try at once, so
    /// that the cooldown covers the longest lease duration this follower knows.
    DataLoss,
}

/// How long a probe may take, and (without probes) when a quiet subscription is pinged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalive {
    /// Quiet time (no release, no answer) before a `PING`, on a subscription without probes.
    pub idle: Duration,
    /// How long after its try's answer a probe may go unheard, or a `PING` unanswered, before
    /// the link counts as dead.
    pub timeout: Duration,
}

/// The shortest quiet time and `PING` timeout, for very short retry periods: a loaded Redis or
/// client must not look dead.
const MIN_KEEPALIVE: Duration = Duration::from_millis(100);

/// A quarter of a retry period for the answer, and (without probes) the rest of the retry
/// period of quiet before the `PING`, each at least `MIN_KEEPALIVE`: a dead link is noticed within
/// a retry period of its last sign of life (docs/DESIGN.md, "Followers").
pub fn keepalive(timing: &Timing) -> Keepalive {
    let timeout = (timing.retry_period / 4).max(MIN_KEEPALIVE);
    Keepalive {
        idle: timing
            .retry_period
            .saturating_sub(timeout)
            .max(MIN_KEEPALIVE),
        timeout,
    }
}

/// Pause before subscribing again after `failures` failed subscriptions in a row: short after
/// a clean close or a silent link (a quarter of a retry period), doubling while subscribing
/// keeps failing, up to the lease duration.
pub fn resubscribe_backoff(timing: &Timing, failures: u32) -> Duration {
    let base = timing.retry_period / 4;
    base.saturating_mul(1 << failures.min(10))
        .min(timing.lease_duration)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{ms, timing};
    use super::*;

    #[test]
    fn keepalive_table() {
        // (lease, renew, retry) -> (idle, timeout): a dead link is noticed within a retry period.
        let cases = [
            (
                (15_000, 10_000, 2_000),
                (1_500, 500),
                "the defaults: a quarter for the answer",
            ),
            ((3_000, 2_000, 400), (300, 100), "a short retry period"),
            (
                (1_500, 900, 250),
                (150, 100),
                "the answer's floor of 100 ms",
            ),
            (
                (1_000, 600, 150),
                (100, 100),
                "very short retry periods: never below 100 ms each",
            ),
            ((100, 50, 10), (100, 100), "even shorter ones"),
        ];
        for ((lease, renew, retry), (idle, timeout), why) in cases {
            assert_eq!(
                keepalive(&timing(lease, renew, retry)),
                Keepalive {
                    idle: ms(idle),
                    timeout: ms(timeout)
                },
                "{why}"
            );
        }
    }

    #[test]
    fn resubscribe_backoff_table() {
        let t = Timing::default(); // 15 s / 10 s / 2 s
        // failures in a row -> pause
        let cases = [
            (
                0,
                500,
                "a clean close or a silent link: a quarter of a retry period",
            ),
            (1, 1_000, "a failed subscription doubles it"),
            (2, 2_000, "and again"),
            (4, 8_000, "and again"),
            (5, 15_000, "capped at the lease duration"),
            (10, 15_000, "however many"),
            (u32::MAX, 15_000, "without overflowing"),
        ];
        for (failures, want, why) in cases {
            assert_eq!(resubscribe_backoff(&t, failures), ms(want), "{why}");
        }
    }
}
