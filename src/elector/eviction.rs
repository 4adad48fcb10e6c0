//! Redis's eviction policy, watched: read at start (once Redis answers) and once per lease
//! duration, so that a Redis
//! whose `maxmemory` policy may evict the lease is said out loud (a log event, a metric, a field
//! in the status), and, with [`EvictionMode::Refuse`], keeps this replica out of the election.
//!
//! The state record keeps eviction safe (a follower refuses a term the record still names, and
//! the holder puts its evicted key back), but under memory pressure every renewal may find the
//! key gone, and an `allkeys-*` policy can take the record too: then only the data-loss cooldown
//! is left. A Redis that holds leases should not evict.

use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::{Eviction, Observer, Status, Timing, decide};
use crate::lease::{EvictionPolicy, RedisLease};

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
    status: watch::Sender<Status>,
    observer: Arc<dyn Observer>,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut said_unreadable = false;
        let mut seen = status.subscribe();
        loop {
            // Only ask a Redis that answers the elector: no extra dials (and no extra failed
            // logins) while it is down or refuses us.
            tokio::select! {
                biased;
                _ = stop.cancelled() => return,
                _ = seen.wait_for(|s| s.redis.reachable) => {}
            }
            let read = tokio::select! {
                biased;
                _ = stop.cancelled() => return,
                r = lease.eviction_policy(timing.call_timeout()) => r,
            };
            let eviction = match read {
                Ok(policy) => {
                    observer.eviction_policy(&policy.policy, policy.may_evict());
                    said_unreadable = false;
                    Eviction::Read(policy)
                }
                Err(err) => {
                    if decide::tells_unreadable(said_unreadable, &err) {
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
            record(&lease, mode, &status, eviction);
            tokio::select! {
                biased;
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(timing.lease_duration) => {}
            }
        }
    })
}

/// Puts what was read into the status, saying so when it changed.
fn record(
    lease: &RedisLease,
    mode: EvictionMode,
    status: &watch::Sender<Status>,
    eviction: Eviction,
) {
    let refused = decide::refuses_for_eviction(mode, &eviction);
    let mut changed_to: Option<Eviction> = None;
    status.send_if_modified(|s| {
        let changed = s.redis.eviction != eviction || s.redis.refused_for_eviction != refused;
        if decide::eviction_news(&s.redis.eviction, &eviction) {
            changed_to = Some(eviction.clone());
        }
        s.redis.eviction = eviction.clone();
        s.redis.refused_for_eviction = refused;
        changed
    });
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
            refuse = refused,
            "redis may evict the lease under memory pressure (maxmemory with an evicting policy); give leases a redis with maxmemory-policy noeviction"
        );
    } else {
        info!(%identity, lease = %name, policy = %policy, maxmemory, "redis does not evict keys");
    }
}
