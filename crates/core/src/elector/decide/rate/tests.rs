use super::super::tests::{at, ms, timing};
use super::*;

/// A reply sent at `sent` ms, received at `received` ms, with Redis's clock at `redis` ms.
fn reading(sent: u64, received: u64, redis: u64) -> Reading {
    Reading {
        sent: at(sent),
        received: at(received),
        redis_us: redis * 1_000,
    }
}

fn close(got: f64, want: f64) -> bool {
    (got - want).abs() < 1e-9
}

#[test]
fn two_replies_bound_the_rate_by_their_round_trips() {
    // (first, second) -> (low, high), or no bound
    let cases = [
        (
            reading(1_000, 1_002, 10_001),
            reading(11_000, 11_002, 20_001),
            Some((10_000.0 / 10_002.0, 10_000.0 / 9_998.0)),
            "a 2 ms round trip over 10 s: the rate 1 within 0.04 %",
        ),
        (
            reading(1_000, 1_001, 10_000),
            reading(11_000, 11_001, 21_000),
            Some((11_000.0 / 10_001.0, 11_000.0 / 9_999.0)),
            "Redis counted 11 s of the boot clock's 10: 10 % fast",
        ),
        (
            reading(1_000, 1_001, 10_000),
            reading(1_400, 1_401, 10_400),
            Some((400.0 / 401.0, 400.0 / 399.0)),
            "two renewals 400 ms apart on a 1 ms round trip: within 0.5 %",
        ),
        (
            reading(1_000, 1_500, 10_000),
            reading(1_200, 1_700, 10_300),
            None,
            "round trips that overlap bound nothing",
        ),
        (
            reading(1_000, 1_001, 10_000),
            reading(2_000, 2_001, 9_000),
            None,
            "a Redis clock that went back bounds nothing",
        ),
    ];
    for (a, b, want, why) in cases {
        let got = RateBound::between(a, b);
        match (got, want) {
            (None, None) => {}
            (Some(got), Some((low, high))) => {
                assert!(
                    close(got.low, low) && close(got.high, high),
                    "{why}: {got:?}"
                );
                assert!(got.width() >= 0.0, "{why}");
            }
            _ => panic!("{why}: {got:?}"),
        }
    }
}

#[test]
fn a_rate_that_rises_mid_window_bounds_the_rate_from_the_next_replies() {
    let t = timing(2_000, 1_400, 400);
    let mut window = RateWindow::new(&t);
    // Six seconds of renewals every 400 ms at rate 1, 1 ms round trips: the window is full.
    for i in 0..=15u64 {
        window.record(reading(i * 400, i * 400 + 1, 100_000 + i * 400));
    }
    // The shortest baseline's bound reaches highest, still within the drift factor.
    let steady = window.bound().expect("a bound");
    assert!(steady.high < 1.01 && validity_at(&t, Some(steady)) == t.validity());
    // Then 8 % fast, from 6,000 ms on: over the whole window the rate is still about 1.01.
    let (mut sent, mut redis) = (6_000, 106_000);
    for _ in 0..2 {
        (sent, redis) = (sent + 400, redis + 432);
        assert_eq!(window.record(reading(sent, sent + 1, redis)), Jump::None);
    }
    let bound = window.bound().expect("a bound");
    assert!(
        bound.low > 1.07 && bound.high >= 1.08 && bound.high < 1.09,
        "{bound:?}"
    );
    assert!(
        validity_at(&t, Some(bound)) < ms(1_852),
        "Redis keeps it 1,852 ms"
    );
}

#[test]
fn the_window_bounds_from_its_oldest_reply_within_three_lease_durations() {
    let t = timing(2_000, 1_400, 400);
    let mut window = RateWindow::new(&t);
    assert_eq!(window.bound(), None, "no reply, no bound");
    window.record(reading(0, 1, 100_000));
    assert_eq!(window.bound(), None, "one reply bounds nothing");
    // Renewals every 400 ms at a Redis 8 % fast, 1 ms round trips.
    for i in 1..=30u64 {
        let sent = i * 400;
        window.record(reading(sent, sent + 1, 100_000 + sent * 108 / 100));
    }
    let bound = window.bound().expect("a bound");
    assert!(bound.low <= 1.08 && bound.high >= 1.08, "{bound:?}");
    assert!(bound.width() < 0.01, "a narrow baseline's: {bound:?}");
    // The longest baseline stays about three lease durations (6 s): about 2 ms in 6 s wide.
    let (oldest, newest) = (window.readings.front(), window.readings.back());
    let longest = RateBound::between(*oldest.unwrap(), *newest.unwrap()).unwrap();
    assert!(longest.width() < 0.001, "{longest:?}");
    assert!(
        longest.width() > 0.0002,
        "a baseline no longer than the span: {longest:?}"
    );
    // A clock stepped back starts the window anew.
    assert_eq!(
        window.record(reading(12_400, 12_401, 50_000)),
        Jump::Back(ms(62_960))
    );
    assert_eq!(window.bound(), None);
    // So does a reply sent before the last one (a late reply of an earlier renewal).
    window.record(reading(12_800, 12_801, 50_400));
    assert!(window.bound().is_some());
    window.record(reading(12_700, 12_900, 50_500));
    assert_eq!(window.bound(), None);
}

