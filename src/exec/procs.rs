//! The processes under this one as `/proc` shows them: a process's stat line, and a walk of
//! this process's own subtree (`/proc/<pid>/task/<tid>/children`, from this process down),
//! never the whole machine where the kernel has the children files; all of `/proc` where it
//! has not. Each file is read in as few system calls as it takes: a stop walks the tree on the
//! path to the release.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::sync::OnceLock;

/// A process, told apart from a later one with the same pid by its start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ProcId {
    pub pid: i32,
    /// Clock ticks after boot (`/proc/PID/stat`, field 22).
    pub start: u64,
}

/// One process as `/proc/PID/stat` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Proc {
    pub id: ProcId,
    pub ppid: i32,
    pub pgid: i32,
    pub state: char,
    /// Threads (field 20): a zombie thread-group leader whose other threads still run has
    /// more than one, and children under them.
    pub threads: u32,
}

impl Proc {
    /// Not yet dead: a zombie has exited and can do nothing more.
    pub fn is_alive(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }

    pub fn is_zombie(&self) -> bool {
        self.state == 'Z'
    }

    /// Whether it may have children: not once it has exited with all its threads, for an
    /// exiting process hands its children to this process before it shows as a zombie.
    fn may_have_children(&self) -> bool {
        self.is_alive() || self.threads > 1
    }
}

/// Parses the text of `/proc/PID/stat`.
fn parse_stat(text: &str) -> Option<Proc> {
    // The command name is in parentheses and may hold spaces and parentheses itself.
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let pid = text.get(..open)?.trim().parse().ok()?;
    let fields: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // After the name: state (3), ppid (4), pgrp (5) … num_threads (20) … starttime (22).
    Some(Proc {
        id: ProcId {
            pid,
            start: fields.get(19)?.parse().ok()?,
        },
        ppid: fields.get(1)?.parse().ok()?,
        pgid: fields.get(2)?.parse().ok()?,
        state: fields.first()?.chars().next()?,
        threads: fields.get(17)?.parse().ok()?,
    })
}

/// The text of a small `/proc` file in as few system calls as it takes: open, one read (more
/// only while reads fill the buffer), close, where `read_to_string` adds a stat and grows its
/// buffer read by read. A read that does not fill the buffer is the end: these files are
/// produced whole, record by record, into the reader's buffer.
fn read_proc_file(path: &str) -> Option<String> {
    let mut file = std::fs::File::open(path).ok()?;
    let mut buf = vec![0u8; 512];
    let mut len = 0;
    loop {
        let n = file.read(&mut buf[len..]).ok()?;
        len += n;
        if n == 0 || len < buf.len() {
            break;
        }
        buf.resize(buf.len() * 2, 0);
    }
    buf.truncate(len);
    // Not `from_utf8`: the kernel cuts a process's name to 15 bytes, which can split a
    // character, and a process may name itself any bytes; such a process is still one to stop.
    Some(
        String::from_utf8(buf)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
    )
}

/// `pid` as `/proc` shows it now, or `None` once it is gone.
pub(crate) fn read_proc(pid: i32) -> Option<Proc> {
    parse_stat(&read_proc_file(&format!("/proc/{pid}/stat"))?)
}

/// The children of every thread of `pid` (`/proc/<pid>/task/<tid>/children`), or `None` when the
/// process has no children file to read (gone, or a kernel without them).
fn children_of_process(pid: i32) -> Option<Vec<i32>> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut read_any = false;
    let mut children = Vec::new();
    for task in tasks.flatten() {
        let path = task.path().join("children");
        if let Some(text) = path.to_str().and_then(read_proc_file) {
            read_any = true;
            children.extend(
                text.split_whitespace()
                    .filter_map(|c| c.parse::<i32>().ok()),
            );
        }
    }
    read_any.then_some(children)
}

/// Every process of this PID namespace, read from `/proc` at one moment (as far as a
/// directory walk can be one moment).
#[derive(Debug, Default)]
pub(crate) struct Table {
    procs: HashMap<i32, Proc>,
    children: HashMap<i32, Vec<i32>>,
}

