//! The guard file: the term's token and validity deadline, published for the leader's command
//! so that it can ask whether it may act without a round trip and without leasehold running.
//! Why, its rules and its format: docs/REFERENCE.md, "The guard" to "The format".
//!
//! Written when a term begins (before the work starts) and after every renewal, and zeroed
//! first at step-down: before the term's `Leadership` refuses, before readiness flips and
//! before the command is signalled. Each update is a fresh file renamed over the path: an update
//! in place is not atomic for a concurrent reader (Linux copies a buffered `read` out of the
//! page cache without locking out a concurrent `pwrite`, on tmpfs as on ext4). One live
//! leasehold writes one guard file: it claims the file ([`crate::owned_file`]) first.

pub mod caller;
pub mod check;
pub mod hook;
pub mod record;
pub mod writer;

use std::fmt;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use caller::{CallerError, CallerTerm};
pub use hook::GuardHooks;
pub use record::{CheckedAt, GuardRecord, Refusal};
pub use writer::GuardFile;

use crate::lease::FencingToken;
use crate::owned_file::ClaimError;

/// The environment variable that names the guard file, for the command (`leasehold run` sets
/// it) and for `leasehold run --guard-file` and `leasehold guard --guard-file`.
pub const GUARD_ENV: &str = "LEASEHOLD_GUARD_FILE";

/// Why the guard file does not let the command act, or could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    /// No file at the path: leasehold has not written it, or has exited.
    Missing {
        /// The guard file.
        path: PathBuf,
    },
    /// The file exists but could not be read.
    Unreadable {
        /// The guard file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file holds no guard record (another program wrote it, or it is not a guard file).
    Garbled {
        /// The guard file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The record does not let the caller act.
    Refused {
        /// The guard file.
        path: PathBuf,
        /// Why not.
        refusal: Refusal,
    },
    /// The file (or the new file beside it) could not be written.
    Unwritable {
        /// The guard file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Another live leasehold writes the file, or the claim could not be taken.
    Unclaimable {
        /// The guard file.
        path: PathBuf,
        /// Why.
        source: ClaimError,
    },
    /// The caller's term, as its environment gives it, does not parse.
    BadCaller {
        /// The guard file.
        path: PathBuf,
        /// What is wrong.
        source: CallerError,
    },
}

impl GuardError {
    /// The guard file this is about.
    pub fn path(&self) -> &Path {
        match self {
            GuardError::Missing { path }
            | GuardError::Unreadable { path, .. }
            | GuardError::Garbled { path, .. }
            | GuardError::Refused { path, .. }
            | GuardError::Unwritable { path, .. }
            | GuardError::Unclaimable { path, .. }
            | GuardError::BadCaller { path, .. } => path,
        }
    }

    /// Whether this is bad input (a file that is no guard file, cannot be read or written, or is
    /// another live leasehold's; a caller's term that does not parse) rather than an answer
    /// ("not valid").
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            GuardError::Unreadable { .. }
                | GuardError::Garbled { .. }
                | GuardError::Unwritable { .. }
                | GuardError::Unclaimable { .. }
                | GuardError::BadCaller { .. }
        )
    }

    /// What is wrong, without the path.
    pub fn rule(&self) -> String {
        match self {
            GuardError::Missing { .. } => {
                "no such file (leasehold has not written it, or exited)".into()
            }
            GuardError::Unreadable { source, .. } => format!("cannot read it: {source}"),
            GuardError::Garbled { reason, .. } => format!("not a guard record: {reason}"),
            GuardError::Refused { refusal, .. } => refusal.to_string(),
            GuardError::Unwritable { source, .. } => format!("cannot write it: {source}"),
            GuardError::Unclaimable { source, .. } => source.to_string(),
            GuardError::BadCaller { source, .. } => format!("the caller's term: {source}"),
        }
    }
}

impl fmt::Display for GuardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "guard file {}: {}", self.path().display(), self.rule())
    }
}

/// Reads the record in the guard file at `path`.
pub fn read_guard_file(path: impl AsRef<Path>) -> Result<GuardRecord, GuardError> {
    let path = path.as_ref();
    let unreadable = |source| GuardError::Unreadable {
        path: path.to_owned(),
        source,
    };
    // O_NONBLOCK: a FIFO planted in the file's place is refused below, not waited on.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => GuardError::Missing {
                path: path.to_owned(),
            },
            _ => unreadable(source),
        })?;
    if !file.metadata().map_err(unreadable)?.is_file() {
        return Err(unreadable(std::io::Error::other("not a regular file")));
    }
    // A record longer than the longest is read one byte past it, for the parser to refuse.
    let mut buf = Vec::with_capacity(record::MAX_LEN + 1);
    file.take(record::MAX_LEN as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(unreadable)?;
    GuardRecord::parse(&buf).map_err(|reason| GuardError::Garbled {
        path: path.to_owned(),
        reason,
    })
}

/// The guard for a Rust command or sidecar: `Ok(token)` while the guard file at `path` says
/// the term is valid by the boot clock right now. Call it right before each side effect, and
/// pass the token with the write. As `leasehold guard` does, it reads the caller's term from
/// the environment that `leasehold run` gives its command (`$LEASEHOLD_FENCING_TOKEN`,
/// `$LEASEHOLD_LEASE`) and refuses a record of another term or lease; where they are not set,
/// any term of the file passes ([`check_guard_file_for_term`] says the term explicitly).
pub fn check_guard_file(path: impl AsRef<Path>) -> Result<FencingToken, GuardError> {
    check_guard_file_for(path, Duration::ZERO)
}

/// As [`check_guard_file`], and the term must stay valid `valid_for` longer: the time the guarded
/// action takes.
pub fn check_guard_file_for(
    path: impl AsRef<Path>,
    valid_for: Duration,
) -> Result<FencingToken, GuardError> {
    let path = path.as_ref();
    let caller = CallerTerm::from_env().map_err(|source| GuardError::BadCaller {
        path: path.to_owned(),
        source,
    })?;
    check_guard_file_for_term(path, &caller, valid_for)
}

/// `Ok(token)` while the guard file at `path` holds `caller`'s term (as far as it names one),
/// valid by the boot clock now and for `valid_for` more.
pub fn check_guard_file_for_term(
    path: impl AsRef<Path>,
    caller: &CallerTerm,
    valid_for: Duration,
) -> Result<FencingToken, GuardError> {
    let path = path.as_ref();
    judge(
        path,
        &read_guard_file(path)?,
        CheckedAt::now(),
        valid_for,
        caller,
    )
}

/// The verdict of `record`, read from `path`, at `now`, for `caller`.
fn judge(
    path: &Path,
    record: &GuardRecord,
    now: CheckedAt,
    valid_for: Duration,
    caller: &CallerTerm,
) -> Result<FencingToken, GuardError> {
    record
        .verdict(now, valid_for, caller)
        .map_err(|refusal| GuardError::Refused {
            path: path.to_owned(),
            refusal,
        })
}
