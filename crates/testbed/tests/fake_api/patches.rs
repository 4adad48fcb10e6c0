//! Patches as kube sends them: JSON merge patch, server-side apply, JSON patch, a patch carrying a
//! stale resourceVersion, and writes to the status subresource against writes to the object.

use axum::http;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use testbed::fake_api::{FakeApiServer, Recorded};

use crate::fixtures::{api_code, holder, pod, raw_code, server_with_lease, version_of};

/// The last PATCH request the server got.
fn last_patch(server: &FakeApiServer) -> Recorded {
    server
        .requests()
        .into_iter()
        .rfind(|r| r.method == "PATCH")
        .expect("the server got a PATCH")
}

#[tokio::test(flavor = "multi_thread")]
async fn merge_patch_changes_the_object_and_bumps_the_resource_version() {
    let (server, api, created) = server_with_lease("merged", "a").await;

    let patch =
        json!({ "metadata": { "labels": { "team": "x" } }, "spec": { "holderIdentity": "b" } });
    let patched = api
        .patch("merged", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(holder(&patched), Some("b"));
    assert_eq!(patched.metadata.labels.as_ref().unwrap()["team"], "x");
    assert!(version_of(&patched) > version_of(&created));
    assert_eq!(
        patched.metadata.generation,
        Some(2),
        "a spec change bumps the generation"
    );

    let again = api
        .patch("merged", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(
        version_of(&again),
        version_of(&patched),
        "a no-op patch writes nothing"
    );

    let request = last_patch(&server);
    assert_eq!(
        request.path,
        "/apis/coordination.k8s.io/v1/namespaces/default/leases/merged"
    );
    assert_eq!(
        request.content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    assert_eq!(request.body, Some(patch));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_patch_carrying_a_stale_resource_version_is_a_conflict() {
    let (_server, api, created) = server_with_lease("guarded", "a").await;
    let seen = created.metadata.resource_version.clone().unwrap();
    api.patch(
        "guarded",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "holderIdentity": "b" } })),
    )
    .await
    .unwrap();

    let guarded =
        json!({ "metadata": { "resourceVersion": seen }, "spec": { "holderIdentity": "c" } });
    let result = api
        .patch("guarded", &PatchParams::default(), &Patch::Merge(&guarded))
        .await;
    assert_eq!(api_code(result), 409);
    assert_eq!(holder(&api.get("guarded").await.unwrap()), Some("b"));
}

#[tokio::test(flavor = "multi_thread")]
async fn server_side_apply_creates_then_updates_and_requires_a_field_manager() {
    let server = FakeApiServer::start().await;
    let client = server.client();
    let api: Api<Lease> = Api::default_namespaced(client.clone());
    let apply = |holder: &str| {
        json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": { "name": "applied" },
            "spec": { "holderIdentity": holder },
        })
    };

    let created = api
        .patch(
            "applied",
            &PatchParams::apply("test"),
            &Patch::Apply(apply("a")),
        )
        .await
        .unwrap();
    assert_eq!(
        holder(&created),
        Some("a"),
        "apply creates an absent object"
    );
    let updated = api
        .patch(
            "applied",
            &PatchParams::apply("test"),
            &Patch::Apply(apply("b")),
        )
        .await
        .unwrap();
    assert_eq!(holder(&updated), Some("b"));
    assert!(version_of(&updated) > version_of(&created));
    assert_eq!(updated.metadata.uid, created.metadata.uid);

    let request = last_patch(&server);
    assert_eq!(
        request.content_type.as_deref(),
        Some("application/apply-patch+yaml")
    );
    assert_eq!(request.query_param("fieldManager").as_deref(), Some("test"));
    assert_eq!(request.body, Some(apply("b")));

    // kube refuses an apply without a field manager before sending it; the server does too.
    let unmanaged =
        http::Request::patch("/apis/coordination.k8s.io/v1/namespaces/default/leases/applied")
            .header(http::header::CONTENT_TYPE, "application/apply-patch+yaml")
            .body(b"spec:\n  holderIdentity: c\n".to_vec())
            .unwrap();
    assert_eq!(raw_code(&client, unmanaged).await, 422);
    assert_eq!(holder(&api.get("applied").await.unwrap()), Some("b"));
}

#[tokio::test(flavor = "multi_thread")]
async fn json_patch_applies_operations_and_a_failed_test_is_invalid() {
    let (_server, api, _) = server_with_lease("ops", "a").await;

    let swap: json_patch::Patch = serde_json::from_value(json!([
        { "op": "test", "path": "/spec/holderIdentity", "value": "a" },
        { "op": "replace", "path": "/spec/holderIdentity", "value": "b" },
    ]))
    .unwrap();
    let patched = api
        .patch(
            "ops",
            &PatchParams::default(),
            &Patch::Json::<()>(swap.clone()),
        )
        .await
        .unwrap();
    assert_eq!(holder(&patched), Some("b"));

    let result = api
        .patch("ops", &PatchParams::default(), &Patch::Json::<()>(swap))
        .await;
    assert_eq!(api_code(result), 422, "the test operation no longer holds");
    assert_eq!(holder(&api.get("ops").await.unwrap()), Some("b"));
}

#[tokio::test(flavor = "multi_thread")]
async fn status_writes_change_only_the_status_and_object_writes_keep_it() {
    let server = FakeApiServer::start().await;
    let api: Api<Pod> = Api::default_namespaced(server.client());
    api.create(&PostParams::default(), &pod("worker"))
        .await
        .unwrap();

    let status = json!({
        "metadata": { "labels": { "ignored": "yes" } },
        "status": { "phase": "Running" },
    });
    let patched = api
        .patch_status("worker", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    assert_eq!(
        patched.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Running")
    );
    assert!(
        !patched.metadata.labels.unwrap().contains_key("ignored"),
        "a status write changes only the status"
    );

    let object =
        json!({ "metadata": { "labels": { "kept": "yes" } }, "status": { "phase": "Failed" } });
    let patched = api
        .patch("worker", &PatchParams::default(), &Patch::Merge(&object))
        .await
        .unwrap();
    assert_eq!(patched.metadata.labels.unwrap()["kept"], "yes");
    assert_eq!(
        patched.status.and_then(|s| s.phase).as_deref(),
        Some("Running"),
        "a pod's status changes only through /status"
    );
}
