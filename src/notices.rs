//! What a follower's tries find that a person must hear of, said once per occurrence rather than
//! at every try, and shown ([`Shown`](crate::board::Shown)) while it lasts: a key without expiry
//! that blocks the lease (leasehold never takes it over), keys in a newer protocol, a holder
//! that runs under this replica's own identity, a contender whose lease duration is longer
//! than this replica's, and a data-loss cooldown that this replica did not start. A term hook
//! ([`TermHooks::tried`]): none of it changes a term.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_core::locked::locked;
use tracing::{error, info, warn};

use crate::board::{Blocked, BlockingKey, Board};
use crate::elector::{TermHooks, Timing};
use crate::lease::{Acquired, Holder, Protocol, RedisLease};

/// The notices of one replica.
pub struct Notices {
    lease: Arc<RedisLease>,
    /// This replica's lease duration.
    lease_duration: Duration,
    board: Board,
    /// The owner id of the last holder seen under this replica's identity.
    shared_identity: Mutex<Option<String>>,
    /// Whether a longer lease duration was mentioned.
    longer_duration_said: AtomicBool,
    /// Whether the tries in a row found a data-loss cooldown.
    cooling: AtomicBool,
}

impl TermHooks for Notices {
    fn tried(&self, acquired: &Acquired) {
        self.note_durations();
        self.note_protocol(acquired);
        self.note_cooldown(acquired);
        match acquired {
            Acquired::Leader(_) | Acquired::CoolingDown { .. } => self.note_blocked(None),
            Acquired::HeldBy(holder) => self.note_holder(holder),
            Acquired::Reserved {
                identity,
                remaining,
            } => self.note_blocked(
                reservation_not_leaseholds(*remaining)
                    .then(|| (BlockingKey::Reservation, identity.clone())),
            ),
            Acquired::NewerProtocol(_) => {}
        }
    }
}

impl Notices {
    /// The notices of a replica of `lease` with `lease_duration`, shown on `board`.
    pub fn new(lease: Arc<RedisLease>, lease_duration: Duration, board: Board) -> Arc<Self> {
        Arc::new(Self {
            lease,
            lease_duration,
            board,
            shared_identity: Mutex::default(),
            longer_duration_said: AtomicBool::new(false),
            cooling: AtomicBool::new(false),
        })
    }

    /// Says once a streak when the tries find a data-loss cooldown that this replica did not
    /// start (the one that did says why): no term begins meanwhile, and a cooldown that Redis's
    /// clock brought back by stepping back is otherwise heard of nowhere.
    fn note_cooldown(&self, acquired: &Acquired) {
        let Acquired::CoolingDown { remaining, started } = acquired else {
            return self.cooling.store(false, Ordering::Relaxed);
        };
        if !self.cooling.swap(true, Ordering::Relaxed) && !started {
            info!(
                identity = %self.lease.owner().identity(),
                lease = %self.lease.name(),
                cooldown_ms = remaining.as_millis() as u64,
                "waiting out a data-loss cooldown this replica did not start; no term begins until it ends (another replica found redis new or without its data, or redis's clock stepped back past the end of an earlier one)"
            );
        }
    }

    /// Records whether a key without expiry blocks the lease (`None`: nothing blocks it), saying
    /// so at error level when it starts, with the command that clears it, and once more when it
    /// ends.
    fn note_blocked(&self, blocked: Option<(BlockingKey, String)>) {
        let keys = self.lease.keys();
        let blocked = blocked.map(|(which, value)| Blocked {
            which,
            key: match which {
                BlockingKey::Lease => keys.lease.clone(),
                BlockingKey::Reservation => keys.reserved.clone(),
            },
            value,
        });
        self.board.modify_if(|s| {
            if s.blocked == blocked {
                return false;
            }
            match (&s.blocked, &blocked) {
                (_, Some(now)) => error!(
                    identity = %s.identity,
                    lease = %s.lease,
                    key = %now.key,
                    value = %now.value,
                    clear = format!("DEL {}", now.key),
                    "a key of the lease never expires and was not written by leasehold; nobody can lead until it is deleted (leasehold does not take it over)"
                ),
                (Some(before), None) => info!(
                    identity = %s.identity,
                    lease = %s.lease,
                    key = %before.key,
                    "the key that blocked the lease is gone"
                ),
                (None, None) => {}
            }
            s.blocked = blocked;
            true
        });
    }

