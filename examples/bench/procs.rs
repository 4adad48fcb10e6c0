//! Child processes of the harness: `leasehold run` replicas (JSON logs collected, HTTP on a
//! free port) and this harness re-run as a paused-leader child. Each is a `testbed::Guarded`:
//! dropping it kills the process (SIGCONT first, in case it is frozen) and reaps it, so a panic
//! or an early return leaves nothing behind, and the kernel kills it if the harness dies. Spawn
//! them from the runtime's workers (async code), not from `spawn_blocking`, whose threads exit.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, bail};
use harness::RunCommand;
use testbed::{Guarded, Lines};

/// Waits (polling every millisecond, on the runtime's clock) for a line of `lines` from `from`
/// on that `pick` accepts.
pub async fn wait_line<T>(
    lines: &Lines,
    from: usize,
    what: &str,
    within: Duration,
    mut pick: impl FnMut(&str) -> Option<T>,
) -> Result<T> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = lines.find_from(from, &mut pick) {
            return Ok(v);
        }
        if Instant::now() >= deadline {
            let tail: Vec<String> = lines.snapshot().into_iter().rev().take(10).collect();
            bail!(
                "timed out after {within:?} waiting for {what}; last lines (newest first):\n{}",
                tail.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Waits for `child` to exit; its code.
pub async fn wait_exit(child: &mut Guarded, within: Duration) -> Result<i32> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(code) = child.try_exit().context("poll a child's exit")? {
            return Ok(code);
        }
        if Instant::now() >= deadline {
            bail!("process {} did not exit within {within:?}", child.pid());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// One `leasehold run` replica (see [`start`]).
pub use harness::Replica;

/// Starts one `leasehold run` replica: Kubernetes off, JSON logs, HTTP on a free port of
/// 127.0.0.1, no data-loss cooldown (every benchmark Redis is fresh), and a command to run while
/// leading when `command` is not empty (exec mode); on another port when it exits at start (a
/// lost race for its port), five times at most.
pub async fn start(
    bin: &Path,
    url: &str,
    lease: &str,
    identity: &str,
    timing: &leasehold::elector::Timing,
    command: &[&str],
) -> Result<Replica> {
    let mut last_error = None;
    for _ in 0..5 {
        let http = testbed::port::try_free_addr().context("find a free port")?;
        let run = RunCommand::new(bin)
            .redis_url(url)
            .lease(lease)
            .args(["--log", "info", "--no-data-loss-cooldown"])
            .timing(timing)
            .command(command);
        let mut replica = Replica::launch(run, identity, http, |cmd| {
            cmd.env_remove("RUST_LOG");
        })?;
        match await_started(&mut replica).await {
            Ok(()) => return Ok(replica),
            Err(err) => last_error = Some(err),
        }
    }
    Err(last_error.unwrap_or_else(|| anyhow::anyhow!("no attempt made")))
        .with_context(|| format!("leasehold replica {identity} did not start"))
}

/// Waits for `leasehold starting` (its HTTP port is bound by then); fails fast when the
/// process exits (a lost race for the port).
async fn await_started(replica: &mut Replica) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if replica.event_time(0, "leasehold starting").is_some() {
            return Ok(());
        }
        if let Some(code) = replica.process.try_exit().context("poll a child's exit")? {
            bail!("exited with code {code}:\n{}", replica.log_text());
        }
        if Instant::now() >= deadline {
            bail!("no `leasehold starting` line within 15 s");
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// A replica's log events, on the runtime's clock.
pub trait Events {
    /// The wall-clock time of the first log event `message` from line `from` on.
    fn event_time(&self, from: usize, message: &str) -> Option<SystemTime>;

    /// Waits for log event `message` (with `field` equal to a value, when given) from line
    /// `from` on; its wall-clock timestamp.
    fn wait_event(
        &self,
        from: usize,
        message: &str,
        field: Option<(&str, &str)>,
        within: Duration,
    ) -> impl Future<Output = Result<SystemTime>>;
}

impl Events for Replica {
    fn event_time(&self, from: usize, message: &str) -> Option<SystemTime> {
        self.process
            .stderr
            .find_from(from, |line| event_at(line, message, None))
    }

    async fn wait_event(
        &self,
        from: usize,
        message: &str,
        field: Option<(&str, &str)>,
        within: Duration,
    ) -> Result<SystemTime> {
        let what = format!("`{message}` from {}", self.identity);
        wait_line(&self.process.stderr, from, &what, within, |line| {
            event_at(line, message, field)
        })
        .await
    }
}

/// The timestamp of a JSON log line whose message is `message` (and whose `field` has a value).
fn event_at(line: &str, message: &str, field: Option<(&str, &str)>) -> Option<SystemTime> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    if v["message"] != message {
        return None;
    }
    if let Some((name, want)) = field
        && v[name] != want
    {
        return None;
    }
    Replica::logged_at(&v)
}

/// The harness itself as a child process with `args` (the paused-leader mode).
pub fn spawn_self(args: &[String]) -> Result<Guarded> {
    let exe = std::env::current_exe().context("find the harness's own executable")?;
    let mut cmd = Command::new(&exe);
    cmd.args(args);
    Ok(Guarded::spawn(cmd, &exe.display().to_string())?)
}
