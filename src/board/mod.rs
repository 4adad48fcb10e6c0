//! What a replica shows (`/leader`, its event stream, `/readyz`, the status file): the
//! elector's status as the core keeps it, and what the product's gates add to it (the candidate
//! check's verdict, Redis's eviction policy). The [`Board`] hears every change of the elector's
//! status as a term hook, in order, and takes the gates' changes beside them; each change that
//! matters to a watcher goes to the [`Watchers`] in the same step.

pub(crate) mod shown;
mod watchers;

use tokio::sync::watch;

use crate::elector::{Role, Status, TermHooks};
pub use shown::{Blocked, BlockingKey, Candidacy, Eviction, EvictionRefusal, Shown};
pub use watchers::{HISTORY, Numbered, Watchers};

/// What the gates outside the core tell besides the board (the metrics count them).
pub trait GateHooks: Send + Sync + 'static {
    /// Redis's eviction policy was read: `policy` is `maxmemory-policy` as Redis names it, and
    /// `may_evict` says whether it can evict the lease (a `maxmemory` is set and the policy is
    /// not `noeviction`).
    fn eviction_policy(&self, _policy: &str, _may_evict: bool) {}
    /// The candidate check has just put this replica out of the election.
    fn candidate_unhealthy(&self) {}
}

/// Nobody to tell.
impl GateHooks for () {}

/// What a replica shows and its watchers: the one way to change it. Cheap to clone; all clones
/// share both. Add it to the elector with
/// [`Elector::with_hooks`](crate::elector::Elector::with_hooks).
#[derive(Clone)]
pub struct Board {
    shown: watch::Sender<Shown>,
    watchers: Watchers,
}

impl Board {
    /// A board starting from the elector's current `status`.
    pub fn new(status: Status) -> Self {
        let shown = watch::Sender::new(Shown::of(status));
        Self {
            watchers: Watchers::new(shown.subscribe()),
            shown,
        }
    }

    /// Changes what is shown where `change` says it changed anything, and tells the watchers in
    /// the same step; whether it did.
    pub fn modify_if(&self, change: impl FnOnce(&mut Shown) -> bool) -> bool {
        let changed = self.shown.send_if_modified(change);
        if changed {
            self.watchers.publish();
        }
        changed
    }

    /// A live view of what is shown.
    pub fn subscribe(&self) -> watch::Receiver<Shown> {
        self.shown.subscribe()
    }

    /// The watchers: server-sent events, the status file.
    pub fn watchers(&self) -> &Watchers {
        &self.watchers
    }
}

impl TermHooks for Board {
    fn status(&self, status: &Status) {
        // The core tells only changes: no comparison needed here.
        self.modify_if(|s| {
            s.told(status);
            true
        });
        if status.role == Role::Stopped {
            // The elector has stopped: the streams end after what they hold.
            self.watchers.close();
        }
    }

    fn cooldown_started(&self) {
        self.modify_if(|s| {
            s.reckon_cooldown();
            true
        });
    }
}
