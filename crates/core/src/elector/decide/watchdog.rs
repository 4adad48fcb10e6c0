//! One term as leader: its deadlines, the watchdog's step, a late reply, the retry after a failed
//! renewal, `check()`'s comparison, and the end of a term whose work stopped late.

use std::time::Duration;

use super::rate::{RateBound, validity_at};
use crate::clock::BootInstant;
use crate::elector::{StepDownReason, Timing};

/// The three instants of a term, all counted from the instant the command that won or renewed
/// it was *sent* (the TTL cannot have started earlier, so a slow reply only shortens them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// The leader may act strictly before this: the send instant plus the validity.
    pub valid_until: BootInstant,
    /// Without a renewal by then, the leader steps down.
    pub renew_by: BootInstant,
    /// When the watchdog renews next.
    pub next_renew: BootInstant,
}

impl Deadlines {
    /// The deadlines of a command sent at `sent_at` whose term is valid for `validity`.
    pub fn valid_for(sent_at: BootInstant, timing: &Timing, validity: Duration) -> Self {
        Self {
            valid_until: sent_at.saturating_add(validity),
            renew_by: sent_at.saturating_add(timing.renew_deadline),
            next_renew: sent_at.saturating_add(timing.retry_period),
        }
    }

    /// The first of the two deadlines that end the term: what cuts a renewal short.
    pub fn first(&self) -> BootInstant {
        self.valid_until.min(self.renew_by)
    }
}

/// A renewal sent at `sent_at` was answered "still yours" at `now`, with Redis's clock running
/// within `rate` of the boot clock: the new deadlines (the validity as [`validity_at`] gives
/// it), or a step-down when the reply came back after a pause longer than the validity (the term
/// it extends is already over, so it proves nothing).
pub fn after_renewal(
    now: BootInstant,
    sent_at: BootInstant,
    timing: &Timing,
    rate: Option<RateBound>,
) -> Result<Deadlines, StepDownReason> {
    let deadlines = Deadlines::valid_for(sent_at, timing, validity_at(timing, rate));
    if within_validity(now, deadlines.valid_until) {
        Ok(deadlines)
    } else {
        Err(StepDownReason::ValidityDeadlinePassed)
    }
}

/// What the watchdog does when it wakes up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchdogStep {
    /// Stop leading now, without another renewal.
    StepDown(StepDownReason),
    /// Send one renewal, and give up on it after `timeout`.
    Renew {
        /// Time left before the first deadline.
        timeout: Duration,
    },
}

/// The watchdog's decision at `now`, given the validity deadline and the renew deadline.
/// A deadline that has passed wins over a renewal: after a pause the watchdog must not even try,
/// since a renewal cannot prove anything about the time already lost. A renewal is bounded by
/// the first deadline and by `attempt_timeout`.
pub fn watchdog_step(
    now: BootInstant,
    valid_until: BootInstant,
    renew_by: BootInstant,
    attempt_timeout: Duration,
) -> WatchdogStep {
    if now >= valid_until {
        WatchdogStep::StepDown(StepDownReason::ValidityDeadlinePassed)
    } else if now >= renew_by {
        WatchdogStep::StepDown(StepDownReason::RenewDeadlinePassed)
    } else {
        WatchdogStep::Renew {
            timeout: now.until(valid_until.min(renew_by)).min(attempt_timeout),
        }
    }
}

/// The shortest pause between two renewal attempts, so that a link that fails instantly does
/// not turn the watchdog into a busy loop.
const MIN_RETRY_PAUSE: Duration = Duration::from_millis(10);

/// When the watchdog should try again after a failed renewal that started at `attempt_started`:
/// attempts start at most once per retry period (an attempt that timed out already waited),
/// never sooner than a short pause from `now`, and never after either deadline, so that it
/// steps down on time.
pub fn retry_after_failure(
    attempt_started: BootInstant,
    now: BootInstant,
    timing: &Timing,
    valid_until: BootInstant,
    renew_by: BootInstant,
) -> BootInstant {
    attempt_started
        .saturating_add(timing.retry_period)
        .max(now.saturating_add(MIN_RETRY_PAUSE))
        .min(valid_until)
        .min(renew_by)
}

/// Whether a term valid until `valid_until` may still act at `now` (strictly before it):
/// [`Leadership::check`](crate::elector::Leadership::check) refuses when this is false.
pub fn within_validity(now: BootInstant, valid_until: BootInstant) -> bool {
    now < valid_until
}

