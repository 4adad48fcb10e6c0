//! Waiting for a started replica: until it answers `/healthz` (its HTTP server is up, so its
//! flags were accepted and its port was free; the answer is 200 unless it is stopping already),
//! or until it exits, whichever comes first. A replica given port 0 (the kernel picks a free
//! one, so no two processes can race for it) is first waited for until its start line names
//! the port.

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

/// The address a replica's HTTP server is bound to, when `line` is its start line
/// (`leasehold starting`, in the JSON or the text log format).
pub fn bound_http(line: &str) -> Option<SocketAddr> {
    if !line.contains("leasehold starting") {
        return None;
    }
    let (_, rest) = line
        .split_once("\"http\":\"")
        .or_else(|| line.split_once(" http="))?;
    rest.split(['"', ' ']).next()?.parse().ok()
}

/// Waits up to `within`, polling every 5 ms, until `process` answers `/healthz` on `http`; with
/// port 0 in `http`, first until its start line names the port, which goes into `http`.
pub fn wait_healthy(
    process: &mut Guarded,
    http: &mut SocketAddr,
    within: Duration,
) -> Result<(), NotStarted> {
    let deadline = Instant::now() + within;
    loop {
        if let Ok(Some(code)) = process.try_exit() {
            return Err(NotStarted::Exited(code));
        }
        if http.port() == 0
            && let Some(bound) = process.stderr.find_from(0, bound_http)
        {
            *http = bound;
        }
        if http.port() != 0 && answers(*http) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(NotStarted::Silent(within));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_address_is_read_from_the_start_line_in_either_format() {
        let json = r#"{"level":"INFO","message":"leasehold starting","identity":"a","http":"127.0.0.1:38039","readiness":"member"}"#;
        let text = "2026-12-07T03:55:18Z  INFO leasehold::cmd::run: leasehold starting identity=a http=127.0.0.1:33367 readiness=member";
        let v6 = r#"{"message":"leasehold starting","http":"[::1]:8080"}"#;
        assert_eq!(bound_http(json), "127.0.0.1:38039".parse().ok());
        assert_eq!(bound_http(text), "127.0.0.1:33367".parse().ok());
        assert_eq!(bound_http(v6), "[::1]:8080".parse().ok());
        let other = r#"{"message":"became leader","http":"127.0.0.1:1"}"#;
        assert_eq!(
            bound_http(other),
            None,
            "only the start line says where it listens"
        );
    }
}
