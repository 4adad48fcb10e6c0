//! The elector's status, and its one way in: every writer changes it through a
//! [`StatusBoard`], which pushes it to the watchers (server-sent events, the status file) in the
//! same step when its role, leader, token or candidacy changed. Publishing never waits: each
//! watcher has a bounded buffer, and a watcher whose buffer is full is dropped, not waited for.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::{Candidacy, Observer, Role, Status, decide};
use crate::lease::FencingToken;

/// What a watcher is told about: a change in any of these is an event.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Key {
    role: &'static str,
    leader: Option<String>,
    token: Option<FencingToken>,
    candidacy: Candidacy,
}

impl Key {
    fn of(status: &Status) -> Self {
        Self {
            role: role_name(status),
            leader: status.leader_identity().map(str::to_owned),
            token: status.token(),
            candidacy: status.candidacy.clone(),
        }
    }

    /// Whether `status` has this key, without copying it (most changes, renewals among them,
    /// do not change it).
    fn matches(&self, status: &Status) -> bool {
        self.role == role_name(status)
            && self.leader.as_deref() == status.leader_identity()
            && self.token == status.token()
            && self.candidacy == status.candidacy
    }
}

fn role_name(status: &Status) -> &'static str {
    match status.role {
        Role::Starting => "starting",
        Role::Follower { .. } => "follower",
        Role::Leader { .. } => "leader",
        Role::Stopped => "stopped",
    }
}

/// The status and its watchers: the one way to change the status. Cheap to clone.
#[derive(Clone)]
pub(crate) struct StatusBoard {
    status: watch::Sender<Status>,
    watchers: Watchers,
}

impl StatusBoard {
    pub fn new(status: Status) -> Self {
        let status = watch::Sender::new(status);
        Self {
            watchers: Watchers::new(status.subscribe()),
            status,
        }
    }

    /// Changes the status and tells the watchers, in this step (becoming leader and stepping
    /// down must not wait for another task's turn).
    pub fn modify(&self, change: impl FnOnce(&mut Status)) {
        self.status.send_modify(change);
        self.watchers.publish();
    }

    /// [`modify`](Self::modify) where `change` says whether it changed anything; whether it did.
    pub fn modify_if(&self, change: impl FnOnce(&mut Status) -> bool) -> bool {
        let changed = self.status.send_if_modified(change);
        if changed {
            self.watchers.publish();
        }
        changed
    }

    pub fn borrow(&self) -> watch::Ref<'_, Status> {
        self.status.borrow()
    }

    pub fn subscribe(&self) -> watch::Receiver<Status> {
        self.status.subscribe()
    }

    pub fn watchers(&self) -> &Watchers {
        &self.watchers
    }

    /// Keeps the status's candidacy in step with the candidate check's, counting each time the
    /// check turns this replica unhealthy, until `stop` is cancelled or the check is gone. The
    /// follower loop (no contending while the check keeps this replica out) and the leader's
    /// term (step down with reason `unhealthy`) read it there.
    pub fn follow_candidacy(
        &self,
        mut candidacy: watch::Receiver<Candidacy>,
        observer: Arc<dyn Observer>,
        stop: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let board = self.clone();
        tokio::spawn(async move {
            loop {
                let now = candidacy.borrow_and_update().clone();
                let mut became_unhealthy = false;
                board.modify_if(|s| {
                    if s.candidacy == now {
                        return false;
                    }
                    became_unhealthy = decide::newly_unhealthy(&s.candidacy, &now);
                    s.candidacy = now.clone();
                    true
                });
                if became_unhealthy {
                    observer.candidate_unhealthy();
                }
                tokio::select! {
                    biased;
                    _ = stop.cancelled() => return,
                    changed = candidacy.changed() => if changed.is_err() { return },
                }
            }
        })
    }
}

struct Hub {
    /// The key of the last event sent.
    last: Option<Key>,
    subscribers: Vec<mpsc::Sender<Status>>,
    /// The elector has stopped: no more events, and streams end after what they have.
    closed: bool,
}

/// The watchers of one elector. Cheap to clone; all clones share the watchers.
#[derive(Clone)]
pub struct Watchers {
    status: watch::Receiver<Status>,
    hub: Arc<Mutex<Hub>>,
}

impl Watchers {
    pub(crate) fn new(status: watch::Receiver<Status>) -> Self {
        Self {
            status,
            hub: Arc::new(Mutex::new(Hub {
                last: None,
                subscribers: Vec::new(),
                closed: false,
            })),
        }
    }

