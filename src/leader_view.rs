//! The JSON of `/leader`: one view of the elector's status, served by `/leader` and streamed by
//! its event stream, both live. The status file, read later, keeps a document of its own built
//! from it (`status_file::document`).

use serde::Serialize;

use crate::board::Shown;
use crate::clock_watch::{RedisClockView, rfc3339};
use crate::elector::Role;
use crate::eviction::Eviction;
use crate::lease::Protocol;

/// The JSON of `/leader`.
#[derive(Debug, Serialize)]
pub struct LeaderView {
    /// This replica.
    pub identity: String,
    /// The lease name.
    pub lease: String,
    /// The lease's Redis key.
    pub lease_key: String,
    /// `starting`, `follower`, `leader` or `stopped`.
    pub role: &'static str,
    /// Whether this replica leads and its validity deadline has not passed.
    pub is_leader: bool,
    /// The leader's identity as far as this replica knows.
    pub leader: Option<String>,
    /// The fencing token of the current leadership as far as this replica knows.
    pub token: Option<u64>,
    /// Milliseconds left before the validity deadline (leader only).
    pub valid_for_ms: Option<u64>,
    /// What it has seen and says of itself.
    #[serde(flatten)]
    pub account: Account,
}

/// What `/leader` and the status file both say of a replica beside its role: its cooldown,
/// its terms, Redis as it last saw it, and what keeps it out of the election.
#[derive(Debug, Serialize)]
pub struct Account {
    /// Milliseconds left in a data-loss cooldown seen at the last look (a follower only).
    pub cooldown_ms: Option<u64>,
    /// Times this replica became leader or stepped down.
    pub transitions: u64,
    /// The last step-down.
    pub last_step_down: Option<StepDownView>,
    /// Redis as last seen.
    pub redis: RedisView,
    /// What the candidate check says.
    pub candidacy: CandidacyView,
    /// Why this replica sits out of the election on its own account, if it does.
    pub sitting_out: Option<SitOutView>,
    /// The rate of Redis's clock that this replica's last term measured (a follower keeps its
    /// last term's); `null` until one of its terms had two renewals.
    pub redis_clock: Option<RedisClockView>,
}

/// A replica sitting out, in `/leader`.
#[derive(Debug, Serialize)]
pub struct SitOutView {
    /// `slow_link` (its round trips to Redis do not fit a lease) or `renew_refused` (Redis
    /// refused its renewal; it backs off).
    pub reason: &'static str,
    /// What was seen, in words.
    pub detail: String,
}

/// The candidate check in `/leader`.
#[derive(Debug, Serialize)]
pub struct CandidacyView {
    /// `unchecked` (no check, or not judged now), `healthy`, `pending` or `unhealthy`.
    pub state: &'static str,
    /// Whether this replica stands for election.
    pub stands: bool,
    /// Why it does not, if it does not.
    pub reason: Option<String>,
}

/// A step-down in `/leader`.
#[derive(Debug, Serialize)]
pub struct StepDownView {
    /// The step-down reason's label, one of
    /// [`StepDownReason::ALL`](crate::elector::StepDownReason::ALL) (docs/REFERENCE.md lists them).
    pub reason: &'static str,
    /// More words, if any.
    pub detail: Option<String>,
    /// The token of the term that ended.
    pub token: u64,
    /// RFC 3339 time.
    pub at: String,
}

/// Redis health in `/leader`.
#[derive(Debug, Serialize)]
pub struct RedisView {
    /// The last call got an answer.
    pub reachable: bool,
    /// The release channel is subscribed.
    pub subscribed: bool,
    /// The last error, if the last call failed.
    pub last_error: Option<String>,
    /// Redis's eviction policy, when it could be read.
    pub eviction: Option<EvictionView>,
    /// A key that leasehold did not write and that never expires, keeping everyone from
    /// leading.
    pub blocked: Option<BlockedView>,
    /// The lease's keys are written in a higher protocol than this replica speaks: it stays
    /// out of the election.
    pub newer_protocol: Option<ProtocolView>,
}

