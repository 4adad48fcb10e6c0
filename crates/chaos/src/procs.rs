//! Child processes that cannot outlive the harness: killed on drop (a panic included), and
//! killed by the kernel if the harness itself dies (parent-death signal).

use std::cell::Cell;
use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

thread_local! {
    static OWNER: Cell<bool> = const { Cell::new(false) };
}

/// Marks this thread as the one that starts the run's processes and lives until the run ends:
/// processes it starts get SIGKILL as their parent-death signal. (The kernel sends that signal
/// when the *thread* that forked exits, so it must not be set from a short-lived thread.)
pub fn own_processes_from_this_thread() {
    OWNER.with(|o| o.set(true));
}

/// A started process, SIGKILLed and reaped when dropped.
pub struct Guarded {
    child: Child,
    exited: Option<ExitStatus>,
}

impl Guarded {
    /// Starts `cmd`. On the thread marked by [`own_processes_from_this_thread`], the process
    /// also gets SIGKILL as its parent-death signal, so it dies with the harness even when the
    /// harness is killed and cannot run its guards.
    pub fn spawn(cmd: &mut Command) -> io::Result<Self> {
        if OWNER.with(Cell::get) {
            // SAFETY: prctl(PR_SET_PDEATHSIG) is async-signal-safe and touches no memory of
            // the parent; it runs in the forked child before exec.
            unsafe {
                cmd.pre_exec(|| {
                    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(io::Error::from)
                });
            }
        }
        let child = cmd.spawn()?;
        Ok(Self {
            child,
            exited: None,
        })
    }

    /// The process id.
    pub fn pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.child.id()).unwrap_or(i32::MAX))
    }

    /// The child's handle, to take its pipes.
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Sends `signal`; an error when the process is gone.
    pub fn signal(&self, signal: Signal) -> nix::Result<()> {
        if self.exited.is_some() {
            return Err(nix::errno::Errno::ESRCH);
        }
        kill(self.pid(), signal)
    }

    /// Its exit status, if it has exited.
    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none()
            && let Ok(Some(status)) = self.child.try_wait()
        {
            self.exited = Some(status);
        }
        self.exited
    }

    /// Waits up to `timeout` for the process to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_exit() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// SIGKILL (after SIGCONT, in case it is stopped) and reap.
    pub fn kill_and_reap(&mut self) {
        if self.exited.is_some() {
            return;
        }
        let _ = kill(self.pid(), Signal::SIGCONT);
        let _ = self.child.kill();
        if let Ok(status) = self.child.wait() {
            self.exited = Some(status);
        }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        self.kill_and_reap();
    }
}
