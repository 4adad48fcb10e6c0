//! The candidate check's validated settings: what it runs, how often, and what it gates. The flags
//! that build them are in `cli/candidacy.rs`.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

/// Kubernetes probe defaults: `periodSeconds`.
pub const DEFAULT_PERIOD: Duration = Duration::from_secs(10);
/// `timeoutSeconds`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);
/// `failureThreshold`.
pub const DEFAULT_FAILURE_THRESHOLD: u32 = 3;
/// `successThreshold`.
pub const DEFAULT_SUCCESS_THRESHOLD: u32 = 1;

/// What is checked and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// This replica's app: checked from start; out of the election until the first pass.
    Replica,
    /// The singleton command: checked only while leading, after the start-up grace; after an
    /// unhealthy term the replica sits out `hold_off` before it stands again.
    Command {
        /// How long to sit out after an unhealthy term.
        hold_off: Duration,
    },
}

/// A validated candidate check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CandidateCheck {
    /// What runs.
    pub probe: Probe,
    /// Between two runs.
    pub period: Duration,
    /// The longest one run may take; longer is a failure.
    pub timeout: Duration,
    /// Failures in a row that put the replica out.
    pub failure_threshold: u32,
    /// Successes in a row that bring it back.
    pub success_threshold: u32,
    /// Before the first run: from start (a replica's app), or from the start of each term (the
    /// command's start-up grace).
    pub initial_delay: Duration,
    /// What is checked.
    pub scope: Scope,
}

/// What the check runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// `GET path` on a loopback address.
    Http {
        /// Where (loopback only).
        addr: SocketAddr,
        /// The `Host` header: the URL's host and port as given.
        host: String,
        /// The path and query.
        path: String,
    },
    /// A command run by `/bin/sh -c`.
    Command(String),
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Probe::Http { host, path, .. } => {
                write!(f, "GET http://{host}{}", crate::exec::query_hidden(path))
            }
            Probe::Command(command) => {
                write!(f, "`{}`", crate::exec::hidden(command))
            }
        }
    }
}
