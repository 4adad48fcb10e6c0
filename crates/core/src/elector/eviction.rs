//! Redis's eviction policy, watched: read at start, at once when this replica becomes leader,
//! and then again as [`reread_after`] says (while Redis answers the elector), so that a Redis
//! whose `maxmemory` policy may evict the lease is said out loud (a log event, a metric, a field
//! in the status), and, with [`EvictionMode::Refuse`], keeps this replica out of the election.
//!
//! The leader reads it every few lease durations, a follower rarely: the policy is the same
//! Redis's for all of them, and the one whose term it could end is the leader. A follower kept out
//! by what it read looks every lease duration, so that it comes back soon after Redis is fixed.
//!
//! The state record keeps eviction safe (a follower refuses a term the record still names, and
//! the holder puts its evicted key back), but under memory pressure every renewal may find the
//! key gone, and an `allkeys-*` policy can take the record too: then only the data-loss cooldown
//! is left. A Redis that holds leases should not evict.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use super::watchers::StatusBoard;
use super::{EVICTION, Eviction, EvictionRefusal, Role, Standing, Status, TermHooks, Timing};
use crate::lease::{EvictionPolicy, LeaseError, RedisLease};

/// What to do when Redis may evict the lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EvictionMode {
    /// Say so (log event, metric, status) and take part as usual.
    #[default]
    Warn,
    /// Say so, and stay out of the election (a leader steps down) until Redis no longer may
    /// evict. Readiness in member mode says why.
    Refuse,
}

/// Starts the watcher; it stops when `stop` is cancelled.
pub(crate) fn spawn(
    lease: Arc<RedisLease>,
    timing: Timing,
    mode: EvictionMode,
    status: StatusBoard,
    gate: watch::Sender<Standing>,
    hooks: Arc<dyn TermHooks>,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut said_unreadable = false;
        let mut seen = status.subscribe();
        let mut first = true;
        loop {
            // Only ask a Redis that answers the elector: no extra dials (and no extra failed
            // logins) while it is down or refuses us. The first read goes out at once: without
            // the data-loss cooldown the follower waits for it before its first try.
            if !first {
                tokio::select! {
                    biased;
                    _ = stop.cancelled() => return,
                    _ = seen.wait_for(|s| s.redis.reachable && s.redis.last_error.is_none()) => {}
                }
            }
            let read = tokio::select! {
                biased;
                _ = stop.cancelled() => return,
                r = lease.eviction_policy(timing.call_timeout()) => r,
            };
            if first && read.as_ref().is_err_and(|e| !e.is_answer()) {
                // No answer yet (Redis down, or not up yet): ask again a retry period later,
                // with the policy still unknown.
                tokio::select! {
                    biased;
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(timing.retry_period) => continue,
                }
            }
            first = false;
            let eviction = match read {
                Ok(policy) => {
                    hooks.eviction_policy(&policy.policy, policy.may_evict());
                    said_unreadable = false;
                    Eviction::Read(policy)
                }
                Err(err) => {
                    if tells_unreadable(said_unreadable, &err) {
                        warn!(
                            identity = %lease.owner().identity(),
                            lease = %lease.name(),
                            error = %err,
                            "cannot read the eviction policy (INFO memory); carrying on without knowing whether redis may evict the lease"
                        );
                        said_unreadable = true;
                    }
                    Eviction::Unreadable {
                        reason: err.to_string(),
                    }
                }
            };
            record(&lease, mode, &status, &gate, eviction);
            let read_at = Instant::now();
            let led_at_read = leads(&seen.borrow_and_update());
            // Until the next read is due: the wait depends on the role, which may change.
            loop {
                let (leading, refused) = {
                    let s = seen.borrow_and_update();
                    (leads(&s), s.redis.eviction_refusal.is_some())
                };
                if leading && !led_at_read {
                    break;
                }
                let due = read_at + reread_after(&timing, leading, refused);
                tokio::select! {
                    biased;
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep_until(due) => break,
                    _ = seen.changed() => {}
                }
            }
        }
    })
}

fn leads(status: &Status) -> bool {
    matches!(status.role, Role::Leader { .. })
}

/// How many lease durations a leader waits between two reads of the policy.
const LEADER_READS_EVERY: u32 = 4;

/// How many lease durations a follower waits between two reads of the policy.
const FOLLOWER_READS_EVERY: u32 = 64;

