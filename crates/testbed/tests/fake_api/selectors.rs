//! Selectors as the API server reads them: label selectors and field selectors on lists, and a
//! watch with a label selector that sees an object enter and leave its selection.

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use testbed::fake_api::FakeApiServer;

use crate::fixtures::{WAIT, api_code, config_map};

#[tokio::test(flavor = "multi_thread")]
async fn label_selectors_filter_lists_like_the_api_server() {
    let server = FakeApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    for (name, labels) in [
        ("web-prod", &[("app", "web"), ("env", "prod")][..]),
        ("web-dev", &[("app", "web"), ("env", "dev")][..]),
        ("db-prod", &[("app", "db"), ("env", "prod")][..]),
        ("bare", &[][..]),
    ] {
        api.create(&PostParams::default(), &config_map(name, labels, &[]))
            .await
            .unwrap();
    }

    let cases: &[(&str, &[&str])] = &[
        ("app=web", &["web-dev", "web-prod"]),
        ("app==web,env=prod", &["web-prod"]),
        ("env!=prod", &["bare", "web-dev"]),
        ("app", &["db-prod", "web-dev", "web-prod"]),
        ("!app", &["bare"]),
        ("env in (dev,staging)", &["web-dev"]),
        ("env notin (dev),app", &["db-prod", "web-prod"]),
        ("app in (web, db),env in (prod)", &["db-prod", "web-prod"]),
    ];
    for (selector, expected) in cases {
        let listed = api
            .list(&ListParams::default().labels(selector))
            .await
            .unwrap();
        let names: Vec<String> = listed
            .items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .collect();
        assert_eq!(names, *expected, "labelSelector {selector}");
    }
    let bad = api.list(&ListParams::default().labels("app in (web")).await;
    assert_eq!(api_code(bad), 400, "a malformed selector is a bad request");
}

#[tokio::test(flavor = "multi_thread")]
async fn field_selectors_pick_by_name_and_namespace_across_namespaces() {
    let server = FakeApiServer::start().await;
    let mut elsewhere = config_map("shared", &[], &[]);
    elsewhere.metadata.namespace = Some("other".to_owned());
    server.insert(&elsewhere);
    server.insert(&config_map("shared", &[], &[]));
    server.insert(&config_map("mine", &[], &[]));
    let all: Api<ConfigMap> = Api::all(server.client());

    let names_in = |list: kube::core::ObjectList<ConfigMap>| -> Vec<(String, String)> {
        list.items
            .into_iter()
            .map(|c| (c.metadata.namespace.unwrap(), c.metadata.name.unwrap()))
            .collect()
    };
    let by_name = all
        .list(&ListParams::default().fields("metadata.name=shared"))
        .await
        .unwrap();
    assert_eq!(
        names_in(by_name),
        vec![
            ("default".to_owned(), "shared".to_owned()),
            ("other".to_owned(), "shared".to_owned())
        ]
    );
    let by_namespace = all
        .list(&ListParams::default().fields("metadata.namespace=other"))
        .await
        .unwrap();
    assert_eq!(
        names_in(by_namespace),
        vec![("other".to_owned(), "shared".to_owned())]
    );
    assert_eq!(
        server.requests().last().map(|r| r.path.as_str()),
        Some("/api/v1/configmaps"),
        "Api::all lists across namespaces"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_selector_watch_sees_objects_enter_and_leave_its_selection() {
    let server = FakeApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let listed = api.list(&ListParams::default()).await.unwrap();
    let version = listed.metadata.resource_version.unwrap();
    let params = WatchParams::default().labels("app=web").timeout(5);
    let mut stream = api.watch(&params, &version).await.unwrap().boxed();

    let relabel = |app: &'static str| {
        let api = api.clone();
        async move {
            let patch = json!({ "metadata": { "labels": { "app": app } } });
            api.patch("moving", &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap();
        }
    };
    api.create(
        &PostParams::default(),
        &config_map("moving", &[("app", "db")], &[]),
    )
    .await
    .unwrap();
    relabel("web").await;
    relabel("db").await;

    let mut seen = Vec::new();
    while seen.len() < 2 {
        let event = tokio::time::timeout(WAIT, stream.next())
            .await
            .expect("the watch delivers the selection changes")
            .expect("the watch is still open")
            .unwrap();
        match event {
            WatchEvent::Added(c) => seen.push(("ADDED", c.metadata.name)),
            WatchEvent::Modified(c) => seen.push(("MODIFIED", c.metadata.name)),
            WatchEvent::Deleted(c) => seen.push(("DELETED", c.metadata.name)),
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(status) => panic!("the watch failed: {status:?}"),
        }
    }
    let moving = Some("moving".to_owned());
    assert_eq!(seen, [("ADDED", moving.clone()), ("DELETED", moving)]);
}
