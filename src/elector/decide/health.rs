//! What the elector makes of Redis's and its own health: how loud a failed Redis call is, what
//! an eviction policy read means for the election and whether it is news, and when the
//! candidate check has just put this replica out.

use crate::elector::{Candidacy, Eviction};
use crate::lease::{LeaseError, Retry};

/// How a failed Redis call is logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureLog {
    /// An error: Redis refuses leasehold (a configuration fault) and the elector backs off.
    Refused,
    /// A warning: the first failure of a run, and every tenth.
    Warn,
    /// Debug: the failures in between, which would flood the log during an outage.
    Quiet,
}

/// How loud the `failures`-th failure in a row is, given whether it is worth retrying soon.
pub fn failure_log(retry: Retry, failures: u32) -> FailureLog {
    match retry {
        Retry::BackOff => FailureLog::Refused,
        Retry::Soon if failures == 1 || failures.is_multiple_of(10) => FailureLog::Warn,
        Retry::Soon => FailureLog::Quiet,
    }
}

/// Whether a read of the eviction policy is worth saying in the log: the first successful read,
/// and every change between "may evict" and "does not".
pub fn eviction_news(before: &Eviction, now: &Eviction) -> bool {
    before.may_evict() != now.may_evict()
        || matches!((before, now), (Eviction::NotRead, Eviction::Read(_)))
}

/// Whether a failure to read the eviction policy is said (once, until a read succeeds): not
/// when it was said already, and not for a timeout or a broken link, which the elector's own
/// calls report.
pub fn tells_unreadable(already_told: bool, err: &LeaseError) -> bool {
    !already_told
        && !matches!(
            err,
            LeaseError::Timeout { .. } | LeaseError::Connection { .. }
        )
}

/// Whether the candidate check has just put this replica out (the metric counts these).
pub fn newly_unhealthy(before: &Candidacy, now: &Candidacy) -> bool {
    matches!(now, Candidacy::Unhealthy { .. }) && !matches!(before, Candidacy::Unhealthy { .. })
}

#[cfg(test)]
mod tests {
    use super::super::rows::ms;
    use super::*;
    use crate::lease::EvictionPolicy;

    #[test]
    fn redis_failures_are_loud_once_and_then_every_tenth() {
        use FailureLog::*;
        // (retry, failures in a row) -> log
        let cases = [
            (
                Retry::Soon,
                1,
                Warn,
                "the first failure of an outage is said",
            ),
            (Retry::Soon, 2, Quiet, "the next ones are not"),
            (Retry::Soon, 9, Quiet, "up to the ninth"),
            (Retry::Soon, 10, Warn, "the tenth is said again"),
            (Retry::Soon, 20, Warn, "and every tenth after"),
            (Retry::Soon, 21, Quiet, "but not those in between"),
            (
                Retry::BackOff,
                1,
                Refused,
                "a refusal is an error from the first",
            ),
            (
                Retry::BackOff,
                7,
                Refused,
                "and every time: it needs fixing",
            ),
        ];
        for (retry, failures, want, why) in cases {
            assert_eq!(failure_log(retry, failures), want, "{why}");
        }
    }

    fn read(maxmemory: u64, policy: &str) -> Eviction {
        Eviction::Read(EvictionPolicy {
            maxmemory,
            policy: policy.to_owned(),
        })
    }

    #[test]
    fn an_eviction_policy_is_said_when_first_read_and_when_it_turns() {
        let evicting = read(1 << 30, "allkeys-lru");
        let safe = read(0, "noeviction");
        let unreadable = Eviction::Unreadable {
            reason: "NOPERM".into(),
        };
        // (before, now) -> news
        let cases = [
            (
                Eviction::NotRead,
                safe.clone(),
                true,
                "the first read is said",
            ),
            (
                Eviction::NotRead,
                evicting.clone(),
                true,
                "an evicting first read too",
            ),
            (safe.clone(), safe.clone(), false, "the same again is not"),
            (
                evicting.clone(),
                evicting.clone(),
                false,
                "nor an evicting one again",
            ),
            (
                safe.clone(),
                evicting.clone(),
                true,
                "turning to evict is said",
            ),
            (evicting.clone(), safe.clone(), true, "and turning back"),
            (
                evicting.clone(),
                read(1 << 20, "volatile-lru"),
                false,
                "another evicting policy is no news",
            ),
            (
                Eviction::NotRead,
                unreadable.clone(),
                false,
                "unreadable is said apart",
            ),
            (
                unreadable.clone(),
                safe.clone(),
                false,
                "a read after an unreadable one that does not evict",
            ),
            (
                unreadable,
                evicting,
                true,
                "one after an unreadable one that evicts",
            ),
        ];
        for (before, now, want, why) in cases {
            assert_eq!(eviction_news(&before, &now), want, "{why}");
        }
    }

    #[test]
    fn an_unreadable_eviction_policy_is_said_once_and_not_for_outages() {
        let timeout = LeaseError::Timeout {
            op: "info",
            after: ms(1_000),
        };
        let reset = LeaseError::Connection {
            op: "info",
            detail: "reset".into(),
        };
        let loading = LeaseError::Loading { op: "info" };
        // (told already, error) -> tell
        let cases = [
            (false, &loading, true, "a refusal or an odd answer is said"),
            (true, &loading, false, "once"),
            (
                false,
                &timeout,
                false,
                "a timeout is the elector's own calls' to report",
            ),
            (false, &reset, false, "a broken link too"),
        ];
        for (told, err, want, why) in cases {
            assert_eq!(tells_unreadable(told, err), want, "{why}");
        }
    }

    #[test]
    fn the_candidate_check_counts_each_fall_into_unhealthy_once() {
        let unhealthy = |r: &str| Candidacy::Unhealthy { reason: r.into() };
        let pending = Candidacy::Pending {
            reason: "initial delay".into(),
        };
        // (before, now) -> newly unhealthy
        let cases = [
            (
                Candidacy::Healthy,
                unhealthy("probe failed"),
                true,
                "healthy to unhealthy",
            ),
            (
                pending.clone(),
                unhealthy("probe failed"),
                true,
                "pending to unhealthy",
            ),
            (
                Candidacy::Unchecked,
                unhealthy("x"),
                true,
                "unchecked to unhealthy",
            ),
            (
                unhealthy("a"),
                unhealthy("b"),
                false,
                "new words, the same fall",
            ),
            (
                unhealthy("a"),
                Candidacy::Healthy,
                false,
                "recovering is not a fall",
            ),
            (
                Candidacy::Healthy,
                pending,
                false,
                "pending is not unhealthy",
            ),
        ];
        for (before, now, want, why) in cases {
            assert_eq!(newly_unhealthy(&before, &now), want, "{why}");
        }
    }
}