/// How long after a read the policy is read again: every lease duration while what was read
/// keeps this replica out of the election (to notice the fix), every [`LEADER_READS_EVERY`]
/// lease durations on the leader, every [`FOLLOWER_READS_EVERY`] on a follower. An idle
/// follower's try is its only command of every lease duration; a read each time would be a
/// second one.
fn reread_after(timing: &Timing, leading: bool, refused: bool) -> Duration {
    let every = match (refused, leading) {
        (true, _) => 1,
        (false, true) => LEADER_READS_EVERY,
        (false, false) => FOLLOWER_READS_EVERY,
    };
    timing.lease_duration.saturating_mul(every)
}

/// What the eviction gate says before the policy is read: without the data-loss cooldown an
/// `allkeys-*` Redis is refused (docs/DESIGN.md, "Eviction"), so not one try before Redis has
/// said which policy it has.
pub(super) fn before_read(lease: &RedisLease) -> Standing {
    if lease.cools_down_on_data_loss() {
        Standing::Stands
    } else {
        Standing::Out {
            gate: EVICTION,
            detail: Some("the eviction policy is not read yet".to_owned()),
        }
    }
}

/// Puts what was read into the status and the gate (the gate first: the loop reads it),
/// saying so when it changed.
fn record(
    lease: &RedisLease,
    mode: EvictionMode,
    status: &StatusBoard,
    gate: &watch::Sender<Standing>,
    eviction: Eviction,
) {
    let refused = refusal(mode, &eviction, lease.cools_down_on_data_loss());
    gate.send_replace(match refused {
        Some(_) => Standing::Out {
            gate: EVICTION,
            detail: None,
        },
        None => Standing::Stands,
    });
    let mut changed_to: Option<Eviction> = None;
    let mut newly_unsafe = false;
    status.modify_if(|s| {
        let changed = s.redis.eviction != eviction || s.redis.eviction_refusal != refused;
        if eviction_news(&s.redis.eviction, &eviction) {
            changed_to = Some(eviction.clone());
        }
        newly_unsafe = refused == Some(EvictionRefusal::Unsafe)
            && s.redis.eviction_refusal != Some(EvictionRefusal::Unsafe);
        s.redis.eviction = eviction.clone();
        s.redis.eviction_refusal = refused;
        changed
    });
    if newly_unsafe && let Eviction::Read(read) = &eviction {
        error!(
            identity = %lease.owner().identity(),
            lease = %lease.name(),
            policy = %read.policy,
            maxmemory = read.maxmemory,
            "redis evicts keys without a TTL (maxmemory-policy allkeys-*), which takes the lease's state record, and --no-data-loss-cooldown turns off the cooldown that covers that: two replicas could lead; refusing"
        );
    }
    let Some(Eviction::Read(read)) = changed_to else {
        return;
    };
    let identity = lease.owner().identity();
    let name = lease.name();
    let EvictionPolicy { maxmemory, policy } = &read;
    if read.may_evict() {
        warn!(
            %identity,
            lease = %name,
            policy = %policy,
            maxmemory,
            refuse = refused.is_some(),
            "redis may evict the lease under memory pressure (maxmemory with an evicting policy); give leases a redis with maxmemory-policy noeviction"
        );
    } else {
        info!(%identity, lease = %name, policy = %policy, maxmemory, "redis does not evict keys");
    }
}

/// Why an `allkeys-*` policy without the data-loss cooldown is refused, with the policy, its
/// limit and the flag (docs/DESIGN.md, "Eviction").
fn unsafe_words(read: &EvictionPolicy) -> String {
    format!(
        "redis evicts keys without a TTL (maxmemory-policy {}, maxmemory {} bytes), which takes the lease's state record, and --no-data-loss-cooldown turns off the cooldown that covers that: two replicas could lead. Turn the cooldown on, or give leases a redis with maxmemory-policy noeviction or volatile-*",
        read.policy, read.maxmemory
    )
}

/// Resolves, with the refusal's words, once the elector of `status` has found that Redis evicts
/// keys without a TTL while the data-loss cooldown is off: a configuration known to make two
/// leaders, which the binary refuses (exit 2) instead of running without a leader. Never
/// resolves otherwise; the elector itself already stays out of the election by then.
pub async fn refused_as_unsafe(status: &mut watch::Receiver<Status>) -> String {
    let seen = status
        .wait_for(|s| s.redis.eviction_refusal == Some(EvictionRefusal::Unsafe))
        .await;
    match seen.as_deref().map(|s| &s.redis.eviction) {
        Ok(Eviction::Read(read)) => unsafe_words(read),
        // The elector stopped first: nothing to refuse.
        _ => std::future::pending().await,
    }
}

