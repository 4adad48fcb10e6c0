//! The follower's waits: how long to sleep before the next try, with the release channel or
//! without it, under the polling baseline, and before a one-shot lock gives up.

use std::time::Duration;

use super::backoff;
use crate::clock::BootInstant;
use crate::elector::Timing;
use crate::lease::Retry;

/// How a follower decides when to try again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FollowerStrategy {
    /// leasehold's way (docs/DESIGN.md, "Followers").
    #[default]
    Notified,
    /// client-go's way, the baseline of the benchmarks and tests (`test-internals`): every retry
    /// period with jitter (× 1.2), no release channel and no TTL wake-up.
    #[cfg_attr(not(feature = "test-internals"), allow(dead_code))]
    Polling,
}

/// What a follower learnt from its last try, reduced to what decides its wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Held, with this much TTL left (`None`: the key has no TTL).
    Held(Option<Duration>),
    /// Redis is cooling down after data loss for this long.
    CoolingDown(Duration),
    /// The call failed; `failures` in a row so far.
    Failed { retry: Retry, failures: u32 },
}

/// Redis expires a key when its clock is *past* the expiry millisecond; try just after.
const EXPIRY_SLACK: Duration = Duration::from_millis(1);

/// How long a follower sleeps before it tries again (a release notification cuts any sleep
/// short). `jitter` is drawn from [0, 1).
///
/// - Held with a TTL: until the TTL runs out (docs/DESIGN.md, "Followers"); while the release
///   channel is down, at most the retry period with jitter, since a release would go unheard.
/// - Held without a TTL (not our key): the retry period with jitter.
/// - Cooling down: until the cooldown ends; nothing can succeed before.
/// - A passing failure: the retry period with jitter; a configuration fault: exponential
///   back-off from the retry period up to [`MAX_BACKOFF`](super::MAX_BACKOFF).
pub fn follower_wait(seen: Seen, subscribed: bool, timing: &Timing, jitter: f64) -> Duration {
    let jitter = jitter.clamp(0.0, 1.0);
    // client-go's JitterUntil with factor 1.2: [retry period, 2.2 × retry period).
    let fallback = timing.retry_period + timing.retry_period.mul_f64(1.2 * jitter);
    match seen {
        Seen::Held(Some(ttl_left)) => {
            let at_expiry = ttl_left + EXPIRY_SLACK;
            if subscribed {
                at_expiry.min(timing.lease_duration)
            } else {
                at_expiry.min(fallback)
            }
        }
        Seen::Held(None) => fallback,
        Seen::CoolingDown(left) => left + EXPIRY_SLACK,
        Seen::Failed {
            retry: Retry::Soon, ..
        } => fallback,
        Seen::Failed {
            retry: Retry::BackOff,
            failures,
        } => backoff(timing.retry_period, failures) + timing.retry_period.mul_f64(jitter),
    }
}

/// What the follower's strategy makes of what it saw: the polling baseline ignores the TTL.
pub fn seen_by(strategy: FollowerStrategy, seen: Seen) -> Seen {
    match (strategy, seen) {
        (FollowerStrategy::Polling, Seen::Held(_)) => Seen::Held(None),
        (_, seen) => seen,
    }
}

