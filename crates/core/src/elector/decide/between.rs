//! Between two terms: whether to contend again at all, how many short terms in a row have
//! ended and the pause they ask for, the hold-off after a handover (and how a replica holding
//! off lets the others go first), and how long a handover reserves the next term for its
//! successor.

use std::time::Duration;

use super::backoff;
use super::herd::MAX_SPREAD;
use crate::clock::BootInstant;
use crate::elector::{StepDownReason, Timing};

/// Whether the elector contends again after a term that ended for `ending`: not at shutdown,
/// not after a one-shot lock's term (`one_term`), and not after work that ended on its own
/// when the elector stops with its work (`stop_when_work_ends`, a singleton command that
/// exited).
pub fn contends_again(ending: StepDownReason, stop_when_work_ends: bool, one_term: bool) -> bool {
    let work_ended = matches!(
        ending,
        StepDownReason::WorkEnded | StepDownReason::WorkFailed | StepDownReason::WorkPanicked
    );
    !(ending == StepDownReason::Shutdown || (work_ended && stop_when_work_ends) || one_term)
}

/// Whether a term was cut short by a fault the next term would meet again (docs/DESIGN.md,
/// "Step-down", "Gray failures"). Work that returns on its own hands over on purpose: not paced.
fn is_short_term(reason: StepDownReason, lasted: Duration, timing: &Timing) -> bool {
    match reason {
        StepDownReason::RenewRefused => true,
        StepDownReason::WorkFailed | StepDownReason::WorkPanicked => lasted < timing.lease_duration,
        _ => false,
    }
}

/// The pause before contending again after a term, given how many short terms in a row have
/// ended so far (this one included): none after a term that was not short, else the retry
/// period, doubling with each repeat up to `MAX_BACKOFF`.
pub fn pause_after_term(short_terms_in_a_row: u32, timing: &Timing) -> Duration {
    match short_terms_in_a_row {
        0 => Duration::ZERO,
        n => backoff(timing.retry_period, n),
    }
}

/// What the time after a term needs to know of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TermEnd {
    pub reason: StepDownReason,
    /// Whether its release was announced (the others woken to take the lease).
    pub released: bool,
    /// Whether its last renewal counted nobody else on the release channel
    /// ([`nobody_else_listens`]).
    pub alone: bool,
}

/// Whether a leader's renewal, which counted `listeners` on the release channel (`None`: not
/// countable), found no other replica there: none at all, or only the leader's own
/// subscription. A follower whose subscription is down is not counted; it can only be passed
/// over for a retry period or so, and only while its channel is down too.
pub fn nobody_else_listens(listeners: Option<u32>, subscribed: bool) -> bool {
    listeners.is_some_and(|n| n <= u32::from(subscribed))
}

/// How long a replica holds off after a term `ended` (docs/DESIGN.md, "After a handover", "Gray
/// failures"): a place at the back of the queue, not a ban (see [`held_off_wait`]).
fn hold_off_after(ended: &TermEnd, timing: &Timing) -> Duration {
    let could_not_renew = matches!(
        ended.reason,
        StepDownReason::RenewDeadlinePassed
            | StepDownReason::ValidityDeadlinePassed
            | StepDownReason::Pause
    );
    match ended.reason {
        StepDownReason::Handover => timing.lease_duration,
        _ if !could_not_renew || ended.alone => Duration::ZERO,
        _ if ended.released => timing.retry_period,
        _ => timing.lease_duration + yield_to_others(timing),
    }
}

/// How long a handover to a named replica reserves the next term for it: two retry periods,
/// enough for its wake-up on the release channel (about a round trip) and for a try on its
/// fallback retry period while its channel is down; then anyone may acquire.
pub fn reservation(timing: &Timing) -> Duration {
    timing.retry_period.saturating_mul(2)
}

/// A replica holding off: since when (the end of its term), until when, and whether the lease
/// was offered to the others when it began (its release announced).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HoldOff {
    pub since: BootInstant,
    pub until: BootInstant,
    pub offered: bool,
}

/// How long a replica holding off lets the others go first after a wake-up: longer than a woken
/// follower's try takes (the herd's spread twice, then a round trip), a quarter of a retry
/// period when that is longer, and never as long as the retry period, so that a reservation
/// (two retry periods) is still there when the replica it names tries.
fn yield_to_others(timing: &Timing) -> Duration {
    (timing.retry_period / 4)
        .max(MAX_SPREAD.saturating_mul(2))
        .min(timing.retry_period)
}

/// How long a follower that holds off waits before its next try (`woken`: by a wake-up other
/// than its own release's), never past the hold-off's end (docs/DESIGN.md, "After a handover").
pub fn held_off_wait(now: BootInstant, hold: HoldOff, woken: bool, timing: &Timing) -> Duration {
    let left = hold.until.saturating_duration_since(now);
    if left.is_zero() {
        return Duration::ZERO;
    }
    let yielded = yield_to_others(timing);
    let wait = if woken {
        yielded
    } else if !hold.offered {
        left
    } else {
        let everyone_tried = hold
            .since
            .saturating_add(timing.retry_period.saturating_mul(11) / 5 + yielded);
        everyone_tried.saturating_duration_since(now).max(yielded)
    };
    wait.min(left)
}

/// What a term's end asks of the wait before the next try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BetweenTerms {
    /// Short terms in a row, this one included (0 after a term that was not short).
    pub short_terms: u32,
    /// The pause the short terms ask for ([`pause_after_term`]).
    pub paced: Duration,
    /// The hold-off after a handover or a term that could not renew ([`hold_off_after`]): not
    /// slept out, but followed with [`held_off_wait`] before each try.
    pub hold_off: Duration,
}

/// After a term that `ended` having `lasted` so long from its acquire's send instant, with
/// `short_terms` short terms in a row before it: the new streak and the pauses.
pub fn between_terms(
    short_terms: u32,
    ended: &TermEnd,
    lasted: Duration,
    timing: &Timing,
) -> BetweenTerms {
    let short_terms = if !is_short_term(ended.reason, lasted, timing) {
        0
    } else if lasted >= timing.lease_duration {
        // A refusal after a long term repeats nothing: its streak starts anew.
        1
    } else {
        short_terms.saturating_add(1)
    };
    BetweenTerms {
        short_terms,
        paced: pause_after_term(short_terms, timing),
        hold_off: hold_off_after(ended, timing),
    }
}

#[cfg(test)]
mod tests;