impl Table {
    pub fn scan() -> Self {
        let mut table = Self::default();
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return table;
        };
        for entry in dir.flatten() {
            let pid = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok());
            if let Some(proc) = pid.and_then(read_proc) {
                table.insert(proc);
            }
        }
        table
    }

    /// This process's descendants (itself not included), walked down from it through the
    /// children files ([`scan`](Self::scan) where the kernel has none), given the exited
    /// processes that earlier walks saw ([`Family::walk`] keeps them).
    ///
    /// A process that exits hands its children to this process before it shows as a zombie. A
    /// walk that read this process's children before that move and the exited one's after it
    /// misses them (they are in neither list it read). So whenever a walk shows an exited
    /// process not seen exited before (by this call or an earlier one, as `exited` says), it
    /// walks again: that walk starts after the move. One seen exited by an earlier walk moved
    /// its children before this call began.
    pub(super) fn descendants_after(exited: &mut HashSet<ProcId>) -> Self {
        let me = std::process::id() as i32;
        // Asked once: whether this kernel has the children files.
        static CHILDREN_FILES: OnceLock<bool> = OnceLock::new();
        if !*CHILDREN_FILES.get_or_init(|| children_of_process(me).is_some()) {
            return Self::scan();
        }
        loop {
            let table = Self::walk_from(me);
            let now_exited: HashSet<ProcId> = table
                .all()
                .filter(|p| !p.is_alive())
                .map(|p| p.id)
                .collect();
            if now_exited.is_subset(exited) {
                // Forget the reaped: only what this walk still shows.
                exited.retain(|id| now_exited.contains(id));
                return table;
            }
            exited.extend(now_exited);
        }
    }

    /// One walk down from `me` through the children files.
    fn walk_from(me: i32) -> Self {
        let mut table = Self::default();
        let mut stack = children_of_process(me).unwrap_or_default();
        let mut seen = HashSet::new();
        while let Some(pid) = stack.pop() {
            if pid == me || !seen.insert(pid) {
                continue;
            }
            // Gone since its parent listed it: nothing below it either (its children went to
            // this process, which the next walk reads).
            let Some(proc) = read_proc(pid) else {
                continue;
            };
            table.insert(proc);
            if proc.may_have_children() {
                stack.extend(children_of_process(pid).into_iter().flatten());
            }
        }
        table
    }

    pub(super) fn insert(&mut self, proc: Proc) {
        self.children
            .entry(proc.ppid)
            .or_default()
            .push(proc.id.pid);
        self.procs.insert(proc.id.pid, proc);
    }

    pub fn children_of(&self, pid: i32) -> impl Iterator<Item = &Proc> {
        self.children
            .get(&pid)
            .into_iter()
            .flatten()
            .filter_map(|c| self.procs.get(c))
    }

    pub(super) fn all(&self) -> impl Iterator<Item = &Proc> {
        self.procs.values()
    }
}

#[cfg(test)]
mod tests {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    use super::*;

    #[test]
    fn stat_lines_parse_with_odd_command_names() {
        let rows = [
            (
                "4242 (sleep) S 4000 4242 4000 0 -1 4194560 91 0 0 0 0 0 0 0 20 0 1 0 777 2 3",
                Some((4242, 'S', 4000, 4242, 777, 1)),
            ),
            (
                "17 (a b) (c)) Z 1 17 17 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99 0 0",
                Some((17, 'Z', 1, 17, 99, 1)),
            ),
            // A thread-group leader that exited while another thread runs on.
            (
                "18 (worker) Z 1 18 18 0 -1 0 0 0 0 0 0 0 0 0 20 0 2 0 99 0 0",
                Some((18, 'Z', 1, 18, 99, 2)),
            ),
            ("17 (short) S 1 17", None),
            ("", None),
        ];
        for (line, want) in rows {
            let got = parse_stat(line)
                .map(|p| (p.id.pid, p.state, p.ppid, p.pgid, p.id.start, p.threads));
            assert_eq!(got, want, "{line:?}");
        }
    }

    #[test]
    fn this_process_is_in_the_table_with_its_parent() {
        let table = Table::scan();
        let me = std::process::id() as i32;
        let proc = table.all().find(|p| p.id.pid == me).expect("this process");
        assert!(proc.is_alive());
        assert_eq!(proc.ppid, nix::unistd::getppid().as_raw());
        assert!(table.children_of(proc.ppid).any(|p| p.id.pid == me));
    }

    #[test]
    fn the_walk_finds_this_processs_children_and_theirs_and_nothing_else() {
        // A shell under this process that starts a sleep: both found, and every process found
        // descends from this process.
        let mut shell = std::process::Command::new("sh")
            .args(["-c", "sleep 5 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("sh");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(shell.stdout.take().expect("stdout")),
            &mut line,
        )
        .expect("the sleep's pid");
        let sleep: i32 = line.trim().parse().expect("a pid");
        let table = Table::descendants_after(&mut HashSet::new());
        let found: HashSet<i32> = table.all().map(|p| p.id.pid).collect();
        assert!(found.contains(&(shell.id() as i32)), "{found:?}");
        assert!(found.contains(&sleep), "{found:?}");
        let me = std::process::id() as i32;
        let full = Table::scan();
        for pid in &found {
            let mut at = *pid;
            while at != me {
                at = full.procs.get(&at).map_or(me, |p| p.ppid);
                assert_ne!(at, 1, "{pid} does not descend from this process");
            }
        }
        let _ = kill(Pid::from_raw(sleep), Signal::SIGKILL);
        let _ = shell.kill();
        let _ = shell.wait();
    }
}
