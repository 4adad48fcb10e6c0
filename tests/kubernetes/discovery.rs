//! Deployment discovery against the in-process fake API server: the lease is named after the
//! Deployment that owns the pod (through its ReplicaSet), with `get` calls only, and a pod no
//! Deployment owns is a clear error.

use crate::calls::rbac_of;
use crate::fixtures::{NS, deployment_with_pods, owner};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use leasehold::cli::LeaseSource;
use leasehold::cmd::lease::{Workload, name_lease};
use leasehold::k8s::{self, K8sError};
use leasehold::lease::LeaseName;
use testbed::fake_api::FakeApiServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_is_named_after_the_owning_deployment() {
    let api = FakeApiServer::start().await;
    let deployment = deployment_with_pods(&api, &["web-7d4f-a"]);
    let found = k8s::owning_deployment(&api.client(), NS, "web-7d4f-a")
        .await
        .unwrap();
    assert_eq!(found.name, "web");
    assert_eq!(found.selector, "app=web");
    assert_eq!(found.reference.uid, deployment.uid());
    assert_eq!(found.reference.kind.as_deref(), Some("Deployment"));

    let source = LeaseSource::OwningWorkload {
        namespace: NS.into(),
        pod: "web-7d4f-a".into(),
    };
    let (name, _) = name_lease(&source, Some(&api.client()), Workload::Deployment)
        .await
        .unwrap();
    assert_eq!(name, LeaseName::new("shop/web").unwrap());
    // Exactly the calls discovery needs: pod → replicaset → deployment, all `get`.
    let calls: Vec<(String, String, String)> = api.requests().iter().map(rbac_of).collect();
    let distinct: std::collections::BTreeSet<_> = calls.into_iter().collect();
    let want: std::collections::BTreeSet<_> = [
        ("", "pods"),
        ("apps", "replicasets"),
        ("apps", "deployments"),
    ]
    .iter()
    .map(|(g, r)| (g.to_string(), r.to_string(), "get".to_string()))
    .collect();
    assert_eq!(distinct, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_no_deployment_owns_is_a_clear_error() {
    let api = FakeApiServer::start().await;
    api.insert(&Pod {
        metadata: ObjectMeta {
            name: Some("db-0".into()),
            namespace: Some(NS.into()),
            owner_references: Some(vec![owner("StatefulSet", "apps/v1", "db", "u-1")]),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    });
    let err = k8s::owning_deployment(&api.client(), NS, "db-0")
        .await
        .unwrap_err();
    assert!(matches!(err, K8sError::NotADeployment { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "pod shop/db-0 is not owned by a Deployment (StatefulSet db); pass --lease-name"
    );
    let missing = k8s::owning_deployment(&api.client(), NS, "nope")
        .await
        .unwrap_err();
    assert!(
        missing
            .to_string()
            .starts_with("kubernetes API: get pod shop/nope:"),
        "{missing}"
    );
}
