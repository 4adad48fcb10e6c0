//! The guard file as a subscriber of the elector's term hooks: published when a term begins
//! and at each renewal, zeroed first thing when it ends.

use std::sync::Arc;

use tracing::warn;

use super::GuardFile;
use crate::clock::{BootInstant, WallLead};
use crate::elector::{StepDownReason, TermHooks};
use crate::lease::FencingToken;

/// The hooks that keep `guard` in step with this replica's terms (`identity` names it in the
/// logs).
pub struct GuardHooks {
    guard: Arc<GuardFile>,
    identity: String,
}

impl GuardHooks {
    /// Hooks writing `guard` for the replica `identity`.
    pub fn new(guard: Arc<GuardFile>, identity: impl Into<String>) -> Arc<Self> {
        Arc::new(Self {
            guard,
            identity: identity.into(),
        })
    }

    /// Publishes the term; when it cannot, withdraws what the file holds, which may be an earlier
    /// deadline of the term, later than the one this renewal measured.
    fn publish(&self, token: FencingToken, valid_until: BootInstant, lead: WallLead) {
        let Err(err) = self.guard.publish(token, valid_until, lead) else {
            return;
        };
        let withdrawn = self.withdraw().is_none_or(|(_, removed)| removed);
        warn!(
            identity = %self.identity,
            lease = %self.guard.lease(),
            token = token.0,
            path = %self.guard.path().display(),
            error = %err,
            withdrawn,
            "could not publish the term in the guard file; the command's checks refuse until the next renewal publishes it"
        );
    }

    /// Zeroes the file, else removes it: `None` when zeroed, else why not and whether it is gone.
    fn withdraw(&self) -> Option<(std::io::Error, bool)> {
        let err = self.guard.revoke().err()?;
        let removed = match std::fs::remove_file(self.guard.path()) {
            Err(e) => e.kind() == std::io::ErrorKind::NotFound,
            Ok(()) => true,
        };
        Some((err, removed))
    }
}

impl TermHooks for GuardHooks {
    fn began(&self, token: FencingToken, valid_until: BootInstant, lead: WallLead) {
        self.publish(token, valid_until, lead);
    }

    fn extended(&self, token: FencingToken, valid_until: BootInstant, lead: WallLead) {
        self.publish(token, valid_until, lead);
    }

    fn ending(&self, token: FencingToken, _reason: StepDownReason) {
        let Some((err, removed)) = self.withdraw() else {
            return;
        };
        warn!(
            identity = %self.identity,
            lease = %self.guard.lease(),
            token = token.0,
            path = %self.guard.path().display(),
            error = %err,
            removed,
            "could not zero the guard file; removed it instead (unless removed = false: then it holds the term until its deadline)"
        );
    }
}