/// After a try at `now` with `wait` to the next one, how long to sleep before it (a release may
/// cut it short); `None`: a one-shot lock that gives up at `give_up_at` stops, once that instant
/// has come (it has tried at least once by now), and otherwise has one last try at it.
pub fn next_try(
    wait: Duration,
    now: BootInstant,
    give_up_at: Option<BootInstant>,
) -> Option<Duration> {
    match give_up_at {
        Some(at) if now >= at => None,
        Some(at) => Some(wait.min(now.until(at))),
        None => Some(wait),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{at, ms};
    use super::*;

    #[test]
    fn follower_wait_table() {
        let t = Timing::default(); // 15 s / 10 s / 2 s
        let soon = Seen::Failed {
            retry: Retry::Soon,
            failures: 1,
        };
        let back_off = |failures| Seen::Failed {
            retry: Retry::BackOff,
            failures,
        };
        // (seen, subscribed, jitter) -> wait
        let cases = [
            (
                Seen::Held(Some(ms(14_000))),
                true,
                0.5,
                ms(14_001),
                "a healthy leader renews: sleep to its expiry, one command per lease duration",
            ),
            (
                Seen::Held(Some(ms(300))),
                true,
                0.0,
                ms(301),
                "a crashed leader: wake a millisecond after its expiry",
            ),
            (
                Seen::Held(Some(ms(0))),
                true,
                0.0,
                ms(1),
                "an expiry due now: just after it",
            ),
            (
                Seen::Held(Some(ms(60_000))),
                true,
                0.0,
                ms(15_000),
                "a holder with a longer TTL (another configuration) is capped at ours",
            ),
            (
                Seen::Held(Some(ms(14_000))),
                false,
                0.0,
                ms(2_000),
                "without the release channel the retry period caps the wait",
            ),
            (
                Seen::Held(Some(ms(14_000))),
                false,
                0.5,
                ms(3_200),
                "with client-go's jitter of 1.2",
            ),
            (
                Seen::Held(Some(ms(500))),
                false,
                0.5,
                ms(501),
                "an expiry before the cap still wakes at the expiry",
            ),
            (
                Seen::Held(None),
                true,
                0.0,
                ms(2_000),
                "no TTL on the key: poll at the retry period",
            ),
            (
                Seen::CoolingDown(ms(7_000)),
                false,
                0.9,
                ms(7_001),
                "cooling down: until it ends, jitter or not",
            ),
            (
                soon,
                true,
                0.0,
                ms(2_000),
                "a passing failure: the retry period",
            ),
            (
                back_off(1),
                true,
                0.0,
                ms(2_000),
                "a refusal backs off from the retry period",
            ),
            (back_off(2), true, 0.0, ms(4_000), "and doubles"),
            (back_off(4), true, 0.0, ms(16_000), "and doubles again"),
            (back_off(5), true, 0.0, ms(30_000), "up to 30 s"),
            (
                back_off(40),
                true,
                0.5,
                ms(31_000),
                "however many, plus jitter",
            ),
        ];
        for (seen, subscribed, jitter, want, why) in cases {
            assert_eq!(follower_wait(seen, subscribed, &t, jitter), want, "{why}");
        }
    }

    #[test]
    fn jitter_stays_within_client_go_bounds() {
        let timing = Timing::default();
        for j in [-1.0, 0.0, 0.25, 0.999, 7.0] {
            let wait = follower_wait(Seen::Held(None), true, &timing, j);
            assert!(wait >= ms(2_000) && wait <= ms(4_400), "{j}: {wait:?}");
        }
    }

    #[test]
    fn the_polling_baseline_ignores_the_holders_ttl() {
        use FollowerStrategy::*;
        let failed = Seen::Failed {
            retry: Retry::Soon,
            failures: 2,
        };
        // (strategy, seen) -> what the wait is decided on
        let cases = [
            (
                Notified,
                Seen::Held(Some(ms(300))),
                Seen::Held(Some(ms(300))),
                "leasehold wakes at the TTL",
            ),
            (
                Polling,
                Seen::Held(Some(ms(300))),
                Seen::Held(None),
                "polling does not",
            ),
            (
                Polling,
                Seen::Held(None),
                Seen::Held(None),
                "a key without TTL is the same to both",
            ),
            (
                Polling,
                Seen::CoolingDown(ms(7_000)),
                Seen::CoolingDown(ms(7_000)),
                "a cooldown is waited out by both",
            ),
            (Polling, failed, failed, "failures back off alike"),
        ];
        for (strategy, seen, want, why) in cases {
            assert_eq!(seen_by(strategy, seen), want, "{why}");
        }
    }

    #[test]
    fn a_one_shot_lock_gives_up_after_its_wait_with_one_last_try() {
        // (wait, now, give up at) -> next
        let cases = [
            (
                ms(2_000),
                1_000,
                None,
                Some(ms(2_000)),
                "an elector without a one-shot wait keeps its waits",
            ),
            (
                ms(2_000),
                1_000,
                Some(10_000),
                Some(ms(2_000)),
                "a wait that ends before giving up stands",
            ),
            (
                ms(2_000),
                9_500,
                Some(10_000),
                Some(ms(500)),
                "one last try at the end of the wait",
            ),
            (ms(2_000), 10_000, Some(10_000), None, "the wait is over"),
            (
                ms(2_000),
                12_000,
                Some(10_000),
                None,
                "a try that outlasted the wait gives up too",
            ),
        ];
        for (wait, now, give_up_at, want, why) in cases {
            assert_eq!(next_try(wait, at(now), give_up_at.map(at)), want, "{why}");
        }
    }
}
