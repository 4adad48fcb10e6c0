use super::*;

fn at(nanos: u64) -> BootInstant {
    BootInstant::from_since_boot(Duration::from_nanos(nanos))
}

/// A check at `nanos` on both clocks, as the records below have both deadlines alike.
fn checked(nanos: u64) -> CheckedAt {
    CheckedAt {
        boot: at(nanos),
        wall: nanos,
    }
}

fn lease(name: &str) -> LeaseName {
    LeaseName::new(name).unwrap()
}

fn term(token: u64, until: u64) -> GuardRecord {
    GuardRecord::Term {
        lease: lease("shop/web"),
        token: FencingToken(token),
        valid_until: at(until),
        wall_until: until,
    }
}

fn no_term() -> GuardRecord {
    GuardRecord::NoTerm {
        lease: lease("shop/web"),
    }
}

#[test]
fn records_survive_a_round_trip() {
    let longest = lease(&"x".repeat(LeaseName::MAX_LEN));
    for record in [
        no_term(),
        term(1, 1),
        term(1_795_991_357_169_907, 4_958_421_484_236),
        term(u64::MAX, u64::MAX),
        GuardRecord::Term {
            lease: longest.clone(),
            token: FencingToken(u64::MAX),
            valid_until: at(u64::MAX),
            wall_until: u64::MAX,
        },
        GuardRecord::NoTerm {
            lease: lease("ns/caf\u{e9}"),
        },
    ] {
        let line = record.encode();
        assert!(line.len() <= MAX_LEN, "{line:?}");
        assert_eq!(GuardRecord::parse(line.as_bytes()), Ok(record), "{line:?}");
    }
    let line = GuardRecord::Term {
        lease: longest,
        token: FencingToken(u64::MAX),
        valid_until: at(u64::MAX),
        wall_until: u64::MAX,
    }
    .encode();
    assert_eq!(line.len(), MAX_LEN, "the longest record fills the limit");
    assert_eq!(no_term().encode(), "leasehold-guard 3 0 0 0 shop/web\n");
    assert_eq!(
        term(42, 1_000).encode(),
        "leasehold-guard 3 42 1000 1000 shop/web\n"
    );
}

#[test]
fn torn_or_garbled_records_are_refused() {
    let good = "leasehold-guard 3 42 1000 2000 shop/web\n";
    let cases: &[(&str, &str)] = &[
        ("", "empty"),
        ("leasehold-guard 3 42 1000 2000 shop/web", "newline"),
        ("leasehold-guard 3 42 1000 2000 shop/w", "newline"),
        ("leasehold-gu", "newline"),
        ("leasehold-guard 3 42 1000 2000\n", "6 fields"),
        ("leasehold-guard 3 42 1000 2000 shop/web 7\n", "6 fields"),
        (
            "leasehold-guard  3 42 1000 2000 shop/web\n",
            "format version ``",
        ),
        ("leasehold-guard 3 42  1000 2000 shop/web\n", "6 fields"),
        (
            "leasehold-guard 3 42 1000 2000 shop/web\n\n",
            "more than one line",
        ),
        (
            "leasehold-guard 3 42 1000 2000 shop/web\nleasehold-guard 3 42 1000 2000 shop/web\n",
            "more than one line",
        ),
        (
            "leasehold-guarb 3 42 1000 2000 shop/web\n",
            "does not start",
        ),
        ("leasehold-guard\n", "6 fields"),
        ("leasehold-guard 1 42 1000\n", "version `1`"),
        ("leasehold-guard 2 42 1000 shop/web\n", "version `2`"),
        ("leasehold-guard 4 42 1000 2000 shop/web\n", "version `4`"),
        ("leasehold-guard 3 4x 1000 2000 shop/web\n", "token `4x`"),
        (
            "leasehold-guard 3 42 0100 2000 shop/web\n",
            "deadline `0100`",
        ),
        (
            "leasehold-guard 3 42 +100 2000 shop/web\n",
            "deadline `+100`",
        ),
        ("leasehold-guard 3 42 -1 2000 shop/web\n", "deadline `-1`"),
        (
            "leasehold-guard 3 42 1000 -2 shop/web\n",
            "wall deadline `-2`",
        ),
        (
            "leasehold-guard 3 42 99999999999999999999 2000 shop/web\n",
            "64 bits",
        ),
        (
            "leasehold-guard 3 0 1000 2000 shop/web\n",
            "without the others",
        ),
        (
            "leasehold-guard 3 42 0 2000 shop/web\n",
            "without the others",
        ),
        (
            "leasehold-guard 3 42 1000 0 shop/web\n",
            "without the others",
        ),
        ("leasehold-guard 3 42 1000 2000 shop/web\r\n", "the lease"),
        ("leasehold-guard 3 42 1000 2000 {shop}\n", "the lease"),
        ("leasehold-guard 3 \u{0}42 1000 2000 shop/web\n", "token"),
    ];
    for (text, rule) in cases {
        let err = GuardRecord::parse(text.as_bytes()).expect_err(text);
        assert!(err.contains(rule), "{text:?}: {err}");
    }
    assert!(GuardRecord::parse(&[0xff; 10]).is_err());
    assert!(
        GuardRecord::parse(&[b'1'; MAX_LEN + 1])
            .unwrap_err()
            .contains("longer")
    );
    // Every prefix of a good record (a short read) is refused.
    for end in 0..good.len() {
        assert!(
            GuardRecord::parse(&good.as_bytes()[..end]).is_err(),
            "{:?}",
            &good[..end]
        );
    }
}

