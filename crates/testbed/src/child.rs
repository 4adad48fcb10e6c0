//! A guarded child process: the kernel kills it when the thread that spawned it ends (the
//! parent-death signal), dropping the guard kills and reaps it, and its stdout and stderr are
//! collected line by line. A panicking test prints what it wrote.
//!
//! Linux sends the parent-death signal when the spawning *thread* ends, not the process: spawn
//! from a thread that outlives the child (a test's own thread, a runtime's worker, or
//! `tokio::task::block_in_place`), never from `spawn_blocking`, whose idle threads exit.

use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// How long a process that exited is given for the rest of its output to be read: its pipes
/// end at once unless a process it left behind holds them open.
const READ_REST: Duration = Duration::from_millis(500);

/// The lines of an output stream, collected on a thread as they arrive.
#[derive(Debug, Clone, Default)]
pub struct Lines {
    lines: Arc<Mutex<Vec<String>>>,
    /// Whether the reader reached the end of the stream; `None` when nothing reads one.
    end: Option<Arc<(Mutex<bool>, Condvar)>>,
}

impl Lines {
    /// Reads `stream` to its end on a new thread.
    pub fn collect(stream: impl Read + Send + 'static) -> Self {
        let end = Arc::new((Mutex::new(false), Condvar::new()));
        let lines = Self {
            lines: Arc::default(),
            end: Some(end.clone()),
        };
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                sink.lock().push(line);
            }
            let (ended, cv) = &*end;
            *ended.lock().unwrap_or_else(PoisonError::into_inner) = true;
            cv.notify_all();
        });
        lines
    }

    /// Waits up to `within` for the reader to reach the end of the stream (every line the
    /// writers wrote is in); whether it did. `true` at once when nothing reads a stream.
    pub fn wait_end(&self, within: Duration) -> bool {
        let Some(end) = &self.end else {
            return true;
        };
        let (ended, cv) = &**end;
        let guard = ended.lock().unwrap_or_else(PoisonError::into_inner);
        let (guard, _) = cv
            .wait_timeout_while(guard, within, |ended| !*ended)
            .unwrap_or_else(PoisonError::into_inner);
        *guard
    }

    fn lock(&self) -> MutexGuard<'_, Vec<String>> {
        self.lines.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every line so far.
    pub fn snapshot(&self) -> Vec<String> {
        self.lock().clone()
    }

    /// Every line so far, joined by newlines.
    pub fn text(&self) -> String {
        self.lock().join("\n")
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// The first value `pick` gives for a line from index `from` on.
    pub fn find_from<T>(&self, from: usize, mut pick: impl FnMut(&str) -> Option<T>) -> Option<T> {
        self.lock().iter().skip(from).find_map(|l| pick(l))
    }

    /// Waits (polling every 5 ms) for a line from index `from` on that `pick` accepts; panics
    /// after `within`, naming `what` and showing the lines so far.
    pub fn wait_from<T>(
        &self,
        from: usize,
        what: &str,
        within: Duration,
        mut pick: impl FnMut(&str) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + within;
        loop {
            if let Some(v) = self.find_from(from, &mut pick) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "timed out after {within:?} waiting for {what}; lines so far:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// A child process that cannot outlive its guard (nor, through the parent-death signal, the
/// thread that spawned it).
pub struct Guarded {
    child: Child,
    name: String,
    /// What the process wrote to its stdout.
    pub stdout: Lines,
    /// What the process wrote to its stderr.
    pub stderr: Lines,
    exited: Option<i32>,
}

impl Guarded {
    /// Spawns `cmd` with stdin from /dev/null and stdout and stderr collected; `name` labels
    /// errors and the output printed when a test panics.
    pub fn spawn(mut cmd: Command, name: &str) -> io::Result<Self> {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut guarded = Self::spawn_unread(cmd, name)?;
        guarded.stdout = guarded
            .child
            .stdout
            .take()
            .map(Lines::collect)
            .unwrap_or_default();
        guarded.stderr = guarded
            .child
            .stderr
            .take()
            .map(Lines::collect)
            .unwrap_or_default();
        Ok(guarded)
    }

    /// Spawns `cmd` with the stdin, stdout and stderr it sets, collecting nothing: a caller
    /// that pipes stderr reads it itself ([`take_stderr`](Self::take_stderr)).
    pub fn spawn_unread(mut cmd: Command, name: &str) -> io::Result<Self> {
        // SAFETY: the closure runs in the forked child before exec and only calls prctl(2),
        // which is async-signal-safe; it touches no memory of the parent.
        unsafe {
            cmd.pre_exec(|| {
                nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(io::Error::from)
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("start {name}: {e}")))?;
        Ok(Self {
            child,
            name: name.to_owned(),
            stdout: Lines::default(),
            stderr: Lines::default(),
            exited: None,
        })
    }

    /// The read end of the process's stderr, when it was piped and not collected.
    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.child.stderr.take()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }

    /// Sends `signal` to the process; `ESRCH` once it has been reaped (its pid may be another
    /// process's by then).
    pub fn signal(&self, signal: Signal) -> nix::Result<()> {
        if self.exited.is_some() {
            return Err(nix::errno::Errno::ESRCH);
        }
        kill(self.pid(), signal)
    }

    /// The exit code once the process has exited (`-1` for a signal), without waiting for the
    /// exit. The first time it sees the exit, it lets the readers take in the rest of the
    /// output (for at most `READ_REST`), so that what the process wrote before it exited is
    /// in [`stdout`](Self::stdout) and [`stderr`](Self::stderr) when this returns.
    pub fn try_exit(&mut self) -> io::Result<Option<i32>> {
        if self.exited.is_none()
            && let Some(status) = self.child.try_wait()?
        {
            self.exited = Some(status.code().unwrap_or(-1));
            let until = Instant::now() + READ_REST;
            for lines in [&self.stdout, &self.stderr] {
                lines.wait_end(until.saturating_duration_since(Instant::now()));
            }
        }
        Ok(self.exited)
    }

    /// Waits up to `within` (polling every 5 ms) for the process to exit: its exit code, or
    /// `None` while it still runs.
    pub fn wait_exit(&mut self, within: Duration) -> io::Result<Option<i32>> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(code) = self.try_exit()? {
                return Ok(Some(code));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Whether the process has not exited yet.
    pub fn is_running(&mut self) -> bool {
        matches!(self.try_exit(), Ok(None))
    }

    /// SIGCONT (a stopped process cannot die), SIGKILL, and reap.
    pub fn kill(&mut self) {
        if self.exited.is_none() {
            let _ = kill(self.pid(), Signal::SIGCONT);
            let _ = self.child.kill();
        }
        if let Ok(status) = self.child.wait() {
            self.exited.get_or_insert(status.code().unwrap_or(-1));
        }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            for (stream, lines) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
                if !lines.is_empty() {
                    eprintln!("---- {} {stream} ----\n{}", self.name, lines.text());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Guarded {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script]);
        Guarded::spawn(cmd, "sh").expect("spawn sh")
    }

    #[test]
    fn once_the_exit_is_seen_every_line_written_before_it_is_in() {
        // A pipe's worth of lines on each stream at the very end: the readers are behind when
        // the exit is seen, which a spinning caller sees at once.
        let mut child = sh("seq 10000; seq 10000 >&2");
        let code = loop {
            if let Some(code) = child.try_exit().unwrap() {
                break code;
            }
        };
        assert_eq!(code, 0);
        assert_eq!((child.stdout.len(), child.stderr.len()), (10000, 10000));
    }

    #[test]
    fn a_process_left_holding_the_output_delays_the_exit_by_at_most_the_bound() {
        let mut child = sh("echo before; sleep 5 & exit 3");
        let started = Instant::now();
        assert_eq!(child.wait_exit(Duration::from_secs(10)).unwrap(), Some(3));
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "{:?}",
            started.elapsed()
        );
        assert!(
            !child.stdout.wait_end(Duration::ZERO),
            "the sleep still holds stdout"
        );
        assert_eq!(child.stdout.snapshot(), ["before"]);
        assert!(
            Lines::default().wait_end(Duration::ZERO),
            "nothing reads it"
        );
    }
}
