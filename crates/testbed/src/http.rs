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
    let answer = request(addr, path, version, &[], read_timeout)?;
    Some((answer.code, answer.body))
}

/// An answer with its head.
#[derive(Debug, Clone)]
pub struct Answer {
    pub code: u16,
    /// The status line and the header lines, as sent.
    pub head: String,
    pub body: String,
}

impl Answer {
    /// The value of header `name` (case-insensitive), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim().eq_ignore_ascii_case(name).then(|| value.trim())
        })
    }
}

/// A GET in HTTP/1.0 (no chunking) with `headers` added, e.g. `("Accept", "text/plain")`,
/// waiting up to two seconds for the answer.
pub fn get_with(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Option<Answer> {
    request(addr, path, "HTTP/1.0", headers, Duration::from_secs(2))
}

fn request(
    addr: SocketAddr,
    path: &str,
    version: &str,
    headers: &[(&str, &str)],
    read_timeout: Duration,
) -> Option<Answer> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(read_timeout)).ok()?;
    let extra: String = headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    write!(
        stream,
        "GET {path} {version}\r\nHost: localhost\r\n{extra}Connection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some(Answer {
        code,
        head: head.to_owned(),
        body: body.to_owned(),
    })
}
