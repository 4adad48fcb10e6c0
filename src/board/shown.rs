//! What a replica shows: the elector's status, and what the parts outside the core add to it
//! (the candidate check's verdict, Redis's eviction policy as read, what the notices found).

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::time::Duration;

use crate::clock::BootInstant;
use crate::elector::{RedisHealth, Role, Status};
use crate::eviction_policy::EvictionPolicy;
use crate::lease::Protocol;

/// The elector's status and what the gates outside the core add. Reads as the status it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    /// The elector's status.
    pub status: Status,
    /// What the candidate check says (always [`Candidacy::Unchecked`] without one).
    pub candidacy: Candidacy,
    /// Redis's eviction policy, as last read.
    pub eviction: Eviction,
    /// Why this replica stays out of the election for Redis's eviction policy, if it does:
    /// until that changes.
    pub eviction_refusal: Option<EvictionRefusal>,
    /// A key that leasehold did not write, and that never expires, blocks the lease.
    pub blocked: Option<Blocked>,
    /// The lease's keys are written in a higher protocol than this release speaks: this
    /// replica stays out of the election until they are not.
    pub newer_protocol: Option<Protocol>,
    /// What the eviction policy's last read heard of Redis (answered, the error) while a gate
    /// keeps this replica out: its elector sends nothing then, so this stands over its word.
    pub heard_while_out: Option<(bool, Option<String>)>,
    /// What the elector last said of Redis, shown again once nothing heard while out stands.
    pub elector_redis: RedisHealth,
    /// When the data-loss cooldown in the role ends on the boot clock, reckoned as the role was
    /// told from the time left then: the follower looks again only once it is over.
    pub cooldown_until: Option<BootInstant>,
}

impl Shown {
    /// A status with nothing added yet.
    pub fn of(status: Status) -> Self {
        Self {
            elector_redis: status.redis.clone(),
            cooldown_until: cooldown_end(&status.role),
            status,
            candidacy: Candidacy::Unchecked,
            eviction: Eviction::NotRead,
            eviction_refusal: None,
            blocked: None,
            newer_protocol: None,
            heard_while_out: None,
        }
    }

    /// Takes `status`, the elector's new one.
    pub fn told(&mut self, status: &Status) {
        let reckon = self.status.role != status.role;
        self.status.clone_from(status);
        if reckon {
            self.reckon_cooldown();
        }
        self.elector_redis.clone_from(&status.redis);
        self.hear(self.heard_while_out.clone());
    }

    /// Counts the cooldown the role names from now: when it is told, and when this replica
    /// started one again (the same time left then leaves the role as it was).
    pub fn reckon_cooldown(&mut self) {
        self.cooldown_until = cooldown_end(&self.role);
    }

    /// Time left at `now` in the data-loss cooldown the role names.
    pub fn cooldown_left(&self, now: BootInstant) -> Option<Duration> {
        self.cooldown_until.map(|until| now.until(until))
    }

    /// Shows what was `heard` of Redis while a gate keeps this replica out over the elector's
    /// word (all of it when `None`: it stands); whether what is shown changed.
    pub fn hear(&mut self, heard: Option<(bool, Option<String>)>) -> bool {
        let before = self.status.redis.clone();
        self.status.redis.clone_from(&self.elector_redis);
        if let Some((reachable, error)) = &heard {
            (self.status.redis.reachable, self.status.redis.last_error) =
                (*reachable, error.clone());
        }
        self.heard_while_out = heard;
        before != self.status.redis
    }
}

/// When the cooldown a follower's `role` names ends, from now.
fn cooldown_end(role: &Role) -> Option<BootInstant> {
    match role {
        Role::Follower {
            cooldown: Some(left),
            ..
        } => Some(BootInstant::now().saturating_add(*left)),
        _ => None,
    }
}

impl Deref for Shown {
    type Target = Status;

    fn deref(&self) -> &Status {
        &self.status
    }
}

impl DerefMut for Shown {
    fn deref_mut(&mut self) -> &mut Status {
        &mut self.status
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

/// In words (readiness, the eviction gate's detail).
impl fmt::Display for Eviction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Eviction::Read(p) => write!(
                f,
                "maxmemory {} bytes, maxmemory-policy {}",
                p.maxmemory, p.policy
            ),
            Eviction::Unreadable { reason } => write!(f, "policy unreadable: {reason}"),
            Eviction::NotRead => f.write_str("policy not read yet"),
        }
    }
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::elector::{RedisHealth, Role};

    /// What replica `web-a` of lease `shop/web` shows in `role`, after one transition, with
    /// Redis answering and nothing added: the unit tests' status, each changing what it tests.
    pub(crate) fn shown(role: Role) -> Shown {
        Shown::of(Status {
            lease: "shop/web".into(),
            identity: "web-a".into(),
            owner: "web-a-x".into(),
            role,
            transitions: 1,
            last_step_down: None,
            redis: RedisHealth {
                reachable: true,
                last_error: None,
                subscribed: true,
            },
            sitting_out: None,
        })
    }

    /// A cooldown started again with the same time left as the one before leaves the role as
    /// it was, so the elector tells no status: its start is what counts the time left anew.
    #[test]
    fn a_cooldown_started_again_with_the_same_time_left_counts_from_its_start() {
        use crate::board::Board;
        use crate::elector::TermHooks;
        let cover = Duration::from_secs(60);
        let cooling = shown(Role::Follower {
            leader: None,
            cooldown: Some(cover),
        });
        let board = Board::new(shown(Role::Starting).status);
        board.status(&cooling.status);
        let first = board.subscribe().borrow().cooldown_until;
        std::thread::sleep(Duration::from_millis(2));
        let again_at = BootInstant::now();
        board.cooldown_started();
        board.status(&cooling.status);
        let again = board.subscribe().borrow().cooldown_until;
        assert!(first.is_some_and(|f| f < again_at.saturating_add(cover)));
        assert!(
            again.is_some_and(|a| a >= again_at.saturating_add(cover)),
            "{again:?}, from {again_at:?}"
        );
    }
}
