//! The elector's decisions as pure functions of the time and what Redis said: no I/O, so every
//! case is a row in a table test.

use std::time::Duration;

use super::{StepDownReason, Timing};
use crate::clock::BootInstant;
use crate::lease::Retry;

/// What the watchdog does when it wakes up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchdogStep {
    /// Stop leading now, without another renewal.
    StepDown(StepDownReason),
    /// Send one renewal, and give up on it after `timeout`.
    Renew {
        /// Time left before the first deadline.
        timeout: Duration,
    },
}

/// The watchdog's decision at `now`, given the validity deadline and the renew deadline.
/// A deadline that has passed wins over a renewal: after a pause the watchdog must not even try,
/// since a renewal cannot prove anything about the time already lost. A renewal is bounded by
/// the first deadline and by `attempt_timeout`.
pub fn watchdog_step(
    now: BootInstant,
    valid_until: BootInstant,
    renew_by: BootInstant,
    attempt_timeout: Duration,
) -> WatchdogStep {
    if now >= valid_until {
        WatchdogStep::StepDown(StepDownReason::ValidityDeadlinePassed)
    } else if now >= renew_by {
        WatchdogStep::StepDown(StepDownReason::RenewDeadlinePassed)
    } else {
        WatchdogStep::Renew {
            timeout: now.until(valid_until.min(renew_by)).min(attempt_timeout),
        }
    }
}

/// The shortest pause between two renewal attempts, so that a link that fails instantly does
/// not turn the watchdog into a busy loop.
const MIN_RETRY_PAUSE: Duration = Duration::from_millis(10);

/// When the watchdog should try again after a failed renewal that started at `attempt_started`:
/// attempts start at most once per retry period (an attempt that timed out already waited),
/// never sooner than a short pause from `now`, and never after either deadline, so that it
/// steps down on time.
pub fn retry_after_failure(
    attempt_started: BootInstant,
    now: BootInstant,
    timing: &Timing,
    valid_until: BootInstant,
    renew_by: BootInstant,
) -> BootInstant {
    attempt_started
        .saturating_add(timing.retry_period)
        .max(now.saturating_add(MIN_RETRY_PAUSE))
        .min(valid_until)
        .min(renew_by)
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

/// The longest a misconfigured Redis (wrong password, missing permission) is left alone.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Redis expires a key when its clock is *past* the expiry millisecond; try just after.
const EXPIRY_SLACK: Duration = Duration::from_millis(1);

/// How long a follower sleeps before it tries again (a release notification cuts any sleep
/// short). `jitter` is drawn from [0, 1).
///
/// - Held with a TTL: until the TTL runs out, so a crashed leader is replaced within about a
///   millisecond of its expiry. With the release channel subscribed that is the only wake-up
///   besides a release (about one command per lease duration while a healthy leader renews);
///   without it, the retry period with jitter caps the wait, since a release would go unheard.
/// - Held without a TTL (not our key): the retry period with jitter.
/// - Cooling down: until the cooldown ends; nothing can succeed before.
/// - A passing failure: the retry period with jitter; a configuration fault: exponential
///   back-off from the retry period up to [`MAX_BACKOFF`].
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
        } => {
            let doubled = timing
                .retry_period
                .saturating_mul(1u32 << failures.saturating_sub(1).min(16));
            doubled.min(MAX_BACKOFF).max(timing.retry_period) + timing.retry_period.mul_f64(jitter)
        }
    }
}

/// Whether a term was cut short by its work: work that fails or panics within one lease duration
/// of winning (a command that cannot start, a reconciler that errors at once), again and again,
/// would otherwise make the replicas cycle acquire → release as fast as Redis answers. Work that
/// returns on its own hands over on purpose (a rotation, a library user's choice) and is not
/// paced.
pub fn is_short_term(reason: StepDownReason, lasted: Duration, timing: &Timing) -> bool {
    matches!(
        reason,
        StepDownReason::WorkFailed | StepDownReason::WorkPanicked
    ) && lasted < timing.lease_duration
}

/// The pause before contending again after a term, given how many short terms in a row have
/// ended so far (this one included): none after a term that was not short, else the retry
/// period, doubling with each repeat up to [`MAX_BACKOFF`].
pub fn pause_after_term(short_terms_in_a_row: u32, timing: &Timing) -> Duration {
    if short_terms_in_a_row == 0 {
        return Duration::ZERO;
    }
    timing
        .retry_period
        .saturating_mul(1u32 << (short_terms_in_a_row - 1).min(16))
        .min(MAX_BACKOFF.max(timing.retry_period))
}

