//! The kinds of fault: their names, their codes on the timeline, the sets each topology
//! draws from, and the bound on recovery after each.

use std::time::Duration;

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

use crate::params::late_delay_max;
use leasehold::elector::Timing;

/// The kinds of fault, in the order of the report.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// SIGSTOP a replica's leasehold past the TTL, then SIGCONT.
    PauseReplica,
    /// SIGSTOP only the leader's child past the TTL, then SIGCONT.
    PauseChild,
    /// SIGKILL a replica, start it again after a while.
    KillReplica,
    /// SIGTERM every replica in turn, starting each again before the next.
    RollingRestart,
    /// SIGKILL Redis, start it again with its data (append-only file, fsync always).
    RedisRestartKept,
    /// SIGKILL Redis, start it again on the same port from an empty directory.
    RedisRestartLost,
    /// Delay a replica's link to Redis.
    LinkDelay,
    /// Reset a replica's connections to Redis, and every new one.
    LinkDrop,
    /// Hold every byte on a replica's link to Redis.
    LinkBlackhole,
    /// SIGSTOP Redis for a moment.
    RedisPause,
    /// Delay every replica's link to Redis.
    SlowRedis,
    /// Redis gets a few MiB of `maxmemory`, an evicting policy and a flood of keys with TTLs.
    Eviction,
    /// The lease key deleted (`DEL`, `FLUSHDB`, `FLUSHALL`) as a follower starts or wakes.
    Vanish,
    /// The leader's link delayed past the call timeout: commands time out and land later.
    LateDelivery,
    /// The leader's command forks a grandchild that calls `setsid` and keeps writing.
    Daemonize,
    /// The leader's command starts a worker in its group that ignores SIGTERM.
    IgnoreSigterm,
    /// One replica's leasehold held to a few percent of a core.
    CpuStarve,
    /// Every leader's command exits at once, again and again.
    FailingWork,
    /// A follower's pub/sub connection blackholed while its command link works.
    DeadSubscription,
    /// Some replicas restarted with half the lease duration, then a data loss just after a
    /// longer-configured replica's term began; then the run's timing again.
    MixedDurations,
    /// The lease key overwritten with a foreign value and no expiry, until `DEL`.
    ForeignLease,
    /// The handover reservation written with a foreign identity and no expiry, until `DEL`.
    ForeignReservation,
    /// Sentinel topology: `SENTINEL FAILOVER` under load.
    SentinelFailover,
    /// Sentinel topology: the first Sentinel accepts connections and never answers, during a
    /// failover.
    MuteSentinel,
    /// Cluster topology: `CLUSTER FAILOVER TAKEOVER` on a replica of the lease slot's master.
    ClusterFailover,
    /// Cluster topology: the lease's slot moved live to another master.
    SlotMigration,
}

/// `a` then `b`, as a constant (the lengths add up, or the constant does not compile).
const fn concat<const A: usize, const B: usize, const N: usize>(
    a: [FaultKind; A],
    b: [FaultKind; B],
) -> [FaultKind; N] {
    assert!(A + B == N, "the lengths of the parts must add up");
    let mut out = [FaultKind::PauseReplica; N];
    let mut i = 0;
    while i < N {
        out[i] = if i < A { a[i] } else { b[i - A] };
        i += 1;
    }
    out
}

impl FaultKind {
    /// The kinds a run on one redis-server draws.
    pub const SINGLE: [FaultKind; 22] = [
        FaultKind::PauseReplica,
        FaultKind::PauseChild,
        FaultKind::KillReplica,
        FaultKind::RollingRestart,
        FaultKind::RedisRestartKept,
        FaultKind::RedisRestartLost,
        FaultKind::LinkDelay,
        FaultKind::LinkDrop,
        FaultKind::LinkBlackhole,
        FaultKind::RedisPause,
        FaultKind::SlowRedis,
        FaultKind::Eviction,
        FaultKind::Vanish,
        FaultKind::LateDelivery,
        FaultKind::Daemonize,
        FaultKind::IgnoreSigterm,
        FaultKind::CpuStarve,
        FaultKind::FailingWork,
        FaultKind::DeadSubscription,
        FaultKind::MixedDurations,
        FaultKind::ForeignLease,
        FaultKind::ForeignReservation,
    ];

