//! The singleton command: started only while this replica leads, with the fencing token in its
//! environment, and stopped at step-down, every process of it (its process group, every
//! descendant, and the orphans re-parented to this process, a child subreaper), with SIGTERM,
//! then SIGKILL no later than the validity deadline on the boot clock, so the old command is
//! gone before the lease can pass on. (Except when leasehold itself was frozen or killed: the
//! command is another process and runs on; that is why the token is in its environment, for it
//! to fence its writes.)
//!
//! - `procs`: the processes under this one as `/proc` shows them, read in few system calls.
//! - `tree`: which of them are the command's, and signalling them.
//! - `reaper`: the child subreaper, and reaping orphans without taking the command's status.
//! - `running`: a started command and the stop sequence.
//! - `program`: finding the command at start as `execvp` will.
//! - `interpreter`: what starts it besides its own file (a `#!` line, a dynamic loader).
//! - `shown`: the command line as the logs show it, its secrets hidden.

mod interpreter;
mod program;
mod reaper;
// Probes (the candidate check) start children too: tracked, so that no reaper takes their exit.
pub(crate) use reaper::{forget_helper_group, spawn_helper, untrack};
mod procs;
mod running;
mod shown;
mod tree;

pub use program::find_program;
pub use shown::{hidden, query_hidden, shown};

use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use leasehold_core::locked::locked;
use nix::sys::signal::{SigHandler, Signal};
use tokio::process::Command;
use tokio::sync::watch;
use tracing::{info, warn};

use running::Running;
use tree::Family;

use crate::elector::{Leadership, NotLeader, StepDownReason};
use crate::lease::FencingToken;

/// The singleton command and how to stop it. `Debug` shows the command as the logs do.
#[derive(Clone)]
pub struct ExecSettings {
    /// Program and arguments.
    pub command: Vec<String>,
    /// SIGTERM → SIGKILL grace.
    pub grace_period: Duration,
    /// Restart instead of exiting when it exits while leading.
    pub restart: bool,
}

impl std::fmt::Debug for ExecSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecSettings")
            .field("command", &self.shown())
            .field("grace_period", &self.grace_period)
            .field("restart", &self.restart)
            .finish()
    }
}

impl ExecSettings {
    /// The command line as the logs show it ([`shown`]).
    pub fn shown(&self) -> String {
        shown(&self.command)
    }
}

/// The environment variable that carries this replica's identity.
pub const IDENTITY_ENV: &str = "LEASEHOLD_IDENTITY";
// The guard reads these: the fencing token and the lease name it compares with the guard
// file's term, and the guard file's path.
pub use crate::guard::GUARD_ENV as GUARD_FILE_ENV;
pub use crate::guard::caller::{LEASE_ENV, TOKEN_ENV};
/// The environment variable that marks a helper's processes (a candidate check's) with this
/// process's pid: one that leaves the helper's process group is still never the command's.
pub const HELPER_ENV: &str = "LEASEHOLD_CHECK_OF";

/// SIGKILL goes out this long before the validity deadline, so that every process of the
/// command is dead, seen dead in `/proc` and reaped before the deadline rather than at it (on a
/// loaded machine a process can take milliseconds to die, and a walk of its tree to run).
pub const KILL_MARGIN: Duration = Duration::from_millis(100);

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
    #[error("command exited with code {code}{}", running::said_signal(*code))]
    Exited {
        /// Its exit code (128 + signal number when a signal ended it).
        code: i32,
    },
    /// `Leadership::check` refused before the command could start.
    #[error(transparent)]
    NotLeader(#[from] NotLeader),
    /// At start: no file of the command's name (as a path, or on `$PATH`).
    #[error("not found (neither an existing path nor a program on $PATH)")]
    NotFound,
    /// At start: the command's name names something that cannot be executed.
    #[error("{}{why}", if *.on_path { format!("found on $PATH as {}, which ", .path.display()) } else { String::new() })]
    NotExecutable {
        /// What the name was found as.
        path: std::path::PathBuf,
        /// Whether it was found on `$PATH` (else it is the name as given).
        on_path: bool,
        /// What stands in the way.
        why: &'static str,
    },
    /// At start: an ELF file the kernel refuses (cut short, no program, built for another
    /// machine), with why.
    #[error("{0}")]
    Unfit(String),
    /// At start: what starts the program (a script's `#!` interpreter, a binary's dynamic
    /// loader) is missing or cannot be executed.
    #[error("is started by {}, which {why} (a script's #! line, or a binary's dynamic loader: built for another C library?)", .interpreter.display())]
    NoInterpreter {
        /// The interpreter or loader.
        interpreter: std::path::PathBuf,
        /// What stands in the way.
        why: String,
    },
}

