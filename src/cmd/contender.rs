//! One contender for the lease, wired once for `run` and `lock`: the lease on Redis, the guard
//! file, the elector, the supervisor of the command (with the guard file, owning every orphan),
//! the Kubernetes publisher; then each term (the publisher and the command side by side), and
//! at the end the publisher's flush and the guard file's removal. What `run` and `lock` add is
//! what they do around a term.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{error, warn};

use crate::board::{Board, GateHooks};
use crate::candidacy::Candidacy;
use crate::cli::{CliError, ContenderSettings};
use crate::clock_gate::ClockRateGate;
use crate::clock_watch::ClockWatch;
use crate::elector::{Elector, Leadership, Standing};
use crate::eviction::{EvictionWatch, refused_as_unsafe};
use crate::exec::{CommandRun, ExecError, KILL_MARGIN, Supervisor};
use crate::guard::{GuardFile, GuardHooks};
use crate::heartbeat::Heartbeat;
use crate::k8s::Publisher;
use crate::lease::{LeaseName, OwnerId};
use crate::metrics::Metrics;
use crate::notices::Notices;
use crate::owned_file::WRITE_BOUND;
use crate::shutdown::Shutdown;

/// Slack for stepping down, releasing and stopping the HTTP server after the command stopped.
const SHUTDOWN_SLACK: Duration = Duration::from_secs(5);
/// How long the Kubernetes step-down notes (label removal, event) may take at exit.
const NOTES_BOUND: Duration = Duration::from_secs(2);

/// The longest a graceful shutdown of a contender takes, from SIGTERM to exit: the command's
/// grace period, a release (the call timeout), and slack. A pod's
/// `terminationGracePeriodSeconds` must exceed it.
pub fn shutdown_bound(settings: &ContenderSettings) -> Duration {
    let grace = settings
        .exec
        .as_ref()
        .map_or(Duration::ZERO, |e| e.grace_period);
    grace + settings.timing.call_timeout() + SHUTDOWN_SLACK + NOTES_BOUND
}

/// A contender, wired and not started.
pub(super) struct Contender {
    /// Its elector, which the command may still add to (hooks, one term).
    pub(super) elector: Elector,
    /// What it shows: the elector's status and its gates'.
    pub(super) board: Board,
    /// The guard file of its terms, if any.
    pub(super) guard: Option<Arc<GuardHooks>>,
    /// Its elector loop's progress, for liveness.
    pub(super) heartbeat: Heartbeat,
    /// What its terms saw of the clocks: Redis's rate, this host's slew.
    pub(super) clocks: Arc<ClockWatch>,
    /// The gates it starts with the elector: Redis's eviction policy, and the candidate check's
    /// verdicts when there is one (`with_candidacy`).
    eviction: EvictionWatch,
    candidacy: watch::Sender<Standing>,
    verdicts: Option<watch::Receiver<Candidacy>>,
    /// Who hears what the gates saw (the metrics).
    told: Arc<dyn GateHooks>,
    /// The command's supervisor, if there is a command.
    supervisor: Option<Supervisor>,
    publisher: Option<Publisher>,
    /// How long the elector may take to end once shutdown began.
    bound: Duration,
}

/// How a contender ended.
pub(super) struct Ended {
    /// The command's own exit code, when it ended on its own.
    command: Option<i32>,
    /// Why a configuration known to be unsafe ended it (exit code 2).
    refused: Option<String>,
    /// When the shutdown bound ends, for a contender that a shutdown ended.
    ends_by: Option<Instant>,
}

impl Ended {
    /// How long a step at the end may take: `own`, its own bound, but not past the shutdown
    /// bound (when the elector took most of it, a file that does not answer is left as it is).
    pub(super) fn left(&self, own: Duration) -> Duration {
        self.ends_by.map_or(own, |by| {
            own.min(by.saturating_duration_since(Instant::now()))
        })
    }

    /// The command's exit code, or the refusal that ended it.
    pub(super) fn command_code(self) -> Result<Option<i32>, CliError> {
        match self.refused {
            Some(words) => Err(CliError::Refused(words)),
            None => Ok(self.command),
        }
    }
}