/// How a term whose work ended on its own (`reason`, with the work's words `detail`) at `now`
/// is labelled: work that gave up because its `check()` refused after a pause ended *because* the
/// validity deadline passed, so that is the reason, and the work's words (or, without any, its
/// own reason) are kept as the detail.
pub fn label_work_end(
    reason: StepDownReason,
    detail: Option<String>,
    now: BootInstant,
    valid_until: BootInstant,
) -> (StepDownReason, Option<String>) {
    if within_validity(now, valid_until) {
        (reason, detail)
    } else {
        let detail = detail.or_else(|| Some(reason.to_string()));
        (StepDownReason::ValidityDeadlinePassed, detail)
    }
}

/// How long work whose validity deadline passed before its step-down (a pause) may take to
/// stop on its own before it is aborted: enough for a task to be scheduled and finish acting on
/// its cancellation. The supervisor sends SIGKILL the moment it runs; this is its time to see
/// every process gone, reap them and say so. Its `check()` refuses throughout.
pub const LAST_TURN: Duration = Duration::from_millis(100);

/// How long a cancelled term's work may take to stop before it is aborted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkStop {
    /// Until the validity deadline: the lease cannot pass on before it, so the work may use
    /// all of it.
    UntilDeadline,
    /// Past the deadline already: one short turn to act on the cancellation.
    LastTurn(Duration),
}

