//! What an elector whose `run` future is dropped in a term (a `select!` or a timeout around it,
//! its task aborted) still does, awaiting nothing: the term ends there and then.

use tokio::task::AbortHandle;
use tracing::warn;

use super::{Elector, Leadership, StepDownReason};

/// Dropped before the term's step-down ended: `check()` refuses, `lost()` fires and the work is
/// aborted first, then the hooks hear the term end (the guard file zeroed). The lease is left to
/// expire: nothing says the work's effects are over. The status is not written: the code that
/// drops the elector may hold a read of it (a `select!` branch's `watch::Ref`), and its watchers
/// see its sender gone.
pub(super) struct TermInFlight<'a> {
    pub(super) elector: &'a Elector,
    pub(super) leadership: &'a Leadership,
    pub(super) work: AbortHandle,
    pub(super) over: bool,
}

impl Drop for TermInFlight<'_> {
    fn drop(&mut self) {
        if self.over {
            return;
        }
        let (elector, token) = (self.elector, self.leadership.token());
        // Dropped in the step-down, the term is revoked and the hooks were told already.
        let told = self.leadership.step_down_reason();
        let reason = told.unwrap_or(StepDownReason::Shutdown);
        self.leadership.revoke(reason);
        self.leadership.cancel();
        self.work.abort();
        let (identity, lease) = (elector.lease.owner().identity(), elector.lease.name());
        warn!(%identity, %lease, token = token.0, reason = reason.as_label(), "the elector was dropped in a term; the work is aborted, and the lease, unless released, left to expire");
        // Unwinding from a hook's panic, telling the hooks again would panic again: an abort.
        if std::thread::panicking() {
            return;
        }
        if told.is_none() {
            elector.hooks.each(|h| _ = h.ending(token, reason));
        }
        elector.hooks.each(|h| h.ended(token, reason, false));
    }
}
