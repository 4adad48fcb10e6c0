//! A started command, and how every process of it is stopped: SIGTERM to its process groups
//! and every member, SIGKILL at the end of the grace period or just before the validity
//! deadline (both on the leadership's boot clock, so a suspend cannot stretch them), then a wait
//! until each one is dead and the orphans are reaped. The waits are driven by SIGCHLD, and each
//! look walks the command's tree only ([`Family::walk`]).

use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_core::locked::locked;
use nix::sys::signal::Signal;
use tokio::process::Child;
use tracing::warn;

use super::KILL_MARGIN;
use super::reaper;
use super::tree::Family;
use crate::elector::Leadership;

/// A child of this process changing state (SIGCHLD) is when the command's tree may have become
/// empty: as a child subreaper, the last process of the command to die is this process's child
/// (a process whose parent lives leaves its parent alive, and a process that dies hands its
/// children to this process first). So the waits walk the tree at each SIGCHLD, and otherwise
/// only at this fallback, for a SIGCHLD that cannot be listened to.
const FALLBACK_LOOK: Duration = Duration::from_millis(100);
/// How long the stop waits after SIGTERM to the command's process groups for a first exit
/// before it walks the tree for the rest: a process that dies at once takes a few hundred
/// microseconds to; one that left the groups gets its SIGTERM at most this much later.
const FIRST_LOOK: Duration = Duration::from_millis(1);
/// How long to wait for SIGKILLed processes to die (a process in uninterruptible sleep can take
/// longer) before reporting them.
const KILL_WAIT: Duration = Duration::from_secs(5);
/// How many SIGKILL rounds a dropped command gets, a millisecond apart, when there is no time
/// to wait (a term aborted).
const DROP_ROUNDS: u32 = 50;

/// A started command. Dropping it (an aborted term) SIGKILLs every process of it.
pub(crate) struct Running {
    child: Child,
    pid: i32,
    status: Option<ExitStatus>,
    family: Arc<Mutex<Family>>,
    /// A stop saw every process of the command dead and reaped: nothing is left to kill.
    stopped: bool,
}

impl Running {
    pub fn new(child: Child, pid: i32, family: Arc<Mutex<Family>>) -> Self {
        Self {
            child,
            pid,
            status: None,
            family,
            stopped: false,
        }
    }

    pub fn pid(&self) -> i32 {
        self.pid
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

    /// How many processes of the command are alive.
    pub fn alive(&self) -> usize {
        locked(&self.family).alive_members().0.len()
    }

    /// Stops every process of the command: SIGTERM, then SIGKILL at the end of `grace` or
    /// [`KILL_MARGIN`] before the validity deadline, whichever comes first, then waits until
    /// each one is dead and reaps the orphans. The command's own exit status.
    pub async fn stop(&mut self, leadership: &Leadership, grace: Duration) -> Option<ExitStatus> {
        let clock = leadership.clock().clone();
        let grace_end = clock.now().saturating_add(grace);
        // Listening before the first signal goes out, so that no exit goes unheard.
        let mut exits = ChildExits::listen();
        locked(&self.family).set_stopping(true);
        // Walks in a row that found nothing alive.
        let mut clean = 0;
        if leadership.remaining() > KILL_MARGIN {
            // The process groups first, which as a rule hold the whole command; the walk for
            // what left them waits for the first exit (or FIRST_LOOK), so that it does not
            // race the deaths it just caused, and finds them done instead of still running.
            locked(&self.family).signal(&[], Signal::SIGTERM);
            exits.next_within(FIRST_LOOK).await;
            let alive = locked(&self.family).signal_strays(Signal::SIGTERM);
            if alive.is_empty() {
                clean = 1;
            } else {
                let kill_at = async {
                    tokio::select! {
                        _ = clock.sleep_until(grace_end) => {}
                        _ = leadership.deadline_passed(KILL_MARGIN) => {}
                    }
                };
                if self.until_all_dead(&mut exits, kill_at).await {
                    clean = 1;
                }
            }
        }
        self.kill(&mut exits, clean).await;
        self.wait().await
    }

    /// Returns `true` once a walk finds no process of the command alive, `false` when `limit`
    /// resolves first.
    async fn until_all_dead(
        &mut self,
        exits: &mut ChildExits,
        limit: impl std::future::Future<Output = ()>,
    ) -> bool {
        let mut limit = std::pin::pin!(limit);
        // Its own exit is a SIGCHLD too; without SIGCHLD, look at the rest at once after it.
        let listening = exits.sigchld.is_some();
        loop {
            let exited = self.status.is_some();
            tokio::select! {
                biased;
                _ = &mut limit => return false,
                _ = self.wait(), if !exited && !listening => {}
                _ = exits.next() => {}
            }
            if self.alive() == 0 {
                return true;
            }
        }
    }

    /// SIGKILLs every process of the command until two walks in a row find none alive (a walk
    /// reads children lists that may change under it; `clean` walks in a row just did),
    /// looking again at each SIGCHLD, then reaps the orphans.
    async fn kill(&mut self, exits: &mut ChildExits, mut clean: u32) {
        let started = tokio::time::Instant::now();
        let mut last = None;
        while clean < 2 {
            // What is heard from here on came after this walk began.
            exits.forget_heard();
            let (alive, table) = locked(&self.family).signal_all_in(Signal::SIGKILL);
            last = Some(table);
            if alive.is_empty() {
                clean += 1;
                continue;
            }
            clean = 0;
            if started.elapsed() > KILL_WAIT {
                let pids: Vec<i32> = alive.iter().map(|p| p.id.pid).collect();
                warn!(pid = self.pid, pids = ?pids, "processes of the command are still alive after SIGKILL");
                break;
            }
            let exited = self.status.is_some();
            tokio::select! {
                biased;
                _ = self.wait(), if !exited => {}
                _ = exits.next() => {}
            }
        }
        match last {
            // The last walk found none alive: the zombies it shows are the ones to reap. Then
            // the stop is over; should a child have exited since that walk began (the reaper
            // left its SIGCHLD to the stop), a SIGCHLD of our own has the reaper take a pass,
            // off this path (before the release).
            Some(table) if clean >= 2 => {
                reaper::reap_in(&self.family, &table);
                locked(&self.family).set_stopping(false);
                self.stopped = true;
                if exits.heard_since_forgotten() {
                    let _ = nix::sys::signal::raise(Signal::SIGCHLD);
                }
            }
            _ => {
                locked(&self.family).set_stopping(false);
                reaper::reap(&self.family);
            }
        }
    }
}

/// SIGCHLD, as a stream of wake-ups, with [`FALLBACK_LOOK`] as a floor when it cannot be
/// listened to (and as a safety net: a wake-up never comes later than that).
struct ChildExits {
    sigchld: Option<tokio::signal::unix::Signal>,
}

impl ChildExits {
    fn listen() -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        Self {
            sigchld: signal(SignalKind::child()).ok(),
        }
    }

