//! Writes through kube's Api: create, get, list, replace and delete, a replace from a stale
//! resourceVersion refused as a conflict, a name that exists, generateName and dry run, and
//! finalizers holding a delete.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use testbed::fake_api::FakeApiServer;

use crate::fixtures::{api_code, config_map, holder, lease, server_with_lease, version_of};

#[tokio::test(flavor = "multi_thread")]
async fn a_config_map_goes_through_create_get_list_replace_and_delete() {
    let server = FakeApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());

    let created = api
        .create(
            &PostParams::default(),
            &config_map("settings", &[], &[("mode", "a")]),
        )
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some(), "create sets a uid");
    assert!(
        created.metadata.creation_timestamp.is_some(),
        "create sets creationTimestamp"
    );
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(created.metadata.namespace.as_deref(), Some("default"));

    let fetched = api.get("settings").await.unwrap();
    assert_eq!(fetched, created);
    let listed = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items, vec![created.clone()]);
    assert_eq!(
        listed.metadata.resource_version.as_deref(),
        created.metadata.resource_version.as_deref(),
        "the list is at the store's current version"
    );

    let mut changed = fetched.clone();
    changed.data = Some(BTreeMap::from([("mode".to_owned(), "b".to_owned())]));
    let replaced = api
        .replace("settings", &PostParams::default(), &changed)
        .await
        .unwrap();
    assert_eq!(replaced.data, changed.data);
    assert_eq!(
        replaced.metadata.uid, created.metadata.uid,
        "a replace keeps the uid"
    );
    assert!(version_of(&replaced) > version_of(&created));

    let deleted = api
        .delete("settings", &DeleteParams::default())
        .await
        .unwrap();
    assert!(deleted.is_left(), "the delete answers the deleted object");
    assert_eq!(api_code(api.get("settings").await), 404);
    assert_eq!(api.get_opt("settings").await.unwrap(), None);
    assert_eq!(
        api_code(api.delete("settings", &DeleteParams::default()).await),
        404
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn replacing_with_a_stale_resource_version_is_a_conflict() {
    let (_server, api, first) = server_with_lease("stale", "a").await;

    let mut newer = first.clone();
    newer.spec = Some(LeaseSpec {
        holder_identity: Some("b".to_owned()),
        ..LeaseSpec::default()
    });
    api.replace("stale", &PostParams::default(), &newer)
        .await
        .unwrap();

    let mut stale = first;
    stale.spec = Some(LeaseSpec {
        holder_identity: Some("c".to_owned()),
        ..LeaseSpec::default()
    });
    assert_eq!(
        api_code(api.replace("stale", &PostParams::default(), &stale).await),
        409
    );
    assert_eq!(
        holder(&api.get("stale").await.unwrap()),
        Some("b"),
        "the stale write changed nothing"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn creating_a_name_that_exists_is_already_exists() {
    let (_server, api, _) = server_with_lease("taken", "a").await;

    match api
        .create(&PostParams::default(), &lease("taken", "b"))
        .await
    {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 409);
            assert_eq!(status.reason, "AlreadyExists");
        }
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    assert_eq!(holder(&api.get("taken").await.unwrap()), Some("a"));
}

#[tokio::test(flavor = "multi_thread")]
async fn create_honours_generate_name_and_dry_run() {
    let server = FakeApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let mut generated = config_map("", &[], &[]);
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("gen-".to_owned());

    let first = api
        .create(&PostParams::default(), &generated)
        .await
        .unwrap();
    let second = api
        .create(&PostParams::default(), &generated)
        .await
        .unwrap();
    let (first, second) = (first.metadata.name.unwrap(), second.metadata.name.unwrap());
    assert!(
        first.starts_with("gen-") && first.len() > "gen-".len(),
        "{first}"
    );
    assert_ne!(first, second);

    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    api.create(&dry, &config_map("dry", &[], &[]))
        .await
        .unwrap();
    assert_eq!(
        api.get_opt("dry").await.unwrap(),
        None,
        "a dry-run create stores nothing"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn finalizers_hold_a_delete_until_the_last_one_is_removed() {
    let server = FakeApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let mut held = config_map("held", &[], &[]);
    held.metadata.finalizers = Some(vec!["example.com/hold".to_owned()]);
    api.create(&PostParams::default(), &held).await.unwrap();

    api.delete("held", &DeleteParams::default()).await.unwrap();
    let terminating = api.get("held").await.unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());

    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "finalizers": null } })),
    )
    .await
    .unwrap();
    assert_eq!(
        api.get_opt("held").await.unwrap(),
        None,
        "removing the last finalizer deletes it"
    );
}
