//! Watching processes from the outside through `/proc`: whether each still runs, the files it
//! holds open, which processes a parent has (and which are zombies), the pids a command writes
//! to a file, and a pid file that kills whatever a failing test left running.

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
    /// CPU time in user and kernel mode, in clock ticks (`USER_HZ`, 100 a second on Linux).
    pub utime: u64,
    pub stime: u64,
    /// The same for the children it waited for.
    pub cutime: u64,
    pub cstime: u64,
}

/// `/proc/PID/stat` of `pid`, or `None` when there is no such process.
pub fn stat(pid: i32) -> Option<Proc> {
    // Not `read_to_string`: the kernel cuts a name to 15 bytes, which can split a character.
    let bytes = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(pid, &String::from_utf8_lossy(&bytes))
}

/// `/proc/self/stat`: this process.
pub fn own_stat() -> Option<Proc> {
    stat(i32::try_from(std::process::id()).ok()?)
}

/// The text of `/proc/PID/stat` as a [`Proc`].
fn parse_stat(pid: i32, text: &str) -> Option<Proc> {
    // The command name may hold spaces and parentheses: the fields start after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let number = |i: usize| fields.get(i)?.parse().ok();
    let ticks = |i: usize| fields.get(i)?.parse().ok();
    Some(Proc {
        pid,
        state: fields.first()?.chars().next()?,
        ppid: number(1)?,
        pgid: number(2)?,
        sid: number(3)?,
        // Fields 14 to 17 of proc(5); the state is field 3.
        utime: ticks(11)?,
        stime: ticks(12)?,
        cutime: ticks(13)?,
        cstime: ticks(14)?,
    })
}

/// How many files `pid` holds open (the entries of `/proc/PID/fd`), or `None` when there is no
/// such process or its files cannot be listed.
pub fn open_files(pid: i32) -> Option<usize> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

/// Whether `pid` runs (exists and is not a zombie).
pub fn is_running(pid: i32) -> bool {
    stat(pid).is_some_and(|p| p.state != 'Z' && p.state != 'X')
}

/// Whether every thread of `pid` is stopped (by `SIGSTOP`): the signal is delivered to each
/// thread in its own time, and one still running may act after `kill` returned.
pub fn is_stopped(pid: i32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|task| {
        std::fs::read(task.path().join("stat"))
            .ok()
            .and_then(|bytes| parse_stat(pid, &String::from_utf8_lossy(&bytes)))
            .is_some_and(|t| t.state == 'T')
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_name_with_spaces_and_parentheses_is_skipped() {
        let text = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 2 1 20 0 1 0 5 0 0";
        let p = parse_stat(42, text).expect("parses");
        assert_eq!((p.state, p.ppid, p.pgid, p.sid), ('S', 1, 42, 42));
        assert_eq!((p.utime, p.stime, p.cutime, p.cstime), (7, 3, 2, 1));
    }

    #[test]
    fn this_process_reads_as_running() {
        let me = own_stat().expect("/proc/self/stat");
        assert!(is_running(me.pid));
    }
}