/// The protocol a lease's keys are written in (`/leader`, `leasehold status`).
#[derive(Debug, Serialize)]
pub struct ProtocolView {
    /// The protocol's version; null for a value that cannot be read.
    pub version: Option<u32>,
    /// The leasehold release that last won a term under it.
    pub release: String,
}

impl From<&Protocol> for ProtocolView {
    fn from(p: &Protocol) -> Self {
        Self {
            version: p.version,
            release: p.release.clone(),
        }
    }
}

/// A key that blocks the lease, in `/leader`.
#[derive(Debug, Serialize)]
pub struct BlockedView {
    /// `lease` (the lease key) or `reservation` (the handover reservation).
    pub what: &'static str,
    /// The key.
    pub key: String,
    /// What it holds.
    pub value: String,
    /// The Redis command that clears it, once you know nobody relies on it.
    pub clear: String,
}

/// Redis's eviction policy in `/leader`.
#[derive(Debug, Serialize)]
pub struct EvictionView {
    /// `maxmemory_policy` (`noeviction`, `volatile-lru`, …).
    pub policy: String,
    /// `maxmemory` in bytes (0: no limit).
    pub maxmemory: u64,
    /// Whether Redis may evict the lease.
    pub may_evict: bool,
    /// Whether `--redis-eviction refuse` keeps this replica out of the election for it.
    pub refused: bool,
}

impl LeaderView {
    /// The view of `status` at `now` (with `lead`, the wall clock's lead now), with the rate of
    /// Redis's clock last measured.
    pub fn of(
        status: &Shown,
        lease_key: &str,
        now: crate::clock::BootInstant,
        lead: crate::clock::WallLead,
        redis_clock: Option<RedisClockView>,
    ) -> Self {
        let until = status.leading_until(lead);
        let leading = until.is_some_and(|until| now < until);
        let (role, valid_for_ms, cooldown_ms) = match (&status.role, until) {
            (Role::Starting, _) => ("starting", None, None),
            (Role::Follower { .. }, _) => (
                "follower",
                None,
                status.cooldown_left(now).map(|c| c.as_millis() as u64),
            ),
            (Role::Leader { .. }, until) => (
                "leader",
                until.map(|until| now.until(until).as_millis() as u64),
                None,
            ),
            (Role::Stopped, _) => ("stopped", None, None),
        };
        Self {
            identity: status.identity.clone(),
            lease: status.lease.clone(),
            lease_key: lease_key.to_owned(),
            role,
            is_leader: leading,
            leader: status.leader_identity().map(str::to_owned),
            token: status.token().map(|t| t.0),
            valid_for_ms,
            account: Account::of(status, cooldown_ms, redis_clock),
        }
    }
}

impl Account {
    fn of(status: &Shown, cooldown_ms: Option<u64>, redis_clock: Option<RedisClockView>) -> Self {
        Self {
            cooldown_ms,
            transitions: status.transitions,
            last_step_down: status.last_step_down.as_ref().map(|s| StepDownView {
                reason: s.reason.as_label(),
                detail: s.detail.clone(),
                token: s.token.0,
                at: rfc3339(s.at),
            }),
            redis: RedisView {
                reachable: status.redis.reachable,
                subscribed: status.redis.subscribed,
                last_error: status.redis.last_error.clone(),
                eviction: match &status.eviction {
                    Eviction::Read(p) => Some(EvictionView {
                        policy: p.policy.clone(),
                        maxmemory: p.maxmemory,
                        may_evict: p.may_evict(),
                        refused: status.eviction_refusal.is_some(),
                    }),
                    _ => None,
                },
                blocked: status.blocked.as_ref().map(|b| BlockedView {
                    what: b.which.as_label(),
                    key: b.key.clone(),
                    value: b.value.clone(),
                    clear: format!("DEL {}", b.key),
                }),
                newer_protocol: status.newer_protocol.as_ref().map(ProtocolView::from),
            },
            candidacy: CandidacyView {
                state: status.candidacy.as_label(),
                stands: status.candidacy.stands(),
                reason: status.candidacy.reason().map(str::to_owned),
            },
            sitting_out: status.sitting_out.as_ref().map(|out| SitOutView {
                reason: out.reason.as_label(),
                detail: out.detail.clone(),
            }),
            redis_clock,
        }
    }
}
