//! What can go wrong talking to Redis, as one typed error, and the one place that decides
//! whether an error is worth retrying soon.

use std::time::Duration;

use redis::{ErrorKind, RedisError};

mod words;

pub use words::redact_url;
use words::{
    NO_PASSWORD, PASSWORD_REFUSED, UNKNOWN_ISSUER, doing, looks_like_tls, missing_scripting, said,
    script_code, within, wrong_type_words,
};

/// An error from a lease primitive. Losing a race is not an error (see
/// [`Acquired`](super::Acquired)); these are failures to get an answer at all. `op` names the
/// primitive (acquire, renew, release, observe, subscribe, …); `detail` holds the words of Redis
/// (naming the command or key where it can), of the script, or of the library that failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LeaseError {
    /// The Redis URL could not be understood. The URL has its password replaced by `***`.
    #[error("bad Redis URL `{url}`: {reason}")]
    BadUrl { url: String, reason: String },
    /// No answer within the call's timeout (connecting included).
    #[error("redis did not answer{} while {}", within(*after), doing(op))]
    Timeout { op: &'static str, after: Duration },
    /// The connection could not be made or broke (refused, reset, closed).
    #[error("redis connection failed while {}: {detail}", doing(op))]
    Connection { op: &'static str, detail: String },
    /// Redis is loading its dataset after a restart.
    #[error("redis is loading its dataset (while {})", doing(op))]
    Loading { op: &'static str },
    /// The server is a replica, not the master (READONLY; MASTERDOWN when cut off from it).
    #[error(
        "redis answered as a replica (READONLY or MASTERDOWN) while {}: connected to a replica, not the master",
        doing(op)
    )]
    ReadOnly { op: &'static str },
    /// A Redis that fails over, reached by its own address where that is unsafe.
    #[error("redis fails over (while {}): {detail}", doing(op))]
    FailsOver { op: &'static str, detail: String },
    /// A key of the lease holds a value of another type (someone else uses the key).
    #[error(
        "{} (while {}); leasehold writes strings at {}: delete or rename the key that is not one",
        wrong_type_words(lease, keys, found), doing(op), keys.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
    )]
    WrongType {
        op: &'static str,
        /// The lease key.
        lease: String,
        /// Every key of the lease that leasehold writes.
        keys: Vec<String>,
        /// The keys found holding another type, with that type (empty until looked up).
        found: Vec<(String, String)>,
    },
    /// Redis refuses writes: `maxmemory` is reached and its policy evicts nothing more.
    #[error(
        "redis refuses writes while {}: out of memory (`maxmemory` reached, and its `maxmemory-policy` evicts nothing more): {detail}",
        doing(op)
    )]
    OutOfMemory { op: &'static str, detail: String },
    /// A key of the lease holds a value that leasehold did not write.
    #[error("lease `{lease}` is corrupt (found while {}): {detail}", doing(op))]
    Corrupt {
        op: &'static str,
        lease: String,
        detail: String,
    },
    /// The ACL user may not run a command leasehold needs.
    #[error(
        "redis refused while {}: the user lacks a permission ({detail}); the rule leasehold needs is in docs/REFERENCE.md, \"ACL user with least privilege\" (`leasehold::lease::minimal_acl_rule`)",
        doing(op)
    )]
    NoPermission { op: &'static str, detail: String },
    /// Redis has no scripting leasehold can use (a command renamed away).
    #[error(
        "redis has no scripting leasehold can use (while {}: {detail}); leasehold needs EVALSHA and SCRIPT LOAD (it never sends EVAL), and inside its scripts TIME and INFO server|replication|memory: a Redis that renames them away (rename-command) cannot hold the lease",
        doing(op)
    )]
    NoScripting { op: &'static str, detail: String },
    /// The URL's database is not one this Redis has (`SELECT` refused).
    #[error("redis error while {}: {detail}", doing(op))]
    NoDatabase { op: &'static str, detail: String },
    /// Wrong username or password, or authentication required.
    #[error("redis authentication failed while {}: {detail}", doing(op))]
    Authentication { op: &'static str, detail: String },
    /// The TLS handshake failed (docs/REFERENCE.md, "TLS": never retried in plain text).
    #[error("TLS to redis failed while {}: {detail}", doing(op))]
    Tls { op: &'static str, detail: String },
    /// `WAIT` saw fewer replicas acknowledge the write than configured.
    #[error(
        "only {acked} of {wanted} replicas acknowledged the write in time while {} (--redis-wait-replicas)",
        doing(op)
    )]
    TooFewReplicas {
        op: &'static str,
        acked: u32,
        wanted: u32,
    },
    /// A Redis Cluster redirected or refused the call; the next call asks the seeds for the
    /// lease's node again (docs/REFERENCE.md, "Cluster").
    #[error(
        "the redis cluster redirected or refused the call while {}: {detail}",
        doing(op)
    )]
    Cluster { op: &'static str, detail: String },
    /// A reply leasehold does not understand.
    #[error("unexpected reply from redis while {}: {detail}", doing(op))]
    Protocol { op: &'static str, detail: String },
    /// An error reply of a kind not named above, which may pass by itself: `BUSY` while a
    /// script runs, `NOREPLICAS` below `min-replicas-to-write`, `MISCONF` after a failed save.
    #[error("redis answered with an error while {}: {detail}", doing(op))]
    ErrorReply { op: &'static str, detail: String },
    /// Any other error the client reported.
    #[error("redis error while {}: {detail}", doing(op))]
    Other { op: &'static str, detail: String },
}

/// How the elector should treat an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// A passing fault (network, restart, failover): try again at the normal pace.
    Soon,
    /// A fault a human must fix (permissions, wrong type, credentials): back off, and say so
    /// loudly, but keep trying so that the fix takes effect without a restart.
    BackOff,
}

impl LeaseError {
    /// What the loop and the connection make of each kind of error, one row per kind: its
    /// label, whether to retry soon, whether it is a lasting refusal, whether Redis answered,
    /// whether the connection is spoiled (the methods below say what each column means).
    fn traits(&self) -> (&'static str, Retry, bool, bool, bool) {
        use Retry::{BackOff, Soon};
        match self {
            LeaseError::BadUrl { .. } => ("bad_url", BackOff, false, false, false),
            LeaseError::Timeout { .. } => ("timeout", Soon, false, false, true),
            LeaseError::Connection { .. } => ("connection", Soon, false, false, true),
            LeaseError::Loading { .. } => ("loading", Soon, false, true, false),
            LeaseError::ReadOnly { .. } => ("readonly", Soon, true, true, true),
            LeaseError::FailsOver { .. } => ("fails_over", BackOff, true, true, false),
            LeaseError::WrongType { .. } => ("wrong_type", BackOff, true, true, false),
            LeaseError::Corrupt { .. } => ("corrupt", BackOff, true, true, false),
            LeaseError::NoPermission { .. } => ("no_permission", BackOff, true, true, false),
            LeaseError::NoScripting { .. } => ("no_scripting", BackOff, true, true, false),
            LeaseError::NoDatabase { .. } => ("no_database", BackOff, true, true, false),
            LeaseError::Authentication { .. } => ("authentication", BackOff, true, true, true),
            LeaseError::Tls { .. } => ("tls", BackOff, false, false, true),
            LeaseError::TooFewReplicas { .. } => ("too_few_replicas", Soon, false, true, false),
            LeaseError::OutOfMemory { .. } => ("out_of_memory", Soon, true, true, false),
            LeaseError::Cluster { .. } => ("cluster", Soon, false, true, true),
            LeaseError::Protocol { .. } => ("protocol", BackOff, false, false, true),
            LeaseError::ErrorReply { .. } => ("error_reply", Soon, false, true, false),
            LeaseError::Other { .. } => ("other", Soon, false, false, false),
        }
    }

    /// The one place that decides transient or not.
    pub fn retry(&self) -> Retry {
        self.traits().1
    }

    /// Whether Redis refused the call for a reason that does not pass by itself (a missing
    /// permission, a replica's READONLY, a key of another type): a renewal so refused ends the
    /// term at once and the replica sits out (docs/DESIGN.md, "Gray failures").
    pub fn is_lasting_refusal(&self) -> bool {
        self.traits().2
    }

    /// Whether Redis answered (with a refusal) rather than not at all: readiness then says
    /// what Redis refuses instead of calling it unreachable.
    pub fn is_answer(&self) -> bool {
        self.traits().3
    }

    /// Whether the connection that produced this error should be thrown away and made anew.
    pub(crate) fn spoils_connection(&self) -> bool {
        self.traits().4
    }

    /// A short, stable label for metrics.
    pub fn kind(&self) -> &'static str {
        self.traits().0
    }

    /// Maps a client error to ours. `lease` is the lease key, for messages.
    pub(crate) fn from_redis(op: &'static str, lease: &str, err: &RedisError) -> Self {
        let detail = said(err);
        let lower = detail.to_ascii_lowercase();
        // Redis's words, after the command of the script's line they name, when they name one.
        let naming_command = |what: &str| match super::scripts::command_at(op, &detail) {
            Some(c) => format!("the script's `{c}` {what}; {detail}"),
            None => detail.clone(),
        };
        let code = match err.code() {
            Some("ERR") => script_code(&detail).unwrap_or("ERR"),
            code => code.unwrap_or_default(),
        };
        match (err.kind(), code) {
            // The lease's keys and the culprit are filled in by the call that ran into it.
            (_, "WRONGTYPE") => LeaseError::WrongType {
                op,
                lease: lease.to_owned(),
                keys: vec![lease.to_owned()],
                found: Vec::new(),
            },
            (_, "OOM") => LeaseError::OutOfMemory { op, detail },
            (_, "LEASEHOLD") => LeaseError::Corrupt {
                op,
                lease: lease.to_owned(),
                detail: err.detail().unwrap_or(&detail).to_owned(),
            },
            // MOVED, ASK, TRYAGAIN, CLUSTERDOWN; and a node that keeps serving reads while its
            // cluster is down (`cluster-allow-reads-when-down`) runs a script until its first write.
            _ if err.is_cluster_error() || detail.contains("while the cluster is down") => {
                LeaseError::Cluster { op, detail }
            }
            // A server error's code is its kind's (`RedisError::code`).
            (_, "LOADING") => LeaseError::Loading { op },
            (_, "READONLY" | "MASTERDOWN") => LeaseError::ReadOnly { op },
            (_, "FAILSOVER") => LeaseError::FailsOver {
                op,
                detail: err.detail().unwrap_or(&detail).to_owned(),
            },
            // `EVALSHA`, `EVAL` or `SCRIPT` renamed away, or a command the script calls.
            _ if missing_scripting(&detail) => LeaseError::NoScripting {
                op,
                detail: naming_command("is unknown"),
            },
            (_, "NOPERM") => LeaseError::NoPermission { op, detail },
            // A command or channel refused inside a script comes back as a plain error: name
            // it. Redis 6.2 and 7.0 say "The user executing the script can't" (run this
            // command, access the keys, publish to the channel), later ones "No permissions",
            // Valkey "no permissions".
            _ if ["the user executing the script can't", "no permissions"]
                .iter()
                .any(|w| lower.contains(w)) =>
            {
                let refused = if lower.contains("channel") {
                    "is refused the lease's channels"
                } else if lower.contains("key") {
                    "is refused the lease's keys"
                } else {
                    "is not allowed"
                };
                LeaseError::NoPermission {
                    op,
                    detail: naming_command(refused),
                }
            }
            // The client keeps none of Redis's words for a refused password; its user and where
            // the password comes from are added by the connection (`hint_at_credentials`).
            _ if refuses_credentials(err) => LeaseError::Authentication {
                op,
                detail: if asked_none(err) { NO_PASSWORD } else { PASSWORD_REFUSED }.to_owned(),
            },
            (ErrorKind::Io | ErrorKind::InvalidClientConfig, _) if looks_like_tls(&detail) => {
                let detail = if detail.contains("UnknownIssuer") {
                    UNKNOWN_ISSUER.to_owned()
                } else {
                    detail
                };
                LeaseError::Tls { op, detail }
            }
            (ErrorKind::Io, _) if err.is_timeout() => LeaseError::Timeout {
                op,
                after: Duration::ZERO,
            },
            (ErrorKind::Io, _) => LeaseError::Connection { op, detail },
            // The parser's own words are a dump of the bytes it did not expect (an HTTP server's
            // `HTTP/1.1 400` as `Unexpected `84``…): what they mean is said instead.
            (ErrorKind::Parse, _) => LeaseError::Protocol {
                op,
                detail: "this does not answer like Redis (its reply is no RESP): is the URL's host and port a Redis server's?".to_owned(),
            },
            (ErrorKind::UnexpectedReturnType, _) => LeaseError::Protocol { op, detail },
            _ if detail.contains("refused to switch database") => LeaseError::NoDatabase {
                op,
                detail: format!(
                    "{detail}; the URL's database (the number after the host) must be one this Redis has (`databases` in its config, 16 by default)"
                ),
            },
            _ if err.code().is_some() => LeaseError::ErrorReply { op, detail },
            _ => LeaseError::Other { op, detail },
        }
    }

    /// The error with a hint at TLS where a URL of the wrong scheme is the likely cause, for a
    /// target that never answered (docs/REFERENCE.md, "TLS").
    pub(crate) fn hint_at_tls(self, tls: bool, connected: bool) -> Self {
        match self {
            LeaseError::Timeout { op, after } if tls && !connected => LeaseError::Connection {
                op,
                detail: format!(
                    "no answer to the TLS handshake{}: a port without TLS never answers one; is this a TLS port? (a plain Redis port wants a redis:// URL)",
                    within(after)
                ),
            },
            LeaseError::Connection { op, detail }
                if !tls && detail.to_ascii_lowercase().contains("reset by peer") =>
            {
                LeaseError::Connection {
                    op,
                    detail: format!(
                        "{detail}; if this port speaks TLS, the URL must be rediss:// (a TLS port resets a plain connection)"
                    ),
                }
            }
            other => other,
        }
    }

    /// The error with the caller's side of a refused password or of a server certificate no
    /// trusted CA signed: the user, and the caller's [`Remedies`].
    pub(crate) fn hint_at_credentials(self, user: &str, remedies: &Remedies) -> Self {
        let and = |sep: &str, words: &str| match words {
            "" => String::new(),
            words => format!("{sep}{words}"),
        };
        match self {
            LeaseError::Authentication { op, detail } if detail == NO_PASSWORD => {
                LeaseError::Authentication {
                    op,
                    detail: format!("{NO_PASSWORD}{}", and("; ", &remedies.no_password)),
                }
            }
            LeaseError::Authentication { op, detail } if detail == PASSWORD_REFUSED => {
                LeaseError::Authentication {
                    op,
                    detail: format!(
                        "{PASSWORD_REFUSED} of user `{user}` (a wrong password, a user that is disabled or unknown, or a Redis without a password set){}",
                        and("; ", &remedies.refused_password)
                    ),
                }
            }
            LeaseError::Tls { op, detail } if detail == UNKNOWN_ISSUER => LeaseError::Tls {
                op,
                detail: format!("{UNKNOWN_ISSUER}{}", and(": ", &remedies.unknown_issuer)),
            },
            other => other,
        }
    }
}

/// What a refusal says of the caller's side, in the caller's own words (its flags and
/// variables); never a password itself. Empty words add nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Remedies {
    /// After "redis asks for a password and none was given": how to give one.
    pub no_password: String,
    /// After a refused password: where the one sent came from, or that none was.
    pub refused_password: String,
    /// After a server certificate from an issuer not trusted: which CAs were trusted, and how
    /// to trust another.
    pub unknown_issuer: String,
}

/// Whether Redis refused the credentials: a wrong password, or none given where one is asked.
pub(crate) fn refuses_credentials(err: &RedisError) -> bool {
    err.kind() == ErrorKind::AuthenticationFailed
        || err.code() == Some("WRONGPASS")
        || asked_none(err)
}

/// Whether Redis asks for a password and none was given: `NOAUTH`, or, for a command of more
/// than ten arguments, `Protocol error: unauthenticated …` (and the connection closed).
fn asked_none(err: &RedisError) -> bool {
    err.code() == Some("NOAUTH")
        || err
            .detail()
            .is_some_and(|d| d.starts_with("Protocol error: unauthenticated"))
}

#[cfg(test)]
pub(super) mod tests;
