//! The leader's work: the singleton command that leasehold starts while a replica leads. It
//! writes to the fenced resource every few milliseconds with the fencing token from its
//! environment, and never stops on its own (leasehold stops it at step-down; a refusal is the
//! resource's business, and the checker's). It runs as `chaos child`, the harness's own binary.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::Context;

/// The variables leasehold gives its command.
const TOKEN_ENV: &str = "LEASEHOLD_FENCING_TOKEN";
const IDENTITY_ENV: &str = "LEASEHOLD_IDENTITY";
const LEASE_ENV: &str = "LEASEHOLD_LEASE";

/// Writes forever; returns only when the environment is not what leasehold gives.
pub fn run(resource: SocketAddr, interval: Duration) -> anyhow::Result<()> {
    let token: u64 = std::env::var(TOKEN_ENV)
        .with_context(|| format!("{TOKEN_ENV} is not set: run me as leasehold's command"))?
        .parse()
        .with_context(|| format!("{TOKEN_ENV} is not a number"))?;
    let identity = std::env::var(IDENTITY_ENV)
        .with_context(|| format!("{IDENTITY_ENV} is not set: run me as leasehold's command"))?;
    if identity.is_empty() || identity.contains(char::is_whitespace) {
        anyhow::bail!("{IDENTITY_ENV} {identity:?} must be one word");
    }
    std::env::var(LEASE_ENV)
        .with_context(|| format!("{LEASE_ENV} is not set: run me as leasehold's command"))?;
    let pid = std::process::id();
    let mut seq: u64 = 0;
    let mut link: Option<(TcpStream, BufReader<TcpStream>)> = None;
    loop {
        if link.is_none() {
            link = connect(resource);
        }
        if let Some((stream, reader)) = link.as_mut() {
            seq += 1;
            let sent = writeln!(stream, "W {token} {identity} {pid} {seq}");
            let mut reply = String::new();
            let answered = sent.is_ok() && matches!(reader.read_line(&mut reply), Ok(n) if n > 0);
            if !answered {
                link = None;
            }
        }
        std::thread::sleep(interval);
    }
}

fn connect(resource: SocketAddr) -> Option<(TcpStream, BufReader<TcpStream>)> {
    let stream = TcpStream::connect_timeout(&resource, Duration::from_millis(500)).ok()?;
    stream.set_nodelay(true).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    let reader = BufReader::new(stream.try_clone().ok()?);
    Some((stream, reader))
}
