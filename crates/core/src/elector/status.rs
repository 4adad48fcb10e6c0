//! What the elector shows the world: its role, who leads, why it last stepped down.

use std::fmt;
use std::time::{Duration, SystemTime};

use super::standing::{CANDIDACY, CLOCK_RATE, EVICTION, Gate};
use crate::clock::BootInstant;
use crate::lease::{EvictionPolicy, FencingToken};

/// Why a leader stepped down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepDownReason {
    /// The lease holds another owner id, or is gone (Redis lost it, or it expired).
    Lost,
    /// No renewal succeeded within the renew deadline.
    RenewDeadlinePassed,
    /// Redis refused a renewal for a reason that does not pass by itself (a missing
    /// permission, a replica's READONLY, a wrong key type, out of memory): the term ends at
    /// once, and the replica sits out, backing off, so that a healthy one leads.
    RenewRefused,
    /// The validity deadline passed before a renewal could prove the lease still ours: the
    /// process was paused, or Redis did not answer in time.
    ValidityDeadlinePassed,
    /// The validity deadline passed counting time that the boot clock did not (the wall
    /// clock gained that much on it: a VM frozen, migrated or restored from a snapshot).
    Pause,
    /// A renewal's reply showed Redis's clock stepped forward (further than any slew goes):
    /// the lease expired early by about the step, and another replica may have taken it.
    ClockStep,
    /// The leader's work returned.
    WorkEnded,
    /// The leader's work returned an error.
    WorkFailed,
    /// The leader's work panicked.
    WorkPanicked,
    /// The process is shutting down.
    Shutdown,
    /// A gate keeps this replica out of the election: [`EVICTION`](super::EVICTION) (Redis may
    /// evict the lease and `--redis-eviction refuse` keeps it out), [`CANDIDACY`](super::CANDIDACY)
    /// (the candidate check failed its failure threshold), [`CLOCK_RATE`](super::CLOCK_RATE)
    /// (Redis's clock runs too far off), or one of the elector's user; the gate's label is the
    /// reason's.
    Gate(Gate),
    /// A handover was asked for (`leasehold step-down`, the step-down annotation, or
    /// [`Leadership::hand_over`](super::Leadership::hand_over)).
    Handover,
}

impl StepDownReason {
    /// Every reason the elector gives by itself and through its own gates, for metrics that
    /// want all label values present from the start.
    pub const ALL: [StepDownReason; 14] = [
        StepDownReason::Lost,
        StepDownReason::RenewDeadlinePassed,
        StepDownReason::RenewRefused,
        StepDownReason::ValidityDeadlinePassed,
        StepDownReason::Pause,
        StepDownReason::ClockStep,
        StepDownReason::WorkEnded,
        StepDownReason::WorkFailed,
        StepDownReason::WorkPanicked,
        StepDownReason::Shutdown,
        StepDownReason::Gate(EVICTION),
        StepDownReason::Gate(CANDIDACY),
        StepDownReason::Gate(CLOCK_RATE),
        StepDownReason::Handover,
    ];

    /// A stable snake_case label (metrics, JSON).
    pub fn as_label(self) -> &'static str {
        match self {
            StepDownReason::Lost => "lost",
            StepDownReason::RenewDeadlinePassed => "renew_deadline_passed",
            StepDownReason::RenewRefused => "renew_refused",
            StepDownReason::ValidityDeadlinePassed => "validity_deadline_passed",
            StepDownReason::Pause => "pause",
            StepDownReason::ClockStep => "clock_step",
            StepDownReason::WorkEnded => "work_ended",
            StepDownReason::WorkFailed => "work_failed",
            StepDownReason::WorkPanicked => "work_panicked",
            StepDownReason::Shutdown => "shutdown",
            StepDownReason::Gate(gate) => gate.label,
            StepDownReason::Handover => "handover",
        }
    }

    /// Whether the lease may still be ours, so that releasing it is worth a call.
    pub fn may_still_hold(self) -> bool {
        self != StepDownReason::Lost
    }
}

