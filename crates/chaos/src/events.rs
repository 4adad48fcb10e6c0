//! The log events the checker needs, parsed from leasehold's JSON log lines.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::time::{self, Micros};

/// A log event the checker needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Event {
    /// `became leader`.
    Became { token: u64, valid_for_ms: u64 },
    /// `renewed`.
    Renewed { token: u64, valid_for_ms: u64 },
    /// `stepped down`.
    SteppedDown { token: u64, reason: String },
    /// `started the command`.
    CommandStarted { pid: u32 },
    /// `the command stopped` (at step-down), with its exit code.
    CommandStopped { pid: u32, code: i64 },
    /// `released the lease`.
    Released { token: u64 },
    /// Redis is new or lost its data: nobody leads for `cooldown_ms`.
    CoolingDown { cooldown_ms: u64 },
    /// `leasehold starting`.
    Starting,
    /// `leasehold stopped`.
    Stopped,
    /// Any other warning or error, by its message.
    Warning { message: String },
}

/// An event and its log timestamp.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LogEvent {
    /// The log line's timestamp.
    pub at: Micros,
    /// The event.
    pub event: Event,
}

/// `None`: not a log line; `Some(None)`: a log line of no interest.
pub fn parse_event(v: &Value) -> Option<Option<LogEvent>> {
    let at = time::parse_rfc3339(v.get("timestamp")?.as_str()?)?;
    let message = v.get("message")?.as_str()?;
    let token = v.get("token").and_then(Value::as_u64);
    let valid_for_ms = v.get("valid_for_ms").and_then(Value::as_u64);
    let event = match (message, token, valid_for_ms) {
        ("became leader", Some(token), Some(valid_for_ms)) => Event::Became {
            token,
            valid_for_ms,
        },
        ("renewed", Some(token), Some(valid_for_ms)) => Event::Renewed {
            token,
            valid_for_ms,
        },
        ("stepped down", Some(token), _) => Event::SteppedDown {
            token,
            reason: v
                .get("reason")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
        },
        ("started the command", _, _) => match v
            .get("pid")
            .and_then(Value::as_u64)
            .and_then(|p| u32::try_from(p).ok())
        {
            Some(pid) => Event::CommandStarted { pid },
            None => return Some(None),
        },
        ("the command stopped", _, _) => Event::CommandStopped {
            pid: v
                .get("pid")
                .and_then(Value::as_u64)
                .and_then(|p| u32::try_from(p).ok())
                .unwrap_or_default(),
            code: v.get("code").and_then(Value::as_i64).unwrap_or(-1),
        },
        ("released the lease", Some(token), _) => Event::Released { token },
        ("leasehold starting", _, _) => Event::Starting,
        ("leasehold stopped", _, _) => Event::Stopped,
        (m, _, _) if m.starts_with("redis is new or lost its data") => Event::CoolingDown {
            cooldown_ms: v.get("cooldown_ms").and_then(Value::as_u64).unwrap_or(0),
        },
        ("became leader" | "renewed" | "stepped down", _, _) => {
            // A transition without the fields the checker needs: a finding, not noise.
            eprintln!("chaos: log line without token or valid_for_ms: {v}");
            return Some(None);
        }
        (m, _, _) => {
            let level = v.get("level").and_then(Value::as_str).unwrap_or("");
            if level == "WARN" || level == "ERROR" {
                Event::Warning {
                    message: m.to_owned(),
                }
            } else {
                return Some(None);
            }
        }
    };
    Some(Some(LogEvent { at, event }))
}
