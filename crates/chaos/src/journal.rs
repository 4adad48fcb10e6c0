//! The nemesis's journal: every fault as it happened, and every stretch of time in which
//! something (a replica, its command, Redis, a link) was impaired.

use serde::{Deserialize, Serialize};

use crate::schedule::{FaultKind, FaultSpec};
use crate::time::Micros;

/// A fault as it happened.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FaultRecord {
    /// Its place in the schedule.
    pub index: usize,
    /// What was planned.
    pub spec: FaultSpec,
    /// The replica it hit, if it hit one.
    pub target: Option<usize>,
    /// Whether that replica led when it was hit.
    pub target_led: bool,
    /// The leader (replica, token) just before the injection.
    pub leader_before: Option<(usize, u64)>,
    /// When it was injected.
    pub inject: Micros,
    /// When it was lifted (the process continued or was back, Redis was back, the link
    /// passed again).
    pub clear: Micros,
    /// Whether it was skipped (nothing to hit), and why.
    pub skipped: Option<String>,
    /// What the fault did, in words (keys evicted, the helper's pid, how CPU was starved).
    #[serde(default)]
    pub detail: Option<String>,
    /// For a key leasehold did not write: how many replicas said it blocks the lease, of how
    /// many.
    #[serde(default)]
    pub said: Option<(usize, usize)>,
}

impl FaultRecord {
    /// Its kind.
    pub fn kind(&self) -> FaultKind {
        self.spec.kind()
    }
}

/// What impaired something for a while.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Impairment {
    /// A replica's leasehold SIGSTOPped.
    Paused,
    /// A leader's command SIGSTOPped.
    CommandPaused,
    /// A replica SIGKILLed, until started again.
    Killed,
    /// A replica SIGTERMed, until started again.
    Terminated,
    /// Redis killed, until started again with its data.
    RedisDownKept,
    /// Redis killed, until started again from an empty directory.
    RedisDownLost,
    /// Redis SIGSTOPped.
    RedisPaused,
    /// Every link delayed.
    RedisSlow,
    /// One link delayed.
    LinkDelay,
    /// One link reset.
    LinkDrop,
    /// One link blackholed.
    LinkBlackhole,
    /// Redis under a small maxmemory with an evicting policy.
    Evicting,
    /// The lease deleted or flushed (an instant).
    Vanished,
    /// One link (or one connection) delayed past the call timeout.
    LateLink,
    /// A replica's leasehold held to a CPU quota (or crowded by busy loops).
    Starved,
    /// Every command told to exit at once.
    FailingWork,
    /// A follower's pub/sub connection blackholed.
    DeadSubscription,
    /// A Sentinel or Cluster failover, or a slot migration, under way.
    Failover,
    /// A key of the lease without expiry that leasehold did not write, until deleted.
    ForeignKey,
    /// Gray: one link's requests delayed.
    SlowRequests,
    /// Gray: one link's replies delayed.
    SlowReplies,
    /// Gray: one link's replies reset (the commands run).
    ResetReplies,
    /// Gray: one replica connected as an ACL user without `+pexpire`.
    NoPermission,
}

impl Impairment {
    /// In a few words.
    pub fn label(self) -> &'static str {
        match self {
            Impairment::Paused => "leasehold paused (SIGSTOP)",
            Impairment::CommandPaused => "command paused (SIGSTOP)",
            Impairment::Killed => "killed (SIGKILL)",
            Impairment::Terminated => "terminated (SIGTERM)",
            Impairment::RedisDownKept => "redis down, data kept",
            Impairment::RedisDownLost => "redis down, data gone",
            Impairment::RedisPaused => "redis paused (SIGSTOP)",
            Impairment::RedisSlow => "every link delayed",
            Impairment::LinkDelay => "link delayed",
            Impairment::LinkDrop => "link dropped (reset)",
            Impairment::LinkBlackhole => "link blackholed",
            Impairment::Evicting => "redis evicting",
            Impairment::Vanished => "lease deleted or flushed",
            Impairment::LateLink => "link delayed past the call timeout",
            Impairment::Starved => "leasehold starved of CPU",
            Impairment::FailingWork => "commands exit at once",
            Impairment::DeadSubscription => "subscription blackholed",
            Impairment::Failover => "failover or slot migration",
            Impairment::ForeignKey => "a key of the lease without TTL, not leasehold's",
            Impairment::SlowRequests => "requests delayed (gray)",
            Impairment::SlowReplies => "replies delayed (gray)",
            Impairment::ResetReplies => "replies reset (gray)",
            Impairment::NoPermission => "ACL user without +pexpire (gray)",
        }
    }
}

/// A stretch of time something was impaired.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Span {
    /// The replica, or `None` for Redis or every link.
    pub replica: Option<usize>,
    /// Which process of the replica.
    pub incarnation: usize,
    /// Start.
    pub from: Micros,
    /// End.
    pub to: Micros,
    /// What it was, in a word.
    pub what: Impairment,
}

/// Everything the nemesis did.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Journal {
    /// The faults.
    pub faults: Vec<FaultRecord>,
    /// A replica's leasehold stopped (SIGSTOP to SIGCONT).
    pub pauses: Vec<Span>,
    /// A leader's command stopped.
    pub child_pauses: Vec<Span>,
    /// A replica's process gone (SIGKILL or SIGTERM until it was started again).
    pub downs: Vec<Span>,
    /// Redis down, paused or slow (`replica` is `None`).
    pub redis: Vec<Span>,
    /// A link fault on one replica (or on every one: `replica` is `None`).
    pub links: Vec<Span>,
    /// A replica's leasehold starved of CPU.
    #[serde(default)]
    pub starved: Vec<Span>,
    /// The other faults: eviction, vanish, failing work, a data loss among mixed durations, a
    /// foreign key (`replica` is `None`), a dead subscription (the follower's).
    #[serde(default)]
    pub other: Vec<Span>,
    /// When the first fault was injected.
    pub first_fault: Micros,
    /// When the schedule ended (before the final shutdown).
    pub end: Micros,
    /// Things that did not go to plan (no leader before a fault, a target missing).
    pub notes: Vec<String>,
}
