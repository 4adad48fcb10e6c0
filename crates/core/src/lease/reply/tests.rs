use super::*;

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

/// Redis's `TIME` in the replies below, in microseconds.
const TIME: u64 = 1_800_000_000_000_000;

#[test]
fn acquire_replies_map_to_outcomes() {
    let at = BootInstant::default();
    let cases = [
        (
            Value::Array(vec![bulk("ACQUIRED"), Value::Int(7), bulk("expired")]),
            Some(Acquired::Leader(Grant {
                token: FencingToken(7),
                sent_at: at,
                lead: WallLead::default(),
                previous: PreviousTerm::Expired,
                redis_us: TIME,
            })),
        ),
        (
            Value::Array(vec![bulk("ACQUIRED"), Value::Int(7), bulk("handed_over")]),
            Some(Acquired::Leader(Grant {
                token: FencingToken(7),
                sent_at: at,
                lead: WallLead::default(),
                previous: PreviousTerm::HandedOver,
                redis_us: TIME,
            })),
        ),
        (
            Value::Array(vec![
                bulk("ACQUIRED"),
                Value::Int(7),
                bulk("expired"),
                Value::Int(5),
            ]),
            None,
        ),
        (
            Value::Array(vec![bulk("ACQUIRED"), Value::Int(7), bulk("somehow")]),
            None,
        ),
        (
            Value::Array(vec![
                bulk("HELD"),
                bulk("b-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e#6"),
                Value::Int(900),
                bulk("KEY"),
            ]),
            Some(Acquired::HeldBy(Holder {
                owner: "b-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e".into(),
                remaining: Some(Duration::from_millis(900)),
                token: Some(FencingToken(6)),
                vanished: false,
            })),
        ),
        (
            Value::Array(vec![bulk("HELD"), bulk("x"), Value::Int(-1), bulk("KEY")]),
            Some(Acquired::HeldBy(Holder {
                owner: "x".into(),
                remaining: None,
                token: None,
                vanished: false,
            })),
        ),
        (
            Value::Array(vec![
                bulk("HELD"),
                bulk("b-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e#8"),
                Value::Int(400),
                bulk("RECORD"),
            ]),
            Some(Acquired::HeldBy(Holder {
                owner: "b-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e".into(),
                remaining: Some(Duration::from_millis(400)),
                token: Some(FencingToken(8)),
                vanished: true,
            })),
        ),
        (
            Value::Array(vec![bulk("HELD"), bulk("x"), Value::Int(1), bulk("WHO")]),
            None,
        ),
        (
            Value::Array(vec![bulk("COOLDOWN"), Value::Int(15000), Value::Int(1)]),
            Some(Acquired::CoolingDown {
                remaining: Duration::from_secs(15),
                started: true,
            }),
        ),
        (
            Value::Array(vec![bulk("RESERVED"), bulk("web-b"), Value::Int(480)]),
            Some(Acquired::Reserved {
                identity: "web-b".into(),
                remaining: Some(Duration::from_millis(480)),
            }),
        ),
        (
            Value::Array(vec![bulk("RESERVED"), bulk("web-b"), Value::Int(-1)]),
            Some(Acquired::Reserved {
                identity: "web-b".into(),
                remaining: None,
            }),
        ),
        (Value::Array(vec![bulk("RESERVED"), bulk("web-b")]), None),
        (
            Value::Array(vec![bulk("NEWER"), bulk("2"), bulk("0.4.0")]),
            Some(Acquired::NewerProtocol(Protocol {
                version: Some(2),
                release: "0.4.0".into(),
            })),
        ),
        (
            Value::Array(vec![bulk("NEWER"), bulk("?"), bulk("v9:blue")]),
            Some(Acquired::NewerProtocol(Protocol {
                version: None,
                release: "v9:blue".into(),
            })),
        ),
        (Value::Array(vec![bulk("NEWER"), bulk("")]), None),
        (
            Value::Array(vec![bulk("ACQUIRED"), Value::Int(-3), bulk("none")]),
            None,
        ),
        (Value::Array(vec![bulk("WHAT")]), None),
        (Value::Array(vec![]), None),
        (Value::Int(1), None),
    ];
    for (reply, want) in cases {
        // Every reply ends with Redis's time and the longest live claim.
        let Value::Array(mut items) = reply else {
            assert_eq!(
                parse_acquire(&reply, (at, WallLead::default())),
                None,
                "{reply:?}"
            );
            continue;
        };
        items.extend([Value::Int(TIME as i64), Value::Int(10_000)]);
        let reply = Value::Array(items);
        assert_eq!(
            parse_acquire(&reply, (at, WallLead::default())),
            want.map(|a| (a, TIME, Duration::from_secs(10))),
            "{reply:?}"
        );
    }
    // Without them, or with a negative one, the reply is not the script's.
    let bare = Value::Array(vec![bulk("ACQUIRED"), Value::Int(7), bulk("none")]);
    assert_eq!(parse_acquire(&bare, (at, WallLead::default())), None);
    let untimed = Value::Array(vec![
        bulk("ACQUIRED"),
        Value::Int(7),
        bulk("none"),
        Value::Int(10_000),
    ]);
    assert_eq!(parse_acquire(&untimed, (at, WallLead::default())), None);
    for (time, longest) in [(-1, 10_000), (TIME as i64, -1)] {
        let negative = Value::Array(vec![
            bulk("ACQUIRED"),
            Value::Int(7),
            bulk("none"),
            Value::Int(time),
            Value::Int(longest),
        ]);
        assert_eq!(parse_acquire(&negative, (at, WallLead::default())), None);
    }
}

