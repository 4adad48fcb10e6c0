//! What the lease primitives answer: outcomes, not errors (losing a race is an outcome).

use std::time::Duration;

use super::keys::{FencingToken, identity_of};
use crate::clock::{BootInstant, WallLead};

/// The lease was won: leadership starts now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// The new fencing token, higher than every token of this lease before it.
    pub token: FencingToken,
    /// The instant just before the acquire was sent (the TTL cannot have started earlier).
    pub sent_at: BootInstant,
    /// The wall clock's lead over the boot clock, read just before the acquire was sent
    /// (docs/DESIGN.md, "Pauses the boot clock did not count").
    pub lead: WallLead,
    /// How the term before this one ended, as Redis kept it; for the operator's log.
    pub previous: PreviousTerm,
    /// Redis's `TIME` when it granted the term, in microseconds: the first reading of the
    /// term's clock-rate bound.
    pub redis_us: u64,
}

/// How the term before a new one ended, as the acquire found it in Redis (a data loss: as the
/// elector saw it, a cooldown before the win): the `previous_term` of the `became leader` event,
/// whose words docs/REFERENCE.md explains. Words for the log; it decides nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreviousTerm {
    None,
    Released,
    HandedOver,
    Expired,
    DataLoss,
}

impl PreviousTerm {
    /// The log's word, as the acquire script names it.
    pub fn as_label(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Released => "released",
            Self::HandedOver => "handed_over",
            Self::Expired => "expired",
            Self::DataLoss => "data_loss",
        }
    }

    /// The script's word; `None` for anything else.
    pub(super) fn from_label(label: &str) -> Option<Self> {
        [
            Self::None,
            Self::Released,
            Self::HandedOver,
            Self::Expired,
            Self::DataLoss,
        ]
        .into_iter()
        .find(|p| p.as_label() == label)
    }
}

/// Who holds the lease, as seen by a follower.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The holder's owner id (`<identity>-<uuid>`).
    pub owner: String,
    /// Time left on the lease's TTL as Redis reported it; `None`: no TTL, not leasehold's key.
    pub remaining: Option<Duration>,
    /// The holder's fencing token, when known.
    pub token: Option<FencingToken>,
    /// The lease key is gone before its time (evicted, deleted) and the state record still
    /// names this term: nobody may take it before `remaining` has passed.
    pub vanished: bool,
}

impl Holder {
    /// The identity part of the owner id (the pod name).
    pub fn identity(&self) -> &str {
        identity_of(&self.owner)
    }

    /// The value the lease holds in this holder's term (`<owner id>#<token>`, or the owner
    /// alone for a value written by something else).
    pub fn term_value(&self) -> String {
        match self.token {
            Some(token) => format!("{}#{token}", self.owner),
            None => self.owner.clone(),
        }
    }
}

/// The outcome of an acquire. Losing the race is an outcome, not an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquired {
    /// We are the leader.
    Leader(Grant),
    /// Someone else holds it.
    HeldBy(Holder),
    /// Redis lost its data (or is new): nobody may acquire for `remaining` (on Redis's clock);
    /// `started`: this very call found the loss and started the cooldown.
    CoolingDown { remaining: Duration, started: bool },
    /// Free, but a handover reserved the next term for another identity for `remaining`.
    Reserved {
        identity: String,
        /// `None`: no TTL, not leasehold's (it blocks the lease).
        remaining: Option<Duration>,
    },
    /// The lease's keys are written in a higher protocol than this release speaks (a newer
    /// leasehold won a term): this replica stays out and reads or writes nothing of them.
    NewerProtocol(Protocol),
}

/// The protocol a lease's keys are written in, as its `:protocol` key says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protocol {
    /// The version; `None` for a value that cannot be read (kept out of, like a higher one).
    pub version: Option<u32>,
    /// The leasehold release that last won a term under it (the raw value when unreadable).
    pub release: String,
}

impl Protocol {
    /// The protocol these scripts speak, and this release.
    pub fn ours() -> Self {
        Self {
            version: Some(super::PROTOCOL),
            release: env!("CARGO_PKG_VERSION").to_owned(),
        }
    }

    /// Whether a replica of this release must stay out of a lease in this protocol.
    pub fn is_newer(&self) -> bool {
        self.version.is_none_or(|v| v > super::PROTOCOL)
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.version {
            Some(v) => write!(f, "protocol {v} (leasehold {})", self.release),
            None => write!(f, "an unreadable protocol `{}`", self.release),
        }
    }
}

/// One reply that carried Redis's `TIME`: the boot clock's instants around it, and that time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub sent: BootInstant,
    pub received: BootInstant,
    /// Redis's `TIME`, in microseconds.
    pub redis_us: u64,
}

/// The outcome of a renew.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Renewed {
    /// Still ours; the TTL restarted no earlier than the renewal's `sent_at`.
    Held(Renewal),
    /// Still ours and extended like [`Held`](Renewed::Held), and a handover of this very term
    /// was requested: the leader should step down and hand over.
    HandoverRequested {
        renewal: Renewal,
        /// The identity to hand to, or `None` for anyone.
        to: Option<String>,
    },
    /// The lease holds another owner id or is gone (also when Redis's clock stepped past its
    /// expiry, which `redis_us`, its `TIME`, shows); the renewal was sent at `sent_at`.
    NotHeld { sent_at: BootInstant, redis_us: u64 },
}

/// A renewal that found the term still ours, and what its reply said besides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Renewal {
    /// The instant just before the renew was sent.
    pub sent_at: BootInstant,
    /// The lease key had vanished before its time (evicted, deleted) while the state record
    /// still named our term; the renewal put it back.
    pub repaired: bool,
    /// How many connections listened on the release channel as the renewal ran, the leader's
    /// own among them while it is subscribed; `None` in a Cluster, which counts one node's.
    pub listeners: Option<u32>,
    /// Redis's `TIME` as the renewal ran, in microseconds: between the send and the reply.
    pub redis_us: u64,
}

/// The outcome of a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// It was ours; it is deleted and followers were told.
    Released,
    /// It was not ours (any more); nothing was changed.
    NotHeld,
}

/// The state of the data-loss cooldown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CooldownState {
    /// No cooldown is running.
    Idle,
    /// A cooldown is running with this much left.
    Running(Duration),
    /// The marker is missing or from another Redis process: the next acquire starts one.
    #[default]
    Pending,
}

/// A read-only look at the lease. `Default`: a Redis without any key of the lease.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Observation {
    /// The holder, if any.
    pub holder: Option<Holder>,
    /// The last fencing token handed out.
    pub token: Option<FencingToken>,
    /// The data-loss cooldown.
    pub cooldown: CooldownState,
    /// A handover's reservation of the next term: the identity, and the time left on it
    /// (`None` when the key has no TTL: not written by leasehold).
    pub reserved: Option<(String, Option<Duration>)>,
    /// The protocol the keys are written in, when a replica has won a term since it was
    /// versioned (`None`: the key is absent, as 0.2.0 left it).
    pub protocol: Option<Protocol>,
    /// Redis's clock rate as the leader last noted it (the key lives three lease durations).
    pub redis_clock: Option<NotedRate>,
}

/// What a leader noted of Redis's clock rate in `:clock`.
#[derive(Debug, Clone, PartialEq)]
pub struct NotedRate {
    /// The term value of the leader that measured it.
    pub term: String,
    /// Redis seconds per second of that leader's boot clock, at least.
    pub low: f64,
    /// At most.
    pub high: f64,
    /// When, on Redis's clock (`TIME`, microseconds since the epoch).
    pub at_us: u64,
}
