//! The open-files limit (`RLIMIT_NOFILE`), often 1,024 soft: HTTP clients holding every
//! connection the cap allows took the last files, so that the probes waited in the backlog and
//! a broken Redis connection could not be dialled again. `cli/http.rs` refuses a cap that does
//! not fit under the hard limit, `run` raises the soft one as far as the cap needs, and every
//! child gets back the limit leasehold was started with (`select` breaks above 1,023).

use std::sync::OnceLock;

use nix::sys::resource::{Resource, getrlimit, setrlimit};

/// Files kept for all but the HTTP connections: Redis, Kubernetes, guard and status files, timers.
pub const KEPT: u64 = 64;

/// The soft and hard limits leasehold was started with, once [`raise_to`] changed them.
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
