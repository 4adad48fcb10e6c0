//! Redis replies mapped to outcomes at the edge: every shape a script answers with becomes an
//! enum here, and anything else is `None` (a protocol error to the caller), never a panic.

use std::time::Duration;

use redis::Value;

use super::LeaseError;
use super::keys::{FencingToken, split_term};
use super::outcome::{
    Acquired, CooldownState, Grant, Holder, Observation, PreviousTerm, Protocol, Renewal, Renewed,
};
use crate::clock::BootInstant;

/// Milliseconds for Redis, at least 1 (a zero PX is an error there).
pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

pub(super) fn protocol(op: &'static str, reply: &Value) -> LeaseError {
    LeaseError::Protocol {
        op,
        detail: format!("{reply:?}"),
    }
}

pub(super) fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        _ => text(v)?.parse().ok(),
    }
}

pub(super) fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        Value::VerbatimString { text, .. } => Some(text.clone()),
        _ => None,
    }
}

fn token(v: &Value) -> Option<FencingToken> {
    int(v).and_then(|i| u64::try_from(i).ok()).map(FencingToken)
}

/// Maps a PTTL reply: `-1` no TTL, `-2` no key.
pub(super) fn remaining(pttl: i64) -> Option<Duration> {
    u64::try_from(pttl).ok().map(Duration::from_millis)
}

/// Maps an acquire reply to its outcome, Redis's `TIME` in microseconds, and the longest lease
/// duration of a live claim that the script saw (zero for none): every reply ends with the
/// last two.
pub(super) fn parse_acquire(
    reply: &Value,
    sent_at: BootInstant,
    ttl: Duration,
) -> Option<(Acquired, u64, Duration)> {
    let Value::Array(items) = reply else {
        return None;
    };
    let (longest, items) = items.split_last()?;
    let longest = Duration::from_millis(u64::try_from(int(longest)?).ok()?);
    let (time, items) = items.split_last()?;
    let redis_us = u64::try_from(int(time)?).ok()?;
    let acquired = match (text(items.first()?)?.as_str(), &items[1..]) {
        ("ACQUIRED", [t, previous]) => Some(Acquired::Leader(Grant {
            token: token(t)?,
            sent_at,
            ttl,
            previous: PreviousTerm::from_label(&text(previous)?)?,
            redis_us,
        })),
        ("HELD", [value, pttl, source]) => {
            Some(Acquired::HeldBy(holder(&text(value)?, int(pttl)?, source)?))
        }
        ("COOLDOWN", [ms, started]) => Some(Acquired::CoolingDown {
            remaining: Duration::from_millis(u64::try_from(int(ms)?).ok()?),
            started: int(started)? == 1,
        }),
        ("RESERVED", [identity, pttl]) => Some(Acquired::Reserved {
            identity: text(identity)?,
            remaining: remaining(int(pttl)?),
        }),
        ("NEWER", [version, release]) => {
            Some(Acquired::NewerProtocol(protocol_of(version, release)??))
        }
        _ => None,
    }?;
    Some((acquired, redis_us, longest))
}

/// Maps a renew reply (see the renew script): 0 not ours; `{code, listeners, time_us}` held,
/// code 1, or 2 after putting the key back; `{code, listeners, time_us, to}` held with a handover
/// of this term requested (`-`: to anyone). `counted`: whether the listeners Redis counts are all
/// there are (not in a Cluster, where it counts one node's).
pub(super) fn parse_renew(reply: &Value, sent_at: BootInstant, counted: bool) -> Option<Renewed> {
    let Value::Array(items) = reply else {
        return (int(reply)? == 0).then_some(Renewed::NotHeld);
    };
    let (code, listeners, time, to) = match items.as_slice() {
        [code, listeners, time] => (code, listeners, time, None),
        [code, listeners, time, to] => (code, listeners, time, Some(text(to)?)),
        _ => return None,
    };
    let repaired = match int(code)? {
        1 => false,
        2 => true,
        _ => return None,
    };
    let listeners = u32::try_from(int(listeners)?).ok()?;
    let held = Renewal {
        sent_at,
        repaired,
        listeners: counted.then_some(listeners),
        redis_us: u64::try_from(int(time)?).ok()?,
    };
    Some(match to {
        None => Renewed::Held(held),
        Some(to) => Renewed::HandoverRequested {
            renewal: held,
            to: (to != "-").then_some(to),
        },
    })
}

/// The holder named by a lease value (from the key or the state record, as `source` says).
fn holder(value: &str, pttl: i64, source: &Value) -> Option<Holder> {
    let (owner, token) = split_term(value);
    Some(Holder {
        owner: owner.to_owned(),
        remaining: remaining(pttl),
        token,
        vanished: match text(source)?.as_str() {
            "KEY" => false,
            "RECORD" => true,
            _ => return None,
        },
    })
}

