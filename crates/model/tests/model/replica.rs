//! One replica of the model: its state (its role, the timing it runs, its link, what it
//! observed), how a term ends, and when a step of it is due. Its steps,
//! the elector's follower and leader loops reduced to their steps, are in follower.rs,
//! leader.rs and notices.rs, each deciding by calling leasehold's own pure decisions
//! (`elector::decide`), never a copy of them.

use std::time::Duration;

use leasehold_core::clock::BootInstant;
use leasehold_core::elector::{StepDownReason, Timing, decide};

use crate::config::{Timings, instant};
use crate::link::{Health, Link};
use crate::mirror::{Name, RenewReply, Term};

/// What a renewal's reply says: the script's answer, or Redis's refusal to run it
/// (`LeaseError::is_lasting_refusal`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Renewal {
    Ran(RenewReply),
    Refused,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Lead {
    pub term: Term,
    /// The instant just before the winning acquire was sent.
    pub acquired_at: BootInstant,
    pub valid_until: BootInstant,
    pub renew_by: BootInstant,
    pub next_renew: BootInstant,
    /// A renewal in flight: when it was sent and how long the watchdog waits for it.
    pub renewing: Option<(BootInstant, Duration)>,
    /// A handover nudge heard while that renewal was in flight: renew again at once after it.
    pub nudged: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    Follower {
        next_try: BootInstant,
    },
    /// After a term, the pause that term pacing or a handover's hold-off asks for: the
    /// elector sleeps it out, and no release announcement wakes it.
    Paused {
        until: BootInstant,
    },
    /// An acquire in flight, sent at that instant; `woken` when a data-loss notice came
    /// meanwhile (the elector's wake-up waits in its queue, and the follower tries again at
    /// once after the reply).
    Acquiring {
        sent_at: BootInstant,
        woken: bool,
    },
    Leader(Lead),
    /// After an acquire whose outcome is unknown (`decide::outcome_unknown`): out of the
    /// election, reading the lease (`observe`) at `next_probe` until an answer comes in time
    /// (`Elector::resolve_unknown_acquire`).
    SittingOut {
        next_probe: BootInstant,
    },
    /// An `observe` of a replica sitting out in flight, sent at that instant.
    Observing {
        sent_at: BootInstant,
    },
    /// Its terms are used up: out of the election.
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Replica {
    pub id: u8,
    /// The timing it runs; it goes with the replica under a renaming.
    pub timings: Timings,
    /// `RedisLease::longest_seen`: the longest live claim an acquire reply told, in ms.
    pub longest_seen: u64,
    /// The model's note (no part of the replica): the longest lease duration, in ms, of a live
    /// term that an acquire reply named as held (kept only when the configuration restricts
    /// data loss by it, [`crate::config::Config::loss_after_following`]).
    pub followed_ms: u64,
    /// Ticks its clock is behind the model's (clock-rate difference).
    pub lag: u8,
    pub terms: u8,
    pub role: Role,
    /// client-go's observed-time rule: the holder seen last and until when it keeps its term.
    pub observed: Option<(Term, BootInstant)>,
    pub announced: bool,
    pub short_terms: u32,
    /// The token of the last term it led: a term of its own above it is one an unanswered
    /// acquire won (`decide::unknown_term_of_ours`).
    pub last_led: Option<u64>,
    pub health: Health,
    /// Its connection: the node it reaches (`connection.rs`).
    pub link: Link,
}

/// How a term ended: the reason, and after a handover to a named replica, its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ending {
    pub reason: StepDownReason,
    pub hand_to: Option<Name>,
}

impl From<StepDownReason> for Ending {
    fn from(reason: StepDownReason) -> Ending {
        Ending {
            reason,
            hand_to: None,
        }
    }
}

impl Replica {
    pub fn new(id: u8, timings: Timings) -> Replica {
        Replica {
            id,
            timings,
            longest_seen: 0,
            followed_ms: 0,
            lag: 0,
            terms: 0,
            role: Role::Follower {
                next_try: instant(0),
            },
            observed: None,
            announced: false,
            short_terms: 0,
            last_led: None,
            health: Health::Healthy,
            link: Link::default(),
        }
    }

    pub fn timing(&self) -> Timing {
        self.timings.timing()
    }

    /// The longest lease duration it knows, in ms: its own, or the longest it was told.
    pub fn knows_ms(&self) -> u64 {
        self.timings.ttl_ms().max(self.longest_seen)
    }

    /// The replica's boot clock at model time `time`.
    pub fn now(&self, time: u16) -> BootInstant {
        instant(time - u16::from(self.lag))
    }

    /// The guard `Leadership::check()` as a predicate: a term not stepped down whose validity
    /// deadline has not passed on this replica's clock.
    pub fn check_passes(&self, time: u16) -> bool {
        match self.role {
            Role::Leader(lead) => decide::within_validity(self.now(time), lead.valid_until),
            _ => false,
        }
    }

    /// Whether a step of this replica is due at `now` (eager runs let no tick pass then).
    pub fn due(&self, now: BootInstant, max_terms: u8) -> bool {
        let t = self.timing();
        match self.role {
            Role::Follower { next_try } => self.terms < max_terms && now >= next_try,
            Role::Paused { until } => now >= until,
            Role::Acquiring { sent_at, .. } => now >= sent_at.saturating_add(t.acquire_timeout()),
            Role::Leader(lead) => match lead.renewing {
                Some((sent, timeout)) => now >= sent.saturating_add(timeout),
                None => now >= lead.next_renew,
            },
            Role::SittingOut { next_probe } => now >= next_probe,
            Role::Observing { sent_at } => now >= sent_at.saturating_add(t.call_timeout()),
            Role::Done => false,
        }
    }
}