/// The guard's comparison: whether a term whose validity deadline is `valid_until` may still act
/// at `now` (strictly before the deadline). [`Leadership::check`](super::Leadership::check)
/// refuses exactly when this is false, or when the term was revoked.
pub fn within_validity(now: BootInstant, valid_until: BootInstant) -> bool {
    now < valid_until
}

/// How long a replica stays out of the election after a term ended for `reason`: one lease
/// duration after a handover, so that the replica that asked to be relieved is not the next
/// leader again (a handover must move leadership, or it did nothing); none otherwise.
pub fn hold_off_after(reason: StepDownReason, timing: &Timing) -> Duration {
    match reason {
        StepDownReason::Handover => timing.lease_duration,
        _ => Duration::ZERO,
    }
}

/// How long a handover to a named replica reserves the next term for it: two retry periods,
/// enough for its wake-up on the release channel (about a round trip) and for a try on its
/// fallback retry period while its channel is down; then anyone may acquire.
pub fn reservation(timing: &Timing) -> Duration {
    timing.retry_period.saturating_mul(2)
}

/// client-go's observed-time rule, for what the server cannot see (a lease key that vanished
/// together with its record, or a forward step of the Redis host's clock): a holder seen with
/// `remaining` TTL at instant `seen_at` keeps its term until `seen_at + remaining` as far as
/// this follower is concerned. Whether, at `now`, the observation still stands (and goes with
/// the next acquire): not once it ran out, nor once the holder announced its release.
pub fn observation_stands(
    now: BootInstant,
    observed_until: BootInstant,
    release_announced: bool,
) -> bool {
    !release_announced && now < observed_until
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> BootInstant {
        BootInstant::from_since_boot(Duration::from_millis(ms))
    }

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    #[test]
    fn handover_table() {
        let t = Timing::default(); // 15 s / 10 s / 2 s
        // reason -> hold-off before contending again
        let cases = [
            (StepDownReason::Handover, 15_000),
            (StepDownReason::Shutdown, 0),
            (StepDownReason::Lost, 0),
            (StepDownReason::WorkEnded, 0),
            (StepDownReason::ValidityDeadlinePassed, 0),
        ];
        for (reason, want) in cases {
            assert_eq!(hold_off_after(reason, &t), ms(want), "{reason:?}");
        }
        assert_eq!(reservation(&t), ms(4_000));
        let fast = Timing {
            lease_duration: ms(1_500),
            renew_deadline: ms(900),
            retry_period: ms(250),
            drift_factor: 0.01,
        };
        assert_eq!(hold_off_after(StepDownReason::Handover, &fast), ms(1_500));
        assert_eq!(reservation(&fast), ms(500));
    }

    #[test]
    fn watchdog_table() {
        use StepDownReason::*;
        use WatchdogStep::*;
        // (now, valid_until, renew_by) -> step, with attempts bounded by 3.4 s
        let cases = [
            (1_000, 15_000, 10_000, Renew { timeout: ms(3_400) }),
            (7_000, 15_000, 10_000, Renew { timeout: ms(3_000) }),
            (9_999, 15_000, 10_000, Renew { timeout: ms(1) }),
            (10_000, 15_000, 10_000, StepDown(RenewDeadlinePassed)),
            (14_999, 15_000, 10_000, StepDown(RenewDeadlinePassed)),
            // A pause longer than the TTL: the validity deadline is reported, not the renew one.
            (15_000, 15_000, 10_000, StepDown(ValidityDeadlinePassed)),
            (60_000, 15_000, 10_000, StepDown(ValidityDeadlinePassed)),
            // A renew deadline beyond validity (allowed by the rule with a large drift).
            (12_000, 13_000, 14_000, Renew { timeout: ms(1_000) }),
            (13_500, 13_000, 14_000, StepDown(ValidityDeadlinePassed)),
        ];
        for (now, valid, renew, want) in cases {
            assert_eq!(
                watchdog_step(at(now), at(valid), at(renew), ms(3_400)),
                want,
                "now={now}"
            );
        }
    }

    #[test]
    fn retries_after_failure_never_sleep_past_a_deadline() {
        let timing = Timing::default();
        let (valid, renew) = (at(15_000), at(10_000));
        // An instant failure: wait out the retry period from the attempt's start.
        assert_eq!(
            retry_after_failure(at(1_000), at(1_001), &timing, valid, renew),
            at(3_000)
        );
        // A timeout that already lasted longer than the retry period: go again shortly.
        assert_eq!(
            retry_after_failure(at(1_000), at(4_400), &timing, valid, renew),
            at(4_410)
        );
        // Never past a deadline.
        assert_eq!(
            retry_after_failure(at(9_000), at(9_001), &timing, valid, renew),
            at(10_000)
        );
        assert_eq!(
            retry_after_failure(at(9_000), at(9_001), &timing, at(9_500), renew),
            at(9_500)
        );
    }

    #[test]
    fn follower_wait_table() {
        let timing = Timing::default(); // 15 s / 10 s / 2 s
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
            // A healthy leader renews: sleep to its expiry, one command per ~lease duration.
            (Seen::Held(Some(ms(14_000))), true, 0.5, ms(14_001)),
            // A crashed leader: wake a millisecond after its expiry.
            (Seen::Held(Some(ms(300))), true, 0.0, ms(301)),
            (Seen::Held(Some(ms(0))), true, 0.0, ms(1)),
            // A holder with a TTL longer than ours (another configuration) is capped.
            (Seen::Held(Some(ms(60_000))), true, 0.0, ms(15_000)),
            // Without the release channel, the retry period with jitter caps the wait.
            (Seen::Held(Some(ms(14_000))), false, 0.0, ms(2_000)),
            (Seen::Held(Some(ms(14_000))), false, 0.5, ms(3_200)),
            (Seen::Held(Some(ms(500))), false, 0.5, ms(501)),
            // No TTL on the key: poll at the retry period.
            (Seen::Held(None), true, 0.0, ms(2_000)),
            (Seen::CoolingDown(ms(7_000)), false, 0.9, ms(7_001)),
            (soon, true, 0.0, ms(2_000)),
            (back_off(1), true, 0.0, ms(2_000)),
            (back_off(2), true, 0.0, ms(4_000)),
            (back_off(4), true, 0.0, ms(16_000)),
            (back_off(5), true, 0.0, ms(30_000)),
            (back_off(40), true, 0.5, ms(31_000)),
        ];
        for (seen, subscribed, jitter, want) in cases {
            assert_eq!(
                follower_wait(seen, subscribed, &timing, jitter),
                want,
                "{seen:?} subscribed={subscribed} jitter={jitter}"
            );
        }
    }

    #[test]
    fn term_pacing_table() {
        use StepDownReason::*;
        let timing = Timing::default(); // 15 s / 10 s / 2 s
        // (reason, lasted) -> short?
        let short = [
            (WorkFailed, ms(3), true),
            (WorkFailed, ms(14_999), true),
            (WorkPanicked, ms(0), true),
            (WorkFailed, ms(15_000), false),
            (WorkPanicked, ms(60_000), false),
            // Returning on its own is a handover on purpose.
            (WorkEnded, ms(3), false),
            // Losing the lease is not the work's doing; the follower's waits pace it.
            (Lost, ms(3), false),
            (RenewDeadlinePassed, ms(10_000), false),
            (ValidityDeadlinePassed, ms(1), false),
            (Shutdown, ms(1), false),
        ];
        for (reason, lasted, want) in short {
            assert_eq!(
                is_short_term(reason, lasted, &timing),
                want,
                "{reason:?} {lasted:?}"
            );
        }
        // short terms in a row -> pause
        let pauses = [
            (0, ms(0)),
            (1, ms(2_000)),
            (2, ms(4_000)),
            (4, ms(16_000)),
            (5, ms(30_000)),
            (1_000, ms(30_000)),
        ];
        for (streak, want) in pauses {
            assert_eq!(pause_after_term(streak, &timing), want, "streak {streak}");
        }
        // A retry period above the cap is still waited in full.
        let slow = Timing {
            lease_duration: Duration::from_secs(600),
            renew_deadline: Duration::from_secs(300),
            retry_period: Duration::from_secs(60),
            drift_factor: 0.01,
        };
        assert_eq!(pause_after_term(3, &slow), ms(60_000));
    }

    #[test]
    fn observed_time_table() {
        // (now, observed until, release announced) -> the observation stands
        let cases = [
            (1_000, 3_000, false, true),
            (2_999, 3_000, false, true),
            (3_000, 3_000, false, false),
            (9_000, 3_000, false, false),
            // The holder said it let go: no reason to keep its TTL.
            (1_000, 3_000, true, false),
        ];
        for (now, until, announced, want) in cases {
            assert_eq!(
                observation_stands(at(now), at(until), announced),
                want,
                "now={now} until={until} announced={announced}"
            );
        }
    }

    #[test]
    fn the_guard_refuses_from_the_deadline_on() {
        assert!(within_validity(at(2_999), at(3_000)));
        assert!(!within_validity(at(3_000), at(3_000)));
        assert!(!within_validity(at(3_001), at(3_000)));
    }

    #[test]
    fn jitter_stays_within_client_go_bounds() {
        let timing = Timing::default();
        for j in [-1.0, 0.0, 0.25, 0.999, 7.0] {
            let wait = follower_wait(Seen::Held(None), true, &timing, j);
            assert!(wait >= ms(2_000) && wait <= ms(4_400), "{j}: {wait:?}");
        }
    }
}
