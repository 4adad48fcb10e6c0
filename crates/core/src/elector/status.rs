//! What the elector shows the world: its role, who leads, why it last stepped down.

use std::fmt;
use std::time::{Duration, SystemTime};

use super::standing::Gate;
use crate::clock::{BootInstant, WallLead};
use crate::lease::FencingToken;

/// Why a leader stepped down (docs/REFERENCE.md, "Step-down reasons").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepDownReason {
    /// The lease holds another owner id, or is gone (Redis lost it, or it expired).
    Lost,
    /// No renewal succeeded within the renew deadline.
    RenewDeadlinePassed,
    /// Redis refused a renewal for a reason that does not pass by itself; the replica sits out.
    RenewRefused,
    /// The validity deadline passed before a renewal proved the lease still ours.
    ValidityDeadlinePassed,
    /// A deadline passed counting time that the boot clock did not (a VM frozen, migrated).
    Pause,
    /// A renewal's reply showed Redis's clock stepped forward: the lease expired early.
    ClockStep,
    /// The leader's work returned.
    WorkEnded,
    /// The leader's work returned an error.
    WorkFailed,
    /// The leader's work panicked.
    WorkPanicked,
    /// The process is shutting down.
    Shutdown,
    /// A gate keeps this replica out of the election
    /// ([`Elector::with_gate`](super::Elector::with_gate)); the gate's label is the reason's.
    Gate(Gate),
    /// A handover was asked for (`leasehold step-down`, the step-down annotation, or
    /// [`Leadership::hand_over`](super::Leadership::hand_over)).
    Handover,
}

impl StepDownReason {
    /// Every reason the elector gives by itself (a gate's come from its user), for metrics that
    /// want all label values present from the start.
    pub const ALL: [StepDownReason; 11] = [
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
        StepDownReason::Handover,
    ];

    /// A stable snake_case label (metrics, JSON).
    pub fn as_label(self) -> &'static str {
        self.label_and_words().0
    }

    /// The reason's label, and its words for people.
    fn label_and_words(self) -> (&'static str, &'static str) {
        use StepDownReason::*;
        match self {
            Lost => ("lost", "lease lost"),
            RenewDeadlinePassed => ("renew_deadline_passed", "renew deadline passed"),
            RenewRefused => ("renew_refused", "redis refused the renewal"),
            ValidityDeadlinePassed => ("validity_deadline_passed", "validity deadline passed"),
            Pause => (
                "pause",
                "paused longer than the term, unseen by the boot clock",
            ),
            ClockStep => ("clock_step", "redis's clock stepped forward"),
            WorkEnded => ("work_ended", "work ended"),
            WorkFailed => ("work_failed", "work failed"),
            WorkPanicked => ("work_panicked", "work panicked"),
            Shutdown => ("shutdown", "shutdown"),
            Gate(gate) => (gate.label, gate.says),
            Handover => ("handover", "handover"),
        }
    }

    /// Whether the lease may still be ours, so that releasing it is worth a call.
    pub fn may_still_hold(self) -> bool {
        self != StepDownReason::Lost
    }
}

impl fmt::Display for StepDownReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label_and_words().1)
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
        /// The wall clock's lead when the call that set `valid_until` was sent ([`WallLead`]).
        lead: WallLead,
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
    /// Why this replica sits out of the election on its own account, if it does.
    pub sitting_out: Option<SitOut>,
}

/// A replica that keeps itself out of the election for a while, because it could not use a
/// lease it won (docs/DESIGN.md, "Gray failures").
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
    /// Its round trips to Redis take longer than an acquire may; back once one fits again.
    SlowLink,
    /// Redis refused its renewal for a reason that does not pass by itself; out for a back-off.
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

impl Status {
    /// Whether this replica leads *and* its validity deadline
    /// ([`leading_until`](Self::leading_until) under `lead`, read now) has not passed at `now`.
    /// This, not the role alone, is what readiness must report: after a pause the role is still
    /// `Leader` until the watchdog runs.
    pub fn is_leading_at(&self, now: BootInstant, lead: WallLead) -> bool {
        self.leading_until(lead).is_some_and(|until| now < until)
    }

    /// While this replica leads, its validity deadline on the boot clock, moved back by what the
    /// wall clock's lead (`lead`, read now) gained since it was set.
    pub fn leading_until(&self, lead: WallLead) -> Option<BootInstant> {
        match self.role {
            Role::Leader {
                valid_until,
                lead: set,
                ..
            } => Some(valid_until.saturating_sub(lead.gained_since(set))),
            _ => None,
        }
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
