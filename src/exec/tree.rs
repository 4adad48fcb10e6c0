//! The command's processes: its process group, every descendant, and the orphans re-parented
//! to this process (a child subreaper), found in `/proc`; and signalling all of them.
//!
//! Only this process's own subtree is read (`/proc/<pid>/task/<tid>/children`, from this process
//! down), never the whole machine: as a child subreaper, every live process of the command is
//! this process's child or below one (an orphan comes here, also one that called `setsid`, and a
//! process group's members descend from its leader), so the walk costs what the command's tree
//! holds. Where the kernel has no children files, all of `/proc` is read instead.
//!
//! A process counts as the command's when it descends from one of this process's children
//! that the supervisor knows for the command's: a command it started, a process it saw in the
//! command's tree before, a member of a command's process group, or one that carries the
//! command's environment (`LEASEHOLD_LEASE` and `LEASEHOLD_IDENTITY` of this supervisor). With
//! [`Family::owns_every_orphan`], also every child outside this process's own process group
//! and outside the groups of leasehold's own helpers (a candidate check's, [`helper_groups`]),
//! unless it carries a helper's environment (one that left its helper's group).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use leasehold_core::locked::locked;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use super::procs::{Proc, ProcId, Table};

/// The process groups that leasehold's own helpers lead (a candidate check's shell and what it
/// started), never a command's: from their spawn (under this lock) until they are reaped. Taken
/// last, after any other lock.
static HELPER_GROUPS: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// The helpers' process groups ([`HELPER_GROUPS`]).
pub(crate) fn helper_groups() -> MutexGuard<'static, BTreeSet<i32>> {
    locked(&HELPER_GROUPS)
}

/// Which processes are one supervisor's commands'. Remembers what it has seen, so that an
/// orphan stays the command's after its parent is gone.
#[derive(Debug)]
pub(crate) struct Family {
    me: i32,
    my_group: i32,
    /// `LEASEHOLD_LEASE=…` and `LEASEHOLD_IDENTITY=…` of this supervisor.
    marker: [Vec<u8>; 2],
    /// `LEASEHOLD_CHECK_OF=<this pid>`, which this process's helpers carry.
    helper: Vec<u8>,
    /// Processes seen as a helper's ([`note_helpers`](Self::note_helpers)), while they exist.
    helpers: HashSet<ProcId>,
    every_orphan: bool,
    /// Process groups of the commands started, while they have members (zombies too).
    groups: HashSet<i32>,
    /// Every process seen as the commands', while it exists.
    known: HashSet<ProcId>,
    /// The exited processes (zombies) the last walk showed: a later walk need not walk twice
    /// for them ([`Table::descendants_after`]).
    exited: HashSet<ProcId>,
    /// A stop is under way: it walks the tree and reaps at its end, so the reaper need not
    /// (shared with the reaper, which reads it before it hands a pass to a thread).
    stopping: Arc<AtomicBool>,
}

impl Family {
    pub fn new(lease: &str, identity: &str) -> Self {
        Self {
            me: std::process::id() as i32,
            my_group: nix::unistd::getpgrp().as_raw(),
            marker: [
                format!("{}={lease}", super::LEASE_ENV).into_bytes(),
                format!("{}={identity}", super::IDENTITY_ENV).into_bytes(),
            ],
            helper: format!("{}={}", super::HELPER_ENV, std::process::id()).into_bytes(),
            helpers: HashSet::new(),
            every_orphan: false,
            groups: HashSet::new(),
            known: HashSet::new(),
            exited: HashSet::new(),
            stopping: Arc::default(),
        }
    }

    /// Marks a stop as under way, or over: while it is, the reaper leaves the walks and the
    /// reaping to it (and the stop, once over, has it take a pass for a child that exited
    /// after the stop's last walk began).
    pub fn set_stopping(&self, stopping: bool) {
        self.stopping.store(stopping, Ordering::Release);
    }

    /// Whether a stop is under way.
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// The flag [`set_stopping`](Self::set_stopping) sets, for the reaper to read without the
    /// family's lock.
    pub fn stopping_flag(&self) -> Arc<AtomicBool> {
        self.stopping.clone()
    }

    /// This process's descendants, walked now ([`Table::descendants_after`]), knowing what
    /// earlier walks saw exited.
    pub fn walk(&mut self) -> Table {
        Table::descendants_after(&mut self.exited)
    }

    /// Takes every child of this process outside this process's own process group for the
    /// command's: nothing else this process starts leaves its group, but its helpers, whose
    /// groups are known ([`helper_groups`]).
    pub fn owns_every_orphan(&mut self) {
        self.every_orphan = true;
    }

