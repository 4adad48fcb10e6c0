//! Watching processes from the outside through `/proc`: whether each still runs, which
//! processes a parent has (and which are zombies), the pids a command writes to a file, and a
//! pid file that kills whatever a failing test left running.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// One process as `/proc/PID/stat` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proc {
    pub pid: i32,
    pub state: char,
    pub ppid: i32,
    pub pgid: i32,
    pub sid: i32,
}

/// `/proc/PID/stat` of `pid`, or `None` when there is no such process.
pub fn stat(pid: i32) -> Option<Proc> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the fields start after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgid = fields.next()?.parse().ok()?;
    let sid = fields.next()?.parse().ok()?;
    Some(Proc {
        pid,
        state,
        ppid,
        pgid,
        sid,
    })
}

/// Whether `pid` runs (exists and is not a zombie).
pub fn is_running(pid: i32) -> bool {
    stat(pid).is_some_and(|p| p.state != 'Z' && p.state != 'X')
}

/// Whether `pid` is gone altogether: `kill(pid, 0)` answers ESRCH (dead and reaped).
pub fn is_gone(pid: i32) -> bool {
    kill(Pid::from_raw(pid), None) == Err(Errno::ESRCH)
}

/// Every process whose parent is `parent`.
pub fn children_of(parent: i32) -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(stat)
        .filter(|p| p.ppid == parent)
        .collect()
}

/// The zombies among `parent`'s children.
pub fn zombie_children_of(parent: i32) -> Vec<i32> {
    children_of(parent)
        .into_iter()
        .filter(|p| p.state == 'Z')
        .map(|p| p.pid)
        .collect()
}

/// The pids written to `path`, one a line.
pub fn pids_in(path: &Path) -> Vec<i32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Waits until `path` holds at least `count` pids; panics after `timeout`.
pub fn wait_pids(path: &Path, count: usize, timeout: Duration) -> Vec<i32> {
    let deadline = Instant::now() + timeout;
    loop {
        let pids = pids_in(path);
        if pids.len() >= count {
            return pids;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {count} pids in {}: {pids:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A temporary directory with a pid file the command appends to (`$PIDS`). Dropping it
/// SIGKILLs every listed process that still runs and carries this pid file in its
/// environment, so that a failing test leaves nothing behind (and never hits a stranger that
/// got a recycled pid).
pub struct PidFile {
    dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl Default for PidFile {
    fn default() -> Self {
        Self::new()
    }
}

impl PidFile {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("pids");
        Self { dir, path }
    }

    /// Another file in the same directory.
    pub fn sibling(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `("PIDS", path)` for the command's environment.
    pub fn env(&self) -> (&'static str, String) {
        ("PIDS", self.path.to_str().expect("utf-8 path").to_owned())
    }

    pub fn pids(&self) -> Vec<i32> {
        pids_in(&self.path)
    }

    fn carries_this_file(&self, pid: i32) -> bool {
        let marker = format!("PIDS={}", self.path.display());
        std::fs::read(format!("/proc/{pid}/environ"))
            .map(|env| env.split(|b| *b == 0).any(|v| v == marker.as_bytes()))
            .unwrap_or(false)
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        for pid in self.pids() {
            if is_running(pid) && self.carries_this_file(pid) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }
}