    /// A new watcher with room for `buffer` events (at least one). Its first event is the
    /// current status, at once; the channel closes when the watcher fell `buffer` events behind
    /// (it was dropped) or the elector is gone.
    pub fn subscribe(&self, buffer: usize) -> mpsc::Receiver<Status> {
        let (tx, rx) = mpsc::channel(buffer.max(1));
        let mut hub = self.lock();
        // Under the lock: no event can fall between this first one and the next.
        if tx.try_send(self.status.borrow().clone()).is_ok() && !hub.closed {
            hub.subscribers.push(tx);
        }
        rx
    }

    /// Whether the elector has stopped: a stream that ended will not be followed by more.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// How many watchers are subscribed.
    pub fn count(&self) -> usize {
        self.lock().subscribers.len()
    }

    /// Sends the current status to every watcher if its role, leader, token or candidacy
    /// changed since the last event. The status is read under the hub's lock, so events go out
    /// in the order of the status's versions whoever calls this.
    fn publish(&self) {
        let mut hub = self.lock();
        let status = {
            let current = self.status.borrow();
            if hub.last.as_ref().is_some_and(|k| k.matches(&current)) {
                return;
            }
            current.clone()
        };
        hub.last = Some(Key::of(&status));
        hub.subscribers
            .retain(|tx| match tx.try_send(status.clone()) {
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
    pub(crate) fn close(&self) {
        let mut hub = self.lock();
        hub.closed = true;
        hub.subscribers.clear();
    }

    fn lock(&self) -> MutexGuard<'_, Hub> {
        // The hub's state stays consistent whatever panicked while holding it.
        self.hub.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elector::RedisHealth;

    fn status(role: Role) -> Status {
        Status {
            lease: "ns/app".into(),
            identity: "a".into(),
            owner: "a-x".into(),
            role,
            transitions: 0,
            last_step_down: None,
            redis: RedisHealth::default(),
            candidacy: Candidacy::Unchecked,
        }
    }

    fn leader(token: u64) -> Role {
        Role::Leader {
            token: FencingToken(token),
            acquired_at: std::time::SystemTime::now(),
            valid_until: crate::clock::BootInstant::now(),
        }
    }

    #[test]
    fn a_watcher_gets_the_current_status_at_once_and_every_change_after() {
        let tx = StatusBoard::new(status(Role::Starting));
        let watchers = tx.watchers().clone();
        let mut rx = watchers.subscribe(4);
        assert_eq!(rx.try_recv().map(|s| s.role), Ok(Role::Starting));
        tx.modify(|s| s.role = leader(7));
        assert_eq!(rx.try_recv().map(|s| s.token()), Ok(Some(FencingToken(7))));
        // A renewal moves only the deadline: no event.
        tx.modify(|s| s.role = leader(7));
        assert!(rx.try_recv().is_err());
        tx.modify(|s| s.candidacy = Candidacy::Healthy);
        assert_eq!(rx.try_recv().map(|s| s.candidacy), Ok(Candidacy::Healthy));
    }

    #[test]
    fn a_watcher_that_falls_behind_is_dropped_and_the_others_keep_theirs() {
        let tx = StatusBoard::new(status(Role::Starting));
        let watchers = tx.watchers().clone();
        let mut slow = watchers.subscribe(2);
        let mut quick = watchers.subscribe(2);
        assert_eq!(quick.try_recv().map(|s| s.role), Ok(Role::Starting));
        for token in 1..=3 {
            tx.modify(|s| s.role = leader(token));
            assert_eq!(
                quick.try_recv().map(|s| s.token()),
                Ok(Some(FencingToken(token)))
            );
        }
        assert_eq!(watchers.count(), 1, "the slow watcher is dropped");
        // It keeps what it had, then learns that it was dropped.
        assert!(slow.try_recv().is_ok());
        assert!(slow.try_recv().is_ok());
        assert_eq!(
            slow.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        );
    }

    #[test]
    fn closing_ends_every_stream_after_its_events_and_a_late_watcher_gets_one() {
        let tx = StatusBoard::new(status(Role::Starting));
        let watchers = tx.watchers().clone();
        let mut early = watchers.subscribe(4);
        tx.modify(|s| s.role = Role::Stopped);
        watchers.close();
        assert!(watchers.is_closed());
        assert_eq!(early.try_recv().map(|s| s.role), Ok(Role::Starting));
        assert_eq!(early.try_recv().map(|s| s.role), Ok(Role::Stopped));
        assert_eq!(
            early.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        );
        let mut late = watchers.subscribe(4);
        assert_eq!(late.try_recv().map(|s| s.role), Ok(Role::Stopped));
        assert_eq!(
            late.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        );
    }
}
