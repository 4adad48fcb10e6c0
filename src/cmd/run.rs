//! `leasehold run`: one common. Names the lease, starts the HTTP endpoints, contends, and
//! while leading runs the Kubernetes parts and the singleton command; on SIGTERM, SIGINT or
//! SIGHUP it steps down, releases the lease and exits 0 within a bounded grace period (or with
//! the command's exit code when the command ended on its own).

use std::sync::Arc;

use anyhow::Context;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::contender::Contender;
use super::lease::{Workload, connect, deployment_of, name_lease, publisher};
use crate::cli::{CliError, RunSettings};
use crate::exec::ExecSettings;
use crate::http::{self, DRAIN, Endpoints};
use crate::metrics::Metrics;
use crate::open_files;
use crate::owned_file::WRITE_BOUND;
use crate::shutdown::Shutdown;
use crate::status_file::{StatusDocument, StatusFile};

/// Runs one replica until `shutdown` begins (and drains); returns the process exit code.
pub async fn run(settings: RunSettings, shutdown: Shutdown) -> Result<i32, CliError> {
    let common = &settings.contender;
    // Before anything is opened: files for every HTTP connection allowed, and for the rest.
    open_files::raise_to(settings.http_limits.files());
    let client = connect(common.kube.mode).await?;
    let (lease_name, found) =
        name_lease(&common.lease, client.as_ref(), Workload::Deployment).await?;
    let deployment = match (found, &client, &common.pod) {
        (Some(found), _, _) => Some(found),
        (None, Some(client), Some(pod)) => deployment_of(client, &common.namespace, pod).await?,
        _ => None,
    };
    let kubernetes = client.is_some();
    let publisher = publisher(client, common, &lease_name, deployment)?;
    if let Some(publisher) = &publisher {
        publisher.withdraw_earlier_label().await;
    }
    let mut contender = Contender::new(common, &lease_name, publisher, &shutdown)?;
    let lease_key = contender.elector.lease().keys().lease.clone();
    let clock = contender.elector.lease().clock().clone();
    let metrics = Arc::new(Metrics::new(&common.identity, lease_name.as_str()));
    let status_file = settings
        .status_file
        .clone()
        .map(|path| {
            StatusFile::claim(path.clone(), &lease_name)
                .map_err(|e| CliError::Refused(format!("--status-file {}: {e}", path.display())))
        })
        .transpose()?;
    contender = contender.with_metrics(metrics.clone());
    if let Some(check) = settings.candidacy.clone() {
        let verdicts = crate::candidacy::spawn(
            check,
            contender.elector.status(),
            contender.command_runs(),
            shutdown.token().child_token(),
        );
        contender = contender.with_candidacy(verdicts);
    }
    let watchers = contender.board.watchers().clone();
    let http_stop = CancellationToken::new();
    let endpoints = Endpoints::new(
        contender.board.subscribe(),
        metrics,
        settings.readiness,
        lease_key.clone(),
        clock.clone(),
    )
    .with_watchers(watchers.clone())
    .with_clocks(contender.clocks.clone())
    .with_heartbeat(contender.heartbeat.clone())
    .with_limits(settings.http_limits);
    let addr = settings.http_addr;
    let (bound, serve) = match http::bind(addr, endpoints, http_stop.clone()).await {
        Ok(bound) => bound,
        // The input's fault, unlike a port another process holds; but a new IPv6 address is
        // not usable until duplicate address detection ends, a moment after the pod starts.
        Err(e) if e.kind() == std::io::ErrorKind::AddrNotAvailable && addr.is_ipv4() => {
            let rule = format!("is no address of this machine ({e})");
            return Err(CliError::value("http-addr", addr, rule));
        }
        Err(e) => Err(e).with_context(|| format!("cannot listen on --http-addr {addr}"))?,
    };
    // After the bind: a port already taken ends the start before the file's first write.
    let status_file_stop = CancellationToken::new();
    let status_file = status_file.map(|file| {
        let (lease_key, clock) = (lease_key.clone(), clock.clone());
        let clocks = contender.clocks.clone();
        file.spawn(
            &watchers,
            contender.board.subscribe(),
            move |status| {
                let (now, lead) = (clock.now(), clock.wall_lead());
                StatusDocument::json(status, &lease_key, now, lead, clocks.redis_clock())
            },
            status_file_stop.clone(),
        )
    });

    info!(
        identity = %common.identity,
        lease = %lease_name,
        lease_key = %lease_key,
        redis = %common.redis.target.redacted_url(),
        http = %bound,
        readiness = %settings.readiness,
        lease_duration_ms = common.timing.lease_duration.as_millis() as u64,
        renew_deadline_ms = common.timing.renew_deadline.as_millis() as u64,
        retry_period_ms = common.timing.retry_period.as_millis() as u64,
        kubernetes,
        command = common.exec.as_ref().map(ExecSettings::shown).unwrap_or_default(),
        guard_file = contender.guard.as_ref().map(|g| g.path().display().to_string()).unwrap_or_default(),
        "leasehold starting"
    );
    // Served only once the start line is out: whoever reads `/readyz` finds it in the log.
    let server = tokio::spawn(serve);

    // The elector ends on a signal, or by itself when the command ended; a configuration known
    // to be unsafe ends it too, and the process exits 2.
    let ended = contender.run(shutdown.token()).await;
    status_file_stop.cancel();
    if let (Some(task), Some(path)) = (status_file, &settings.status_file)
        && tokio::time::timeout(ended.left(WRITE_BOUND), task)
            .await
            .is_err()
    {
        warn!(path = %path.display(), "the status file did not answer at exit; its last write is left undone");
    }
    http_stop.cancel();
    let _ = tokio::time::timeout(ended.left(DRAIN), server).await;
    let code = ended.command_code()?.unwrap_or(0);
    info!(code, "leasehold stopped");
    Ok(code)
}
