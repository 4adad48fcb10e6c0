//! One replica of the model: the elector's follower and leader loops reduced to their steps,
//! each step deciding by calling leasehold's own pure decisions (`elector::decide`), never a
//! copy of them.

use std::time::Duration;

use leasehold::clock::BootInstant;
use leasehold::elector::StepDownReason;
use leasehold::elector::decide::{self, RateBound, Seen, WatchdogStep};
use leasehold::lease::{FencingToken, Holder, Retry};

use leasehold::elector::Timing;

use crate::config::{Timings, instant};
use crate::connection::Link;
use crate::mirror::{AcquireReply, Name, RenewReply, Successor, Term};

/// How a replica's link to Redis fares (docs/DESIGN.md, "Gray failures"); it goes
/// with the replica under a renaming.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Health {
    #[default]
    Healthy,
    /// Every reply arrives later than the attempt it answers is bound to: its requests run in
    /// Redis, and nothing it hears back counts.
    Late,
    /// Redis refuses its renewals, for a reason that does not pass by itself (a missing
    /// permission, a replica's READONLY); its acquires and releases run.
    Refused,
}

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

/// What a replica sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Request {
    /// `cover_ms`: the longest lease duration the replica knows (ARGV[6]).
    Acquire {
        observed: Option<Term>,
        cover_ms: u64,
    },
    Renew {
        term: Term,
    },
    /// The read-only `observe` of a replica sitting out.
    Observe,
    /// A release, reserving the next term for `reserve` after a handover to it.
    Release {
        term: Term,
        reserve: Option<Name>,
    },
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

    /// The follower loop's top: drop an observation that ran out or whose release was
    /// announced, then send an acquire carrying the one that stands.
    pub fn try_acquire(&mut self, now: BootInstant) -> Request {
        if let Some((_, until)) = self.observed
            && !decide::observation_stands(now, until, self.announced)
        {
            self.observed = None;
        }
        self.announced = false;
        self.role = Role::Acquiring {
            sent_at: now,
            woken: false,
        };
        Request::Acquire {
            observed: self.observed.map(|(term, _)| term),
            cover_ms: self.knows_ms(),
        }
    }

    fn follow_after(&mut self, now: BootInstant, seen: Seen) {
        // Subscribed to the release channel; jitter at its low end (the model has no chance).
        let wait = decide::follower_wait(seen, true, &self.timing(), 0.0);
        self.role = Role::Follower {
            next_try: now.saturating_add(wait),
        };
    }

    /// The acquire's reply, or its timeout (`None`): the outcome is unknown, and the replica
    /// sits out until it is resolved, or, before the fix (`acquire_again`), tries again
    /// after the retry period.
    /// `rate`: the bound of Redis's clock rate the replica takes its validity from, if it
    /// measures one.
    pub fn acquired(
        &mut self,
        now: BootInstant,
        reply: Option<AcquireReply>,
        acquire_again: bool,
        rate: Option<RateBound>,
    ) {
        let Role::Acquiring { sent_at, woken } = self.role else {
            return;
        };
        let t = self.timing();
        let seen = match reply {
            Some(AcquireReply::Acquired { token }) => {
                self.terms += 1;
                self.last_led = Some(token);
                let deadlines =
                    decide::Deadlines::valid_for(sent_at, &t, decide::validity_at(&t, rate));
                self.role = Role::Leader(Lead {
                    term: Term {
                        owner: self.id,
                        token,
                    },
                    acquired_at: sent_at,
                    valid_until: deadlines.valid_until,
                    renew_by: deadlines.renew_by,
                    next_renew: deadlines.next_renew,
                    renewing: None,
                    nudged: false,
                });
                self.observed = None;
                return;
            }
            Some(AcquireReply::Held { term, pttl_ms, .. }) => {
                let remaining = u64::try_from(pttl_ms).ok().map(Duration::from_millis);
                if let Some(left) = remaining {
                    self.observed = Some((term, now.saturating_add(left)));
                }
                Seen::Held(remaining)
            }
            Some(AcquireReply::Cooldown { remaining_ms, .. }) => {
                Seen::CoolingDown(Duration::from_millis(remaining_ms))
            }
            // Like a holder whose TTL runs out then: try again at the reservation's end.
            Some(AcquireReply::Reserved { pttl_ms, .. }) => {
                Seen::Held(u64::try_from(pttl_ms).ok().map(Duration::from_millis))
            }
            None if acquire_again => Seen::Failed {
                retry: Retry::Soon,
                failures: 1,
            },
            // Before anything else, and never by acquiring again: the first read at once.
            None => {
                self.role = Role::SittingOut { next_probe: now };
                return;
            }
        };
        self.follow_after(now, seen);
        if woken {
            self.role = Role::Follower { next_try: now };
        }
    }

    /// A replica sitting out reads the lease.
    pub fn probe(&mut self, now: BootInstant) -> Request {
        self.role = Role::Observing { sent_at: now };
        Request::Observe
    }

    /// The observe's reply (the term the lease or the record holds), or its timeout (`None`):
    /// a term of its own that it never led is given back by its own term value (the release to
    /// send); an answer in time ([`decide::link_fits`]) ends the sitting out, and the replica
    /// tries at once, else it reads again after the retry period.
    pub fn observed(&mut self, now: BootInstant, reply: Option<Option<Term>>) -> Option<Request> {
        let Role::Observing { sent_at } = self.role else {
            return None;
        };
        let t = self.timing();
        let mut release = None;
        if let Some(holder) = reply {
            let owner = |id: u8| format!("r{id}");
            let holder = holder.map(|term| Holder {
                owner: owner(term.owner),
                remaining: None,
                token: Some(FencingToken(term.token)),
                vanished: false,
            });
            let last_led = self.last_led.map(FencingToken);
            if let Some(token) =
                decide::unknown_term_of_ours(holder.as_ref(), &owner(self.id), last_led)
            {
                release = Some(Request::Release {
                    term: Term {
                        owner: self.id,
                        token: token.0,
                    },
                    reserve: None,
                });
            }
            if decide::link_fits(now.saturating_duration_since(sent_at), &t) {
                self.role = Role::Follower { next_try: now };
                return release;
            }
        }
        let probe = Seen::Failed {
            retry: Retry::Soon,
            failures: 1,
        };
        // Not subscribed while it sits out, and jitter at its low end.
        let wait = decide::follower_wait(probe, false, &t, 0.0);
        self.role = Role::SittingOut {
            next_probe: now.saturating_add(wait),
        };
        release
    }

    /// A release of `term` announced on the channel: a waiting follower wakes at once.
    pub fn release_announced(&mut self, now: BootInstant, term: Term) {
        if let Role::Follower { .. } = self.role {
            self.announced = self.observed.is_some_and(|(seen, _)| seen == term);
            self.role = Role::Follower { next_try: now };
        }
    }

    /// The `data-loss` notice on the channel: a leader renews at once (and finds its lease
    /// gone), a follower tries at once, and one whose acquire is in flight tries again right
    /// after it; one pausing after a term sleeps the pause out.
    pub fn told_data_loss(&mut self, now: BootInstant) {
        match self.role {
            Role::Leader(_) => self.nudged(now),
            Role::Follower { .. } => {
                self.announced = false;
                self.role = Role::Follower { next_try: now };
            }
            Role::Acquiring { sent_at, .. } => {
                self.role = Role::Acquiring {
                    sent_at,
                    woken: true,
                }
            }
            // Sitting out, it reads until answered and hears no wake-up.
            Role::Paused { .. } | Role::SittingOut { .. } | Role::Observing { .. } | Role::Done => {
            }
        }
    }

    /// A handover was requested and nudged on the channel: a leader renews at once (and its
    /// renewal reads the request); one whose renewal is in flight renews again after it.
    pub fn nudged(&mut self, now: BootInstant) {
        if let Role::Leader(lead) = &mut self.role {
            if lead.renewing.is_some() {
                lead.nudged = true;
            } else {
                lead.next_renew = lead.next_renew.min(now);
            }
        }
    }

    /// The watchdog wakes: step down (the reason) or send a renewal.
    pub fn watchdog(&mut self, now: BootInstant) -> Result<Request, StepDownReason> {
        let Role::Leader(lead) = &mut self.role else {
            return Err(StepDownReason::Lost);
        };
        match decide::watchdog_step(
            now,
            lead.valid_until,
            lead.renew_by,
            self.timings.timing().renew_attempt_timeout(),
        ) {
            WatchdogStep::StepDown(reason) => Err(reason),
            WatchdogStep::Renew { timeout } => {
                lead.renewing = Some((now, timeout));
                Ok(Request::Renew { term: lead.term })
            }
        }
    }

    /// The renewal's reply, or its timeout (`None`). `Err` carries a step-down.
    pub fn renewed(
        &mut self,
        now: BootInstant,
        reply: Option<Renewal>,
        rate: Option<RateBound>,
    ) -> Result<(), Ending> {
        let Role::Leader(lead) = &mut self.role else {
            return Ok(());
        };
        let Some((sent_at, _)) = lead.renewing.take() else {
            return Ok(());
        };
        let t = self.timings.timing();
        match reply {
            Some(Renewal::Refused) => Err(StepDownReason::RenewRefused.into()),
            Some(Renewal::Ran(RenewReply::Held { handover, .. })) => {
                // The elector's own rule: deadlines from the send instant, and a reply after
                // the validity it would extend ends the term.
                let deadlines = decide::after_renewal(now, sent_at, &t, rate)?;
                lead.valid_until = deadlines.valid_until;
                lead.renew_by = deadlines.renew_by;
                lead.next_renew = deadlines.next_renew;
                if std::mem::take(&mut lead.nudged) {
                    lead.next_renew = now;
                }
                // A requested handover is a renewal like any other, then the end of the term.
                match handover {
                    None => Ok(()),
                    Some(to) => Err(Ending {
                        reason: StepDownReason::Handover,
                        hand_to: match to {
                            Successor::Anyone => None,
                            Successor::Named(name) => Some(name),
                        },
                    }),
                }
            }
            Some(Renewal::Ran(RenewReply::NotOurs)) => Err(StepDownReason::Lost.into()),
            None => {
                lead.next_renew =
                    decide::retry_after_failure(sent_at, now, &t, lead.valid_until, lead.renew_by);
                if std::mem::take(&mut lead.nudged) {
                    lead.next_renew = lead.next_renew.min(now);
                }
                Ok(())
            }
        }
    }

    /// Step-down: the guard refuses from here on; the release to send, if any (reserving the
    /// next term for a named successor). The replica contends again after the pause that term
    /// pacing or a handover's hold-off asks for, or leaves when its terms are used up.
    pub fn step_down(
        &mut self,
        now: BootInstant,
        ending: Ending,
        max_terms: u8,
    ) -> Option<Request> {
        let reason = ending.reason;
        let Role::Leader(lead) = self.role else {
            return None;
        };
        let t = self.timing();
        let lasted = now.saturating_duration_since(lead.acquired_at);
        self.short_terms = if decide::is_short_term(reason, lasted, &t) {
            self.short_terms + 1
        } else {
            0
        };
        let pause = decide::pause_after_term(self.short_terms, &t)
            // The model's step-down pauses in full; whether the release lands is the network's.
            // The model has no release channel to count listeners on: never alone.
            .max(decide::hold_off_after(
                &decide::TermEnd {
                    reason,
                    released: true,
                    alone: false,
                },
                &t,
            ));
        self.observed = None;
        self.announced = false;
        self.role = if self.terms >= max_terms {
            Role::Done
        } else if pause.is_zero() {
            Role::Follower { next_try: now }
        } else {
            Role::Paused {
                until: now.saturating_add(pause),
            }
        };
        reason.may_still_hold().then_some(Request::Release {
            term: lead.term,
            reserve: ending.hand_to,
        })
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
