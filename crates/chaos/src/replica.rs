//! One replica: the real `leasehold run` binary in exec mode behind its own fault proxy, its
//! JSON logs read line by line (kept raw on disk, parsed into events), and a live view of its
//! leadership for the nemesis. A replica lives through several processes ("incarnations") as
//! the nemesis kills and restarts it.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, bail};
use nix::sys::signal::Signal;
use serde::{Deserialize, Serialize};

use harness::{NotStarted, RunCommand, wait_healthy};
use leasehold::elector::Timing;

use crate::config::{PG_ENV, PG_FENCING_ENV, RESOURCE_ENV, WRITE_INTERVAL_ENV};
pub use crate::events::{Event, LogEvent};
pub use crate::livelog::deadline;
use crate::livelog::{Live, lock, read_logs};
use crate::time::{self, Micros};
use testbed::Guarded;
use testbed::port::try_free_addr;
use testbed::process_tree::{Proc, stat};
use testbed::proxy::FaultProxy;

/// What every replica shares.
#[derive(Debug, Clone)]
pub struct ReplicaSettings {
    /// The leasehold binary.
    pub leasehold: PathBuf,
    /// The leader's command (program and arguments).
    pub child_command: Vec<OsString>,
    /// The fenced resource.
    pub resource: SocketAddr,
    /// The lease name.
    pub lease: String,
    /// The timing.
    pub timing: Timing,
    /// The children's write interval.
    pub write_interval: Duration,
    /// Where the raw logs go.
    pub log_dir: PathBuf,
    /// More options for `leasehold run`.
    pub extra_args: Vec<String>,
    /// The Redis URL of a Sentinel or Cluster topology (`None`: this replica's proxy).
    pub redis_url: Option<String>,
    /// PostgreSQL, the second fenced resource, if the run has it.
    pub postgres: Option<SocketAddr>,
    /// Whether the command's PostgreSQL writes are fenced.
    pub pg_fencing: bool,
}

/// One process of a replica.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Incarnation {
    /// Its number within the replica, from 0.
    pub number: usize,
    /// Its process id.
    pub pid: i32,
    /// When it was started.
    pub started: Micros,
    /// When the harness saw it gone (killed, or exited).
    pub ended: Option<Micros>,
    /// How it ended, in words.
    pub end: String,
    /// Its events, in log order.
    pub events: Vec<LogEvent>,
    /// Lines that were not JSON (the child's complaints, panics).
    pub stray_lines: usize,
    /// Anything odd the harness saw about this process.
    pub notes: Vec<String>,
}

struct Running {
    process: Guarded,
    number: usize,
    started: Micros,
    live: Arc<Mutex<Live>>,
    reader: Option<JoinHandle<()>>,
    reader_done: mpsc::Receiver<()>,
    paused: bool,
}

/// A replica: name, proxy, current process and past ones.
pub struct Replica {
    /// Its index.
    pub index: usize,
    /// Its identity (`r<index>`).
    pub identity: String,
    /// Its link to Redis.
    pub proxy: FaultProxy,
    running: Option<Running>,
    done: Vec<Incarnation>,
    settings: ReplicaSettings,
    /// The ACL user and password its processes connect as from now on (`None`: the default
    /// user).
    user: Option<(String, String)>,
}

/// Whether the process is known to have exited (a failing `waitpid` counts as not yet).
fn exited(process: &mut Guarded) -> bool {
    matches!(process.try_exit(), Ok(Some(_)))
}

impl Replica {
    /// A replica that is not running yet.
    pub fn new(index: usize, proxy: FaultProxy, settings: ReplicaSettings) -> Self {
        Self {
            index,
            identity: format!("r{index}"),
            proxy,
            running: None,
            done: Vec::new(),
            settings,
            user: None,
        }
    }

    /// Makes the processes started from now on connect as an ACL user (`None`: the default
    /// user); the running one keeps its connection.
    pub fn set_user(&mut self, user: Option<(String, String)>) {
        self.user = user;
    }

    /// The number the next or current process has.
    pub fn incarnation(&self) -> usize {
        self.done.len()
    }

    /// The running leasehold's process id.
    pub fn pid(&self) -> Option<i32> {
        self.running.as_ref().map(|r| r.process.pid().as_raw())
    }

