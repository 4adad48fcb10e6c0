//! The watchers of what a replica shows (server-sent events, the status file): the
//! [`Board`](super::Board) pushes it to them in the same step as it changes, when its role,
//! leader, token or candidacy changed. Publishing never waits: each watcher has a bounded
//! buffer, and a watcher whose buffer is full is dropped, not waited for.
//!
//! Every change gets the next number of this process's count, so that a watcher that comes back
//! after it names the last one it had is given the changes it missed, from the last few kept
//! ([`HISTORY`]); one that names nothing, another process's event, or one too old starts from
//! the current status, as any new watcher does.

use std::collections::VecDeque;
use std::mem::{Discriminant, discriminant};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_core::locked::locked;
use tokio::sync::{mpsc, watch};
use tracing::debug;

use super::Candidacy;
use super::Shown;
use crate::clock::BootInstant;
use crate::elector::Role;
use crate::lease::FencingToken;

/// What a watcher is told about: a change in any of these is an event.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Key {
    role: Discriminant<Role>,
    leader: Option<String>,
    token: Option<FencingToken>,
    candidacy: Candidacy,
}

impl Key {
    fn of(status: &Shown) -> Self {
        Self {
            role: discriminant(&status.role),
            leader: status.leader_identity().map(str::to_owned),
            token: status.token(),
            candidacy: status.candidacy.clone(),
        }
    }

    /// Whether `status` has this key, without copying it (most changes, renewals among them,
    /// do not change it).
    fn matches(&self, status: &Shown) -> bool {
        self.role == discriminant(&status.role)
            && self.leader.as_deref() == status.leader_identity()
            && self.token == status.token()
            && self.candidacy == status.candidacy
    }
}

/// How many of the last changes are kept for watchers that come back.
pub const HISTORY: usize = 16;

/// A status as an event: its number counts the changes this process published, from 1.
#[derive(Debug, Clone, PartialEq)]
pub struct Numbered {
    /// The number of the change this status is (or, for a new watcher's first event, the last
    /// change published before it).
    pub number: u64,
    /// The status.
    pub status: Shown,
}

#[derive(Default)]
struct Hub {
    /// The key of the last event sent.
    last: Option<Key>,
    /// The number of the last change published.
    number: u64,
    /// The last changes, oldest first, at most [`HISTORY`].
    history: VecDeque<Numbered>,
    subscribers: Vec<mpsc::Sender<Numbered>>,
    /// The elector has stopped: no more events, and streams end after what they have.
    closed: bool,
}

/// The watchers of one elector. Cheap to clone; all clones share the watchers.
#[derive(Clone)]
pub struct Watchers {
    status: watch::Receiver<Shown>,
    hub: Arc<Mutex<Hub>>,
}

impl Watchers {
    pub(super) fn new(status: watch::Receiver<Shown>) -> Self {
        Self {
            status,
            hub: Arc::default(),
        }
    }

    /// A new watcher with room for `buffer` events (at least one). Its first event is the
    /// current status, at once; the channel closes when the watcher fell `buffer` events behind
    /// (it was dropped) or the elector is gone.
    pub fn subscribe(&self, buffer: usize) -> mpsc::Receiver<Numbered> {
        self.resume(buffer, None)
    }

