//! Idle cost of each kind: a holder and two waiters on a dedicated redis-server, doing nothing
//! but hold and wait, and the round trips they make per second. `INFO commandstats` counts the
//! commands a script runs inside Redis under the same names as the ones clients send (and the
//! peers send `SET` themselves where leasehold's scripts run it inside), so the count comes
//! from `MONITOR`, which tags each command with its client's address, or `lua` for a script's.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// What a kind's three contenders cost over the window.
#[derive(Debug, Clone, Default)]
pub struct Idle {
    pub window: Duration,
    /// Commands the clients sent (round trips), by command.
    pub sent: BTreeMap<String, u64>,
    /// Commands their scripts ran inside Redis.
    pub inside: u64,
}

impl Idle {
    pub fn sent_per_s(&self) -> f64 {
        self.sent.values().sum::<u64>() as f64 / self.window.as_secs_f64().max(1e-9)
    }

    pub fn inside_per_s(&self) -> f64 {
        self.inside as f64 / self.window.as_secs_f64().max(1e-9)
    }
}

/// Counts the commands `redis` runs for `window`, from a `MONITOR` connection.
pub async fn watch(redis: std::net::SocketAddr, window: Duration) -> Result<Idle> {
    let mut stream = TcpStream::connect(redis)
        .await
        .context("connect to MONITOR")?;
    stream
        .write_all(b"MONITOR\r\n")
        .await
        .context("send MONITOR")?;
    let mut lines = BufReader::new(stream).lines();
    let started = Instant::now();
    let mut idle = Idle::default();
    let deadline = tokio::time::Instant::now() + window;
    loop {
        let line = match tokio::time::timeout_at(deadline, lines.next_line()).await {
            Err(_) => break,
            Ok(line) => line.context("read MONITOR")?,
        };
        let Some(line) = line else { break };
        match command_of(&line) {
            Some(Source::Script) => idle.inside += 1,
            Some(Source::Client(cmd)) => *idle.sent.entry(cmd).or_default() += 1,
            None => {}
        }
    }
    idle.window = started.elapsed();
    Ok(idle)
}

/// Who ran a command `MONITOR` shows.
#[derive(Debug, PartialEq)]
enum Source {
    /// A script, inside Redis.
    Script,
    /// A client, which sent the command (lowercase).
    Client(String),
}

/// `+1764660000.123456 [0 127.0.0.1:41234] "evalsha" "…" …`, or `[0 lua]` for a script's.
fn command_of(line: &str) -> Option<Source> {
    let (source, rest) = line.split_once(" [")?.1.split_once("] ")?;
    if source.ends_with(" lua") {
        return Some(Source::Script);
    }
    Some(Source::Client(rest.split('"').nth(1)?.to_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monitor_lines_tell_a_clients_command_from_a_scripts() {
        let cases = [
            (
                r#"+1764660000.123456 [0 127.0.0.1:41234] "EVALSHA" "e5" "1" "k""#,
                Some(Source::Client("evalsha".into())),
            ),
            (
                r#"+1764660000.123457 [0 lua] "pexpire" "k" "2000""#,
                Some(Source::Script),
            ),
            ("+OK", None),
        ];
        for (line, want) in cases {
            assert_eq!(command_of(line), want, "{line}");
        }
    }
}