#[test]
fn the_verdict_follows_the_deadline_and_the_margin() {
    let ms = |n: u64| Duration::from_millis(n);
    let t = FencingToken(42);
    let record = term(42, 10_000_000_000);
    let rows: &[(u64, Duration, Result<FencingToken, Refusal>)] = &[
        (9_000_000_000, Duration::ZERO, Ok(t)),
        (9_999_999_999, Duration::ZERO, Ok(t)),
        (
            10_000_000_000,
            Duration::ZERO,
            Err(Refusal::Expired {
                token: t,
                late: Duration::ZERO,
            }),
        ),
        (
            10_500_000_000,
            Duration::ZERO,
            Err(Refusal::Expired {
                token: t,
                late: ms(500),
            }),
        ),
        (9_000_000_000, ms(999), Ok(t)),
        (
            9_000_000_000,
            ms(1000),
            Err(Refusal::TooShort {
                token: t,
                left: ms(1000),
                wanted: ms(1000),
            }),
        ),
        (
            10_000_000_000,
            ms(1),
            Err(Refusal::Expired {
                token: t,
                late: Duration::ZERO,
            }),
        ),
    ];
    for (now, valid_for, want) in rows {
        assert_eq!(
            record.verdict(checked(*now), *valid_for, &CallerTerm::default()),
            *want,
            "now {now}, valid for {valid_for:?}"
        );
    }
}

#[test]
fn a_wall_clock_past_its_deadline_refuses_though_the_boot_clock_did_not_count_the_time() {
    let s = |n: u64| n * 1_000_000_000;
    let record = term(42, s(10));
    let frozen = |boot: u64, wall: u64| CheckedAt {
        boot: at(s(boot)),
        wall: s(wall),
    };
    let any = CallerTerm::default();
    assert_eq!(
        record.verdict(frozen(5, 5), Duration::ZERO, &any),
        Ok(FencingToken(42))
    );
    // 3 s passed unseen by the boot clock: 2 s left by the wall clock, not 5.
    assert_eq!(
        record.verdict(frozen(5, 8), Duration::from_secs(4), &any),
        Err(Refusal::TooShort {
            token: FencingToken(42),
            left: Duration::from_secs(2),
            wanted: Duration::from_secs(4),
        })
    );
    // 15 s passed unseen: past the deadline by 10 s on the wall clock.
    assert_eq!(
        record.verdict(frozen(5, 20), Duration::ZERO, &any),
        Err(Refusal::Expired {
            token: FencingToken(42),
            late: Duration::from_secs(10),
        })
    );
    // A wall clock set back changes nothing: the boot clock still bounds the term.
    assert!(matches!(
        record.verdict(frozen(11, 1), Duration::ZERO, &any),
        Err(Refusal::Expired { late, .. }) if late == Duration::from_secs(1)
    ));
}

#[test]
fn the_verdict_refuses_another_lease_or_term_than_the_callers() {
    let now = checked(1);
    let record = term(42, 10_000_000_000);
    let caller = |lease_name: Option<&str>, token: Option<u64>| CallerTerm {
        lease: lease_name.map(lease),
        token: token.map(FencingToken),
    };
    let rows: &[(CallerTerm, &GuardRecord, Result<FencingToken, Refusal>)] = &[
        (caller(None, None), &record, Ok(FencingToken(42))),
        (
            caller(Some("shop/web"), Some(42)),
            &record,
            Ok(FencingToken(42)),
        ),
        (caller(None, Some(42)), &record, Ok(FencingToken(42))),
        (
            caller(None, Some(41)),
            &record,
            Err(Refusal::OtherTerm {
                token: FencingToken(42),
                mine: FencingToken(41),
            }),
        ),
        (
            caller(Some("shop/web"), Some(43)),
            &record,
            Err(Refusal::OtherTerm {
                token: FencingToken(42),
                mine: FencingToken(43),
            }),
        ),
        (
            caller(Some("shop/api"), Some(42)),
            &record,
            Err(Refusal::OtherLease {
                lease: lease("shop/web"),
                mine: lease("shop/api"),
            }),
        ),
        (
            caller(Some("shop/api"), None),
            &no_term(),
            Err(Refusal::OtherLease {
                lease: lease("shop/web"),
                mine: lease("shop/api"),
            }),
        ),
        (
            caller(Some("shop/web"), Some(42)),
            &no_term(),
            Err(Refusal::NoTerm),
        ),
    ];
    for (caller, record, want) in rows {
        assert_eq!(
            record.verdict(now, Duration::ZERO, caller),
            *want,
            "{caller:?} reading {record:?}"
        );
    }
}

#[test]
fn a_zeroed_record_is_never_valid() {
    for now in [0, 1, u64::MAX] {
        assert_eq!(
            no_term().verdict(checked(now), Duration::ZERO, &CallerTerm::default()),
            Err(Refusal::NoTerm)
        );
    }
}