impl Contender {
    /// Wires a contender for `lease_name`, with `publisher` for the Kubernetes parts. The
    /// supervisor's command is killed at once when `shutdown` is asked twice.
    pub(super) fn new(
        settings: &ContenderSettings,
        lease_name: &LeaseName,
        publisher: Option<Publisher>,
        shutdown: &Shutdown,
    ) -> Result<Self, CliError> {
        let owner =
            OwnerId::generate(&settings.identity).map_err(|e| CliError::Refused(e.to_string()))?;
        let lease = settings
            .redis
            .lease(lease_name.clone(), owner)
            .map_err(anyhow::Error::new)?;
        let guard = guard_file(settings, lease_name)?;
        let clocks = ClockWatch::new(&settings.timing);
        let (clock_gate, clock_standing) = ClockRateGate::new(settings.timing, clocks.clone());
        let elector = Elector::new(lease, settings.timing)?;
        let board = Board::new(elector.status().borrow().clone());
        let elector_lease = elector.lease().clone();
        let heartbeat = Heartbeat::new(settings.timing.lease_duration);
        let (eviction, eviction_standing) =
            EvictionWatch::new(elector_lease.clone(), settings.timing, settings.eviction);
        let (candidacy, candidacy_standing) = watch::channel(Standing::Stands);
        // When several gates keep the replica out, the first names the reason.
        let mut elector = elector
            .with_gate(eviction_standing)
            .with_gate(candidacy_standing)
            .with_gate(clock_standing)
            .with_hooks(Arc::new(board.clone()))
            .with_hooks(Arc::new(heartbeat.clone()))
            .with_hooks(Notices::new(
                elector_lease.clone(),
                settings.timing.lease_duration,
                board.clone(),
            ))
            .with_hooks(clock_gate)
            .with_hooks(clocks.clone());
        let guard = match guard {
            Some(file) => {
                // A file the user named is one the command reads: a leader that cannot write
                // it steps down. The default one may be read by nobody.
                let named = settings.guard_file.is_some();
                let (hooks, standing) =
                    GuardHooks::new(file, &settings.identity, settings.timing, named)
                        .context("cannot start the guard file's writer")?;
                elector = elector.with_gate(standing).with_hooks(hooks.clone());
                Some(hooks)
            }
            None => None,
        };
        let supervisor = settings.exec.clone().map(|exec| {
            // Given in full only to what a command leaves running while its term lasts.
            let (validity, renew_deadline) = (settings.timing.validity(), settings.timing.renew_deadline);
            let at_most = validity.saturating_sub(KILL_MARGIN);
            if exec.grace_period > at_most {
                warn!(
                    grace_period_ms = exec.grace_period.as_millis() as u64,
                    at_most_ms = at_most.as_millis() as u64,
                    "--grace-period is longer than a step-down gives (for `lock`, the loss of the lock): the command is killed 100 ms before the validity deadline, at most a term's validity after the last renewal"
                );
            }
            // When Redis stops answering, the step-down comes at the renew deadline (and a few
            // milliseconds later the stop).
            if validity.saturating_sub(renew_deadline) < KILL_MARGIN * 2 {
                warn!(
                    renew_deadline_ms = renew_deadline.as_millis() as u64,
                    validity_ms = validity.as_millis() as u64,
                    "--renew-deadline leaves the command less than 100 ms between SIGTERM and SIGKILL, or no SIGTERM, when Redis stops answering: the step-down at the renew deadline comes that close to the command's SIGKILL, 100 ms before the validity deadline"
                );
            }
            let supervisor =
                Supervisor::new(exec, &settings.identity, lease_name.as_str()).owns_every_orphan();
            match &guard {
                Some(guard) => supervisor.with_guard_file(guard.path()),
                None => supervisor,
            }
        });
        if let Some(supervisor) = &supervisor {
            let supervisor = supervisor.clone();
            shutdown.before_exit_at_once(move || supervisor.kill_now());
        }
        // After the command's kill: a guard file that does not answer must not delay it.
        if let Some(guard) = &guard {
            let guard = guard.clone();
            shutdown.before_exit_at_once(move || {
                guard.end_at_exit(WRITE_BOUND);
            });
        }
        if supervisor
            .as_ref()
            .is_some_and(Supervisor::ends_with_command)
        {
            elector = elector.stop_when_work_ends();
        }
        Ok(Self {
            elector,
            board,
            guard,
            heartbeat,
            clocks,
            eviction,
            candidacy,
            verdicts: None,
            told: Arc::new(()),
            supervisor,
            publisher,
            bound: shutdown_bound(settings).saturating_sub(NOTES_BOUND),
        })
    }

