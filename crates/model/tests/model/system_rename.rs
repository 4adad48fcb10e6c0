//! The system's own types (a state, a message, an action) under a renaming of the replicas,
//! for the symmetry reduction (`symmetry.rs`).

use crate::symmetry::{Rename, Renaming, rename_replicas};
use crate::system::{Action, Msg, State};

impl Rename for Msg {
    fn rename(&self, r: &Renaming) -> Self {
        match *self {
            Msg::ToRedis {
                from,
                sent_at,
                node,
                confirmed,
                request,
            } => Msg::ToRedis {
                from: r.id(from),
                sent_at,
                node,
                confirmed,
                request: request.rename(r),
            },
            Msg::Acquired {
                to,
                sent_at,
                confirmed,
                reply,
                longest_ms,
            } => Msg::Acquired {
                to: r.id(to),
                sent_at,
                confirmed,
                reply: reply.rename(r),
                longest_ms,
            },
            Msg::Renewed {
                to,
                sent_at,
                confirmed,
                reply,
            } => Msg::Renewed {
                to: r.id(to),
                sent_at,
                confirmed,
                reply: reply.rename(r),
            },
            Msg::Observed {
                to,
                sent_at,
                confirmed,
                holder,
            } => Msg::Observed {
                to: r.id(to),
                sent_at,
                confirmed,
                holder: holder.rename(r),
            },
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
            Action::Probe(n) => Action::Probe(r.id(n)),
            Action::ObserveTimedOut(n) => Action::ObserveTimedOut(r.id(n)),
            Action::WorkFails(n) => Action::WorkFails(r.id(n)),
            Action::Deliver(m) => Action::Deliver(m.rename(r)),
            Action::RequestHandover(to) => Action::RequestHandover(to.rename(r)),
            other @ (Action::Tick
            | Action::Fault(_)
            | Action::SentinelFailover
            | Action::SentinelLearns(_)) => other,
        }
    }
}

impl Rename for State {
    fn rename(&self, r: &Renaming) -> Self {
        let mut net: Vec<Msg> = self.net.iter().map(|m| m.rename(r)).collect();
        net.sort_unstable();
        State {
            time: self.time,
            replicas: rename_replicas(&self.replicas, r),
            redis: self.redis.rename(r),
            net,
            max_token: self.max_token,
            token_regressed: self.token_regressed,
            stale_write: self.stale_write,
            handovers: self.handovers,
            handed_over_by: self.handed_over_by.map(|n| r.id(n)),
            handover_completed: self.handover_completed,
            // Nodes and Sentinels are not replicas; the promoted node's keys name replicas.
            promoted: self.promoted.rename(r),
            sentinels: self.sentinels,
            longest_granted_ms: self.longest_granted_ms,
            lost_under_longer: self.lost_under_longer,
        }
    }
}
