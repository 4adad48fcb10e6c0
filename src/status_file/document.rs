//! The status file's JSON: what `/leader` says, made impossible to misread once its writer is
//! dead or frozen, by a reader on the writer's boot clock (the same boot and time namespace). It carries no claim that stands on its own (no `is_leader`, no `role:
//! "leader"`): it says until when its writer leads on the boot clock, and the reader's rule
//! (docs/REFERENCE.md, "The status file"). A reader that looks for the old fields finds none and
//! concludes "not leader": old readers fail safe.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::board::Shown;
use crate::clock::{BootInstant, WallLead};
use crate::clock_watch::{RedisClockView, rfc3339};
use crate::elector::Role;
use crate::leader_view::{Account, LeaderView};

/// The document's format, its first field. Version 1 was `/leader`'s JSON.
pub const FORMAT: &str = "leasehold-status 2";

/// The reader's rule, in every file.
pub const RULE: &str = "the writer leads lease `lease` in term `term` only while CLOCK_BOOTTIME (in shell: /proc/uptime) reads less than leader_until_boot_ns; null means it does not lead. leasehold does not rewrite this file when it dies or freezes: judge leadership by that deadline alone, never by the time of the write or by any other field";

/// The JSON of the status file.
#[derive(Debug, Serialize)]
pub struct StatusDocument {
    /// [`FORMAT`].
    pub format: &'static str,
    /// [`RULE`].
    pub rule: &'static str,
    /// The lease name.
    pub lease: String,
    /// The lease's Redis key.
    pub lease_key: String,
    /// The writer's identity.
    pub identity: String,
    /// The writer's process id.
    pub pid: u32,
    /// When the document was written, on the boot clock (`CLOCK_BOOTTIME`, ns).
    pub written_at_boot_ns: u64,
    /// The same instant on the wall clock (RFC 3339), for display.
    pub written_at: String,
    /// `starting`, `follower`, `leading_until_deadline` or `stopped`.
    pub state: &'static str,
    /// The writer's own term, while it leads.
    pub term: Option<u64>,
    /// The writer leads (term `term`) while the boot clock reads less than this (ns); `null`
    /// when it does not lead.
    pub leader_until_boot_ns: Option<u64>,
    /// The same deadline on the wall clock (ms since the Unix epoch), for display only: the wall
    /// clock can be stepped.
    pub leader_until_unix_ms: Option<u64>,
    /// As a follower, the leader it saw at its last look (another process's term: never a
    /// reason to act).
    pub seen_leader: Option<String>,
    /// That leader's fencing token, when known.
    pub seen_token: Option<u64>,
    /// What the writer had seen and said of itself, as in `/leader`.
    #[serde(flatten)]
    pub account: Account,
}