    /// Counts what the elector and the gates saw in `metrics`.
    pub(super) fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.elector = self.elector.with_hooks(metrics.clone());
        self.told = metrics;
        self
    }

    /// The command's starts and exits, if there is a command ([`Supervisor::runs`]).
    pub(super) fn command_runs(&self) -> Option<watch::Receiver<CommandRun>> {
        self.supervisor.as_ref().map(Supervisor::runs)
    }

    /// Gates the election on the candidate check's `verdicts`: while they do not
    /// [stand](Candidacy::stands), a follower does not contend and a leader steps down with
    /// reason `unhealthy`.
    pub(super) fn with_candidacy(mut self, verdicts: watch::Receiver<Candidacy>) -> Self {
        self.candidacy
            .send_replace(crate::candidacy::standing(&verdicts.borrow()));
        self.verdicts = Some(verdicts);
        self
    }

    /// Contends, with the publisher and the command in each term, until the elector ends by
    /// itself, `shutdown` is cancelled (then within the shutdown bound) or a configuration
    /// known to be unsafe ends it (docs/DESIGN.md, "Eviction"); then flushes the Kubernetes
    /// notes and removes the guard file.
    pub(super) async fn run(self, shutdown: CancellationToken) -> Ended {
        let Self {
            elector,
            board,
            guard,
            heartbeat: _,
            clocks: _,
            eviction,
            candidacy,
            verdicts,
            told,
            supervisor,
            publisher,
            bound,
        } = self;
        // The gates end when shutdown begins (no term follows), or with the elector.
        let gates_stop = shutdown.child_token();
        let eviction = eviction.spawn(
            elector.status(),
            elector.gates(),
            board.clone(),
            told.clone(),
            gates_stop.clone(),
        );
        let candidacy = verdicts.map(|verdicts| {
            crate::candidacy::follow(verdicts, candidacy, board.clone(), told, gates_stop.clone())
        });
        let elector_stop = shutdown.child_token();
        let work = {
            let publisher = publisher.clone();
            let supervisor = supervisor.clone();
            let elector_stop = elector_stop.clone();
            move |leadership: Leadership| {
                term(
                    leadership,
                    publisher.clone(),
                    supervisor.clone(),
                    elector_stop.clone(),
                )
            }
        };
        let mut unsafe_eviction = board.subscribe();
        let mut elector_task = tokio::spawn(elector.run(elector_stop, work));
        let mut refused = None;
        let ended = tokio::select! {
            _ = shutdown.cancelled() => None,
            ended = &mut elector_task => Some(ended),
            words = refused_as_unsafe(&mut unsafe_eviction) => {
                refused = Some(words);
                shutdown.cancel();
                None
            }
        };
        // From the drain's start, the whole bound: the elector's share, then the notes'.
        let ends_by = ended
            .is_none()
            .then(|| Instant::now() + bound + NOTES_BOUND);
        let ended = match ended {
            Some(ended) => ended,
            // Stepping down stops the command (within its grace period) and releases the lease.
            None => match tokio::time::timeout(bound, elector_task).await {
                Ok(ended) => ended,
                Err(_) => {
                    error!(
                        bound_ms = bound.as_millis() as u64,
                        "shutdown took too long; exiting anyway"
                    );
                    Ok(())
                }
            },
        };
        if let Err(join) = ended {
            error!(error = %join, "the elector task failed");
        }
        gates_stop.cancel();
        let _ = eviction.await;
        if let Some(task) = candidacy {
            let _ = task.await;
        }
        let ended = Ended {
            command: supervisor.and_then(|s| s.exit_code()),
            refused,
            ends_by,
        };
        if let Some(publisher) = &publisher {
            publisher.flush(ended.left(NOTES_BOUND)).await;
        }
        if let Some(guard) = &guard
            && !guard.end_at_exit(ended.left(WRITE_BOUND))
        {
            warn!(path = %guard.path().display(), "the guard file did not answer at exit; left in place");
        }
        ended
    }
}

/// The guard file: the one `--guard-file` names (refused with exit code 2 when it cannot be
/// written or another live leasehold writes it), else, when there is a command, one in the
/// runtime directory.
fn guard_file(
    settings: &ContenderSettings,
    lease: &LeaseName,
) -> Result<Option<Arc<GuardFile>>, CliError> {
    let guard = match (&settings.guard_file, &settings.exec) {
        (Some(path), _) => GuardFile::create(path, lease).map_err(|e| {
            CliError::Refused(format!("--guard-file {}: {}", path.display(), e.rule()))
        })?,
        (None, Some(_)) => GuardFile::in_runtime_dir(lease)
            .context("cannot create the guard file for the command (pass --guard-file)")?,
        (None, None) => return Ok(None),
    };
    Ok(Some(Arc::new(guard)))
}

/// One term of leadership: the Kubernetes parts and the command side by side. The term ends
/// when leadership ends, or when the command ends on its own (then the Kubernetes parts stop
/// with it). A command that ended the process (it exited while leading, and is not restarted)
/// stops the elector (`elector_stop`) once its term is over, for whatever reason the term
/// ended (a step-down may land while what the command left running is stopped, or a renewal in
/// flight may come back as a handover): no later term starts it again.
async fn term(
    leadership: Leadership,
    publisher: Option<Publisher>,
    supervisor: Option<Supervisor>,
    elector_stop: CancellationToken,
) -> Result<(), ExecError> {
    let stop_kubernetes = leadership.cancellation_token();
    let command = async {
        let result = match &supervisor {
            // A term after the command ended the process (one the elector began before it
            // stopped) runs nothing.
            Some(s) if s.exit_code().is_some() => Ok(()),
            Some(s) => {
                let result = s.lead(leadership.clone()).await;
                if s.exit_code().is_some() {
                    // Once the term is over, whatever its reason says (a renewal in flight may
                    // end it as a handover): so its reason stays the elector's.
                    let (leadership, elector_stop) = (leadership.clone(), elector_stop.clone());
                    tokio::spawn(async move {
                        leadership.lost().await;
                        elector_stop.cancel();
                    });
                }
                result
            }
            None => {
                leadership.lost().await;
                Ok(())
            }
        };
        stop_kubernetes.cancel();
        result
    };
    let kubernetes = async {
        if let Some(p) = &publisher {
            p.lead(leadership.clone(), stop_kubernetes.clone()).await;
        }
    };
    let (result, ()) = tokio::join!(command, kubernetes);
    result
}