#[test]
fn an_advance_beyond_the_fastest_slew_is_a_step() {
    let t = timing(2_000, 1_400, 400);
    // (Redis's clock between two replies 400 ms apart with 1 ms round trips, ms) -> jump; the
    // boot clock's longest interval between the two Redis instants is 401 ms
    let cases = [
        (400, Jump::None, "the rate 1"),
        (433, Jump::None, "chrony's fastest slew, a twelfth"),
        (
            443,
            Jump::None,
            "10 % of the 401 ms and the fixed margin: 443.1 ms",
        ),
        (
            444,
            Jump::Forward(Duration::from_micros(900)),
            "a little more",
        ),
        (
            3_400,
            Jump::Forward(Duration::from_micros(2_956_900)),
            "a 3 s step",
        ),
        (399, Jump::None, "a slow Redis keeps keys longer"),
        (300, Jump::None, "slower still, but forward"),
    ];
    for (redis, want, why) in cases {
        // Two replies at the rate 1 first: the rate's bound.
        let mut window = RateWindow::new(&t);
        assert_eq!(window.record(reading(0, 1, 100_000)), Jump::None);
        assert_eq!(window.record(reading(400, 401, 100_400)), Jump::None);
        let got = window.record(reading(800, 801, 100_400 + redis));
        assert_eq!(got, want, "{why}");
    }
    // The second reply gives the rate, up to the fastest a term could renew under (below).
    let mut window = RateWindow::new(&t);
    window.record(reading(0, 1, 100_000));
    assert_eq!(window.record(reading(400, 401, 100_900)), Jump::None);
    // With a narrow bound faster than the slew, the bound's high end is the fastest.
    let mut window = RateWindow::new(&t);
    for i in 0..=10u64 {
        let sent = i * 400;
        let jump = window.record(reading(sent, sent + 1, 100_000 + sent * 12 / 10));
        assert_eq!(jump, Jump::None, "a steady 20 % is a rate, not a step");
    }
    assert!(window.bound().expect("a bound").high > 1.2);
    let jump = window.record(reading(4_400, 4_401, 100_000 + 4_000 * 12 / 10 + 600));
    assert!(
        matches!(jump, Jump::Forward(step) if step > ms(100)),
        "{jump:?}"
    );
}

#[test]
fn the_validity_follows_a_redis_clock_faster_than_the_drift() {
    let t = timing(2_000, 1_400, 400); // validity 2000 - 22 = 1978 ms
    let bound = |high: f64| {
        Some(RateBound {
            low: high - 0.001,
            high,
        })
    };
    // (bound) -> validity in µs
    let cases = [
        (None, 1_978_000, "no bound: the configured drift"),
        (bound(1.0), 1_978_000, "the rate 1: the configured drift"),
        (
            bound(1.005),
            1_978_000,
            "within the drift factor: the configured drift",
        ),
        (bound(1.08), 1_849_851, "8 % fast: 2 s / 1.08 - 2 ms"),
        (bound(1.10), 1_816_181, "10 % fast: 2 s / 1.10 - 2 ms"),
        (
            bound(0.9),
            1_978_000,
            "a slow Redis keeps the lease longer: the configured drift",
        ),
        (
            Some(RateBound {
                low: 0.8,
                high: 1.5,
            }),
            1_978_000,
            "a wide bound that does not prove Redis fast (jitter): the configured drift",
        ),
        (
            Some(RateBound {
                low: 1.05,
                high: 1.25,
            }),
            1_598_000,
            "a wide bound whose low end is past the drift: its high end, 2 s / 1.25 - 2 ms",
        ),
    ];
    for (bound, want_us, why) in cases {
        let got = validity_at(&t, bound).as_micros();
        assert!(got.abs_diff(want_us) <= 1, "{why}: {got} µs");
    }
    assert!(
        validity_at(&t, bound(1.10)) < ms(1_818),
        "inside Redis's expiry"
    );
}

