//! Naming the lease: from the flag, or after the Deployment that owns this pod.

use tracing::info;

use crate::cli::{CliError, LeaseSource};
use crate::k8s::{self, K8sError, OwningDeployment};
use crate::lease::LeaseName;

/// Finds the lease name and, when there is a cluster, the owning Deployment. `pod` is this
/// pod (`$POD_NAME`) in `namespace`, when running in one.
pub async fn resolve_lease(
    source: &LeaseSource,
    client: Option<&kube::Client>,
    namespace: &str,
    pod: Option<&str>,
) -> Result<(LeaseName, Option<OwningDeployment>), CliError> {
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
                    K8sError::NotADeployment { .. } => CliError::Refused(e.to_string()),
                    other => CliError::Failed(
                        anyhow::Error::new(other).context("cannot name the lease after the Deployment"),
                    ),
                })?;
            let name = LeaseName::for_deployment(namespace, &deployment.name).map_err(|e| {
                CliError::Refused(format!("the Deployment's name makes no lease name: {e}"))
            })?;
            Ok((name, Some(deployment)))
        }
        (LeaseSource::OwningDeployment { .. }, None) => Err(CliError::Refused(
            "no lease name: pass --lease-name (there is no Kubernetes API to find this pod's Deployment)".into(),
        )),
        (LeaseSource::Unknown, _) => Err(CliError::Refused(
            "no lease name: pass --lease-name, or run in a pod of a Deployment with POD_NAME and POD_NAMESPACE from the downward API".into(),
        )),
    }
}

/// Connects to the cluster as `mode` says; `--kubernetes on` without a cluster is a refusal.
pub async fn connect(mode: k8s::KubernetesMode) -> Result<Option<kube::Client>, CliError> {
    k8s::connect(mode).await.map_err(|e| match e {
        K8sError::NoCluster(_) => CliError::Refused(format!("--kubernetes on: {e}")),
        other => CliError::Failed(other.into()),
    })
}
