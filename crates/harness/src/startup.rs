//! Waiting for a started replica: until it answers `/healthz` (its HTTP server is up, so its
//! flags were accepted and its port was free; the answer is 200 unless it is stopping already),
//! or until it exits, whichever comes first.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use testbed::Guarded;
use testbed::http::get;

/// Why a replica is not up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotStarted {
    /// It exited, with this code (`-1` for a signal): refused its flags, or lost the race for
    /// its port.
    #[error("exited at start with code {0}")]
    Exited(i32),
    /// It still runs and has not answered within the bound.
    #[error("never answered /healthz within {0:?}")]
    Silent(Duration),
}

/// Whether `/healthz` on `http` answers now (within a second), whatever its status.
pub fn answers(http: SocketAddr) -> bool {
    get(http, "/healthz", "HTTP/1.1", Duration::from_secs(1)).is_some()
}

/// Waits up to `within`, polling every 5 ms, until `process` answers `/healthz` on `http`.
pub fn wait_healthy(
    process: &mut Guarded,
    http: SocketAddr,
    within: Duration,
) -> Result<(), NotStarted> {
    let deadline = Instant::now() + within;
    loop {
        if let Ok(Some(code)) = process.try_exit() {
            return Err(NotStarted::Exited(code));
        }
        if answers(http) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(NotStarted::Silent(within));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
