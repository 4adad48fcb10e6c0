//! The observer hooks: what the elector tells metrics (renewals, transitions, Redis errors, the
//! eviction policy, the candidate check), and the observer that listens to nothing.

use std::time::Duration;

use super::StepDownReason;
use crate::lease::{FencingToken, LeaseError};

/// The outcome of one renewal, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RenewalOutcome {
    /// The lease was ours and was extended.
    Renewed,
    /// The lease was not ours any more.
    Lost,
    /// No answer, or an error.
    Failed,
}

impl RenewalOutcome {
    /// A stable label.
    pub fn as_label(self) -> &'static str {
        match self {
            RenewalOutcome::Renewed => "renewed",
            RenewalOutcome::Lost => "lost",
            RenewalOutcome::Failed => "failed",
        }
    }
}

/// Hooks for metrics. Every method has an empty default; they are called on the elector's task
/// and must not block.
pub trait Observer: Send + Sync + 'static {
    /// A renewal finished after `latency`.
    fn renewal(&self, _outcome: RenewalOutcome, _latency: Duration) {}
    /// This replica became leader.
    fn acquired(&self, _token: FencingToken) {}
    /// This replica stepped down.
    fn stepped_down(&self, _reason: StepDownReason) {}
    /// A Redis call failed.
    fn redis_error(&self, _op: &'static str, _error: &LeaseError) {}
    /// Redis's eviction policy was read: `policy` is `maxmemory-policy` as Redis names it, and
    /// `may_evict` says whether it can evict the lease (a `maxmemory` is set and the policy is
    /// not `noeviction`).
    fn eviction_policy(&self, _policy: &str, _may_evict: bool) {}
    /// The candidate check has just put this replica out of the election.
    fn candidate_unhealthy(&self) {}
    /// This replica's acquire found that Redis lost its data (or is new) and started the
    /// data-loss cooldown.
    fn cooldown_started(&self) {}
}

/// The default: nobody listens.
pub(super) struct NoObserver;
impl Observer for NoObserver {}
