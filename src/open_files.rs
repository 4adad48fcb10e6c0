//! The open-files limit (`RLIMIT_NOFILE`). Its soft value is often 1,024, in a container
//! sometimes less, while the hard one allows far more. HTTP clients holding every connection
//! `--http-max-connections` lets them hold, and the probe reserve, took the last files: the
//! probes waited in the kernel's backlog, and a leader whose Redis connection broke could not
//! dial again and lost its term. So a cap that does not fit under the hard limit with [`KEPT`]
//! files for the rest is refused (`cli/http.rs`), and `run` raises its soft limit as far as the
//! cap needs at start (as systemd advises a program that needs many files); the command after
//! `--` and the candidate check get back the limit leasehold was started with (a program that
//! uses `select` breaks on a descriptor above 1,023).

use std::sync::OnceLock;

use nix::sys::resource::{Resource, getrlimit, setrlimit};

/// Files kept for everything but the HTTP connections: the Redis connections (the lease's, the
/// release channel's, the Sentinels'), the Kubernetes client's, the guard and status files,
/// boot-clock timers, the runtime's own, the command's.
pub const KEPT: u64 = 64;

/// The soft and hard limits leasehold was started with, once [`raise`] changed them.
static STARTED_WITH: OnceLock<(u64, u64)> = OnceLock::new();

/// The hard limit: as far as the soft one can be raised (`u64::MAX` when it cannot be read,
/// which no check refuses).
pub fn hard() -> u64 {
    getrlimit(Resource::RLIMIT_NOFILE).map_or(u64::MAX, |(_, hard)| hard)
}

/// Raises the soft limit to `needed` files when it is lower (never past the hard limit).
pub fn raise_to(needed: u64) {
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return;
    };
    let raised = needed.min(hard);
    if soft < raised && setrlimit(Resource::RLIMIT_NOFILE, raised, hard).is_ok() {
        let _ = STARTED_WITH.set((soft, hard));
    }
}

/// The limits to give a command back: those leasehold was started with (`None`: unchanged).
pub fn started_with() -> Option<(u64, u64)> {
    STARTED_WITH.get().copied()
}
