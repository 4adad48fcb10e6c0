//! The singleton command: started only while this replica leads, with the fencing token in its
//! environment, and stopped at step-down with SIGTERM, then SIGKILL no later than the validity
//! deadline, so the old command is gone before the lease can pass on. (Except when leasehold
//! itself was frozen: the command is another process and runs on; that is why the token is in
//! its environment, for it to fence its writes.)

use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use tracing::{info, warn};

use crate::config::ExecSettings;
use crate::elector::{Leadership, NotLeader};

/// The environment variable that carries the fencing token.
pub const TOKEN_ENV: &str = "LEASEHOLD_FENCING_TOKEN";
/// The environment variable that carries this replica's identity.
pub const IDENTITY_ENV: &str = "LEASEHOLD_IDENTITY";
/// The environment variable that carries the lease name.
pub const LEASE_ENV: &str = "LEASEHOLD_LEASE";

/// SIGKILL goes out this long before the validity deadline, so that the process is reaped
/// before the deadline rather than at it.
const KILL_MARGIN: Duration = Duration::from_millis(20);

/// Pause before starting the command again with `--restart-command`.
const RESTART_PAUSE: Duration = Duration::from_secs(1);

/// How a term of the command ended badly.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The command could not be started.
    #[error("command `{program}` could not start: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// The command exited on its own with a non-zero code.
    #[error("command exited with code {code}")]
    Exited {
        /// Its exit code (128 + signal number when a signal ended it).
        code: i32,
    },
    /// The guard refused before the command could start.
    #[error(transparent)]
    NotLeader(#[from] NotLeader),
}

/// Runs the command for each term of leadership.
#[derive(Clone)]
pub struct Supervisor {
    settings: Arc<ExecSettings>,
    identity: Arc<str>,
    lease: Arc<str>,
    exit_code: Arc<Mutex<Option<i32>>>,
}

impl Supervisor {
    /// A supervisor for `settings`. When the command ends on its own (and is not restarted),
    /// the term ends and [`exit_code`](Self::exit_code) holds its code; the elector should
    /// then stop ([`Elector::stop_when_work_ends`](crate::elector::Elector::stop_when_work_ends)).
    pub fn new(settings: ExecSettings, identity: &str, lease: &str) -> Self {
        Self {
            settings: Arc::new(settings),
            identity: identity.into(),
            lease: lease.into(),
            exit_code: Arc::default(),
        }
    }

    /// Whether the process should end with the command (no `--restart-command`).
    pub fn ends_with_command(&self) -> bool {
        !self.settings.restart
    }

    /// The exit code of the command, once it ended on its own.
    pub fn exit_code(&self) -> Option<i32> {
        *self
            .exit_code
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn finish(&self, code: i32) {
        *self
            .exit_code
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(code);
    }

    /// One term: start the command, and stop it when the term ends; or end the term when the
    /// command ends (restarting it instead with `--restart-command`).
    pub async fn lead(&self, leadership: Leadership) -> Result<(), ExecError> {
        loop {
            let token = leadership.check()?;
            let mut running = match self.spawn(&leadership) {
                Ok(r) => r,
                Err(err) => {
                    let code = if err.kind() == std::io::ErrorKind::NotFound {
                        127
                    } else {
                        126
                    };
                    self.finish(code);
                    return Err(ExecError::Spawn {
                        program: self.settings.command[0].clone(),
                        source: err,
                    });
                }
            };
            info!(pid = running.pid.as_raw(), token = token.0, command = %self.settings.command.join(" "), "started the command");
            let status = tokio::select! {
                biased;
                _ = leadership.lost() => {
                    let reason = leadership.step_down_reason().map(|r| r.to_string()).unwrap_or_default();
                    info!(pid = running.pid.as_raw(), token = token.0, reason = %reason, "stopping the command");
                    let status = self.stop(&mut running, &leadership).await;
                    info!(pid = running.pid.as_raw(), token = token.0, code = status.map(exit_code).unwrap_or(-1), "the command stopped");
                    return Ok(());
                }
                status = running.child.wait() => status,
            };
            let code = status.map(exit_code).unwrap_or(1);
            if self.settings.restart && !leadership.is_lost() {
                warn!(
                    token = token.0,
                    code, "the command exited while leading; starting it again"
                );
                tokio::select! {
                    _ = leadership.lost() => return Ok(()),
                    _ = tokio::time::sleep(RESTART_PAUSE) => continue,
                }
            }
            info!(
                token = token.0,
                code, "the command exited while leading; stepping down"
            );
            self.finish(code);
            return if code == 0 {
                Ok(())
            } else {
                Err(ExecError::Exited { code })
            };
        }
    }

    fn spawn(&self, leadership: &Leadership) -> std::io::Result<Running> {
        let (program, args) =
            self.settings.command.split_first().ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "no command")
            })?;
        let mut command = Command::new(program);
        command
            .args(args)
            .env(TOKEN_ENV, leadership.token().0.to_string())
            .env(IDENTITY_ENV, &*self.identity)
            .env(LEASE_ENV, &*self.lease)
            .stdin(Stdio::null())
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            // Its own process group, so that a shell's children are stopped with it.
            .process_group(0)
            .kill_on_drop(true);
        // If leasehold dies (SIGKILL, OOM), the kernel kills the command too, so it cannot
        // run on beside the next leader's. (A *frozen* leasehold is another matter: the token
        // in the environment is for that.)
        // SAFETY: prctl(PR_SET_PDEATHSIG) is async-signal-safe and touches no memory of the
        // parent; it runs in the forked child before exec.
        unsafe {
            command.pre_exec(|| {
                nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)
            });
        }
        let child = command.spawn()?;
        let pid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw)
            .ok_or_else(|| std::io::Error::other("the command has no pid"))?;
        Ok(Running { child, pid })
    }

    /// SIGTERM to the command's group, then SIGKILL after the grace period or just before the
    /// validity deadline, whichever comes first.
    async fn stop(&self, running: &mut Running, leadership: &Leadership) -> Option<ExitStatus> {
        let hard_limit = self
            .settings
            .grace_period
            .min(leadership.remaining().saturating_sub(KILL_MARGIN));
        if !hard_limit.is_zero() {
            running.signal(Signal::SIGTERM);
            if let Ok(status) = tokio::time::timeout(hard_limit, running.child.wait()).await {
                return status.ok();
            }
        }
        running.signal(Signal::SIGKILL);
        running.child.wait().await.ok()
    }
}

/// A started command. Dropping it (an aborted term) kills the whole group.
struct Running {
    child: Child,
    pid: Pid,
}

impl Running {
    fn signal(&self, signal: Signal) {
        // ESRCH: the group is gone already.
        let _ = killpg(self.pid, signal);
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.signal(Signal::SIGKILL);
        }
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

/// Whether `program` can be started: a path that exists, or a name found on `$PATH`.
pub fn find_program(program: &str) -> bool {
    if program.contains('/') {
        return std::path::Path::new(program).exists();
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_shell() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(ExitStatus::from_raw(9)), 137, "SIGKILL");
        assert_eq!(exit_code(ExitStatus::from_raw(15)), 143, "SIGTERM");
    }

    #[test]
    fn programs_are_found_on_the_path() {
        assert!(find_program("sh"));
        assert!(find_program("/bin/sh"));
        assert!(!find_program("no-such-program-leasehold"));
    }
}
