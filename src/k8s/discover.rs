//! Finds the Deployment that owns this pod (pod → ReplicaSet → Deployment): the lease is named
//! after it, the leader label is kept on its pods, and events are recorded on it.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::core::{NamespaceResourceScope, Selector};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::K8sError;

/// The Deployment of this pod.
#[derive(Debug, Clone)]
pub struct OwningDeployment {
    /// Its name.
    pub name: String,
    /// Its pod selector, as a label selector string.
    pub selector: String,
    /// A reference to it, for events.
    pub reference: ObjectReference,
    /// Its labels (a chart's: `app.kubernetes.io/instance` and the others), which the Lease
    /// mirror carries too.
    pub labels: BTreeMap<String, String>,
    /// An owner reference to it, which the Lease mirror carries so that deleting the
    /// Deployment (`helm uninstall`) has the garbage collector delete the mirror; `None` when
    /// the API gave the Deployment no uid.
    pub owner: Option<OwnerReference>,
}

pub(super) fn controller_of<'a>(
    owners: &'a [OwnerReference],
    kind: &str,
) -> Option<&'a OwnerReference> {
    owners
        .iter()
        .find(|o| o.kind == kind && o.controller == Some(true))
}

/// Reads the `K` named `name` in `namespace`; an error says what was read (`get pod ns/name`).
pub(super) async fn get<K>(client: &Client, namespace: &str, name: &str) -> Result<K, K8sError>
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    let kind = K::kind(&K::DynamicType::default()).to_lowercase();
    let api = Api::<K>::namespaced(client.clone(), namespace);
    super::call(|| format!("get {kind} {namespace}/{name}"), api.get(name)).await
}

/// Follows `pod`'s controller owners up to its Deployment.
pub async fn owning_deployment(
    client: &Client,
    namespace: &str,
    pod: &str,
) -> Result<OwningDeployment, K8sError> {
    let this: Pod = get(client, namespace, pod).await?;
    let not_a_deployment = |owners: String| K8sError::NotADeployment {
        pod: format!("{namespace}/{pod}"),
        owners,
    };
    let describe = |owners: &[OwnerReference]| {
        if owners.is_empty() {
            "no owner".to_owned()
        } else {
            owners
                .iter()
                .map(|o| format!("{} {}", o.kind, o.name))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    let rs_ref = controller_of(this.owner_references(), "ReplicaSet")
        .ok_or_else(|| not_a_deployment(describe(this.owner_references())))?;
    let rs: ReplicaSet = get(client, namespace, &rs_ref.name).await?;
    let deploy_ref = controller_of(rs.owner_references(), "Deployment").ok_or_else(|| {
        let owners = describe(rs.owner_references());
        not_a_deployment(format!("ReplicaSet {} owned by {owners}", rs_ref.name))
    })?;
    let deployment: Deployment = get(client, namespace, &deploy_ref.name).await?;
    let selector = Selector::try_from(deployment.spec.selector.clone())
        .ok()
        .map(|s| s.to_string())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            not_a_deployment(format!(
                "Deployment {} without a usable pod selector",
                deploy_ref.name
            ))
        })?;
    // Not the controller (the Deployment controller does not manage Leases), and no
    // blockOwnerDeletion, which would need `update` on deployments/finalizers.
    let owner = deployment.owner_ref(&());
    Ok(OwningDeployment {
        name: deployment.name_any(),
        selector,
        reference: deployment.object_ref(&()),
        labels: deployment.labels().clone(),
        owner,
    })
}
