//! Naming the lease: from the flag, or after the workload that owns this pod (its Deployment,
//! or for `lock` its Job or CronJob), the one place every command names it.

use std::time::Duration;

use tracing::info;

use crate::cli::{CliError, ContenderSettings, LeaseSource, StatusSettings};
use crate::k8s::{self, K8sError, KubernetesMode, OwningDeployment, Publisher};
use crate::lease::{LeaseName, OwnerId, RedisLease};

/// The kind of workload a lease is named after when no flag names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// The Deployment of a replica (`run`, and `status` and `step-down` asking about one).
    Deployment,
    /// The Job (or the CronJob behind it) of `lock`.
    Job,
}

impl Workload {
    /// How the refusals name it.
    fn words(self) -> &'static str {
        match self {
            Workload::Deployment => "Deployment",
            Workload::Job => "Job",
        }
    }

    /// A pod that no such workload owns is the user's to fix; any other failure to find it
    /// is not.
    fn not_found(self, e: K8sError) -> CliError {
        match e {
            K8sError::NotADeployment { .. } | K8sError::NotAJob { .. } => {
                CliError::Refused(e.to_string())
            }
            other => CliError::Failed(anyhow::Error::new(other).context(match self {
                Workload::Deployment => "cannot name the lease after the Deployment",
                Workload::Job => "cannot name the lock after the pod's Job",
            })),
        }
    }
}

/// The lease `source` names: the name given, else one after the `workload` that owns the pod,
/// found through the Kubernetes API (`client`). The Deployment comes back too when the name was
/// found through it.
pub async fn name_lease(
    source: &LeaseSource,
    client: Option<&kube::Client>,
    workload: Workload,
) -> Result<(LeaseName, Option<OwningDeployment>), CliError> {
    match (source, client) {
        (LeaseSource::Named(name), _) => Ok((name.clone(), None)),
        (LeaseSource::OwningWorkload { namespace, pod }, Some(client)) => {
            let (name, deployment) = match workload {
                Workload::Deployment => {
                    let deployment = k8s::owning_deployment(client, namespace, pod)
                        .await
                        .map_err(|e| workload.not_found(e))?;
                    let name = LeaseName::for_deployment(namespace, &deployment.name);
                    (name, Some(deployment))
                }
                Workload::Job => {
                    let owner = k8s::owning_job(client, namespace, pod)
                        .await
                        .map_err(|e| workload.not_found(e))?;
                    (LeaseName::new(owner.lease_name(namespace)), None)
                }
            };
            let name = name.map_err(|e| {
                CliError::Refused(format!(
                    "the {}'s name makes no lease name: {e}",
                    workload.words()
                ))
            })?;
            Ok((name, deployment))
        }
        (LeaseSource::OwningWorkload { .. }, None) => Err(CliError::Refused(format!(
            "no lease name: pass --lease-name (there is no Kubernetes API to find this pod's {})",
            workload.words()
        ))),
        (LeaseSource::Unknown, _) => Err(CliError::Refused(format!(
            "no lease name: pass --lease-name, or run in {} with POD_NAME and POD_NAMESPACE from the downward API",
            match workload {
                Workload::Deployment => "a pod of a Deployment",
                Workload::Job => "a Job's pod",
            }
        ))),
    }
}

/// How long each Redis call of an operator command may take.
pub(super) const CALL: Duration = Duration::from_secs(5);

/// The lease an operator command (`status`, `step-down`, `remove-keys`, without
/// `--kubernetes`) asks about, for a throwaway owner named `owner`: the name given, else the
/// Deployment of this pod, with the cluster found as `auto` finds it. Nothing connects yet.
pub async fn asked_lease(settings: &StatusSettings, owner: &str) -> Result<RedisLease, CliError> {
    let source = &settings.lease;
    let client = match source {
        LeaseSource::Named(_) => None,
        _ => connect(KubernetesMode::Auto).await?,
    };
    let (name, _) = name_lease(source, client.as_ref(), Workload::Deployment).await?;
    let owner = OwnerId::generate(owner).map_err(anyhow::Error::from)?;
    Ok(settings
        .redis
        .lease(name, owner)
        .map_err(anyhow::Error::from)?)
}

/// The Deployment that owns `pod`, when the lease was named by flag: it still scopes the leader
/// label and carries the events. A pod no Deployment owns keeps the label on itself only; an
/// API that does not tell is an error, as when the lease is named after the Deployment.
pub async fn deployment_of(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
) -> Result<Option<OwningDeployment>, CliError> {
    match k8s::owning_deployment(client, namespace, pod).await {
        Ok(d) => Ok(Some(d)),
        Err(err @ K8sError::NotADeployment { .. }) => {
            info!(error = %err, "no owning Deployment found; the leader label is kept on this pod only");
            Ok(None)
        }
        Err(err) => Err(CliError::Failed(anyhow::Error::new(err).context(
            "cannot find the Deployment that owns this pod, which scopes the leader label",
        ))),
    }
}

/// The contender's Kubernetes parts, when a cluster is at hand. A lease name that the Lease
/// mirror cannot take is the input's fault; nothing else refuses one.
pub fn publisher(
    client: Option<kube::Client>,
    common: &ContenderSettings,
    lease: &LeaseName,
    deployment: Option<OwningDeployment>,
) -> Result<Option<Publisher>, CliError> {
    let Some(client) = client else {
        return Ok(None);
    };
    // The label, the deletion cost, the step-down annotation and the Events find the
    // leader's pod by its identity.
    if let Some(pod) = common.pod.as_deref().filter(|&pod| pod != common.identity) {
        let rule = format!(
            "with the Kubernetes integration on, the identity is the pod's name ({pod}, POD_NAME), by which the leader label, the deletion cost and the step-down annotation find the leader's pod: leave it unset, or pass --kubernetes off"
        );
        return Err(CliError::value("identity", &common.identity, rule));
    }
    let kube = common.kube.clone();
    Publisher::new(
        client,
        &common.namespace,
        &common.identity,
        lease.as_str(),
        deployment,
        kube,
        common.timing,
    )
    .map(Some)
    .map_err(|e| match e {
        K8sError::NoMirrorName { ref lease, .. } => {
            CliError::value("lease-name", lease, e.to_string())
        }
        other => CliError::Failed(other.into()),
    })
}

/// Connects to the cluster as `mode` says; `--kubernetes on` without a cluster is a refusal.
pub async fn connect(mode: KubernetesMode) -> Result<Option<kube::Client>, CliError> {
    k8s::connect(mode).await.map_err(|e| match e {
        K8sError::NoCluster(_) => CliError::Refused(format!("--kubernetes on: {e}")),
        other => CliError::Failed(other.into()),
    })
}
