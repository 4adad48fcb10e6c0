//! `leasehold status`: who holds the lease now, its fencing token and the time left, read
//! straight from Redis.

use std::time::{Duration, UNIX_EPOCH};

use serde::Serialize;

use super::lease::{CALL, asked_lease};
use crate::cli::{CliError, StatusSettings};
use crate::clock_watch::RedisClockView;
use crate::leader_view::ProtocolView;
use crate::lease::{
    CooldownState, LeaseName, Observation, Protocol, RedisLease, identity_of, info_field,
    split_term,
};
use crate::notices::{not_leaseholds, reservation_not_leaseholds};

/// The JSON of `leasehold status --output json`; each field is in docs/REFERENCE.md ("What the
/// operator commands print"), which `tests/operator/docs.rs` holds to this output.
#[derive(Debug, Serialize)]
pub struct StatusView {
    pub lease: String,
    pub lease_key: String,
    pub holder: Option<String>,
    pub owner: Option<String>,
    pub token: Option<u64>,
    pub last_token: Option<u64>,
    pub expires_in_ms: Option<u64>,
    pub never_expires: bool,
    pub vanished: bool,
    pub reserved_for: Option<String>,
    pub reserved_ms: Option<u64>,
    pub reservation_never_expires: bool,
    pub cooldown: &'static str,
    pub cooldown_ms: Option<u64>,
    pub protocol: Option<ProtocolView>,
    pub protocol_newer: bool,
    pub redis_clock: Option<RedisClockView>,
    pub redis_clock_by: Option<String>,
    pub redis_role: Option<String>,
    pub replica_of: Option<String>,
    pub replica_link_up: Option<bool>,
}

/// What a key without TTL says in the text output.
const NEVER: &str =
    "never expires: not written by leasehold; nobody else leads until it is deleted";

impl StatusView {
    /// The view of an observation.
    pub fn of(lease: &LeaseName, lease_key: &str, seen: &Observation) -> Self {
        let (cooldown, cooldown_ms) = match seen.cooldown {
            CooldownState::Idle => ("idle", None),
            CooldownState::Running(left) => ("running", Some(left.as_millis() as u64)),
            CooldownState::Pending => ("pending", None),
        };
        let holder = seen.holder.as_ref();
        let ms = |d: Duration| d.as_millis() as u64;
        Self {
            lease: lease.to_string(),
            lease_key: lease_key.to_owned(),
            holder: holder.map(|h| h.identity().to_owned()),
            owner: holder.map(|h| h.owner.clone()),
            token: holder.and_then(|h| h.token).map(|t| t.0),
            last_token: seen.token.map(|t| t.0),
            expires_in_ms: holder.and_then(|h| h.remaining).map(ms),
            never_expires: holder.is_some_and(not_leaseholds),
            vanished: holder.is_some_and(|h| h.vanished),
            reserved_for: seen.reserved.as_ref().map(|(who, _)| who.clone()),
            reserved_ms: seen.reserved.as_ref().and_then(|(_, left)| left.map(ms)),
            reservation_never_expires: (seen.reserved.as_ref())
                .is_some_and(|(_, left)| reservation_not_leaseholds(*left)),
            cooldown,
            cooldown_ms,
            protocol: seen.protocol.as_ref().map(ProtocolView::from),
            protocol_newer: seen.protocol.as_ref().is_some_and(Protocol::is_newer),
            redis_clock: seen.redis_clock.as_ref().map(|noted| {
                let at = UNIX_EPOCH + Duration::from_micros(noted.at_us);
                let token = split_term(&noted.term).1.map(|t| t.0);
                RedisClockView::of(noted.low, noted.high, token, at)
            }),
            redis_clock_by: seen
                .redis_clock
                .as_ref()
                .map(|noted| identity_of(split_term(&noted.term).0).to_owned()),
            redis_role: None,
            replica_of: None,
            replica_link_up: None,
        }
    }

    /// The view with what `INFO replication` (`info`) says of the Redis it was read from.
    fn read_from(self, info: Option<&str>) -> Self {
        let field = |name| info.and_then(|i| info_field(i, name));
        let replica = field("role") == Some("slave");
        let master = (field("master_host"), field("master_port"));
        Self {
            redis_role: field("role").map(|r| if replica { "replica" } else { r }.to_owned()),
            replica_of: match master {
                (Some(host), Some(port)) if replica => Some(format!("{host}:{port}")),
                _ => None,
            },
            replica_link_up: replica.then(|| field("master_link_status") == Some("up")),
            // A replica's own identity never names the record's writer: the master's to say.
            cooldown: match self.cooldown {
                "pending" if replica => "unknown",
                cooldown => cooldown,
            },
            ..self
        }
    }

