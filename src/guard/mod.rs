//! The guard file: the term's token and validity deadline, published for the leader's command
//! so that it can ask whether it may act without a round trip and without leasehold running.
//!
//! A frozen leasehold cannot stop its command, and a resumed command may act before leasehold
//! kills it (docs/REFERENCE.md, "The guard"). So leasehold keeps the current term in a small
//! file, on tmpfs where it can: written when a term begins (before the work starts), after every
//! renewal, and zeroed first at step-down, before the term's `Leadership` refuses, before
//! readiness flips and before the command is signalled. The deadline only moves when leasehold
//! renews, so a frozen leasehold makes its command's checks fail at the deadline by themselves,
//! and a frozen command that resumes fails its first check.
//!
//! # Format
//!
//! One line of UTF-8 text, at most 399 bytes: `leasehold-guard 3 <token> <valid_until_ns>
//! <wall_until_ns> <lease>\n`. The words are separated by one space; `3` is the format's
//! version; `<token>` is the term's fencing token, `<valid_until_ns>` its validity deadline in
//! nanoseconds of `CLOCK_BOOTTIME` (the boot clock, which counts through suspend and which every
//! process of the machine shares, outside time namespaces) and `<wall_until_ns>` the same
//! deadline in nanoseconds of `CLOCK_REALTIME` since the epoch, all plain decimal without
//! leading zeros; `<lease>` is the lease name (no whitespace, at most 317 bytes). The term is
//! valid while both clocks read less than their deadline (the wall clock also counts a freeze
//! of the machine that the boot clock did not); `leasehold-guard 3 0 0 0 <lease>` (the zeroed
//! record) means no term. A reader that knows its term (the command: `$LEASEHOLD_FENCING_TOKEN`,
//! `$LEASEHOLD_LEASE`) also refuses a record of another token or lease. Anything else is refused
//! as garbled. Read the whole file at each check (one `read` of up to 379 bytes after `open`);
//! do not keep it open, since each update is a new file: leasehold writes the record to a fresh
//! file beside it and `rename`s that over the guard file. `rename(2)` is atomic, so a reader
//! that opens the path gets the old file or the new one, each complete and never written again.
//! (An update in place is not atomic for a concurrent reader: Linux copies a buffered `read` out
//! of the page cache without locking out a concurrent `pwrite`, on tmpfs as on ext4, and a
//! reader can see half of each.)
//!
//! One live leasehold writes one guard file: it claims the file ([`crate::owned_file`]) before
//! its first write, and a second leasehold given the same file is refused at start.
//!
//! - [`record`]: the line, its parser, and the verdict at an instant.
//! - [`caller`]: the lease and term of the reader, from the command's environment.
//! - [`writer`]: [`GuardFile`], the file and its writes.
//! - [`hook`]: [`GuardHooks`], which keep it in step with the elector's terms (its term hooks).
//! - [`check`]: `leasehold guard`, the check for shell commands.

pub mod caller;
pub mod check;
pub mod hook;
pub mod record;
pub mod writer;

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use caller::{CallerError, CallerTerm};
pub use hook::GuardHooks;
pub use record::{CheckedAt, GuardRecord, Refusal};
pub use writer::GuardFile;

use crate::lease::{FencingToken, LeaseName};
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
    /// The record is zeroed: leasehold stepped down, or has not led yet.
    NoTerm {
        /// The guard file.
        path: PathBuf,
    },
    /// The record is another lease's than the caller's.
    OtherLease {
        /// The guard file.
        path: PathBuf,
        /// The record's lease.
        lease: LeaseName,
        /// The caller's.
        mine: LeaseName,
    },
    /// The record holds another term than the caller's: a later term, or another process's.
    OtherTerm {
        /// The guard file.
        path: PathBuf,
        /// The record's term.
        token: FencingToken,
        /// The caller's.
        mine: FencingToken,
    },
    /// The term's validity deadline passed (leasehold is frozen or gone, or could not renew).
    Expired {
        /// The guard file.
        path: PathBuf,
        /// The term.
        token: FencingToken,
        /// How long ago the deadline passed.
        late: Duration,
    },
    /// The term is valid, but for less than the margin asked for.
    TooShort {
        /// The guard file.
        path: PathBuf,
        /// The term.
        token: FencingToken,
        /// Time left before the deadline.
        left: Duration,
        /// The margin asked for.
        wanted: Duration,
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
            | GuardError::NoTerm { path }
            | GuardError::OtherLease { path, .. }
            | GuardError::OtherTerm { path, .. }
            | GuardError::Expired { path, .. }
            | GuardError::TooShort { path, .. }
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
            GuardError::NoTerm { .. } => {
                "no term (leasehold stepped down, or has not led yet)".into()
            }
            GuardError::OtherLease { lease, mine, .. } => {
                format!("the file is lease {lease}'s, not the caller's lease {mine}")
            }
            GuardError::OtherTerm { token, mine, .. } => format!(
                "the file holds term {token}, not the caller's term {mine} (a later term, or another process's)"
            ),
            GuardError::Expired { token, late, .. } => {
                format!("the validity deadline of term {token} passed {late:?} ago")
            }
            GuardError::TooShort {
                token,
                left,
                wanted,
                ..
            } => {
                format!("term {token} is valid for {left:?} more, not the {wanted:?} asked for")
            }
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
    let mut file = std::fs::File::open(path).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => GuardError::Missing {
            path: path.to_owned(),
        },
        _ => GuardError::Unreadable {
            path: path.to_owned(),
            source,
        },
    })?;
    // One read gets a whole record; the loop only guards against a short read elsewhere.
    let mut buf = [0u8; record::MAX_LEN + 1];
    let mut len = 0;
    while len < buf.len() {
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(GuardError::Unreadable {
                    path: path.to_owned(),
                    source,
                });
            }
        }
    }
    GuardRecord::parse(&buf[..len]).map_err(|reason| GuardError::Garbled {
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
    record.verdict(now, valid_for, caller).map_err(|refusal| {
        let path = path.to_owned();
        match refusal {
            Refusal::OtherLease { lease, mine } => GuardError::OtherLease { path, lease, mine },
            Refusal::NoTerm => GuardError::NoTerm { path },
            Refusal::OtherTerm { token, mine } => GuardError::OtherTerm { path, token, mine },
            Refusal::Expired { token, late } => GuardError::Expired { path, token, late },
            Refusal::TooShort {
                token,
                left,
                wanted,
            } => GuardError::TooShort {
                path,
                token,
                left,
                wanted,
            },
        }
    })
}
