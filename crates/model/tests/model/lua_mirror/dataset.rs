//! The lease's keys on the real redis-server: written from a mirror dataset, read back into
//! one; and what the scripts announce on the lease's channel.

use std::time::Duration;

use testbed::RedisServer;

use crate::mirror::{Data, Handover, Longest, Name, Record, Term};

pub const LEASE: &str = "lh:{m}";
pub const FENCE: &str = "lh:{m}:fence";
pub const RECORD: &str = "lh:{m}:state";
pub const CHANNEL: &str = "lh:{m}:released";
pub const HANDOVER: &str = "lh:{m}:handover";
pub const RESERVED: &str = "lh:{m}:reserved";
pub const LONGEST: &str = "lh:{m}:longest";
/// Written by every win, read by acquire and observe; the mirror has no protocol but one, so
/// this key always holds ours or nothing.
pub const PROTOCOL_KEY: &str = "lh:{m}:protocol";
/// Read by observe; the mirror's renewals note no rate, so it never holds one.
pub const CLOCK_KEY: &str = "lh:{m}:clock";

/// The server identity the scripts compute (`run_id/master_replid`), and one of another Redis.
pub fn identities(redis: &RedisServer) -> [String; 2] {
    let server: String = redis.cmd(&["INFO", "server"]);
    let replication: String = redis.cmd(&["INFO", "replication"]);
    let field = |text: &str, name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_owned())
            .unwrap_or_else(|| "?".into())
    };
    [
        format!(
            "{}/{}",
            field(&server, "run_id:"),
            field(&replication, "master_replid:")
        ),
        "0ther/0ther".into(),
    ]
}

pub fn now_us(redis: &RedisServer) -> u64 {
    let t: Vec<u64> = redis.cmd(&["TIME"]);
    t[0] * 1_000_000 + t[1]
}

fn record_text(r: &Record, ids: &[String; 2]) -> String {
    let term = r.term.map(|t| t.value()).unwrap_or_else(|| "-".into());
    format!(
        "{} {} {term} {}",
        ids[usize::from(r.server)],
        r.cool_until_us,
        r.term_until_us
    )
}

pub fn write_data(redis: &RedisServer, d: &Data, ids: &[String; 2]) {
    redis.cmd::<()>(&[
        "DEL",
        LEASE,
        FENCE,
        RECORD,
        HANDOVER,
        RESERVED,
        LONGEST,
        PROTOCOL_KEY,
    ]);
    // Expiries at an absolute instant on Redis's clock, so that a pause of this process between
    // reading the clock and writing cannot move them.
    if let Some((term, expiry_ms)) = d.lease {
        let at = expiry_ms.to_string();
        redis.cmd::<()>(&["SET", LEASE, &term.value(), "PXAT", &at]);
    }
    if let Some(f) = d.fence {
        redis.cmd::<()>(&["SET", FENCE, &f.to_string()]);
    }
    if let Some(r) = &d.record {
        redis.cmd::<()>(&["SET", RECORD, &record_text(r, ids)]);
    }
    // At the drawn expiry on Redis's clock: one already passed leaves no key, as an expiry does.
    if let Some((request, expiry_ms)) = d.handover {
        let at = expiry_ms.to_string();
        redis.cmd::<()>(&["SET", HANDOVER, &request.text(), "PXAT", &at]);
    }
    if let Some((name, expiry_ms)) = d.reserved {
        let at = expiry_ms.to_string();
        redis.cmd::<()>(&["SET", RESERVED, &name.text(), "PXAT", &at]);
    }
    if let Some(longest) = d.longest {
        redis.cmd::<()>(&["SET", LONGEST, &longest.text()]);
    }
}

/// A key with a TTL as the mirror holds it: its value and its expiry in ms on Redis's clock
/// (`PEXPIRETIME`: absolute, so a pause of this process between the reads cannot shift it).
fn read_expiring(redis: &RedisServer, key: &str) -> Option<(String, u64)> {
    let value: Option<String> = redis.cmd(&["GET", key]);
    let at: i64 = redis.cmd(&["PEXPIRETIME", key]);
    value.map(|v| (v, u64::try_from(at).expect("a key with a TTL")))
}

pub fn read_data(redis: &RedisServer, ids: &[String; 2]) -> Data {
    let lease = read_expiring(redis, LEASE);
    let fence: Option<u64> = redis.cmd(&["GET", FENCE]);
    let record: Option<String> = redis.cmd(&["GET", RECORD]);
    let record = record.map(|raw| {
        let f: Vec<&str> = raw.split(' ').collect();
        assert_eq!(f.len(), 4, "record {raw}");
        Record {
            server: ids.iter().position(|i| i == f[0]).expect("known server") as u8,
            cool_until_us: f[1].parse().expect("cooldown"),
            term: Term::parse(f[2]),
            term_until_us: f[3].parse().expect("term until"),
        }
    });
    Data {
        lease: lease.map(|(v, expiry)| (Term::parse(&v).expect("a term value"), expiry)),
        fence,
        record,
        handover: read_expiring(redis, HANDOVER)
            .map(|(v, expiry)| (Handover::parse(&v).expect("a handover value"), expiry)),
        reserved: read_expiring(redis, RESERVED).map(|(v, expiry)| (Name::parse(&v), expiry)),
        // A value the scripts cannot read is no claim, for them and for the mirror.
        longest: redis
            .cmd::<Option<String>>(&["GET", LONGEST])
            .and_then(|v| Longest::parse(&v)),
    }
}

/// Subscribes `conn` to the lease's channel (the subscription ends when the result is dropped).
pub fn subscribe(conn: &mut redis::Connection) -> redis::PubSub<'_> {
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a read timeout");
    let mut pubsub = conn.as_pubsub();
    pubsub.subscribe(CHANNEL).expect("subscribe");
    pubsub
}

/// What the scripts published since the last call, in order: a marker published now, on the
/// same channel, comes after all of it.
pub fn published(pubsub: &mut redis::PubSub<'_>, redis: &RedisServer, case: u64) -> Vec<String> {
    let marker = format!("end of case {case}");
    redis.cmd::<()>(&["PUBLISH", CHANNEL, &marker]);
    let mut messages = Vec::new();
    loop {
        let message = pubsub.get_message().expect("the marker arrives");
        let payload: String = message.get_payload().expect("a text payload");
        if payload == marker {
            return messages;
        }
        messages.push(payload);
    }
}
