//! `leasehold run`: one replica. Names the lease, starts the HTTP endpoints, contends, and
//! while leading runs the Kubernetes parts and the singleton command; on SIGTERM or SIGINT it
//! steps down, releases the lease and exits 0 within a bounded grace period (or with the
//! command's exit code when the command ended on its own).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

use super::lease::connect;
pub use super::lease::resolve_lease;
use crate::cli::{CliError, RunSettings};
use crate::elector::{Elector, Leadership, refused_as_unsafe};
use crate::exec::{ExecError, Supervisor};
use crate::guard::GuardFile;
use crate::http::{self, Endpoints};
use crate::k8s::Publisher;
use crate::lease::{LeaseName, OwnerId};
use crate::metrics::Metrics;
use crate::shutdown::Shutdown;
use crate::status_file::{StatusDocument, StatusFile};

/// Slack for stepping down, releasing and stopping the HTTP server after the command stopped.
const SHUTDOWN_SLACK: Duration = Duration::from_secs(5);
/// How long the Kubernetes step-down notes (label removal, event) may take at exit.
const NOTES_BOUND: Duration = Duration::from_secs(2);

/// The longest a graceful shutdown of `settings` takes, from SIGTERM to exit: the command's
/// grace period, a release (the call timeout), and slack. A pod's
/// `terminationGracePeriodSeconds` must exceed it.
pub fn shutdown_bound(settings: &RunSettings) -> Duration {
    let grace = settings
        .exec
        .as_ref()
        .map_or(Duration::ZERO, |e| e.grace_period);
    grace + settings.timing.call_timeout() + SHUTDOWN_SLACK + NOTES_BOUND
}

/// Runs one replica until `shutdown` begins (and drains); returns the process exit code.
pub async fn run(settings: RunSettings, shutdown: Shutdown) -> Result<i32, CliError> {
    let client = connect(settings.kube.mode).await?;
    let (lease_name, deployment) = resolve_lease(
        &settings.lease,
        client.as_ref(),
        &settings.namespace,
        settings.pod.as_deref(),
    )
    .await?;
    let owner =
        OwnerId::generate(&settings.identity).map_err(|e| CliError::Refused(e.to_string()))?;
    let lease = settings
        .redis
        .lease(lease_name.clone(), owner)
        .map_err(anyhow::Error::new)?;
    let lease_key = lease.keys().lease.clone();
    let clock = lease.clock().clone();
    let metrics = Arc::new(Metrics::new(&settings.identity, lease_name.as_str()));
    let guard = guard_file(&settings, &lease_name)?;
    let status_file = settings
        .status_file
        .clone()
        .map(|path| {
            StatusFile::claim(path.clone(), &lease_name)
                .map_err(|e| CliError::Refused(format!("--status-file {}: {e}", path.display())))
        })
        .transpose()?;
    let mut elector = Elector::new(lease, settings.timing)
        .map_err(CliError::Timing)?
        .with_eviction_mode(settings.redis.eviction)
        .with_observer(metrics.clone());
    if let Some(guard) = &guard {
        elector = elector.with_guard_file(guard.clone());
    }

    if let Some(check) = settings.candidacy.clone() {
        let verdicts =
            crate::candidacy::spawn(check, elector.status(), shutdown.token().child_token());
        elector = elector.with_candidacy(verdicts);
    }
    let watchers = elector.watchers();
    let status_file_stop = CancellationToken::new();
    let status_file = status_file.map(|file| {
        let (lease_key, clock) = (lease_key.clone(), clock.clone());
        file.spawn(
            &watchers,
            elector.status(),
            move |status| StatusDocument::json(status, &lease_key, clock.now()),
            status_file_stop.clone(),
        )
    });

    let http_stop = CancellationToken::new();
    let endpoints = Endpoints::new(
        elector.status(),
        metrics,
        settings.readiness,
        lease_key.clone(),
        clock,
    )
    .with_watchers(watchers);
    let (bound, serve) = http::bind(settings.http_addr, endpoints, http_stop.clone())
        .await
        .with_context(|| format!("cannot listen on --http-addr {}", settings.http_addr))?;
    let server = tokio::spawn(serve);

    info!(
        identity = %settings.identity,
        lease = %lease_name,
        lease_key = %lease_key,
        redis = %settings.redis.redacted_url(),
        http = %bound,
        readiness = ?settings.readiness,
        lease_duration_ms = settings.timing.lease_duration.as_millis() as u64,
        renew_deadline_ms = settings.timing.renew_deadline.as_millis() as u64,
        retry_period_ms = settings.timing.retry_period.as_millis() as u64,
        kubernetes = client.is_some(),
        command = settings.exec.as_ref().map(|e| e.command.join(" ")).unwrap_or_default(),
        guard_file = guard.as_ref().map(|g| g.path().display().to_string()).unwrap_or_default(),
        "leasehold starting"
    );

    let publisher = client.map(|client| {
        Publisher::new(
            client,
            &settings.namespace,
            &settings.identity,
            lease_name.as_str(),
            deployment,
            settings.kube.clone(),
            settings.timing,
        )
    });
    let supervisor = settings.exec.clone().map(|exec| {
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
    let shutdown = shutdown.token();
    if supervisor
        .as_ref()
        .is_some_and(Supervisor::ends_with_command)
    {
        elector = elector.stop_when_work_ends();
    }

    let work = {
        let publisher = publisher.clone();
        let supervisor = supervisor.clone();
        move |leadership: Leadership| term(leadership, publisher.clone(), supervisor.clone())
    };
    let mut unsafe_eviction = elector.status();
    let mut elector_task = tokio::spawn(elector.run(shutdown.clone(), work));

    // The elector ends on a signal, or by itself when the command ended; a configuration known
    // to be unsafe ends it too, and the process exits 2 (docs/DESIGN.md, "Eviction").
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
    let ended = match ended {
        Some(ended) => ended,
        None => {
            // Stepping down stops the command (within its grace period) and releases the lease.
            let bound = shutdown_bound(&settings).saturating_sub(NOTES_BOUND);
            match tokio::time::timeout(bound, elector_task).await {
                Ok(ended) => ended,
                Err(_) => {
                    error!(
                        bound_ms = bound.as_millis() as u64,
                        "shutdown took too long; exiting anyway"
                    );
                    Ok(())
                }
            }
        }
    };
    if let Err(join) = ended {
        error!(error = %join, "the elector task failed");
    }
    if let Some(publisher) = &publisher {
        publisher.flush(NOTES_BOUND).await;
    }
    status_file_stop.cancel();
    if let Some(task) = status_file {
        let _ = task.await;
    }
    http_stop.cancel();
    let _ = server.await;
    if let Some(guard) = &guard {
        guard.remove();
    }
    if let Some(words) = refused {
        return Err(CliError::Refused(words));
    }
    let code = supervisor.and_then(|s| s.exit_code()).unwrap_or(0);
    info!(code, "leasehold stopped");
    Ok(code)
}

/// The guard file: the one `--guard-file` names (refused with exit code 2 when it cannot be
/// written or another live leasehold writes it), else, when there is a command, one in the
/// runtime directory.
pub(crate) fn guard_file(
    settings: &RunSettings,
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
/// with it).
pub(crate) async fn term(
    leadership: Leadership,
    publisher: Option<Publisher>,
    supervisor: Option<Supervisor>,
) -> Result<(), ExecError> {
    let stop_kubernetes = leadership.cancellation_token();
    let command = async {
        let result = match &supervisor {
            Some(s) => s.lead(leadership.clone()).await,
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
