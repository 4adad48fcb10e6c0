//! The open-files limit (`RLIMIT_NOFILE`). Its soft value is often 1,024, in a container
//! sometimes less, while the hard one allows far more. HTTP clients holding every connection
//! `--http-max-connections` lets them hold, and the probe reserve, took the last files: the
//! probes waited in the kernel's backlog, and a leader whose Redis connection broke could not
//! dial again and lost its term. So `run` raises the soft limit to the hard one at start (as
//! systemd advises a program that needs many files), and refuses a cap that does not fit under
//! it with [`KEPT`] files for the rest; the command after `--` and the candidate check get back
//! the limit leasehold was started with (a program that uses `select` breaks on a descriptor
//! above 1,023).

use std::sync::OnceLock;

use nix::sys::resource::{Resource, getrlimit, setrlimit};

/// Files kept for everything but the HTTP connections: the Redis connections (the lease's, the
/// release channel's, the Sentinels'), the Kubernetes client's, the guard and status files,
/// boot-clock timers, the runtime's own, the command's.
pub const KEPT: u64 = 64;

/// The soft and hard limits leasehold was started with, once [`raise`] changed them.
static STARTED_WITH: OnceLock<(u64, u64)> = OnceLock::new();

/// Raises the soft limit to the hard one, and returns the soft limit now (`u64::MAX` when it
/// cannot be read, which no check refuses).
pub fn raise() -> u64 {
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return u64::MAX;
    };
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        let _ = STARTED_WITH.set((soft, hard));
        return hard;
    }
    soft
}

/// The limits to give a command back: those leasehold was started with (`None`: unchanged).
pub fn started_with() -> Option<(u64, u64)> {
    STARTED_WITH.get().copied()
}
