//! `leasehold guard`: exit 0 while the guard file says the caller's term is valid by the boot
//! clock right now, 1 when it does not (zeroed, expired, missing, another term or lease), 2 when
//! the file is no guard file or cannot be read, no file is named, or the caller's term does not
//! parse. Silent unless asked (`--verbose`), so that a shell command can say `leasehold guard &&
//! write_something` in a loop.

use std::path::PathBuf;
use std::time::Duration;

use super::{CallerTerm, CheckedAt, GUARD_ENV, judge, read_guard_file};

/// What `leasehold guard` was asked.
#[derive(Debug, Clone)]
pub struct GuardCheck {
    /// The guard file (`--guard-file`, else `$LEASEHOLD_GUARD_FILE`).
    pub path: Option<PathBuf>,
    /// The term must stay valid this much longer.
    pub valid_for: Duration,
    /// The caller's lease and term (`--lease`, `--token`, else `$LEASEHOLD_LEASE`,
    /// `$LEASEHOLD_FENCING_TOKEN`): a record of another is refused.
    pub caller: CallerTerm,
    /// Say on stderr what the file says.
    pub verbose: bool,
}

/// Runs the check; the process exit code, with any words already on stderr.
pub fn run(check: &GuardCheck) -> u8 {
    let Some(path) = &check.path else {
        say!(
            "error: no guard file: pass --guard-file PATH or set {GUARD_ENV} (leasehold run sets it for its command)"
        );
        return 2;
    };
    let now = CheckedAt::now();
    let verdict = read_guard_file(path).and_then(|record| {
        let token = judge(path, &record, now, check.valid_for, &check.caller)?;
        Ok((token, record))
    });
    match verdict {
        Ok((token, record)) => {
            if check.verbose {
                let left = record.left(now);
                let whose = if check.caller.token.is_some() {
                    "the caller's term"
                } else {
                    "any term: no --token or $LEASEHOLD_FENCING_TOKEN to compare"
                };
                say!(
                    "valid: token {token} of lease {}, {} ms left ({whose}; guard file {})",
                    record.lease(),
                    left.as_millis(),
                    path.display()
                );
            }
            0
        }
        Err(err) if err.is_bad_input() => {
            say!("error: --guard-file {}: {}", path.display(), err.rule());
            2
        }
        Err(err) => {
            if check.verbose {
                say!("not valid: {} (guard file {})", err.rule(), path.display());
            }
            1
        }
    }
}