    /// A command was started: `proc` leads its own process group.
    pub fn started(&mut self, proc: Proc) {
        self.groups.insert(proc.id.pid);
        self.known.insert(proc.id);
    }

    /// Whether no process of the commands is known (none started, or all gone).
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty() && self.known.is_empty()
    }

    /// Whether a zombie child of this process is the command's to reap.
    pub fn owns(&self, proc: &Proc) -> bool {
        self.known.contains(&proc.id)
            || self.groups.contains(&proc.pgid)
            || (self.unclaimed_orphan(proc)
                && !helper_groups().contains(&proc.pgid)
                && !(proc.is_alive() && self.helpers.contains(&proc.id)))
    }

    /// Under `every_orphan`, a child outside this process's group that no record claims yet.
    fn unclaimed_orphan(&self, proc: &Proc) -> bool {
        self.every_orphan
            && proc.pgid != self.my_group
            && !self.known.contains(&proc.id)
            && !self.groups.contains(&proc.pgid)
    }

    fn claims_child(&self, proc: &Proc) -> bool {
        self.owns(proc) || (proc.is_alive() && carries(proc.id.pid, &self.marker))
    }

    /// The commands' processes in `table`, the dead (zombies) included, from now on
    /// remembered as the commands'; forgets what has gone.
    pub fn members(&mut self, table: &Table) -> Vec<Proc> {
        self.note_helpers(table);
        let mut stack: Vec<Proc> = table
            .children_of(self.me)
            .filter(|c| self.claims_child(c))
            .copied()
            .chain(
                table
                    .all()
                    .filter(|p| self.groups.contains(&p.pgid))
                    .copied(),
            )
            .collect();
        let mut found: HashMap<i32, Proc> = HashMap::new();
        while let Some(proc) = stack.pop() {
            if proc.id.pid == self.me || found.insert(proc.id.pid, proc).is_some() {
                continue;
            }
            stack.extend(table.children_of(proc.id.pid).copied());
        }
        self.known = found.values().map(|p| p.id).collect();
        // A group id cannot be reused while any process, a zombie too, still has it, nor while
        // its leader lives (it may not have entered its group yet, just after the fork).
        self.groups
            .retain(|g| found.values().any(|p| p.pgid == *g || p.id.pid == *g));
        found.into_values().collect()
    }

    /// Notes what in `table` is a helper's: all below a helper's group leader or below what was
    /// noted before (a daemon that left the group), and an unclaimed orphan that carries a
    /// helper's environment (read once: one without it is taken for the command's).
    fn note_helpers(&mut self, table: &Table) {
        let groups = helper_groups().clone();
        let mut stack: Vec<Proc> = table
            .children_of(self.me)
            .filter(|c| {
                groups.contains(&c.pgid)
                    || self.helpers.contains(&c.id)
                    || (self.unclaimed_orphan(c)
                        && c.is_alive()
                        && carries(c.id.pid, std::slice::from_ref(&self.helper)))
            })
            .copied()
            .collect();
        let mut helpers = HashSet::new();
        while let Some(proc) = stack.pop() {
            if helpers.insert(proc.id) {
                stack.extend(table.children_of(proc.id.pid).copied());
            }
        }
        self.helpers = helpers;
    }

    /// Sends `signal` to the commands' process groups and to every live member of `members`.
    pub fn signal(&self, members: &[Proc], signal: Signal) {
        for group in &self.groups {
            // ESRCH: the group is gone already.
            for signal in then_continue(signal) {
                let _ = killpg(Pid::from_raw(*group), signal);
            }
        }
        for proc in members.iter().filter(|p| p.is_alive()) {
            for signal in then_continue(signal) {
                let _ = kill(Pid::from_raw(proc.id.pid), signal);
            }
        }
    }

    /// Walks the command's tree and sends `signal` to the live members outside the process
    /// groups, which had it already (a second SIGTERM means "now" to many programs); the live
    /// members found.
    pub fn signal_strays(&mut self, signal: Signal) -> Vec<Proc> {
        let (alive, _) = self.alive_members();
        for proc in alive.iter().filter(|p| !self.groups.contains(&p.pgid)) {
            for signal in then_continue(signal) {
                let _ = kill(Pid::from_raw(proc.id.pid), signal);
            }
        }
        alive
    }

    /// Walks the command's tree: its live members, and the walk.
    pub fn alive_members(&mut self) -> (Vec<Proc>, Table) {
        let table = self.walk();
        let members = self.members(&table);
        (members.into_iter().filter(Proc::is_alive).collect(), table)
    }

    /// Walks the command's tree, then sends `signal` to what is alive; the live members found.
    /// The process groups known already get it first.
    pub fn signal_all(&mut self, signal: Signal) -> Vec<Proc> {
        self.signal_all_in(signal).0
    }

    /// [`signal_all`](Self::signal_all), and the walk it took.
    pub fn signal_all_in(&mut self, signal: Signal) -> (Vec<Proc>, Table) {
        self.signal(&[], signal);
        let (alive, table) = self.alive_members();
        self.signal(&alive, signal);
        (alive, table)
    }
}

