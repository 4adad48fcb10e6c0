//! Watches through kube's watcher and raw watch calls: changes after the initial list, streaming
//! lists, bookmarks and the watch's timeout, 410 Gone for a forgotten resourceVersion, and
//! metadata-only objects.

use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, DeleteParams, PartialObjectMeta, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::runtime::watcher;
use serde_json::json;
use testbed::fake_api::{FakeApiServer, HISTORY_LIMIT};
use tokio::sync::mpsc;

use crate::fixtures::{WAIT, config_map, holder, lease, server_with_lease};

/// Runs a kube watcher in the background and hands its events over a channel.
fn spawn_watcher<K>(
    api: Api<K>,
    config: watcher::Config,
) -> mpsc::UnboundedReceiver<watcher::Event<K>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut events = watcher(api, config).boxed();
        while let Some(event) = events.next().await {
            let event = event.unwrap_or_else(|err| panic!("the watcher failed: {err}"));
            if tx.send(event).is_err() {
                return;
            }
        }
    });
    rx
}

async fn next_event<K>(
    rx: &mut mpsc::UnboundedReceiver<watcher::Event<K>>,
    what: &str,
) -> watcher::Event<K> {
    match tokio::time::timeout(WAIT, rx.recv()).await {
        Ok(Some(event)) => event,
        Ok(None) => panic!("the watcher stopped while waiting for {what}"),
        Err(_) => panic!("timed out after {WAIT:?} waiting for {what}"),
    }
}

/// Skips the initial list and returns once the watcher has finished it.
async fn until_init_done<K>(rx: &mut mpsc::UnboundedReceiver<watcher::Event<K>>) -> Vec<K> {
    let mut initial = Vec::new();
    loop {
        match next_event(rx, "the end of the initial list").await {
            watcher::Event::InitDone => return initial,
            watcher::Event::InitApply(object) => initial.push(object),
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_watcher_sees_objects_added_modified_and_deleted_after_it_started() {
    let (server, api, _) = server_with_lease("before", "a").await;
    let mut events = spawn_watcher(api.clone(), watcher::Config::default());
    let initial = until_init_done(&mut events).await;
    assert_eq!(
        initial.len(),
        1,
        "the initial list holds the existing lease"
    );

    api.create(&PostParams::default(), &lease("watched", "a"))
        .await
        .unwrap();
    api.patch(
        "watched",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "holderIdentity": "b" } })),
    )
    .await
    .unwrap();
    api.delete("watched", &DeleteParams::default())
        .await
        .unwrap();

    match next_event(&mut events, "the added lease").await {
        watcher::Event::Apply(lease) => assert_eq!(holder(&lease), Some("a")),
        other => panic!("expected the added lease, got {other:?}"),
    }
    match next_event(&mut events, "the modified lease").await {
        watcher::Event::Apply(lease) => assert_eq!(holder(&lease), Some("b")),
        other => panic!("expected the modified lease, got {other:?}"),
    }
    match next_event(&mut events, "the deleted lease").await {
        watcher::Event::Delete(lease) => {
            assert_eq!(lease.metadata.name.as_deref(), Some("watched"))
        }
        other => panic!("expected the deleted lease, got {other:?}"),
    }

    let watch = server
        .requests()
        .into_iter()
        .find(|r| r.query_param("watch").is_some())
        .expect("the watcher sent a watch request");
    assert_eq!(
        watch.query_param("allowWatchBookmarks").as_deref(),
        Some("true")
    );
    assert!(
        watch.query_param("resourceVersion").is_some(),
        "it resumes from the list's version"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_streaming_list_watcher_gets_current_objects_then_changes() {
    let server = FakeApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    server.insert(&config_map("existing", &[], &[]));
    let mut events = spawn_watcher(api.clone(), watcher::Config::default().streaming_lists());

    let initial = until_init_done(&mut events).await;
    let names: Vec<_> = initial
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(names, ["existing"]);
    server.insert(&config_map("later", &[], &[]));
    match next_event(&mut events, "the later config map").await {
        watcher::Event::Apply(c) => assert_eq!(c.metadata.name.as_deref(), Some("later")),
        other => panic!("expected the later config map, got {other:?}"),
    }
    let first = server.requests().into_iter().next().unwrap();
    assert_eq!(
        first.query_param("sendInitialEvents").as_deref(),
        Some("true")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_watch_with_bookmarks_gets_them_and_ends_at_its_timeout() {
    let (_server, api, created) = server_with_lease("marked", "a").await;
    let params = WatchParams::default().timeout(3);
    let version = created.metadata.resource_version.unwrap();

    let stream = api.watch(&params, &version).await.unwrap();
    let events: Vec<_> = tokio::time::timeout(WAIT, stream.try_collect::<Vec<_>>())
        .await
        .expect("the watch ends at its timeout")
        .unwrap();
    assert!(
        matches!(events.first(), Some(WatchEvent::Bookmark(b)) if b.metadata.resource_version == version),
        "a bookmark at the current version comes first: {events:?}"
    );
    assert!(
        events.len() >= 2,
        "bookmarks keep coming every second: {events:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_watch_from_a_forgotten_resource_version_gets_410_gone() {
    let server = FakeApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let first = server.insert(&config_map("churn", &[], &[("n", "0")]));
    // A watch from `first` needs the changes after it: the history forgets the first of them
    // once it holds HISTORY_LIMIT newer ones.
    for n in 1..=HISTORY_LIMIT + 1 {
        server.insert(&config_map("churn", &[], &[("n", &n.to_string())]));
    }

    let params = WatchParams::default().timeout(5);
    let version = first.metadata.resource_version.unwrap();
    let mut stream = api.watch(&params, &version).await.unwrap().boxed();
    match tokio::time::timeout(WAIT, stream.next()).await {
        Ok(Some(Ok(WatchEvent::Error(status)))) => {
            assert_eq!(status.code, 410);
            assert_eq!(status.reason, "Expired");
        }
        other => panic!("expected a 410 Gone event, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_metadata_watcher_sees_partial_objects() {
    let server = FakeApiServer::start().await;
    // kube 5 asks for PartialObjectMetadata whenever the Api is over PartialObjectMeta.
    let api: Api<PartialObjectMeta<ConfigMap>> = Api::default_namespaced(server.client());
    let mut events = spawn_watcher(api, watcher::Config::default());
    until_init_done(&mut events).await;

    server.insert(&config_map("slim", &[("app", "web")], &[("big", "data")]));
    match next_event(&mut events, "the inserted config map's metadata").await {
        watcher::Event::Apply(partial) => {
            assert_eq!(partial.metadata.name.as_deref(), Some("slim"));
            let kind = partial.types.map(|t| t.kind);
            assert_eq!(
                kind.as_deref(),
                Some("PartialObjectMetadata"),
                "the server sent metadata only"
            );
            assert_eq!(partial.metadata.labels.unwrap()["app"], "web");
        }
        other => panic!("expected the config map's metadata, got {other:?}"),
    }
}
