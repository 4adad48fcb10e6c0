//! A started replica: `leasehold run` as a guarded child process with its HTTP server on a
//! loopback address, its stdout and stderr collected, and what callers read of it: its
//! endpoints and its JSON log lines.

use std::io;
use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use testbed::Guarded;
use testbed::http::http_get;

use crate::command::RunCommand;
use crate::startup::{NotStarted, wait_healthy};

/// One `leasehold run` process.
pub struct Replica {
    /// Its `--identity`.
    pub identity: String,
    /// Its `--http-addr`.
    pub http: SocketAddr,
    /// The process; dropping it kills it and, when the caller panics, prints its output.
    pub process: Guarded,
}

impl Replica {
    /// Spawns `run` as `identity` with its HTTP server on `http` (a free port), once
    /// `configure` has had the command (for its environment); does not wait for it.
    pub fn spawn(
        run: RunCommand,
        identity: &str,
        http: SocketAddr,
        configure: impl FnOnce(&mut Command),
    ) -> io::Result<Self> {
        let mut cmd = run.identity(identity).http_addr(http).build();
        configure(&mut cmd);
        let process = Guarded::spawn(cmd, &format!("leasehold {identity}"))?;
        Ok(Self {
            identity: identity.to_owned(),
            http,
            process,
        })
    }

    /// Waits up to `within` until it answers `/healthz`, or has exited.
    pub fn wait_healthy(&mut self, within: Duration) -> Result<(), NotStarted> {
        wait_healthy(&mut self.process, self.http, within)
    }

    /// GET `path` on its HTTP server: status code and body, or `None` when it does not answer.
    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        http_get(self.http, path)
    }

    /// `/leader` as JSON, when it answers 200 with JSON.
    pub fn leader_view(&self) -> Option<serde_json::Value> {
        let (code, body) = self.get("/leader")?;
        (code == 200).then(|| serde_json::from_str(&body).ok())?
    }

    /// Its log lines so far that are JSON (with `--log-format json`, all of them).
    pub fn logs(&self) -> Vec<serde_json::Value> {
        self.process
            .stderr
            .snapshot()
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// How many log lines it wrote so far.
    pub fn log_len(&self) -> usize {
        self.process.stderr.len()
    }

    /// Its log so far, as text.
    pub fn log_text(&self) -> String {
        self.process.stderr.text()
    }
}
