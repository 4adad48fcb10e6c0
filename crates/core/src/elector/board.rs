//! The elector's status and its one way in: every writer changes it through a [`StatusBoard`],
//! which tells the term hooks of each change in the same step ([`TermHooks::status`](super::TermHooks::status)).

use std::sync::{Arc, OnceLock};

use tokio::sync::watch;

use super::Status;
use super::hooks::Hooks;

/// The status and who hears of its changes. Cheap to clone; all clones share both.
#[derive(Clone)]
pub(crate) struct StatusBoard {
    status: watch::Sender<Status>,
    /// Set once, when the elector starts: the hooks are complete by then.
    hooks: Arc<OnceLock<Hooks>>,
}

impl StatusBoard {
    pub fn new(status: Status) -> Self {
        Self {
            status: watch::Sender::new(status),
            hooks: Arc::default(),
        }
    }

    /// From now on every change is told to `hooks`, which hear the current status at once.
    pub fn tell(&self, hooks: Hooks) {
        let hooks = self.hooks.get_or_init(|| hooks);
        let status = self.status.borrow();
        hooks.each(|h| h.status(&status));
    }

    /// Changes the status and tells the hooks, in this step (becoming leader and stepping down
    /// must not wait for another task's turn). Only for a change that always changes something:
    /// one that may repeat what is there goes through [`modify_if`](Self::modify_if), so that
    /// the hooks and watchers hear changes only.
    pub fn modify(&self, change: impl FnOnce(&mut Status)) {
        self.modify_if(|s| {
            change(s);
            true
        });
    }

    /// [`modify`](Self::modify) where `change` says whether it changed anything; whether it did.
    /// The hooks hear the change under the status's lock, so they hear the versions in order.
    pub fn modify_if(&self, change: impl FnOnce(&mut Status) -> bool) -> bool {
        self.status.send_if_modified(|s| {
            let changed = change(s);
            if changed && let Some(hooks) = self.hooks.get() {
                hooks.each(|h| h.status(s));
            }
            changed
        })
    }

    pub fn borrow(&self) -> watch::Ref<'_, Status> {
        self.status.borrow()
    }

    pub fn subscribe(&self) -> watch::Receiver<Status> {
        self.status.subscribe()
    }
}

/// Sets `field` to `value`, and says whether that changed it (for [`StatusBoard::modify_if`]).
pub(crate) fn set<T: PartialEq>(field: &mut T, value: T) -> bool {
    let changed = *field != value;
    *field = value;
    changed
}
