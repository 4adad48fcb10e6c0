//! Symmetry reduction over the replicas. The replicas are interchangeable: they start alike
//! but for their ids, every step treats an id only by equality (a term's owner, a message's
//! sender or addressee, "every other replica"), the configuration gives each the same
//! allowances, and every property counts replicas without naming one. So renaming the
//! replicas maps a reachable state to a reachable state with the same properties, and the
//! checker needs to keep one state of each set of renamings: the least of them.
//!
//! stateright 0.31 applies its own `symmetry()` only in depth-first search, and the search
//! here must stay breadth-first (shortest counterexamples), so the model's `next_state`
//! returns the representative itself.

use crate::mirror::{AcquireReply, Data, Handover, Name, Record, RenewReply, Successor, Term};
use crate::redis::Redis;
use crate::replica::{Lead, Replica, Request, Role};
use crate::system::{Action, Msg, State};

/// A renaming of the replicas: replica `i` becomes replica `to[i]`.
pub struct Renaming<'a> {
    pub to: &'a [u8],
}

impl Renaming<'_> {
    fn id(&self, id: u8) -> u8 {
        self.to[usize::from(id)]
    }
}

/// A value that names replicas, with those names changed.
pub trait Rename {
    fn rename(&self, r: &Renaming) -> Self;
}

impl<T: Rename> Rename for Option<T> {
    fn rename(&self, r: &Renaming) -> Self {
        self.as_ref().map(|v| v.rename(r))
    }
}

impl Rename for Term {
    fn rename(&self, r: &Renaming) -> Self {
        Term {
            owner: r.id(self.owner),
            token: self.token,
        }
    }
}

impl Rename for Name {
    fn rename(&self, r: &Renaming) -> Self {
        match *self {
            Name::Replica(n) => Name::Replica(r.id(n)),
            Name::Stranger => Name::Stranger,
        }
    }
}

impl Rename for Successor {
    fn rename(&self, r: &Renaming) -> Self {
        match self {
            Successor::Anyone => Successor::Anyone,
            Successor::Named(name) => Successor::Named(name.rename(r)),
        }
    }
}

impl Rename for Handover {
    fn rename(&self, r: &Renaming) -> Self {
        match self {
            Handover::Request { term, to } => Handover::Request {
                term: term.rename(r),
                to: to.rename(r),
            },
            Handover::Extra { term } => Handover::Extra {
                term: term.rename(r),
            },
            Handover::Bare { term } => Handover::Bare {
                term: term.rename(r),
            },
            Handover::Junk => Handover::Junk,
        }
    }
}

impl Rename for Record {
    fn rename(&self, r: &Renaming) -> Self {
        Record {
            term: self.term.rename(r),
            ..*self
        }
    }
}

impl Rename for Data {
    fn rename(&self, r: &Renaming) -> Self {
        Data {
            lease: self.lease.map(|(t, expiry)| (t.rename(r), expiry)),
            fence: self.fence,
            record: self.record.rename(r),
            handover: self.handover.map(|(h, expiry)| (h.rename(r), expiry)),
            reserved: self.reserved.map(|(name, expiry)| (name.rename(r), expiry)),
        }
    }
}

impl Rename for Redis {
    fn rename(&self, r: &Renaming) -> Self {
        Redis {
            data: self.data.rename(r),
            before_last_write: self.before_last_write.rename(r),
            ..*self
        }
    }
}

impl Rename for Request {
    fn rename(&self, r: &Renaming) -> Self {
        match *self {
            Request::Acquire { observed } => Request::Acquire {
                observed: observed.rename(r),
            },
            Request::Renew { term } => Request::Renew {
                term: term.rename(r),
            },
            Request::Release { term, reserve } => Request::Release {
                term: term.rename(r),
                reserve: reserve.rename(r),
            },
        }
    }
}