    /// A watcher that comes back after change `after` (the number of the last event it had):
    /// its first events are the changes published since, when they are all still kept and fit
    /// in `buffer`; otherwise (and for `None`, or a number this process never published) the
    /// current status, at once, numbered with the last change. Then every change, as for
    /// [`subscribe`](Self::subscribe).
    pub fn resume(&self, buffer: usize, after: Option<u64>) -> mpsc::Receiver<Numbered> {
        let buffer = buffer.max(1);
        let (tx, rx) = mpsc::channel(buffer);
        let mut hub = locked(&self.hub);
        // A change its writer has not published yet is published first, so that the current
        // status below has its own number and that writer's publish finds nothing new.
        self.publish_in(&mut hub);
        // Under the lock: no event can fall between these first ones and the next.
        let missed: Option<Vec<Numbered>> = after.filter(|n| *n <= hub.number).and_then(|n| {
            let missed: Vec<Numbered> = hub
                .history
                .iter()
                .filter(|e| e.number > n)
                .cloned()
                .collect();
            let kept = n == hub.number
                || hub
                    .history
                    .front()
                    .is_some_and(|first| first.number <= n + 1);
            (kept && missed.len() <= buffer).then_some(missed)
        });
        let first = match missed {
            // The last change is the current status as it is now: a renewal since changed its
            // deadline, not its key, and rendered as kept it would say the term had ended. Not
            // when a writer changed the key since (its publish, waiting for the lock, sends it).
            Some(mut missed) if !missed.is_empty() => {
                let now = self.status.borrow().clone();
                for event in &mut missed {
                    replayed(&mut event.status, &now);
                }
                if let Some(last) = missed.last_mut()
                    && hub.last.as_ref().is_some_and(|k| k.matches(&now))
                {
                    last.status = now;
                }
                missed
            }
            // Up to date already (or too far behind): the current status, under its number.
            _ => vec![self.numbered(hub.number)],
        };
        let sent = first.into_iter().all(|event| tx.try_send(event).is_ok());
        if sent && !hub.closed {
            // Those that went away since the last change go now: a client that reconnects in a
            // loop while nothing changes would pile them up.
            hub.subscribers.retain(|tx| !tx.is_closed());
            hub.subscribers.push(tx);
        }
        rx
    }

    fn numbered(&self, number: u64) -> Numbered {
        Numbered {
            number,
            status: self.status.borrow().clone(),
        }
    }

    /// The owner id of the elector watched: the numbers count its changes, and no other's.
    pub fn owner(&self) -> String {
        self.status.borrow().owner.clone()
    }

    /// Whether the elector has stopped: a stream that ended will not be followed by more.
    pub fn is_closed(&self) -> bool {
        locked(&self.hub).closed
    }

    /// How many watchers are subscribed.
    pub fn count(&self) -> usize {
        locked(&self.hub).subscribers.len()
    }

    /// Sends the current status to every watcher if its role, leader, token or candidacy
    /// changed since the last event. The status is read under the hub's lock, so events go out
    /// in the order of the status's versions whoever calls this.
    pub(super) fn publish(&self) {
        self.publish_in(&mut locked(&self.hub));
    }

    fn publish_in(&self, hub: &mut Hub) {
        let status = {
            let current = self.status.borrow();
            if hub.last.as_ref().is_some_and(|k| k.matches(&current)) {
                return;
            }
            current.clone()
        };
        hub.last = Some(Key::of(&status));
        hub.number += 1;
        let event = Numbered {
            number: hub.number,
            status,
        };
        if hub.history.len() == HISTORY {
            hub.history.pop_front();
        }
        hub.history.push_back(event.clone());
        let status = &event.status;
        hub.subscribers
            .retain(|tx| match tx.try_send(event.clone()) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    debug!(
                        identity = %status.identity,
                        lease = %status.lease,
                        "dropping a watcher that fell behind"
                    );
                    false
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            });
    }

    /// Ends every stream after the events it holds (the elector has stopped), so that the HTTP
    /// server's graceful shutdown does not wait for watchers that never hang up.
    pub(super) fn close(&self) {
        let mut hub = locked(&self.hub);
        hub.closed = true;
        hub.subscribers.clear();
    }
}

/// A kept change as a replay shows it, `now` the current status: a term that has ended since
/// reads as over however far off its deadline was (a handover, a shutdown, a lost renewal end
/// it early), and one that goes on has the deadline of its last renewal.
fn replayed(kept: &mut Shown, now: &Shown) {
    let Role::Leader {
        token,
        valid_until,
        lead,
        ..
    } = &mut kept.role
    else {
        return;
    };
    match now.role {
        Role::Leader {
            token: current,
            valid_until: renewed,
            lead: set,
            ..
        } if current == *token => (*valid_until, *lead) = (renewed, set),
        _ => *valid_until = BootInstant::from_since_boot(Duration::ZERO),
    }
}

#[cfg(test)]
mod tests;
