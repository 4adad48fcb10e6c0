//! What an elector whose `run` future is dropped (a `select!` or a timeout around it, its task
//! aborted) still does, awaiting nothing: a term ends there and then, the release channel's
//! reader stops, and the status says it stopped.

use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::board::{StatusBoard, set};
use super::hooks::Hooks;
use super::{Elector, Leadership, Role, StepDownReason};

/// Dropped before the term's step-down ended: the step-down's steps that need no wait, in its
/// order (the hooks, `check()`, the status, `lost()`), then the work aborted. The lease is left
/// to expire: nothing says the work's effects are over.
pub(super) struct TermInFlight<'a> {
    pub(super) elector: &'a Elector,
    pub(super) leadership: &'a Leadership,
    pub(super) work: AbortHandle,
    pub(super) over: bool,
}

impl Drop for TermInFlight<'_> {
    fn drop(&mut self) {
        let (elector, token) = (self.elector, self.leadership.token());
        if self.over {
            return;
        }
        // Dropped in the step-down, the term is revoked and the hooks were told already.
        let reason = self.leadership.step_down_reason().unwrap_or_else(|| {
            let reason = StepDownReason::Shutdown;
            elector.hooks.each(|h| _ = h.ending(token, reason));
            self.leadership.revoke(reason);
            let detail = "the elector was dropped in the term".to_owned();
            elector.stepped_down(token, reason, Some(detail));
            reason
        });
        self.leadership.cancel();
        self.work.abort();
        let (identity, lease) = (elector.lease.owner().identity(), elector.lease.name());
        warn!(%identity, %lease, token = token.0, reason = reason.as_label(), "the elector was dropped in a term; the work is aborted, and the lease left to expire");
        elector.hooks.each(|h| h.ended(token, reason, false));
    }
}

/// Ends a `run` that returns or is dropped: the release channel's reader stops, and the status
/// says `Stopped`.
pub(super) struct RunInFlight {
    pub(super) notify: CancellationToken,
    pub(super) hooks: Hooks,
    pub(super) status: StatusBoard,
}

impl Drop for RunInFlight {
    fn drop(&mut self) {
        self.notify.cancel();
        self.hooks.each(|h| h.beat(None));
        self.status.modify_if(|s| set(&mut s.role, Role::Stopped));
    }
}
