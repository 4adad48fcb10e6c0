//! The Lease mirror: a `coordination.k8s.io/v1` Lease named after the Deployment, kept by the
//! leader, so that `kubectl get lease` shows who leads. It mirrors; the Redis lease decides. Its
//! `renewTime` is the term's last renewal, not the mirror's last write, and the leader takes its
//! name off after the term.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::{Inner, K8sError, OwningDeployment};
use crate::clock::BootInstant;
use crate::elector::{Leadership, Timing, backoff};

/// The mirror's name: the Deployment's, else the lease name after its namespace with `/` as
/// `.` (a lock's `shop/cronjob/web` is `cronjob.web`, not Deployment `web`'s mirror); refused
/// when it is no valid object name (a DNS subdomain).
pub(super) fn lease_name(deployment: Option<&str>, lease: &str) -> Result<String, K8sError> {
    let name = match deployment {
        Some(name) => name.to_owned(),
        None => lease
            .split_once('/')
            .map_or(lease, |(_, name)| name)
            .replace('/', "."),
    };
    if super::names::is_dns_subdomain(&name) {
        Ok(name)
    } else {
        Err(K8sError::NoMirrorName {
            lease: lease.to_owned(),
            name,
        })
    }
}

/// Puts on `meta` what the mirror carries besides the holder, keeping what else it has: the
/// owning Deployment's labels and an owner reference to it, so that `kubectl get lease -l
/// app.kubernetes.io/instance=…` finds it and deleting the Deployment deletes it.
fn belong(deployment: Option<&OwningDeployment>, meta: &mut ObjectMeta) {
    let Some(deployment) = deployment else {
        return;
    };
    if !deployment.labels.is_empty() {
        let labels = meta.labels.get_or_insert_with(BTreeMap::new);
        labels.extend(deployment.labels.clone());
    }
    if let Some(owner) = &deployment.owner {
        let owners = meta.owner_references.get_or_insert_with(Vec::new);
        if !owners.iter().any(|o| o.uid == owner.uid) {
            owners.push(owner.clone());
        }
    }
}

/// How often the leader refreshes `renewTime`.
fn interval(timing: &Timing) -> Duration {
    timing.retry_period.max(timing.lease_duration / 3)
}