#[test]
fn a_forgotten_window_bounds_nothing_and_sees_no_step_in_its_next_reply() {
    let mut w = RateWindow::new(&timing(2_000, 1_400, 400));
    w.record(reading(0, 1, 0));
    w.record(reading(400, 401, 400));
    assert!(w.bound().is_some());
    w.forget();
    assert_eq!(w.bound(), None);
    // Redis's clock 5 s ahead of the boot clock's interval: a freeze, not a step.
    assert_eq!(w.record(reading(800, 801, 5_800)), Jump::None);
    assert_eq!(w.bound(), None);
    // The reply after it, a slew's fastest rate bounds: a step now shows.
    assert_eq!(w.record(reading(1_200, 1_201, 6_200)), Jump::None);
    assert!(matches!(
        w.record(reading(1_600, 1_601, 9_600)),
        Jump::Forward(_)
    ));
}

#[test]
fn after_a_step_back_the_first_reply_that_steps_forward_is_a_step_not_a_rate() {
    let mut w = RateWindow::new(&timing(2_000, 1_400, 400));
    w.record(reading(0, 1, 100_000));
    assert_eq!(w.record(reading(400, 401, 80_400)), Jump::Back(ms(19_600)));
    // 20 s forward over 400 ms: a fresh window takes it for the rate; this one does not.
    assert!(matches!(
        w.record(reading(800, 801, 100_800)),
        Jump::Forward(_)
    ));
    assert_eq!(w.bound(), None);
}

#[test]
fn after_a_restart_the_first_reply_is_held_to_the_rate_bounded_before() {
    let mut w = RateWindow::new(&timing(2_000, 1_400, 400));
    // Redis's clock runs 1.3 times as fast: 520 ms for every 400 ms here.
    w.record(reading(0, 1, 10_000));
    w.record(reading(400, 401, 10_520));
    w.record(reading(800, 801, 11_040));
    w.forget();
    w.record(reading(1_200, 1_201, 11_560));
    assert_eq!(w.record(reading(1_600, 1_601, 12_080)), Jump::None);
}

#[test]
fn a_first_pair_faster_than_any_term_could_renew_under_is_a_step() {
    // TTL 2 s, retry 400 ms: a term stays valid for two retry periods up to 2.5 times as fast.
    let t = timing(2_000, 1_400, 400);
    // (Redis's clock between two replies, ms, over the boot clock's longest interval) -> jump
    let cases = [
        (
            400,
            401,
            1_000,
            Jump::None,
            "2.5 times as fast over a term's first renewal: a rate",
        ),
        (
            400,
            401,
            1_300,
            Jump::Forward(Duration::from_micros(295_500)),
            "beyond it: 401 ms × 2.5 and 2 ms are allowed",
        ),
        (
            2_000,
            2_001,
            3_200,
            Jump::None,
            "1.6 times as fast between a follower's tries",
        ),
        (
            2_000,
            2_001,
            62_000,
            Jump::Forward(Duration::from_micros(56_995_500)),
            "a 60 s step between a follower's tries (the holder's key expired by it)",
        ),
    ];
    for (sent, received, redis, want, why) in cases {
        let mut window = RateWindow::new(&t);
        assert_eq!(window.record(reading(0, 1, 100_000)), Jump::None, "{why}");
        let got = window.record(reading(sent, received, 100_000 + redis));
        assert_eq!(got, want, "{why}");
        assert_eq!(
            window.bound().is_some(),
            want == Jump::None,
            "{why}: a step forgets"
        );
    }
}

#[test]
fn after_a_pair_that_bounds_nothing_or_a_restart_with_nothing_known_a_fast_clock_is_a_rate() {
    // TTL 3 s, retry 500 ms: a first pair may show up to 3 times as fast. On a Redis clock 20 %
    // fast, (why, each reply's (sent ms, Redis ms) and the jump it shows): held to the rate 1
    // instead, every later pair was a step, and the window never bounded the rate.
    type Replies<'a> = &'a [(u64, u64, Jump)];
    let cases: [(&str, Replies<'_>); 2] = [
        (
            "a follower's first two tries 2 ms apart (their bound says nothing), then its next",
            &[
                (0, 0, Jump::None),
                (2, 2, Jump::None),
                (3_000, 3_600, Jump::None),
            ],
        ),
        (
            "a step back while nothing was bounded, then the next tries",
            &[
                (0, 10_000, Jump::None),
                (3_000, 5_000, Jump::Back(ms(5_000))),
                (6_000, 8_600, Jump::None),
                (9_000, 12_200, Jump::None),
            ],
        ),
    ];
    for (why, replies) in cases {
        let mut w = RateWindow::new(&timing(3_000, 2_000, 500));
        for &(sent, redis, want) in replies {
            assert_eq!(w.record(reading(sent, sent + 1, redis)), want, "{why}");
        }
        let bound = w.bound().expect("a bound");
        assert!(
            bound.says_something(0.01) && bound.high > 1.19,
            "{why}: {bound:?}"
        );
    }
}