fn unix_ms(t: SystemTime) -> u64 {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

impl StatusDocument {
    /// The document of `status` written now: `now` on the elector's clock (the boot clock,
    /// which the wall clock leads by `lead`), `wall` on the wall clock, by process `pid`, with the rate of Redis's clock last measured.
    pub fn of(
        status: &Shown,
        lease_key: &str,
        now: BootInstant,
        lead: WallLead,
        wall: SystemTime,
        pid: u32,
        redis_clock: Option<RedisClockView>,
    ) -> Self {
        let view = LeaderView::of(status, lease_key, now, lead, redis_clock);
        let (state, term, until) = match &status.role {
            Role::Starting => ("starting", None, None),
            Role::Follower { .. } => ("follower", None, None),
            // Also a deadline already passed (a status rendered after a pause, seen or unseen by
            // the boot clock): the reader's comparison says no.
            Role::Leader { token, .. } => (
                "leading_until_deadline",
                Some(token.0),
                status.leading_until(lead),
            ),
            Role::Stopped => ("stopped", None, None),
        };
        let following = matches!(status.role, Role::Follower { .. });
        let until_wall = until.map(|until| {
            if until >= now {
                wall + now.until(until)
            } else {
                wall - until.until(now)
            }
        });
        Self {
            format: FORMAT,
            rule: RULE,
            lease: view.lease,
            lease_key: view.lease_key,
            identity: view.identity,
            pid,
            written_at_boot_ns: now.as_nanos(),
            written_at: rfc3339(wall),
            state,
            term,
            leader_until_boot_ns: until.map(BootInstant::as_nanos),
            leader_until_unix_ms: until_wall.map(unix_ms),
            seen_leader: view.leader.filter(|_| following),
            seen_token: view.token.filter(|_| following),
            account: view.account,
        }
    }

    /// The JSON of `status` as the status file keeps it, written now by this process, with the
    /// rate of Redis's clock last measured.
    pub fn json(
        status: &Shown,
        lease_key: &str,
        now: BootInstant,
        lead: WallLead,
        redis_clock: Option<RedisClockView>,
    ) -> String {
        let wall = SystemTime::now();
        let doc = Self::of(
            status,
            lease_key,
            now,
            lead,
            wall,
            std::process::id(),
            redis_clock,
        );
        // A struct of strings, numbers and options always serializes.
        serde_json::to_string(&doc).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::shown::tests::shown as status;
    use crate::elector::LeaderInfo;
    use crate::lease::FencingToken;

    fn at(secs: u64) -> BootInstant {
        BootInstant::from_since_boot(Duration::from_secs(secs))
    }

    fn doc(role: Role, now: BootInstant) -> serde_json::Value {
        doc_under(role, now, WallLead::default())
    }

    /// The document with the wall clock's lead `lead` at the write.
    fn doc_under(role: Role, now: BootInstant, lead: WallLead) -> serde_json::Value {
        let wall = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let doc = StatusDocument::of(
            &status(role),
            "leasehold:{shop/web}",
            now,
            lead,
            wall,
            42,
            None,
        );
        serde_json::to_value(&doc).unwrap()
    }

    #[test]
    fn a_leaders_document_says_until_when_on_both_clocks_and_nothing_that_stands_alone() {
        let leader = Role::Leader {
            token: FencingToken(7),
            acquired_at: UNIX_EPOCH,
            valid_until: at(110),
            lead: WallLead::default(),
        };
        let json = doc(leader, at(100));
        assert_eq!(json["format"], FORMAT);
        assert_eq!(json["rule"], RULE);
        assert_eq!(json["state"], "leading_until_deadline");
        assert_eq!(json["term"], 7);
        assert_eq!(json["leader_until_boot_ns"], 110_000_000_000u64);
        assert_eq!(json["leader_until_unix_ms"], 1_000_010_000u64);
        assert_eq!(json["written_at_boot_ns"], 100_000_000_000u64);
        assert_eq!(json["pid"], 42);
        assert_eq!(json["seen_leader"], serde_json::Value::Null);
        for bare in ["is_leader", "role", "valid_for_ms", "leader", "token"] {
            assert!(json.get(bare).is_none(), "{bare} in {json}");
        }
        // Rendered after a pause past the deadline: the deadline, in the past, on both clocks.
        let late = doc(
            Role::Leader {
                token: FencingToken(7),
                acquired_at: UNIX_EPOCH,
                valid_until: at(90),
                lead: WallLead::default(),
            },
            at(100),
        );
        assert_eq!(late["leader_until_boot_ns"], 90_000_000_000u64);
        assert_eq!(late["leader_until_unix_ms"], 999_990_000u64);
        // Written after 20 s passed unseen by the boot clock (the wall clock's lead gained them):
        // the deadline counts them, and is past.
        let unseen = Duration::from_secs(20).as_nanos() as i64;
        let frozen = doc_under(
            Role::Leader {
                token: FencingToken(7),
                acquired_at: UNIX_EPOCH,
                valid_until: at(110),
                lead: WallLead::default(),
            },
            at(100),
            WallLead::from_nanos(unseen),
        );
        assert_eq!(frozen["leader_until_boot_ns"], 90_000_000_000u64);
    }

    #[test]
    fn a_followers_document_names_the_leader_it_saw_and_no_deadline() {
        let follower = Role::Follower {
            leader: Some(LeaderInfo {
                owner: "web-b-y".into(),
                identity: "web-b".into(),
                token: Some(FencingToken(8)),
            }),
            cooldown: None,
        };
        let json = doc(follower, at(100));
        assert_eq!(json["state"], "follower");
        assert_eq!(json["seen_leader"], "web-b");
        assert_eq!(json["seen_token"], 8);
        assert_eq!(json["term"], serde_json::Value::Null);
        assert_eq!(json["leader_until_boot_ns"], serde_json::Value::Null);
        for role in [Role::Starting, Role::Stopped] {
            let json = doc(role, at(100));
            assert_eq!(json["leader_until_boot_ns"], serde_json::Value::Null);
            assert_eq!(json["seen_leader"], serde_json::Value::Null);
        }
    }
}