    /// Whose replica the Redis it was read from is, and its link: `None` for a master.
    fn replica(&self) -> Option<String> {
        let link = if self.replica_link_up == Some(true) {
            "up"
        } else {
            "down"
        };
        Some(format!(
            "a replica of {}, link {link}",
            self.replica_of.as_deref()?
        ))
    }

    /// Aligned text for people.
    pub fn text(&self) -> String {
        let dash = || "-".to_owned();
        let human = |ms: u64| humantime::format_duration(Duration::from_millis(ms)).to_string();
        let mut rows = vec![
            ("lease", format!("{} ({})", self.lease, self.lease_key)),
            (
                "holder",
                match (&self.holder, &self.owner) {
                    (Some(h), Some(o)) if h == o => {
                        format!("`{o}`, a value leasehold did not write")
                    }
                    (Some(h), Some(o)) => format!("{h} (owner id {o})"),
                    _ => "none".to_owned(),
                },
            ),
            ("token", self.token.map_or_else(dash, |t| t.to_string())),
            (
                "last token",
                self.last_token.map_or_else(dash, |t| t.to_string()),
            ),
            (
                "expires in",
                match self.expires_in_ms {
                    _ if self.never_expires => NEVER.to_owned(),
                    Some(ms) if self.vanished => format!(
                        "{}, but the lease key is gone before its time (evicted or deleted); the holder puts it back at its next renewal, or its term runs out",
                        human(ms)
                    ),
                    Some(ms) => human(ms),
                    None => dash(),
                },
            ),
        ];
        if let Some(who) = &self.reserved_for {
            let left = match self.reserved_ms {
                Some(ms) if !self.reservation_never_expires => format!("for {}", human(ms)),
                _ => NEVER.to_owned(),
            };
            rows.push(("reserved", format!("for {who}, {left}")));
        }
        rows.extend([(
            "cooldown",
            match self.cooldown_ms {
                Some(ms) => format!("running, {} left", human(ms)),
                None => self.cooldown.to_owned(),
            },
        )]);
        let protocol = match &self.protocol {
            None => "not written yet (no term won since 0.2.0)".to_owned(),
            Some(p) => {
                let found = match p.version {
                    Some(v) => format!("{v} (leasehold {})", p.release),
                    None => format!("unreadable: `{}`", p.release),
                };
                match self.protocol_newer {
                    true => format!(
                        "{found}, newer than this leasehold's {}: replicas of this release stay out",
                        Protocol::ours()
                    ),
                    false => found,
                }
            }
        };
        rows.push(("protocol", protocol));
        if let (Some(c), Some(by)) = (&self.redis_clock, &self.redis_clock_by) {
            rows.push((
                "redis clock",
                format!(
                    "{:.3} times as fast as the leader's ({:.3} to {:.3}), measured by {by} at {}",
                    c.rate, c.low, c.high, c.measured_at
                ),
            ));
        }
        if let Some(replica) = self.replica() {
            rows.push(("redis", format!("{replica}: its copy of the lease")));
        }
        // A cooldown idle or running is the state record's own (only a missing record, or one
        // of another Redis process, is pending); a reservation and a clock note are keys.
        let keyless = self.holder.is_none() && self.last_token.is_none() && self.protocol.is_none();
        if keyless
            && self.cooldown == "pending"
            && self.reserved_for.is_none()
            && self.redis_clock.is_none()
        {
            let note = "no key of this lease exists: a lease never taken, or the replicas use another --key-prefix, --lease-name, or Redis (--redis-url, its database)";
            rows.push(("note", note.to_owned()));
        }
        let row = |(k, v): &(&str, String)| format!("{k:<11} {}\n", super::printable(v));
        rows.iter().map(row).collect()
    }
}

/// Names the lease, reads it and prints it; returns the exit code.
pub async fn status(settings: StatusSettings) -> Result<i32, CliError> {
    let lease = asked_lease(&settings, "leasehold-status").await?;
    let seen = lease
        .observe(CALL)
        .await
        .map_err(|e| settings.redis.failed(e))?;
    let view = view_of(&lease, &seen).await;
    super::print(settings.output, &view, StatusView::text)?;
    Ok(if said_if_replica(&view) { 1 } else { 0 })
}

/// The view of `seen` with the role of the Redis it was read from (best effort, after the look:
/// a refused INFO leaves the role unknown).
pub(super) async fn view_of(lease: &RedisLease, seen: &Observation) -> StatusView {
    let info = lease.info("replication", CALL).await.ok();
    StatusView::of(lease.name(), &lease.keys().lease, seen).read_from(info.as_deref())
}

