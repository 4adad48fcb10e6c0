//! Child processes of the harness: `leasehold run` replicas (JSON logs collected, HTTP on a
//! free port) and this harness re-run as a paused-leader child. Each is a guard: dropping it
//! kills the process (SIGCONT first, in case it is frozen) and reaps it, so a panic or an early
//! return leaves nothing behind. They also get SIGKILL from the kernel if the harness dies.

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, bail};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Lines of a child's output stream, collected on a thread.
#[derive(Clone, Default)]
pub struct Lines(Arc<Mutex<Vec<String>>>);

impl Lines {
    fn collect(stream: impl Read + Send + 'static) -> Self {
        let lines = Self::default();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                sink.lock().push(line);
            }
        });
        lines
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn snapshot(&self) -> Vec<String> {
        self.lock().clone()
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// The first line from index `from` on for which `pick` gives a value.
    pub fn find_from<T>(&self, from: usize, pick: &mut impl FnMut(&str) -> Option<T>) -> Option<T> {
        self.lock().iter().skip(from).find_map(|l| pick(l))
    }

    /// Waits (polling every millisecond) for a line from `from` on that `pick` accepts.
    pub async fn wait_from<T>(
        &self,
        from: usize,
        what: &str,
        within: Duration,
        mut pick: impl FnMut(&str) -> Option<T>,
    ) -> Result<T> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(v) = self.find_from(from, &mut pick) {
                return Ok(v);
            }
            if Instant::now() >= deadline {
                let tail: Vec<String> = self.snapshot().into_iter().rev().take(10).collect();
                bail!(
                    "timed out after {within:?} waiting for {what}; last lines (newest first):\n{}",
                    tail.join("\n")
                );
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// A free TCP port on 127.0.0.1 (bound, read, closed; a child may still lose the race).
pub fn free_port() -> Result<u16> {
    let listener =
        TcpListener::bind("127.0.0.1:0").context("bind 127.0.0.1:0 to find a free port")?;
    Ok(listener.local_addr().context("read the bound port")?.port())
}

/// Asks the kernel to SIGKILL the child when the harness dies, whatever way it dies.
fn die_with_parent(cmd: &mut Command) {
    // SAFETY: the closure runs in the forked child before exec and only calls prctl(2), which
    // is async-signal-safe; it touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)
        });
    }
}

/// A guard around any child process: SIGCONT + SIGKILL + reap on drop.
pub struct Proc {
    child: Child,
    pub stdout: Lines,
    pub stderr: Lines,
    exited: Option<i32>,
}

