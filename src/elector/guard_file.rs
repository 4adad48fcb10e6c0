//! The elector's hooks into the guard file: the term published when it begins and after each
//! renewal, zeroed first at step-down (docs/DESIGN.md, "Readers outside leasehold").

use std::sync::Arc;

use tracing::warn;

use super::Elector;
use crate::clock::BootInstant;
use crate::guard::GuardFile;
use crate::lease::FencingToken;

impl Elector {
    /// Publishes each term (token and validity deadline) in `guard`, for a command or sidecar
    /// that checks it itself: written when a term begins, before the work starts, and after
    /// every renewal; zeroed at step-down before anything else. The deadlines are the elector's
    /// clock's (the boot clock unless a test shifted it).
    pub fn with_guard_file(mut self, guard: Arc<GuardFile>) -> Self {
        self.guard_file = Some(guard);
        self
    }

    /// The term `token` is valid until `valid_until`. A failed write leaves the previous record
    /// (zeroed, or an earlier deadline of this term): the command's checks refuse sooner, never
    /// later.
    pub(super) fn publish_term(&self, token: FencingToken, valid_until: BootInstant) {
        if let Some(guard) = &self.guard_file
            && let Err(err) = guard.publish(token, valid_until)
        {
            warn!(
                identity = %self.lease.owner().identity(),
                lease = %self.lease.name(),
                token = token.0,
                path = %guard.path().display(),
                error = %err,
                "could not publish the term in the guard file; the command's checks refuse until the next renewal publishes it"
            );
        }
    }

    /// The term ended: zero the record, or else remove the file (which needs no space).
    pub(super) fn zero_guard_file(&self, token: FencingToken) {
        let Some(guard) = &self.guard_file else {
            return;
        };
        let Err(err) = guard.revoke() else { return };
        let removed = std::fs::remove_file(guard.path());
        warn!(
            identity = %self.lease.owner().identity(),
            lease = %self.lease.name(),
            token = token.0,
            path = %guard.path().display(),
            error = %err,
            removed = removed.is_ok(),
            "could not zero the guard file; removed it instead (unless removed = false: then it holds the term until its deadline)"
        );
    }
}