    /// Records whether a try found the lease's keys in a higher protocol than this release's,
    /// saying at error level when it starts (which release wrote them, and what to do), and
    /// once more when it ends.
    fn note_protocol(&self, acquired: &Acquired) {
        let newer = match acquired {
            Acquired::NewerProtocol(found) => Some(found.clone()),
            _ => None,
        };
        self.board.modify_if(|s| {
            if s.newer_protocol == newer {
                return false;
            }
            match &newer {
                Some(found) => error!(
                    identity = %s.identity,
                    lease = %s.lease,
                    found = %found,
                    ours = %Protocol::ours(),
                    "the lease is written in a newer protocol than this leasehold speaks; out of the election. Finish the rollout to the newer release, or to roll back, stop every replica of it and run `leasehold remove-keys` once nobody leads"
                ),
                None => info!(
                    identity = %s.identity,
                    lease = %s.lease,
                    "the lease's protocol is this leasehold's again; back in the election"
                ),
            }
            s.newer_protocol = newer;
            true
        });
    }

    /// Looks at a holder a try found: a key without expiry blocks the lease; a holder under
    /// this replica's identity with another owner id is almost always two replicas configured
    /// with one `--identity` (they never overlap, each term has its own owner id, but every
    /// log, label and `step-down --to` is ambiguous), said once per such holder.
    fn note_holder(&self, holder: &Holder) {
        let blocks = not_leaseholds(holder);
        self.note_blocked(blocks.then(|| (BlockingKey::Lease, holder.term_value())));
        let own = self.lease.owner();
        if holder.identity() == own.identity() && holder.owner != own.as_str() {
            let mut said = locked(&self.shared_identity);
            if said.as_deref() != Some(holder.owner.as_str()) {
                warn!(
                    identity = %own.identity(),
                    lease = %self.lease.name(),
                    holder = %holder.owner,
                    owner = %own,
                    "another process holds the lease under this replica's identity; give each replica its own --identity (the pod name)"
                );
                *said = Some(holder.owner.clone());
            }
        }
    }

    /// Says once when Redis has told this replica of a term with a longer lease duration than
    /// its own: a rolling change of `--lease-duration`, or a lock beside a Deployment configured
    /// longer. Safe (the data-loss cooldown covers the longest duration this replica knows), but
    /// a replica that starts after Redis lost everything knows only its own.
    fn note_durations(&self) {
        let longest = self.lease.longest_seen();
        let own = self.lease_duration;
        if longest <= own || self.longer_duration_said.swap(true, Ordering::Relaxed) {
            return;
        }
        warn!(
            identity = %self.lease.owner().identity(),
            lease = %self.lease.name(),
            lease_duration_ms = own.as_millis() as u64,
            longest_ms = longest.as_millis() as u64,
            "another contender of the lease runs a longer --lease-duration; the data-loss cooldown covers it, but give every contender the same one"
        );
    }
}

/// Whether a holder's lease key was not written by leasehold: it has no TTL, or one longer than
/// any term lasts (`status`, `step-down` and the notices judge by this one rule).
pub fn not_leaseholds(holder: &Holder) -> bool {
    !holder.vanished && holder.remaining.is_none_or(|left| left > Timing::MAX)
}

/// The same of a handover reservation's TTL: it lasts two retry periods, under two hours.
pub fn reservation_not_leaseholds(remaining: Option<Duration>) -> bool {
    remaining.is_none_or(|left| left > Timing::MAX * 2)
}
