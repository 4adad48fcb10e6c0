//! The faults, declared once with their parameters: their kinds, their names, their codes on
//! the timeline, the sets each topology draws from, and the bound on recovery after each.

use std::time::Duration;

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

use crate::params::{
    DataLoss, EvictionPolicy, Target, TermEnd, VanishHow, gray_delay_max, late_delay_max,
};
use leasehold::elector::Timing;

/// Declares the faults once, as a list of kinds with their parameters: [`FaultSpec`] (a fault
/// and its parameters), [`FaultKind`] (the same names without them) and
/// [`FaultSpec::kind`], which maps one to the other.
macro_rules! faults {
    ($($(#[$doc:meta])* $kind:ident { $($field:ident: $ty:ty),* $(,)? },)*) => {
        /// One fault and its parameters (durations in milliseconds).
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(tag = "kind", rename_all = "kebab-case")]
        pub enum FaultSpec {
            $($(#[$doc])* $kind { $($field: $ty),* },)*
        }

        /// The kinds of fault, in the order of the report.
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
            ValueEnum,
        )]
        #[serde(rename_all = "kebab-case")]
        pub enum FaultKind {
            $($(#[$doc])* $kind,)*
        }

        impl FaultSpec {
            /// Its kind.
            pub fn kind(&self) -> FaultKind {
                match self {
                    $(FaultSpec::$kind { .. } => FaultKind::$kind,)*
                }
            }
        }
    };
}

faults! {
    /// SIGSTOP a replica's leasehold for `pause_ms`, then SIGCONT.
    PauseReplica { target: Target, pause_ms: u64 },
    /// SIGSTOP the leader's child for `pause_ms`, then SIGCONT.
    PauseChild { pause_ms: u64 },
    /// SIGKILL a replica and start it again `down_ms` later.
    KillReplica { target: Target, down_ms: u64 },
    /// SIGTERM each replica in turn, start it again, wait `gap_ms`, next.
    RollingRestart { gap_ms: u64 },
    /// SIGKILL Redis, start it again `down_ms` later, with its data.
    RedisRestartKept { down_ms: u64 },
    /// SIGKILL Redis, start it again `down_ms` later from an empty directory.
    RedisRestartLost { down_ms: u64 },
    /// Delay a replica's link by `delay_ms` each way for `hold_ms`.
    LinkDelay { target: Target, delay_ms: u64, hold_ms: u64 },
    /// Reset a replica's link for `hold_ms`.
    LinkDrop { target: Target, hold_ms: u64 },
    /// Blackhole a replica's link for `hold_ms`.
    LinkBlackhole { target: Target, hold_ms: u64 },
    /// SIGSTOP Redis for `pause_ms`.
    RedisPause { pause_ms: u64 },
    /// Delay every link by `delay_ms` each way for `hold_ms`.
    SlowRedis { delay_ms: u64, hold_ms: u64 },
    /// Set `maxmemory` a few MiB above what Redis uses, switch to `policy`, write `flood_keys`
    /// keys of 1 KiB with TTLs, hold, then delete them and go back to `noeviction`.
    Eviction { policy: EvictionPolicy, flood_keys: u32, hold_ms: u64 },
    /// Make the lease vanish `how`, while a follower starts (after a SIGKILL `down_ms` long)
    /// or wakes (after a SIGSTOP `down_ms` long) at the same moment.
    Vanish { how: VanishHow, follower: Target, wakes: bool, down_ms: u64 },
    /// Delay the leader's link (or only one of its connections) by `delay_ms`, longer than
    /// the call timeout, for `hold_ms`.
    LateDelivery { delay_ms: u64, hold_ms: u64, one_connection: bool },
    /// Tell the leader's command to fork a `setsid` grandchild that writes on; after
    /// `hold_ms` end the term `end`.
    Daemonize { hold_ms: u64, end: TermEnd },
    /// Tell the leader's command to start a worker that ignores SIGTERM; after `hold_ms` end
    /// the term `end`.
    IgnoreSigterm { hold_ms: u64, end: TermEnd },
    /// Hold a replica's leasehold to `quota_pct` % of a core for `hold_ms`.
    CpuStarve { target: Target, quota_pct: u64, hold_ms: u64 },
    /// Every leader's command exits at once with code 1 for `hold_ms`.
    FailingWork { hold_ms: u64 },
    /// Blackhole a follower's pub/sub connection for `hold_ms`; the leader is SIGTERMed
    /// (it releases and announces it) `release_after_ms` into the fault.
    DeadSubscription { follower: Target, hold_ms: u64, release_after_ms: u64 },
    /// Restart `short` replicas from replica `first` on (the next ones after it, leader or
    /// not) with half the run's timing, hand the lease to a replica of the run's timing
    /// (`leasehold step-down --to`), make Redis lose its data `after_ms` into that term
    /// (`loss`, down `down_ms` for a restart), wait for a leader, give the replicas their
    /// timing back.
    MixedDurations { short: usize, first: usize, loss: DataLoss, after_ms: u64, down_ms: u64 },
    /// `SET` the lease key to a foreign value without expiry; once every replica said so, and
    /// `hold_ms` more, `DEL` it.
    ForeignLease { hold_ms: u64 },
    /// `SET` the handover reservation to a foreign identity without expiry and SIGTERM the
    /// leader (it releases); once every replica said so, and `hold_ms` more, `DEL` it.
    ForeignReservation { hold_ms: u64 },
    /// Gray: delay every request of a replica's link by `delay_ms` (replies pass at once) for
    /// `hold_ms`; `leave_after_ms` into it, a healthy leader leaves (SIGTERM, started again).
    GraySlowRequests { target: Target, delay_ms: u64, hold_ms: u64, leave_after_ms: u64 },
    /// Gray: delay every reply on a replica's link by `delay_ms` (requests pass at once) for
    /// `hold_ms`; a healthy leader leaves `leave_after_ms` into it.
    GraySlowReplies { target: Target, delay_ms: u64, hold_ms: u64, leave_after_ms: u64 },
    /// Gray: reset a replica's link instead of delivering a reply (every command runs) for
    /// `hold_ms`; a healthy leader leaves `leave_after_ms` into it.
    GrayResetReplies { target: Target, hold_ms: u64, leave_after_ms: u64 },
    /// Gray: restart a replica as an ACL user without `+pexpire` (its renewals are refused
    /// with NOPERM) for `hold_ms`; a healthy leader leaves `leave_after_ms` into it.
    GrayNoPermission { target: Target, hold_ms: u64, leave_after_ms: u64 },
    /// Gray: hold a replica's leasehold to `quota_pct` % of a core for `hold_ms`; a healthy
    /// leader leaves `leave_after_ms` into it.
    GrayStarved { target: Target, quota_pct: u64, hold_ms: u64, leave_after_ms: u64 },
    /// Ask Sentinel `via` (1 or 2) for a failover, wait until it is done.
    SentinelFailover { via: usize },
    /// Blackhole the first Sentinel for `hold_ms`, with a failover through Sentinel 1 at its
    /// start.
    MuteSentinel { hold_ms: u64 },
    /// `CLUSTER FAILOVER TAKEOVER` on the lease slot master's replica.
    ClusterFailover { settle_ms: u64 },
    /// Move the lease's slot to another master.
    SlotMigration { settle_ms: u64 },
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
    /// The whole faults a run on one redis-server draws (and the short run in the suite).
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

    /// The gray faults: one replica partly sick for several lease durations (docs/DESIGN.md,
    /// "Gray failures"), on a single server, where each replica has a link of its own.
    pub const GRAY: [FaultKind; 5] = [
        FaultKind::GraySlowRequests,
        FaultKind::GraySlowReplies,
        FaultKind::GrayResetReplies,
        FaultKind::GrayNoPermission,
        FaultKind::GrayStarved,
    ];

    /// The kinds a run on one redis-server draws: the whole faults, then the gray ones.
    pub const SINGLE_GRAY: [FaultKind; 27] = concat(Self::SINGLE, Self::GRAY);

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
    pub const ALL: [FaultKind; 31] = concat(
        Self::SINGLE_GRAY,
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
            FaultKind::GraySlowRequests => "gray: one replica's requests slow",
            FaultKind::GraySlowReplies => "gray: one replica's replies slow",
            FaultKind::GrayResetReplies => "gray: one replica's replies reset",
            FaultKind::GrayNoPermission => "gray: one replica without +pexpire (ACL)",
            FaultKind::GrayStarved => "gray: one replica starved of CPU",
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
            FaultKind::GraySlowRequests => "gREQ",
            FaultKind::GraySlowReplies => "gREP",
            FaultKind::GrayResetReplies => "gRST",
            FaultKind::GrayNoPermission => "gACL",
            FaultKind::GrayStarved => "gCPU",
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

    /// Whether it is a gray fault ([`FaultKind::GRAY`]).
    pub fn is_gray(self) -> bool {
        Self::GRAY.contains(&self)
    }

    /// For a gray fault, the longest a stretch without a working leader may last during it
    /// (from the moment the last working leader's term ended to the next working leader): one
    /// lease duration for a lease that became unusable to run out in Redis (its holder's last
    /// renewal may have extended it just before; on a slow request leg that renewal lands up to
    /// the fault's delay later), then the two lease durations within which a healthy replica
    /// leads once the lease is free (docs/DESIGN.md, "Gray failures"). `None` for the whole faults,
    /// whose recovery [`bound`](Self::bound) says the same.
    pub fn leaderless_bound(self, timing: &Timing) -> Option<Duration> {
        let free_and_led = 3 * timing.lease_duration;
        match self {
            FaultKind::GraySlowRequests | FaultKind::GraySlowReplies => {
                Some(free_and_led + gray_delay_max(timing))
            }
            kind if kind.is_gray() => Some(free_and_led),
            _ => None,
        }
    }
}

/// The terms a gray fault may begin, from its injection to the recovery after it: the sick
/// leader's successor, the successor of the healthy leader that leaves during the fault, and one
/// term of the sick replica itself (a replica refused its renewals, or starved, may win once
/// before it backs off). Every further term is churn the fault caused.
pub const GRAY_TERMS: usize = 3;

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
