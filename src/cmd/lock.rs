//! `leasehold lock -- CMD`: a one-shot lock for Jobs and CronJobs. Acquire the lease within
//! `--wait` (one try by default), run the command once under the same supervision as `leasehold
//! run` (token in its environment, the guard file, the watchdog renewing, every descendant
//! stopped no later than the validity deadline), release, and exit with the command's code.
//! Not acquired in time: [`NOT_ACQUIRED`] and one log line naming the holder. Lost while the
//! command ran (the command is stopped first): [`LOST`].

use tracing::{info, warn};

use super::lease::connect;
use super::run::{guard_file, term};
use crate::cli::{CliError, LeaseSource, LockSettings};
use crate::elector::{Elector, Leadership, StepDownReason, refused_as_unsafe};
use crate::exec::Supervisor;
use crate::k8s::{self, K8sError, Publisher};
use crate::lease::{CooldownState, LeaseName, OwnerId};
use crate::shutdown::Shutdown;

/// Exit code when the lock was not acquired within `--wait` (EX_TEMPFAIL: try again later).
pub const NOT_ACQUIRED: i32 = 75;
/// Exit code when the lock was lost while the command ran; the command was stopped.
pub const LOST: i32 = 76;
/// Exit code when a signal stopped leasehold and the command it was running (128 + SIGTERM).
const SIGNALLED: i32 = 143;

/// leasehold's exit code after a lock: `led` whether the lock was ever held, `reason` why its
/// term ended, `command` the command's own exit code when it ended on its own.
pub fn exit_code(led: bool, reason: Option<StepDownReason>, command: Option<i32>) -> i32 {
    use StepDownReason::*;
    match (led, reason) {
        (false, _) => NOT_ACQUIRED,
        (true, Some(WorkEnded | WorkFailed | WorkPanicked) | None) => command.unwrap_or(1),
        (true, Some(Shutdown)) => command.unwrap_or(SIGNALLED),
        (
            true,
            Some(
                Lost
                | RenewDeadlinePassed
                | ValidityDeadlinePassed
                | RedisMayEvict
                | Handover
                | Unhealthy,
            ),
        ) => LOST,
    }
}

/// The lease a lock takes: the name given, else the CronJob (or Job) that owns this pod.
pub async fn resolve_lock_lease(
    source: &LeaseSource,
    client: Option<&kube::Client>,
) -> Result<LeaseName, CliError> {
    match (source, client) {
        (LeaseSource::Named(name), _) => Ok(name.clone()),
        (LeaseSource::OwningDeployment { namespace, pod }, Some(client)) => {
            let owner = k8s::owning_job(client, namespace, pod)
                .await
                .map_err(|e| match e {
                    K8sError::NotAJob { .. } => CliError::Refused(e.to_string()),
                    other => CliError::Failed(
                        anyhow::Error::new(other).context("cannot name the lock after the pod's Job"),
                    ),
                })?;
            let name = owner.lease_name(namespace);
            LeaseName::new(name)
                .map_err(|e| CliError::Refused(format!("the Job's name makes no lease name: {e}")))
        }
        (LeaseSource::OwningDeployment { .. }, None) => Err(CliError::Refused(
            "no lease name: pass --lease-name (there is no Kubernetes API to find this pod's Job)"
                .into(),
        )),
        (LeaseSource::Unknown, _) => Err(CliError::Refused(
            "no lease name: pass --lease-name, or run in a Job's pod with POD_NAME and POD_NAMESPACE from the downward API".into(),
        )),
    }
}

