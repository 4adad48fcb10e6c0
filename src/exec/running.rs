//! A started command, and how every process of it is stopped: SIGTERM to its process groups
//! and every member, SIGKILL at the end of the grace period or just before the validity
//! deadline (both on the leadership's boot clock, so a suspend cannot stretch them), then a wait
//! until each one is dead and the orphans are reaped.

use std::process::ExitStatus;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::process::Child;
use tracing::warn;

use super::KILL_MARGIN;
use super::reaper;
use super::tree::{Family, Table};
use crate::elector::Leadership;

/// How often the command's tree is looked at during the grace period: from the first to the
/// second bound, doubling.
const POLL: (Duration, Duration) = (Duration::from_millis(5), Duration::from_millis(100));
/// How long to wait for SIGKILLed processes to die (a process in uninterruptible sleep can take
/// longer) before reporting them.
const KILL_WAIT: Duration = Duration::from_secs(5);
/// How often to look again while SIGKILLed processes die.
const KILL_POLL: Duration = Duration::from_millis(2);
/// How many SIGKILL rounds a dropped command gets, a millisecond apart, when there is no time
/// to wait (a term aborted).
const DROP_ROUNDS: u32 = 50;

/// A started command. Dropping it (an aborted term) SIGKILLs every process of it.
pub(crate) struct Running {
    child: Child,
    pid: i32,
    status: Option<ExitStatus>,
    family: Arc<Mutex<Family>>,
}

impl Running {
    pub fn new(child: Child, pid: i32, family: Arc<Mutex<Family>>) -> Self {
        Self {
            child,
            pid,
            status: None,
            family,
        }
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    fn family(&self) -> MutexGuard<'_, Family> {
        self.family.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The command's own exit status (the direct child), once it exited.
    pub async fn wait(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            let status = self.child.wait().await.ok()?;
            reaper::untrack(self.pid);
            self.status = Some(status);
        }
        self.status
    }

    /// SIGKILLs every process of the command found now, without waiting.
    pub fn kill_now(&mut self) {
        self.family().signal_all(Signal::SIGKILL);
    }

    /// How many processes of the command are alive.
    pub fn alive(&self) -> usize {
        let mut family = self.family();
        let members = family.members(&Table::scan());
        members.iter().filter(|p| p.is_alive()).count()
    }

    /// Stops every process of the command: SIGTERM, then SIGKILL at the end of `grace` or
    /// [`KILL_MARGIN`] before the validity deadline, whichever comes first, then waits until
    /// each one is dead and reaps the orphans. The command's own exit status.
    pub async fn stop(&mut self, leadership: &Leadership, grace: Duration) -> Option<ExitStatus> {
        let clock = leadership.clock().clone();
        let grace_end = clock.now().saturating_add(grace);
        if leadership.remaining() > KILL_MARGIN {
            let alive = self.family().signal_all(Signal::SIGTERM);
            if !alive.is_empty() {
                let kill_at = async {
                    tokio::select! {
                        _ = clock.sleep_until(grace_end) => {}
                        _ = leadership.deadline_passed(KILL_MARGIN) => {}
                    }
                };
                self.until_all_dead(kill_at).await;
            }
        }
        self.kill().await;
        self.wait().await
    }

    /// Returns once no process of the command is alive, or when `limit` resolves.
    async fn until_all_dead(&mut self, limit: impl std::future::Future<Output = ()>) {
        let mut limit = std::pin::pin!(limit);
        let mut poll = POLL.0;
        loop {
            let exited = self.status.is_some();
            tokio::select! {
                biased;
                _ = &mut limit => return,
                // The command itself exited: look at the rest at once.
                _ = self.wait(), if !exited => {}
                _ = tokio::time::sleep(poll) => poll = (poll * 2).min(POLL.1),
            }
            if self.alive() == 0 {
                return;
            }
        }
    }

    /// SIGKILLs every process of the command until two scans in a row find none alive, then
    /// reaps the orphans.
    async fn kill(&mut self) {
        let started = tokio::time::Instant::now();
        let mut clean = 0;
        while clean < 2 {
            let alive = self.family().signal_all(Signal::SIGKILL);
            clean = if alive.is_empty() { clean + 1 } else { 0 };
            if started.elapsed() > KILL_WAIT {
                let pids: Vec<i32> = alive.iter().map(|p| p.id.pid).collect();
                warn!(pid = self.pid, pids = ?pids, "processes of the command are still alive after SIGKILL");
                break;
            }
            tokio::time::sleep(KILL_POLL).await;
        }
        reaper::reap(&self.family);
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut family = self.family();
        for _ in 0..DROP_ROUNDS {
            if family.signal_all(Signal::SIGKILL).is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