    /// The faults of leasehold's processes and their commands, which need no Redis of a
    /// particular shape: every topology draws them.
    const PROCESS: [FaultKind; 8] = [
        FaultKind::PauseReplica,
        FaultKind::PauseChild,
        FaultKind::KillReplica,
        FaultKind::RollingRestart,
        FaultKind::Daemonize,
        FaultKind::IgnoreSigterm,
        FaultKind::CpuStarve,
        FaultKind::FailingWork,
    ];

    /// The Sentinel topology's own faults.
    const SENTINEL_OWN: [FaultKind; 2] = [FaultKind::SentinelFailover, FaultKind::MuteSentinel];

    /// The Cluster topology's own faults.
    const CLUSTER_OWN: [FaultKind; 2] = [FaultKind::ClusterFailover, FaultKind::SlotMigration];

    /// The kinds a Sentinel run draws: the process faults and the Sentinel's own.
    pub const SENTINEL: [FaultKind; 10] = concat(Self::PROCESS, Self::SENTINEL_OWN);

    /// The kinds a Cluster run draws: the process faults and the cluster's own.
    pub const CLUSTER: [FaultKind; 10] = concat(Self::PROCESS, Self::CLUSTER_OWN);

    /// Every kind: the single server's, then the Sentinel's and the cluster's own.
    pub const ALL: [FaultKind; 26] = concat(
        Self::SINGLE,
        concat::<2, 2, 4>(Self::SENTINEL_OWN, Self::CLUSTER_OWN),
    );

