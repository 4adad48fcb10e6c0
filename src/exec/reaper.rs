//! This process as a child subreaper: the command's orphans (daemons, double forks, workers
//! whose parent died) are re-parented to it instead of to init, so it can stop them, and it
//! reaps them when they exit. It never reaps a command it started itself: that exit status is
//! tokio's `Child::wait` to read (a blanket `waitpid(-1)` would steal it), so those pids are
//! tracked from spawn until they are gone. As PID 1 (a container) it reaps every orphan.

use std::collections::BTreeMap;
use std::sync::{Mutex, Once, Weak};
use std::time::Duration;

use leasehold_core::locked::locked;
use nix::sys::resource::{Resource, setrlimit};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use tracing::{debug, warn};

use super::procs::{Proc, ProcId, Table, read_proc};
use super::tree::{Family, helper_groups};

/// Children started by a supervisor and not yet reaped by tokio: pid → start time (`None`
/// when it could not be read). Held while spawning and while reaping, so that a new command
/// is tracked before any reaper can see it.
static TRACKED: Mutex<BTreeMap<i32, Option<u64>>> = Mutex::new(BTreeMap::new());

/// How often the command's tree is noted while it has processes, so that an orphan that
/// clears its environment is still known for the command's once its parent is gone (and how
/// often orphans are looked for when SIGCHLD cannot be listened to).
const NOTE_INTERVAL: Duration = Duration::from_secs(1);

/// Makes this process a child subreaper (`PR_SET_CHILD_SUBREAPER`, no privilege needed), once.
pub(crate) fn become_subreaper() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if let Err(err) = nix::sys::prctl::set_child_subreaper(true) {
            warn!(error = %err, "cannot become a child subreaper: the command's orphans go to init and are out of reach");
        }
    });
}

/// Starts `command` and tracks the child, so that no reaper takes its exit status.
pub(crate) fn spawn_tracked(command: &mut Command) -> std::io::Result<(Child, Proc)> {
    spawn_locked(&mut locked(&TRACKED), command)
}

fn spawn_locked(
    tracked: &mut BTreeMap<i32, Option<u64>>,
    command: &mut Command,
) -> std::io::Result<(Child, Proc)> {
    // The open-files limit leasehold raised for itself goes back to the one it was started with
    // (open_files.rs).
    if let Some((soft, hard)) = crate::open_files::started_with() {
        // SAFETY: runs in the forked child before exec; setrlimit is one prlimit64 system call
        // on glibc and musl, which neither allocates nor takes a lock, even on its error path.
        unsafe {
            command.pre_exec(move || Ok(setrlimit(Resource::RLIMIT_NOFILE, soft, hard)?));
        }
    }
    // The Redis password it may carry stays leasehold's.
    let child = command.env_remove("LEASEHOLD_REDIS_URL").spawn()?;
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .ok_or_else(|| std::io::Error::other("the command has no pid"))?;
    // Not reaped yet (only tokio reaps it, once polled), so /proc still shows it, a zombie too.
    let proc = read_proc(pid);
    tracked.insert(pid, proc.map(|p| p.id.start));
    let proc = proc.unwrap_or(Proc {
        id: ProcId { pid, start: 0 },
        ppid: std::process::id() as i32,
        pgid: pid,
        state: 'R',
        threads: 1,
    });
    Ok((child, proc))
}

/// Starts `command`, a helper of leasehold's that leads a process group of its own (a
/// candidate check), and tracks it as [`spawn_tracked`] does; its group is never a command's
/// until [`forget_helper_group`], nor is a process that carries its
/// [`HELPER_ENV`](super::HELPER_ENV). Both are recorded before any walk can see the new process.
pub(crate) fn spawn_helper(command: &mut Command) -> std::io::Result<(Child, Proc)> {
    command.env(super::HELPER_ENV, std::process::id().to_string());
    let mut tracked = locked(&TRACKED);
    let mut helpers = helper_groups();
    let (child, proc) = spawn_locked(&mut tracked, command)?;
    helpers.insert(proc.id.pid);
    Ok((child, proc))
}

/// The helper's process group `pgid` has no member left for this process to reap.
pub(crate) fn forget_helper_group(pgid: i32) {
    helper_groups().remove(&pgid);
}

/// tokio has reaped `pid`: it may be reused, and is no longer ours to leave alone.
pub(crate) fn untrack(pid: i32) {
    locked(&TRACKED).remove(&pid);
}

/// Reaps every zombie child of this process that `family` owns (every one, as PID 1), except
/// the tracked commands. The number reaped.
pub(crate) fn reap(family: &Mutex<Family>) -> usize {
    let table = locked(family).walk();
    reap_in(family, &table)
}