    /// Takes what was heard so far as seen.
    fn forget_heard(&mut self) {
        if let Some(s) = &mut self.sigchld {
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            while s.poll_recv(&mut cx).is_ready() {}
        }
    }

    /// Whether a SIGCHLD came since [`forget_heard`](Self::forget_heard); `true` when it cannot
    /// be listened to.
    fn heard_since_forgotten(&mut self) -> bool {
        match &mut self.sigchld {
            Some(s) => {
                let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
                s.poll_recv(&mut cx).is_ready()
            }
            None => true,
        }
    }

    /// The next SIGCHLD since the last one, or `within`'s end, whichever comes first.
    async fn next_within(&mut self, within: Duration) {
        let heard = async {
            match &mut self.sigchld {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = heard => {}
            _ = tokio::time::sleep(within) => {}
        }
    }

    /// The next SIGCHLD since the last one, or the fallback's end.
    async fn next(&mut self) {
        self.next_within(FALLBACK_LOOK).await;
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.stopped {
            return;
        }
        let mut family = locked(&self.family);
        // A stop cut short (an aborted term) leaves the reaping to the reaper again, before
        // the SIGKILLs below make the exits it will hear.
        family.set_stopping(false);
        let mut alive = Vec::new();
        for _ in 0..DROP_ROUNDS {
            alive = family.signal_all(Signal::SIGKILL);
            if alive.is_empty() {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        // The reaper hears of their deaths; the lease of the aborted term is left to expire.
        let pids: Vec<i32> = alive.iter().map(|p| p.id.pid).collect();
        warn!(pid = self.pid, pids = ?pids, "processes of the command are still alive after SIGKILL");
    }
}

/// The exit code of a status: its code, or 128 + the signal that ended it.
pub fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

/// What an exit code above 128 says as shells mean it, the signal that ended the process (the
/// kernel's out-of-memory killer sends SIGKILL), to follow the code; empty for other codes.
pub fn said_signal(code: i32) -> String {
    match code.checked_sub(128).map(Signal::try_from) {
        Some(Ok(Signal::SIGKILL)) => {
            " (128 + SIGKILL: killed, as by the out-of-memory killer)".into()
        }
        Some(Ok(signal)) => format!(" (128 + {signal})"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_above_128_names_its_signal() {
        let said = [
            (
                137,
                " (128 + SIGKILL: killed, as by the out-of-memory killer)",
            ),
            (143, " (128 + SIGTERM)"),
            (130, " (128 + SIGINT)"),
            (7, ""),
            (128, ""),
            (255, ""),
            (-1, ""),
        ];
        for (code, want) in said {
            assert_eq!(said_signal(code), want, "{code}");
        }
    }

    #[test]
    fn exit_codes_follow_the_shell() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(ExitStatus::from_raw(9)), 137, "SIGKILL");
        assert_eq!(exit_code(ExitStatus::from_raw(15)), 143, "SIGTERM");
    }
}
