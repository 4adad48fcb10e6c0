//! One contender process of the peer rounds, whatever it runs: a Python or Node driver, this
//! harness as leasehold's library contender, or `leasehold run` with the writer as its command
//! (exec mode). Each prints the line protocol on stdout (in exec mode through leasehold, whose
//! command inherits its stdout), so that the rounds read every kind alike.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use testbed::{Guarded, Lines};

use super::install::Installed;
use super::{Kind, timing_for};
use crate::procs::{self, Replica};

/// What every contender needs to start.
pub struct Env {
    pub peers: Installed,
    /// The `leasehold` binary (exec mode).
    pub bin: PathBuf,
    /// This harness (leasehold's library contender and the exec-mode writer).
    pub harness: PathBuf,
    /// The driver programs' folder.
    pub drivers: PathBuf,
    pub ttl: Duration,
}

enum Process {
    Driver(Guarded),
    Exec(Replica),
}

/// A started contender.
pub struct Contender {
    pub identity: String,
    process: Process,
    /// The exec-mode command's pid, once it ran: it is leasehold's child, not ours, so it is
    /// killed apart when leasehold is.
    command: Option<Pid>,
}

/// A protocol line `EVENT WALL_CLOCK_NS`, when its event is `event`.
fn event_at(line: &str, event: &str) -> Option<Duration> {
    let (e, ns) = line.split_once(' ')?;
    (e == event).then(|| ns.trim().parse().ok().map(Duration::from_nanos))?
}

impl Contender {
    /// Starts a contender of `kind` for lock `name` on `url`, writing to `resource`.
    pub async fn start(
        env: &Env,
        kind: Kind,
        url: &str,
        name: &str,
        identity: &str,
        resource: &Path,
    ) -> Result<Self> {
        let ttl_ms = env.ttl.as_millis().to_string();
        let res = resource.to_string_lossy().into_owned();
        let driver = |mut cmd: Command| -> Result<Self> {
            cmd.current_dir(&env.drivers);
            let process = Guarded::spawn(cmd, identity)?;
            Ok(Self {
                identity: identity.to_owned(),
                process: Process::Driver(process),
                command: None,
            })
        };
        match kind {
            Kind::RedisPy | Kind::PythonRedisLock | Kind::Pottery => {
                let mut cmd = Command::new("python3");
                cmd.env("PYTHONPATH", &env.peers.python_path)
                    .arg(env.drivers.join("python_lock.py"))
                    .args([kind.library(), url, name, &ttl_ms, identity, &res]);
                driver(cmd)
            }
            Kind::Redlock => {
                let mut cmd = Command::new("node");
                cmd.env("NODE_PATH", &env.peers.node_path)
                    .arg(env.drivers.join("redlock.cjs"))
                    .args([url, name, &ttl_ms, identity, &res]);
                driver(cmd)
            }
            Kind::Library => {
                let mut cmd = Command::new(&env.harness);
                cmd.args(["peer-library", url, name, &ttl_ms, identity, &res]);
                driver(cmd)
            }
            Kind::Exec => {
                let harness = env.harness.to_string_lossy().into_owned();
                let command = [harness.as_str(), "peer-writer", identity, &res];
                let replica = procs::start(
                    &env.bin,
                    url,
                    name,
                    identity,
                    &timing_for(env.ttl),
                    &command,
                )
                .await?;
                Ok(Self {
                    identity: identity.to_owned(),
                    process: Process::Exec(replica),
                    command: None,
                })
            }
        }
    }

    fn guarded(&self) -> &Guarded {
        match &self.process {
            Process::Driver(g) => g,
            Process::Exec(r) => &r.process,
        }
    }

    fn lines(&self) -> &Lines {
        &self.guarded().stdout
    }

    /// The instant of the first `event` line, if it came.
    pub fn event(&self, event: &str) -> Option<Duration> {
        self.lines().find_from(0, |l| event_at(l, event))
    }

