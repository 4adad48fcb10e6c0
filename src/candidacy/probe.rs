//! One run of the candidate check: an HTTP GET to a loopback address (2xx is healthy) or a
//! shell command (exit 0 is healthy), bounded by the check's timeout. Failures come back as
//! words for `/readyz`, `/leader` and the logs.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::waitpid;
use nix::unistd::Pid;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Probe;

/// The longest status line read from the checked endpoint.
const MAX_STATUS_LINE: usize = 1024;

impl Probe {
    /// Runs the check once: `Ok` when healthy, else why not.
    pub async fn run(&self, timeout: Duration) -> Result<(), String> {
        let result = match self {
            Probe::Http { addr, host, path } => {
                tokio::time::timeout(timeout, get(*addr, host, path)).await
            }
            Probe::Command(command) => tokio::time::timeout(timeout, shell(command)).await,
        };
        match result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(why)) => Err(format!("{self}: {why}")),
            Err(_) => Err(format!("{self}: no answer within {timeout:?}")),
        }
    }
}

async fn get(addr: SocketAddr, host: &str, path: &str) -> Result<(), String> {
    let mut stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: leasehold-candidate-check\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut head = Vec::with_capacity(128);
    let mut buf = [0u8; 256];
    while !head.windows(2).any(|w| w == b"\r\n") {
        if head.len() >= MAX_STATUS_LINE {
            return Err("no HTTP status line in the first 1024 bytes".into());
        }
        let n = stream.read(&mut buf).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("connection closed before an HTTP status line".into());
        }
        head.extend_from_slice(&buf[..n]);
    }
    match status_code(&head) {
        Some(code) if (200..300).contains(&code) => Ok(()),
        Some(code) => Err(format!("status {code}")),
        None => Err("not an HTTP response".into()),
    }
}

/// The status code of an HTTP/1.x response that starts with `head`.
fn status_code(head: &[u8]) -> Option<u16> {
    let line = head.split(|b| *b == b'\r').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split(' ');
    let version = words.next()?;
    if !version.starts_with("HTTP/1.") {
        return None;
    }
    let code = words.next()?;
    if code.len() != 3 {
        return None;
    }
    code.parse().ok()
}

async fn shell(command: &str) -> Result<(), String> {
    let mut cmd = tokio::process::Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    let (mut child, proc) =
        crate::exec::spawn_helper(&mut cmd).map_err(|e| format!("cannot start it: {e}"))?;
    // Dropped last: after tokio reaped the shell, or at the timeout, before the child.
    let _group = CheckGroup(proc.id.pid);
    let waited = child.wait().await;
    crate::exec::untrack(proc.id.pid);
    match waited {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => match status.code() {
            Some(code) => Err(format!("exit code {code}")),
            None => Err(format!("ended by {status}")),
        },
        Err(e) => Err(e.to_string()),
    }
}

/// A check's process group: nothing the check started outlives it. When the check ends (or its
/// timeout drops it, the shell not reaped yet), what is left of the group is killed, and reaped
/// as it comes to this process (the shell, and orphans when this process is their subreaper);
/// until then, the group is a helper's, never the command's.
struct CheckGroup(i32);

impl Drop for CheckGroup {
    fn drop(&mut self) {
        let group = self.0;
        if killpg(Pid::from_raw(group), Signal::SIGKILL).is_err() {
            crate::exec::forget_helper_group(group); // nobody left
            return;
        }
        let reaper = std::thread::Builder::new().spawn(move || {
            while waitpid(Pid::from_raw(-group), None).is_ok() {}
            crate::exec::forget_helper_group(group);
        });
        if reaper.is_err() {
            crate::exec::forget_helper_group(group);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_code_table() {
        let cases: [(&[u8], Option<u16>); 6] = [
            (b"HTTP/1.1 200 OK\r\n", Some(200)),
            (b"HTTP/1.0 503 Service Unavailable\r\n", Some(503)),
            (b"HTTP/1.1 204\r\n", Some(204)),
            (b"HTTP/2 200\r\n", None),
            (b"SSH-2.0-OpenSSH\r\n", None),
            (b"HTTP/1.1 20 short\r\n", None),
        ];
        for (head, want) in cases {
            assert_eq!(
                status_code(head),
                want,
                "{:?}",
                String::from_utf8_lossy(head)
            );
        }
    }
}
