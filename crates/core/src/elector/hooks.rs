//! The term hooks: what the elector tells the parts outside its loop, in order, as it happens:
//! a term's four moments, what it saw on the way, and every change of the status.

use std::sync::Arc;
use std::time::Duration;

use super::decide::RateBound;
use super::{Status, StepDownReason};
use crate::clock::{BootInstant, WallLead};
use crate::lease::{Acquired, FencingToken, LeaseError};

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

/// Hooks called on the elector's task, synchronously and in the order of the elector's steps:
/// a hook that returns has done its part before the next step (the work starts after
/// `began`; the term is revoked after `ending`). They must not block for long: the watchdog
/// waits. Every method has an empty default.
pub trait TermHooks: Send + Sync + 'static {
    /// A term began and is valid until `valid_until` on the boot clock, under `lead` as read
    /// before its acquire was sent (docs/DESIGN.md, "Pauses the boot clock did not count"): on
    /// the wall clock it ends at `lead.wall_at(valid_until)`. Called before the work starts.
    fn began(&self, _token: FencingToken, _valid_until: BootInstant, _lead: WallLead) {}
    /// A renewal moved the term's validity deadline to `valid_until`, under `lead` as read
    /// before the renewal was sent (as for [`began`](Self::began)).
    fn extended(&self, _token: FencingToken, _valid_until: BootInstant, _lead: WallLead) {}
    /// The term ends for `reason`: the first step of the step-down (docs/DESIGN.md, "Step-down").
    /// `false` when what the hook published of the term, saying it is valid, could not be
    /// withdrawn (a file on a filesystem that stopped answering): the lease is then released
    /// only once the term's deadline passed (at shutdown not at all: it expires).
    fn ending(&self, _token: FencingToken, _reason: StepDownReason) -> bool {
        true
    }
    /// The step-down is over: the work stopped and the lease was released if it may still
    /// have been ours (`released`: and its release was announced).
    fn ended(&self, _token: FencingToken, _reason: StepDownReason, _released: bool) {}
    /// A renewal finished after `latency`.
    fn renewal(&self, _outcome: RenewalOutcome, _latency: Duration) {}
    /// A renewal bounded the rate of Redis's clock against the boot clock anew.
    fn clock_rate(&self, _bound: RateBound) {}
    /// A follower's try was answered with `acquired` (a holder, a reservation, keys in a
    /// newer protocol: what a person may have to hear of).
    fn tried(&self, _acquired: &Acquired) {}
    /// A Redis call failed.
    fn redis_error(&self, _op: &'static str, _error: &LeaseError) {}
    /// This replica's acquire found that Redis lost its data (or is new) and started the cooldown.
    fn cooldown_started(&self) {}
    /// The loop is at a turn and will be back within `wait` plus one bounded call (`None`: it
    /// waits for an event without a bound of its own, such as a gate's, or it has stopped).
    /// Told at every turn: a liveness check compares it with the time.
    fn beat(&self, _wait: Option<Duration>) {}
    /// The status changed to `status` (every change, renewals among them, in the order of its
    /// versions): told under the status's lock, so it must be quick and must not read the
    /// elector's status itself.
    fn status(&self, _status: &Status) {}
}

/// The hooks an elector calls, in the order they were added.
#[derive(Clone, Default)]
pub(super) struct Hooks(Vec<Arc<dyn TermHooks>>);

impl Hooks {
    pub(super) fn add(&mut self, hooks: Arc<dyn TermHooks>) {
        self.0.push(hooks);
    }

    pub(super) fn each(&self, mut f: impl FnMut(&dyn TermHooks)) {
        for hooks in &self.0 {
            f(hooks.as_ref());
        }
    }
}
