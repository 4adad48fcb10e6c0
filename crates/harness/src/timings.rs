//! Named timing presets for the tests' electors: which TTL, renew deadline and retry period a
//! test runs with, said once.

use std::time::Duration;

use leasehold::elector::Timing;

const fn timing(lease_ms: u64, renew_ms: u64, retry_ms: u64) -> Timing {
    Timing {
        lease_duration: Duration::from_millis(lease_ms),
        renew_deadline: Duration::from_millis(renew_ms),
        retry_period: Duration::from_millis(retry_ms),
        drift_factor: 0.01,
    }
}

/// TTL 1 s, renew deadline 600 ms, retry 100 ms.
pub const QUICK_RETRY: Timing = timing(1000, 600, 100);

/// TTL 1 s, renew deadline 600 ms, retry 150 ms: in-process tests that finish quickly.
pub const FAST: Timing = timing(1000, 600, 150);

/// TTL 1.5 s, renew deadline 900 ms, retry 250 ms: child processes and replicated Redis, whose pauses a loaded machine lengthens.
pub const STEADY: Timing = timing(1500, 900, 250);

/// TTL 3 s, renew deadline 2 s, retry 1 s.
pub const THREE_SECOND_TERM: Timing = timing(3000, 2000, 1000);

/// TTL 6 s, renew deadline 4 s, retry 250 ms.
pub const SIX_SECOND_TERM: Timing = timing(6000, 4000, 250);

/// TTL 10 s, renew deadline 6 s, retry 1 s.
pub const TEN_SECOND_TERM_QUICK_RETRY: Timing = timing(10000, 6000, 1000);

/// TTL 10 s, renew deadline 6 s, retry 2 s: a term that outlasts the test.
pub const TEN_SECOND_TERM: Timing = timing(10000, 6000, 2000);

/// TTL 10 s, renew deadline 6 s, retry 3 s.
pub const TEN_SECOND_TERM_SLOW_RETRY: Timing = timing(10000, 6000, 3000);

/// TTL 15 s, renew deadline 10 s, retry 5 s.
pub const FIFTEEN_SECOND_TERM: Timing = timing(15000, 10000, 5000);

/// TTL 60 s, renew deadline 40 s, retry 250 ms: many renewals early in a long term.
pub const SIXTY_SECOND_TERM_QUICK_RETRY: Timing = timing(60000, 40000, 250);

/// TTL 30 s, renew deadline 20 s, retry 10 s: nothing renews or retries within a test.
pub const THIRTY_SECOND_TERM: Timing = timing(30000, 20000, 10000);