/// [`reap`] from a walk already taken. A command spawned after the walk is not in it; one
/// spawned before is tracked by the time the lock below is ours (it is tracked under it).
pub(crate) fn reap_in(family: &Mutex<Family>, table: &Table) -> usize {
    let mut tracked = locked(&TRACKED);
    // A tracked child that is gone was reaped by tokio (a dropped child, from its orphan queue).
    // Asked of /proc one by one: a missed entry of the scan must not make it reapable.
    tracked.retain(|pid, start| {
        read_proc(*pid).is_some_and(|p| start.is_none_or(|s| s == p.id.start))
    });
    let me = std::process::id() as i32;
    let family = locked(family);
    let mut reaped = 0;
    for child in table.children_of(me).filter(|c| c.is_zombie()) {
        if tracked.contains_key(&child.id.pid) || !(me == 1 || family.owns(child)) {
            continue;
        }
        match waitpid(Pid::from_raw(child.id.pid), Some(WaitPidFlag::WNOHANG)) {
            Ok(status) => {
                reaped += 1;
                debug!(pid = child.id.pid, status = ?status, "reaped an orphan of the command");
            }
            Err(err) => debug!(pid = child.id.pid, error = %err, "could not reap an orphan"),
        }
    }
    reaped
}

/// Reaps orphans whenever a child of this process changes state (SIGCHLD), and notes the
/// command's tree every [`NOTE_INTERVAL`] while it has processes, until the family is dropped.
/// The walks of `/proc` run on the blocking pool: they must never hold up the work's task (a
/// resumed leasehold has to stop its command first thing).
pub(crate) fn spawn_reaper(family: Weak<Mutex<Family>>) {
    use tokio::signal::unix::{SignalKind, signal};
    tokio::spawn(async move {
        let mut sigchld = match signal(SignalKind::child()) {
            Ok(s) => Some(s),
            Err(err) => {
                warn!(error = %err, "cannot listen to SIGCHLD; looking for orphans every second");
                None
            }
        };
        let Some(stopping) = family.upgrade().map(|f| locked(&f).stopping_flag()) else {
            return;
        };
        let mut note = tokio::time::interval(NOTE_INTERVAL);
        note.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            let child_exited = tokio::select! {
                received = async {
                    match &mut sigchld {
                        Some(s) => s.recv().await,
                        None => std::future::pending().await,
                    }
                } => {
                    if received.is_none() {
                        return;
                    }
                    true
                }
                _ = note.tick() => sigchld.is_none(),
            };
            let Some(family) = family.upgrade() else {
                return;
            };
            // A stop walks and reaps at its end, after it is marked over: no thread is woken
            // for a pass that would do nothing.
            if stopping.load(std::sync::atomic::Ordering::Acquire) {
                continue;
            }
            let pass = tokio::task::spawn_blocking(move || {
                let mut tree = locked(&family);
                let busy = !tree.is_empty();
                if tree.is_stopping() || !(child_exited || busy) {
                    return;
                }
                // One walk serves both: noting the tree and finding the zombies.
                let table = tree.walk();
                if busy {
                    tree.members(&table);
                }
                drop(tree);
                reap_in(&family, &table);
            });
            let _ = pass.await;
        }
    });
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    fn eventually(what: &str, mut pred: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !pred() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[tokio::test]
    async fn reaping_never_takes_the_status_of_a_command_it_started() {
        // The command is in its own group, which the family owns: only the tracking keeps it.
        let family = Mutex::new(Family::new("ns/reap", "pod-a"));
        let mut command = Command::new("sh");
        command.args(["-c", "exit 7"]).process_group(0);
        let (mut child, proc) = spawn_tracked(&mut command).unwrap();
        family.lock().unwrap().started(proc);
        let pid = proc.id.pid;
        eventually("the command to be a zombie", || {
            read_proc(pid).is_some_and(|p| p.is_zombie())
        });
        assert!(family.lock().unwrap().owns(&read_proc(pid).unwrap()));
        reap(&family);
        assert!(read_proc(pid).is_some(), "the tracked command was reaped");
        let status = child.wait().await.unwrap();
        untrack(pid);
        assert_eq!(status.code(), Some(7));
    }

    #[tokio::test]
    async fn an_orphan_of_the_command_is_re_parented_here_and_reaped() {
        become_subreaper();
        let family = Mutex::new(Family::new("ns/reap", "pod-b"));
        let mut command = Command::new("sh");
        // The orphan stays in the command's process group: that makes it the command's.
        command
            .args(["-c", "(sleep 0.2 & echo $! >&3) 3>&1; exit 0"])
            .process_group(0)
            .stdout(std::process::Stdio::piped());
        let (child, proc) = spawn_tracked(&mut command).unwrap();
        family.lock().unwrap().started(proc);
        let out = child.wait_with_output().await.unwrap();
        untrack(proc.id.pid);
        let orphan: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        let me = std::process::id() as i32;
        eventually("the orphan to be re-parented here", || {
            read_proc(orphan).is_none_or(|p| p.ppid == me)
        });
        eventually("the orphan to exit", || {
            read_proc(orphan).is_none_or(|p| p.is_zombie())
        });
        assert!(reap(&family) >= 1, "{:?}", read_proc(orphan));
        assert!(read_proc(orphan).is_none(), "reaped");
    }
}