/// Whether process `pid`'s environment holds every one of `entries` (`NAME=value`).
fn carries(pid: i32, entries: &[Vec<u8>]) -> bool {
    let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let held: Vec<&[u8]> = env.split(|b| *b == 0).collect();
    entries.iter().all(|m| held.contains(&m.as_slice()))
}

/// `signal`, and after a SIGTERM a SIGCONT: a stopped process (SIGSTOP, a terminal's SIGTTIN)
/// keeps a SIGTERM pending until it runs again, and would run its handler only when SIGKILLed.
fn then_continue(signal: Signal) -> impl Iterator<Item = Signal> {
    std::iter::once(signal).chain((signal == Signal::SIGTERM).then_some(Signal::SIGCONT))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(pid: i32, ppid: i32, pgid: i32, state: char) -> Proc {
        Proc {
            id: ProcId { pid, start: 1 },
            ppid,
            pgid,
            state,
            threads: 1,
        }
    }

    #[test]
    fn members_are_the_commands_trees_and_nothing_else() {
        let mut family = Family::new("ns/app", "pod-a");
        let me = family.me;
        let mut table = Table::default();
        // The command (its own group), a worker, and a daemon under the worker.
        let command = proc(100, me, 100, 'S');
        for p in [
            command,
            proc(101, 100, 100, 'S'),
            proc(102, 101, 102, 'S'),
            proc(103, 102, 102, 'Z'),
            // Another child of this process, in its group: not the command's.
            proc(200, me, family.my_group, 'S'),
            proc(201, 200, family.my_group, 'S'),
        ] {
            table.insert(p);
        }
        family.started(command);
        let mut pids: Vec<i32> = family.members(&table).iter().map(|p| p.id.pid).collect();
        pids.sort();
        assert_eq!(pids, [100, 101, 102, 103]);

        // The command and its worker died; the daemon was re-parented here: still known.
        let mut later = Table::default();
        for p in [proc(102, me, 102, 'S'), proc(200, me, family.my_group, 'S')] {
            later.insert(p);
        }
        let pids: Vec<i32> = family.members(&later).iter().map(|p| p.id.pid).collect();
        assert_eq!(pids, [102]);
        assert!(
            family.groups.is_empty(),
            "the command's group has no members left"
        );
    }

    #[test]
    fn a_helpers_process_stays_the_helpers_once_it_left_the_group_and_its_parent() {
        let mut family = Family::new("ns/app", "pod-a");
        family.owns_every_orphan();
        let me = family.me;
        // Pids past any pid_max: no /proc entry, so no environment speaks for them.
        let (shell, daemon) = (4_190_001, 4_190_002);
        helper_groups().insert(shell);
        let mut table = Table::default();
        table.insert(proc(shell, me, shell, 'S'));
        table.insert(proc(daemon, shell, daemon, 'S'));
        assert!(family.members(&table).is_empty());
        // The check's shell exited; its daemon, in a session of its own, came here.
        helper_groups().remove(&shell);
        let mut later = Table::default();
        later.insert(proc(daemon, me, daemon, 'S'));
        assert!(family.members(&later).is_empty(), "taken for the command's");
        // Once it exits, the zombie is reaped like any orphan.
        assert!(family.owns(&proc(daemon, me, daemon, 'Z')));
    }

    #[test]
    fn only_with_every_orphan_is_an_unseen_child_in_another_group_the_commands() {
        let mut family = Family::new("ns/app", "pod-a");
        let mut table = Table::default();
        table.insert(proc(300, family.me, 300, 'S'));
        table.insert(proc(301, family.me, family.my_group, 'S'));
        assert!(family.members(&table).is_empty());
        family.owns_every_orphan();
        let pids: Vec<i32> = family.members(&table).iter().map(|p| p.id.pid).collect();
        assert_eq!(pids, [300]);
    }
}
