//! Redis replies mapped to outcomes at the edge: every shape a script answers with becomes an
//! enum here, and anything else is `None` (a protocol error to the caller), never a panic.

use std::time::Duration;

use redis::Value;

use super::LeaseError;
use super::keys::{FencingToken, split_term};
use super::outcome::{
    Acquired, CooldownState, Grant, Holder, NotedRate, Observation, PreviousTerm, Protocol,
    Renewal, Renewed,
};
use crate::clock::{BootInstant, WallLead};

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

/// A string reply as text; bytes that are no UTF-8 (a foreign writer's) as well as they can be.
pub(super) fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
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

/// Maps an acquire reply (its shapes in `scripts.rs`) to its outcome, Redis's `TIME` in
/// microseconds, and the longest lease duration of a live claim (zero for none).
pub(super) fn parse_acquire(
    reply: &Value,
    (sent_at, lead): (BootInstant, WallLead),
) -> Option<(Acquired, u64, Duration)> {
    let Value::Array(items) = reply else {
        return None;
    };
    let (longest, items) = items.split_last()?;
    let longest = Duration::from_millis(u64::try_from(int(longest)?).ok()?);
    let (time, items) = items.split_last()?;
    let redis_us = u64::try_from(int(time)?).ok()?;
    let acquired = match (text(items.first()?)?.as_str(), &items[1..]) {
        ("ACQUIRED", [t, previous]) => Acquired::Leader(Grant {
            token: token(t)?,
            sent_at,
            lead,
            previous: PreviousTerm::from_label(&text(previous)?)?,
            redis_us,
        }),
        ("HELD", [value, pttl, source]) => {
            Acquired::HeldBy(holder(&text(value)?, int(pttl)?, source)?)
        }
        ("COOLDOWN", [ms, started]) => Acquired::CoolingDown {
            remaining: Duration::from_millis(u64::try_from(int(ms)?).ok()?),
            started: int(started)? == 1,
        },
        ("RESERVED", [identity, pttl]) => Acquired::Reserved {
            identity: text(identity)?,
            remaining: remaining(int(pttl)?),
        },
        ("NEWER", [version, release]) => Acquired::NewerProtocol(protocol_of(version, release)??),
        _ => return None,
    };
    Some((acquired, redis_us, longest))
}

/// Maps a renew reply (its shapes in `scripts.rs`). `counted`: whether the listeners Redis
/// counts are all there are (not in a Cluster, where it counts one node's).
pub(super) fn parse_renew(reply: &Value, sent_at: BootInstant, counted: bool) -> Option<Renewed> {
    let Value::Array(items) = reply else {
        return None;
    };
    let (code, listeners, time, to) = match items.as_slice() {
        [code, time] if int(code)? == 0 => {
            let redis_us = u64::try_from(int(time)?).ok()?;
            return Some(Renewed::NotHeld { sent_at, redis_us });
        }
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
        clock,
    ] = items.as_slice()
    else {
        return None;
    };
    let reserved = match reserved {
        Value::Nil => None,
        identity => Some((text(identity)?, remaining(int(reserved_pttl)?))),
    };
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
        token: token(fence),
        cooldown,
        reserved,
        protocol: protocol_of(protocol_version, protocol_release)?,
        redis_clock: noted_rate(&text(clock)?),
    })
}

/// The `:clock` key's `<term value> <low> <high> <time_us>`; `None` when empty or not of that
/// shape (a rate is for display: nothing decides on it).
fn noted_rate(value: &str) -> Option<NotedRate> {
    let mut fields = value.split(' ');
    let term = fields.next().filter(|t| !t.is_empty())?.to_owned();
    let low: f64 = fields.next()?.parse().ok()?;
    let high: f64 = fields.next()?.parse().ok()?;
    let at_us: u64 = fields.next()?.parse().ok()?;
    (low.is_finite() && high.is_finite() && low <= high).then_some(NotedRate {
        term,
        low,
        high,
        at_us,
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
mod tests;