impl Rename for AcquireReply {
    fn rename(&self, r: &Renaming) -> Self {
        match *self {
            AcquireReply::Held {
                term,
                pttl_ms,
                source,
            } => AcquireReply::Held {
                term: term.rename(r),
                pttl_ms,
                source,
            },
            AcquireReply::Reserved { name, pttl_ms } => AcquireReply::Reserved {
                name: name.rename(r),
                pttl_ms,
            },
            other @ (AcquireReply::Acquired { .. } | AcquireReply::Cooldown { .. }) => other,
        }
    }
}

impl Rename for RenewReply {
    fn rename(&self, r: &Renaming) -> Self {
        match *self {
            RenewReply::Held { repaired, handover } => RenewReply::Held {
                repaired,
                handover: handover.rename(r),
            },
            RenewReply::NotOurs => RenewReply::NotOurs,
        }
    }
}

impl Rename for Msg {
    fn rename(&self, r: &Renaming) -> Self {
        match *self {
            Msg::ToRedis {
                from,
                sent_at,
                request,
            } => Msg::ToRedis {
                from: r.id(from),
                sent_at,
                request: request.rename(r),
            },
            Msg::Acquired { to, sent_at, reply } => Msg::Acquired {
                to: r.id(to),
                sent_at,
                reply: reply.rename(r),
            },
            Msg::Renewed { to, sent_at, reply } => Msg::Renewed {
                to: r.id(to),
                sent_at,
                reply: reply.rename(r),
            },
        }
    }
}

impl Rename for Replica {
    fn rename(&self, r: &Renaming) -> Self {
        let role = match self.role {
            Role::Leader(lead) => Role::Leader(Lead {
                term: lead.term.rename(r),
                ..lead
            }),
            other => other,
        };
        Replica {
            id: r.id(self.id),
            role,
            observed: self.observed.map(|(t, until)| (t.rename(r), until)),
            ..*self
        }
    }
}

impl Rename for Action {
    fn rename(&self, r: &Renaming) -> Self {
        match *self {
            Action::SlowTick(n) => Action::SlowTick(r.id(n)),
            Action::TryAcquire(n) => Action::TryAcquire(r.id(n)),
            Action::AcquireTimedOut(n) => Action::AcquireTimedOut(r.id(n)),
            Action::Watchdog(n) => Action::Watchdog(r.id(n)),
            Action::RenewTimedOut(n) => Action::RenewTimedOut(r.id(n)),
            Action::WorkFails(n) => Action::WorkFails(r.id(n)),
            Action::Deliver(m) => Action::Deliver(m.rename(r)),
            Action::RequestHandover(to) => Action::RequestHandover(to.rename(r)),
            other @ (Action::Tick | Action::Fault(_)) => other,
        }
    }
}

impl Rename for State {
    fn rename(&self, r: &Renaming) -> Self {
        let mut replicas = self.replicas.clone();
        for old in &self.replicas {
            let new = old.rename(r);
            replicas[usize::from(new.id)] = new;
        }
        let mut net: Vec<Msg> = self.net.iter().map(|m| m.rename(r)).collect();
        net.sort_unstable();
        State {
            time: self.time,
            replicas,
            redis: self.redis.rename(r),
            net,
            max_token: self.max_token,
            token_regressed: self.token_regressed,
            stale_write: self.stale_write,
            handovers: self.handovers,
            handed_over_by: self.handed_over_by.map(|n| r.id(n)),
            handover_completed: self.handover_completed,
        }
    }
}

/// Every ordering of `0..n`.
fn permutations(n: u8) -> Vec<Vec<u8>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut all = Vec::new();
    for shorter in permutations(n - 1) {
        for at in 0..=shorter.len() {
            let mut p = shorter.clone();
            p.insert(at, n - 1);
            all.push(p);
        }
    }
    all
}

/// The representative of `state`'s renamings (the least under the states' order), and the
/// renaming that leads to it.
pub fn representative(state: State) -> (State, Vec<u8>) {
    let n = state.replicas.len() as u8;
    let mut best = (state.clone(), (0..n).collect::<Vec<u8>>());
    for to in permutations(n) {
        let renamed = state.rename(&Renaming { to: &to });
        if renamed < best.0 {
            best = (renamed, to);
        }
    }
    best
}
