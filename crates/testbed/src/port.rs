//! Free loopback ports: bind port 0, read the port the kernel chose, close. Another process may
//! take the port before the server under test binds it, so every fixture that uses one retries
//! on a new port when its server fails to start ([`on_a_free_port`]).

use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    free_addr().port()
}

/// `127.0.0.1:PORT` with a port that was free a moment ago.
pub fn free_addr() -> SocketAddr {
    try_free_addr().unwrap_or_else(|e| panic!("no free loopback port: {e}"))
}

/// [`free_addr`], as an error for callers outside a test.
pub fn try_free_addr() -> io::Result<SocketAddr> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()
}

/// Calls `start` with a port that was free a moment ago until it says its server came up on it
/// (`true`), at most ten times: the port it came up on.
pub fn on_a_free_port(mut start: impl FnMut(u16) -> io::Result<bool>) -> io::Result<u16> {
    for _ in 0..10 {
        let port = try_free_addr()?.port();
        if start(port)? {
            return Ok(port);
        }
    }
    Err(io::Error::other("did not start on any free port"))
}
