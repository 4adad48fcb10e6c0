//! The Rust mirror of the lease's Lua scripts (`crates/core/src/lease/scripts/*.lua`): acquire, renew,
//! release, handover and observe applied to one Redis dataset, step for step as the Lua does. The model
//! checker runs these; `lua_mirror` beside it runs them side by side with the real
//! scripts on a real redis-server and compares replies and keys.
//!
//! Units are the scripts' own: the clock and the record's instants in microseconds (`TIME`),
//! TTLs in milliseconds, key expiry on the millisecond (a key lives while `now_ms < expiry`).

use super::values::two_fields;
pub use super::values::{Handover, Longest, Name, Successor, Term};

/// The state record (no TTL): `<server> <cooldown_until_us> <term> <term_until_us>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Record {
    /// Identity of the Redis process and dataset that wrote it.
    pub server: u8,
    pub cool_until_us: u64,
    pub term: Option<Term>,
    pub term_until_us: u64,
}

/// The lease's keys in one Redis dataset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Data {
    /// The lease key: its term and its expiry in ms on Redis's clock.
    pub lease: Option<(Term, u64)>,
    pub fence: Option<u64>,
    pub record: Option<Record>,
    /// `<lease>:handover`, the handover request, with its expiry in ms.
    pub handover: Option<(Handover, u64)>,
    /// `<lease>:reserved`, the identity a handover reserved the next term for, with its
    /// expiry in ms.
    pub reserved: Option<(Name, u64)>,
    /// `<lease>:longest` (no TTL); a value the scripts cannot read is `None`, as for them.
    pub longest: Option<Longest>,
}