#[test]
fn renew_replies_map_to_outcomes() {
    let at = BootInstant::default();
    let renewal = |repaired, listeners| Renewal {
        sent_at: at,
        repaired,
        listeners,
        redis_us: 1_700_000_000_000_000,
    };
    let held = |repaired, listeners| Some(Renewed::Held(renewal(repaired, listeners)));
    let handover = |repaired, to: Option<&str>| {
        Some(Renewed::HandoverRequested {
            renewal: renewal(repaired, Some(3)),
            to: to.map(str::to_owned),
        })
    };
    let time = Value::Int(1_700_000_000_000_000);
    let reply = |mut items: Vec<Value>| {
        items.insert(2.min(items.len()), time.clone());
        Value::Array(items)
    };
    let cases = [
        (
            reply(vec![Value::Int(1), Value::Int(0)]),
            held(false, Some(0)),
        ),
        (
            reply(vec![Value::Int(2), Value::Int(4)]),
            held(true, Some(4)),
        ),
        (
            reply(vec![Value::Int(0)]),
            Some(Renewed::NotHeld {
                sent_at: at,
                redis_us: 1_700_000_000_000_000,
            }),
        ),
        (
            reply(vec![Value::Int(1), Value::Int(3), bulk("web-b")]),
            handover(false, Some("web-b")),
        ),
        (
            reply(vec![Value::Int(2), Value::Int(3), bulk("-")]),
            handover(true, None),
        ),
        // Not the script's: another code, a bare code, a count or a time missing or
        // negative.
        (reply(vec![Value::Int(3), Value::Int(0)]), None),
        (Value::Int(1), None),
        (Value::Int(0), None),
        (Value::Array(vec![Value::Int(0), Value::Int(-5)]), None),
        (reply(vec![Value::Int(1)]), None),
        (Value::Array(vec![Value::Int(1), Value::Int(0)]), None),
        (reply(vec![Value::Int(1), Value::Int(-1)]), None),
        (reply(vec![Value::Int(1), bulk("web-b")]), None),
        (
            Value::Array(vec![Value::Int(1), Value::Int(0), Value::Int(-5)]),
            None,
        ),
        // A request is only ever answered with a held lease.
        (reply(vec![Value::Int(0), Value::Int(0), bulk("-")]), None),
        (Value::Nil, None),
    ];
    for (reply, want) in cases {
        assert_eq!(parse_renew(&reply, at, true), want, "{reply:?}");
    }
    // Where Redis counts one node's listeners, the count is not an answer.
    let counted_elsewhere = reply(vec![Value::Int(1), Value::Int(1)]);
    assert_eq!(
        parse_renew(&counted_elsewhere, at, false),
        held(false, None)
    );
}

#[test]
fn observe_replies_map_to_observations() {
    let empty = Value::Array(vec![
        Value::Nil,
        Value::Int(-2),
        Value::Nil,
        Value::Int(-1),
        bulk("KEY"),
        Value::Nil,
        Value::Int(-2),
        bulk(""),
        bulk(""),
        bulk(""),
    ]);
    assert_eq!(parse_observe(&empty), Some(Observation::default()));
    let held = Value::Array(vec![
        bulk("a-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e#41"),
        Value::Int(1200),
        bulk("42"),
        Value::Int(0),
        bulk("KEY"),
        bulk("web-b"),
        Value::Int(-1),
        bulk("1"),
        bulk("0.3.0"),
        bulk("a-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e#41 1.049000 1.051000 1800000000000000"),
    ]);
    let seen = parse_observe(&held).unwrap();
    assert_eq!(
        seen.redis_clock,
        Some(NotedRate {
            term: "a-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e#41".into(),
            low: 1.049,
            high: 1.051,
            at_us: 1_800_000_000_000_000,
        })
    );
    for bad in [
        "a-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e#41 1.2 1.1 5",
        "a-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e#41 x 1.1 5",
        "a-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e#41 NaN NaN 5",
        " 1 1 5",
        "a-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e#41 1 1",
    ] {
        assert_eq!(noted_rate(bad), None, "{bad}");
    }
    assert_eq!(
        seen.protocol,
        Some(Protocol {
            version: Some(1),
            release: "0.3.0".into()
        })
    );
    let holder = seen.holder.unwrap();
    assert_eq!(holder.remaining, Some(Duration::from_millis(1200)));
    assert_eq!(
        (holder.owner.as_str(), holder.token),
        (
            "a-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e",
            Some(FencingToken(41))
        )
    );
    assert_eq!(seen.token, Some(FencingToken(42)));
    assert_eq!(seen.cooldown, CooldownState::Idle);
    assert_eq!(seen.reserved, Some(("web-b".to_owned(), None)));
    assert_eq!(parse_observe(&Value::Array(vec![Value::Nil])), None);
}

#[test]
fn durations_become_at_least_one_millisecond() {
    assert_eq!(millis(Duration::from_micros(10)), 1);
    assert_eq!(millis(Duration::from_secs(15)), 15_000);
}