    /// Whether a process is running (paused or not).
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// Starts a process and waits until it answers `/healthz`.
    pub fn start(&mut self) -> anyhow::Result<()> {
        if self.running.is_some() {
            bail!("{} is already running", self.identity);
        }
        let mut last_error = None;
        for _ in 0..5 {
            match self.try_start() {
                Ok(running) => {
                    self.running = Some(running);
                    return Ok(());
                }
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("no attempt made")))
            .with_context(|| format!("{} did not start", self.identity))
    }

    fn try_start(&mut self) -> anyhow::Result<Running> {
        // Its stderr goes to the run's reader, not to `process`: the port is chosen here.
        let mut http = try_free_addr().context("no free loopback port")?;
        let number = self.done.len();
        let s = &self.settings;
        let url = s.redis_url.clone().unwrap_or_else(|| self.proxy.url());
        let mut run = RunCommand::new(&s.leasehold);
        if self.user.is_none() {
            run = run.redis_url(&url);
        }
        let mut cmd = run
            .lease(&s.lease)
            .identity(&self.identity)
            .http_addr(http)
            .args(["--grace-period", "500ms"])
            .timing(&s.timing)
            .args(&s.extra_args)
            .command(&s.child_command)
            .build();
        match s.postgres {
            Some(addr) => cmd.env(PG_ENV, addr.to_string()),
            None => cmd.env_remove(PG_ENV),
        };
        // A password goes in the environment, not on the command line.
        if let Some((user, password)) = &self.user {
            let at = url.strip_prefix("redis://").unwrap_or(&url);
            cmd.env(
                "LEASEHOLD_REDIS_URL",
                format!("redis://{user}:{password}@{at}"),
            );
        }
        cmd.env("RUST_LOG", "leasehold=debug")
            .env(RESOURCE_ENV, s.resource.to_string())
            .env(
                WRITE_INTERVAL_ENV,
                format!("{}ms", s.write_interval.as_millis()),
            )
            .env(PG_FENCING_ENV, if s.pg_fencing { "on" } else { "off" })
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let started = time::now();
        let mut process = Guarded::spawn_unread(cmd, &self.identity).with_context(|| {
            format!(
                "cannot start {} as {}",
                s.leasehold.display(),
                self.identity
            )
        })?;
        let stderr = process
            .take_stderr()
            .context("leasehold's stderr is not piped")?;
        let live = Arc::new(Mutex::new(Live::default()));
        let log_path = s.log_dir.join(format!("{}.log", self.identity));
        let header = format!(
            "# {} incarnation {} pid {} started {}",
            self.identity,
            number,
            process.pid(),
            started
        );
        let (done_tx, reader_done) = mpsc::channel();
        let reader = std::thread::Builder::new()
            .name(format!("log-{}-{}", self.identity, number))
            .spawn({
                let live = live.clone();
                move || {
                    read_logs(stderr, live, log_path, header);
                    let _ = done_tx.send(());
                }
            })
            .context("cannot start a log reader thread")?;
        let mut running = Running {
            process,
            number,
            started,
            live,
            reader: Some(reader),
            reader_done,
            paused: false,
        };
        match wait_healthy(&mut running.process, &mut http, Duration::from_secs(10)) {
            Ok(()) => Ok(running),
            Err(why) => {
                let end = match why {
                    NotStarted::Exited(_) => "exited at start (port taken?)",
                    NotStarted::Silent(_) => "never answered /healthz",
                };
                self.retire(running, time::now(), end);
                bail!("{} {why}", self.identity)
            }
        }
    }

    /// Moves a finished process into the history.
    fn retire(&mut self, mut running: Running, ended: Micros, end: &str) {
        running.process.kill();
        let mut notes = Vec::new();
        // The pipe closes once leasehold and its command are gone: the command dies with
        // leasehold (parent-death signal). A command that outlives it is a finding.
        if running
            .reader_done
            .recv_timeout(Duration::from_secs(3))
            .is_err()
        {
            let child = lock(&running.live).child;
            notes.push(format!(
                "the command (pid {child:?}) still held leasehold's stderr 3 s after leasehold was gone; the harness killed it"
            ));
            if let Some(pid) = child.and_then(|p| i32::try_from(p).ok()) {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
            }
            let _ = running.reader_done.recv_timeout(Duration::from_secs(3));
        }
        if let Some(reader) = running.reader.take()
            && reader.is_finished()
        {
            let _ = reader.join();
        }
        let live = std::mem::take(&mut *lock(&running.live));
        self.done.push(Incarnation {
            number: running.number,
            pid: running.process.pid().as_raw(),
            started: running.started,
            ended: Some(ended),
            end: end.to_owned(),
            events: live.events,
            stray_lines: live.stray_lines,
            notes,
        });
    }

