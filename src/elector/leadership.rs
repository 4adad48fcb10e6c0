//! The handle that leader work holds: the fencing token, a synchronous guard, and a future
//! that resolves at step-down. Only a `Leadership` can do leader things.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use super::StepDownReason;
use crate::clock::{BootInstant, SharedClock};
use crate::lease::{FencingToken, Grant};

/// Proof of leadership, handed to the leader's work for one term.
///
/// Call [`check`](Leadership::check) right before every side effect and pass the token along
/// with the write. A pause can fall between the check and the write; a resource that refuses
/// tokens lower than the highest it has seen closes that gap.
#[derive(Clone, Debug)]
pub struct Leadership {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    token: FencingToken,
    lease: String,
    identity: String,
    acquired_at: BootInstant,
    /// The validity deadline in nanoseconds of the boot clock; 0 once revoked.
    valid_until: AtomicU64,
    reason: OnceLock<StepDownReason>,
    cancel: CancellationToken,
    clock: SharedClock,
}

/// Why [`Leadership::check`] refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotLeader {
    /// The validity deadline passed (a pause, or renewals that did not get through in time).
    #[error(
        "not the leader of lease `{lease}` (token {token}): validity deadline passed {late:?} ago"
    )]
    ValidityDeadlinePassed {
        /// The lease.
        lease: String,
        /// The token of the term that ended.
        token: FencingToken,
        /// How long ago the deadline passed.
        late: Duration,
    },
    /// The elector stepped down.
    #[error("not the leader of lease `{lease}` (token {token}): stepped down ({reason})")]
    SteppedDown {
        /// The lease.
        lease: String,
        /// The token of the term that ended.
        token: FencingToken,
        /// Why.
        reason: StepDownReason,
    },
}

fn nanos(t: BootInstant) -> u64 {
    // Boot time in nanoseconds fits u64 for 584 years; never 0 after boot.
    u64::try_from(t.since_boot().as_nanos())
        .unwrap_or(u64::MAX)
        .max(1)
}