impl fmt::Display for StepDownReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StepDownReason::Lost => "lease lost",
            StepDownReason::RenewDeadlinePassed => "renew deadline passed",
            StepDownReason::RenewRefused => "redis refused the renewal",
            StepDownReason::ValidityDeadlinePassed => "validity deadline passed",
            StepDownReason::Pause => "paused longer than the term, unseen by the boot clock",
            StepDownReason::ClockStep => "redis's clock stepped forward",
            StepDownReason::WorkEnded => "work ended",
            StepDownReason::WorkFailed => "work failed",
            StepDownReason::WorkPanicked => "work panicked",
            StepDownReason::Shutdown => "shutdown",
            StepDownReason::Gate(gate) => gate.says,
            StepDownReason::Handover => "handover",
        })
    }
}

/// The last step-down of this replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepDown {
    /// Why.
    pub reason: StepDownReason,
    /// More words: the work's error, the panic message, the Redis error.
    pub detail: Option<String>,
    /// The token of the leadership that ended.
    pub token: FencingToken,
    /// When, on the wall clock (for display only).
    pub at: SystemTime,
}

/// The current leader as a follower sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderInfo {
    /// Owner id.
    pub owner: String,
    /// Identity part of the owner id.
    pub identity: String,
    /// Its fencing token, when known.
    pub token: Option<FencingToken>,
}

/// The role of this replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Not yet heard from Redis.
    Starting,
    /// Someone else leads, or nobody does.
    Follower {
        /// The leader seen at the last look, if any.
        leader: Option<LeaderInfo>,
        /// Time left in a data-loss cooldown seen at the last look.
        cooldown: Option<Duration>,
    },
    /// This replica leads.
    Leader {
        /// The fencing token of this leadership.
        token: FencingToken,
        /// Wall-clock time of the acquire (display only).
        acquired_at: SystemTime,
        /// The validity deadline as of the last renewal.
        valid_until: BootInstant,
    },
    /// The elector has stopped.
    Stopped,
}

/// Redis as the elector last found it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RedisHealth {
    /// Whether the last call got an answer.
    pub reachable: bool,
    /// The last error, if the last call failed.
    pub last_error: Option<String>,
    /// Whether the release channel is subscribed.
    pub subscribed: bool,
    /// Redis's eviction policy, as last read.
    pub eviction: Eviction,
    /// Why this replica stays out of the election for Redis's eviction policy, if it does:
    /// until that changes.
    pub eviction_refusal: Option<EvictionRefusal>,
    /// A key that leasehold did not write, and that never expires, blocks the lease.
    pub blocked: Option<Blocked>,
    /// The lease's keys are written in a higher protocol than this release speaks: this
    /// replica stays out of the election until they are not.
    pub newer_protocol: Option<crate::lease::Protocol>,
}

/// A key of the lease that holds a value without an expiry, which leasehold never writes: the
/// seed's lock entry that "just sits there, forever". leasehold does not take it over (it
/// cannot tell a stray write from someone else's lock); it says so until someone deletes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    /// Which key of the lease.
    pub which: BlockingKey,
    /// The key's name.
    pub key: String,
    /// What it holds.
    pub value: String,
}

/// The keys of a lease that can block it when they never expire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockingKey {
    /// The lease key: it looks held, for ever.
    Lease,
    /// The handover reservation: only the identity it names may acquire, for ever.
    Reservation,
}

impl BlockingKey {
    /// Both, for metrics that want every label value present from the start.
    pub const ALL: [BlockingKey; 2] = [BlockingKey::Lease, BlockingKey::Reservation];

    /// A stable label (JSON, metrics): `lease` or `reservation`.
    pub fn as_label(self) -> &'static str {
        match self {
            BlockingKey::Lease => "lease",
            BlockingKey::Reservation => "reservation",
        }
    }
}

/// Why Redis's eviction policy keeps a replica out of the election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictionRefusal {
    /// Redis may evict the lease and `--redis-eviction refuse` asked to stay out then.
    Asked,
    /// Redis evicts keys without a TTL (`allkeys-*`), which takes the state record, and the
    /// data-loss cooldown is off: nothing then keeps a new leader from overlapping the old one.
    /// Known to make two leaders, so refused whatever the eviction mode.
    Unsafe,
}

/// What leasehold knows of Redis's eviction policy (`INFO memory`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Eviction {
    /// Not read yet.
    #[default]
    NotRead,
    /// Redis would not say (an ACL without `+info|memory`, an error).
    Unreadable {
        /// Why.
        reason: String,
    },
    /// As Redis said.
    Read(EvictionPolicy),
}

impl Eviction {
    /// Whether Redis is known to be able to evict the lease.
    pub fn may_evict(&self) -> bool {
        matches!(self, Eviction::Read(p) if p.may_evict())
    }
}