    /// SIGKILL the process; returns its incarnation number and when.
    pub fn kill(&mut self) -> anyhow::Result<(usize, Micros)> {
        let running = self
            .running
            .take()
            .with_context(|| format!("{} is not running", self.identity))?;
        let number = running.number;
        let _ = running.process.signal(Signal::SIGKILL);
        let at = time::now();
        self.retire(running, at, "SIGKILL");
        Ok((number, at))
    }

    /// SIGTERM, and wait for a graceful exit (SIGKILL after `timeout`); returns the
    /// incarnation number, when the signal went out, and whether it exited in time.
    pub fn terminate(&mut self, timeout: Duration) -> anyhow::Result<(usize, Micros, bool)> {
        let mut running = self
            .running
            .take()
            .with_context(|| format!("{} is not running", self.identity))?;
        let number = running.number;
        let at = time::now();
        running
            .process
            .signal(Signal::SIGTERM)
            .with_context(|| format!("cannot SIGTERM {}", self.identity))?;
        let exited = matches!(running.process.wait_exit(timeout), Ok(Some(_)));
        let ended = time::now();
        let end = if exited {
            "SIGTERM, exited"
        } else {
            "SIGTERM, did not exit in time: SIGKILL"
        };
        self.retire(running, ended, end);
        Ok((number, at, exited))
    }

    /// SIGSTOP or SIGCONT leasehold (not its command); returns the incarnation and when.
    pub fn pause(&mut self, stop: bool) -> anyhow::Result<(usize, Micros)> {
        let running = self
            .running
            .as_mut()
            .with_context(|| format!("{} is not running", self.identity))?;
        let signal = if stop {
            Signal::SIGSTOP
        } else {
            Signal::SIGCONT
        };
        running
            .process
            .signal(signal)
            .with_context(|| format!("cannot send {signal} to {}", self.identity))?;
        running.paused = stop;
        Ok((running.number, time::now()))
    }

    /// The token of the term this replica leads now, by its log: a validity deadline still
    /// ahead, the process running and not paused, and the lease proven (acquired or renewed)
    /// at or after `since`.
    pub fn leading(&self, now: Micros, since: Micros) -> Option<u64> {
        let running = self.running.as_ref()?;
        if running.paused {
            return None;
        }
        let (token, deadline, proven) = lock(&running.live).leading?;
        (now < deadline && proven >= since).then_some(token)
    }

    /// The current command's process id, checked to be a child of this replica's leasehold.
    pub fn child_pid(&self) -> Option<u32> {
        let running = self.running.as_ref()?;
        let pid = lock(&running.live).child?;
        let parent = u32::try_from(running.process.pid().as_raw()).ok()?;
        let leaseholds = |p: Proc| u32::try_from(p.ppid).ok() == Some(parent);
        stat(i32::try_from(pid).ok()?)
            .is_some_and(leaseholds)
            .then_some(pid)
    }

    /// The timing its processes start with.
    pub fn timing(&self) -> Timing {
        self.settings.timing
    }

    /// Gives the processes started from now on another timing (the running one keeps its own).
    pub fn set_timing(&mut self, timing: Timing) {
        self.settings.timing = timing;
    }

    /// The running process's events logged at or after `since`.
    pub fn events_since(&self, since: Micros) -> Vec<LogEvent> {
        let Some(running) = self.running.as_ref() else {
            return Vec::new();
        };
        let live = lock(&running.live);
        let from = live.events.partition_point(|e| e.at < since);
        live.events[from..].to_vec()
    }

    /// Whether the process exited on its own (then it is retired and can be started again).
    pub fn reap_if_exited(&mut self) -> bool {
        let exited = self
            .running
            .as_mut()
            .is_some_and(|r| exited(&mut r.process));
        if exited && let Some(running) = self.running.take() {
            self.retire(running, time::now(), "exited on its own");
        }
        exited
    }

    /// Stops the process (gracefully) and returns every incarnation's history.
    pub fn finish(mut self, timeout: Duration) -> Vec<Incarnation> {
        if self.running.is_some() {
            if let Some(r) = self.running.as_mut()
                && r.paused
            {
                let _ = r.process.signal(Signal::SIGCONT);
            }
            let _ = self.terminate(timeout);
        }
        std::mem::take(&mut self.done)
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(mut running) = self.running.take() {
            running.process.kill();
        }
    }
}
