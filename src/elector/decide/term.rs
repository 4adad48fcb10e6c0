//! Between two terms: whether to contend again at all, how many short terms in a row have
//! ended and the pause they ask for, the hold-off after a handover, and how long a handover
//! reserves the next term for its successor.

use std::time::Duration;

use super::MAX_BACKOFF;
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

/// Whether a term was cut short by its work: work that fails or panics within one lease duration
/// of winning (a command that cannot start, a reconciler that errors at once), again and again,
/// would otherwise make the replicas cycle acquire → release as fast as Redis answers. Work that
/// returns on its own hands over on purpose (a rotation, a library user's choice) and is not
/// paced.
pub fn is_short_term(reason: StepDownReason, lasted: Duration, timing: &Timing) -> bool {
    matches!(
        reason,
        StepDownReason::WorkFailed | StepDownReason::WorkPanicked
    ) && lasted < timing.lease_duration
}

/// The pause before contending again after a term, given how many short terms in a row have
/// ended so far (this one included): none after a term that was not short, else the retry
/// period, doubling with each repeat up to [`MAX_BACKOFF`].
pub fn pause_after_term(short_terms_in_a_row: u32, timing: &Timing) -> Duration {
    if short_terms_in_a_row == 0 {
        return Duration::ZERO;
    }
    timing
        .retry_period
        .saturating_mul(1u32 << (short_terms_in_a_row - 1).min(16))
        .min(MAX_BACKOFF.max(timing.retry_period))
}

/// How long a replica stays out of the election after a term ended for `reason`: one lease
/// duration after a handover, so that the replica that asked to be relieved is not the next
/// leader again (a handover must move leadership, or it did nothing); none otherwise.
pub fn hold_off_after(reason: StepDownReason, timing: &Timing) -> Duration {
    match reason {
        StepDownReason::Handover => timing.lease_duration,
        _ => Duration::ZERO,
    }
}

/// How long a handover to a named replica reserves the next term for it: two retry periods,
/// enough for its wake-up on the release channel (about a round trip) and for a try on its
/// fallback retry period while its channel is down; then anyone may acquire.
pub fn reservation(timing: &Timing) -> Duration {
    timing.retry_period.saturating_mul(2)
}

/// What a term's end asks of the wait before the next try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BetweenTerms {
    /// Short terms in a row, this one included (0 after a term that was not short).
    pub short_terms: u32,
    /// The pause the short terms ask for ([`pause_after_term`]).
    pub paced: Duration,
    /// The hold-off after a handover ([`hold_off_after`]).
    pub hold_off: Duration,
}

impl BetweenTerms {
    /// The pause itself: the longer of the two.
    pub fn pause(&self) -> Duration {
        self.paced.max(self.hold_off)
    }
}

/// After a term that ended for `reason` having `lasted` so long from its acquire's send
/// instant, with `short_terms` short terms in a row before it: the new streak and the pauses.
pub fn between_terms(
    short_terms: u32,
    reason: StepDownReason,
    lasted: Duration,
    timing: &Timing,
) -> BetweenTerms {
    let short_terms = if is_short_term(reason, lasted, timing) {
        short_terms.saturating_add(1)
    } else {
        0
    };
    BetweenTerms {
        short_terms,
        paced: pause_after_term(short_terms, timing),
        hold_off: hold_off_after(reason, timing),
    }
}

#[cfg(test)]
mod tests {
    use super::super::rows::{ms, timing};
    use super::*;
    use StepDownReason::*;

    #[test]
    fn the_elector_contends_again_unless_it_is_done() {
        // (ending, stop when work ends, one term) -> contend again
        let cases = [
            (Lost, false, false, true, "a lost lease: back to following"),
            (
                WorkEnded,
                false,
                false,
                true,
                "work that returned hands over and contends again",
            ),
            (
                WorkFailed,
                false,
                false,
                true,
                "failed work too (term pacing slows it)",
            ),
            (
                Handover,
                false,
                false,
                true,
                "after a handover (the hold-off keeps it out a while)",
            ),
            (Shutdown, false, false, false, "shutdown ends the elector"),
            (
                WorkEnded,
                true,
                false,
                false,
                "a singleton command that exited ends it",
            ),
            (WorkFailed, true, false, false, "one that failed too"),
            (WorkPanicked, true, false, false, "and work that panicked"),
            (
                Lost,
                true,
                false,
                true,
                "a lost lease is not the work's end",
            ),
            (
                RenewDeadlinePassed,
                true,
                false,
                true,
                "nor a missed renewal",
            ),
            (
                Lost,
                false,
                true,
                false,
                "a one-shot lock leads one term, however it ends",
            ),
            (
                Handover,
                false,
                true,
                false,
                "a one-shot lock handed over is done too",
            ),
        ];
        for (ending, stop_when_work_ends, one_term, want, why) in cases {
            assert_eq!(
                contends_again(ending, stop_when_work_ends, one_term),
                want,
                "{why}"
            );
        }
    }

