//! `leasehold run`: one replica. Names the lease, starts the HTTP endpoints, contends, and
//! while leading runs the Kubernetes parts and the singleton command; on SIGTERM or SIGINT it
//! steps down, releases the lease and exits 0 within a bounded grace period (or with the
//! command's exit code when the command ended on its own).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

use crate::config::{LeaseSource, RunSettings};
use crate::elector::{Elector, Leadership};
use crate::exec::{ExecError, Supervisor};
use crate::guard::GuardFile;
use crate::http::{self, Endpoints};
use crate::k8s::{self, Cluster, K8sError, OwningDeployment};
use crate::lease::{LeaseName, OwnerId};
use crate::metrics::Metrics;

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

/// A failure that is the user's to fix (exit code 2), as opposed to a runtime failure.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);

/// Finds the lease name and, when there is a cluster, the owning Deployment. `pod` is this
/// pod (`$POD_NAME`) in `namespace`, when running in one.
pub async fn resolve_lease(
    source: &LeaseSource,
    client: Option<&kube::Client>,
    namespace: &str,
    pod: Option<&str>,
) -> anyhow::Result<(LeaseName, Option<OwningDeployment>)> {
    match (source, client) {
        (LeaseSource::Named(name), None) => Ok((name.clone(), None)),
        (LeaseSource::Named(name), Some(client)) => {
            // The name is given; the Deployment still scopes the label and carries the events.
            let Some(pod) = pod else {
                return Ok((name.clone(), None));
            };
            let deployment = match k8s::owning_deployment(client, namespace, pod).await {
                Ok(d) => Some(d),
                Err(err) => {
                    info!(error = %err, "no owning Deployment found; the leader label is kept on this pod only");
                    None
                }
            };
            Ok((name.clone(), deployment))
        }
        (LeaseSource::OwningDeployment { namespace, pod }, Some(client)) => {
            let deployment = k8s::owning_deployment(client, namespace, pod)
                .await
                .map_err(|e| match e {
                    K8sError::NotADeployment { .. } => anyhow::Error::new(InputError(e.to_string())),
                    other => anyhow::Error::new(other).context("cannot name the lease after the Deployment"),
                })?;
            let name = LeaseName::for_deployment(namespace, &deployment.name)
                .map_err(|e| InputError(format!("the Deployment's name makes no lease name: {e}")))?;
            Ok((name, Some(deployment)))
        }
        (LeaseSource::OwningDeployment { .. }, None) => Err(InputError(
            "no lease name: pass --lease-name (there is no Kubernetes API to find this pod's Deployment)".into(),
        )
        .into()),
        (LeaseSource::Unknown, _) => Err(InputError(
            "no lease name: pass --lease-name, or run in a pod of a Deployment with POD_NAME and POD_NAMESPACE from the downward API".into(),
        )
        .into()),
    }
}

/// Runs one replica until shutdown; returns the process exit code.
pub async fn run(settings: RunSettings) -> anyhow::Result<i32> {
    let shutdown = CancellationToken::new();
    spawn_signal_handler(shutdown.clone())?;

    let client = k8s::connect(settings.kube.mode)
        .await
        .map_err(|e| match e {
            K8sError::NoCluster(_) => anyhow::Error::new(InputError(e.to_string())),
            other => anyhow::Error::new(other),
        })?;
    let (lease_name, deployment) = resolve_lease(
        &settings.lease,
        client.as_ref(),
        &settings.namespace,
        settings.pod.as_deref(),
    )
    .await?;
    let owner = OwnerId::generate(&settings.identity).map_err(|e| InputError(e.to_string()))?;
    let lease = settings.redis.lease(lease_name.clone(), owner)?;
    let lease_key = lease.keys().lease.clone();
    let clock = lease.clock().clone();
    let metrics = Arc::new(Metrics::new(&settings.identity, lease_name.as_str()));
    let guard = guard_file(&settings, &lease_name)?;
    let mut elector = Elector::new(lease, settings.timing)
        .map_err(|e| InputError(e.to_string()))?
        .with_eviction_mode(settings.redis.eviction)
        .with_observer(metrics.clone());
    if let Some(guard) = &guard {
        elector = elector.with_guard_file(guard.clone());
    }

    let http_stop = CancellationToken::new();
    let endpoints = Endpoints::new(
        elector.status(),
        metrics,
        settings.readiness,
        lease_key.clone(),
        clock,
    );
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

    let cluster = client.map(|client| {
        Cluster::new(
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
    if supervisor
        .as_ref()
        .is_some_and(Supervisor::ends_with_command)
    {
        elector = elector.stop_when_work_ends();
    }

    let work = {
        let cluster = cluster.clone();
        let supervisor = supervisor.clone();
        move |leadership: Leadership| term(leadership, cluster.clone(), supervisor.clone())
    };
    let mut elector_task = tokio::spawn(elector.run(shutdown.clone(), work));

    // The elector ends on a signal, or by itself when the command ended.
    let ended = tokio::select! {
        _ = shutdown.cancelled() => None,
        ended = &mut elector_task => Some(ended),
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
    if let Some(cluster) = &cluster {
        cluster.flush(NOTES_BOUND).await;
    }
    http_stop.cancel();
    let _ = server.await;
    if let Some(guard) = &guard {
        guard.remove();
    }
    let code = supervisor.and_then(|s| s.exit_code()).unwrap_or(0);
    info!(code, "leasehold stopped");
    Ok(code)
}

/// The guard file: the one `--guard-file` names (refused with exit code 2 when it cannot be
/// written), else, when there is a command, one in the runtime directory.
pub(crate) fn guard_file(
    settings: &RunSettings,
    lease: &LeaseName,
) -> anyhow::Result<Option<Arc<GuardFile>>> {
    let guard = match (&settings.guard_file, &settings.exec) {
        (Some(path), _) => GuardFile::create(path)
            .map_err(|e| InputError(format!("--guard-file {}: {}", path.display(), e.rule())))?,
        (None, Some(_)) => GuardFile::in_runtime_dir(lease.as_str())
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
    cluster: Option<Cluster>,
    supervisor: Option<Supervisor>,
) -> Result<(), ExecError> {
    let stop_cluster = leadership.cancellation_token();
    let command = async {
        let result = match &supervisor {
            Some(s) => s.lead(leadership.clone()).await,
            None => {
                leadership.lost().await;
                Ok(())
            }
        };
        stop_cluster.cancel();
        result
    };
    let kubernetes = async {
        if let Some(c) = &cluster {
            c.lead(leadership.clone(), stop_cluster.clone()).await;
        }
    };
    let (result, ()) = tokio::join!(command, kubernetes);
    result
}

pub(crate) fn spawn_signal_handler(shutdown: CancellationToken) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("install the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("install the SIGINT handler")?;
    tokio::spawn(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        info!(
            signal = name,
            "shutting down: stepping down and releasing the lease"
        );
        shutdown.cancel();
    });
    Ok(())
}