impl Proc {
    fn spawn(mut cmd: Command, what: &str) -> Result<Self> {
        die_with_parent(&mut cmd);
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("start {what}"))?;
        let stdout = Lines::collect(child.stdout.take().context("child stdout")?);
        let stderr = Lines::collect(child.stderr.take().context("child stderr")?);
        Ok(Self {
            child,
            stdout,
            stderr,
            exited: None,
        })
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }

    pub fn signal(&self, signal: Signal) -> Result<()> {
        kill(self.pid(), signal).with_context(|| format!("send {signal} to {}", self.pid()))
    }

    /// The exit code once the process has exited (`-1` for a signal), without waiting.
    pub fn try_exit(&mut self) -> Result<Option<i32>> {
        if self.exited.is_none()
            && let Some(status) = self.child.try_wait().context("poll a child's exit")?
        {
            self.exited = Some(status.code().unwrap_or(-1));
        }
        Ok(self.exited)
    }

    /// Waits for the process to exit; its code.
    pub async fn wait_exit(&mut self, within: Duration) -> Result<i32> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(code) = self.try_exit()? {
                return Ok(code);
            }
            if Instant::now() >= deadline {
                bail!("process {} did not exit within {within:?}", self.pid());
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.exited.is_none() {
            let _ = kill(self.pid(), Signal::SIGCONT);
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Timing flags of `leasehold run`.
pub fn timing_args(t: &leasehold::elector::Timing) -> Vec<String> {
    vec![
        "--lease-duration".into(),
        format!("{}ms", t.lease_duration.as_millis()),
        "--renew-deadline".into(),
        format!("{}ms", t.renew_deadline.as_millis()),
        "--retry-period".into(),
        format!("{}ms", t.retry_period.as_millis()),
    ]
}

/// One `leasehold run` replica: Kubernetes off, JSON logs, HTTP on a free port of 127.0.0.1,
/// no data-loss cooldown (every benchmark Redis is fresh).
pub struct Replica {
    pub identity: String,
    pub http: SocketAddr,
    pub proc: Proc,
}

impl Replica {
    pub async fn spawn(
        bin: &Path,
        url: &str,
        lease: &str,
        identity: &str,
        timing: &leasehold::elector::Timing,
    ) -> Result<Self> {
        let mut last_error = None;
        for _ in 0..5 {
            let http = SocketAddr::from(([127, 0, 0, 1], free_port()?));
            let mut cmd = Command::new(bin);
            cmd.arg("run")
                .args([
                    "--redis-url",
                    url,
                    "--lease-name",
                    lease,
                    "--identity",
                    identity,
                ])
                .args([
                    "--kubernetes",
                    "off",
                    "--log-format",
                    "json",
                    "--log",
                    "info",
                ])
                .args(["--http-addr", &http.to_string(), "--no-data-loss-cooldown"])
                .args(timing_args(timing))
                .env_remove("POD_NAME")
                .env_remove("POD_NAMESPACE")
                .env_remove("RUST_LOG");
            for (key, _) in std::env::vars_os() {
                if key.to_string_lossy().starts_with("LEASEHOLD_") {
                    cmd.env_remove(key);
                }
            }
            let mut replica = Self {
                identity: identity.to_owned(),
                http,
                proc: Proc::spawn(cmd, &format!("{} run", bin.display()))?,
            };
            match replica.await_started().await {
                Ok(()) => return Ok(replica),
                Err(err) => last_error = Some(err),
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("no attempt made")))
            .with_context(|| format!("leasehold replica {identity} did not start"))
    }

    /// Waits for `leasehold starting` (its HTTP port is bound by then); fails fast when the
    /// process exits (a lost race for the port).
    async fn await_started(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if self.event_time(0, "leasehold starting").is_some() {
                return Ok(());
            }
            if let Some(code) = self.proc.try_exit()? {
                bail!(
                    "exited with code {code}:\n{}",
                    self.proc.stderr.snapshot().join("\n")
                );
            }
            if Instant::now() >= deadline {
                bail!("no `leasehold starting` line within 15 s");
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// The wall-clock time of the first log event `message` from line `from` on.
    pub fn event_time(&self, from: usize, message: &str) -> Option<SystemTime> {
        self.proc
            .stderr
            .find_from(from, &mut |line| event_at(line, message, None))
    }

    /// Waits for log event `message` (with `field` equal to a value, when given) from line
    /// `from` on; its wall-clock timestamp.
    pub async fn wait_event(
        &self,
        from: usize,
        message: &str,
        field: Option<(&str, &str)>,
        within: Duration,
    ) -> Result<SystemTime> {
        let what = format!("`{message}` from {}", self.identity);
        self.proc
            .stderr
            .wait_from(from, &what, within, |line| event_at(line, message, field))
            .await
    }

    pub fn log_len(&self) -> usize {
        self.proc.stderr.len()
    }

    /// `/leader` as JSON.
    pub fn leader_view(&self) -> Option<serde_json::Value> {
        let (code, body) = http_get(self.http, "/leader")?;
        (code == 200).then(|| serde_json::from_str(&body).ok())?
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
    humantime::parse_rfc3339(v["timestamp"].as_str()?).ok()
}

/// The harness itself as a child process with `args` (the paused-leader mode).
pub fn spawn_self(args: &[String]) -> Result<Proc> {
    let exe = std::env::current_exe().context("find the harness's own executable")?;
    let mut cmd = Command::new(&exe);
    cmd.args(args);
    Proc::spawn(cmd, &exe.display().to_string())
}

pub use crate::http_get::http_get;
