//! The parameters of the faults that are more than a number: which replica a fault hits, the
//! eviction policy, how the lease vanishes, how a helper's term ends, how Redis loses its data
//! and the shorter timing of a mixed-durations fault, which key of the lease is written without
//! expiry; and the longest late-delivery delay, past leasehold's call timeout.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use leasehold::elector::Timing;

/// Which replica a fault hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// Whoever leads when the fault is injected.
    Leader,
    /// Replica number `n` (from 0), leader or not.
    Replica(usize),
}

/// The `maxmemory-policy` of an eviction fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EvictionPolicy {
    /// Evict the key nearest to its expiry: the lease first.
    VolatileTtl,
    /// Evict the least recently used key that has a TTL.
    VolatileLru,
    /// Evict the least recently used key of all, the lease's records too.
    AllkeysLru,
}

impl EvictionPolicy {
    /// Redis's name for it.
    pub fn redis_name(self) -> &'static str {
        match self {
            EvictionPolicy::VolatileTtl => "volatile-ttl",
            EvictionPolicy::VolatileLru => "volatile-lru",
            EvictionPolicy::AllkeysLru => "allkeys-lru",
        }
    }
}

/// How the lease vanishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VanishHow {
    /// `DEL` of the lease key alone.
    Del,
    /// `FLUSHDB` of the lease's database.
    Flushdb,
    /// `FLUSHALL`.
    Flushall,
}

/// How Redis loses its data in a mixed-durations fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DataLoss {
    /// `FLUSHALL` on the running server.
    Flushall,
    /// SIGKILL, the directory emptied, started again on the same port.
    RestartEmpty,
}

/// Half of `timing`, every part of it: the same ratios, so the same rule holds (lease
/// duration > renew deadline > 1.2 × retry period).
pub fn halved(timing: &Timing) -> Timing {
    Timing {
        lease_duration: timing.lease_duration / 2,
        renew_deadline: timing.renew_deadline / 2,
        retry_period: timing.retry_period / 2,
        ..*timing
    }
}

/// Which key of the lease the nemesis writes without expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForeignKey {
    /// The lease key: it looks held, for ever. The leader's renewal finds another value.
    Lease,
    /// The handover reservation: only the identity it names may acquire. The leader is
    /// SIGTERMed (it releases), so that the lease is free and the reservation is what blocks.
    Reservation,
}

/// How a daemonizing or stubborn command's term is ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TermEnd {
    /// SIGTERM the leader's leasehold (a graceful step-down and exit), then start it again.
    Terminate,
    /// Reset the leader's link past its renew deadline: it steps down and stays up.
    LinkDrop,
}

/// The delays a gray slow link draws: around the acquire bound, from half of it (a round trip
/// that just fits, a new connection's that does not) to twice it.
pub fn gray_delays(timing: &Timing) -> std::ops::RangeInclusive<u64> {
    let acquire = u64::try_from(timing.acquire_timeout().as_millis()).unwrap_or(u64::MAX);
    acquire / 2..=2 * acquire
}

/// The longest delay a gray slow link draws.
pub fn gray_delay_max(timing: &Timing) -> Duration {
    Duration::from_millis(*gray_delays(timing).end())
}

/// The longest delay a late-delivery fault draws.
pub fn late_delay_max(timing: &Timing) -> Duration {
    timing.call_timeout() + Duration::from_millis(1_500)
}
