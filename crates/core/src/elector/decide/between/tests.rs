//! The tables of the decisions between two terms.

use super::super::tests::{ms, timing};
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
fn short_terms_are_those_a_fault_cut_short() {
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
            "a missed renewal neither (the hold-off puts it last instead)",
        ),
        (ValidityDeadlinePassed, ms(1), false, "nor a pause"),
        (
            RenewRefused,
            ms(2_001),
            true,
            "a refused renewal: the next term would be refused too",
        ),
        (
            RenewRefused,
            ms(600_000),
            true,
            "however long the term lasted (a permission taken from a long-standing leader)",
        ),
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
    // (reason, timing, released, alone) -> (hold-off, reservation)
    let cases = [
        (
            Handover,
            t,
            true,
            false,
            (15_000, 4_000),
            "a handover holds off one lease duration",
        ),
        (
            Handover,
            fast,
            true,
            false,
            (1_500, 500),
            "and reserves two retry periods",
        ),
        (
            Shutdown,
            t,
            true,
            false,
            (0, 4_000),
            "shutdown holds nobody off",
        ),
        (Lost, t, false, false, (0, 4_000), "nor a lost lease"),
        (
            WorkEnded,
            t,
            true,
            false,
            (0, 4_000),
            "nor work that returned",
        ),
        (
            RenewDeadlinePassed,
            t,
            true,
            false,
            (2_000, 4_000),
            "a term it could not renew, released: one retry period at the back",
        ),
        (
            ValidityDeadlinePassed,
            fast,
            true,
            false,
            (250, 500),
            "a pause, or renewals too late to count, too",
        ),
        (
            RenewDeadlinePassed,
            t,
            false,
            false,
            (15_500, 4_000),
            "not released: until the term surely ran out, and a yield",
        ),
        (
            ValidityDeadlinePassed,
            fast,
            false,
            false,
            (1_600, 500),
            "the same with fast timing",
        ),
        (
            RenewDeadlinePassed,
            t,
            false,
            true,
            (0, 4_000),
            "nobody else listened at its last renewal: nobody to go first",
        ),
        (
            ValidityDeadlinePassed,
            fast,
            true,
            true,
            (0, 500),
            "the same, released or not",
        ),
        (
            Handover,
            t,
            true,
            true,
            (15_000, 4_000),
            "a handover holds off alone too: it must move leadership or fail",
        ),
        (
            RenewRefused,
            t,
            true,
            false,
            (0, 4_000),
            "a refused renewal is paced instead",
        ),
    ];
    for (reason, timing, released, alone, (hold_off, reserve), why) in cases {
        let ended = TermEnd {
            reason,
            released,
            alone,
        };
        let got = (hold_off_after(&ended, &timing), reservation(&timing));
        assert_eq!(got, (ms(hold_off), ms(reserve)), "{why}");
    }
}

#[test]
fn nobody_else_listens_when_the_count_is_the_leaders_own_at_most() {
    // (listeners, the leader subscribed) -> alone
    let cases = [
        (Some(0), false, true),
        (Some(0), true, true),
        (Some(1), true, true),
        (Some(1), false, false),
        (Some(2), true, false),
        (None, true, false),
        (None, false, false),
    ];
    for (listeners, subscribed, want) in cases {
        assert_eq!(
            nobody_else_listens(listeners, subscribed),
            want,
            "{listeners:?} listeners, subscribed {subscribed}"
        );
    }
}

#[test]
fn a_replica_holding_off_goes_last_but_goes() {
    use super::super::tests::at;
    let t = Timing::default(); // 15 s / 10 s / 2 s
    let fast = timing(1_500, 900, 250);
    let hold = |since: u64, t: &Timing| HoldOff {
        since: at(since),
        until: at(since).saturating_add(t.lease_duration),
        offered: true,
    };
    // (timing, hold-off from, now, woken) -> wait
    let cases = [
        (
            t,
            1_000,
            1_000,
            true,
            500,
            "woken: a quarter retry period behind the others",
        ),
        (
            fast,
            1_000,
            1_000,
            true,
            100,
            "at least twice the herd's spread",
        ),
        (
            timing(3_000, 2_000, 80),
            1_000,
            1_000,
            true,
            80,
            "never a whole retry period: a reservation lasts two",
        ),
        (
            t,
            1_000,
            1_000,
            false,
            4_900,
            "just handed over: until every follower tried (2.2 retry periods) and a yield",
        ),
        (t, 1_000, 4_000, false, 1_900, "the same instant, later"),
        (
            t,
            1_000,
            5_800,
            false,
            500,
            "past it: still a yield, a wake-up may be on its way",
        ),
        (
            fast,
            1_000,
            1_000,
            false,
            650,
            "fast timing: 550 ms and a yield",
        ),
        (t, 1_000, 15_800, true, 200, "never past the hold-off's end"),
        (t, 1_000, 16_000, true, 0, "over: no wait"),
        (t, 1_000, 20_000, false, 0, "long over"),
    ];
    for (timing, since, now, woken, want, why) in cases {
        let got = held_off_wait(at(now), hold(since, &timing), woken, &timing);
        assert_eq!(got, ms(want), "{why}");
    }
    // A release that was not announced offered nothing: the whole hold-off, unless woken.
    let unoffered = HoldOff {
        offered: false,
        ..hold(1_000, &t)
    };
    assert_eq!(held_off_wait(at(1_000), unoffered, false, &t), ms(15_000));
    assert_eq!(held_off_wait(at(9_000), unoffered, false, &t), ms(7_000));
    assert_eq!(held_off_wait(at(9_000), unoffered, true, &t), ms(500));
}

#[test]
fn between_terms_the_streak_and_the_pause_follow_the_term() {
    let t = Timing::default();
    // (short terms before, reason, lasted) -> (streak, pause), released
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
            1,
            RenewRefused,
            2_000,
            (2, 4_000),
            "refused renewals in a row back off like failing work",
        ),
        (
            4,
            RenewRefused,
            60_000,
            (1, 2_000),
            "a refusal after a long term starts the streak anew",
        ),
        (
            0,
            RenewDeadlinePassed,
            1_000,
            (0, 2_000),
            "a missed renewal holds off one retry period",
        ),
        (0, Handover, 10, (0, 15_000), "a handover holds off"),
        (
            u32::MAX,
            WorkFailed,
            10,
            (u32::MAX, 30_000),
            "the streak saturates",
        ),
    ];
    for (before, reason, lasted, (streak, pause), why) in cases {
        let ended = TermEnd {
            reason,
            released: true,
            alone: false,
        };
        let got = between_terms(before, &ended, ms(lasted), &t);
        let paused = got.paced.max(got.hold_off);
        assert_eq!((got.short_terms, paused), (streak, ms(pause)), "{why}");
    }
}
