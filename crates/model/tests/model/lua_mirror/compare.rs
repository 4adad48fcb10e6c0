//! Whether the real scripts and the mirror agree: replies and datasets, with instants and
//! time-derived tokens within the slack that Redis's clock moves between the set-up and the
//! script.

use redis::Value;

use crate::mirror::{AcquireReply, Acquisition, Data, Name, RenewReply, Source, Successor, Term};

/// How far Redis's clock may move between reading `TIME` and running the script.
pub const SLACK_US: u64 = 100_000;

pub fn near(a: u64, b: u64, slack: u64) -> bool {
    a.abs_diff(b) <= slack
}

/// Two keys with a TTL agree: the same value, expiries (in ms) within the slack.
fn expiring<T: PartialEq>(a: Option<(T, u64)>, b: Option<(T, u64)>) -> bool {
    match (a, b) {
        (Some((x, at)), Some((y, bt))) => x == y && near(at, bt, SLACK_US / 1000),
        (None, None) => true,
        _ => false,
    }
}

/// Terms agree; tokens floored at the server time (about 1.8e15) within the slack.
fn same_term(a: Option<Term>, b: Option<Term>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) if a.token > 1_000_000_000_000 => {
            a.owner == b.owner && near(a.token, b.token, SLACK_US)
        }
        (a, b) => a == b,
    }
}

/// The real and the mirrored dataset agree, instants within the slack.
pub fn same_data(real: &Data, mirror: &Data) -> bool {
    let lease = match (real.lease, mirror.lease) {
        (Some((a, x)), Some((b, y))) => same_term(Some(a), Some(b)) && near(x, y, SLACK_US / 1000),
        (None, None) => true,
        _ => false,
    };
    let fence = match (real.fence, mirror.fence) {
        (Some(a), Some(b)) => near(a, b, SLACK_US),
        (None, None) => true,
        _ => false,
    };
    let record = match (real.record, mirror.record) {
        (Some(a), Some(b)) => {
            a.server == b.server
                && same_term(a.term, b.term)
                && near(a.cool_until_us, b.cool_until_us, SLACK_US)
                && near(a.term_until_us, b.term_until_us, SLACK_US)
        }
        (None, None) => true,
        _ => false,
    };
    let handover = expiring(real.handover, mirror.handover);
    let reserved = expiring(real.reserved, mirror.reserved);
    let longest = match (real.longest, mirror.longest) {
        (Some(a), Some(b)) => {
            a.ms == b.ms
                && near(a.claim_until_us, b.claim_until_us, SLACK_US)
                && near(a.loss_us, b.loss_us, SLACK_US)
        }
        (None, None) => true,
        _ => false,
    };
    lease && fence && record && handover && reserved && longest
}

pub fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Int(n) => n.to_string(),
        other => panic!("unexpected reply part {other:?}"),
    }
}

pub fn int(v: &Value) -> i64 {
    text(v).parse().expect("an integer")
}

pub fn source(v: &Value) -> Source {
    match text(v).as_str() {
        "KEY" => Source::Key,
        "RECORD" => Source::Record,
        other => panic!("source {other}"),
    }
}

/// Whether the real acquire reply matches the mirror's (durations and tokens within slack),
/// the longest live claim that ends it included.
pub fn same_acquire(real: &Value, mirror: Acquisition) -> bool {
    let Value::Array(parts) = real else {
        panic!("acquire replied {real:?}")
    };
    let Some((longest, parts)) = parts.split_last() else {
        panic!("acquire replied {real:?}")
    };
    if int(longest) != mirror.longest_ms as i64 {
        return false;
    }
    // Redis's `TIME` before it, which only the clock-rate bound reads.
    let Some((_time, parts)) = parts.split_last() else {
        panic!("acquire replied {real:?}")
    };
    let ms = SLACK_US as i64 / 1000;
    // A grant also says how the term before ended; that is for the log and decides nothing,
    // so the model does not mirror it (tests/lease/succession.rs reads it in the real log).
    let arity = match mirror.reply {
        AcquireReply::Acquired { .. } => 3,
        AcquireReply::Held { .. } => 4,
        AcquireReply::Cooldown { .. } | AcquireReply::Reserved { .. } => 3,
    };
    if parts.len() != arity {
        return false;
    }
    match (text(&parts[0]).as_str(), mirror.reply) {
        ("ACQUIRED", AcquireReply::Acquired { token }) => {
            near(int(&parts[1]) as u64, token, SLACK_US)
        }
        (
            "HELD",
            AcquireReply::Held {
                term,
                pttl_ms,
                source: s,
            },
        ) => {
            Term::parse(&text(&parts[1])) == Some(term)
                && (int(&parts[2]) - pttl_ms).abs() <= ms
                && (pttl_ms >= 0) == (int(&parts[2]) >= 0)
                && source(&parts[3]) == s
        }
        (
            "COOLDOWN",
            AcquireReply::Cooldown {
                remaining_ms,
                started,
            },
        ) => (int(&parts[1]) - remaining_ms as i64).abs() <= ms && (int(&parts[2]) == 1) == started,
        ("RESERVED", AcquireReply::Reserved { name, pttl_ms }) => {
            Name::parse(&text(&parts[1])) == name && (int(&parts[2]) - pttl_ms).abs() <= ms
        }
        _ => false,
    }
}

/// Whether the real renew reply (`code`, or `{code, to}` when a handover of the term was
/// requested) matches the mirror's.
pub fn same_renew(real: &Value, mirror: RenewReply) -> bool {
    // A held term's reply counts the listeners on the release channel (this test's one); every
    // reply carries Redis's TIME, which the mirror does not model.
    let (code, to) = match real {
        Value::Array(parts) if parts.len() == 2 => (int(&parts[0]), None),
        Value::Array(parts) if parts.len() == 3 && int(&parts[1]) == 1 => (int(&parts[0]), None),
        Value::Array(parts) if parts.len() == 4 && int(&parts[1]) == 1 => {
            (int(&parts[0]), Some(Successor::parse(&text(&parts[3]))))
        }
        other => panic!("renew replied {other:?}"),
    };
    let handover = match mirror {
        RenewReply::Held { handover, .. } => handover,
        RenewReply::NotOurs => None,
    };
    code == mirror.code() && to == handover
}
