//! Kinds outside the core group and the events one, each under its API group's path: apps/v1
//! Deployments (with a strategic merge patch) and ReplicaSets, beside core/v1 Events.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, ReplicaSet};
use k8s_openapi::api::core::v1::Event as CoreEvent;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use testbed::fake_api::FakeApiServer;

use crate::fixtures::meta;

#[tokio::test(flavor = "multi_thread")]
async fn apps_resources_and_core_events_use_their_own_group_paths() {
    let server = FakeApiServer::start().await;
    let client = server.client();
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let deployment = Deployment {
        metadata: meta("web", &[("app", "web")]),
        spec: DeploymentSpec {
            replicas: Some(1),
            ..DeploymentSpec::default()
        },
        ..Deployment::default()
    };
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let scaled = deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Strategic(json!({ "spec": { "replicas": 3 } })),
        )
        .await
        .unwrap();
    assert_eq!(scaled.spec.replicas, Some(3));
    assert_eq!(scaled.metadata.generation, Some(2));

    server.insert(&ReplicaSet {
        metadata: meta("web-1", &[("app", "web")]),
        ..ReplicaSet::default()
    });
    let replica_sets: Api<ReplicaSet> = Api::default_namespaced(client.clone());
    let listed = replica_sets
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);

    let core_events: Api<CoreEvent> = Api::default_namespaced(client);
    let core_event = CoreEvent {
        metadata: meta("worker.1", &[]),
        reason: Some("Elected".to_owned()),
        ..CoreEvent::default()
    };
    core_events
        .create(&PostParams::default(), &core_event)
        .await
        .unwrap();
    assert_eq!(server.list::<CoreEvent>("default").len(), 1);

    let paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(
        paths,
        [
            "/apis/apps/v1/namespaces/default/deployments",
            "/apis/apps/v1/namespaces/default/deployments/web",
            "/apis/apps/v1/namespaces/default/replicasets",
            "/api/v1/namespaces/default/events",
        ]
    );
}