/// Everything the elector shows. Read it through [`Elector::status`](super::Elector::status).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The lease name.
    pub lease: String,
    /// Our identity.
    pub identity: String,
    /// Our owner id.
    pub owner: String,
    /// Our role.
    pub role: Role,
    /// How many times this replica became leader or stepped down.
    pub transitions: u64,
    /// The last step-down, if any.
    pub last_step_down: Option<StepDown>,
    /// Redis health.
    pub redis: RedisHealth,
    /// What the candidate check says (always [`Candidacy::Unchecked`] without one).
    pub candidacy: Candidacy,
    /// Why this replica sits out of the election on its own account, if it does: its link to
    /// Redis is too slow to keep a lease, or Redis refused its renewal (docs/DESIGN.md, point 18).
    pub sitting_out: Option<SitOut>,
}

/// A replica that keeps itself out of the election for a while, because it could not use a
/// lease it won: it says why, and comes back by itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SitOut {
    /// Why.
    pub reason: SitOutReason,
    /// What was seen, in words (the round trip and its bound, Redis's refusal).
    pub detail: String,
}

/// Why a replica sits out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SitOutReason {
    /// Its round trips to Redis take longer than an acquire may: a lease it won could not be
    /// kept (or even learnt of). It comes back once a round trip fits again.
    SlowLink,
    /// Redis refused its renewal for a reason that does not pass by itself: it waits out its
    /// back-off (doubling from the retry period to 30 s) before it contends again.
    RenewRefused,
}

impl SitOutReason {
    /// Both, for metrics that want every label value present from the start.
    pub const ALL: [SitOutReason; 2] = [SitOutReason::SlowLink, SitOutReason::RenewRefused];

    /// A stable label (JSON, metrics): `slow_link` or `renew_refused`.
    pub fn as_label(self) -> &'static str {
        match self {
            SitOutReason::SlowLink => "slow_link",
            SitOutReason::RenewRefused => "renew_refused",
        }
    }
}

/// Whether this replica may stand for election, as its candidate check says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Candidacy {
    /// No candidate check, or the check is not judged now (a command's start-up grace, or a
    /// follower whose check is on the command it does not run).
    #[default]
    Unchecked,
    /// The check passed its success threshold.
    Healthy,
    /// Not judged yet (the initial delay, or fewer successes than the success threshold):
    /// out of the election until then.
    Pending {
        /// Why, in words.
        reason: String,
    },
    /// The check failed its failure threshold in a row: out of the election (a leader steps
    /// down) until it passes its success threshold again.
    Unhealthy {
        /// The last failure, in words.
        reason: String,
    },
}

impl Candidacy {
    /// Whether this replica may contend for (and keep) the lease.
    pub fn stands(&self) -> bool {
        matches!(self, Candidacy::Unchecked | Candidacy::Healthy)
    }

    /// A stable label (JSON).
    pub fn as_label(&self) -> &'static str {
        match self {
            Candidacy::Unchecked => "unchecked",
            Candidacy::Healthy => "healthy",
            Candidacy::Pending { .. } => "pending",
            Candidacy::Unhealthy { .. } => "unhealthy",
        }
    }

    /// The words of a check that keeps this replica out, if it does.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Candidacy::Pending { reason } | Candidacy::Unhealthy { reason } => Some(reason),
            _ => None,
        }
    }
}

impl Status {
    /// Whether this replica leads *and* its validity deadline has not passed at `now`. This,
    /// not the role alone, is what readiness must report: after a pause the role is still
    /// `Leader` until the watchdog runs, but the deadline has passed.
    pub fn is_leading_at(&self, now: BootInstant) -> bool {
        matches!(self.role, Role::Leader { valid_until, .. } if now < valid_until)
    }

    /// The identity of the leader as far as this replica knows.
    pub fn leader_identity(&self) -> Option<&str> {
        match &self.role {
            Role::Leader { .. } => Some(&self.identity),
            Role::Follower {
                leader: Some(l), ..
            } => Some(&l.identity),
            _ => None,
        }
    }

    /// The fencing token of the current leadership as far as this replica knows.
    pub fn token(&self) -> Option<FencingToken> {
        match &self.role {
            Role::Leader { token, .. } => Some(*token),
            Role::Follower {
                leader: Some(l), ..
            } => l.token,
            _ => None,
        }
    }
}
