//! Symmetry reduction over the replicas. The replicas are interchangeable: they start alike
//! but for their ids, every step treats an id only by equality (a term's owner, a message's
//! sender or addressee, "every other replica"), the configuration gives each the same
//! allowances, and every property counts replicas without naming one. So renaming the
//! replicas maps a reachable state to a reachable state with the same properties, and the
//! checker needs to keep one state of each set of renamings: the least of them.
//!
//! stateright 0.31 applies its own `symmetry()` only in depth-first search, and the search
//! here must stay breadth-first (shortest counterexamples), so the model's `next_state`
//! returns the representative itself. The renaming of the system's own types (the state, the
//! messages, the actions) is in `system_rename.rs`.

use crate::link::Request;
use crate::mirror::{AcquireReply, Data, Handover, Name, Record, RenewReply, Successor, Term};
use crate::redis::Redis;
use crate::replica::{Lead, Renewal, Replica, Role};

/// A renaming of the replicas: replica `i` becomes replica `to[i]`.
pub struct Renaming<'a> {
    pub to: &'a [u8],
}

impl Renaming<'_> {
    pub fn id(&self, id: u8) -> u8 {
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
            longest: self.longest,
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
            Request::Acquire { observed, cover_ms } => Request::Acquire {
                observed: observed.rename(r),
                cover_ms,
            },
            Request::Renew { term } => Request::Renew {
                term: term.rename(r),
            },
            Request::Release { term, reserve } => Request::Release {
                term: term.rename(r),
                reserve: reserve.rename(r),
            },
            Request::Observe => Request::Observe,
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

impl Rename for Renewal {
    fn rename(&self, r: &Renaming) -> Self {
        match self {
            Renewal::Ran(reply) => Renewal::Ran(reply.rename(r)),
            Renewal::Refused => Renewal::Refused,
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

/// Replicas renamed, in the order of their new names (each replica's index is its id).
pub fn rename_replicas(replicas: &[Replica], r: &Renaming) -> Vec<Replica> {
    let mut renamed = replicas.to_vec();
    for old in replicas {
        let new = old.rename(r);
        renamed[usize::from(new.id)] = new;
    }
    renamed
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

/// The representative of `value`'s renamings of `replicas` replicas (the least of them), and
/// the renaming that leads to it. `prefix` is what the order of `T` compares first, renamed
/// (for a state: its replicas): only the renamings with the least prefix are made in full.
pub fn representative<T, K>(
    value: T,
    replicas: u8,
    prefix: impl Fn(&T, &Renaming) -> K,
) -> (T, Vec<u8>)
where
    T: Rename + Ord,
    K: Ord,
{
    let all = permutations(replicas);
    let keys: Vec<K> = all
        .iter()
        .map(|to| prefix(&value, &Renaming { to }))
        .collect();
    let mut best: Option<(T, Vec<u8>)> = None;
    if let Some(least) = keys.iter().min() {
        for (to, key) in all.iter().zip(&keys) {
            if key != least {
                continue;
            }
            let renamed = value.rename(&Renaming { to });
            if best.as_ref().is_none_or(|(b, _)| renamed < *b) {
                best = Some((renamed, to.clone()));
            }
        }
    }
    best.unwrap_or_else(|| (value, (0..replicas).collect()))
}