/// Which protocol the mirror runs: the current one, or a pre-fix one for the negative controls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Semantics {
    /// Before the fix of the late-release defect: renew and release compare the owner id only
    /// (the lease value identified the process, not the term).
    pub compare_owner_only: bool,
    /// Before the state record kept the term: acquire looks at the lease key only and renew
    /// cannot put back a vanished key (the record is only the data-loss marker).
    pub record_without_term: bool,
    /// Before the handover (issue 12): no handover request read by renew or cleared by
    /// release, no reservation written by release or honoured by acquire.
    pub before_handover: bool,
    /// Before the cooldown covered the longest lease duration: the data-loss cooldown lasts
    /// the finder's own TTL; no `:longest` key is read or written, the caller's `cover` is
    /// ignored, a running cooldown is never extended, every reply's trailing longest claim is
    /// 0 and no `data-loss` notice is published.
    pub before_longest: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    Key,
    Record,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AcquireReply {
    Acquired {
        token: u64,
    },
    /// `pttl_ms` is -2 for a record term that only this follower's observation keeps.
    Held {
        term: Term,
        pttl_ms: i64,
        source: Source,
    },
    Cooldown {
        remaining_ms: u64,
        started: bool,
    },
    /// The lease is free but a handover reserved the next term for another identity.
    Reserved {
        name: Name,
        pttl_ms: i64,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RenewReply {
    NotOurs,
    /// Held; `repaired` when the renewal put a vanished key back; `handover` when a handover
    /// of this very term was requested.
    Held {
        repaired: bool,
        handover: Option<Successor>,
    },
}

impl RenewReply {
    /// The reply's code: 0 not ours, 1 held, 2 held after a repair.
    pub fn code(&self) -> i64 {
        match self {
            RenewReply::NotOurs => 0,
            RenewReply::Held {
                repaired: false, ..
            } => 1,
            RenewReply::Held { repaired: true, .. } => 2,
        }
    }
}

/// What an acquire answers and announces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Acquisition {
    pub reply: AcquireReply,
    /// The element that ends every reply: the longest lease duration of a live claim in
    /// `:longest`, in ms (0 for none).
    pub longest_ms: u64,
    /// The `data-loss <ms>` notice published on the channel, with the cooldown it started.
    pub data_loss: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ObserveReply {
    pub holder: Option<Term>,
    pub pttl_ms: i64,
    pub fence: Option<u64>,
    /// Milliseconds left, 0 for none, -1 when the next acquire would start one.
    pub cooldown_ms: i64,
    pub source: Source,
    /// The handover's reservation and its PTTL in ms.
    pub reserved: Option<(Name, i64)>,
}

fn ceil_ms(us: u64) -> u64 {
    us.div_ceil(1000)
}

impl Data {
    /// The lease key, if it has not expired at `now_us`.
    pub fn live_lease(&self, now_us: u64) -> Option<(Term, u64)> {
        self.lease
            .filter(|(_, expiry_ms)| now_us / 1000 < *expiry_ms)
    }

    /// A key with an expiry in ms, if it has not expired at `now_us`.
    fn live<T: Copy>(key: Option<(T, u64)>, now_us: u64) -> Option<(T, u64)> {
        key.filter(|(_, expiry_ms)| now_us / 1000 < *expiry_ms)
    }

    /// Every key with a TTL that has expired at `now_us` is gone (Redis expires on access).
    pub fn expire(&mut self, now_us: u64) {
        self.lease = self.live_lease(now_us);
        self.handover = Self::live(self.handover, now_us);
        self.reserved = Self::live(self.reserved, now_us);
    }

    fn pttl(&self, now_us: u64) -> i64 {
        match self.live_lease(now_us) {
            Some((_, expiry_ms)) => expiry_ms as i64 - (now_us / 1000) as i64,
            None => -2,
        }
    }

    fn set_lease(&mut self, term: Term, now_us: u64, ttl_ms: u64) {
        self.lease = Some((term, now_us / 1000 + ttl_ms));
    }

    /// `claim_longest`: an acquire or renewal claims its lease duration. A shorter or expired
    /// claim is replaced, an equal one rewritten two lease durations ahead once it stands less
    /// than one ahead, a longer live one left alone; the loss instant stays.
    fn claim_longest(&mut self, ttl_ms: u64, now_us: u64) {
        let l = self.longest.unwrap_or_default();
        if l.claim_until_us > now_us
            && (l.ms > ttl_ms || (l.ms == ttl_ms && l.claim_until_us >= now_us + ttl_ms * 1000))
        {
            return;
        }
        self.longest = Some(Longest {
            ms: ttl_ms,
            claim_until_us: now_us + 2 * ttl_ms * 1000,
            loss_us: l.loss_us,
        });
    }

    /// The acquire script. `cool` is ARGV[3] (`1`), `observed` ARGV[4], ARGV[5] is the
    /// identity of replica `owner`, and `cover_ms` ARGV[6] (the longest lease duration the
    /// caller knows).
    #[allow(clippy::too_many_arguments)]
    pub fn acquire(
        &mut self,
        sem: Semantics,
        now_us: u64,
        server: u8,
        owner: u8,
        ttl_ms: u64,
        cool: bool,
        observed: Option<Term>,
        cover_ms: u64,
    ) -> Acquisition {
        self.expire(now_us);
        let longest = self.longest.filter(|_| !sem.before_longest);
        let mut cover = if sem.before_longest {
            ttl_ms
        } else {
            ttl_ms.max(cover_ms)
        };
        let mut live = 0;
        if let Some(l) = longest {
            cover = cover.max(l.ms);
            if l.claim_until_us > now_us {
                live = l.ms;
            }
        }
        let answer = |reply| Acquisition {
            reply,
            longest_ms: live,
            data_loss: None,
        };
        let mut record = match self.record {
            Some(mut r) if r.server == server => {
                if !sem.before_longest && cool {
                    // The cooldown covers what this caller knows too, from the instant of the
                    // loss, also after a shorter one ended; without a usable instant while one
                    // runs, now stands for it, written once.
                    let mut l = longest.unwrap_or_default();
                    if (l.loss_us == 0 || l.loss_us > now_us) && r.cool_until_us > now_us {
                        l.loss_us = now_us;
                        self.longest = Some(l);
                    }
                    if l.loss_us > 0
                        && l.loss_us <= now_us
                        && l.loss_us + cover * 1000 > r.cool_until_us
                    {
                        r.cool_until_us = l.loss_us + cover * 1000;
                        self.record = Some(r);
                    }
                }
                if r.cool_until_us > now_us {
                    return answer(AcquireReply::Cooldown {
                        remaining_ms: ceil_ms(r.cool_until_us - now_us),
                        started: false,
                    });
                }
                r
            }
            found => {
                let mut r = found.unwrap_or(Record {
                    server,
                    cool_until_us: 0,
                    term: None,
                    term_until_us: 0,
                });
                if found.is_none() && observed.is_some() {
                    r.term = observed;
                }
                r.server = server;
                r.cool_until_us = if cool { now_us + cover * 1000 } else { now_us };
                self.record = Some(r);
                if cool {
                    let mut data_loss = None;
                    if !sem.before_longest {
                        // The loss instant, and the notice that wakes every leader and follower.
                        self.longest = Some(Longest {
                            loss_us: now_us,
                            ..longest.unwrap_or_default()
                        });
                        data_loss = Some(cover);
                    }
                    return Acquisition {
                        data_loss,
                        ..answer(AcquireReply::Cooldown {
                            remaining_ms: cover,
                            started: true,
                        })
                    };
                }
                r
            }
        };
        let current = self.live_lease(now_us).map(|(t, _)| t);
        if let Some(term) = current.filter(|t| t.owner != owner) {
            return answer(AcquireReply::Held {
                term,
                pttl_ms: self.pttl(now_us),
                source: Source::Key,
            });
        }
        if !sem.record_without_term
            && current.is_none()
            && let Some(term) = record.term.filter(|t| t.owner != owner)
        {
            if record.term_until_us > now_us {
                return answer(AcquireReply::Held {
                    term,
                    pttl_ms: ceil_ms(record.term_until_us - now_us) as i64,
                    source: Source::Record,
                });
            } else if Some(term) == observed {
                return answer(AcquireReply::Held {
                    term,
                    pttl_ms: -2,
                    source: Source::Record,
                });
            }
        }
        // A reservation for another identity keeps the term free for it. Names compare as
        // their texts do (each name has its own text).
        let reserved = self.reserved.filter(|_| !sem.before_handover);
        if let Some((name, expiry_ms)) = reserved
            && name != Name::Replica(owner)
        {
            return answer(AcquireReply::Reserved {
                name,
                pttl_ms: expiry_ms as i64 - (now_us / 1000) as i64,
            });
        }
        let fence = self.fence.filter(|n| *n >= now_us).unwrap_or(now_us);
        let token = fence + 1;
        self.fence = Some(token);
        let term = Term { owner, token };
        self.set_lease(term, now_us, ttl_ms);
        record.term = Some(term);
        record.term_until_us = now_us + ttl_ms * 1000;
        self.record = Some(record);
        if !sem.before_longest {
            self.claim_longest(ttl_ms, now_us);
        }
        if reserved.is_some() {
            self.reserved = None;
        }
        answer(AcquireReply::Acquired { token })
    }

    /// Whether a stored term answers to the term (or owner) a message carries.
    fn matches(sem: Semantics, stored: Term, sent: Term, any: bool) -> bool {
        if any || sem.compare_owner_only {
            stored.owner == sent.owner
        } else {
            stored == sent
        }
    }

    /// The renew script's `answer`: the reply with the handover request of this very term.
    fn answer(&self, sem: Semantics, term: Term, repaired: bool) -> RenewReply {
        let request = self.handover.filter(|_| !sem.before_handover);
        let handover = request.and_then(|(request, _)| {
            let text = request.text();
            let (requested, to) = two_fields(&text)?;
            (requested == term.value()).then(|| Successor::parse(to))
        });
        RenewReply::Held { repaired, handover }
    }

    /// The renew script.
    pub fn renew(
        &mut self,
        sem: Semantics,
        now_us: u64,
        server: u8,
        term: Term,
        ttl_ms: u64,
    ) -> RenewReply {
        self.expire(now_us);
        let current = self.lease.map(|(t, _)| t);
        if current.is_some_and(|c| Self::matches(sem, c, term, false)) {
            let held = current.unwrap_or(term);
            self.set_lease(held, now_us, ttl_ms);
            if let Some(r) = &mut self.record {
                // The script writes the term it was sent (the same value unless pre-fix).
                r.term = Some(term);
                r.term_until_us = now_us + ttl_ms * 1000;
            }
            if !sem.before_longest {
                self.claim_longest(ttl_ms, now_us);
            }
            return self.answer(sem, term, false);
        }
        if sem.record_without_term {
            return RenewReply::NotOurs;
        }
        if let Some(r) = &mut self.record
            && current.is_none()
            && r.term == Some(term)
            && r.server == server
            && (r.term_until_us == 0 || now_us < r.term_until_us)
        {
            r.term_until_us = now_us + ttl_ms * 1000;
            self.set_lease(term, now_us, ttl_ms);
            if !sem.before_longest {
                self.claim_longest(ttl_ms, now_us);
            }
            return self.answer(sem, term, true);
        }
        RenewReply::NotOurs
    }

    /// The release script; `any` is ARGV[3] `any` (every term of the owner), `reserve` ARGV[4]
    /// and ARGV[5] (the identity to reserve the next term for, and for how many ms). Returns
    /// the released term (the one announced on the channel), `None` for reply 0.
    pub fn release(
        &mut self,
        sem: Semantics,
        now_us: u64,
        term: Term,
        any: bool,
        reserve: Option<(Name, u64)>,
    ) -> Option<Term> {
        self.expire(now_us);
        let current = self.lease.map(|(t, _)| t);
        let mut released = None;
        if let Some(c) = current.filter(|c| Self::matches(sem, *c, term, any)) {
            self.lease = None;
            released = Some(c);
        }
        if let Some(r) = &mut self.record
            && let Some(t) = r.term
            && Self::matches(sem, t, term, any)
            && (released.is_some() || current.is_none())
        {
            released = released.or(Some(t));
            r.term = None;
            r.term_until_us = 0;
        }
        let released_term = released?;
        if sem.before_handover {
            return released;
        }
        let prefix = format!("{} ", released_term.value());
        if self
            .handover
            .is_some_and(|(request, _)| request.text().starts_with(&prefix))
        {
            self.handover = None;
        }
        if let Some((name, ms)) = reserve {
            self.reserved = Some((name, now_us / 1000 + ms));
        }
        released
    }

    /// The handover script: a request bound to `term`, living `ttl_ms`, if the lease is still
    /// in that term. Whether it was made (the nudge on the channel goes with it).
    pub fn request_handover(
        &mut self,
        now_us: u64,
        term: Term,
        to: Successor,
        ttl_ms: u64,
    ) -> bool {
        self.expire(now_us);
        if self.lease.map(|(t, _)| t) != Some(term) {
            return false;
        }
        self.handover = Some((Handover::Request { term, to }, now_us / 1000 + ttl_ms));
        true
    }

    /// The observe script (read-only).
    pub fn observe(&self, now_us: u64, server: u8) -> ObserveReply {
        let mut holder = self.live_lease(now_us).map(|(t, _)| t);
        let mut pttl_ms = self.pttl(now_us);
        let mut source = Source::Key;
        let mut cooldown_ms = -1;
        if let Some(r) = self.record.filter(|r| r.server == server) {
            cooldown_ms = 0;
            if r.cool_until_us > now_us {
                cooldown_ms = ceil_ms(r.cool_until_us - now_us) as i64;
            }
        }
        if holder.is_none()
            && let Some(r) = self.record
            && let Some(t) = r.term
            && r.term_until_us > now_us
        {
            holder = Some(t);
            pttl_ms = ceil_ms(r.term_until_us - now_us) as i64;
            source = Source::Record;
        }
        ObserveReply {
            holder,
            pttl_ms,
            fence: self.fence,
            cooldown_ms,
            source,
            reserved: Self::live(self.reserved, now_us)
                .map(|(name, expiry_ms)| (name, expiry_ms as i64 - (now_us / 1000) as i64)),
        }
    }
}