pub(super) fn parse_observe(reply: &Value) -> Option<Observation> {
    let Value::Array(items) = reply else {
        return None;
    };
    let [
        value,
        pttl,
        fence,
        cooldown,
        source,
        reserved,
        reserved_pttl,
        protocol_version,
        protocol_release,
    ] = items.as_slice()
    else {
        return None;
    };
    let reserved = match reserved {
        Value::Nil => None,
        identity => Some((text(identity)?, remaining(int(reserved_pttl)?))),
    };
    let token = token(fence);
    let holder = match value {
        Value::Nil => None,
        v => Some(holder(&text(v)?, int(pttl)?, source)?),
    };
    let cooldown = match int(cooldown)? {
        -1 => CooldownState::Pending,
        0 => CooldownState::Idle,
        ms => CooldownState::Running(Duration::from_millis(u64::try_from(ms).ok()?)),
    };
    Some(Observation {
        holder,
        token,
        cooldown,
        reserved,
        protocol: protocol_of(protocol_version, protocol_release)?,
    })
}

/// The protocol from a script's pair: `<version or ?>`, `<release>`; `Some(None)` for the
/// empty pair of an absent key, `None` for anything else.
fn protocol_of(version: &Value, release: &Value) -> Option<Option<Protocol>> {
    let (version, release) = (text(version)?, text(release)?);
    if version.is_empty() {
        return Some(None);
    }
    // A version past u32 is as unreadable as `?`: higher than any this release knows.
    let version = version.parse().ok();
    Some(Some(Protocol { version, release }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    /// Redis's `TIME` in the replies below, in microseconds.
    const TIME: u64 = 1_800_000_000_000_000;

    #[test]
    fn acquire_replies_map_to_outcomes() {
        let at = BootInstant::default();
        let ttl = Duration::from_secs(15);
        let cases = [
            (
                Value::Array(vec![bulk("ACQUIRED"), Value::Int(7), bulk("expired")]),
                Some(Acquired::Leader(Grant {
                    token: FencingToken(7),
                    sent_at: at,
                    ttl,
                    previous: PreviousTerm::Expired,
                    redis_us: TIME,
                })),
            ),
            (
                Value::Array(vec![bulk("ACQUIRED"), Value::Int(7), bulk("handed_over")]),
                Some(Acquired::Leader(Grant {
                    token: FencingToken(7),
                    sent_at: at,
                    ttl,
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
                    bulk("b-1#6"),
                    Value::Int(900),
                    bulk("KEY"),
                ]),
                Some(Acquired::HeldBy(Holder {
                    owner: "b-1".into(),
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
                    bulk("b-1#8"),
                    Value::Int(400),
                    bulk("RECORD"),
                ]),
                Some(Acquired::HeldBy(Holder {
                    owner: "b-1".into(),
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
                assert_eq!(parse_acquire(&reply, at, ttl), None, "{reply:?}");
                continue;
            };
            items.extend([Value::Int(TIME as i64), Value::Int(10_000)]);
            let reply = Value::Array(items);
            assert_eq!(
                parse_acquire(&reply, at, ttl),
                want.map(|a| (a, TIME, Duration::from_secs(10))),
                "{reply:?}"
            );
        }
        // Without them, or with a negative one, the reply is not the script's.
        let bare = Value::Array(vec![bulk("ACQUIRED"), Value::Int(7), bulk("none")]);
        assert_eq!(parse_acquire(&bare, at, ttl), None);
        let untimed = Value::Array(vec![
            bulk("ACQUIRED"),
            Value::Int(7),
            bulk("none"),
            Value::Int(10_000),
        ]);
        assert_eq!(parse_acquire(&untimed, at, ttl), None);
        for (time, longest) in [(-1, 10_000), (TIME as i64, -1)] {
            let negative = Value::Array(vec![
                bulk("ACQUIRED"),
                Value::Int(7),
                bulk("none"),
                Value::Int(time),
                Value::Int(longest),
            ]);
            assert_eq!(parse_acquire(&negative, at, ttl), None);
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
            (Value::Int(0), Some(Renewed::NotHeld)),
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
        ]);
        assert_eq!(
            parse_observe(&empty),
            Some(Observation {
                holder: None,
                token: None,
                cooldown: CooldownState::Pending,
                reserved: None,
                protocol: None,
            })
        );
        let held = Value::Array(vec![
            bulk("a-1#41"),
            Value::Int(1200),
            bulk("42"),
            Value::Int(0),
            bulk("KEY"),
            bulk("web-b"),
            Value::Int(-1),
            bulk("1"),
            bulk("0.3.0"),
        ]);
        let seen = parse_observe(&held).unwrap();
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
            ("a-1", Some(FencingToken(41)))
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
}
