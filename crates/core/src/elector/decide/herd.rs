//! The release herd: a release wakes every follower at once, and with hundreds of followers the
//! winner's acquire and its reply queue behind everyone else's. So only a first wave of about
//! [`FIRST_WAVE`] followers, drawn at random by each follower for itself, tries at once; the rest
//! wait until the handoff is over and then try spread out (each still tries, so a first wave
//! that failed costs one spread, not a lease duration). A small group is woken together.

use std::time::Duration;

/// Up to this many subscribers are woken together: their herd is a handful of commands, and a
/// delay would only add to their handoff.
pub(crate) const WOKEN_TOGETHER: u32 = 16;

/// How many followers, on average, try at once in a larger group. With n subscribers each is in
/// the first wave with probability 8/n, so the wave is empty in about e⁻⁸ (0.03 %) of releases.
pub(crate) const FIRST_WAVE: u32 = 8;

/// The spread per subscriber: about what Redis and a client spend on one refused acquire, so
/// that the late tries arrive about as fast as they are served instead of queueing.
pub(crate) const SPREAD_PER_SUBSCRIBER: Duration = Duration::from_micros(50);

/// The longest spread, whatever the count (a thousand subscribers and more).
pub(crate) const MAX_SPREAD: Duration = Duration::from_millis(50);

/// How long a follower waits after a release announced to `subscribers` connections before it
/// tries; `jitter` is drawn from [0, 1). Without a count (an announcement from a release script
/// that does not send one) nobody waits, as before.
pub(crate) fn herd_delay(subscribers: Option<u32>, jitter: f64) -> Duration {
    let Some(n) = subscribers.filter(|n| *n > WOKEN_TOGETHER) else {
        return Duration::ZERO;
    };
    let jitter = jitter.clamp(0.0, 1.0);
    if jitter * f64::from(n) < f64::from(FIRST_WAVE) {
        return Duration::ZERO;
    }
    let spread = SPREAD_PER_SUBSCRIBER.saturating_mul(n).min(MAX_SPREAD);
    spread + spread.mul_f64(jitter)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn herd_delay_table() {
        // (subscribers, jitter) -> delay
        let cases = [
            // No count in the announcement: everyone tries at once, as before.
            (None, 0.9, Duration::ZERO),
            // A small group is woken together.
            (Some(0), 0.5, Duration::ZERO),
            (Some(3), 0.99, Duration::ZERO),
            (Some(16), 0.99, Duration::ZERO),
            // Beyond it, the first wave (jitter × n < 8) tries at once…
            (Some(17), 0.0, Duration::ZERO),
            (Some(17), 0.47, Duration::ZERO),
            (Some(200), 0.039, Duration::ZERO),
            (Some(1_000), 0.0079, Duration::ZERO),
            // …and the others after one spread of 50 µs per subscriber, plus a part of another.
            (Some(17), 0.5, us(850 + 425)),
            (Some(200), 0.04, us(10_000 + 400)),
            (Some(200), 0.5, us(15_000)),
            (Some(200), 0.999, us(19_990)),
            (Some(500), 1.0, us(50_000)),
            // The spread is capped at 50 ms.
            (Some(1_000), 0.5, us(75_000)),
            (Some(u32::MAX), 1.0, us(100_000)),
            // A jitter out of range is clamped.
            (Some(200), 7.0, us(20_000)),
            (Some(200), -1.0, Duration::ZERO),
        ];
        for (subscribers, jitter, want) in cases {
            assert_eq!(
                herd_delay(subscribers, jitter),
                want,
                "subscribers={subscribers:?} jitter={jitter}"
            );
        }
    }

    #[test]
    fn about_eight_followers_try_at_once_whatever_the_group() {
        for n in [17u32, 50, 200, 500, 5_000] {
            let draws = 10_000;
            let at_once = (0..draws)
                .map(|i| f64::from(i) / f64::from(draws))
                .filter(|j| herd_delay(Some(n), *j).is_zero())
                .count();
            let share = at_once as f64 / f64::from(draws);
            let want = f64::from(FIRST_WAVE) / f64::from(n);
            assert!((share - want).abs() < 1e-3, "n={n}: {share} vs {want}");
        }
    }
}