/// Runs the command for each term of leadership.
///
/// Creating one makes this process a child subreaper (`PR_SET_CHILD_SUBREAPER`): orphaned
/// descendants are re-parented to it rather than to init, so that daemons of the command can be
/// stopped too, and it reaps those it takes for the command's.
#[derive(Clone)]
pub struct Supervisor {
    settings: Arc<ExecSettings>,
    identity: Arc<str>,
    lease: Arc<str>,
    exit_code: Arc<Mutex<Option<i32>>>,
    family: Arc<Mutex<Family>>,
    reaper: Arc<Once>,
    guard_file: Option<Arc<std::path::Path>>,
    /// The command's last start or exit.
    runs: Arc<watch::Sender<CommandRun>>,
}

/// A run of the command, as the supervisor tells it: the `number`-th start in term `term`, and
/// whether it runs (or exited on its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandRun {
    /// The term.
    pub term: FencingToken,
    /// Its number in the term (1: the first).
    pub number: u32,
    /// Running, or exited.
    pub running: bool,
}

/// What ended a run of the command.
enum Ended {
    /// The term ended.
    SteppedDown,
    /// The validity deadline (less [`KILL_MARGIN`]) came before the elector stepped down.
    DeadlinePassed,
    /// The command exited on its own.
    Exited(Option<ExitStatus>),
}

impl Supervisor {
    /// A supervisor for `settings`. When the command ends on its own (and is not restarted),
    /// the term ends and [`exit_code`](Self::exit_code) holds its code; the elector should
    /// then stop ([`Elector::stop_when_work_ends`](crate::elector::Elector::stop_when_work_ends)).
    pub fn new(settings: ExecSettings, identity: &str, lease: &str) -> Self {
        reaper::become_subreaper();
        let supervisor = Self {
            settings: Arc::new(settings),
            identity: identity.into(),
            lease: lease.into(),
            exit_code: Arc::default(),
            family: Arc::new(Mutex::new(Family::new(lease, identity))),
            reaper: Arc::new(Once::new()),
            guard_file: None,
            runs: Arc::new(watch::Sender::new(CommandRun {
                term: FencingToken(0),
                number: 0,
                running: false,
            })),
        };
        // Orphans come before the first term too (as PID 1, a `kubectl exec` session's).
        if tokio::runtime::Handle::try_current().is_ok() {
            supervisor.reap();
        }
        supervisor
    }

    /// The command's starts and exits (a check's start-up grace begins at each start, and a
    /// restart counts as a failed check).
    pub fn runs(&self) -> watch::Receiver<CommandRun> {
        self.runs.subscribe()
    }

    /// Starts reaping the orphans, once.
    fn reap(&self) {
        self.reaper
            .call_once(|| reaper::spawn_reaper(Arc::downgrade(&self.family)));
    }

    /// Names `path` in the command's environment as its guard file ([`GUARD_FILE_ENV`]).
    pub fn with_guard_file(mut self, path: &std::path::Path) -> Self {
        self.guard_file = Some(path.into());
        self
    }

    /// Takes every child of this process outside its own process group for an orphan of the
    /// command, also one that cleared its environment before the supervisor saw it. Only for a
    /// program that starts no other children in process groups or sessions of their own, such
    /// as the `leasehold` binary: without it, only what the supervisor saw in the command's
    /// tree, or what carries the command's environment, is stopped and reaped.
    pub fn owns_every_orphan(self) -> Self {
        locked(&self.family).owns_every_orphan();
        self
    }

    /// SIGKILLs every process of the command found now, without waiting: at the validity
    /// deadline, and for a process that exits at once, so that its command does not outlive it.
    pub fn kill_now(&self) {
        locked(&self.family).signal_all(Signal::SIGKILL);
    }

    /// Whether the process should end with the command (no `--restart-command`).
    pub fn ends_with_command(&self) -> bool {
        !self.settings.restart
    }

    /// The exit code of the command, once it ended on its own.
    pub fn exit_code(&self) -> Option<i32> {
        *locked(&self.exit_code)
    }

    /// Keeps `code` for the process to exit with; with `--restart-command` the process does not
    /// end with the command, and a later shutdown exits 0.
    fn finish(&self, code: i32) {
        if !self.settings.restart {
            *locked(&self.exit_code) = Some(code);
        }
    }