/// The bound on stopping the work of a term whose validity deadline is `valid_until`, at `now`.
pub fn work_stop(now: BootInstant, valid_until: BootInstant) -> WorkStop {
    if within_validity(now, valid_until) {
        WorkStop::UntilDeadline
    } else {
        WorkStop::LastTurn(LAST_TURN)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{at, ms, timing};
    use super::*;

    #[test]
    fn deadlines_count_from_the_send_instant() {
        // (sent at, timing) -> (valid until, renew by, next renew)
        let cases = [
            (
                1_000,
                Timing::default(),
                (15_848, 11_000, 3_000),
                "the defaults: validity is 15 s less 1 % and 2 ms of drift",
            ),
            (
                0,
                timing(1_500, 900, 250),
                (1_483, 900, 250),
                "a fast timing from boot",
            ),
        ];
        for (sent, t, (valid, renew, next), why) in cases {
            let d = Deadlines::valid_for(at(sent), &t, t.validity());
            let got = (d.valid_until, d.renew_by, d.next_renew);
            assert_eq!(got, (at(valid), at(renew), at(next)), "{why}");
        }
        let d = {
            let t = timing(13_000, 14_000, 2_000);
            Deadlines::valid_for(at(0), &t, t.validity())
        };
        assert_eq!(
            d.first(),
            d.valid_until,
            "validity first when the drift is large"
        );
        let d = Deadlines::valid_for(at(0), &Timing::default(), Timing::default().validity());
        assert_eq!(
            d.first(),
            d.renew_by,
            "the renew deadline first with the defaults"
        );
    }

    #[test]
    fn a_late_reply_to_a_renewal_steps_down() {
        let t = Timing::default(); // validity 14 848 ms
        // (sent at, replied at) -> new valid-until, or the step-down
        let cases = [
            (
                1_000,
                1_002,
                Ok(15_848),
                "a prompt reply extends from the send instant",
            ),
            (
                1_000,
                9_000,
                Ok(15_848),
                "a slow reply extends no further than a prompt one",
            ),
            (
                1_000,
                15_847,
                Ok(15_848),
                "a reply just inside the validity still counts",
            ),
            (
                1_000,
                15_848,
                Err(StepDownReason::ValidityDeadlinePassed),
                "a reply at the deadline proves nothing",
            ),
            (
                1_000,
                90_000,
                Err(StepDownReason::ValidityDeadlinePassed),
                "a reply after a pause longer than the TTL ends the term",
            ),
        ];
        for (sent, now, want, why) in cases {
            let got = after_renewal(at(now), at(sent), &t, None).map(|d| d.valid_until);
            assert_eq!(got, want.map(at), "{why}");
        }
    }

    #[test]
    fn watchdog_table() {
        use StepDownReason::*;
        use WatchdogStep::*;
        // (now, valid_until, renew_by) -> step, with attempts bounded by 3.4 s
        let cases = [
            (
                1_000,
                15_000,
                10_000,
                Renew { timeout: ms(3_400) },
                "early: the attempt bound",
            ),
            (
                7_000,
                15_000,
                10_000,
                Renew { timeout: ms(3_000) },
                "the renew deadline cuts it",
            ),
            (
                9_999,
                15_000,
                10_000,
                Renew { timeout: ms(1) },
                "a last millisecond",
            ),
            (
                10_000,
                15_000,
                10_000,
                StepDown(RenewDeadlinePassed),
                "at the renew deadline",
            ),
            (
                14_999,
                15_000,
                10_000,
                StepDown(RenewDeadlinePassed),
                "past the renew deadline",
            ),
            (
                15_000,
                15_000,
                10_000,
                StepDown(ValidityDeadlinePassed),
                "a pause longer than the TTL reports the validity deadline, not the renew one",
            ),
            (
                60_000,
                15_000,
                10_000,
                StepDown(ValidityDeadlinePassed),
                "long past both",
            ),
            (
                12_000,
                13_000,
                14_000,
                Renew { timeout: ms(1_000) },
                "a renew deadline beyond validity (a large drift) is cut by validity",
            ),
            (
                13_500,
                13_000,
                14_000,
                StepDown(ValidityDeadlinePassed),
                "validity passes first",
            ),
        ];
        for (now, valid, renew, want, why) in cases {
            assert_eq!(
                watchdog_step(at(now), at(valid), at(renew), ms(3_400)),
                want,
                "{why}"
            );
        }
    }

    #[test]
    fn retries_after_failure_never_sleep_past_a_deadline() {
        let t = Timing::default();
        // (attempt started, now, valid until, renew by) -> next attempt
        let cases = [
            (
                1_000,
                1_001,
                15_000,
                10_000,
                3_000,
                "an instant failure waits out the retry period",
            ),
            (
                1_000,
                4_400,
                15_000,
                10_000,
                4_410,
                "a timeout that outlasted the retry period goes again after a short pause",
            ),
            (
                9_000,
                9_001,
                15_000,
                10_000,
                10_000,
                "never past the renew deadline",
            ),
            (
                9_000,
                9_001,
                9_500,
                10_000,
                9_500,
                "never past the validity deadline",
            ),
        ];
        for (started, now, valid, renew, want, why) in cases {
            assert_eq!(
                retry_after_failure(at(started), at(now), &t, at(valid), at(renew)),
                at(want),
                "{why}"
            );
        }
    }

    #[test]
    fn check_refuses_from_the_deadline_on() {
        // (now, valid until) -> may act
        let cases = [
            (2_999, 3_000, true, "a millisecond before the deadline"),
            (3_000, 3_000, false, "at the deadline"),
            (3_001, 3_000, false, "after it"),
        ];
        for (now, valid, want, why) in cases {
            assert_eq!(within_validity(at(now), at(valid)), want, "{why}");
        }
    }

    #[test]
    fn a_term_whose_work_ended_late_is_labelled_by_its_deadline() {
        use StepDownReason::*;
        let words = |s: &str| Some(s.to_owned());
        // (work's reason, work's words, ended at) -> (reason, detail), validity until 3 000
        let cases = [
            (
                WorkEnded,
                None,
                2_000,
                (WorkEnded, None),
                "work that returned in time",
            ),
            (
                WorkFailed,
                words("boom"),
                2_999,
                (WorkFailed, words("boom")),
                "work that failed in time keeps its reason and words",
            ),
            (
                WorkFailed,
                words("not leader: the validity deadline passed"),
                3_000,
                (
                    ValidityDeadlinePassed,
                    words("not leader: the validity deadline passed"),
                ),
                "work that gave up on its refused check ended because of the deadline",
            ),
            (
                WorkEnded,
                None,
                9_000,
                (ValidityDeadlinePassed, words("work ended")),
                "without words of its own, the work's reason becomes the detail",
            ),
            (
                WorkPanicked,
                words("oops"),
                3_001,
                (ValidityDeadlinePassed, words("oops")),
                "a panic after the deadline keeps the panic's message",
            ),
        ];
        for (reason, detail, now, want, why) in cases {
            assert_eq!(
                label_work_end(reason, detail, at(now), at(3_000)),
                want,
                "{why}"
            );
        }
        assert_eq!(
            WorkEnded.to_string(),
            "work ended",
            "the label the rows above expect"
        );
    }

    #[test]
    fn stopping_work_gets_until_the_deadline_or_one_last_turn() {
        // (now, valid until) -> bound
        let cases = [
            (
                1_000,
                3_000,
                WorkStop::UntilDeadline,
                "in time: the rest of the validity",
            ),
            (
                2_999,
                3_000,
                WorkStop::UntilDeadline,
                "a millisecond left is still the deadline",
            ),
            (
                3_000,
                3_000,
                WorkStop::LastTurn(ms(100)),
                "at the deadline: one short turn",
            ),
            (
                60_000,
                3_000,
                WorkStop::LastTurn(ms(100)),
                "after a long pause: the same turn",
            ),
        ];
        for (now, valid, want, why) in cases {
            assert_eq!(work_stop(at(now), at(valid)), want, "{why}");
        }
    }
}