/// Writes the mirror (in this pod's namespace) at once, then refreshes it until `stop`.
pub(super) async fn keep(
    inner: &Inner,
    name: &str,
    leadership: &Leadership,
    stop: &CancellationToken,
) {
    let leases: Api<Lease> = Api::namespaced(inner.client.clone(), &inner.namespace);
    let timing = &inner.timing;
    let mut failures = 0u32;
    loop {
        let pause = match write(&leases, inner, name, leadership).await {
            Ok(()) => {
                failures = 0;
                interval(timing)
            }
            Err(K8sError::NotLeader(_)) => return,
            Err(err) => {
                failures += 1;
                if failures == 1 {
                    warn!(lease = %name, error = %err, "could not update the Lease mirror");
                } else {
                    debug!(lease = %name, error = %err, failures, "could not update the Lease mirror");
                }
                // A conflict means someone else wrote it: read again soon; so for a failure that
                // may pass. A refusal (a missing permission) is asked again less and less often.
                if super::refused(&err) {
                    backoff(timing.retry_period, failures)
                } else {
                    timing.retry_period / 2
                }
            }
        };
        tokio::select! {
            biased;
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

/// One read-modify-write with optimistic concurrency: a conflicting write answers 409 and the
/// next round reads again.
async fn write(
    leases: &Api<Lease>,
    inner: &Inner,
    name: &str,
    leadership: &Leadership,
) -> Result<(), K8sError> {
    let (identity, deployment, timing) =
        (&inner.identity, inner.deployment.as_ref(), &inner.timing);
    let what = |verb: &'static str| move || format!("{verb} lease {name}");
    // When the last renewal was sent (its validity counts from then): while renewals fail, the
    // mirror says the term is running out, as the Redis lease does. A validity cut short for a
    // fast Redis clock would put it before the acquire.
    let renewed =
        (leadership.valid_until().saturating_sub(timing.validity())).max(leadership.acquired_at());
    let duration_seconds =
        i32::try_from(timing.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
    let existing = super::call(what("get"), leases.get_opt(name)).await?;
    let token = leadership.check()?;
    match existing {
        None => {
            let mut metadata = ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            };
            belong(deployment, &mut metadata);
            let lease = Lease {
                metadata,
                spec: Some(LeaseSpec {
                    holder_identity: Some(identity.to_owned()),
                    acquire_time: Some(wall_time(leadership, leadership.acquired_at())),
                    renew_time: Some(wall_time(leadership, renewed)),
                    lease_duration_seconds: Some(duration_seconds),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            super::call(
                what("create"),
                leases.create(&PostParams::default(), &lease),
            )
            .await?;
            info!(lease = %name, holder = %identity, token = token.0, "created the Lease mirror");
        }
        Some(mut lease) => {
            // A mirror written before it carried them, or by an earlier release of the chart.
            belong(deployment, &mut lease.metadata);
            let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
            if spec.holder_identity.as_deref() != Some(identity) {
                // Held before, by another, or by a term that ended and withdrew its name.
                let held = spec.holder_identity.is_some() || spec.acquire_time.is_some();
                spec.holder_identity = Some(identity.to_owned());
                spec.acquire_time = Some(wall_time(leadership, leadership.acquired_at()));
                if held {
                    spec.lease_transitions =
                        Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
                }
                info!(lease = %name, holder = %identity, token = token.0, "took over the Lease mirror");
            }
            spec.renew_time = Some(wall_time(leadership, renewed));
            spec.lease_duration_seconds = Some(duration_seconds);
            let params = PostParams::default();
            super::call(what("update"), leases.replace(name, &params, &lease)).await?;
        }
    }
    Ok(())
}

/// The wall-clock time of `at`, an instant of this term on the boot clock.
fn wall_time(leadership: &Leadership, at: BootInstant) -> MicroTime {
    let ago = at.until(leadership.clock().now());
    let now = Timestamp::now();
    MicroTime(now.saturating_sub(ago).unwrap_or(now))
}

/// After a term: takes this replica's name off the mirror if it still holds it, so that
/// `kubectl get lease` names no leader where none leads (scaled to zero, Redis down). A write of
/// the successor's answers the read-modify-write with a conflict, and is left. Stops once a
/// later term of this replica began (`still` false).
pub(super) async fn withdraw(inner: &Inner, name: &str, still: impl Fn() -> bool) {
    let leases: Api<Lease> = Api::namespaced(inner.client.clone(), &inner.namespace);
    let what = |verb: &'static str| move || format!("{verb} lease {name}");
    let ours = |l: &Lease| {
        l.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) == Some(&*inner.identity)
    };
    // A conflict is a write between the read and the update: read again, a few times.
    for _ in 0..3 {
        let withdrawn = async {
            let lease = super::call(what("get"), leases.get_opt(name)).await?;
            let Some(mut lease) = lease.filter(ours).filter(|_| still()) else {
                return Ok(false);
            };
            lease.spec.get_or_insert_default().holder_identity = None;
            let params = PostParams::default();
            super::call(what("update"), leases.replace(name, &params, &lease)).await?;
            Ok::<_, K8sError>(true)
        };
        match withdrawn.await {
            Ok(false) => return,
            Ok(true) => {
                return info!(lease = %name, holder = %inner.identity, "withdrew from the Lease mirror");
            }
            Err(K8sError::Api {
                source: kube::Error::Api(s),
                ..
            }) if s.is_conflict() => {}
            Err(err) => {
                return warn!(lease = %name, error = %err, "could not withdraw the Lease mirror");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mirror_is_named_after_the_deployment() {
        assert_eq!(
            lease_name(Some("web"), "shop/other").ok().as_deref(),
            Some("web")
        );
        assert_eq!(lease_name(None, "shop/web").ok().as_deref(), Some("web"));
        assert!(
            lease_name(None, "shop/Web_1").is_err(),
            "not a DNS subdomain"
        );
        assert!(lease_name(None, "shop/").is_err());
        // A lock's lease is named after its Job or CronJob: its mirror is not the Deployment's
        // of the same name, which another leader keeps.
        let lock = lease_name(None, "shop/cronjob/web").ok();
        assert_eq!(lock.as_deref(), Some("cronjob.web"));
        assert_eq!(
            lease_name(None, "shop/job/web").ok().as_deref(),
            Some("job.web")
        );
    }

    #[test]
    fn the_mirror_is_refreshed_a_few_times_per_lease_duration() {
        assert_eq!(interval(&Timing::default()), Duration::from_secs(5));
    }
}
