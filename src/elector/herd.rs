//! The release herd: a release wakes every follower at once, and with hundreds of followers the
//! winner's acquire and its reply queue behind everyone else's. So each follower waits a random
//! part of a spread that grows with the number of subscribers before it tries: the first try
//! still comes after about one subscriber's share of the spread, the rest arrive spread out.
//! A small group is not delayed at all.

use std::time::Duration;

/// Up to this many subscribers are woken together: their herd is a handful of commands, and a
/// delay would only add to their handoff.
pub(crate) const WOKEN_TOGETHER: u32 = 16;

/// The spread per subscriber: about what Redis and a client spend on one refused acquire, so
/// that the tries arrive about as fast as they are served instead of queueing.
pub(crate) const SPREAD_PER_SUBSCRIBER: Duration = Duration::from_micros(50);

/// The longest spread, whatever the count (a thousand subscribers and more).
pub(crate) const MAX_SPREAD: Duration = Duration::from_millis(50);

/// How long a follower waits after a release announced to `subscribers` connections before it
/// tries; `jitter` is drawn from [0, 1). Without a count (an announcement from a release script
/// that does not send one) nobody waits, as before.
///
/// With n subscribers each waiting a uniform part of n × 50 µs, the first try comes after
/// about 50 µs on average (about 230 µs at the 99th percentile), whatever n.
pub(crate) fn herd_delay(subscribers: Option<u32>, jitter: f64) -> Duration {
    match subscribers {
        Some(n) if n > WOKEN_TOGETHER => SPREAD_PER_SUBSCRIBER
            .saturating_mul(n)
            .min(MAX_SPREAD)
            .mul_f64(jitter.clamp(0.0, 1.0)),
        _ => Duration::ZERO,
    }
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
            // Beyond it, 50 µs per subscriber, drawn uniformly.
            (Some(17), 0.0, Duration::ZERO),
            (Some(17), 0.5, us(425)),
            (Some(200), 0.5, us(5_000)),
            (Some(200), 0.999, us(9_990)),
            (Some(500), 1.0, us(25_000)),
            // Capped at 50 ms.
            (Some(1_000), 1.0, us(50_000)),
            (Some(u32::MAX), 0.5, us(25_000)),
            // A jitter out of range is clamped.
            (Some(200), 7.0, us(10_000)),
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
}