/// Whether this replica stays out of the election for what was read of the eviction policy, and
/// why: an `allkeys-*` policy without the data-loss cooldown always (known to make two leaders);
/// else only with [`EvictionMode::Refuse`], and only when Redis is known to be able to evict.
fn refusal(mode: EvictionMode, eviction: &Eviction, cooldown: bool) -> Option<EvictionRefusal> {
    match eviction {
        Eviction::Read(read) if read.may_evict_record() && !cooldown => {
            Some(EvictionRefusal::Unsafe)
        }
        _ if mode == EvictionMode::Refuse && eviction.may_evict() => Some(EvictionRefusal::Asked),
        _ => None,
    }
}

/// Whether a read of the eviction policy is worth saying in the log: the first successful read,
/// and every change between "may evict" and "does not".
fn eviction_news(before: &Eviction, now: &Eviction) -> bool {
    before.may_evict() != now.may_evict()
        || matches!((before, now), (Eviction::NotRead, Eviction::Read(_)))
}

/// Whether a failure to read the eviction policy is said (once, until a read succeeds): not
/// when it was said already, and not for a timeout or a broken link, which the elector's own
/// calls report.
fn tells_unreadable(already_told: bool, err: &LeaseError) -> bool {
    !already_told
        && !matches!(
            err,
            LeaseError::Timeout { .. } | LeaseError::Connection { .. }
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(maxmemory: u64, policy: &str) -> Eviction {
        Eviction::Read(EvictionPolicy {
            maxmemory,
            policy: policy.to_owned(),
        })
    }

    #[test]
    fn reread_table() {
        let t = Timing::default(); // 15 s lease duration
        let s = Duration::from_secs;
        // (leading, refused) -> the wait after a read
        let cases = [
            (
                (false, false),
                s(960),
                "a follower: rarely (64 lease durations)",
            ),
            ((true, false), s(60), "the leader: every 4 lease durations"),
            ((false, true), s(15), "kept out: every lease duration"),
            (
                (true, true),
                s(15),
                "a leader about to step down for it: the same",
            ),
        ];
        for ((leading, refused), want, why) in cases {
            assert_eq!(reread_after(&t, leading, refused), want, "{why}");
        }
    }

    #[test]
    fn refuse_mode_with_an_evicting_redis_or_allkeys_without_the_cooldown_stays_out() {
        use EvictionMode::*;
        use EvictionRefusal::*;
        let unreadable = Eviction::Unreadable {
            reason: "NOPERM".into(),
        };
        let evicting = read(1 << 30, "allkeys-lru");
        // (mode, what was read, cooldown on) -> stays out, and why
        let cases = [
            (
                Refuse,
                evicting.clone(),
                true,
                Some(Asked),
                "a limit and an evicting policy",
            ),
            (
                Refuse,
                read(1 << 30, "volatile-ttl"),
                true,
                Some(Asked),
                "volatile policies take the lease key too",
            ),
            (
                Refuse,
                read(0, "allkeys-lru"),
                true,
                None,
                "no limit, no eviction",
            ),
            (
                Refuse,
                read(1 << 30, "noeviction"),
                true,
                None,
                "a limit that never evicts",
            ),
            (
                Refuse,
                unreadable.clone(),
                true,
                None,
                "not known to evict: take part",
            ),
            (
                Refuse,
                Eviction::NotRead,
                true,
                None,
                "not read yet: take part",
            ),
            (Warn, evicting.clone(), true, None, "warn mode only says so"),
            (
                Warn,
                unreadable.clone(),
                true,
                None,
                "and stays in whatever was read",
            ),
            (
                Warn,
                evicting.clone(),
                false,
                Some(Unsafe),
                "allkeys without the cooldown is refused in any mode",
            ),
            (
                Refuse,
                evicting,
                false,
                Some(Unsafe),
                "and named for what it is",
            ),
            (
                Warn,
                read(1 << 30, "volatile-lru"),
                false,
                None,
                "volatile policies keep the record",
            ),
            (
                Warn,
                read(0, "allkeys-random"),
                false,
                None,
                "no limit, no eviction",
            ),
            (Warn, unreadable, false, None, "unknown: take part"),
        ];
        for (mode, eviction, cooldown, want, why) in cases {
            assert_eq!(refusal(mode, &eviction, cooldown), want, "{why}");
        }
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
            after: Duration::from_millis(1_000),
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
}
