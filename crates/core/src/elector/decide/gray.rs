//! A partly sick replica (docs/DESIGN.md, "Gray failures"): which Redis errors leave an acquire's
//! outcome unknown, whether a round trip fits the link a lease needs, and which term of its own an
//! unanswered acquire may have won.

use std::time::Duration;

use crate::clock::BootInstant;
use crate::elector::Timing;
use crate::lease::{FencingToken, Holder, LeaseError};

/// Whether an acquire that failed with `err` may still have run in Redis: no answer came (a
/// timeout, a connection that broke or was reset), so the script may have won a term that its
/// caller never heard of.
pub fn outcome_unknown(err: &LeaseError) -> bool {
    matches!(
        err,
        LeaseError::Timeout { .. } | LeaseError::Connection { .. }
    )
}

/// Whether a round trip that `took` so long fits the link a lease needs: half the acquire
/// bound, so that a call on a new connection (its handshake's round trip, then the call's)
/// still fits the whole bound. A connection that a late reply spoiled is dialled again, so a
/// link whose round trips fit only the whole bound times out at every other call.
pub fn link_fits(took: Duration, timing: &Timing) -> bool {
    took <= timing.acquire_timeout() / 2
}

/// Whether a win sent at `sent_at`, read at `now`, came too late to lead: less than a retry
/// period of its `validity` was left (a starved CPU, a link slower than a term). It begins no
/// term, and is taken for an answer that never came.
pub fn won_too_late(
    sent_at: BootInstant,
    now: BootInstant,
    validity: Duration,
    timing: &Timing,
) -> bool {
    now.saturating_add(timing.retry_period) >= sent_at.saturating_add(validity)
}

/// The term of ours that the lease (or its state record) holds and that this replica never
/// led: an acquire's answer went missing. `owner` is this replica's owner id, and `last_led`
/// the token of the last term it led (a term it led and ended is not adopted: its late
/// messages could touch it). Tokens grow, so every term of ours above `last_led` is one it
/// never heard of.
pub fn unknown_term_of_ours(
    holder: Option<&Holder>,
    owner: &str,
    last_led: Option<FencingToken>,
) -> Option<FencingToken> {
    let holder = holder?;
    let token = holder.token?;
    (holder.owner == owner && last_led.is_none_or(|led| token > led)).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{ms, timing};
    use super::*;

    #[test]
    fn only_an_error_without_an_answer_leaves_the_outcome_unknown() {
        let op = "acquire";
        // (error, outcome unknown, why)
        let cases = [
            (
                LeaseError::Timeout { op, after: ms(467) },
                true,
                "the reply did not come in time: the script may have run",
            ),
            (
                LeaseError::Connection {
                    op,
                    detail: "connection reset by peer".into(),
                },
                true,
                "the connection broke: the request may have landed",
            ),
            (
                LeaseError::NoPermission {
                    op,
                    detail: "NOPERM".into(),
                },
                false,
                "a refusal is an answer",
            ),
            (
                LeaseError::ReadOnly { op },
                false,
                "so is READONLY: nothing was written",
            ),
            (
                LeaseError::Loading { op },
                false,
                "and a Redis still loading",
            ),
        ];
        for (err, want, why) in cases {
            assert_eq!(outcome_unknown(&err), want, "{why}");
        }
    }

    #[test]
    fn a_round_trip_fits_when_a_new_connection_would_still_fit_the_acquire_bound() {
        // 2 s / 1.4 s / 0.4 s: the acquire bound is 467 ms, half of it 233 ms.
        let t = timing(2_000, 1_400, 400);
        // (round trip ms, fits, why)
        let cases = [
            (1, true, "a healthy link"),
            (
                233,
                true,
                "half the bound: a dial and the call fit the whole",
            ),
            (
                234,
                false,
                "past half the bound: a new connection's call would time out",
            ),
            (
                300,
                false,
                "the issue's slow return leg (300 ms each way back)",
            ),
            (600, false, "a whole bound and more"),
        ];
        for (took, want, why) in cases {
            assert_eq!(link_fits(ms(took), &t), want, "{took} ms: {why}");
        }
    }

    #[test]
    fn a_win_with_less_than_a_retry_period_left_came_too_late() {
        use super::super::tests::at;
        // 2 s / 1.4 s / 0.4 s, a validity of 1.978 s from the try sent at 1 s.
        let (t, validity) = (timing(2_000, 1_400, 400), ms(1_978));
        // (read at ms, too late, why)
        let cases = [
            (1_001, false, "a fresh answer"),
            (2_577, false, "a retry period and a millisecond left"),
            (
                2_578,
                true,
                "a retry period left: the first renewal would come too late",
            ),
            (3_000, true, "read after the term's validity"),
        ];
        for (now, want, why) in cases {
            assert_eq!(
                won_too_late(at(1_000), at(now), validity, &t),
                want,
                "{now} ms: {why}"
            );
        }
    }

    #[test]
    fn only_a_term_of_ours_that_we_never_led_is_unknown() {
        let holder = |owner: &str, token: Option<u64>| Holder {
            owner: owner.into(),
            remaining: Some(ms(1_000)),
            token: token.map(FencingToken),
            vanished: false,
        };
        let me = "pod-a-1111";
        // (holder, last led, unknown term, why)
        let cases = [
            (None, None, None, "nobody holds the lease"),
            (
                Some(holder("pod-b-2222", Some(9))),
                None,
                None,
                "another replica's term is not ours to give back",
            ),
            (
                Some(holder(me, Some(9))),
                None,
                Some(9),
                "ours, and this replica never led: an unanswered acquire won it",
            ),
            (
                Some(holder(me, Some(9))),
                Some(FencingToken(7)),
                Some(9),
                "ours, above the last term led",
            ),
            (
                Some(holder(me, Some(7))),
                Some(FencingToken(7)),
                None,
                "the term it led and ended (a release that never landed): a new acquire replaces it",
            ),
            (
                Some(holder(me, None)),
                None,
                None,
                "a value without a token was not written by leasehold",
            ),
        ];
        for (holder, last_led, want, why) in cases {
            assert_eq!(
                unknown_term_of_ours(holder.as_ref(), me, last_led),
                want.map(FencingToken),
                "{why}"
            );
        }
    }
}
