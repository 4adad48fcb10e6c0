//! A minimal HTTP/1.x GET for loopback endpoints (health checks, metrics, JSON status pages):
//! no client library, no connection reuse, bounded waits.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Status code and body, or `None` when nothing answers within two seconds.
pub fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    get(addr, path, "HTTP/1.1", Duration::from_secs(2))
}

/// The same GET in `version` (`HTTP/1.0` keeps a server from chunking the body), waiting up to
/// `read_timeout` for the answer.
pub fn get(
    addr: SocketAddr,
    path: &str,
    version: &str,
    read_timeout: Duration,
) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(read_timeout)).ok()?;
    write!(
        stream,
        "GET {path} {version}\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, body.to_owned()))
}