/// Says on stderr that `view` was read from a replica, if it was (`status` and `step-down`
/// then exit 1): its copy is no lease's word.
pub(super) fn said_if_replica(view: &StatusView) -> bool {
    let Some(replica) = view.replica() else {
        return false;
    };
    say!(
        "this redis is {replica}: its copy of the lease lags the lease or, with the link down, stands still; point --redis-url at the master, or at its Sentinels (redis+sentinel://)"
    );
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::{FencingToken, Holder, NotedRate, PROTOCOL};

    #[test]
    fn text_and_json_show_the_holder() {
        let name = LeaseName::new("shop/web").unwrap();
        let seen = Observation {
            holder: Some(Holder {
                owner: "web-a-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e".into(),
                remaining: Some(Duration::from_millis(13_200)),
                token: Some(FencingToken(42)),
                vanished: false,
            }),
            token: Some(FencingToken(42)),
            cooldown: CooldownState::Idle,
            ..Observation::default()
        };
        let view = StatusView::of(&name, "leasehold:{shop/web}", &seen);
        let text = view.text();
        assert!(
            text.contains("holder      web-a (owner id web-a-0b7c2b5e"),
            "{text}"
        );
        assert!(text.contains("token       42"), "{text}");
        assert!(text.contains("expires in  13s 200ms"), "{text}");
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["holder"], "web-a");
        assert_eq!(json["expires_in_ms"], 13_200);
        assert_eq!(json["cooldown"], "idle");
        assert!(text.contains("protocol    not written yet"), "{text}");
        assert_eq!(json["protocol"], serde_json::Value::Null);
    }

    /// A cooldown idle or running is the state record's, a reservation and a clock note are keys
    /// of their own: keys exist, and the note that blamed the key prefix or the lease name sent
    /// the operator after the wrong fault (a lock stopped in a lease's first cooldown left the
    /// record alone, and `status` said no key existed).
    #[test]
    fn a_lease_with_any_key_is_not_said_to_be_without_keys() {
        let name = LeaseName::new("shop/web").unwrap();
        let none = Observation::default();
        let noted = NotedRate {
            term: "web-a-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e#41".into(),
            low: 1.0,
            high: 1.0,
            at_us: 1_796_000_000_000_000,
        };
        // (what Redis holds, whether the note is said)
        let cases = [
            (none.clone(), true),
            (
                Observation {
                    cooldown: CooldownState::Idle,
                    ..none.clone()
                },
                false,
            ),
            (
                Observation {
                    cooldown: CooldownState::Running(Duration::from_secs(3)),
                    ..none.clone()
                },
                false,
            ),
            (
                Observation {
                    reserved: Some(("web-b".into(), Some(Duration::from_secs(1)))),
                    ..none.clone()
                },
                false,
            ),
            (
                Observation {
                    redis_clock: Some(noted),
                    ..none.clone()
                },
                false,
            ),
        ];
        for (seen, said) in cases {
            let text = StatusView::of(&name, "leasehold:{shop/web}", &seen).text();
            assert_eq!(text.contains("no key of this lease exists"), said, "{text}");
        }
    }

    #[test]
    fn a_key_without_ttl_is_said_to_never_expire_and_keeps_the_fences_token_apart() {
        let name = LeaseName::new("shop/web").unwrap();
        let seen = Observation {
            holder: Some(Holder {
                owner: "garbage".into(),
                remaining: None,
                token: None,
                vanished: false,
            }),
            token: Some(FencingToken(42)),
            cooldown: CooldownState::Idle,
            reserved: Some(("web-b".into(), None)),
            protocol: Some(Protocol {
                version: Some(PROTOCOL + 1),
                release: "9.0.0".into(),
            }),
            redis_clock: Some(NotedRate {
                term: "web-a-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e#41".into(),
                low: 1.049,
                high: 1.051,
                at_us: 1_796_000_000_000_000,
            }),
        };
        let view = StatusView::of(&name, "leasehold:{shop/web}", &seen);
        let text = view.text();
        for want in [
            "holder      `garbage`, a value leasehold did not write",
            "token       -\n",
            "last token  42",
            "expires in  never expires: not written by leasehold",
            "reserved    for web-b, never expires",
            "redis clock 1.050 times as fast as the leader's (1.049 to 1.051), measured by web-a at 2026-11-30T00:53:20.000Z",
            &format!(
                "protocol    {} (leasehold 9.0.0), newer than this leasehold's protocol {PROTOCOL}",
                PROTOCOL + 1
            ),
        ] {
            assert!(text.contains(want), "{want:?} in\n{text}");
        }
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["never_expires"], true);
        assert_eq!(json["reservation_never_expires"], true);
        assert_eq!(json["token"], serde_json::Value::Null);
        assert_eq!(json["last_token"], 42);
        assert_eq!(json["protocol"]["version"], PROTOCOL + 1);
        assert_eq!(json["protocol_newer"], true);
        assert_eq!(json["redis_clock"]["term"], 41);
        assert_eq!(json["redis_clock_by"], "web-a");
    }
}