impl Leadership {
    pub(crate) fn new(
        grant: &Grant,
        valid_until: BootInstant,
        lease: &str,
        identity: &str,
        clock: SharedClock,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                token: grant.token,
                lease: lease.to_owned(),
                identity: identity.to_owned(),
                acquired_at: grant.sent_at,
                valid_until: AtomicU64::new(nanos(valid_until)),
                reason: OnceLock::new(),
                cancel: CancellationToken::new(),
                clock,
            }),
        }
    }

    /// The fencing token of this term.
    pub fn token(&self) -> FencingToken {
        self.inner.token
    }

    /// The lease name.
    pub fn lease(&self) -> &str {
        &self.inner.lease
    }

    /// Our identity.
    pub fn identity(&self) -> &str {
        &self.inner.identity
    }

    /// The instant just before the acquire of this term was sent.
    pub fn acquired_at(&self) -> BootInstant {
        self.inner.acquired_at
    }

    /// The guard: `Ok(token)` while this term is valid, refused once the elector stepped down
    /// or the validity deadline passed, even when the watchdog has not woken up yet (after a
    /// pause, the work may run before the watchdog does). Synchronous and cheap: call it right
    /// before each side effect.
    pub fn check(&self) -> Result<FencingToken, NotLeader> {
        let until = self.inner.valid_until.load(Ordering::SeqCst);
        if until == 0 {
            return Err(self.stepped_down());
        }
        let now = self.inner.clock.now();
        let deadline = BootInstant::from_since_boot(Duration::from_nanos(until));
        if now >= deadline {
            return Err(NotLeader::ValidityDeadlinePassed {
                lease: self.inner.lease.clone(),
                token: self.inner.token,
                late: now.saturating_duration_since(deadline),
            });
        }
        Ok(self.inner.token)
    }

    /// The validity deadline, or `None` once revoked.
    pub fn valid_until(&self) -> Option<BootInstant> {
        match self.inner.valid_until.load(Ordering::SeqCst) {
            0 => None,
            n => Some(BootInstant::from_since_boot(Duration::from_nanos(n))),
        }
    }

    /// Time left before the validity deadline (zero once it passed or the term ended).
    pub fn remaining(&self) -> Duration {
        self.valid_until()
            .map_or(Duration::ZERO, |until| self.inner.clock.now().until(until))
    }

    /// Resolves when this term ends (step-down, for any reason). Select on it in long work.
    pub fn lost(&self) -> WaitForCancellationFuture<'_> {
        self.inner.cancel.cancelled()
    }

    /// A token cancelled when this term ends, for tasks the work spawns.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.inner.cancel.child_token()
    }

    /// Whether the term has ended.
    pub fn is_lost(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }

    /// Why the term ended, once it has.
    pub fn step_down_reason(&self) -> Option<StepDownReason> {
        self.inner.reason.get().copied()
    }

    /// Moves the validity deadline forward after a renewal (never backward, never after the
    /// term was revoked).
    pub(crate) fn extend(&self, until: BootInstant) {
        let new = nanos(until);
        let _ =
            self.inner
                .valid_until
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |current| {
                    (current != 0 && new > current).then_some(new)
                });
    }

    /// Ends the term: the guard refuses from this instant on. Cancellation of the work is a
    /// separate step ([`cancel`](Self::cancel)) so that the step-down order stays explicit.
    pub(crate) fn revoke(&self, reason: StepDownReason) {
        let _ = self.inner.reason.set(reason);
        self.inner.valid_until.store(0, Ordering::SeqCst);
    }

    pub(crate) fn cancel(&self) {
        self.inner.cancel.cancel();
    }

    fn stepped_down(&self) -> NotLeader {
        NotLeader::SteppedDown {
            lease: self.inner.lease.clone(),
            token: self.inner.token,
            reason: self
                .inner
                .reason
                .get()
                .copied()
                .unwrap_or(StepDownReason::Shutdown),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ShiftedClock;

    fn leadership(clock: &ShiftedClock, valid_for: Duration) -> Leadership {
        use crate::clock::Clock;
        let now = clock.now();
        let grant = Grant {
            token: FencingToken(9),
            sent_at: now,
            ttl: valid_for,
        };
        Leadership::new(
            &grant,
            now.saturating_add(valid_for),
            "ns/app",
            "pod-a",
            Arc::new(clock.clone()),
        )
    }

    #[test]
    fn check_passes_while_valid() {
        let clock = ShiftedClock::new();
        let l = leadership(&clock, Duration::from_secs(10));
        assert_eq!(l.check(), Ok(FencingToken(9)));
        assert!(l.remaining() > Duration::from_secs(9));
    }

    #[test]
    fn check_refuses_after_a_suspend_before_any_watchdog_runs() {
        let clock = ShiftedClock::new();
        let l = leadership(&clock, Duration::from_secs(10));
        clock.advance(Duration::from_secs(3600));
        let err = l.check().unwrap_err();
        assert!(
            matches!(err, NotLeader::ValidityDeadlinePassed { .. }),
            "{err}"
        );
        assert!(
            err.to_string().contains("validity deadline passed"),
            "{err}"
        );
        assert_eq!(l.remaining(), Duration::ZERO);
    }

    #[test]
    fn revoke_refuses_at_once_and_extend_cannot_undo_it() {
        let clock = ShiftedClock::new();
        let l = leadership(&clock, Duration::from_secs(10));
        l.revoke(StepDownReason::Lost);
        l.extend(BootInstant::now().saturating_add(Duration::from_secs(100)));
        let err = l.check().unwrap_err();
        assert_eq!(
            err.to_string(),
            "not the leader of lease `ns/app` (token 9): stepped down (lease lost)"
        );
        assert_eq!(l.valid_until(), None);
        assert!(!l.is_lost(), "revoking and cancelling are separate steps");
        l.cancel();
        assert!(l.is_lost());
    }

    #[test]
    fn extend_only_moves_forward() {
        let clock = ShiftedClock::new();
        let l = leadership(&clock, Duration::from_secs(10));
        let before = l.valid_until().unwrap();
        l.extend(before.saturating_sub(Duration::from_secs(5)));
        assert_eq!(l.valid_until(), Some(before));
        l.extend(before.saturating_add(Duration::from_secs(5)));
        assert_eq!(
            l.valid_until(),
            Some(before.saturating_add(Duration::from_secs(5)))
        );
    }
}
