//! A replica's follower steps in the model: an acquire carrying the observation that stands, its
//! reply (the term won, a holder, a cooldown, a reservation) or its timeout, and after an
//! unknown outcome the sitting out, reading the lease until an answer comes in time. Each step
//! decides by leasehold's own pure decisions (`elector::decide`).

use std::time::Duration;

use leasehold_core::clock::BootInstant;
use leasehold_core::elector::decide::{self, RateBound, Seen};
use leasehold_core::lease::{FencingToken, Holder, Retry};

use crate::link::Request;
use crate::mirror::{AcquireReply, Term};
use crate::replica::{Lead, Replica, Role};

impl Replica {
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
}