    /// The name in reports.
    pub fn label(self) -> &'static str {
        match self {
            FaultKind::PauseReplica => "pause replica (SIGSTOP > TTL)",
            FaultKind::PauseChild => "pause leader's child (SIGSTOP > TTL)",
            FaultKind::KillReplica => "kill replica (SIGKILL, restart)",
            FaultKind::RollingRestart => "rolling restart (SIGTERM each)",
            FaultKind::RedisRestartKept => "redis restart, data kept",
            FaultKind::RedisRestartLost => "redis restart, data gone",
            FaultKind::LinkDelay => "delay one link",
            FaultKind::LinkDrop => "drop one link (reset)",
            FaultKind::LinkBlackhole => "blackhole one link",
            FaultKind::RedisPause => "slow redis (SIGSTOP redis)",
            FaultKind::SlowRedis => "slow redis (delay all links)",
            FaultKind::Eviction => "eviction (maxmemory, key flood)",
            FaultKind::Vanish => "lease vanishes (DEL, FLUSHDB, FLUSHALL)",
            FaultKind::LateDelivery => "late delivery (delay > call timeout)",
            FaultKind::Daemonize => "daemonizing command (setsid grandchild)",
            FaultKind::IgnoreSigterm => "worker ignoring SIGTERM",
            FaultKind::CpuStarve => "CPU starvation of one replica",
            FaultKind::FailingWork => "failing work (command exits at once)",
            FaultKind::DeadSubscription => "dead subscription (pub/sub blackholed)",
            FaultKind::MixedDurations => "mixed lease durations across a data loss",
            FaultKind::ForeignLease => "lease key without TTL (not leasehold's)",
            FaultKind::ForeignReservation => "reservation without TTL (not leasehold's)",
            FaultKind::SentinelFailover => "sentinel failover under load",
            FaultKind::MuteSentinel => "mute sentinel (accepts, never answers) during a failover",
            FaultKind::ClusterFailover => "cluster failover TAKEOVER of the lease slot",
            FaultKind::SlotMigration => "live migration of the lease slot",
        }
    }

    /// A few letters for the timeline.
    pub fn code(self) -> &'static str {
        match self {
            FaultKind::PauseReplica => "STOP",
            FaultKind::PauseChild => "STOPc",
            FaultKind::KillReplica => "KILL",
            FaultKind::RollingRestart => "ROLL",
            FaultKind::RedisRestartKept => "RDk",
            FaultKind::RedisRestartLost => "RD∅",
            FaultKind::LinkDelay => "dly",
            FaultKind::LinkDrop => "drop",
            FaultKind::LinkBlackhole => "hole",
            FaultKind::RedisPause => "Rstop",
            FaultKind::SlowRedis => "Rslow",
            FaultKind::Eviction => "EVICT",
            FaultKind::Vanish => "VANISH",
            FaultKind::LateDelivery => "late",
            FaultKind::Daemonize => "DAEMON",
            FaultKind::IgnoreSigterm => "NOTERM",
            FaultKind::CpuStarve => "CPU",
            FaultKind::FailingWork => "FAIL",
            FaultKind::DeadSubscription => "sub",
            FaultKind::MixedDurations => "MIXED",
            FaultKind::ForeignLease => "NOTTL",
            FaultKind::ForeignReservation => "NOTTLr",
            FaultKind::SentinelFailover => "SFO",
            FaultKind::MuteSentinel => "Smute",
            FaultKind::ClusterFailover => "CFO",
            FaultKind::SlotMigration => "MIG",
        }
    }

    /// Whether the failover is counted from the injection (the fault takes a process away at
    /// once) rather than from the moment the fault was lifted (Redis and link faults, and a
    /// rolling restart, which lasts until its last replica is back).
    pub fn counts_from_injection(self) -> bool {
        matches!(
            self,
            FaultKind::PauseReplica | FaultKind::PauseChild | FaultKind::KillReplica
        )
    }

    /// The longest the configuration allows, after the failover's reference instant, before a
    /// working leader exists again: the TTL plus the retry period, plus one more lease
    /// duration of cooldown after Redis restarted (with or without its data) or lost its data to
    /// `FLUSHALL` (the longest lease duration of the contenders, the run's own).
    pub fn bound(self, timing: &Timing) -> Duration {
        let base = timing.lease_duration + timing.retry_period;
        match self {
            // A lost dataset (or the lease's records evicted or flushed) starts the cooldown.
            FaultKind::RedisRestartKept
            | FaultKind::RedisRestartLost
            | FaultKind::Eviction
            | FaultKind::Vanish
            | FaultKind::MixedDurations
            | FaultKind::SentinelFailover
            | FaultKind::MuteSentinel
            | FaultKind::ClusterFailover
            | FaultKind::SlotMigration => base + timing.lease_duration,
            // A renewal sent before the fault ended lands up to one delay later and keeps the
            // lease for a TTL from then.
            FaultKind::LateDelivery => base + late_delay_max(timing),
            _ => base,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::ValueEnum;

    use super::*;

    #[test]
    fn every_kind_is_in_all_once_in_the_order_of_the_report() {
        assert_eq!(FaultKind::ALL.as_slice(), FaultKind::value_variants());
    }

    #[test]
    fn the_topology_runs_draw_the_process_faults_then_their_own() {
        assert_eq!(FaultKind::SENTINEL[..8], FaultKind::PROCESS);
        assert_eq!(FaultKind::CLUSTER[..8], FaultKind::PROCESS);
        assert_eq!(FaultKind::SENTINEL[8..], FaultKind::SENTINEL_OWN);
        assert_eq!(FaultKind::CLUSTER[8..], FaultKind::CLUSTER_OWN);
        for kind in FaultKind::PROCESS {
            assert!(FaultKind::SINGLE.contains(&kind), "{kind:?}");
        }
    }
}
