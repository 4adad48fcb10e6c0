//! The handle that leader work holds: the fencing token, a synchronous check (`check()`), and a
//! future that resolves at step-down. Only a `Leadership` can do leader things.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use super::StepDownReason;
use crate::clock::{BootInstant, SharedClock, WallLead};
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
    /// The validity deadline in nanoseconds of the boot clock ([`Leadership::valid_until`]).
    valid_until: AtomicU64,
    /// The wall clock's lead in nanoseconds, read before the call that set `valid_until`.
    lead: AtomicI64,
    /// Set once, at step-down; from then on `check()` refuses.
    revoked: OnceLock<StepDownReason>,
    cancel: CancellationToken,
    clock: SharedClock,
    /// A handover asked for in this term: the identity to hand to, or `None` for anyone.
    handover: OnceLock<Option<String>>,
    handover_asked: CancellationToken,
    /// Told by work that acted on the validity deadline ([`Leadership::deadline_missed`]).
    missed: CancellationToken,
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
                valid_until: AtomicU64::new(valid_until.as_nanos()),
                lead: AtomicI64::new(grant.lead.as_nanos()),
                revoked: OnceLock::new(),
                cancel: CancellationToken::new(),
                clock,
                handover: OnceLock::new(),
                handover_asked: CancellationToken::new(),
                missed: CancellationToken::new(),
            }),
        }
    }

    /// The fencing token of this term.
    pub fn token(&self) -> FencingToken {
        self.inner.token
    }

    /// Our identity.
    pub fn identity(&self) -> &str {
        &self.inner.identity
    }

    /// The instant just before the acquire of this term was sent.
    pub fn acquired_at(&self) -> BootInstant {
        self.inner.acquired_at
    }

    /// `Ok(token)` while this term is valid; refused once the elector stepped down or the validity
    /// deadline passed, even before the watchdog wakes (after a pause, the work may run first).
    /// Synchronous and cheap: call it right before each side effect.
    pub fn check(&self) -> Result<FencingToken, NotLeader> {
        if let Some(reason) = self.inner.revoked.get() {
            return Err(NotLeader::SteppedDown {
                lease: self.inner.lease.clone(),
                token: self.inner.token,
                reason: *reason,
            });
        }
        let now = self.now();
        let deadline = self.valid_until();
        if !super::decide::within_validity(now, deadline) {
            return Err(NotLeader::ValidityDeadlinePassed {
                lease: self.inner.lease.clone(),
                token: self.inner.token,
                late: now.saturating_duration_since(deadline),
            });
        }
        Ok(self.inner.token)
    }

    /// The validity deadline as of the last renewal. After step-down it is the instant before
    /// which the lease cannot pass to another replica.
    pub fn valid_until(&self) -> BootInstant {
        BootInstant::from_since_boot(Duration::from_nanos(
            self.inner.valid_until.load(Ordering::SeqCst),
        ))
    }

    /// Time left before the validity deadline (zero once it passed). Work that must stop
    /// before the lease can pass on (a child process) uses it as its hard limit, also after
    /// step-down.
    pub fn remaining(&self) -> Duration {
        self.now().until(self.valid_until())
    }

    /// Resolves once the validity deadline, less `margin`, has passed on the boot clock, even
    /// across a system suspend, counting what passed unseen by it (see [`Leadership::check`]);
    /// it follows the deadline as renewals move it. What must be over before the lease can pass
    /// on (the command's processes) is bounded by this, not by a tokio timer.
    pub async fn deadline_passed(&self, margin: Duration) {
        loop {
            let unseen = self.inner.clock.wall_lead().gained_since(self.lead());
            let at = self
                .valid_until()
                .saturating_sub(margin)
                .saturating_sub(unseen);
            self.inner.clock.sleep_until(at).await;
            if self.now() >= self.valid_until().saturating_sub(margin) {
                return;
            }
        }
    }

    /// The clock this term's deadlines are read on.
    pub fn clock(&self) -> &SharedClock {
        &self.inner.clock
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
        self.inner.revoked.get().copied()
    }

    /// Asks the elector to end this term with reason `handover` and release the lease, reserving
    /// the next term for `to` (anyone when `None`, or `-`, a request's word for it;
    /// docs/DESIGN.md, "After a handover"). Only this term: a later term of the same process is
    /// not touched. The first request of a term counts.
    pub fn hand_over(&self, to: Option<String>) {
        let to = to.filter(|to| to != "-");
        if self.inner.handover.set(to).is_ok() {
            self.inner.handover_asked.cancel();
        }
    }

    /// Ends this term as if its validity deadline had passed: for work that acted on the
    /// deadline (the supervisor killed the command at it) before a renewal in flight, read
    /// late, moved it. The term does not go on without that work, and its end is not the work's.
    pub fn deadline_missed(&self) {
        self.inner.missed.cancel();
    }

    /// Resolves once [`deadline_missed`](Self::deadline_missed) was called.
    pub(crate) fn missed(&self) -> WaitForCancellationFuture<'_> {
        self.inner.missed.cancelled()
    }

    /// Resolves with the identity to hand to (or `None` for anyone) once a handover of this
    /// term was asked for.
    pub(crate) async fn handover_asked(&self) -> Option<String> {
        self.inner.handover_asked.cancelled().await;
        self.inner.handover.get().cloned().flatten()
    }

    /// The boot clock's instant, moved on by what the wall clock's lead gained since the last
    /// renewal was sent: time that passed for the world, counted or not by the boot clock.
    pub(crate) fn now(&self) -> BootInstant {
        let clock = &self.inner.clock;
        let now = clock.now();
        now.saturating_add(clock.wall_lead().gained_since(self.lead()))
    }

    /// The wall clock's lead that [`now`](Self::now) counts from.
    pub(crate) fn lead(&self) -> WallLead {
        WallLead::from_nanos(self.inner.lead.load(Ordering::SeqCst))
    }

    /// Sets the validity deadline a renewal sent when the wall clock led by `lead` found (never
    /// after the term was revoked). Also backward: a renewal that measured Redis's clock fast
    /// ends the term sooner than the one before it did.
    pub(crate) fn extend(&self, until: BootInstant, lead: WallLead) {
        if self.inner.revoked.get().is_some() {
            return;
        }
        self.inner.lead.store(lead.as_nanos(), Ordering::SeqCst);
        self.inner
            .valid_until
            .store(until.as_nanos(), Ordering::SeqCst);
    }

    /// Ends the term: `check()` refuses from this instant on. Cancellation of the work is a
    /// separate step ([`cancel`](Self::cancel)) so that the step-down order stays explicit.
    pub(crate) fn revoke(&self, reason: StepDownReason) {
        let _ = self.inner.revoked.set(reason);
    }

    pub(crate) fn cancel(&self) {
        self.inner.cancel.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{BootClock, Clock};

    /// A term valid for `valid_for` from now, on the boot clock, whose wall clock's lead was read
    /// `gained` ago as far as the wall clock knows: as after a pause of `gained` that the boot
    /// clock did not count. (A suspend is tested on a clock that jumps, beside the in-process
    /// electors: tests/safety/beyond_the_model.rs.)
    fn leadership_gained(valid_for: Duration, gained: Duration) -> Leadership {
        let now = BootClock.now();
        let gained = i64::try_from(gained.as_nanos()).unwrap();
        let grant = Grant {
            token: FencingToken(9),
            sent_at: now,
            lead: WallLead::from_nanos(WallLead::now().as_nanos() - gained),
            previous: crate::lease::PreviousTerm::None,
            redis_us: 0,
        };
        Leadership::new(
            &grant,
            now.saturating_add(valid_for),
            "ns/app",
            "pod-a",
            Arc::new(BootClock),
        )
    }

    fn leadership(valid_for: Duration) -> Leadership {
        leadership_gained(valid_for, Duration::ZERO)
    }

    #[test]
    fn time_the_boot_clock_did_not_count_passes_for_the_check_until_a_renewal_sets_a_new_lead() {
        // A short pause shortens what is left; the term goes on.
        let l = leadership_gained(Duration::from_secs(10), Duration::from_secs(4));
        assert_eq!(l.check(), Ok(FencingToken(9)));
        assert!(
            l.remaining() <= Duration::from_secs(6),
            "{:?}",
            l.remaining()
        );
        // One that outlasts the term ends it, though the boot clock counted none of it.
        let l = leadership_gained(Duration::from_secs(10), Duration::from_secs(11));
        assert!(matches!(
            l.check(),
            Err(NotLeader::ValidityDeadlinePassed { late, .. }) if late >= Duration::from_millis(900)
        ));
        // A renewal sent after the pause counts from the wall clock's new lead.
        l.extend(
            BootInstant::now().saturating_add(Duration::from_secs(10)),
            WallLead::now(),
        );
        assert_eq!(l.check(), Ok(FencingToken(9)));
        assert!(l.remaining() > Duration::from_secs(9));
    }

    #[test]
    fn check_passes_while_valid() {
        let l = leadership(Duration::from_secs(10));
        assert_eq!(l.check(), Ok(FencingToken(9)));
        assert!(l.remaining() > Duration::from_secs(9));
    }

    #[test]
    fn revoke_refuses_at_once_and_extend_cannot_undo_it() {
        let l = leadership(Duration::from_secs(10));
        l.revoke(StepDownReason::Lost);
        l.extend(
            BootInstant::now().saturating_add(Duration::from_secs(100)),
            l.lead(),
        );
        let err = l.check().unwrap_err();
        assert_eq!(
            err.to_string(),
            "not the leader of lease `ns/app` (token 9): stepped down (lease lost)"
        );
        assert!(
            l.remaining() > Duration::from_secs(9),
            "the deadline still bounds the work"
        );
        assert!(!l.is_lost(), "revoking and cancelling are separate steps");
        l.cancel();
        assert!(l.is_lost());
    }

    #[test]
    fn extend_sets_what_the_last_renewal_found_until_the_term_is_revoked() {
        let l = leadership(Duration::from_secs(10));
        let sooner = l.valid_until().saturating_sub(Duration::from_secs(5));
        l.extend(sooner, l.lead());
        assert_eq!(l.valid_until(), sooner, "a renewal may end the term sooner");
        let later = sooner.saturating_add(Duration::from_secs(10));
        l.extend(later, l.lead());
        assert_eq!(l.valid_until(), later);
        l.revoke(StepDownReason::Shutdown);
        l.extend(later.saturating_add(Duration::from_secs(5)), l.lead());
        assert_eq!(l.valid_until(), later, "no extension after revocation");
    }
}
