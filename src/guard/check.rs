//! `leasehold guard`: exit 0 while the guard file says the term is valid by the boot clock right
//! now, 1 when it does not (zeroed, expired, missing), 2 when the file is no guard file or
//! cannot be read, or no file is named. Silent unless asked (`--verbose`), so that a shell
//! command can say `leasehold guard && write_something` in a loop.

use std::path::PathBuf;
use std::time::Duration;

use super::{GUARD_ENV, GuardRecord, judge, read_guard_file};
use crate::clock::BootInstant;

/// What `leasehold guard` was asked.
#[derive(Debug, Clone)]
pub struct GuardCheck {
    /// The guard file (`--guard-file`, else `$LEASEHOLD_GUARD_FILE`).
    pub path: Option<PathBuf>,
    /// The term must stay valid this much longer.
    pub valid_for: Duration,
    /// Say on stderr what the file says.
    pub verbose: bool,
}

/// Runs the check; the process exit code, with any words already on stderr.
pub fn run(check: &GuardCheck) -> u8 {
    let Some(path) = &check.path else {
        eprintln!(
            "error: no guard file: pass --guard-file PATH or set {GUARD_ENV} (leasehold run sets it for its command)"
        );
        return 2;
    };
    let now = BootInstant::now();
    let verdict = read_guard_file(path).and_then(|record| {
        let token = judge(path, &record, now, check.valid_for)?;
        Ok((token, record))
    });
    match verdict {
        Ok((token, record)) => {
            if check.verbose {
                let left = match record {
                    GuardRecord::Term { valid_until, .. } => now.until(valid_until),
                    GuardRecord::NoTerm => Duration::ZERO,
                };
                eprintln!(
                    "valid: token {token}, {} ms left (guard file {})",
                    left.as_millis(),
                    path.display()
                );
            }
            0
        }
        Err(err) if err.is_bad_input() => {
            eprintln!("error: --guard-file {}: {}", path.display(), err.rule());
            2
        }
        Err(err) => {
            if check.verbose {
                eprintln!("not valid: {} (guard file {})", err.rule(), path.display());
            }
            1
        }
    }
}
