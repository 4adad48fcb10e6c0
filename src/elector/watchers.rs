//! The elector's status, and its one way in: every writer changes it through a
//! [`StatusBoard`], which pushes it to the watchers (server-sent events, the status file) in the
//! same step when its role, leader, token or candidacy changed. Publishing never waits: each
//! watcher has a bounded buffer, and a watcher whose buffer is full is dropped, not waited for.
//!
//! Every change gets the next number of this process's count, so that a watcher that comes back
//! after it names the last one it had is given the changes it missed, from the last few kept
//! ([`HISTORY`]); one that names nothing, another process's event, or one too old starts from
//! the current status, as any new watcher does.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::{Candidacy, Observer, Role, Status};
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
                    became_unhealthy = newly_unhealthy(&s.candidacy, &now);
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

/// How many of the last changes are kept for watchers that come back.
pub const HISTORY: usize = 16;

/// A status as an event: its number counts the changes this process published (the first is
/// 1; 0 is the status before any).
#[derive(Debug, Clone, PartialEq)]
pub struct Numbered {
    /// The number of the change this status is (or, for a new watcher's first event, the last
    /// change published before it).
    pub number: u64,
    /// The status.
    pub status: Status,
}

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
    status: watch::Receiver<Status>,
    hub: Arc<Mutex<Hub>>,
}

impl Watchers {
    pub(crate) fn new(status: watch::Receiver<Status>) -> Self {
        Self {
            status,
            hub: Arc::new(Mutex::new(Hub {
                last: None,
                number: 0,
                history: VecDeque::with_capacity(HISTORY),
                subscribers: Vec::new(),
                closed: false,
            })),
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
        let mut hub = self.lock();
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
            // Up to date already: the current status once more, under its number.
            Some(missed) if missed.is_empty() => vec![self.numbered(hub.number)],
            Some(missed) => missed,
            None => vec![self.numbered(hub.number)],
        };
        let sent = first.into_iter().all(|event| tx.try_send(event).is_ok());
        if sent && !hub.closed {
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

/// Whether the candidate check has just put this replica out (the metric counts these).
fn newly_unhealthy(before: &Candidacy, now: &Candidacy) -> bool {
    matches!(now, Candidacy::Unhealthy { .. }) && !matches!(before, Candidacy::Unhealthy { .. })
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
        assert_eq!(rx.try_recv().map(|e| e.status.role), Ok(Role::Starting));
        tx.modify(|s| s.role = leader(7));
        assert_eq!(
            rx.try_recv().map(|e| e.status.token()),
            Ok(Some(FencingToken(7)))
        );
        // A renewal moves only the deadline: no event.
        tx.modify(|s| s.role = leader(7));
        assert!(rx.try_recv().is_err());
        tx.modify(|s| s.candidacy = Candidacy::Healthy);
        assert_eq!(
            rx.try_recv().map(|e| e.status.candidacy),
            Ok(Candidacy::Healthy)
        );
    }

    #[test]
    fn a_watcher_that_falls_behind_is_dropped_and_the_others_keep_theirs() {
        let tx = StatusBoard::new(status(Role::Starting));
        let watchers = tx.watchers().clone();
        let mut slow = watchers.subscribe(2);
        let mut quick = watchers.subscribe(2);
        assert_eq!(quick.try_recv().map(|e| e.status.role), Ok(Role::Starting));
        for token in 1..=3 {
            tx.modify(|s| s.role = leader(token));
            assert_eq!(
                quick.try_recv().map(|e| e.status.token()),
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
        assert_eq!(early.try_recv().map(|e| e.status.role), Ok(Role::Starting));
        assert_eq!(early.try_recv().map(|e| e.status.role), Ok(Role::Stopped));
        assert_eq!(
            early.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        );
        let mut late = watchers.subscribe(4);
        assert_eq!(late.try_recv().map(|e| e.status.role), Ok(Role::Stopped));
        assert_eq!(
            late.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        );
    }

    #[test]
    fn a_watcher_that_comes_back_gets_the_changes_it_missed_or_the_current_status() {
        let tx = StatusBoard::new(status(Role::Starting));
        let watchers = tx.watchers().clone();
        for token in 1..=20 {
            tx.modify(|s| s.role = leader(token));
        }
        let numbers = |mut rx: mpsc::Receiver<Numbered>| {
            let mut seen = Vec::new();
            while let Ok(e) = rx.try_recv() {
                seen.push((e.number, e.status.token().map(|t| t.0)));
            }
            seen
        };
        // Change n is the status with token n.
        assert_eq!(
            numbers(watchers.resume(16, Some(17))),
            [(18, Some(18)), (19, Some(19)), (20, Some(20))]
        );
        assert_eq!(
            numbers(watchers.resume(16, Some(20))),
            [(20, Some(20))],
            "up to date: the current status once more"
        );
        // Kept: the last 16, 5 to 20; after 4 every one of them is there.
        assert_eq!(numbers(watchers.resume(16, Some(4))).len(), 16);
        for gone in [Some(3), Some(0), Some(21), None] {
            assert_eq!(
                numbers(watchers.resume(16, gone)),
                [(20, Some(20))],
                "{gone:?}: only the current status"
            );
        }
        // Missed more than the buffer holds: the current status.
        assert_eq!(numbers(watchers.resume(2, Some(10))), [(20, Some(20))]);
        // A resumed watcher gets the changes after, numbered on.
        let mut rx = watchers.resume(16, Some(19));
        tx.modify(|s| s.role = leader(21));
        assert_eq!(rx.try_recv().map(|e| e.number), Ok(20));
        assert_eq!(
            rx.try_recv().map(|e| (e.number, e.status.token())),
            Ok((21, Some(FencingToken(21))))
        );
    }

    #[test]
    fn the_candidate_check_counts_each_fall_into_unhealthy_once() {
        let unhealthy = |r: &str| Candidacy::Unhealthy { reason: r.into() };
        let pending = Candidacy::Pending {
            reason: "initial delay".into(),
        };
        // (before, now) -> newly unhealthy
        let cases = [
            (
                Candidacy::Healthy,
                unhealthy("probe failed"),
                true,
                "healthy to unhealthy",
            ),
            (
                pending.clone(),
                unhealthy("probe failed"),
                true,
                "pending to unhealthy",
            ),
            (
                Candidacy::Unchecked,
                unhealthy("x"),
                true,
                "unchecked to unhealthy",
            ),
            (
                unhealthy("a"),
                unhealthy("b"),
                false,
                "new words, the same fall",
            ),
            (
                unhealthy("a"),
                Candidacy::Healthy,
                false,
                "recovering is not a fall",
            ),
            (
                Candidacy::Healthy,
                pending,
                false,
                "pending is not unhealthy",
            ),
        ];
        for (before, now, want, why) in cases {
            assert_eq!(newly_unhealthy(&before, &now), want, "{why}");
        }
    }
}