    /// One term: start the command, and stop it when the term ends or its validity deadline
    /// comes; or end the term when the command ends (restarting it instead with
    /// `--restart-command`). Whatever the command leaves running is stopped before the term
    /// ends and before a restart.
    pub async fn lead(&self, leadership: Leadership) -> Result<(), ExecError> {
        self.reap();
        let mut started = 0;
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
                        program: self.settings.command.first().cloned().unwrap_or_default(),
                        source: err,
                    });
                }
            };
            let pid = running.pid();
            started += 1;
            let mut run = CommandRun {
                term: token,
                number: started,
                running: true,
            };
            self.runs.send_replace(run);
            info!(pid, token = token.0, command = %self.settings.shown(), "started the command");
            let ended = tokio::select! {
                biased;
                _ = leadership.lost() => Ended::SteppedDown,
                _ = leadership.deadline_passed(KILL_MARGIN) => Ended::DeadlinePassed,
                status = running.wait() => Ended::Exited(status),
            };
            let status = match ended {
                Ended::SteppedDown => {
                    self.stop(&mut running, &leadership).await;
                    return Ok(());
                }
                Ended::DeadlinePassed => {
                    // Nothing of the command may run past the deadline, whatever the elector
                    // does (after a suspend its timers are late): SIGKILL first.
                    self.kill_now();
                    // A renewal in flight (sent before the kill, its answer read after it, as
                    // on a throttled CPU) may have moved the deadline: the command did not end
                    // on its own, and the term does not go on without it.
                    leadership.deadline_missed();
                    self.stop(&mut running, &leadership).await;
                    leadership.lost().await;
                    return Ok(());
                }
                Ended::Exited(status) => status,
            };
            let code = status.map(running::exit_code).unwrap_or(1);
            run.running = false;
            self.runs.send_replace(run);
            // Said as it happens: stopping what it left running may outlast the term.
            let restart = self.settings.restart && !leadership.is_lost();
            if restart {
                warn!(
                    token = token.0,
                    code, "the command exited while leading; starting it again"
                );
            } else {
                info!(
                    token = token.0,
                    code, "the command exited while leading; stepping down"
                );
            }
            let left = running.alive();
            if left > 0 {
                info!(
                    pid,
                    token = token.0,
                    processes = left,
                    "stopping what the command left running"
                );
                running.stop(&leadership, self.settings.grace_period).await;
            }
            if restart && !leadership.is_lost() {
                tokio::select! {
                    _ = leadership.lost() => return Ok(()),
                    _ = tokio::time::sleep(RESTART_PAUSE) => continue,
                }
            }
            self.finish(code);
            return if code == 0 {
                Ok(())
            } else {
                Err(ExecError::Exited { code })
            };
        }
    }

    /// Stops every process of the command at the end of the term, saying why and how it went.
    async fn stop(&self, running: &mut Running, leadership: &Leadership) {
        let (pid, token) = (running.pid(), leadership.token());
        let reason = leadership
            .step_down_reason()
            .unwrap_or(StepDownReason::ValidityDeadlinePassed);
        // Up to the kill, 100 ms before the validity deadline: less after a renewal failed.
        let grace =
            (self.settings.grace_period).min(leadership.remaining().saturating_sub(KILL_MARGIN));
        info!(
            pid,
            token = token.0,
            reason = reason.as_label(),
            grace_ms = grace.as_millis() as u64,
            "stopping the command"
        );
        let status = running.stop(leadership, self.settings.grace_period).await;
        info!(
            pid,
            token = token.0,
            code = status.map(running::exit_code).unwrap_or(-1),
            "the command stopped"
        );
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
            .env_remove(HELPER_ENV)
            .envs(self.guard_file.iter().map(|p| (GUARD_FILE_ENV, &**p)))
            .stdin(Stdio::null())
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            // Its own process group, so that a shell's children are stopped with it.
            .process_group(0)
            .kill_on_drop(true);
        // If leasehold dies (SIGKILL, OOM), the kernel kills the command too, so it cannot
        // run on beside the next leader's. (A *frozen* leasehold is another matter: the token
        // in the environment is for that. The signal reaches the command only, not its own
        // children.)
        // The command gets back the defaults of the signals leasehold ignores (shutdown.rs).
        // SAFETY: prctl(PR_SET_PDEATHSIG) and sigaction are async-signal-safe and touch no
        // memory of the parent; they run in the forked child before exec.
        unsafe {
            command.pre_exec(|| {
                for s in [Signal::SIGTTIN, Signal::SIGTTOU] {
                    nix::sys::signal::signal(s, SigHandler::SigDfl)?;
                }
                nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)
            });
        }
        let (child, proc) = reaper::spawn_tracked(&mut command)?;
        locked(&self.family).started(proc);
        Ok(Running::new(child, proc.id.pid, self.family.clone()))
    }
}