    #[test]
    fn short_terms_are_those_the_work_cut_short() {
        let t = Timing::default(); // 15 s / 10 s / 2 s
        // (reason, lasted) -> short?
        let cases = [
            (WorkFailed, ms(3), true, "work that failed at once"),
            (WorkFailed, ms(14_999), true, "within one lease duration"),
            (WorkPanicked, ms(0), true, "a panic at once"),
            (
                WorkFailed,
                ms(15_000),
                false,
                "a full lease duration is not short",
            ),
            (
                WorkPanicked,
                ms(60_000),
                false,
                "nor a long term that panicked",
            ),
            (
                WorkEnded,
                ms(3),
                false,
                "returning on its own is a handover on purpose",
            ),
            (
                Lost,
                ms(3),
                false,
                "losing the lease is not the work's doing; the follower's waits pace it",
            ),
            (
                RenewDeadlinePassed,
                ms(10_000),
                false,
                "a missed renewal neither",
            ),
            (ValidityDeadlinePassed, ms(1), false, "nor a pause"),
            (Shutdown, ms(1), false, "nor shutdown"),
        ];
        for (reason, lasted, want, why) in cases {
            assert_eq!(is_short_term(reason, lasted, &t), want, "{why}");
        }
    }

    #[test]
    fn short_terms_in_a_row_pause_longer_and_longer() {
        let t = Timing::default();
        let slow = timing(600_000, 300_000, 60_000);
        // (short terms in a row, timing) -> pause
        let cases = [
            (0, t, ms(0), "no short term, no pause"),
            (1, t, ms(2_000), "the first: one retry period"),
            (2, t, ms(4_000), "doubling"),
            (4, t, ms(16_000), "and doubling"),
            (5, t, ms(30_000), "up to 30 s"),
            (1_000, t, ms(30_000), "however many"),
            (
                3,
                slow,
                ms(60_000),
                "a retry period above the cap is still waited in full",
            ),
        ];
        for (streak, timing, want, why) in cases {
            assert_eq!(pause_after_term(streak, &timing), want, "{why}");
        }
    }

    #[test]
    fn handover_table() {
        let t = Timing::default(); // 15 s / 10 s / 2 s
        let fast = timing(1_500, 900, 250);
        // (reason, timing) -> (hold-off, reservation)
        let cases = [
            (
                Handover,
                t,
                (15_000, 4_000),
                "a handover holds off one lease duration",
            ),
            (
                Handover,
                fast,
                (1_500, 500),
                "and reserves two retry periods",
            ),
            (Shutdown, t, (0, 4_000), "shutdown holds nobody off"),
            (Lost, t, (0, 4_000), "nor a lost lease"),
            (WorkEnded, t, (0, 4_000), "nor work that returned"),
            (ValidityDeadlinePassed, t, (0, 4_000), "nor a pause"),
        ];
        for (reason, timing, (hold_off, reserve), why) in cases {
            let got = (hold_off_after(reason, &timing), reservation(&timing));
            assert_eq!(got, (ms(hold_off), ms(reserve)), "{why}");
        }
    }

    #[test]
    fn between_terms_the_streak_and_the_pause_follow_the_term() {
        let t = Timing::default();
        // (short terms before, reason, lasted) -> (streak, pause)
        let cases = [
            (
                0,
                WorkFailed,
                10,
                (1, 2_000),
                "a first short term pauses one retry period",
            ),
            (
                2,
                WorkPanicked,
                10,
                (3, 8_000),
                "a third in a row pauses four",
            ),
            (
                3,
                WorkFailed,
                20_000,
                (0, 0),
                "a long term resets the streak",
            ),
            (3, Lost, 10, (0, 0), "so does a term the work did not end"),
            (
                0,
                Handover,
                10,
                (0, 15_000),
                "a handover waits out its hold-off",
            ),
            (
                u32::MAX,
                WorkFailed,
                10,
                (u32::MAX, 30_000),
                "the streak saturates",
            ),
        ];
        for (before, reason, lasted, (streak, pause), why) in cases {
            let got = between_terms(before, reason, ms(lasted), &t);
            assert_eq!((got.short_terms, got.pause()), (streak, ms(pause)), "{why}");
        }
    }
}