/// Takes the lock, runs the command once, releases; returns the process exit code.
pub async fn lock(settings: LockSettings, shutdown: Shutdown) -> Result<i32, CliError> {
    let LockSettings { run, wait } = settings;
    let client = connect(run.kube.mode).await?;
    let lease_name = resolve_lock_lease(&run.lease, client.as_ref()).await?;
    let owner = OwnerId::generate(&run.identity).map_err(|e| CliError::Refused(e.to_string()))?;
    let lease = run
        .redis
        .lease(lease_name.clone(), owner)
        .map_err(anyhow::Error::from)?;
    let guard = guard_file(&run, &lease_name)?;
    let mut elector = Elector::new(lease, run.timing)?
        .with_eviction_mode(run.redis.eviction)
        .stop_when_work_ends()
        .for_one_term(wait);
    if let Some(guard) = &guard {
        elector = elector.with_guard_file(guard.clone());
    }
    let status = elector.status();
    let lease = elector.lease().clone();
    let supervisor = run.exec.clone().map(|exec| {
        let supervisor =
            Supervisor::new(exec, &run.identity, lease_name.as_str()).owns_every_orphan();
        match &guard {
            Some(guard) => supervisor.with_guard_file(guard.path()),
            None => supervisor,
        }
    });
    // The Kubernetes parts only when one is on: with all of them off, a lock reads only its pod
    // and its Job (for the name).
    let parts_on = run.kube.leader_label.is_some() || run.kube.lease_mirror || run.kube.events;
    let cluster = client.filter(|_| parts_on).map(|client| {
        Publisher::new(
            client,
            &run.namespace,
            &run.identity,
            lease_name.as_str(),
            None,
            run.kube.clone(),
            run.timing,
        )
        .without_handover_annotation()
    });
    info!(
        identity = %run.identity,
        lease = %lease_name,
        redis = %run.redis.redacted_url(),
        wait_ms = wait.as_millis() as u64,
        command = run.exec.as_ref().map(|e| e.command.join(" ")).unwrap_or_default(),
        "leasehold lock starting"
    );
    if let Some(supervisor) = &supervisor {
        let supervisor = supervisor.clone();
        shutdown.before_exit_at_once(move || supervisor.kill_now());
    }
    let shutdown = shutdown.token();
    let work = {
        let cluster = cluster.clone();
        let supervisor = supervisor.clone();
        move |leadership: Leadership| term(leadership, cluster.clone(), supervisor.clone())
    };
    // A configuration known to be unsafe ends the lock too, with exit code 2 (DESIGN.md,
    // "Eviction").
    let mut unsafe_eviction = elector.status();
    let elector = elector.run(shutdown.clone(), work);
    tokio::pin!(elector);
    let refused = tokio::select! {
        _ = &mut elector => None,
        words = refused_as_unsafe(&mut unsafe_eviction) => {
            shutdown.cancel();
            elector.await;
            Some(words)
        }
    };
    if let Some(cluster) = &cluster {
        cluster.flush(std::time::Duration::from_secs(2)).await;
    }
    if let Some(guard) = &guard {
        guard.remove();
    }
    if let Some(words) = refused {
        return Err(CliError::Refused(words));
    }
    let seen = status.borrow().clone();
    let led = seen.transitions > 0;
    let reason = seen.last_step_down.as_ref().map(|s| s.reason);
    let code = exit_code(led, reason, supervisor.and_then(|s| s.exit_code()));
    if led {
        report_term(&lease_name, reason, code);
    } else {
        // Who holds it now, for the one line that says why the command did not run.
        let now = lease.observe(run.timing.call_timeout()).await.ok();
        let holder = now.as_ref().and_then(|o| o.holder.as_ref());
        let cooldown_ms = match now.as_ref().map(|o| o.cooldown) {
            Some(CooldownState::Running(left)) => Some(left.as_millis() as u64),
            _ => None,
        };
        warn!(
            lease = %lease_name,
            holder = holder.map(|h| h.identity()).unwrap_or(""),
            token = holder.and_then(|h| h.token).map(|t| t.0),
            cooldown_ms,
            redis_error = seen.redis.last_error.as_deref().unwrap_or(""),
            code,
            "lock not acquired within --wait"
        );
    }
    Ok(code)
}

/// The one log line of how a term of the lock ended.
fn report_term(lease: &LeaseName, reason: Option<StepDownReason>, code: i32) {
    if code == LOST {
        warn!(%lease, reason = %reason.map(|r| r.to_string()).unwrap_or_default(), code, "lock lost while the command ran; the command was stopped");
    } else {
        info!(%lease, code, "lock released; exiting with the command's exit code");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use StepDownReason::*;

    #[test]
    fn exit_code_table() {
        // (led, reason, command's code) -> exit code
        let cases = [
            (false, None, None, NOT_ACQUIRED),
            (false, Some(Shutdown), None, NOT_ACQUIRED),
            (true, Some(WorkEnded), Some(0), 0),
            (true, Some(WorkEnded), Some(7), 7),
            (true, Some(WorkFailed), None, 1),
            (true, Some(Lost), Some(143), LOST),
            (true, Some(RenewDeadlinePassed), None, LOST),
            (true, Some(ValidityDeadlinePassed), None, LOST),
            (true, Some(Handover), None, LOST),
            (true, Some(Shutdown), None, SIGNALLED),
            (true, Some(Shutdown), Some(0), 0),
        ];
        for (led, reason, command, want) in cases {
            assert_eq!(
                exit_code(led, reason, command),
                want,
                "{led} {reason:?} {command:?}"
            );
        }
    }
}