    /// Waits for the first `event` line.
    pub async fn wait_event(&self, event: &str, within: Duration) -> Result<Duration> {
        let what = format!("`{event}` from {}", self.identity);
        procs::wait_line(self.lines(), 0, &what, within, |l| event_at(l, event)).await
    }

    /// Whether it is waiting on the lock: it said so `settle` ago (a driver's next call is
    /// the blocking one), or, in exec mode, leasehold follows with its release channel
    /// subscribed.
    pub fn ready(&self, settle: Duration) -> bool {
        match &self.process {
            Process::Driver(_) => self
                .event("waiting")
                .is_some_and(|at| super::wall_now().saturating_sub(at) >= settle),
            Process::Exec(r) => r
                .leader_view()
                .is_some_and(|v| v["redis"]["subscribed"] == true),
        }
    }

    /// Sends `signal` to the process and, in exec mode, to its command, except SIGTERM, which
    /// is leasehold's to pass on. leasehold is signalled first (a command killed first would
    /// let leasehold see it exit and release), but resumed last (so that it never runs before
    /// its command: that errs against leasehold).
    pub fn signal(&mut self, signal: Signal) -> Result<()> {
        if let Process::Exec(r) = &self.process
            && self.command.is_none()
        {
            self.command = r
                .process
                .stderr
                .find_from(0, |line| {
                    let v: serde_json::Value = serde_json::from_str(line).ok()?;
                    (v["message"] == "started the command").then(|| v["pid"].as_i64())?
                })
                .map(|pid| Pid::from_raw(pid as i32));
        }
        let command = self.command.filter(|_| signal != Signal::SIGTERM);
        if let Some(pid) = command.filter(|_| signal == Signal::SIGCONT) {
            let _ = kill(pid, signal);
        }
        self.guarded()
            .signal(signal)
            .with_context(|| format!("signal {}", self.identity))?;
        if let Some(pid) = command.filter(|_| signal != Signal::SIGCONT) {
            let _ = kill(pid, signal);
        }
        Ok(())
    }

    /// Waits until the process has exited.
    pub async fn wait_exit(&mut self, within: Duration) -> Result<()> {
        let g = match &mut self.process {
            Process::Driver(g) => g,
            Process::Exec(r) => &mut r.process,
        };
        procs::wait_exit(g, within).await.map(|_| ())
    }
}

impl Drop for Contender {
    fn drop(&mut self) {
        if let Some(pid) = self.command {
            let _ = kill(pid, Signal::SIGKILL);
        }
    }
}

/// Waits until every contender of `waiting` is [`ready`](Contender::ready).
pub async fn await_ready(waiting: &[Contender], settle: Duration, within: Duration) -> Result<()> {
    let deadline = Instant::now() + within;
    while !waiting.iter().all(|c| c.ready(settle)) {
        if Instant::now() >= deadline {
            let late: Vec<&str> = waiting
                .iter()
                .filter(|c| !c.ready(settle))
                .map(|c| c.identity.as_str())
                .collect();
            bail!(
                "{} not waiting on the lock within {within:?}",
                late.join(", ")
            );
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Ok(())
}

/// The first of `waiting` to print `acquired`: its index and instant.
pub async fn first_to_acquire(
    waiting: &[Contender],
    within: Duration,
) -> Result<(usize, Duration)> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(hit) = waiting
            .iter()
            .enumerate()
            .filter_map(|(i, c)| Some((i, c.event("acquired")?)))
            .min_by_key(|(_, at)| *at)
        {
            return Ok(hit);
        }
        if Instant::now() >= deadline {
            bail!("no contender acquired the lock within {within:?}");
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_protocol_line_gives_its_instant_for_its_own_event_only() {
        let ns = Duration::from_nanos;
        let cases = [
            (
                "acquired 1796194586285406243",
                "acquired",
                Some(ns(1796194586285406243)),
            ),
            ("acquired 1796194586285406243", "released", None),
            ("acquired soon", "acquired", None),
            ("Traceback (most recent call last):", "acquired", None),
        ];
        for (line, event, want) in cases {
            assert_eq!(event_at(line, event), want, "{line}");
        }
    }
}
